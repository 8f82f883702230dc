use std::borrow::Cow;

use scriptling_plugin::{Plugin, plugin_fn};

#[plugin_fn]
fn greet(name: Cow<'static, str>) -> String {
    format!("Hello, {name}")
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<greet>();
}
