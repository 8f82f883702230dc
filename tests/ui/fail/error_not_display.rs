use scriptling_plugin::{Plugin, plugin_fn};

struct Opaque;

#[plugin_fn]
fn fails() -> Result<i64, Opaque> {
    Err(Opaque)
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<fails>();
}
