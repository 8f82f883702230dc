use scriptling_plugin::{Plugin, plugin_class, plugin_fn};

#[plugin_fn]
struct Greeter;

#[plugin_class]
impl Greeter {
    #[constructor]
    fn new() -> Self {
        Greeter
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Greeter>();
}
