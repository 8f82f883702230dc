use scriptling_plugin::{FromValue, IntoValue, Plugin, plugin_fn};

#[derive(FromValue, IntoValue)]
struct Page<T> {
    items: Vec<T>,
}

#[plugin_fn]
fn echo(value: Page<i64>) -> Page<i64> {
    value
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<echo>();
}
