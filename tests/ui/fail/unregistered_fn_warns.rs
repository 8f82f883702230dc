#![deny(dead_code)]

use scriptling_plugin::{Plugin, plugin_fn};

#[plugin_fn]
fn greet(name: String) -> String {
    name
}

#[plugin_fn]
fn forgotten(name: String) -> String {
    name
}

fn main() {
    let _ = Plugin::new("p", "1", "").function::<greet>();
}
