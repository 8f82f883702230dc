//! [`Logger`]: log records that reach the host's logger (`host.log`).

use std::fmt::{self, Display};

use serde::Serialize;

use crate::context::{self, CallScope};
use crate::convert::IntoValue;
use crate::value::Value;

/// A log level. There is no `fatal`: the host calls its logger's `Fatal`,
/// which may end the host process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the plugin handled.
    Warn,
    /// A failure.
    Error,
}

impl Level {
    /// The level's name on the wire.
    ///
    /// ```
    /// assert_eq!(scriptling_plugin::Level::Warn.as_str(), "warn");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

impl Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Writes log records through the host's logger.
///
/// [`Logger::current`] gives the logger of the call the SDK is running on
/// this thread (in sync and async handlers alike). Its records are sent as
/// `host.log` requests through the plugin's single writer without waiting
/// for the host's acknowledgement, so logging costs one write, and a
/// handler's records always reach the host before its response.
///
/// Outside a call (at start-up, on a thread the handler spawned) or over a
/// transport that cannot call the host (HTTP), records go to stderr, never
/// to stdout.
///
/// ```
/// use scriptling_plugin::{plugin_fn, Logger};
///
/// #[plugin_fn]
/// fn work(name: String) -> String {
///     let log = Logger::current().with("plugin", "logger");
///     log.with("name", &name).info("plugin work started");
///     format!("logged:{name}")
/// }
/// ```
#[derive(Clone, Default)]
pub struct Logger {
    scope: Option<CallScope>,
    /// Flat key/value pairs, as the host expects them.
    fields: Vec<Value>,
}

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logger").field("attached", &self.scope.is_some()).field("fields", &self.fields).finish()
    }
}

#[derive(Serialize)]
struct LogParams<'a> {
    level: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    args: &'a [Value],
}

impl Logger {
    /// The current call's logger (falls back to stderr outside a call).
    pub fn current() -> Logger {
        Logger { scope: context::current(), fields: Vec::new() }
    }

    /// A logger that always writes to stderr.
    pub fn stderr() -> Logger {
        Logger::default()
    }

    /// A logger that adds `key = value` to every record. A value that
    /// cannot be converted is logged as its error message.
    pub fn with(&self, key: impl Into<String>, value: impl IntoValue) -> Logger {
        let mut fields = self.fields.clone();
        fields.push(Value::String(key.into()));
        fields.push(value.into_value().unwrap_or_else(|e| Value::String(format!("<{e}>"))));
        Logger { scope: self.scope.clone(), fields }
    }

    /// Logs at `trace`.
    pub fn trace(&self, message: impl Display) {
        self.log(Level::Trace, message);
    }

    /// Logs at `debug`.
    pub fn debug(&self, message: impl Display) {
        self.log(Level::Debug, message);
    }

    /// Logs at `info`.
    pub fn info(&self, message: impl Display) {
        self.log(Level::Info, message);
    }

    /// Logs at `warn`.
    pub fn warn(&self, message: impl Display) {
        self.log(Level::Warn, message);
    }

    /// Logs at `error`.
    pub fn error(&self, message: impl Display) {
        self.log(Level::Error, message);
    }

    /// Logs at `level`.
    pub fn log(&self, level: Level, message: impl Display) {
        self.log_fields(level, &message.to_string(), &[]);
    }

    /// Logs with extra fields (flat key/value values) after the logger's own.
    pub(crate) fn log_fields(&self, level: Level, message: &str, extra: &[Value]) {
        let owned;
        let args: &[Value] = if extra.is_empty() {
            &self.fields
        } else {
            owned = [self.fields.as_slice(), extra].concat();
            &owned
        };
        if let Some(scope) = &self.scope {
            let params = LogParams { level: level.as_str(), message, args };
            if scope.conn.send_host_detached("host.log", &params) {
                return;
            }
        }
        to_stderr(level, message, args);
    }
}

fn to_stderr(level: Level, message: &str, args: &[Value]) {
    let mut line = format!("[{level}] {message}");
    for pair in args.chunks(2) {
        match pair {
            [Value::String(k), v] => line.push_str(&format!(" {k}={v}")),
            [k, v] => line.push_str(&format!(" {k}={v}")),
            [k] => line.push_str(&format!(" {k}")),
            _ => {}
        }
    }
    eprintln!("{line}");
}
