//! Error types: [`CallError`] for plugin code, [`RpcError`] for the wire.
//!
//! Inside the SDK every failure is typed; it becomes a JSON-RPC error object
//! in exactly one place, [`crate::rpc`]. The host shows scripts only the
//! `message` (never the code), so every message stands alone: it names the
//! function, the argument and what was expected.

use std::fmt;

/// The error a plugin function, method or constructor fails with.
///
/// Its message reaches the Scriptling script verbatim as the raised error.
/// `#[plugin_fn]` functions rarely build one directly: returning
/// `Err(e)` for any `e: Display` does it for you, and argument errors are
/// produced by the SDK.
///
/// ```
/// use scriptling_plugin::CallError;
///
/// let err = CallError::new("disk full");
/// assert_eq!(err.message(), "disk full");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    message: String,
    /// Prefix the message with the call's name (`greet(): ...`) when it is
    /// turned into a response: for errors raised by the SDK on the call's
    /// behalf, which would not otherwise say where they come from.
    qualify: bool,
}

impl CallError {
    /// An error whose message reaches the host verbatim.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), qualify: false }
    }

    /// An error the SDK raises about a call; the call's name is prepended
    /// when the response is written.
    pub(crate) fn about_call(message: impl Into<String>) -> Self {
        Self { message: message.into(), qualify: true }
    }

    /// The message, as it will reach the host (without a name prefix the SDK
    /// may add).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The final message for a call named `qualified` (`greet`, `Counter.inc`).
    pub(crate) fn into_message(self, qualified: &str) -> String {
        if self.qualify { format!("{qualified}(): {}", self.message) } else { self.message }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// JSON-RPC error codes used by the SDK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `-32700`: the line is not valid JSON.
    ParseError,
    /// `-32600`: valid JSON that is not a request (or an empty batch, or too large).
    InvalidRequest,
    /// `-32601`: no such JSON-RPC method.
    MethodNotFound,
    /// `-32602`: the params do not have the method's shape.
    InvalidParams,
    /// `-32603`: the SDK failed internally.
    InternalError,
    /// `-32000`: the call failed (unknown function, bad argument, plugin error, panic).
    Application,
    /// `-32001`: an HTTP request without the configured bearer token.
    AuthenticationFailed,
}

impl ErrorCode {
    /// The numeric code on the wire.
    ///
    /// ```
    /// # use scriptling_plugin::ErrorCode;
    /// assert_eq!(ErrorCode::MethodNotFound.code(), -32601);
    /// ```
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::Application => -32000,
            ErrorCode::AuthenticationFailed => -32001,
        }
    }
}

/// A JSON-RPC error object: a code and a self-contained message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcError {
    /// The error's code.
    pub code: ErrorCode,
    /// The message shown to the script.
    pub message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub(crate) fn application(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Application, message)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code.code())
    }
}

impl std::error::Error for RpcError {}

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
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Io(e) => Some(e),
            ServeError::Invalid(_) | ServeError::Config(_) => None,
        }
    }
}

impl From<std::io::Error> for ServeError {
    fn from(e: std::io::Error) -> Self {
        ServeError::Io(e)
    }
}
