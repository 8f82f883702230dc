use scriptling_plugin::{FromValue, IntoValue, Plugin, plugin_fn};

#[derive(FromValue, IntoValue)]
struct Span(#[scriptling(rename = "start")] i64, i64);

#[plugin_fn]
fn echo(value: Span) -> Span {
    value
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<echo>();
}
