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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct ClassSchema<'a> {
    pub(crate) name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) description: &'a str,
    pub(crate) constructor: FunctionSchema<'a>,
    pub(crate) methods: Vec<FunctionSchema<'a>>,
    pub(crate) properties: Vec<PropertySchema<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<&'a str>,
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
