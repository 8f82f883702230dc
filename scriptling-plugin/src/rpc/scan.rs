//! The lines a host writes nearly every time, read by a scanner of its own
//! instead of serde: the call line `{"jsonrpc":"2.0","id":7,"method":
//! "function.call","params":{"name":"greet","args":[{"type":"string",
//! "value":"Ada"}]}}`, keys in that order, no white space, and arguments
//! that are strings without escapes, integers, booleans, nulls or
//! callbacks; and the answer to one of the plugin's own requests,
//! `{"jsonrpc":"2.0","id":3,"result":{"type":"int","value":0}}`, whose
//! result serde only checks and keeps raw, as the general parse does; and,
//! in the same shape, requests that are not calls (the handshake,
//! `plugin.shutdown`), their params kept raw.
//!
//! serde's generic layers cost such a line several times what a scan of
//! its one shape does, in instructions and in instruction cache, on the
//! thread that is the bottleneck of pipelined calls (ARCHITECTURE.md,
//! "Speed tricks", has the figures). Anything else, however valid (a
//! float or a nested value among a call's arguments, an escape, a key out
//! of place, white space, a number that does not fit), is left to the serde
//! parses, which take what this takes and make the same of it: the
//! `envelope` fuzz target checks that on every input, as it does for
//! [`super::onepass`], and the `codec` target for a value alone.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::{CallParams, Frame, Message, Method, Params, Request, Response};
use crate::value::{CallbackRef, Value};

