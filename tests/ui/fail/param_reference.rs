use scriptling_plugin::plugin_fn;

#[plugin_fn]
fn greet(name: &str) -> String {
    format!("Hello, {name}")
}

fn main() {}
