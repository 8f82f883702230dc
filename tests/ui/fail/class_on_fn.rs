use scriptling_plugin::plugin_class;

#[plugin_class]
fn counter() -> i64 {
    0
}

fn main() {}
