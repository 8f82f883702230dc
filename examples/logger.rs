//! The logger plugin: writes a record through the host's logger, like
//! upstream's logger example.
//!
//! ```text
//! import plugin.logger
//! plugin.logger.work("Ada", ["a", "b"])   # "logged:Ada", and the host logs
//! # INFO plugin work started plugin=logger name=Ada tags=[a b]
//! ```

use scriptling_plugin::{Logger, Plugin, ServeError, Value, plugin_fn};

/// Logs that work started and returns `"logged:<name>"`.
#[plugin_fn]
fn work(name: String, tags: Vec<Value>) -> String {
    Logger::current()
        .with("plugin", "logger")
        .with("name", name.as_str())
        .with("tags", tags)
        .info("plugin work started");
    format!("logged:{name}")
}

fn main() -> Result<(), ServeError> {
    Plugin::new("logger", "1.0.0", "Host logger example plugin").function::<work>().run()
}
