//! What `#[derive(FromValue, IntoValue)]` expands to calls (re-exported
//! through `__private`): dict entries by key and list items by index, each
//! error carrying where it happened, and unknown keys refused by name.

use std::collections::BTreeMap;

use crate::support::{quoted_names, string_literal};
use crate::value::Value;
use crate::value::convert::{FromValueError, IntoValueError};

/// A dict's entries, taken by the fields one by one.
pub type Entries = BTreeMap<String, Value>;

/// The entries of `value`, which must be a dict.
pub fn dict(value: Value, expected: &str) -> Result<Entries, FromValueError> {
    match value {
        Value::Dict(entries) => Ok(entries),
        other => Err(FromValueError::mismatch(expected, &other)),
    }
}

/// Refuses a key that is not one of `known`, naming the known ones, before
/// any field is read: a misspelt key is reported as such, not as the
/// missing key it was meant to be.
pub fn no_other_keys(entries: &Entries, known: &[&str]) -> Result<(), FromValueError> {
    let Some(unknown) = entries.keys().find(|k| !known.contains(&k.as_str())) else { return Ok(()) };
    let (unknown, list) = (string_literal(unknown, '\''), quoted_names(known.iter().copied()));
    Err(FromValueError::new(match known.len() {
        0 => format!("has unknown key {unknown}; it takes no keys"),
        _ => format!("has unknown key {unknown}; the keys are {list}"),
    }))
}

/// `<T as FromValue>::from_value`.
pub type Convert<T> = fn(Value) -> Result<T, FromValueError>;

/// `<T as IntoValue>::into_value`.
pub type Write<T> = fn(T) -> Result<Value, IntoValueError>;

/// The field stored under `key`. A missing key reads as `None`, so an
/// `Option` (or `Value`) field may be left out; any other field must be there.
///
/// The helpers here take the conversion (`<T as FromValue>::from_value`,
/// written by the derive at the field's type) rather than a `T: FromValue`
/// bound, so a field type lacking the trait is reported at the field through
/// the public trait, never through a bound on a hidden helper.
pub fn field<T>(entries: &mut Entries, key: &str, convert: Convert<T>) -> Result<T, FromValueError> {
    match entries.remove(key) {
        Some(value) => convert(value).map_err(|e| e.at_key(key)),
        None => convert(Value::Null).map_err(|_| FromValueError::new(format!("is missing key '{key}'"))),
    }
}

/// The field stored under `key`, or `default()` when the key is missing.
pub fn field_or_else<T>(
    entries: &mut Entries,
    key: &str,
    convert: Convert<T>,
    default: impl FnOnce() -> T,
) -> Result<T, FromValueError> {
    match entries.remove(key) {
        Some(value) => convert(value).map_err(|e| e.at_key(key)),
        None => Ok(default()),
    }
}

/// The field stored under `key`, or `None` when the key is missing.
pub fn field_opt<T>(entries: &mut Entries, key: &str, convert: Convert<T>) -> Result<Option<T>, FromValueError> {
    entries.remove(key).map(|value| convert(value).map_err(|e| e.at_key(key))).transpose()
}

/// The items of `value`, which must be a list of exactly `len` items.
pub fn list(value: Value, len: usize, expected: &str) -> Result<std::vec::IntoIter<Value>, FromValueError> {
    match value {
        Value::List(items) if items.len() == len => Ok(items.into_iter()),
        Value::List(items) => {
            Err(FromValueError::new(format!("must be a list of {len} items, got a list of {}", items.len())))
        }
        other => Err(FromValueError::mismatch(expected, &other)),
    }
}

/// The next item of a list checked by [`list`], converted.
pub fn item<T>(items: &mut std::vec::IntoIter<Value>, index: usize, convert: Convert<T>) -> Result<T, FromValueError> {
    convert(items.next().unwrap_or_default()).map_err(|e| e.at_index(index))
}

