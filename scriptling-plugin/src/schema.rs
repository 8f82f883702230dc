//! The handshake result: protocol, library and schema, built once,
//! deterministically, in registration order.

use serde::Serialize;

use crate::value::Value;

/// The protocol version the host compares byte for byte.
pub(crate) const PROTOCOL_VERSION: &str = "1.0";

#[derive(Serialize)]
pub(crate) struct Handshake<'a> {
    pub(crate) protocol: &'static str,
    pub(crate) transport: &'static str,
    pub(crate) library: Library<'a>,
    pub(crate) capabilities: &'static [&'static str],
    pub(crate) schema: Schema<'a>,
}

#[derive(Serialize)]
pub(crate) struct Library<'a> {
    pub(crate) name: &'a str,
    pub(crate) version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) description: &'a str,
}

#[derive(Serialize)]
pub(crate) struct Schema<'a> {
    pub(crate) functions: Vec<FunctionSchema<'a>>,
    pub(crate) classes: Vec<ClassSchema<'a>>,
    pub(crate) constants: Vec<ConstantSchema<'a>>,
}

#[derive(Serialize)]
pub(crate) struct FunctionSchema<'a> {
    pub(crate) name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) description: &'a str,
}

#[derive(Serialize)]
pub(crate) struct ClassSchema<'a> {
    pub(crate) name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) description: &'a str,
    pub(crate) constructor: FunctionSchema<'a>,
    pub(crate) methods: Vec<FunctionSchema<'a>>,
    pub(crate) properties: Vec<PropertySchema<'a>>,
}

#[derive(Serialize)]
pub(crate) struct PropertySchema<'a> {
    pub(crate) name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) description: &'a str,
    pub(crate) settable: bool,
}

#[derive(Serialize)]
pub(crate) struct ConstantSchema<'a> {
    pub(crate) name: &'a str,
    pub(crate) value: &'a Value,
}

/// Whether `name` can be written as a Scriptling identifier (`lib.name`).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::is_identifier;

    #[test]
    fn identifiers() {
        for ok in ["greet", "_x", "a1", "Counter"] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a.b", "é", "a b"] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }
}
