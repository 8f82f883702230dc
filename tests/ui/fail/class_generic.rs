use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Holder<T> {
    value: T,
}

#[plugin_class]
impl<T> Holder<T> {
    #[constructor]
    fn new(value: T) -> Self {
        Holder { value }
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Holder<i64>>();
}
