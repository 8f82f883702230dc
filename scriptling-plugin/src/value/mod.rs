//! The transport value: what travels between a Scriptling host and a plugin.
//!
//! The lowest layer besides `support`: the [`Value`] union, its wire codec,
//! the conversions to and from Rust types, and [`Json<T>`](json::Json).

pub(crate) mod codec;
pub(crate) mod convert;
pub(crate) mod derive;
pub(crate) mod json;
pub(crate) mod plain;
pub(crate) mod taken;

use std::collections::BTreeMap;
use std::fmt;

/// A Scriptling value as it crosses the plugin boundary.
///
/// This is the protocol's tagged union. The wire form is
/// `{"type": "<tag>", ...payload}`; its exact rules (lenient on input, strict on output)
/// are under [Wire form](#wire-form) below.
///
/// Most plugin code never touches `Value` directly: function parameters and
/// results are converted through [`FromValue`](crate::FromValue) and
/// [`IntoValue`](crate::IntoValue). Take or return a `Value` when a function
/// must accept "anything".
///
/// ```
/// use scriptling_plugin::Value;
///
/// let v = Value::from(vec![Value::from(1), Value::from("two"), Value::Null]);
/// assert_eq!(v.type_name(), "list");
/// assert_eq!(
///     serde_json::to_string(&v).unwrap(),
///     r#"{"type":"list","items":[{"type":"int","value":1},{"type":"string","value":"two"},{"type":"null"}]}"#,
/// );
/// ```
///
/// # Wire form
///
/// **Decoding** accepts everything the real host (Scriptling 0.20.1) sends:
///
/// - the payload keys in any order, unknown keys ignored;
/// - a missing, empty or `null` `type` means `null`;
/// - `{"type":"list"}` / `{"type":"dict"}` without `items` / `entries` are empty;
/// - integer-looking JSON under a `float` tag is a float (`3`, `-0`, `1e+21`);
/// - `int` values are exact 64-bit integers; anything outside `i64`, or a
///   fractional number, is an error rather than a silent wrap or truncation;
/// - duplicate dict keys: the last one wins.
///
/// Tags are case-sensitive; an unknown tag is an error naming it.
///
/// Values may nest up to 1 000 levels deep, a list in a
/// list in a list...: deeper input is refused with an error saying so. The
/// limit is counted in Scriptling values, not JSON brackets (each value is
/// two of those), and it is far below what would risk the stack: decoding,
/// converting and dropping a value that deep each use well under 1 MiB of
/// stack in a debug build. (Decoding with `serde_json::from_str` yourself
/// stops earlier, at serde_json's own limit of 128 JSON levels; the SDK lifts
/// that limit for everything it decodes.)
///
/// **Encoding** writes every value with its tag (a whole float is still
/// `{"type":"float","value":3.0}`) and refuses non-finite floats with an error
/// instead of emitting invalid JSON.
///
/// ```
/// use scriptling_plugin::Value;
///
/// let v: Value = serde_json::from_str(r#"{"value": 3, "type": "float"}"#).unwrap();
/// assert_eq!(v, Value::Float(3.0));
/// let empty: Value = serde_json::from_str(r#"{"type": "list"}"#).unwrap();
/// assert_eq!(empty, Value::List(vec![]));
/// assert!(serde_json::to_string(&Value::Float(f64::NAN)).is_err());
/// ```
///
/// `Value` is `#[non_exhaustive]`: the protocol may grow a type (bytes, a
/// set), so a `match` on it needs a `_` arm, which is where such a value
/// would be refused.
#[derive(Debug, PartialEq, Default)]
#[non_exhaustive]
pub enum Value {
    /// `None` in Scriptling.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer. Scriptling integers are exactly 64-bit signed.
    Int(i64),
    /// A float. Non-finite floats cannot be sent (JSON has no NaN or Infinity);
    /// encoding one is an error, never a silent `null`.
    Float(f64),
    /// A string (any valid UTF-8, embedded NUL included).
    String(String),
    /// A list. Scriptling tuples arrive as lists too.
    List(Vec<Value>),
    /// A dict. Keys are always strings on this protocol; the order is the
    /// key order (the host does not preserve insertion order either).
    Dict(BTreeMap<String, Value>),
    /// A host function passed by reference, valid only while the call that
    /// received it is running.
    Callback(CallbackRef),
    /// An object of a plugin class, by reference: the protocol's `remote`
    /// value. [`Object<T>`](crate::Object) resolves it to the live object.
    Object(ObjectRef),
}

/// The reference carried by a `callback` value: the host's id for a
/// Scriptling function (such as `"cb-1"`). A parameter of type
/// [`Callback`](crate::Callback) turns it into something you can call.
///
/// ```
/// use scriptling_plugin::{CallbackRef, Value};
///
/// // What a test host sends for a function argument:
/// let arg = Value::Callback(CallbackRef::new("cb-1"));
/// assert_eq!(arg.type_name(), "function");
/// ```
///
/// Its fields are public to read; build one with [`CallbackRef::new`] (the
/// struct is `#[non_exhaustive]`, so the protocol can add a field).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CallbackRef {
    /// The host-assigned callback id.
    pub id: String,
}

impl CallbackRef {
    /// A reference to the host's callback `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into() }
    }
}

