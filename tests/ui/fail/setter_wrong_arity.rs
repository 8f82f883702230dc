use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new() -> Self {
        Counter { value: 0 }
    }

    #[property(settable)]
    fn value(&self) -> i64 {
        self.value
    }

    fn set_value(&mut self, value: i64, extra: i64) {
        self.value = value + extra;
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Counter>();
}
