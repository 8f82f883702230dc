//! [`CallError`]: why a plugin function, method or constructor failed.
//!
//! The host shows scripts only an error's message (never its code), so
//! every message stands alone: it names the function, the argument and what
//! was expected.

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

    /// An error the SDK raises about a call, prefixed with the call's name
    /// (`greet(): ...`): at once when raised inside the call (so the name
    /// stays when plugin code passes the error on with `?`), or when the
    /// response is written.
    pub(crate) fn about_call(message: impl Into<String>) -> Self {
        match crate::call::context::current_label() {
            Some(label) => Self { message: format!("{label}(): {}", message.into()), qualify: false },
            None => Self { message: message.into(), qualify: true },
        }
    }

    /// The message, as it will reach the host (an error the SDK raised
    /// about a call outside it gains the call's name when it is answered).
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
