use scriptling_plugin::plugin_fn;

#[plugin_fn]
fn greet(#[arg(defualt = "World")] name: String) -> String {
    name
}

fn main() {}
