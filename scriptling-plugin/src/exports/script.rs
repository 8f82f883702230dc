//! Scriptling source the SDK writes: help signatures, literals, and the
//! wrappers that keep a library working in the host's script mode.
//!
//! When any function or class carries Scriptling `source`, the host stops
//! generating a native proxy and instead concatenates every export's source
//! into one Scriptling module, dropping constants and help text on the way
//! (HOST-NOTES A.6). So in that mode the SDK supplies the source for every
//! export itself: the same call shims the host would generate, with the help
//! text as docstrings, and the constants as assignments at the top of the
//! module.

use std::fmt::Write as _;

use crate::exports::function::Param;
use crate::value::Value;

/// Names Scriptling reserves (Python's keywords).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Why `name` cannot be a Scriptling name, if it cannot.
pub(crate) fn identifier_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let valid = matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    if !valid {
        Some("is not a valid Scriptling identifier")
    } else if KEYWORDS.contains(&name) {
        Some("is a Scriptling keyword")
    } else {
        None
    }
}

/// `name(a, b="x")`: the first line of help text.
pub(crate) fn signature(name: &str, params: &[Param]) -> String {
    let mut out = format!("{name}(");
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(p.name());
        if let Some(default) = p.default() {
            let _ = write!(out, "={default}");
        }
    }
    out.push(')');
    out
}

/// The signature line, then the doc text after a blank line.
pub(crate) fn help(signature: &str, doc: &str) -> String {
    if doc.is_empty() { signature.to_owned() } else { format!("{signature}\n\n{doc}") }
}

/// A Scriptling string literal.
pub(crate) fn quote(text: &str) -> String {
    crate::support::string_literal(text, '"')
}

/// A Scriptling literal for a constant, or why there is none.
pub(crate) fn literal(value: &Value) -> Result<String, String> {
    Ok(match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) if !f.is_finite() => return Err(format!("the float {f} has no literal")),
        Value::Float(f) => {
            let text = format!("{f:?}");
            if text.contains(['.', 'e', 'E']) { text } else { format!("{text}.0") }
        }
        Value::String(s) => quote(s),
        Value::List(items) => {
            let items: Result<Vec<String>, String> = items.iter().map(literal).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Dict(entries) => {
            let entries: Result<Vec<String>, String> =
                entries.iter().map(|(k, v)| Ok(format!("{}: {}", quote(k), literal(v)?))).collect();
            format!("{{{}}}", entries?.join(", "))
        }
        other => return Err(format!("a {} cannot be written as Scriptling source", other.type_name())),
    })
}

/// [`literal`], with a top-level dict's keys in `order` first (a derived
/// struct's field order), then any others in sorted order.
pub(crate) fn literal_in_order(value: &Value, order: &[&str]) -> Result<String, String> {
    let Value::Dict(entries) = value else { return literal(value) };
    if order.is_empty() {
        return literal(value);
    }
    let ordered = order.iter().filter_map(|k| entries.get_key_value(*k));
    let rest = entries.iter().filter(|(k, _)| !order.contains(&k.as_str()));
    let entries: Result<Vec<String>, String> =
        ordered.chain(rest).map(|(k, v)| Ok(format!("{}: {}", quote(k), literal(v)?))).collect();
    Ok(format!("{{{}}}", entries?.join(", ")))
}

/// The library name Scriptling code uses to reach this plugin.
pub(crate) fn host_library(name: &str) -> String {
    if name.starts_with("plugin.") { name.to_owned() } else { format!("plugin.{name}") }
}

/// `def name(*args, **kwargs)` calling the function over RPC.
pub(crate) fn function_wrapper(library: &str, name: &str, help: &str) -> String {
    format!(
        "def {name}(*args, **kwargs):\n    {}\n    return scriptling.plugin.call_function({}, {}, *args, **kwargs)\n",
        quote(help),
        quote(library),
        quote(name)
    )
}

/// What a class wrapper needs to know about one member.
pub(crate) struct MemberHelp<'a> {
    pub(crate) name: &'a str,
    pub(crate) help: &'a str,
    pub(crate) settable: bool,
}

/// A class whose `__init__` creates the remote object and whose members
/// call it, as the host generates, with docstrings.
pub(crate) fn class_wrapper(
    library: &str,
    name: &str,
    help: &str,
    methods: &[MemberHelp<'_>],
    properties: &[MemberHelp<'_>],
) -> String {
    let (lib, class) = (quote(library), quote(name));
    let mut out = format!("class {name}:\n    {}\n", quote(help));
    let _ = write!(
        out,
        "    def __init__(self, *args, **kwargs):\n        self._plugin_remote = scriptling.plugin._new_object({lib}, {class}, *args, **kwargs)\n"
    );
    for m in methods {
        let _ = write!(
            out,
            "    def {}(self, *args, **kwargs):\n        {}\n        return scriptling.plugin.call_method(self._plugin_remote, {}, *args, **kwargs)\n",
            m.name,
            quote(m.help),
            quote(m.name)
        );
    }
    for p in properties {
        let _ = write!(
            out,
            "    @property\n    def {}(self):\n        {}\n        return scriptling.plugin.call_method(self._plugin_remote, {})\n",
            p.name,
            quote(p.help),
            quote(p.name)
        );
        if p.settable {
            let _ = write!(
                out,
                "    @{0}.setter\n    def {0}(self, value):\n        return scriptling.plugin.call_method(self._plugin_remote, {1}, value)\n",
                p.name,
                quote(p.name)
            );
        }
    }
    out.push_str("    def __del__(self):\n        scriptling.plugin.release(self._plugin_remote)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_keywords() {
        assert_eq!(identifier_problem("greet"), None);
        assert_eq!(identifier_problem("class"), Some("is a Scriptling keyword"));
        assert_eq!(identifier_problem("None"), Some("is a Scriptling keyword"));
        assert_eq!(identifier_problem("a-b"), Some("is not a valid Scriptling identifier"));
    }

    #[test]
    fn literals() {
        let v: Value = [
            ("s", Value::from("a\"b\\c\nd\u{1}")),
            ("l", Value::List(vec![Value::Null, true.into(), 3.into(), 2.0.into(), 1e300.into()])),
        ]
        .into_iter()
        .collect();
        assert_eq!(literal(&v).unwrap(), r#"{"l": [None, True, 3, 2.0, 1e300], "s": "a\"b\\c\nd\u0001"}"#);
        assert!(literal(&Value::Float(f64::NAN)).is_err());
    }

    #[test]
    fn wrappers() {
        assert_eq!(
            function_wrapper("plugin.hello", "greet", "greet(name)"),
            "def greet(*args, **kwargs):\n    \"greet(name)\"\n    return scriptling.plugin.call_function(\"plugin.hello\", \"greet\", *args, **kwargs)\n"
        );
        let class = class_wrapper(
            "plugin.p",
            "C",
            "C()",
            &[MemberHelp { name: "m", help: "m()", settable: false }],
            &[MemberHelp { name: "v", help: "v", settable: true }],
        );
        assert!(class.contains("    @v.setter\n    def v(self, value):\n"), "{class}");
        assert!(class.ends_with("    def __del__(self):\n        scriptling.plugin.release(self._plugin_remote)\n"));
        assert_eq!(host_library("hello"), "plugin.hello");
        assert_eq!(host_library("plugin.x"), "plugin.x");
    }
}