/// The variant named by `value`: a string for a variant without data, a
/// dict with one entry (its name, then its data) for one with data.
pub fn variant(value: Value, expected: &str) -> Result<(String, Option<Value>), FromValueError> {
    match value {
        Value::String(name) => Ok((name, None)),
        Value::Dict(entries) if entries.len() == 1 => {
            let (name, data) = entries.into_iter().next().expect("one entry");
            Ok((name, Some(data)))
        }
        Value::Dict(entries) => Err(FromValueError::new(format!(
            "must be {expected}: a dict naming a variant has one key, this one has {}",
            entries.len()
        ))),
        other => Err(FromValueError::mismatch(expected, &other)),
    }
}

/// The error for a variant name that is not one of `known`.
pub fn unknown_variant(name: &str, known: &[&str]) -> FromValueError {
    FromValueError::new(format!(
        "names no variant: got {}, expected one of {}",
        string_literal(name, '\''),
        quoted_names(known.iter().copied())
    ))
}

/// The error for a variant given in the wrong form: `name` with data when
/// it has none, or without data when it has some.
pub fn variant_form(name: &str, has_data: bool) -> FromValueError {
    FromValueError::new(if has_data {
        format!("gives variant '{name}' without its data: write {{'{name}': ...}}")
    } else {
        format!("gives data to variant '{name}', which has none: write '{name}'")
    })
}

/// Stores field `value` under `key`.
pub fn put<T>(entries: &mut Entries, key: &str, value: T, convert: Write<T>) -> Result<(), IntoValueError> {
    let value = convert(value).map_err(|e| e.within(format_args!("field '{key}'")))?;
    entries.insert(key.to_owned(), value);
    Ok(())
}

/// `value` as a list item at `index`.
pub fn element<T>(index: usize, value: T, convert: Write<T>) -> Result<Value, IntoValueError> {
    convert(value).map_err(|e| e.within(format_args!("item {index}")))
}

/// A variant with data: a dict with one entry, its name, holding `data`.
pub fn tagged(name: &str, data: Value) -> Value {
    Value::Dict(BTreeMap::from([(name.to_owned(), data)]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::convert::FromValue;

    fn entries(pairs: &[(&str, Value)]) -> Entries {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
    }

    #[test]
    fn fields_report_their_key_and_missing_options_read_as_none() {
        let mut e = entries(&[("limit", Value::from("ten"))]);
        let err = field(&mut e, "limit", <i64>::from_value).unwrap_err();
        assert_eq!(err.to_string(), "value['limit'] must be an int, got string");
        assert_eq!(field(&mut e, "absent", <Option<i64>>::from_value), Ok(None));
        assert_eq!(field(&mut e, "absent", <i64>::from_value).unwrap_err().reason(), "is missing key 'absent'");
        assert_eq!(field_or_else(&mut e, "absent", i64::from_value, || 7i64), Ok(7));
    }

    #[test]
    fn unknown_keys_are_named_with_the_known_ones() {
        let e = entries(&[("limt", Value::Int(1))]);
        assert_eq!(
            no_other_keys(&e, &["limit", "case"]).unwrap_err().reason(),
            "has unknown key 'limt'; the keys are 'limit', 'case'"
        );
        // A key from the host cannot break the message, nor a path.
        let e = entries(&[("it's\n", Value::Int(1))]);
        assert_eq!(no_other_keys(&e, &[]).unwrap_err().reason(), r"has unknown key 'it\'s\n'; it takes no keys");
        let err = field(&mut entries(&[("a'b", Value::Null)]), "a'b", i64::from_value).unwrap_err();
        assert_eq!(err.to_string(), r"value['a\'b'] must be an int, got None");
        assert!(no_other_keys(&entries(&[("limit", Value::Int(1))]), &["limit"]).is_ok());
    }

    #[test]
    fn lists_must_have_exactly_their_length() {
        let err = list(Value::List(vec![Value::Int(1)]), 2, "a list of 2 items").unwrap_err();
        assert_eq!(err.reason(), "must be a list of 2 items, got a list of 1");
        let mut items = list(Value::List(vec![Value::Int(1), Value::from("x")]), 2, "").unwrap();
        assert_eq!(item(&mut items, 0, i64::from_value), Ok(1));
        assert_eq!(
            item(&mut items, 1, i64::from_value).unwrap_err().to_string(),
            "value[1] must be an int, got string"
        );
    }
}
