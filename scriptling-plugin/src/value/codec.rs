//! The wire codec for [`Value`]: serde implementations that are lenient on
//! input and strict on output (the rules are documented on [`Value`]), and
//! depth-limited decoding.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{Error as _, Serialize, SerializeMap, Serializer};

use crate::value::{CallbackRef, ObjectRef, Value, taken};

/// The deepest nesting of values accepted on input.
pub(crate) const MAX_DEPTH: usize = 1_000;

thread_local! {
    /// How many values are being decoded, one inside the other, on this thread.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One level of value nesting, counted while it is being decoded (plain
/// JSON values, `value::plain`, count the same way).
pub(crate) struct Nesting;

impl Nesting {
    pub(crate) fn enter<E: de::Error>() -> Result<Nesting, E> {
        DEPTH.with(|depth| {
            if depth.get() >= MAX_DEPTH {
                return Err(E::custom(format_args!("values are nested more than {MAX_DEPTH} levels deep")));
            }
            depth.set(depth.get() + 1);
            Ok(Nesting)
        })
    }
}

impl Drop for Nesting {
    fn drop(&mut self) {
        DEPTH.with(|depth| depth.set(depth.get() - 1));
    }
}

/// Decodes `bytes` as `T`, whose values may nest up to [`MAX_DEPTH`] deep.
///
/// serde_json's own recursion limit (128 JSON levels, about 63 values) is
/// lifted: [`MAX_DEPTH`] bounds the values, and everything else in a
/// request (unknown fields, ids) is skipped without recursion.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    decode_from(serde_json::Deserializer::from_slice(bytes))
}

/// Like [`decode`], for text already known to be UTF-8 (its strings are
/// then not checked again).
pub(crate) fn decode_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    decode_from(serde_json::Deserializer::from_str(text))
}

/// [`decode_str`] of `text[range]`, a value between JSON tokens (so on
/// character boundaries; were it not, its bytes are decoded and checked).
pub(crate) fn decode_str_range<'a, T: Deserialize<'a>>(text: &'a str, range: Range<usize>) -> serde_json::Result<T> {
    match text.get(range.clone()) {
        Some(text) => decode_str(text),
        None => decode(&text.as_bytes()[range]),
    }
}

fn decode_from<'a, R: serde_json::de::Read<'a>, T: Deserialize<'a>>(
    mut de: serde_json::Deserializer<R>,
) -> serde_json::Result<T> {
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A value's wire JSON in three parts, [`head`](Encoded::head), `body`,
/// [`tail`](Encoded::tail), written one after the other. A large string
/// result is sent from its own buffer: `body` is the string itself, moved,
/// between the fixed head and tail of a string value, so it is neither
/// copied nor written escaped into a second buffer of its size. Anything
/// else is all `body`. (A flag, not two slices: a batch holds one per
/// element, and 32 more bytes each showed in its peak memory.)
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Encoded {
    pub(crate) body: Vec<u8>,
    /// `body` is a string's contents, to be framed as a string value.
    string: bool,
}

const STRING_HEAD: &[u8] = br#"{"type":"string","value":""#;
const STRING_TAIL: &[u8] = br#""}"#;

impl Encoded {
    /// What comes before `body`.
    pub(crate) fn head(&self) -> &'static [u8] {
        if self.string { STRING_HEAD } else { b"" }
    }

    /// What comes after `body`.
    pub(crate) fn tail(&self) -> &'static [u8] {
        if self.string { STRING_TAIL } else { b"" }
    }

    /// The length of the whole JSON.
    pub(crate) fn len(&self) -> usize {
        self.head().len() + self.body.len() + self.tail().len()
    }

    /// Appends the whole JSON to `out`.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head());
        out.extend_from_slice(&self.body);
        out.extend_from_slice(self.tail());
    }
}

impl From<Vec<u8>> for Encoded {
    fn from(body: Vec<u8>) -> Self {
        Encoded { body, string: false }
    }
}

