use std::rc::Rc;

use scriptling_plugin::plugin_class;

#[plugin_class]
struct Shared {
    value: Rc<i64>,
}

fn main() {}
