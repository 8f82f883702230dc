use scriptling_plugin::plugin_fn;

struct Point {
    x: i64,
}

#[plugin_fn]
fn origin() -> Point {
    Point { x: 0 }
}

fn main() {
    let _ = origin().x;
    let _ = scriptling_plugin::Plugin::new("p", "1", "").function::<origin>();
}
