//! The hello plugin: the same surface as upstream's hello-go and hello-c
//! examples, so the SDKs can be compared side by side.
//!
//! ```text
//! cargo run --example hello -- --describe   # what it exports
//! cargo run --example hello                 # then speak JSON-RPC on stdin (PROTOCOL.md), or:
//! scriptling --plugin-dir target/debug/examples -c 'import plugin.hello; print(plugin.hello.greet("Ada"))'
//! ```

use scriptling_plugin::{Plugin, ServeError, plugin_module};

/// Everything marked in this module is exported (`hello::exports`).
#[plugin_module]
mod hello {
    use scriptling_plugin::{plugin_class, plugin_fn};

    /// Returns a greeting for `name`.
    #[plugin_fn]
    fn greet(name: String, #[arg(default = "Hello")] greeting: String) -> String {
        format!("{greeting}, {name}")
    }

    /// Returns a build label for `name`.
    #[plugin_fn]
    fn label(name: String) -> String {
        format!("built:{name}")
    }

    /// A named configuration.
    #[plugin_class]
    struct Config {
        name: String,
    }

    #[plugin_class]
    impl Config {
        /// Creates a configuration called `name`.
        #[constructor]
        fn new(name: String) -> Self {
            Config { name }
        }

        /// Returns the configuration's name, whatever the key.
        fn get(&self, key: String) -> String {
            let _ = key;
            self.name.clone()
        }
    }

    /// A counter that starts at `start`.
    #[plugin_class]
    struct Counter {
        value: i64,
    }

    #[plugin_class]
    impl Counter {
        /// Creates a counter starting at `start`.
        #[constructor]
        fn new(start: i64) -> Self {
            Counter { value: start }
        }

        /// Adds `amount` and returns the new value.
        fn inc(&mut self, amount: i64) -> i64 {
            self.value += amount;
            self.value
        }

        /// Returns the current value.
        fn get(&self) -> i64 {
            self.value
        }
    }

    /// The name `greet` uses when the script has nobody in mind.
    #[constant(name = "default_name")]
    const DEFAULT_NAME: &str = "World";
}

fn main() -> Result<(), ServeError> {
    Plugin::new("hello", "1.0.0", "Example Rust plugin").exports(hello::exports).run()
}
