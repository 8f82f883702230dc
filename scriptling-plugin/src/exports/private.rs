//! What the attributes' generated code calls (re-exported as `__private`):
//! class helpers bounded so a missing `#[plugin_class]` is reported once,
//! and help-text defaults worked out from their values.
//!
//! The class helpers take `T: PluginClassMethods` rather than
//! `T: PluginClass`. They are called from inside the generated
//! `impl PluginClassMethods for T`, which satisfies that bound even when the
//! struct lacks its attribute; the impl itself then reports the missing
//! `PluginClass` once, instead of every helper reporting it again.

use crate::call::error::CallError;
use crate::call::objects::{Object, ObjectReadGuard, ObjectWriteGuard};
use crate::exports::class::{Class, PluginClassMethods};
use crate::exports::function::Args;
use crate::exports::script;
use crate::value::Value;
use crate::value::convert::{IntoValue, IntoValueError};

/// A function's or method's returned value as the call's outcome.
pub fn returned(value: Result<Value, IntoValueError>) -> Result<Value, CallError> {
    crate::exports::function::returned(value)
}

/// A constructor's new object as the call's outcome: it joins the object
/// table and goes back as a remote value.
pub fn constructed<T: PluginClassMethods>(object: T) -> Result<Value, CallError> {
    crate::exports::function::returned(crate::call::objects::into_object(object))
}

/// `Class::new::<T>()`.
pub fn class_of<T: PluginClassMethods>() -> Class {
    Class::new::<T>()
}

/// The class's Scriptling name, for its constructor.
pub fn class_name<T: PluginClassMethods>() -> &'static str {
    T::NAME
}

/// `args.receiver::<T>()`.
pub fn receiver<T: PluginClassMethods>(args: &Args) -> Result<Object<T>, CallError> {
    args.receiver::<T>()
}

/// `object.read()`.
pub fn read<T: PluginClassMethods>(object: &Object<T>) -> Result<ObjectReadGuard<T>, CallError> {
    object.read()
}

/// `object.write()`.
pub fn write<T: PluginClassMethods>(object: &Object<T>) -> Result<ObjectWriteGuard<T>, CallError> {
    object.write()
}

/// `object.read_async().await`.
pub async fn read_async<T: PluginClassMethods>(object: &Object<T>) -> Result<ObjectReadGuard<T>, CallError> {
    object.read_async().await
}

/// `object.write_async().await`.
pub async fn write_async<T: PluginClassMethods>(object: &Object<T>) -> Result<ObjectWriteGuard<T>, CallError> {
    object.write_async().await
}

/// `class.on_destroy(hook)`.
pub fn on_destroy<T: PluginClassMethods>(class: Class, hook: fn(&mut T)) -> Class {
    class.on_destroy(hook)
}

/// A parameter's default value, to be shown in help text (taken out once,
/// so showing needs no `Clone`).
pub struct Shown<T>(std::cell::Cell<Option<T>>);

impl<T> Shown<T> {
    /// Holds `value` to be shown.
    pub fn new(value: T) -> Self {
        Shown(std::cell::Cell::new(Some(value)))
    }
}

