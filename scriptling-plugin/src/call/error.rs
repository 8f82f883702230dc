//! [`CallError`]: why a plugin function, method or constructor failed, and
//! the [`Label`] that names the call in its message.
//!
//! The host shows scripts only an error's message (never its code), so
//! every message stands alone: it names the function, the argument and what
//! was expected.

use std::fmt;
use std::sync::Arc;

/// The error a plugin function, method or constructor fails with.
///
/// Its message reaches the Scriptling script as the raised error, after
/// the call's name, as every error the SDK raises about a call does:
/// `CallError::new("disk full")` from `save` reads `save(): disk full`
/// (`can't set attribute 'path' of Config: disk full` from a property's
/// setter). A message
/// that already starts with the call's name is left as it is, so an error
/// passed on with `?` is named once.
///
/// `#[plugin_fn]` functions rarely build one directly: returning `Err(e)`
/// for any `e: Display` does it for you, and argument errors are produced
/// by the SDK.
///
/// ```
/// use scriptling_plugin::testing::Host;
/// use scriptling_plugin::{plugin_fn, CallError, Plugin};
///
/// /// Saves the document.
/// #[plugin_fn]
/// fn save() -> Result<(), CallError> {
///     Err(CallError::new("disk full"))
/// }
///
/// let err = CallError::new("disk full");
/// assert_eq!(err.message(), "disk full");
/// let host = Host::in_process(Plugin::new("docs", "1.0.0", "").function::<save>()).unwrap();
/// assert_eq!(host.call("save", []).unwrap_err().message(), "save(): disk full");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    message: String,
    /// Whether the message is final: it is sent without the call's name.
    as_is: bool,
}

impl CallError {
    /// An error with this message, which reaches the script after the
    /// call's name.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), as_is: false }
    }

    /// An error whose message is sent as it is, for the few whose text is
    /// fixed by the host's (an expired callback's `unknown callback cb-1`:
    /// upstream's tests look for it at the start).
    pub(crate) fn as_is(message: impl Into<String>) -> Self {
        Self { message: message.into(), as_is: true }
    }

    /// An error the SDK raises about the current call, named at once when
    /// raised inside it (so the name is in [`message`](CallError::message)
    /// for plugin code that passes the error on), or when it is answered.
    pub(crate) fn about_call(message: impl Into<String>) -> Self {
        match crate::call::context::current_label() {
            // Named once when answered: the answer sees the name is there.
            Some(label) => Self::new(format!("{label}: {}", message.into())),
            None => Self::new(message),
        }
    }

    /// The message as it stands: without the call's name when the error was
    /// made outside the SDK's knowledge of the call (the name is added when
    /// the call is answered).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The final message for the call `label`: named once.
    pub(crate) fn into_message(self, label: &Label) -> String {
        if self.as_is {
            return self.message;
        }
        let prefix = format!("{label}: ");
        if self.message.starts_with(&prefix) { self.message } else { prefix + &self.message }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// How messages name a call: `greet()`, `Counter.inc()`, `Counter()` (a
/// constructor), or, for a property's setter, `can't set attribute 'value'
/// of Counter`: the script assigned to an attribute; it called nothing.
/// (The Go SDK's read-only error starts the same way, so a script that
/// tests for it works with either.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Label {
    /// `greet`, `Counter.inc`, `Counter.value`.
    name: Arc<str>,
    setter: bool,
}

impl Label {
    /// The label of the setter of the property `name` (`Counter.value`).
    pub(crate) fn setter(name: impl Into<Arc<str>>) -> Self {
        Self { name: name.into(), setter: true }
    }

    /// The callable's qualified name, without decoration.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is a property's setter.
    pub(crate) fn is_setter(&self) -> bool {
        self.setter
    }
}

impl From<&str> for Label {
    fn from(name: &str) -> Self {
        Self { name: name.into(), setter: false }
    }
}

impl From<String> for Label {
    fn from(name: String) -> Self {
        Self { name: name.into(), setter: false }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.setter {
            false => write!(f, "{}()", self.name),
            true => match self.name.rsplit_once('.') {
                Some((class, property)) => write!(f, "can't set attribute '{property}' of {class}"),
                None => write!(f, "can't set attribute '{}'", self.name),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_named_once() {
        let greet = Label::from("greet");
        assert_eq!(CallError::new("disk full").into_message(&greet), "greet(): disk full");
        assert_eq!(CallError::new("greet(): disk full").into_message(&greet), "greet(): disk full");
        // Another call's name is kept, after this one's.
        assert_eq!(CallError::new("greeting(): x").into_message(&greet), "greet(): greeting(): x");
        let value = Label::setter("Counter.value");
        let set = "can't set attribute 'value' of Counter";
        assert_eq!(CallError::new("must be positive").into_message(&value), format!("{set}: must be positive"));
        assert_eq!(CallError::new(format!("{set}: x")).into_message(&value), format!("{set}: x"));
    }
}
