use scriptling_plugin::{Plugin, plugin_fn};

#[plugin_fn]
fn shift(x: f64, #[arg(default = 0)] dy: f64) -> f64 {
    x + dy
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<shift>();
}
