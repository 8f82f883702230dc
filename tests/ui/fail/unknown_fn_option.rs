use scriptling_plugin::plugin_fn;

#[plugin_fn(nmae = "hello")]
fn greet(name: String) -> String {
    name
}

fn main() {}
