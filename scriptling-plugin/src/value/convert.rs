//! Conversions between Rust types and [`Value`]: the [`FromValue`] and
//! [`IntoValue`] traits, their errors, and their implementations for
//! standard types.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;

use crate::value::Value;

/// Builds a Rust value from a Scriptling [`Value`].
///
/// Implemented for these standard types (and [`IntoValue`] for the same),
/// plus the SDK's handles ([`Callback`](crate::Callback),
/// [`Object<T>`](crate::Object)); implement it for your own types, or wrap a
/// serde type in [`Json<T>`](crate::Json):
///
/// | Rust | Scriptling value | notes |
/// |---|---|---|
/// | `bool` | bool | a bool, or an int by truthiness (`0` is false, any other int true), as the Go SDK accepts; strings, floats and others are refused |
/// | `i8`…`i64`, `u8`…`u64`, `isize`, `usize` | int | range-checked both ways, never wrapped |
/// | `f32`, `f64` | float | an int argument is accepted as a float |
/// | `String`, `&str` (results) | string | |
/// | `Vec<T>` | list | |
/// | `HashMap<String, T>`, `BTreeMap<String, T>` | dict | |
/// | `Option<T>` | `T` or None | |
/// | `(A, B, ...)` up to 8 | list of exactly that many items | tuples arrive as lists |
/// | `()` | None | |
/// | [`Value`] | anything | |
/// | [`Json<T>`](crate::Json) | list / dict / scalar | any serde type |
///
/// ```
/// use scriptling_plugin::{FromValue, FromValueError, Value};
///
/// #[derive(Debug)]
/// struct Celsius(f64);
///
/// impl FromValue for Celsius {
///     fn from_value(value: Value) -> Result<Self, FromValueError> {
///         let degrees = f64::from_value(value)?;
///         if degrees < -273.15 {
///             return Err(FromValueError::new("must be at least -273.15"));
///         }
///         Ok(Celsius(degrees))
///     }
///     fn expected() -> std::borrow::Cow<'static, str> {
///         "a temperature in Celsius".into()
///     }
/// }
///
/// assert_eq!(Celsius::from_value(Value::Int(20)).unwrap().0, 20.0);
/// let err = Celsius::from_value(Value::Float(-300.0)).unwrap_err();
/// assert_eq!(err.to_string(), "value must be at least -273.15");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be received from Scriptling",
    label = "`{Self}` does not implement `FromValue`",
    note = "use a supported type (bool, integers, f32/f64, String, Vec<T>, HashMap<String, T>, Option<T>, tuples, Value), derive it with `#[derive(FromValue)]`, wrap a serde type in `Json<T>`, or implement `FromValue` for it"
)]
pub trait FromValue: Sized {
    /// Converts the value, or explains why it cannot.
    fn from_value(value: Value) -> Result<Self, FromValueError>;

    /// What this type accepts, phrased for an error message: `"a string"`,
    /// `"a list"`, `"an int or None"`.
    fn expected() -> Cow<'static, str> {
        Cow::Owned(format!("a {}", crate::support::short_type_name::<Self>()))
    }

    /// Converts the argument passed for the parameter `param`. The SDK calls
    /// this, not [`from_value`](FromValue::from_value), for a function's
    /// arguments, so a [`Callback`](crate::Callback) can name its parameter
    /// in its errors; every other type keeps this default.
    #[doc(hidden)]
    // A `&Cow` rather than `&str`: a callback keeps the name, and cloning a
    // borrowed `'static` name costs no allocation.
    #[allow(clippy::ptr_arg)]
    fn from_argument(value: Value, param: &Cow<'static, str>) -> Result<Self, FromValueError> {
        let _ = param;
        Self::from_value(value)
    }
}

/// Turns a Rust value into a Scriptling [`Value`] (implemented for the
/// types listed on [`FromValue`]).
///
/// Conversion can fail (a `u64` above `i64::MAX`, a serde type that is not
/// representable); the error reaches the host as the call's error message.
///
/// ```
/// use scriptling_plugin::{IntoValue, Value};
///
/// assert_eq!(vec![1u8, 2].into_value().unwrap(), Value::List(vec![Value::Int(1), Value::Int(2)]));
/// assert!(u64::MAX.into_value().is_err());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned to Scriptling",
    label = "`{Self}` does not implement `IntoValue`",
    note = "return a supported type (bool, integers, f32/f64, String, &str, Vec<T>, HashMap<String, T>, Option<T>, tuples, Value, ()), derive it with `#[derive(IntoValue)]`, wrap a serde type in `Json<T>`, or implement `IntoValue` for it"
)]
pub trait IntoValue {
    /// Converts the value.
    fn into_value(self) -> Result<Value, IntoValueError>;

