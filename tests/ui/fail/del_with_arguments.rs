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

    #[del]
    fn close(&mut self, reason: String) {
        let _ = reason;
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Counter>();
}
