//! The properties plugin: a class with a settable property, a read-only
//! property and a method, matching upstream's properties example.
//!
//! ```text
//! c = plugin.properties.Counter(5)
//! c.value = 7        # settable: calls set_value
//! c.label            # "counter:7" (read-only: assigning it raises)
//! c.add(3)           # 10
//! ```

use scriptling_plugin::{Plugin, ServeError, plugin_class};

/// A counter with properties.
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

    /// The current value; assignable.
    #[property(settable)]
    fn value(&self) -> i64 {
        self.value
    }

    fn set_value(&mut self, value: i64) {
        self.value = value;
    }

    /// A label describing the counter (read-only).
    #[property]
    fn label(&self) -> String {
        format!("counter:{}", self.value)
    }

    /// Adds `amount` and returns the new value.
    fn add(&mut self, amount: i64) -> i64 {
        self.value += amount;
        self.value
    }
}

fn main() -> Result<(), ServeError> {
    Plugin::new("properties", "1.0.0", "Property example plugin").class::<Counter>().run()
}