    /// For a type written as a dict, its keys in declaration order, so help
    /// text can show a default as the user wrote the type rather than in the
    /// dict's sorted order. `#[derive(IntoValue)]` fills it in.
    #[doc(hidden)]
    fn key_order() -> &'static [&'static str]
    where
        Self: Sized,
    {
        &[]
    }
}

/// Why a [`Value`] could not become the requested Rust type.
///
/// It records where inside the value the problem is (`[2]`, `["name"]`) and
/// a reason phrased to follow the value's name: the SDK prefixes it with the
/// function and argument, giving
/// `greet(): argument 'names'[2] must be a string, got int`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FromValueError {
    path: Vec<PathSegment>,
    reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PathSegment {
    Index(usize),
    Key(String),
}

impl FromValueError {
    /// The value has the wrong type: `must be <expected>, got <type of value>`.
    ///
    /// ```
    /// # use scriptling_plugin::{FromValueError, Value};
    /// let err = FromValueError::mismatch("a string", &Value::Int(1));
    /// assert_eq!(err.reason(), "must be a string, got int");
    /// ```
    pub fn mismatch(expected: &str, got: &Value) -> Self {
        Self::new(format!("must be {expected}, got {}", got.type_name()))
    }

    /// Any other reason, phrased to follow the value's name
    /// (`"must be positive"`, `"is not a valid date: ..."`).
    pub fn new(reason: impl Into<String>) -> Self {
        Self { path: Vec::new(), reason: reason.into() }
    }

    /// Marks the error as coming from the list item at `index`.
    pub fn at_index(mut self, index: usize) -> Self {
        self.path.push(PathSegment::Index(index));
        self
    }

    /// Marks the error as coming from the dict entry `key`.
    pub fn at_key(mut self, key: &str) -> Self {
        self.path.push(PathSegment::Key(key.to_owned()));
        self
    }

    /// The reason alone, without the path.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The path into the value, outermost first, as Scriptling indexes it:
    /// `[2]['name']`, or empty.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                PathSegment::Index(i) => out.push_str(&format!("[{i}]")),
                PathSegment::Key(k) => out.push_str(&format!("[{}]", crate::support::string_literal(k, '\''))),
            }
        }
        out
    }
}

impl fmt::Display for FromValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "value{} {}", self.path(), self.reason)
    }
}

impl std::error::Error for FromValueError {}

/// Why a Rust value could not become a [`Value`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntoValueError {
    message: String,
    /// A refusal that names what failed itself (an object limit), not a
    /// value that could not be converted.
    refusal: bool,
}

impl IntoValueError {
    /// An error with this message.
    ///
    /// ```
    /// # use scriptling_plugin::IntoValueError;
    /// assert_eq!(IntoValueError::new("too big").to_string(), "too big");
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), refusal: false }
    }

    /// A refusal to make the value, told as it is: the call failed for
    /// this reason, not because its result could not be converted.
    pub(crate) fn refusal(message: impl Into<String>) -> Self {
        Self { message: message.into(), refusal: true }
    }

    /// Whether this is a [`refusal`](Self::refusal).
    pub(crate) fn is_refusal(&self) -> bool {
        self.refusal
    }

    /// The error inside `context` (`field 'c'`), for a value within a
    /// value; a refusal stays as it is, wherever it happened.
    pub(crate) fn within(self, context: impl fmt::Display) -> Self {
        match self.refusal {
            true => self,
            false => Self::new(format!("{context}: {}", self.message)),
        }
    }
}

impl fmt::Display for IntoValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for IntoValueError {}

// ---- Value itself, unit, bool ------------------------------------------------

impl FromValue for Value {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        Ok(value)
    }
    fn expected() -> Cow<'static, str> {
        "any value".into()
    }
}

impl IntoValue for Value {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(self)
    }
}

