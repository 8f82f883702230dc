//! Generated and custom wrappers side by side, like upstream's
//! mixed-wrapper example.
//!
//! `decorate` is written in Scriptling and calls the hidden `_decorate`;
//! `generated` and `Config` get wrappers the SDK writes for them. Because
//! one export has source, the host runs the whole library as Scriptling
//! source (script mode); the SDK supplies every wrapper with its help as a
//! docstring and keeps the `greeting` constant as an assignment.
//!
//! ```text
//! import plugin.mixed
//! plugin.mixed.generated("Ada")        # "generated:Ada"
//! plugin.mixed.decorate("Ada")         # "wrapped:Ada!"
//! plugin.mixed.Config({"k": 1}).get("k")   # 1
//! plugin.mixed.greeting                # "hi"
//! ```

use std::collections::HashMap;

use scriptling_plugin::{Plugin, ServeError, Value, plugin_class, plugin_fn};

/// Returns `"generated:<name>"`.
#[plugin_fn]
fn generated(name: String) -> String {
    format!("generated:{name}")
}

/// The RPC half of `decorate`: callable, but not listed in the schema.
#[plugin_fn(hidden)]
fn _decorate(name: String) -> String {
    format!("wrapped:{name}")
}

/// A read-only view of some settings.
#[plugin_class]
struct Config {
    values: HashMap<String, Value>,
}

#[plugin_class]
impl Config {
    /// Creates a configuration from a dict.
    #[constructor]
    fn new(values: HashMap<String, Value>) -> Self {
        Config { values }
    }

    /// The value stored under `key`, or None.
    fn get(&self, key: String) -> Option<Value> {
        self.values.get(&key).cloned()
    }
}

const DECORATE: &str = r#"
import scriptling.plugin

def decorate(name):
    """decorate(name)

    Returns "wrapped:<name>!"."""
    return scriptling.plugin.call_function("plugin.mixed", "_decorate", name) + "!"
"#;

fn main() -> Result<(), ServeError> {
    Plugin::new("mixed", "1.0.0", "Mixed generated and supplied wrappers")
        .function::<generated>()
        .function::<_decorate>()
        .class::<Config>()
        .script_function("decorate", DECORATE)
        .constant("greeting", "hi")
        .run()
}
