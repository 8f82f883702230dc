use scriptling_plugin::plugin_class;

#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    fn get(&self) -> i64 {
        self.value
    }
}

fn main() {}