/// Strings at least this long are checked for characters JSON must escape;
/// those without any are sent from their own buffer ([`Encoded`]). Below
/// it the copy costs less than the check.
const IN_PLACE_FROM: usize = 64 * 1024;

/// [`encode`] for a value that can be given away: a long string that
/// needs no escaping becomes the [`Encoded`] body as it is.
pub(crate) fn encode_owned(value: Value) -> serde_json::Result<Encoded> {
    match value {
        Value::String(s) if s.len() >= IN_PLACE_FROM && !needs_escape(s.as_bytes()) => {
            Ok(Encoded { body: s.into_bytes(), string: true })
        }
        other => encode(&other).map(Encoded::from),
    }
}

/// Whether JSON needs any byte of `bytes` escaped.
fn needs_escape(bytes: &[u8]) -> bool {
    crate::support::json_special(bytes).is_some()
}

/// Encodes `value` as its wire JSON: exactly what its `Serialize` writes,
/// with the common scalar results written directly rather than through a
/// serde map (a call's result is encoded on the way to every answer).
pub(crate) fn encode(value: &Value) -> serde_json::Result<Vec<u8>> {
    // Room for a small value and the response envelope put around it
    // (`rpc::into_result_line`), so the answer needs no second buffer.
    let mut out = Vec::with_capacity(128);
    match value {
        Value::Null => out.extend_from_slice(br#"{"type":"null"}"#),
        Value::Bool(b) => {
            out.extend_from_slice(br#"{"type":"bool","value":"#);
            out.extend_from_slice(if *b { b"true" } else { b"false" });
            out.push(b'}');
        }
        Value::Int(i) => {
            out.extend_from_slice(br#"{"type":"int","value":"#);
            serde_json::to_writer(&mut out, i)?;
            out.push(b'}');
        }
        Value::String(s) => {
            // The value's 28 bytes around the string, and the envelope's room.
            out.reserve(s.len() + 28 + 64);
            out.extend_from_slice(br#"{"type":"string","value":"#);
            serde_json::to_writer(&mut out, s)?;
            out.push(b'}');
        }
        other => serde_json::to_writer(&mut out, other)?,
    }
    Ok(out)
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        crate::support::deep(|| self.serialize_shallow(serializer))
    }
}

impl Value {
    fn serialize_shallow<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (tag, len) = match self {
            Value::Null => ("null", 1),
            Value::Bool(_) => ("bool", 2),
            Value::Int(_) => ("int", 2),
            Value::Float(_) => ("float", 2),
            Value::String(_) => ("string", 2),
            Value::List(_) => ("list", 2),
            Value::Dict(_) => ("dict", 2),
            Value::Callback(_) => ("callback", 2),
            Value::Object(_) => ("remote", 2),
        };
        if let Value::Float(f) = self {
            if !f.is_finite() {
                return Err(S::Error::custom(format_args!("cannot send the float {f}: JSON has no NaN or Infinity")));
            }
        }
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("type", tag)?;
        match self {
            Value::Null => {}
            Value::Bool(b) => map.serialize_entry("value", b)?,
            Value::Int(i) => map.serialize_entry("value", i)?,
            Value::Float(f) => map.serialize_entry("value", f)?,
            Value::String(s) => map.serialize_entry("value", s)?,
            Value::List(items) => map.serialize_entry("items", items)?,
            Value::Dict(entries) => map.serialize_entry("entries", entries)?,
            Value::Callback(cb) => map.serialize_entry("callback", cb)?,
            Value::Object(r) => map.serialize_entry("remote", r)?,
        }
        map.end()
    }
}

/// The `type` tag, matched without allocating.
enum Tag {
    Null,
    Bool,
    Int,
    Float,
    String,
    List,
    Dict,
    Callback,
    Remote,
    Unknown(String),
}

impl<'de> Deserialize<'de> for Tag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TagVisitor;
        impl Visitor<'_> for TagVisitor {
            type Value = Tag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value type tag string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Tag, E> {
                Ok(match s {
                    "" | "null" => Tag::Null,
                    "bool" => Tag::Bool,
                    "int" => Tag::Int,
                    "float" => Tag::Float,
                    "string" => Tag::String,
                    "list" => Tag::List,
                    "dict" => Tag::Dict,
                    "callback" => Tag::Callback,
                    "remote" => Tag::Remote,
                    other => Tag::Unknown(other.to_owned()),
                })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Tag, E> {
                Ok(Tag::Null)
            }
        }
        d.deserialize_any(TagVisitor)
    }
}

