//! A Scriptling plugin: one function and one class. Build it, put the
//! binary in a directory Scriptling loads plugins from, and:
//!
//! ```text
//! import plugin.my_plugin as p
//! print(p.greet("Ada"))            # Hello, Ada
//! c = p.Counter(10)
//! c.inc()                          # 11
//! c.value = 0
//! ```
//!
//! `cargo run -- --describe` lists what it exports.

use scriptling_plugin::{Plugin, ServeError, plugin_module};

/// Everything marked in this module is exported (`my_plugin::exports`):
/// add functions and classes here and they cannot be left unregistered.
#[plugin_module]
mod my_plugin {
    use scriptling_plugin::{CallError, plugin_class, plugin_fn};

    /// Returns a greeting for `name`.
    #[plugin_fn]
    fn greet(
        name: String,
        #[arg(default = "Hello")] greeting: String,
    ) -> Result<String, CallError> {
        if name.is_empty() {
            return Err(CallError::new("name must not be empty"));
        }
        Ok(format!("{greeting}, {name}"))
    }

    /// A counter.
    #[plugin_class]
    struct Counter {
        value: i64,
    }

    #[plugin_class]
    impl Counter {
        /// Creates a counter starting at `start`.
        #[constructor]
        fn new(#[arg(default = 0)] start: i64) -> Self {
            Counter { value: start }
        }

        /// Adds `amount` and returns the new value.
        fn inc(&mut self, #[arg(default = 1)] amount: i64) -> i64 {
            self.value += amount;
            self.value
        }

        /// The current value; scripts may assign it.
        #[property(settable)]
        fn value(&self) -> i64 {
            self.value
        }

        fn set_value(&mut self, value: i64) {
            self.value = value;
        }
    }
}

fn main() -> Result<(), ServeError> {
    Plugin::new("my_plugin", env!("CARGO_PKG_VERSION"), "A starter plugin")
        .exports(my_plugin::exports)
        .run()
}
