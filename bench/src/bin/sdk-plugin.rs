//! The benchmark surface written with the SDK, compared with `floor-plugin`.

use scriptling_plugin::{CallError, Callback, Logger, Plugin, ServeError, plugin_class, plugin_fn};

/// Returns a greeting for `name`.
#[plugin_fn]
fn greet(name: String) -> String {
    format!("Hello, {name}")
}

/// Calls `cb(i)` for `i` in `0..n`, then returns `n`.
#[plugin_fn]
fn ping_back(cb: Callback, n: i64) -> Result<i64, CallError> {
    for i in 0..n {
        cb.call((i,))?;
    }
    Ok(n)
}

/// Writes `n` log records, then returns `n`.
#[plugin_fn]
fn log_burst(n: i64) -> i64 {
    let log = Logger::current();
    for i in 0..n {
        log.with("i", i).info("burst");
    }
    n
}

/// A counter.
#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new(start: i64) -> Self {
        Counter { value: start }
    }

    fn inc(&mut self, amount: i64) -> i64 {
        self.value += amount;
        self.value
    }
}

fn main() -> Result<(), ServeError> {
    Plugin::new("sdk", "1.0.0", "Benchmark plugin")
        .function::<greet>()
        .function::<ping_back>()
        .function::<log_burst>()
        .class::<Counter>()
        .run()
}
