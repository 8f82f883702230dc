use scriptling_plugin::plugin_fn;

struct Point {
    x: i64,
}

#[plugin_fn]
fn norm(point: Point) -> i64 {
    point.x
}

fn main() {
    let _ = scriptling_plugin::Plugin::new("p", "1", "").function::<norm>();
}
