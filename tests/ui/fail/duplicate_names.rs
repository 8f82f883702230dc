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

    fn get(&self) -> i64 {
        self.value
    }

    #[plugin_fn(name = "get")]
    fn get_again(&self) -> i64 {
        self.value
    }
}

fn main() {}