impl FromValue for () {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Null => Ok(()),
            other => Err(FromValueError::mismatch("None", &other)),
        }
    }
    fn expected() -> Cow<'static, str> {
        "None".into()
    }
}

impl IntoValue for () {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Null)
    }
}

/// Ints convert by truthiness, as in the Go SDK that scripts were written
/// against (`Fragile(0)` passes `false`); nothing else is truthy here, so a
/// string or float where a bool belongs is still an error.
impl FromValue for bool {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Bool(b) => Ok(b),
            Value::Int(i) => Ok(i != 0),
            other => Err(FromValueError::mismatch("a bool", &other)),
        }
    }
    fn expected() -> Cow<'static, str> {
        "a bool".into()
    }
}

impl IntoValue for bool {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Bool(self))
    }
}

// ---- integers ----------------------------------------------------------------

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: Value) -> Result<Self, FromValueError> {
                match value {
                    Value::Int(i) => <$t>::try_from(i).map_err(|_| {
                        // Scriptling ints are i64: name only the bounds a script can reach.
                        FromValueError::new(format!(
                            "must be an int between {} and {}, got {i}",
                            (<$t>::MIN as i128).max(i64::MIN.into()),
                            (<$t>::MAX as i128).min(i64::MAX.into())
                        ))
                    }),
                    other => Err(FromValueError::mismatch("an int", &other)),
                }
            }
            fn expected() -> Cow<'static, str> {
                "an int".into()
            }
        }

        impl IntoValue for $t {
            fn into_value(self) -> Result<Value, IntoValueError> {
                i64::try_from(self).map(Value::Int).map_err(|_| {
                    IntoValueError::new(format!(
                        "the {} {self} does not fit in a Scriptling int (64-bit signed)",
                        stringify!($t)
                    ))
                })
            }
        }
    )*};
}
integer!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

// ---- floats ------------------------------------------------------------------

impl FromValue for f64 {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Float(f) => Ok(f),
            Value::Int(i) => Ok(i as f64),
            other => Err(FromValueError::mismatch("a float", &other)),
        }
    }
    fn expected() -> Cow<'static, str> {
        "a float".into()
    }
}

impl FromValue for f32 {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        let f = f64::from_value(value)?;
        if f.is_finite() && f.abs() > f64::from(f32::MAX) {
            return Err(FromValueError::new(format!("must be a float within the 32-bit range, got {f}")));
        }
        Ok(f as f32)
    }
    fn expected() -> Cow<'static, str> {
        "a float".into()
    }
}

impl IntoValue for f64 {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Float(self))
    }
}

impl IntoValue for f32 {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Float(f64::from(self)))
    }
}

// ---- strings -----------------------------------------------------------------

impl FromValue for String {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(FromValueError::mismatch("a string", &other)),
        }
    }
    fn expected() -> Cow<'static, str> {
        "a string".into()
    }
}

impl IntoValue for String {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::String(self))
    }
}

impl IntoValue for &str {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::String(self.to_owned()))
    }
}

/// A reference converts a clone: `&String`, `&Vec<T>`, `&Value`, ...
impl<T: IntoValue + Clone> IntoValue for &T {
    fn into_value(self) -> Result<Value, IntoValueError> {
        self.clone().into_value()
    }
}

impl IntoValue for Cow<'_, str> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::String(self.into_owned()))
    }
}

// ---- containers --------------------------------------------------------------

impl<T: FromValue> FromValue for Vec<T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::List(items) => {
                items.into_iter().enumerate().map(|(i, item)| T::from_value(item).map_err(|e| e.at_index(i))).collect()
            }
            other => Err(FromValueError::mismatch("a list", &other)),
        }
    }
    fn expected() -> Cow<'static, str> {
        "a list".into()
    }
}

impl<T: IntoValue> IntoValue for Vec<T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        self.into_iter().map(IntoValue::into_value).collect::<Result<_, _>>().map(Value::List)
    }
}

fn dict_entries<T: FromValue>(
    value: Value,
) -> Result<impl Iterator<Item = Result<(String, T), FromValueError>>, FromValueError> {
    match value {
        Value::Dict(entries) => {
            Ok(entries.into_iter().map(|(k, v)| T::from_value(v).map(|v| (k.clone(), v)).map_err(|e| e.at_key(&k))))
        }
        other => Err(FromValueError::mismatch("a dict", &other)),
    }
}