/// Shows a default whose type converts to a value: as the Scriptling
/// literal of that value (`3`, `[1, 2]`, `{"limit": 10}`, `None`), the
/// same literal the SDK writes for constants.
pub trait ShowDefault {
    /// The literal, or `rust` if the conversion fails.
    fn shown(&self, rust: &'static str) -> String;
}

impl<T: IntoValue> ShowDefault for &Shown<T> {
    fn shown(&self, rust: &'static str) -> String {
        let value = self.0.take().map(IntoValue::into_value);
        let literal = |v: Value| script::literal_in_order(&v, T::key_order()).ok();
        value.and_then(Result::ok).and_then(literal).unwrap_or_else(|| rust.to_owned())
    }
}

/// Shows any other default as the Rust expression that gives it. (Chosen
/// by method resolution only when [`ShowDefault`] does not apply: the call
/// is `(&&Shown::new(value)).shown(..)`, and `ShowDefault` is implemented one
/// reference deeper.)
pub trait ShowRust {
    /// `rust`, as written.
    fn shown(&self, rust: &'static str) -> String;
}

impl<T> ShowRust for Shown<T> {
    fn shown(&self, rust: &'static str) -> String {
        rust.to_owned()
    }
}

/// A handler's `Err(e)`, on its way to becoming the call's [`CallError`]:
/// a `CallError` is kept whole (one the SDK made may be final as it is, like
/// an expired callback's `unknown callback cb-1`), any other error becomes
/// `CallError::new(e.to_string())`. The generated code calls
/// `(&failure).kind().into_call_error(failure)`; [`KeepCallError`] is found
/// first where it applies, [`ShowError`] one reference deeper, as with
/// [`ShowDefault`] (and as `anyhow!` tells its argument's kinds apart).
pub struct Failure<E> {
    error: E,
    /// `E`'s `to_string`, kept here so that only [`new`](Failure::new)
    /// needs `E: Display`, and a type without it is reported once, there.
    show: fn(&E) -> String,
}

impl<E: HandlerError> Failure<E> {
    /// Holds a handler's error.
    pub fn new(error: E) -> Self {
        Failure { error, show: E::to_string }
    }
}

/// What a handler's error type must be: something with a message.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a plugin call's error: the script is shown its message",
    label = "`{Self}` does not implement `std::fmt::Display`",
    note = "return `Result<T, E>` with an `E` that implements `Display`: `CallError`, `String`, `&'static str`, any `std::error::Error`"
)]
pub trait HandlerError: std::fmt::Display {}

impl<E: std::fmt::Display + ?Sized> HandlerError for E {}

/// Picks [`Kept`] for a handler's `CallError`.
pub trait KeepCallError {
    /// The conversion to use.
    fn kind(&self) -> Kept {
        Kept
    }
}

impl KeepCallError for Failure<CallError> {}

/// Picks [`ShownError`] for any other error that is `Display`.
pub trait ShowError {
    /// The conversion to use.
    fn kind(&self) -> ShownError {
        ShownError
    }
}

impl<E> ShowError for &Failure<E> {}

/// A handler's `CallError`, kept whole.
pub struct Kept;

impl Kept {
    /// The error itself.
    pub fn into_call_error(self, failure: Failure<CallError>) -> CallError {
        failure.error
    }
}

/// Any other error, by its `Display` text.
pub struct ShownError;

impl ShownError {
    /// `CallError::new(error.to_string())`.
    pub fn into_call_error<E>(self, failure: Failure<E>) -> CallError {
        CallError::new((failure.show)(&failure.error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json::Json;

    // Written exactly as the generated code calls it, borrows included.
    #[allow(clippy::needless_borrow)]
    #[test]
    fn a_handlers_call_error_is_kept_and_any_other_error_shown() {
        let kept = CallError::as_is("unknown callback cb-1: expired");
        let failure = Failure::new(kept.clone());
        assert_eq!((&failure).kind().into_call_error(failure), kept);
        let failure = Failure::new("disk full");
        assert_eq!((&failure).kind().into_call_error(failure), CallError::new("disk full"));
        let failure = Failure::new(std::io::Error::other("gone"));
        assert_eq!((&failure).kind().into_call_error(failure), CallError::new("gone"));
    }

    struct Opaque;

    #[derive(serde::Serialize)]
    struct Options {
        limit: u32,
    }

    // Written exactly as the generated code calls it, borrows included.
    #[allow(clippy::needless_borrow)]
    #[test]
    fn defaults_show_as_scriptling_literals_or_as_written() {
        assert_eq!((&&Shown::new(Some(3))).shown("Some(3)"), "3");
        assert_eq!((&&Shown::new(-1i64)).shown("-1"), "-1");
        assert_eq!((&&Shown::new(vec![1, 2])).shown("vec![1, 2]"), "[1, 2]");
        assert_eq!((&&Shown::new(None::<i64>)).shown("None"), "None");
        assert_eq!((&&Shown::new(true)).shown("true"), "True");
        assert_eq!((&&Shown::new(Json(Options { limit: 10 }))).shown("Json(..)"), r#"{"limit": 10}"#);
        assert_eq!((&&Shown::new(u64::MAX)).shown("u64::MAX"), "u64::MAX");
        assert_eq!((&&Shown::new(Opaque)).shown("Opaque"), "Opaque");
    }
}
