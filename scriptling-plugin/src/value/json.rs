//! [`Json<T>`]: carry any serde type as a Scriptling value.

use std::borrow::Cow;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::support::short_type_name;
use crate::value::Value;
use crate::value::convert::{FromValue, FromValueError, IntoValue, IntoValueError};

/// Carries any serde type across the plugin boundary as plain Scriptling data:
/// structs and maps become dicts, sequences become lists, numbers become ints
/// or floats.
///
/// ```
/// use scriptling_plugin::{FromValue, IntoValue, Json, Value};
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct Point { x: i64, y: f64 }
///
/// let v = Json(Point { x: 1, y: 2.5 }).into_value().unwrap();
/// assert_eq!(v.to_string(), r#"{"x": 1, "y": 2.5}"#);
///
/// let Json(p) = Json::<Point>::from_value(v).unwrap();
/// assert_eq!(p, Point { x: 1, y: 2.5 });
///
/// let err = Json::<Point>::from_value(Value::from("nope")).unwrap_err();
/// assert!(err.reason().starts_with("is not a valid Point"));
/// ```
///
/// Callbacks and plugin objects have no JSON form: a `Json<T>` parameter
/// given one fails with a clear error; take a [`Value`] parameter instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Json<T>(pub T);

/// A `Json<T>` reads as the `T` inside:
///
/// ```
/// use scriptling_plugin::Json;
///
/// #[derive(serde::Deserialize)]
/// struct Options { limit: usize }
///
/// fn limit(options: &Json<Options>) -> usize {
///     options.limit
/// }
/// assert_eq!(limit(&Json(Options { limit: 3 })), 3);
/// ```
impl<T> std::ops::Deref for Json<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Json<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: DeserializeOwned> FromValue for Json<T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        let json = to_json(value)?;
        serde_json::from_value(json)
            .map(Json)
            .map_err(|e| FromValueError::new(format!("is not a valid {}: {e}", short_type_name::<T>())))
    }
    fn expected() -> Cow<'static, str> {
        format!("a {}", short_type_name::<T>()).into()
    }
}

impl<T: Serialize> IntoValue for Json<T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        let json = serde_json::to_value(&self.0)
            .map_err(|e| IntoValueError::new(format!("cannot convert {} to a value: {e}", short_type_name::<T>())))?;
        from_json(json)
    }
}

fn to_json(value: Value) -> Result<serde_json::Value, FromValueError> {
    crate::support::deep(|| to_json_shallow(value))
}

fn to_json_shallow(value: Value) -> Result<serde_json::Value, FromValueError> {
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => b.into(),
        Value::Int(i) => i.into(),
        Value::Float(f) => serde_json::Number::from_f64(f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| FromValueError::new(format!("contains the non-finite float {f}")))?,
        Value::String(s) => s.into(),
        Value::List(items) => serde_json::Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| to_json(v).map_err(|e| e.at_index(i)))
                .collect::<Result<_, _>>()?,
        ),
        Value::Dict(entries) => serde_json::Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| match to_json(v) {
                    Ok(v) => Ok((k, v)),
                    Err(e) => Err(e.at_key(&k)),
                })
                .collect::<Result<_, _>>()?,
        ),
        other @ (Value::Callback(_) | Value::Object(_)) => {
            return Err(FromValueError::new(format!("cannot be converted to JSON data: got {}", other.type_name())));
        }
    })
}

fn from_json(json: serde_json::Value) -> Result<Value, IntoValueError> {
    crate::support::deep(|| from_json_shallow(json))
}

fn from_json_shallow(json: serde_json::Value) -> Result<Value, IntoValueError> {
    Ok(match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                return Err(IntoValueError::new(format!(
                    "the integer {u} does not fit in a Scriptling int (64-bit signed)"
                )));
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::List(items.into_iter().map(from_json).collect::<Result<_, _>>()?),
        serde_json::Value::Object(entries) => {
            Value::Dict(entries.into_iter().map(|(k, v)| Ok((k, from_json(v)?))).collect::<Result<_, _>>()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn nested_errors_keep_their_path() {
        let v = Value::List(vec![Value::Float(1.0), Value::Float(f64::NAN)]);
        let err = Json::<Vec<f64>>::from_value(v).unwrap_err();
        assert_eq!(err.to_string(), "value[1] contains the non-finite float NaN");
    }

    #[test]
    fn serde_errors_surface() {
        let err = Json(HashMap::from([((1, 2), 3)])).into_value().unwrap_err();
        assert!(err.to_string().contains("key must be a string"), "{err}");
        let err = Json(u64::MAX).into_value().unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }
}
