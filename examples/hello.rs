//! The hello plugin: the same surface as upstream's hello-go and hello-c
//! examples, so the SDKs can be compared side by side.
//!
//! ```text
//! cargo run --example hello        # then speak JSON-RPC on stdin, or:
//! scriptling --plugin-dir target/debug/examples -c 'import plugin.hello; print(plugin.hello.greet("Ada"))'
//! ```

use scriptling_plugin::{Plugin, ServeError, plugin_fn};

/// Returns a greeting for `name`.
#[plugin_fn]
fn greet(name: String) -> String {
    format!("Hello, {name}")
}

/// Returns a build label for `name`.
#[plugin_fn]
fn label(name: String) -> String {
    format!("built:{name}")
}

fn main() -> Result<(), ServeError> {
    Plugin::new("hello", "1.0.0", "Example Rust plugin")
        .function::<greet>()
        .function::<label>()
        .constant("default_name", "World")
        .run()
}
