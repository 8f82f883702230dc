use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new(start: i64) -> Self {
        Counter { value: start }
    }

    #[property]
    #[plugin_fn(name = "current")]
    fn value(&self) -> i64 {
        self.value
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Counter>();
}
