use scriptling_plugin::{Plugin, plugin_fn};

struct Point {
    x: i64,
}

#[plugin_fn]
fn norm(point: Point) -> i64 {
    point.x
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<norm>();
}
