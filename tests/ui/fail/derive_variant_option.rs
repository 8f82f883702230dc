use scriptling_plugin::{FromValue, IntoValue, Plugin, plugin_fn};

#[derive(FromValue, IntoValue)]
enum Color {
    #[scriptling(default)]
    Red,
    Green,
}

#[plugin_fn]
fn echo(value: Color) -> Color {
    value
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<echo>();
}
