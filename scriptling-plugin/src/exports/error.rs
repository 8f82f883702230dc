//! [`ServeError`]: why a plugin could not be served.

use std::fmt;

/// Why a plugin could not be served.
///
/// Its `Debug` form is its message, so `fn main() -> Result<(), ServeError>`
/// reports a readable error when the plugin cannot start.
#[non_exhaustive]
pub enum ServeError {
    /// The registrations are inconsistent (duplicate or invalid names,
    /// constants that cannot be encoded). Every problem is listed.
    Invalid(Vec<String>),
    /// The transport was configured wrongly (`--listen`, `SCRIPTLING_PLUGIN_*`).
    Config(String),
    /// Setting up the transport failed.
    Io(std::io::Error),
    /// The binary was started with arguments it does not take (see
    /// [`Plugin::run`](crate::Plugin::run)): the problem, then the usage.
    Usage(String),
    /// Answers owed to the host could not be delivered: it stopped reading
    /// the plugin's output at the end of the session.
    Undelivered {
        /// How many answers were lost.
        answers: usize,
        /// Why (what the host did).
        reason: String,
    },
    /// The `log` or `tracing` bridge could not be installed: the process
    /// already has a global logger or subscriber.
    Logging(String),
}

impl fmt::Debug for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Invalid(problems) => {
                write!(f, "invalid plugin definition: {}", problems.join("; "))
            }
            ServeError::Config(problem) => write!(f, "invalid transport configuration: {problem}"),
            ServeError::Io(e) => write!(f, "plugin transport failed: {e}"),
            ServeError::Usage(text) => f.write_str(text),
            ServeError::Logging(why) => write!(f, "cannot send logs to the host: {why}"),
            ServeError::Undelivered { answers, reason } => {
                let plural = if *answers == 1 { "" } else { "s" };
                write!(f, "{answers} answer{plural} to the host could not be delivered: {reason}")
            }
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Io(e) => Some(e),
            ServeError::Invalid(_)
            | ServeError::Config(_)
            | ServeError::Usage(_)
            | ServeError::Undelivered { .. }
            | ServeError::Logging(_) => None,
        }
    }
}

impl From<std::io::Error> for ServeError {
    fn from(e: std::io::Error) -> Self {
        ServeError::Io(e)
    }
}

/// So `scriptling_plugin::tracing::init()?` works in a `main` that returns
/// `Result<(), ServeError>`.
#[cfg(feature = "tracing")]
impl From<tracing_subscriber::util::TryInitError> for ServeError {
    fn from(e: tracing_subscriber::util::TryInitError) -> Self {
        ServeError::Logging(format!("{e} (compose scriptling_plugin::tracing::HostLayer with your own layers instead)"))
    }
}

/// So `scriptling_plugin::log::init(..)?` works in a `main` that returns
/// `Result<(), ServeError>`.
#[cfg(feature = "log")]
impl From<log::SetLoggerError> for ServeError {
    fn from(e: log::SetLoggerError) -> Self {
        ServeError::Logging(e.to_string())
    }
}
