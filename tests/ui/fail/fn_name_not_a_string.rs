use scriptling_plugin::{Plugin, plugin_fn};

#[plugin_fn(name = hello)]
fn greet(name: String) -> String {
    name
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<greet>();
}
