use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new(value: i64) -> i64 {
        value
    }

    fn get(&self) -> i64 {
        self.value
    }
}

fn main() {
    let _ = Plugin::new("p", "1", "").class::<Counter>();
}
