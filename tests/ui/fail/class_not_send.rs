use std::rc::Rc;

use scriptling_plugin::{Plugin, plugin_class};

#[plugin_class]
struct Shared {
    value: Rc<i64>,
}

#[plugin_class]
impl Shared {
    #[constructor]
    fn new(value: i64) -> Self {
        Shared { value: Rc::new(value) }
    }

    fn get(&self) -> i64 {
        *self.value
    }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").class::<Shared>();
}
