//! What `--describe` prints: the handshake's schema as a person reads it,
//! each function, class, method, property and constant with its Scriptling
//! signature and help.

use std::fmt::Write;

use serde_json::Value as Json;

use crate::exports::script;
use crate::value::Value;

/// The description of the plugin whose handshake answer is `handshake`.
pub(crate) fn describe(handshake: &Json) -> String {
    let mut out = String::new();
    let library = &handshake["library"];
    let _ = write!(out, "{} {}", text(&library["name"]), text(&library["version"]));
    let description = text(&library["description"]);
    if !description.is_empty() {
        let _ = write!(out, ": {description}");
    }
    out.push('\n');
    let schema = &handshake["schema"];
    let functions = list(&schema["functions"]);
    if !functions.is_empty() {
        out.push_str("\nfunctions:\n");
        for f in functions {
            entry(&mut out, 1, signed(&f["name"], &f["description"]));
        }
    }
    let classes = list(&schema["classes"]);
    if !classes.is_empty() {
        out.push_str("\nclasses:\n");
        for class in classes {
            entry(&mut out, 1, signed(&class["name"], &class["description"]));
            // The constructor's own doc, when it says more than the class's.
            let (_, class_doc) = signed(&class["name"], &class["description"]);
            let (_, constructor_doc) = signed(&class["constructor"]["name"], &class["constructor"]["description"]);
            if !constructor_doc.is_empty() && constructor_doc != class_doc {
                entry(&mut out, 2, ("constructor", constructor_doc));
            }
            for method in list(&class["methods"]) {
                entry(&mut out, 2, signed(&method["name"], &method["description"]));
            }
            for property in list(&class["properties"]) {
                let settable = if property["settable"] == true { ", settable" } else { "" };
                let title = format!("{} (property{settable})", text(&property["name"]));
                let (_, doc) = signed(&property["name"], &property["description"]);
                entry(&mut out, 2, (&title, doc));
            }
        }
    }
    let constants = list(&schema["constants"]);
    if !constants.is_empty() {
        out.push_str("\nconstants:\n");
        for constant in constants {
            let value = serde_json::from_value::<Value>(constant["value"].clone())
                .ok()
                .and_then(|v| script::literal(&v).ok())
                .unwrap_or_else(|| constant["value"].to_string());
            let _ = writeln!(out, "  {} = {value}", text(&constant["name"]));
        }
    }
    out
}

/// An item's help split into its first line, when that is the item's
/// signature (`greet(name)`) or bare name (properties), and its doc text;
/// the bare name and the whole help otherwise.
fn signed<'a>(name: &'a Json, help: &'a Json) -> (&'a str, &'a str) {
    let (name, help) = (text(name), text(help));
    let (first, rest) = help.split_once('\n').unwrap_or((help, ""));
    if first == name || first.starts_with(&format!("{name}(")) { (first, rest) } else { (name, help) }
}

/// One item: `title` indented `depth` levels, its doc one level deeper.
fn entry(out: &mut String, depth: usize, (title, doc): (&str, &str)) {
    let indent = "  ".repeat(depth);
    let _ = writeln!(out, "{indent}{title}");
    for line in doc.trim_matches('\n').lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{indent}    {line}");
        }
    }
}

fn text(value: &Json) -> &str {
    value.as_str().unwrap_or("")
}

fn list(value: &Json) -> &[Json] {
    value.as_array().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn functions_classes_and_constants_read_as_help() {
        let handshake = json!({
            "library": {"name": "hello", "version": "1.0.0", "description": "Greets"},
            "schema": {
                "functions": [{"name": "greet", "description": "greet(name, greeting=\"Hello\")\n\nReturns a greeting."}],
                "classes": [{
                    "name": "Counter",
                    "description": "Counter(start=0)\n\nA counter.",
                    "constructor": {"name": "Counter", "description": "Counter(start=0)\n\nStarts at `start`."},
                    "methods": [{"name": "inc", "description": "inc(amount=1)"}],
                    "properties": [{"name": "value", "description": "value\n\nThe value.", "settable": true}]
                }],
                "constants": [{"name": "default_name", "value": {"type": "string", "value": "World"}}]
            }
        });
        assert_eq!(
            describe(&handshake),
            "hello 1.0.0: Greets\n\
             \n\
             functions:\n\
             \x20 greet(name, greeting=\"Hello\")\n\
             \x20     Returns a greeting.\n\
             \n\
             classes:\n\
             \x20 Counter(start=0)\n\
             \x20     A counter.\n\
             \x20   constructor\n\
             \x20       Starts at `start`.\n\
             \x20   inc(amount=1)\n\
             \x20   value (property, settable)\n\
             \x20       The value.\n\
             \n\
             constants:\n\
             \x20 default_name = \"World\"\n"
        );
    }
}
