use scriptling_plugin::{Plugin, plugin_fn};

#[plugin_fn]
fn show<T: std::fmt::Display>(value: T) -> String {
    value.to_string()
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<show>();
}
