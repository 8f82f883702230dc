use scriptling_plugin::{FromValue, IntoValue, Plugin, plugin_fn};

#[derive(FromValue, IntoValue)]
#[scriptling(rename_all = "camel")]
struct Options {
    max_hits: i64,
}

#[plugin_fn]
fn echo(value: Options) -> Options {
    value
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<echo>();
}
