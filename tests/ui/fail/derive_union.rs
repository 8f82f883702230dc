use scriptling_plugin::{FromValue, IntoValue, Plugin, plugin_fn};

#[derive(FromValue, IntoValue)]
union Bits {
    int: i64,
    float: f64,
}

#[plugin_fn]
fn echo(value: Bits) -> Bits {
    value
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<echo>();
}
