use scriptling_plugin::plugin_class;

#[plugin_class]
struct Holder<T> {
    value: T,
}

fn main() {}