/// `text` scanned if it is a line in the usual shape (a call, another
/// request, an answer); `None` leaves it to the serde parses.
pub(super) fn parse(text: &str) -> Option<Frame<'_>> {
    if text.len() > super::ONE_PASS_MAX {
        return None;
    }
    let mut scan = Scanner { text, at: 0 };
    scan.literal(r#"{"jsonrpc":"2.0","id":"#)?;
    let id = scan.id()?;
    if scan.literal(r#","result":"#).is_some() {
        return scan.answer(id);
    }
    scan.literal(r#","method":"#)?;
    let method = scan.string()?;
    if !Method::parse(method).is_call() {
        return scan.other_request(id, method);
    }
    scan.literal(r#","params":"#)?;
    let params = scan.params()?;
    scan.literal("}")?;
    if scan.at != text.len() {
        return None;
    }
    Some(Frame::Single(Message::Request(Request { id: Some(id), method, params: Params::Decoded(Box::new(params)) })))
}

/// `text` scanned if it is a value alone in the shape the call scanner takes
/// (a string without escapes, an integer, a boolean, a null or a callback);
/// `None` leaves it to serde.
pub(super) fn value(text: &str) -> Option<Value> {
    let mut scan = Scanner { text, at: 0 };
    let value = scan.value()?;
    (scan.at == text.len()).then_some(value)
}

/// `text` borrowed raw if it is one JSON value (serde checks it: one value,
/// nothing after it) with no white space around it, which the general
/// parse would leave out of the raw value.
fn raw(text: &str) -> Option<&RawValue> {
    let edges = [text.as_bytes().first(), text.as_bytes().last()];
    if edges.iter().any(|b| b.is_none_or(u8::is_ascii_whitespace)) {
        return None;
    }
    serde_json::from_str::<&RawValue>(text).ok()
}

/// A position in the line. Each method consumes what it matched; `None`
/// means "not the usual shape", and abandons the line, so what a failed
/// method consumed does not matter, except for [`literal`](Self::literal),
/// which consumes nothing when it fails: a failed one may be followed by
/// another try at the same place.
struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// `expected`, byte for byte; nothing consumed if it is not there.
    fn literal(&mut self, expected: &str) -> Option<()> {
        if !self.text.as_bytes()[self.at..].starts_with(expected.as_bytes()) {
            return None;
        }
        self.at += expected.len();
        Some(())
    }

    /// A string without escapes or control characters: its contents.
    fn string(&mut self) -> Option<&'a str> {
        self.literal("\"")?;
        let start = self.at;
        let len = self.text.as_bytes()[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if self.text.as_bytes()[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Both ends are ASCII: on character boundaries.
        Some(&self.text[start..start + len])
    }

    /// A request id: a string without escapes, or an integer; borrowed raw
    /// as the general parse keeps it (its text is checked here, as JSON
    /// writes it: serde only wraps it).
    fn id(&mut self) -> Option<&'a RawValue> {
        let start = self.at;
        if self.peek() == Some(b'"') {
            self.string()?;
        } else {
            self.integer()?;
        }
        serde_json::from_str(&self.text[start..self.at]).ok()
    }

    /// An integer as JSON writes one (no leading zeros, no fraction or
    /// exponent after it) that fits an `i64`, and is not `-0` (serde makes
    /// a float of that).
    fn integer(&mut self) -> Option<i64> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let digits = self.text.as_bytes()[self.at..].iter().take_while(|b| b.is_ascii_digit()).count();
        let text = &self.text[self.at..self.at + digits];
        if digits == 0 || (digits > 1 && text.starts_with('0')) {
            return None;
        }
        self.at += digits;
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let magnitude: u64 = text.parse().ok()?;
        match (negative, magnitude) {
            (true, 0) => None,
            (true, m) if m <= i64::MIN.unsigned_abs() => Some(0i64.wrapping_sub_unsigned(m)),
            (false, m) => i64::try_from(m).ok(),
            (true, _) => None,
        }
    }

    /// The rest of an answer after `"result":`: one JSON value ([`raw`]),
    /// then the closing brace.
    fn answer(self, id: &'a RawValue) -> Option<Frame<'a>> {
        let result = raw(self.text[self.at..].strip_suffix('}')?)?;
        Some(Frame::Single(Message::Response(Response { id: Some(id), outcome: Ok(result) })))
    }

    /// The rest of a request whose params are not a call's (the handshake,
    /// `plugin.shutdown`): none, or one JSON value, kept raw as the general
    /// parse keeps them (`null` as none), for whoever serves it to decode.
    fn other_request(self, id: &'a RawValue, method: &'a str) -> Option<Frame<'a>> {
        let rest = &self.text[self.at..];
        let params = match rest.strip_prefix(r#","params":"#) {
            Some(params) => Some(raw(params.strip_suffix('}')?)?).filter(|params| params.get() != "null"),
            None if rest == "}" => None,
            None => return None,
        };
        Some(Frame::Single(Message::Request(Request { id: Some(id), method, params: Params::Raw(params) })))
    }

    /// `open`, then items separated by commas, then `close`: `item` reads
    /// each one.
    fn sequence(&mut self, open: &str, close: &str, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.literal(open)?;
        if self.literal(close).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            if self.literal(close).is_some() {
                return Some(());
            }
            self.literal(",")?;
        }
    }

    /// A call's params: an object of string fields, `args` and `kwargs`,
    /// each at most once.
    fn params(&mut self) -> Option<CallParams> {
        let mut params = CallParams::default();
        self.sequence("{", "}", |scan| {
            let key = scan.string()?;
            scan.literal(":")?;
            match key {
                "name" if params.name.is_none() => params.name = Some(scan.string()?.to_owned()),
                "class" if params.class.is_none() => params.class = Some(scan.string()?.to_owned()),
                "object_id" if params.object_id.is_none() => params.object_id = Some(scan.string()?.to_owned()),
                "method" if params.method.is_none() => params.method = Some(scan.string()?.to_owned()),
                "args" if params.args.is_none() => {
                    let mut args = Vec::new();
                    scan.sequence("[", "]", |scan| {
                        args.push(scan.value()?);
                        Some(())
                    })?;
                    params.args = Some(args);
                }
                "kwargs" if params.kwargs.is_none() => {
                    // A name given twice keeps its last value, as serde's map does.
                    let mut kwargs = BTreeMap::new();
                    scan.sequence("{", "}", |scan| {
                        let name = scan.string()?.to_owned();
                        scan.literal(":")?;
                        kwargs.insert(name, scan.value()?);
                        Some(())
                    })?;
                    params.kwargs = Some(kwargs);
                }
                _ => return None,
            }
            Some(())
        })?;
        Some(params)
    }

    /// A scalar or callback value in the wire shape, `type` first.
    fn value(&mut self) -> Option<Value> {
        self.literal(r#"{"type":"#)?;
        let tag = self.string()?;
        match tag {
            "null" => {
                self.literal("}")?;
                return Some(Value::Null);
            }
            "callback" => return self.callback(),
            _ => {}
        }
        self.literal(r#","value":"#)?;
        let value = match tag {
            "string" => Value::String(self.string()?.to_owned()),
            "int" => Value::Int(self.integer()?),
            "bool" if self.literal("true").is_some() => Value::Bool(true),
            "bool" if self.literal("false").is_some() => Value::Bool(false),
            _ => return None,
        };
        self.literal("}")?;
        Some(value)
    }

    /// The rest of a callback value after its tag: `{"id":"cb-1"}}`.
    fn callback(&mut self) -> Option<Value> {
        self.literal(r#","callback":{"id":"#)?;
        let id = self.string()?.to_owned();
        self.literal("}}")?;
        Some(Value::Callback(CallbackRef::new(id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::agrees_with_general;

    #[test]
    fn the_usual_call_lines_are_scanned_and_mean_what_the_general_parse_says() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"Ada"}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":0,"method":"function.call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"object.destroy","params":{"object_id":"obj-1"}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"object.new","params":{"class":"C","args":[],"kwargs":{}}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"object.call_method","params":{"object_id":"o","method":"m","args":[{"type":"int","value":-12},{"type":"bool","value":true},{"type":"null"},{"type":"bool","value":false},{"type":"int","value":9223372036854775807}],"kwargs":{"b":{"type":"string","value":""},"a":{"type":"int","value":0},"b":{"type":"null"}}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"function.call","params":{"name":"f","args":[{"type":"string","value":"héllo ✓"}]}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"function.call","params":{"name":"ping_back","args":[{"type":"callback","callback":{"id":"cb-1"}},{"type":"int","value":4}]}}"#,
            // Answers to the plugin's own requests, whatever their result.
            r#"{"jsonrpc":"2.0","id":3,"result":{"type":"int","value":0}}"#,
            r#"{"jsonrpc":"2.0","id":"x","result":null}"#,
            // Requests that are not calls, their params raw.
            r#"{"jsonrpc":"2.0","id":1,"method":"scriptling.handshake","params":{"protocol":"1.0","host":"scriptling","host_version":"dev","transports":["json"],"capabilities":["remote_objects"]}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"plugin.shutdown"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"plugin.shutdown","params":null}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":[1, 2]}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"no.such.method","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{"type":"list","items":[{"type":"float","value":1.5}, {"type":"string","value":"a\n}"}]}}"#,
        ] {
            assert!(agrees_with_general(line, parse(line)), "not taken: {line}");
        }
        let Some(Frame::Single(Message::Request(request))) = parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"Ada"}]}}"#,
        ) else {
            panic!("not scanned")
        };
        assert_eq!(request.id.map(RawValue::get), Some("7"));
        let Params::Decoded(params) = request.params else { panic!("not decoded") };
        assert_eq!(params.name.as_deref(), Some("greet"));
        assert_eq!(params.args, Some(vec![Value::String("Ada".into())]));
    }

    #[test]
    fn a_value_alone_is_scanned_in_the_usual_shape_and_means_what_serde_says() {
        use crate::rpc::scanned_value_agrees;
        for text in [
            r#"{"type":"int","value":-3}"#,
            r#"{"type":"string","value":"Ada"}"#,
            r#"{"type":"bool","value":false}"#,
            r#"{"type":"null"}"#,
            r#"{"type":"callback","callback":{"id":"cb-2"}}"#,
        ] {
            assert!(scanned_value_agrees(text), "not taken: {text}");
        }
        assert_eq!(value(r#"{"type":"int","value":7}"#), Some(Value::Int(7)));
        for text in [
            r#"{"type":"int","value":7} "#,
            r#"{"type":"int","value":7}{"#,
            r#" {"type":"int","value":7}"#,
            r#"{"type":"float","value":7.5}"#,
            r#"{"type":"list","items":[]}"#,
            r#"{"type":"string","value":"a\u0062"}"#,
            "7",
            "",
        ] {
            assert!(!scanned_value_agrees(text), "{text}");
        }
    }

    #[test]
    fn anything_else_is_left_to_the_serde_parses() {
        for line in [
            // A key out of place or twice, white space, more after.
            r#"{"id":1,"jsonrpc":"2.0","method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","name":"g"}}"#,
            r#"{"jsonrpc":"2.0", "id":1,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f"}} "#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f"},"x":1}"#,
            // Ids and numbers the scanner does not take.
            r#"{"jsonrpc":"2.0","id":null,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":01,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":-0}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":9223372036854775808}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":1e3}]}}"#,
            // Values other than plain scalars, an escape, a value before its type.
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"float","value":1.5}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"list","items":[]}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"callback","callback":{"id":"cb-1","x":1}}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"callback","callback":{"id":"cb\u0031"}}]}}"#,
            // Answers with more than one result, anything after it, white
            // space around it, an error, or a result that is not JSON.
            r#"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result": 1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1 }"#,
            r#"{"jsonrpc":"2.0","id":1,"result":}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[1,}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
            // A request that is not a call with anything but params, or
            // params that are not one value.
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":1,"params":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params": {}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"string","value":"a\nb"}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"value":"a","type":"string"}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"string","value":1}]}}"#,
            // Tags and numbers serde treats otherwise: an empty tag is a
            // null, a null's value is ignored, the rest are out of range.
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":""}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"null","value":1}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":-9223372036854775809}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":18446744073709551616}]}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"function.call","params":{"name":"f"}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"function.call\",\"params\":{\"name\":\"f\u{1}\"}}",
            // Cut short.
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"int","value":1"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f"#,
        ] {
            assert!(parse(line).is_none(), "{line}");
        }
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"function.call","params":{{"name":"f","args":[{{"type":"string","value":"{}"}}]}}}}"#,
            "x".repeat(super::super::ONE_PASS_MAX)
        );
        assert!(parse(&long).is_none(), "a long line's params are decoded where the call runs");
        let prefix = r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":[{"type":"string","value":""#;
        let end = r#""}]}}"#;
        let longest = format!("{prefix}{}{end}", "x".repeat(super::super::ONE_PASS_MAX - prefix.len() - end.len()));
        assert!(agrees_with_general(&longest, parse(&longest)), "a line of the limit's length is scanned");
    }
}
