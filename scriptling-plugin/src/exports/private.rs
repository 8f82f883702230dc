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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json::Json;

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