impl<T: FromValue, S: BuildHasher + Default> FromValue for HashMap<String, T, S> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        dict_entries(value)?.collect()
    }
    fn expected() -> Cow<'static, str> {
        "a dict".into()
    }
}

impl<T: FromValue> FromValue for BTreeMap<String, T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        dict_entries(value)?.collect()
    }
    fn expected() -> Cow<'static, str> {
        "a dict".into()
    }
}

impl<T: IntoValue, S> IntoValue for HashMap<String, T, S> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        self.into_iter().map(|(k, v)| Ok((k, v.into_value()?))).collect::<Result<_, _>>().map(Value::Dict)
    }
}

impl<T: IntoValue> IntoValue for BTreeMap<String, T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        self.into_iter().map(|(k, v)| Ok((k, v.into_value()?))).collect::<Result<_, _>>().map(Value::Dict)
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
    fn expected() -> Cow<'static, str> {
        format!("{} or None", T::expected()).into()
    }
    fn from_argument(value: Value, param: &Cow<'static, str>) -> Result<Self, FromValueError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_argument(other, param).map(Some),
        }
    }
}

impl<T: IntoValue> IntoValue for Option<T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        self.map_or(Ok(Value::Null), IntoValue::into_value)
    }
}

// ---- tuples ------------------------------------------------------------------

macro_rules! tuple {
    ($len:literal => $($name:ident : $idx:tt),+) => {
        impl<$($name: FromValue),+> FromValue for ($($name,)+) {
            fn from_value(value: Value) -> Result<Self, FromValueError> {
                // The same reading as a derived tuple struct's.
                let mut items = crate::value::derive::list(value, $len, &Self::expected())?;
                Ok(($(crate::value::derive::item(&mut items, $idx, <$name as FromValue>::from_value)?,)+))
            }
            fn expected() -> Cow<'static, str> {
                concat!("a list of ", $len, " items").into()
            }
        }

        impl<$($name: IntoValue),+> IntoValue for ($($name,)+) {
            fn into_value(self) -> Result<Value, IntoValueError> {
                Ok(Value::List(vec![$(self.$idx.into_value()?),+]))
            }
        }
    };
}
tuple!(1 => A: 0);
tuple!(2 => A: 0, B: 1);
tuple!(3 => A: 0, B: 1, C: 2);
tuple!(4 => A: 0, B: 1, C: 2, D: 3);
tuple!(5 => A: 0, B: 1, C: 2, D: 3, E: 4);
tuple!(6 => A: 0, B: 1, C: 2, D: 3, E: 4, F: 5);
tuple!(7 => A: 0, B: 1, C: 2, D: 3, E: 4, F: 5, G: 6);
tuple!(8 => A: 0, B: 1, C: 2, D: 3, E: 4, F: 5, G: 6, H: 7);

#[cfg(test)]
mod tests {
    use super::*;

