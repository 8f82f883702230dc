use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Counter {
    value: i64,
}

impl Counter {
    fn get(&self) -> i64 {
        self.value
    }
}

fn main() {
    let _ = Counter { value: 1 }.get();
    let _ = Plugin::new("p", "1", "").class::<Counter>();
}
