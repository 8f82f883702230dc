use scriptling_plugin::plugin_fn;

#[plugin_fn]
struct Greeter;

fn main() {}
