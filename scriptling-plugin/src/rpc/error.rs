//! [`RpcError`]: a JSON-RPC error object inside the SDK. Every failure
//! becomes one of these, and is written to the wire in exactly one place,
//! [`crate::rpc`].

use std::fmt;

/// JSON-RPC error codes used by the SDK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorCode {
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
    /// `-32001`: a request without the configured token (HTTP's bearer
    /// token, or the one a connection's `hello` must carry).
    AuthenticationFailed,
}

impl ErrorCode {
    /// The numeric code on the wire.
    pub(crate) fn code(self) -> i64 {
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
pub(crate) struct RpcError {
    /// The error's code.
    pub(crate) code: ErrorCode,
    /// The message shown to the script.
    pub(crate) message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
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