    fn from<T: FromValue>(v: Value) -> Result<T, String> {
        T::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn integers_are_range_checked_both_ways() {
        assert_eq!(from::<u8>(Value::Int(255)), Ok(255));
        assert_eq!(from::<u8>(Value::Int(256)), Err("value must be an int between 0 and 255, got 256".into()));
        assert_eq!(from::<i8>(Value::Int(-129)), Err("value must be an int between -128 and 127, got -129".into()));
        assert_eq!(
            from::<u64>(Value::Int(-1)).unwrap_err(),
            "value must be an int between 0 and 9223372036854775807, got -1"
        );
        assert_eq!(from::<i64>(Value::Float(1.0)), Err("value must be an int, got float".into()));
        assert_eq!(from::<i64>(Value::Bool(true)), Err("value must be an int, got bool".into()));
        assert_eq!(i64::MAX.into_value(), Ok(Value::Int(i64::MAX)));
        assert_eq!((i64::MAX as u64).into_value(), Ok(Value::Int(i64::MAX)));
        assert_eq!(
            (i64::MAX as u64 + 1).into_value().unwrap_err().to_string(),
            "the u64 9223372036854775808 does not fit in a Scriptling int (64-bit signed)"
        );
        assert!(usize::MAX.into_value().is_err());
    }

    #[test]
    fn bools_accept_ints_by_truthiness_and_nothing_else() {
        assert_eq!(from::<bool>(Value::Bool(true)), Ok(true));
        assert_eq!(from::<bool>(Value::Int(0)), Ok(false));
        assert_eq!(from::<bool>(Value::Int(1)), Ok(true));
        assert_eq!(from::<bool>(Value::Int(-7)), Ok(true));
        assert_eq!(from::<bool>(Value::from("")), Err("value must be a bool, got string".into()));
        assert_eq!(from::<bool>(Value::Float(1.0)), Err("value must be a bool, got float".into()));
        assert_eq!(from::<bool>(Value::Null), Err("value must be a bool, got None".into()));
    }

    #[test]
    fn floats_accept_ints() {
        assert_eq!(from::<f64>(Value::Int(2)), Ok(2.0));
        assert_eq!(from::<f32>(Value::Float(0.5)), Ok(0.5));
        assert!(from::<f32>(Value::Float(1e300)).unwrap_err().contains("32-bit range"));
        assert_eq!(from::<f64>(Value::from("1")), Err("value must be a float, got string".into()));
        assert_eq!(1.5f32.into_value(), Ok(Value::Float(1.5)));
    }

    #[test]
    fn containers_report_the_path() {
        let v = Value::List(vec![Value::from("a"), Value::Int(2)]);
        assert_eq!(from::<Vec<String>>(v), Err("value[1] must be a string, got int".into()));
        let nested: Value = [("xs", Value::List(vec![Value::Int(1), Value::Null]))].into_iter().collect();
        assert_eq!(
            from::<HashMap<String, Vec<i64>>>(nested.clone()),
            Err("value['xs'][1] must be an int, got None".into())
        );
        let ok = from::<BTreeMap<String, Vec<Option<i64>>>>(nested).unwrap();
        assert_eq!(ok["xs"], vec![Some(1), None]);
        assert_eq!(from::<Vec<i64>>(Value::Dict(BTreeMap::new())), Err("value must be a list, got dict".into()));
    }

    #[test]
    fn options_accept_none() {
        assert_eq!(from::<Option<String>>(Value::Null), Ok(None));
        assert_eq!(from::<Option<String>>(Value::from("x")), Ok(Some("x".into())));
        assert_eq!(<Option<String>>::expected(), "a string or None");
        assert_eq!(None::<i64>.into_value(), Ok(Value::Null));
    }

    #[test]
    fn tuples_are_lists_of_exact_length() {
        let v = Value::List(vec![Value::from("a"), Value::Int(1)]);
        assert_eq!(from::<(String, i64)>(v.clone()), Ok(("a".into(), 1)));
        assert_eq!(
            from::<(String, i64, bool)>(v.clone()),
            Err("value must be a list of 3 items, got a list of 2".into())
        );
        assert_eq!(from::<(i64, i64)>(v), Err("value[0] must be an int, got string".into()));
        assert_eq!(from::<(i64,)>(Value::Int(1)), Err("value must be a list of 1 items, got int".into()));
        assert_eq!(("x", 2, 0.5).into_value().unwrap().to_string(), r#"["x", 2, 0.5]"#);
    }

    #[test]
    fn unit_and_value() {
        assert_eq!(from::<()>(Value::Null), Ok(()));
        assert_eq!(from::<()>(Value::Int(0)), Err("value must be None, got int".into()));
        assert_eq!(from::<Value>(Value::Int(3)), Ok(Value::Int(3)));
        assert_eq!(().into_value(), Ok(Value::Null));
    }

    #[test]
    fn maps_round_trip() {
        let mut m = HashMap::new();
        m.insert("b".to_string(), 2u16);
        m.insert("a".to_string(), 1u16);
        let v = m.clone().into_value().unwrap();
        assert_eq!(v.to_string(), r#"{"a": 1, "b": 2}"#);
        assert_eq!(from::<HashMap<String, u16>>(v), Ok(m));
    }

    #[test]
    fn a_refusal_inside_a_value_stays_as_it_is() {
        let plain = IntoValueError::new("too big").within("field 'c'");
        assert_eq!((plain.to_string(), plain.is_refusal()), ("field 'c': too big".into(), false));
        let refusal = IntoValueError::refusal("the object limit is reached").within("field 'c'").within("item 0");
        assert_eq!((refusal.to_string(), refusal.is_refusal()), ("the object limit is reached".into(), true));
    }
}
