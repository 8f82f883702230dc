//! The handshake result: protocol, library and schema, built once,
//! deterministically, in registration order.

use serde::Serialize;

use crate::exports::function::Function;
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

/// The answer to `hello` (the Supex bridge's handshake).
pub(crate) fn hello(name: &str, version: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct Hello<'a> {
        success: bool,
        message: &'static str,
        server: Server<'a>,
    }
    #[derive(Serialize)]
    struct Server<'a> {
        name: &'a str,
        version: &'a str,
    }
    let hello = Hello { success: true, message: "Client identified", server: Server { name, version } };
    // Two strings and constants always serialise.
    serde_json::to_vec(&hello).unwrap_or_default()
}

/// The answer to `tools/call` of `ping`, as the Supex runtime gives it (its
/// driver's status check calls it): unless the plugin exports a `ping`.
pub(crate) fn ping_tool(name: &str, version: &str) -> Vec<u8> {
    let message = format!("{name} {version} is serving this connection");
    let ping = serde_json::json!({"success": true, "status": "connected", "message": message, "version": version});
    serde_json::to_vec(&ping).unwrap_or_default()
}

/// The answer to `tools/list`: each exported function that `tools/call`
/// can call, with its doc and parameters, in registration order.
pub(crate) fn tools(functions: &[&Function]) -> Vec<u8> {
    #[derive(Serialize)]
    struct Tools<'a> {
        tools: Vec<Tool<'a>>,
    }
    #[derive(Serialize)]
    struct Tool<'a> {
        name: &'a str,
        description: &'a str,
        parameters: Vec<Parameter<'a>>,
    }
    #[derive(Serialize)]
    struct Parameter<'a> {
        name: &'a str,
        required: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        default: Option<&'a str>,
    }
    let tools = functions
        .iter()
        .filter(|f| f.refuse_rpc().is_none())
        .map(|f| Tool {
            name: f.get_name(),
            description: f.get_description(),
            parameters: f
                .get_params()
                .iter()
                .map(|p| Parameter { name: p.name(), required: p.is_required(), default: p.default() })
                .collect(),
        })
        .collect();
    // Strings and booleans always serialise.
    serde_json::to_vec(&Tools { tools }).unwrap_or_default()
}
