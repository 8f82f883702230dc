use scriptling_plugin::plugin_class;

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

    #[property]
    fn scaled(&self, factor: i64) -> i64 {
        self.value * factor
    }
}

fn main() {}
