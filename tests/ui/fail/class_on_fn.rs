use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
fn counter() -> i64 {
    0
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<counter>();
}
