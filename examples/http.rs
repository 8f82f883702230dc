//! The hello_http plugin served over HTTP, like upstream's http-go example.
//!
//! ```text
//! cargo run --example http --features http                          # http://127.0.0.1:8081/json-rpc
//! cargo run --example http --features http -- --listen 127.0.0.1:9000 --path /rpc
//! SCRIPTLING_PLUGIN_TOKEN=s3cret cargo run --example http --features http
//! ```
//!
//! Then, from Scriptling:
//! `scriptling.plugin.load("hello_http", "http://127.0.0.1:8081/json-rpc", scriptling=True)`.

use scriptling_plugin::{HttpConfig, Plugin, ServeError, plugin_class, plugin_fn};

/// Returns a greeting for `name`.
#[plugin_fn]
fn greet(name: String) -> String {
    format!("Hello, {name}")
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
}

fn main() -> Result<(), ServeError> {
    // `--listen`/`SCRIPTLING_PLUGIN_LISTEN` and friends override the default.
    let config = HttpConfig::from_env_and_args()?.unwrap_or_else(|| HttpConfig::new(([127, 0, 0, 1], 8081).into()));
    Plugin::new("hello_http", "1.0.0", "HTTP Scriptling plugin example")
        .function::<greet>()
        .class::<Counter>()
        .constant("default_name", "World")
        .serve_http_with(config)
}
