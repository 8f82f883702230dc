use scriptling_plugin::plugin_fn;

struct Greeter;

impl Greeter {
    #[plugin_fn]
    fn greet(&self, name: String) -> String {
        name
    }
}

fn main() {}