/// The `value` payload, buffered because `type` may come after it.
enum Scalar {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(String),
    /// An array or object where a scalar was expected.
    Container(&'static str),
}

impl Scalar {
    fn json_kind(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "a boolean",
            Scalar::I64(_) | Scalar::U64(_) | Scalar::F64(_) => "a number",
            Scalar::Str(_) => "a string",
            Scalar::Container(kind) => kind,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON scalar")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_i64<E>(self, i: i64) -> Result<Scalar, E> {
                Ok(Scalar::I64(i))
            }
            fn visit_u64<E>(self, u: u64) -> Result<Scalar, E> {
                Ok(Scalar::U64(u))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Scalar, E> {
                Ok(Scalar::F64(f))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Scalar, E> {
                // A large one may take over the line it lies in.
                Ok(Scalar::Str(taken::to_owned(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(s))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Container("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Container("an object"))
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

/// Field names of the wire shape, matched without allocating.
enum Field {
    Type,
    Value,
    Items,
    Entries,
    Callback,
    Remote,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, s: &str) -> Result<Field, E> {
                Ok(match s {
                    "type" => Field::Type,
                    "value" => Field::Value,
                    "items" => Field::Items,
                    "entries" => Field::Entries,
                    "callback" => Field::Callback,
                    "remote" => Field::Remote,
                    _ => Field::Other,
                })
            }
        }
        d.deserialize_identifier(FieldVisitor)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let _nesting = Nesting::enter()?;
        crate::support::deep(|| d.deserialize_map(ValueVisitor))
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a transport value object such as {"type":"int","value":1}"#)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut tag = None;
        let mut scalar = None;
        let mut items: Option<Vec<Value>> = None;
        let mut entries: Option<BTreeMap<String, Value>> = None;
        let mut callback: Option<CallbackRef> = None;
        let mut remote: Option<ObjectRef> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Type => tag = Some(map.next_value::<Tag>()?),
                Field::Value => scalar = Some(map.next_value::<Scalar>()?),
                Field::Items => items = map.next_value::<Option<Vec<Value>>>()?,
                Field::Entries => entries = map.next_value::<Option<BTreeMap<String, Value>>>()?,
                Field::Callback => callback = map.next_value::<Option<CallbackRef>>()?,
                Field::Remote => remote = map.next_value::<Option<ObjectRef>>()?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let tag = tag.unwrap_or(Tag::Null);
        Ok(match tag {
            Tag::Null => Value::Null,
            Tag::Bool => match scalar {
                Some(Scalar::Bool(b)) => Value::Bool(b),
                other => return Err(invalid("bool", "true or false", other)),
            },
            Tag::Int => match scalar {
                Some(Scalar::I64(i)) => Value::Int(i),
                Some(Scalar::U64(u)) => match i64::try_from(u) {
                    Ok(i) => Value::Int(i),
                    Err(_) => {
                        return Err(de::Error::custom(format_args!(
                            "invalid int value: {u} is outside the 64-bit integer range"
                        )));
                    }
                },
                Some(Scalar::F64(f)) => {
                    return Err(de::Error::custom(format_args!("invalid int value: {f} is not an integer")));
                }
                other => return Err(invalid("int", "an integer", other)),
            },
            Tag::Float => match scalar {
                Some(Scalar::F64(f)) => Value::Float(f),
                Some(Scalar::I64(i)) => Value::Float(i as f64),
                Some(Scalar::U64(u)) => Value::Float(u as f64),
                other => return Err(invalid("float", "a number", other)),
            },
            Tag::String => match scalar {
                Some(Scalar::Str(s)) => Value::String(s),
                other => return Err(invalid("string", "a string", other)),
            },
            Tag::List => Value::List(items.unwrap_or_default()),
            Tag::Dict => Value::Dict(entries.unwrap_or_default()),
            Tag::Callback => match callback {
                Some(cb) => Value::Callback(cb),
                None => return Err(de::Error::custom("invalid callback value: missing \"callback\": {\"id\": ...}")),
            },
            Tag::Remote => match remote {
                Some(r) => Value::Object(r),
                None => return Err(de::Error::custom("invalid remote value: missing \"remote\": {\"id\": ...}")),
            },
            Tag::Unknown(t) => {
                return Err(de::Error::custom(format_args!("unsupported value type {t:?}")));
            }
        })
    }
}

fn invalid<E: de::Error>(tag: &str, expected: &str, got: Option<Scalar>) -> E {
    match got {
        None => E::custom(format_args!("invalid {tag} value: missing \"value\" (expected {expected})")),
        Some(s) => E::custom(format_args!("invalid {tag} value: expected {expected}, got {}", s.json_kind())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::convert::FromValue;

    fn decode(s: &str) -> Result<Value, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    fn encode(v: &Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn decodes_every_tag() {
        assert_eq!(decode(r#"{"type":"null"}"#), Ok(Value::Null));
        assert_eq!(decode(r#"{"type":"bool","value":false}"#), Ok(Value::Bool(false)));
        assert_eq!(decode(r#"{"type":"int","value":0}"#), Ok(Value::Int(0)));
        assert_eq!(decode(r#"{"type":"float","value":2.5}"#), Ok(Value::Float(2.5)));
        assert_eq!(decode(r#"{"type":"string","value":""}"#), Ok(Value::from("")));
        assert_eq!(
            decode(r#"{"type":"list","items":[{"type":"int","value":1}]}"#),
            Ok(Value::List(vec![Value::Int(1)]))
        );
        assert_eq!(
            decode(r#"{"type":"dict","entries":{"k":{"type":"bool","value":true}}}"#),
            Ok([("k", Value::Bool(true))].into_iter().collect())
        );
        assert_eq!(
            decode(r#"{"type":"callback","callback":{"id":"cb-1"}}"#),
            Ok(Value::Callback(CallbackRef { id: "cb-1".into() }))
        );
        assert_eq!(
            decode(r#"{"type":"remote","remote":{"library":"plugin.hello","class":"Counter","id":"7"}}"#),
            Ok(Value::Object(ObjectRef { library: "plugin.hello".into(), class: "Counter".into(), id: "7".into() }))
        );
    }

    #[test]
    fn lenient_decoding_matches_the_host() {
        // Missing, empty or null type is null.
        assert_eq!(decode(r#"{}"#), Ok(Value::Null));
        assert_eq!(decode(r#"{"type":""}"#), Ok(Value::Null));
        assert_eq!(decode(r#"{"type":null,"value":3}"#), Ok(Value::Null));
        // Empty containers omit their payload.
        assert_eq!(decode(r#"{"type":"list"}"#), Ok(Value::List(vec![])));
        assert_eq!(decode(r#"{"type":"dict"}"#), Ok(Value::Dict(BTreeMap::new())));
        assert_eq!(decode(r#"{"type":"list","items":null}"#), Ok(Value::List(vec![])));
        // Integer-looking floats, as Go prints them.
        assert_eq!(decode(r#"{"type":"float","value":3}"#), Ok(Value::Float(3.0)));
        assert_eq!(decode(r#"{"type":"float","value":1e+21}"#), Ok(Value::Float(1e21)));
        let neg_zero = decode(r#"{"type":"float","value":-0}"#).unwrap();
        assert!(matches!(neg_zero, Value::Float(f) if f == 0.0 && f.is_sign_negative()));
        // Key order does not matter; unknown keys are ignored.
        assert_eq!(decode(r#"{"value":"x","extra":[1,{"a":2}],"type":"string"}"#), Ok(Value::from("x")));
        // Duplicate keys: last wins.
        assert_eq!(
            decode(r#"{"type":"dict","entries":{"a":{"type":"int","value":1},"a":{"type":"int","value":2}}}"#),
            Ok([("a", Value::Int(2))].into_iter().collect())
        );
    }

    #[test]
    fn ints_are_exact_and_range_checked() {
        assert_eq!(decode(r#"{"type":"int","value":9223372036854775807}"#), Ok(Value::Int(i64::MAX)));
        assert_eq!(decode(r#"{"type":"int","value":-9223372036854775808}"#), Ok(Value::Int(i64::MIN)));
        assert_eq!(decode(r#"{"type":"int","value":9007199254740993}"#), Ok(Value::Int(9007199254740993)));
        let err = decode(r#"{"type":"int","value":9223372036854775808}"#).unwrap_err();
        assert!(err.contains("outside the 64-bit integer range"), "{err}");
        let err = decode(r#"{"type":"int","value":1.5}"#).unwrap_err();
        assert!(err.contains("1.5 is not an integer"), "{err}");
    }

    #[test]
    fn malformed_payloads_name_the_problem() {
        let cases = [
            (r#"{"type":"bool","value":"yes"}"#, "invalid bool value: expected true or false, got a string"),
            (r#"{"type":"string","value":5}"#, "invalid string value: expected a string, got a number"),
            (r#"{"type":"string"}"#, "invalid string value: missing \"value\""),
            (r#"{"type":"int","value":[1]}"#, "invalid int value: expected an integer, got an array"),
            (r#"{"type":"Int","value":1}"#, "unsupported value type \"Int\""),
            (r#"{"type":"set"}"#, "unsupported value type \"set\""),
            (r#"{"type":"callback"}"#, "invalid callback value"),
            (r#"{"type":"remote","remote":{"library":"x"}}"#, "missing field `id`"),
            (r#"[1]"#, "invalid type: sequence"),
        ];
        for (input, want) in cases {
            let err = decode(input).unwrap_err();
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    #[test]
    fn strings_keep_escapes_nul_and_astral_characters() {
        let v = decode(r#"{"type":"string","value":"a\u003cb\u0000c\ud83d\ude00"}"#).unwrap();
        assert_eq!(v, Value::from("a<b\0c😀"));
        assert_eq!(decode(&encode(&v)).unwrap(), v);
    }

    #[test]
    fn encoding_is_strict_and_tagged() {
        assert_eq!(encode(&Value::Float(3.0)), r#"{"type":"float","value":3.0}"#);
        assert_eq!(encode(&Value::Null), r#"{"type":"null"}"#);
        assert_eq!(encode(&Value::Int(i64::MIN)), r#"{"type":"int","value":-9223372036854775808}"#);
        assert_eq!(encode(&Value::List(vec![])), r#"{"type":"list","items":[]}"#);
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let nested = Value::List(vec![Value::Float(bad)]);
            let err = serde_json::to_string(&nested).unwrap_err().to_string();
            assert!(err.contains("JSON has no NaN or Infinity"), "{err}");
        }
    }

    #[test]
    fn direct_encoding_is_what_serde_writes() {
        let values = [
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::Int(i64::MIN),
            Value::Int(0),
            Value::Int(42),
            Value::String(String::new()),
            Value::String("tab\t \"quote\" \u{1}\u{1F600} \\".into()),
            Value::Float(1.5),
            Value::List(vec![Value::Int(1), Value::String("a".into())]),
        ];
        for v in values {
            assert_eq!(String::from_utf8(super::encode(&v).unwrap()).unwrap(), encode(&v), "{v:?}");
        }
        assert!(super::encode(&Value::Float(f64::NAN)).is_err());
    }

    #[test]
    fn round_trips() {
        let v: Value = [
            ("n", Value::Null),
            ("f", Value::Float(-0.1)),
            ("big", Value::Int(i64::MAX)),
            ("l", Value::List(vec![Value::Bool(true), Value::from("é")])),
            ("cb", Value::Callback(CallbackRef { id: "cb-9".into() })),
        ]
        .into_iter()
        .collect();
        assert_eq!(decode(&encode(&v)).unwrap(), v);
    }

    fn nested(depth: usize) -> String {
        let mut s = String::new();
        for _ in 0..depth - 1 {
            s.push_str(r#"{"type":"list","items":["#);
        }
        s.push_str(r#"{"type":"int","value":7}"#);
        for _ in 0..depth - 1 {
            s.push_str("]}");
        }
        s
    }

    #[test]
    fn a_thousand_levels_decode_on_a_small_stack_and_deeper_is_an_error() {
        // Worker threads have 2 MiB stacks; a debug build needs more for a
        // thousand levels, which `support::deep` provides.
        let run = std::thread::Builder::new().stack_size(1 << 20).spawn(|| {
            let deepest: Value = super::decode(nested(MAX_DEPTH).as_bytes()).unwrap();
            let mut level = &deepest;
            let mut depth = 1;
            while let Value::List(items) = level {
                level = &items[0];
                depth += 1;
            }
            assert_eq!((depth, level), (MAX_DEPTH, &Value::Int(7)));
            let text = serde_json::to_string(&deepest).unwrap();
            assert_eq!(text, nested(MAX_DEPTH));
            let converted = Vec::<Value>::from_value(deepest.clone()).unwrap();
            drop((deepest, converted));
            let err = super::decode::<Value>(nested(MAX_DEPTH + 1).as_bytes()).unwrap_err().to_string();
            assert!(err.starts_with("values are nested more than 1000 levels deep"), "{err}");
            // Far deeper input is refused just the same, without a crash.
            let err = super::decode::<Value>(nested(200_000).as_bytes()).unwrap_err().to_string();
            assert!(err.starts_with("values are nested more than 1000 levels deep"), "{err}");
            // The count is back to zero after an error.
            assert_eq!(super::decode::<Value>(nested(3).as_bytes()).unwrap().to_string(), "[[7]]");
        });
        run.unwrap().join().unwrap();
    }

    /// A long string is sent from its own buffer exactly when serde_json
    /// would not change a byte of it, and the parts always join to what
    /// `encode` writes.
    #[test]
    fn long_strings_without_escapes_are_sent_in_place() {
        for byte in 0..=u8::MAX {
            let one = [byte];
            let Ok(text) = std::str::from_utf8(&one) else { continue };
            let serde_escapes = serde_json::to_string(text).unwrap() != format!("\"{text}\"");
            assert_eq!(needs_escape(text.as_bytes()), serde_escapes, "byte {byte:#x}");
        }
        let clean = "é-x".repeat(IN_PLACE_FROM);
        let dirty = format!("{clean}\n{clean}");
        for (text, in_place) in [(clean, true), (dirty, false), ("short".to_owned(), false)] {
            let whole = super::encode(&Value::String(text.clone())).unwrap();
            let parts = encode_owned(Value::String(text)).unwrap();
            assert_eq!(!parts.head().is_empty(), in_place);
            let mut joined = Vec::new();
            parts.write_to(&mut joined);
            assert_eq!(joined, whole);
            assert_eq!(parts.len(), whole.len());
        }
    }
}
