use scriptling_plugin::plugin_fn;

#[plugin_fn]
fn show<T: std::fmt::Display>(value: T) -> String {
    value.to_string()
}

fn main() {}
