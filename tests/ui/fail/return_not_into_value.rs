use scriptling_plugin::{Plugin, plugin_fn};

struct Point {
    x: i64,
}

#[plugin_fn]
fn origin() -> Point {
    Point { x: 0 }
}

fn main() {
    let _ = origin().x;
    let _ = Plugin::new("demo", "1.0.0", "").function::<origin>();
}
