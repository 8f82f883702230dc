//! A plugin served over TCP in the Supex bridge's conventions: `hello`
//! (with a token, if one is set), `ping`, `tools/call` with plain JSON,
//! `tools/list`, and the Scriptling protocol with its callbacks on the same
//! connection.
//!
//! ```text
//! cargo run --example tcp                              # tcp://127.0.0.1:9876
//! cargo run --example tcp -- --listen tcp://0.0.0.0:9876
//! cargo run --example tcp -- --listen unix:/tmp/bridge.sock
//! SCRIPTLING_PLUGIN_TOKEN=s3cret cargo run --example tcp
//! ```
//!
//! Then, with `nc 127.0.0.1 9876` (or PROTOCOL.md's session):
//! `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`.

use scriptling_plugin::{CallError, Callback, Logger, Plugin, ServeError, TcpConfig, Value, plugin_fn};

/// Returns a greeting for `name`.
#[plugin_fn]
fn greet(name: String, #[arg(default = "Hello")] greeting: String) -> String {
    format!("{greeting}, {name}")
}

/// Adds up `numbers`: plain JSON numbers arrive as ints or floats.
#[plugin_fn]
fn total(numbers: Vec<f64>) -> f64 {
    // From 0.0: std's float sum starts at -0.0, which `total([])` would show.
    numbers.iter().fold(0.0, |sum, n| sum + n)
}

/// Calls `on_item` with each of `items`, and returns how many it called
/// it with (a callback needs the Scriptling protocol: `tools/call` has no
/// way to pass one).
#[plugin_fn]
fn each(items: Vec<Value>, on_item: Callback) -> Result<i64, CallError> {
    Logger::current().info(format!("each: {} items", items.len()));
    for item in &items {
        on_item.call((item.clone(),))?;
    }
    Ok(items.len() as i64)
}

fn main() -> Result<(), ServeError> {
    // `--listen tcp://...` / `SCRIPTLING_PLUGIN_LISTEN` and friends override the default.
    let config = TcpConfig::from_env_and_args()?.unwrap_or_else(|| TcpConfig::new(([127, 0, 0, 1], 9876).into()));
    Plugin::new("bridge", "1.0.0", "TCP Scriptling plugin example")
        .function::<greet>()
        .function::<total>()
        .function::<each>()
        .serve_tcp_with(config)
}
