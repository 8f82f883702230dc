use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Counter {
    value: i64,
}

trait Count {
    fn count(&self) -> i64;
}

#[plugin_class]
impl Count for Counter {
    fn count(&self) -> i64 {
        self.value
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Counter>();
}
