//! `log` records to the host's logger (feature `log`).
//!
//! [`init`] installs a global `log` logger whose records become `host.log`
//! records (with the `target` as a field), sent like a [`Logger`] record:
//! through the host while the SDK is serving a call on that thread, to
//! stderr otherwise.
//!
//! ```no_run
//! use scriptling_plugin::{plugin_fn, Plugin};
//!
//! #[plugin_fn]
//! fn work(name: String) -> String {
//!     log::info!("plugin work started for {name}");
//!     format!("logged:{name}")
//! }
//!
//! fn main() -> Result<(), scriptling_plugin::ServeError> {
//!     scriptling_plugin::log::init(log::LevelFilter::Info)?;
//!     Plugin::new("logger", "1.0.0", "").function::<work>().run()
//! }
//! ```

use crate::call::logger::{Level, Logger};
use crate::value::Value;

/// The `log::Log` implementation behind [`init`].
#[derive(Clone, Copy, Debug, Default)]
pub struct HostLogger;

impl log::Log for HostLogger {
    fn enabled(&self, _metadata: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let level = match record.level() {
            log::Level::Trace => Level::Trace,
            log::Level::Debug => Level::Debug,
            log::Level::Info => Level::Info,
            log::Level::Warn => Level::Warn,
            log::Level::Error => Level::Error,
        };
        let fields = [Value::from("target"), Value::from(record.target())];
        Logger::current().log_fields(level, &record.args().to_string(), &fields);
    }

    fn flush(&self) {}
}

/// Installs [`HostLogger`] as the global `log` logger, passing records up to
/// `max_level`. Fails if a global logger is already set.
pub fn init(max_level: log::LevelFilter) -> Result<(), log::SetLoggerError> {
    log::set_logger(&HostLogger)?;
    log::set_max_level(max_level);
    Ok(())
}
