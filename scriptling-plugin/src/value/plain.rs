//! Values as plain JSON, for `tools/call` (the Supex bridge's convention):
//! numbers with a fraction or an exponent are floats and others ints,
//! arrays are lists, objects are dicts, `null` is `None`. Read and written
//! straight from and to the wire, with no intermediate tree.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use crate::value::{ObjectRef, Value};

/// A value read from plain JSON.
pub(crate) struct FromPlain(pub(crate) Value);

impl<'de> Deserialize<'de> for FromPlain {
    /// Nested as deep as protocol values may be ([`MAX_DEPTH`](crate::value::codec::MAX_DEPTH)),
    /// decoded with `codec::decode`, which lifts serde_json's own limit.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let _nesting = crate::value::codec::Nesting::enter()?;
        crate::support::deep(|| deserializer.deserialize_any(PlainVisitor)).map(FromPlain)
    }
}

struct PlainVisitor;

impl<'de> Visitor<'de> for PlainVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Int(i))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        i64::try_from(u)
            .map(Value::Int)
            .map_err(|_| E::custom(format_args!("the integer {u} does not fit in a Scriptling int (64-bit signed)")))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Float(f))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(FromPlain(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        Ok(Value::Dict(read_entries(&mut map)?))
    }
}

/// A JSON object's members as values (keyword arguments, or a dict).
pub(crate) struct PlainObject(pub(crate) BTreeMap<String, Value>);

impl<'de> Deserialize<'de> for PlainObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = BTreeMap<String, Value>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of arguments by name")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(BTreeMap::new())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                read_entries(&mut map)
            }
        }
        deserializer.deserialize_any(Members).map(PlainObject)
    }
}

fn read_entries<'de, A: MapAccess<'de>>(map: &mut A) -> Result<BTreeMap<String, Value>, A::Error> {
    let mut entries = BTreeMap::new();
    while let Some(key) = map.next_key::<String>()? {
        let FromPlain(value) = map.next_value_seed(PlainSeed)?;
        entries.insert(key, value);
    }
    Ok(entries)
}

struct PlainSeed;

impl<'de> DeserializeSeed<'de> for PlainSeed {
    type Value = FromPlain;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<FromPlain, D::Error> {
        FromPlain::deserialize(deserializer)
    }
}

/// A value written as plain JSON. An object the call returned is written
/// as its protocol reference (`{"type":"remote","remote":{...}}`), which
/// the Scriptling methods on the same connection accept; a callback has no
/// plain form, and a non-finite float no JSON one: both fail.
pub(crate) struct Plain<'a>(pub(crate) &'a Value);

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        crate::support::deep(|| match self.0 {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Int(i) => serializer.serialize_i64(*i),
            Value::Float(f) if f.is_finite() => serializer.serialize_f64(*f),
            Value::Float(f) => Err(ser::Error::custom(format_args!("the float {f} has no JSON form"))),
            Value::String(s) => serializer.serialize_str(s),
            Value::List(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Plain(item))?;
                }
                seq.end()
            }
            Value::Dict(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, &Plain(value))?;
                }
                map.end()
            }
            Value::Object(remote) => Remote { kind: "remote", remote }.serialize(serializer),
            Value::Callback(_) => Err(ser::Error::custom("a callback has no plain JSON form")),
        })
    }
}

#[derive(Serialize)]
struct Remote<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    remote: &'a ObjectRef,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<Value, String> {
        serde_json::from_str::<FromPlain>(json).map(|p| p.0).map_err(|e| e.to_string())
    }

    fn write(value: &Value) -> Result<String, String> {
        serde_json::to_string(&Plain(value)).map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_with_a_fraction_or_an_exponent_are_floats() {
        assert_eq!(read("3").unwrap(), Value::Int(3));
        assert_eq!(read("-3").unwrap(), Value::Int(-3));
        assert_eq!(read("3.0").unwrap(), Value::Float(3.0));
        assert_eq!(read("3e2").unwrap(), Value::Float(300.0));
        assert!(read("18446744073709551615").unwrap_err().contains("does not fit"));
    }

    #[test]
    fn arrays_objects_and_null_read_and_write_back_alike() {
        let text = r#"{"a":[1,2.5,"x",true,null],"b":{"c":{}}}"#;
        let value = read(text).unwrap();
        let Value::Dict(entries) = &value else { panic!("{value:?}") };
        assert_eq!(entries["a"], Value::List(vec![1.into(), 2.5.into(), "x".into(), true.into(), Value::Null]));
        assert_eq!(write(&value).unwrap(), text);
    }

    #[test]
    fn what_has_no_plain_form_fails_to_write() {
        assert!(write(&Value::Float(f64::NAN)).unwrap_err().contains("no JSON form"));
        let callback = Value::Callback(crate::value::CallbackRef { id: "cb-1".into() });
        assert!(write(&Value::List(vec![callback])).unwrap_err().contains("callback"));
    }

    #[test]
    fn arguments_are_an_object_or_absent() {
        assert!(serde_json::from_str::<PlainObject>("null").unwrap().0.is_empty());
        assert_eq!(serde_json::from_str::<PlainObject>(r#"{"n":1}"#).unwrap().0["n"], Value::Int(1));
        assert!(serde_json::from_str::<PlainObject>("[1]").is_err());
    }
}
