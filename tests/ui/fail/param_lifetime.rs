use std::borrow::Cow;

use scriptling_plugin::plugin_fn;

#[plugin_fn]
fn greet(name: Cow<'static, str>) -> String {
    format!("Hello, {name}")
}

fn main() {}