/// The reference carried by [`Value::Object`] (the protocol's `remote`
/// value), and the bare result of
/// `object.new`. A parameter of type [`Object<T>`](crate::Object) resolves
/// it to the live object.
///
/// When the host sends one back, `library` is the host's name for the library
/// (for example `plugin.hello`, or a `load()` alias), not necessarily the name
/// the plugin declared; only `id` identifies the object.
///
/// Its fields are public to read; build one with [`ObjectRef::new`] (the
/// struct is `#[non_exhaustive]`, so the protocol can add a field).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ObjectRef {
    /// The library that owns the object, as the sender names it.
    #[serde(default)]
    pub library: String,
    /// The object's class name.
    #[serde(default)]
    pub class: String,
    /// The object id: always a string on this protocol.
    pub id: String,
}

impl ObjectRef {
    /// A reference to object `id` of `class` in `library`.
    ///
    /// ```
    /// use scriptling_plugin::{ObjectRef, Value};
    ///
    /// // What a test host sends for an instance argument:
    /// let arg = Value::Object(ObjectRef::new("plugin.hello", "Counter", "1"));
    /// assert_eq!(arg.type_name(), "object");
    /// ```
    pub fn new(library: impl Into<String>, class: impl Into<String>, id: impl Into<String>) -> Self {
        Self { library: library.into(), class: class.into(), id: id.into() }
    }
}

impl Value {
    /// The Scriptling-facing name of this value's type, as used in error
    /// messages: `None`, `bool`, `int`, `float`, `string`, `list`, `dict`,
    /// `function` (a callback) or `object` (an object of a plugin class).
    ///
    /// ```
    /// # use scriptling_plugin::Value;
    /// assert_eq!(Value::Int(1).type_name(), "int");
    /// assert_eq!(Value::Null.type_name(), "None");
    /// ```
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Callback(_) => "function",
            Value::Object(_) => "object",
        }
    }

    /// `true` for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is a [`Value::Int`].
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number as a float, if this is a [`Value::Float`] or a [`Value::Int`].
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The string, if this is a [`Value::String`].
    ///
    /// ```
    /// # use scriptling_plugin::Value;
    /// assert_eq!(Value::from("Ada").as_str(), Some("Ada"));
    /// assert_eq!(Value::from(3).as_str(), None);
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if this is a [`Value::List`].
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// The entries, if this is a [`Value::Dict`].
    pub fn as_dict(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Dict(entries) => Some(entries),
            _ => None,
        }
    }
}

impl Clone for Value {
    fn clone(&self) -> Self {
        crate::support::deep(|| match self {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(*b),
            Value::Int(i) => Value::Int(*i),
            Value::Float(f) => Value::Float(*f),
            Value::String(s) => Value::String(s.clone()),
            Value::List(items) => Value::List(items.clone()),
            Value::Dict(entries) => Value::Dict(entries.clone()),
            Value::Callback(cb) => Value::Callback(cb.clone()),
            Value::Object(r) => Value::Object(r.clone()),
        })
    }
}

impl fmt::Display for Value {
    /// Formats the value the way a Scriptling user would write it:
    /// `None`, `True`, `3`, `1.5`, `"text"`, `[1, 2]`, `{"k": 1}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::support::deep(|| self.fmt_shallow(f))
    }
}

impl Value {
    fn fmt_shallow(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("None"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 => {
                write!(f, "{x:.1}")
            }
            Value::Float(x) => write!(f, "{x}"),
            Value::String(s) => write!(f, "{s:?}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Value::Dict(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
            Value::Callback(cb) => write!(f, "<callback {}>", cb.id),
            Value::Object(r) => write!(f, "<{} object {}>", r.class, r.id),
        }
    }
}

macro_rules! from_lossless {
    ($variant:ident: $($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant(v.into())
            }
        }
    )*};
}
from_lossless!(Int: i8, i16, i32, i64, u8, u16, u32);
from_lossless!(Float: f32, f64);
from_lossless!(Bool: bool);
from_lossless!(String: String, &str, Box<str>, std::borrow::Cow<'_, str>);
from_lossless!(List: Vec<Value>);
from_lossless!(Dict: BTreeMap<String, Value>);

impl From<()> for Value {
    fn from((): ()) -> Self {
        Value::Null
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl From<ObjectRef> for Value {
    fn from(r: ObjectRef) -> Self {
        Value::Object(r)
    }
}

impl From<CallbackRef> for Value {
    fn from(c: CallbackRef) -> Self {
        Value::Callback(c)
    }
}

impl FromIterator<Value> for Value {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Self {
        Value::List(iter.into_iter().collect())
    }
}

impl<K: Into<String>> FromIterator<(K, Value)> for Value {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Self {
        Value::Dict(iter.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_reads_like_scriptling() {
        let v: Value =
            [("a", Value::from(1.0)), ("b", Value::from(vec![Value::Null, true.into()]))].into_iter().collect();
        assert_eq!(v.to_string(), r#"{"a": 1.0, "b": [None, True]}"#);
        assert_eq!(Value::from(0.25).to_string(), "0.25");
    }

    #[test]
    fn float_accessor_accepts_ints() {
        assert_eq!(Value::Int(3).as_float(), Some(3.0));
        assert_eq!(Value::from("x").as_float(), None);
    }
}
