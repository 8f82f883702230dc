//! [`Logger`]: log records that reach the host's logger (`host.log`).
//!
//! A call's records travel in order and are acknowledged before its answer
//! (see `call/logstream.rs`); outside a call, or over HTTP, they go to
//! stderr.

use std::fmt::{self, Display};

use serde::Serialize;

use crate::call::context::{self, CallScope};
use crate::call::logstream;
use crate::value::Value;
use crate::value::convert::IntoValue;

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
/// this thread (in sync and async handlers alike). Logging costs the handler
/// no round trip: records queue and travel to the host one after another,
/// so the host prints them in the order they were written, and the call's
/// answer waits until the host has acknowledged them all, so a script
/// never sees its call return before the call's log lines. The wait is
/// bounded by [`Plugin::log_ack_timeout`](crate::Plugin::log_ack_timeout).
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
///
/// `Logger` has no `Default`: which of [`current`](Logger::current) and
/// [`stderr`](Logger::stderr) a default would mean is not obvious, so you
/// say which.
#[derive(Clone)]
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

impl Logger {
    /// The current call's logger (falls back to stderr outside a call).
    pub fn current() -> Logger {
        Logger { scope: context::current(), fields: Vec::new() }
    }

    /// A logger that always writes to stderr, even inside a call.
    pub fn stderr() -> Logger {
        Logger { scope: None, fields: Vec::new() }
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
        let args = if extra.is_empty() { self.fields.clone() } else { [self.fields.as_slice(), extra].concat() };
        let record = Record { level, message: message.to_owned(), args };
        match &self.scope {
            Some(scope) if scope.link.logs_to_host() => logstream::push(&scope.call, &scope.link, record),
            Some(scope) => record.to_stderr(scope.link.peer()),
            None => record.to_stderr(None),
        }
    }
}

/// One log record.
pub(crate) struct Record {
    pub(crate) level: Level,
    pub(crate) message: String,
    pub(crate) args: Vec<Value>,
}

/// A record as `host.log` params.
#[derive(Serialize)]
pub(crate) struct LogParams<'a> {
    level: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    args: &'a [Value],
}

impl Record {
    pub(crate) fn params(&self) -> LogParams<'_> {
        LogParams { level: self.level.as_str(), message: &self.message, args: &self.args }
    }

    /// Writes the record to stderr, naming the connection it came from
    /// (`None`: the host's, which needs no naming).
    pub(crate) fn to_stderr(&self, peer: Option<&str>) {
        let mut line = match peer {
            Some(peer) => format!("{peer}: [{}] {}", self.level, self.message),
            None => format!("[{}] {}", self.level, self.message),
        };
        for pair in self.args.chunks(2) {
            match pair {
                [Value::String(k), v] => line.push_str(&format!(" {k}={v}")),
                [k, v] => line.push_str(&format!(" {k}={v}")),
                [k] => line.push_str(&format!(" {k}")),
                _ => {}
            }
        }
        eprintln!("{line}");
    }
}
