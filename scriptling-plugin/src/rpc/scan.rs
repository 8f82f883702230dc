//! A hand-written reader for the request line hosts send almost always:
//! one object with `jsonrpc`, `id`, `method` and `params` (an object), in
//! any order. It finds the envelope's fields without serde's machinery and
//! leaves only the skipping of the params to serde, keeping them raw;
//! anything else (another key, an escape in a name, a response, odd spacing
//! inside a number) makes it give up, and the general parser reads the line
//! instead, so it never accepts a line differently.
//!
//! Every single-message frame, on every transport, is tried with
//! [`request_raw`] first: serde's derived envelope took ~3 600 instructions
//! a line, most of the stdio reader's work (callgrind, 20 000 `greet` calls).

use serde_json::value::RawValue;

use crate::rpc::{CallParams, Request};
use crate::value::Value;

/// The request on `text`, a whole line, its params skipped and kept raw,
/// or `None` if it is not of the common shape (the general parser then
/// decides what it is).
pub(crate) fn request_raw(text: &str) -> Option<Request<'_>> {
    let mut at = Cursor { text, at: 0 };
    at.eat(b'{')?;
    let (mut id, mut method, mut params, mut jsonrpc) = (None, None, None, false);
    loop {
        let key = at.plain_string()?;
        at.eat(b':')?;
        match key {
            // Anything but "2.0" is for the general parser to refuse.
            "jsonrpc" if !jsonrpc && at.plain_string()? == "2.0" => jsonrpc = true,
            "id" if id.is_none() => id = Some(at.id()?),
            "method" if method.is_none() => method = Some(at.plain_string()?),
            "params" if params.is_none() => params = Some(at.raw_params()?),
            _ => return None,
        }
        match at.next_byte()? {
            b',' => {}
            b'}' => break,
            _ => return None,
        }
    }
    at.skip_whitespace();
    if at.at != text.len() || !jsonrpc {
        return None;
    }
    Some(Request { id, method: method?, params: params.flatten() })
}

/// Call params of the shape hosts send almost always, decoded without
/// serde's machinery: `name`, `class`, `object_id` and `method` as plain
/// strings, and `args` as a list of the flat values `{"type":"string",
/// "value":"..."}` (no escapes), `{"type":"int","value":N}`,
/// `{"type":"bool","value":B}` and `{"type":"null"}`, keys in that order.
/// Anything else (kwargs, another value, an escape, a float, a repeated or
/// unknown key) gives `None`, and serde decodes the params instead, so
/// nothing is read differently. serde's derived decoding took ~2 700
/// instructions for a one-argument call (callgrind); this is the pool
/// thread's largest single cost per call.
pub(crate) fn call_params(text: &str) -> Option<CallParams> {
    let mut at = Cursor { text, at: 0 };
    let mut params = CallParams::default();
    at.eat(b'{')?;
    if at.peek()? == b'}' {
        at.at += 1;
    } else {
        loop {
            let key = at.plain_string()?;
            at.eat(b':')?;
            let slot = match key {
                "name" => &mut params.name,
                "class" => &mut params.class,
                "object_id" => &mut params.object_id,
                "method" => &mut params.method,
                "args" if params.args.is_none() => {
                    params.args = Some(at.flat_values()?);
                    match at.next_byte()? {
                        b',' => continue,
                        b'}' => break,
                        _ => return None,
                    }
                }
                _ => return None,
            };
            if slot.is_some() {
                return None;
            }
            *slot = Some(at.plain_string()?.to_owned());
            match at.next_byte()? {
                b',' => {}
                b'}' => break,
                _ => return None,
            }
        }
    }
    at.skip_whitespace();
    (at.at == text.len()).then_some(params)
}

struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn skip_whitespace(&mut self) {
        let bytes = self.text.as_bytes();
        while bytes.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The next byte after any whitespace, consumed.
    fn next_byte(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let byte = *self.text.as_bytes().get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn eat(&mut self, expected: u8) -> Option<()> {
        (self.next_byte()? == expected).then_some(())
    }

    /// The next byte after any whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.text.as_bytes().get(self.at).copied()
    }

    /// `expected` next, after any whitespace.
    fn literal(&mut self, expected: &str) -> Option<()> {
        self.skip_whitespace();
        self.text[self.at..].starts_with(expected).then(|| self.at += expected.len())
    }

    /// A list of flat values (see [`call_params`]).
    fn flat_values(&mut self) -> Option<Vec<Value>> {
        self.eat(b'[')?;
        let mut values = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(values);
        }
        loop {
            values.push(self.flat_value()?);
            match self.next_byte()? {
                b',' => {}
                b']' => return Some(values),
                _ => return None,
            }
        }
    }

    fn flat_value(&mut self) -> Option<Value> {
        self.eat(b'{')?;
        if self.plain_string()? != "type" {
            return None;
        }
        self.eat(b':')?;
        let tag = self.plain_string()?;
        if tag == "null" {
            self.eat(b'}')?;
            return Some(Value::Null);
        }
        self.eat(b',')?;
        if self.plain_string()? != "value" {
            return None;
        }
        self.eat(b':')?;
        let value = match tag {
            "string" => Value::String(self.plain_string()?.to_owned()),
            "int" => Value::Int(self.integer()?),
            "bool" if self.literal("true").is_some() => Value::Bool(true),
            "bool" if self.literal("false").is_some() => Value::Bool(false),
            _ => return None,
        };
        self.eat(b'}')?;
        Some(value)
    }

    /// A JSON integer that fits an `i64`: an optional `-`, then `0` or
    /// digits without a leading zero, and no fraction or exponent after.
    fn integer(&mut self) -> Option<i64> {
        self.skip_whitespace();
        let bytes = self.text.as_bytes();
        let start = self.at;
        let digits = start + usize::from(bytes.get(start) == Some(&b'-'));
        let len = bytes[digits..].iter().take_while(|b| b.is_ascii_digit()).count();
        let end = digits + len;
        let leading_zero = len > 1 && bytes[digits] == b'0';
        // "-0" is a float to some readers; serde decides.
        if len == 0 || leading_zero || &self.text[start..end] == "-0" {
            return None;
        }
        if matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let n = self.text[start..end].parse().ok()?;
        self.at = end;
        Some(n)
    }

    /// A string with no escapes (and, as JSON requires, no control
    /// characters): its contents.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = &self.text.as_bytes()[start..];
        let len = crate::support::json_special(rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        Some(&self.text[start..start + len])
    }

    /// An id: a plain string, a number or `null`, kept verbatim.
    fn id(&mut self) -> Option<&'a RawValue> {
        self.skip_whitespace();
        let start = self.at;
        let bytes = self.text.as_bytes();
        match *bytes.get(start)? {
            b'"' => {
                self.plain_string()?;
            }
            b'-' | b'0'..=b'9' => {
                let len =
                    bytes[start..].iter().position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'));
                self.at = len.map_or(bytes.len(), |len| start + len);
            }
            b'n' => self.at += "null".len(),
            _ => return None,
        }
        // Checks the number's (or null's) syntax, as the general parser would.
        serde_json::from_str(self.text.get(start..self.at)?).ok()
    }

    /// Params that are an object (skipped, kept verbatim) or `null`.
    fn raw_params(&mut self) -> Option<Option<&'a RawValue>> {
        let Some(rest) = self.object_or_null()? else { return Some(None) };
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        let params = values.next()?.ok()?;
        self.at += values.byte_offset();
        Some(Some(params))
    }

    /// The rest of the text from an object's `{` on (`Some(None)` for
    /// `null`, consumed; `None` for anything else).
    fn object_or_null(&mut self) -> Option<Option<&'a str>> {
        self.skip_whitespace();
        let rest = &self.text[self.at..];
        if let Some(after) = rest.strip_prefix("null") {
            self.at += rest.len() - after.len();
            return Some(None);
        }
        rest.starts_with('{').then_some(Some(rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn reads_the_common_shape_in_any_order() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":1}]}}"#,
            r#" { "params" : {"name":"f","args":[{"type":"int","value":1}]} , "method":"function.call", "id": 7 ,"jsonrpc":"2.0"} "#,
        ] {
            let r = request_raw(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((r.id.map(RawValue::get), r.method), (Some("7"), "function.call"));
            let p = call_params(r.params.unwrap().get()).unwrap();
            assert_eq!((p.name.as_deref(), p.args), (Some("f"), Some(vec![Value::Int(1)])));
        }
        for (line, id) in [
            (r#"{"jsonrpc":"2.0","id":"a-1","method":"ping"}"#, Some(r#""a-1""#)),
            (r#"{"id":-1.5e3,"method":"ping","jsonrpc":"2.0"}"#, Some("-1.5e3")),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping","params":null}"#, Some("null")),
            (r#"{"jsonrpc":"2.0","method":"ping"}"#, None),
        ] {
            let r = request_raw(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((r.id.map(RawValue::get), r.method, r.params.is_none()), (id, "ping", true), "{line}");
        }
    }

    /// The params fast path reads what serde reads, and leaves to serde
    /// everything it is not sure of.
    #[test]
    fn call_params_agree_with_serde() {
        for text in [
            r#"{"name":"greet","args":[{"type":"string","value":"Ada"}]}"#,
            r#" { "args" : [ {"type":"int","value":-42} , {"type":"bool","value":false},{"type":"null"} ] , "name":"f" } "#,
            r#"{"object_id":"7","method":"inc","args":[{"type":"int","value":0},{"type":"int","value":9223372036854775807}]}"#,
            r#"{"class":"Counter","args":[]}"#,
            r#"{}"#,
            r#"{"name":"f","args":[{"type":"string","value":"é ✓"}]}"#,
        ] {
            let fast = call_params(text).unwrap_or_else(|| panic!("{text}"));
            let slow: CallParams = crate::value::codec::decode_str(text).unwrap();
            assert_eq!(fast, slow, "{text}");
        }
        for text in [
            r#"{"name":"f","kwargs":{}}"#,
            r#"{"name":"f","args":[{"value":"x","type":"string"}]}"#,
            r#"{"name":"f","args":[{"type":"string","value":"a\nb"}]}"#,
            r#"{"name":"f","args":[{"type":"int","value":1.0}]}"#,
            r#"{"name":"f","args":[{"type":"int","value":1e3}]}"#,
            r#"{"name":"f","args":[{"type":"int","value":01}]}"#,
            r#"{"name":"f","args":[{"type":"int","value":-0}]}"#,
            r#"{"name":"f","args":[{"type":"int","value":9223372036854775808}]}"#,
            r#"{"name":"f","args":[{"type":"float","value":1.5}]}"#,
            r#"{"name":"f","args":[{"type":"list","items":[]}]}"#,
            r#"{"name":"f","name":"g"}"#,
            r#"{"name":null}"#,
            r#"{"name":"f","extra":1}"#,
            r#"{"name":"f","args":[{"type":"bool","value":truex}]}"#,
            r#"{"name":"f"} x"#,
            r#"{"name":"f","args":[{"type":"null","value":1}]}"#,
        ] {
            assert!(call_params(text).is_none(), "{text}");
        }
    }

    /// What the raw scan takes, the general parser reads the same way: id,
    /// method and the params' text.
    #[test]
    fn the_raw_scan_agrees_with_the_general_parser() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":1}]}}"#,
            r#" { "params" : {"name":"f","deep":[[[{"a":"\u00e9\n"}]]]} , "method":"x", "id": "s" ,"jsonrpc":"2.0"} "#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","method":"hello","params":{"token":"t"}}"#,
        ] {
            let raw = request_raw(line).unwrap_or_else(|| panic!("{line}"));
            let crate::rpc::Message::Request(general) = crate::rpc::classify(line) else { panic!("{line}") };
            assert_eq!(
                (raw.id.map(RawValue::get), raw.method, raw.params.map(RawValue::get)),
                (general.id.map(RawValue::get), general.method, general.params.map(RawValue::get)),
                "{line}"
            );
        }
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
        ] {
            assert!(request_raw(line).is_none(), "{line}");
        }
    }

    #[test]
    fn gives_up_on_anything_else() {
        for line in [
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            r#"{"id":1,"method":"ping","extra":1}"#,
            r#"{"id":1,"method":"p\u0069ng"}"#,
            r#"{"id":1,"id":2,"method":"ping"}"#,
            r#"{"id":1,"method":"ping","params":[1]}"#,
            r#"{"id":1,"method":"ping","params":{"args":5}}"#,
            r#"{"id":1-2,"method":"ping"}"#,
            r#"{"id":nul,"method":"ping"}"#,
            r#"{"id":1,"result":null}"#,
            r#"{"id":1}"#,
            r#"{"id":1,"method":"ping"} x"#,
            r#"{"id":1,"method":"ping""#,
            r#"[{"id":1,"method":"ping"}]"#,
            "{\"id\":1,\"method\":\"a\tb\"}",
        ] {
            assert!(request_raw(line).is_none(), "{line}");
        }
    }
}
