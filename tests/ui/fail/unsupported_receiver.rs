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

    fn boxed(self: Box<Self>) -> i64 {
        self.value
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Counter>();
}
