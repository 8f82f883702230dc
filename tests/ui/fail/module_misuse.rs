use scriptling_plugin::plugin_module;

#[plugin_module(name = "textkit")]
mod textkit {
    #[scriptling_plugin::plugin_module]
    mod inner {}
}

#[plugin_module]
fn not_a_module() {}

fn main() {}
