//! A call read from a short line, parsed in one pass: the envelope and the
//! call's params together, where the general parse ([`super::parse_text`])
//! keeps params raw for whoever runs the call to decode (a second pass over
//! the same bytes, ~1.8k instructions of the ~13k a plain call cost; 64
//! calls in flight: +12 % calls a second, ARCHITECTURE.md).
//!
//! It takes only the shape a host writes: an object whose `method` (a call
//! method) comes before its `params`, keys without escapes, none of
//! `jsonrpc`, `id`, `method`, `params` twice, no `result` or `error`, params
//! that decode, values nested less than serde_json's own limit. Anything
//! else, however valid, is left to the general parse, which classifies it as
//! it always has, so the two never disagree (the `envelope` fuzz target checks
//! it on every input). A call refused afterwards (a TCP client that has not
//! presented its token) has had its params decoded for nothing: 4 KiB at
//! most.

use std::fmt;

use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::{CallParams, Frame, Method, ONE_PASS_MAX, Params, checked_request};

/// `text` parsed in one pass if it is a call in the usual shape; `None`
/// leaves it to the general parse.
pub(super) fn parse(text: &str) -> Option<Frame<'_>> {
    if text.len() > ONE_PASS_MAX {
        return None;
    }
    // serde_json's recursion limit stays on: a value nested deeper is left
    // to the general parse, which lifts it and counts values instead.
    let mut de = serde_json::Deserializer::from_str(text);
    let call = CallLine::deserialize(&mut de).ok()?;
    de.end().ok()?;
    let params = call.params.map_or(Params::Raw(None), Params::Decoded);
    Some(Frame::Single(checked_request(call.jsonrpc, call.id, Some(call.method), params)))
}

/// A call's fields (`params`: `None` when absent or `null`; boxed where
/// decoded, as moving the struct up through serde's layers showed in the
/// reading thread's samples).
struct CallLine<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: &'a str,
    params: Option<Box<CallParams>>,
}

impl<'de> Deserialize<'de> for CallLine<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CallLineVisitor)
    }
}

struct CallLineVisitor;

impl<'de> Visitor<'de> for CallLineVisitor {
    type Value = CallLine<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a call request")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // The error only says "not here": the general parse finds the real one.
        let elsewhere = || A::Error::custom("left to the general parse");
        let (mut jsonrpc, mut id, mut method, mut params) = (None, None, None, None);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "jsonrpc" if jsonrpc.is_none() => jsonrpc = Some(map.next_value::<&'de RawValue>()?),
                "id" if id.is_none() => id = Some(map.next_value::<&'de RawValue>()?),
                "method" if method.is_none() => {
                    let name = map.next_value::<&'de str>()?;
                    if !Method::parse(name).is_call() {
                        return Err(elsewhere());
                    }
                    method = Some(name);
                }
                // Only once the method is known to be a call's.
                "params" if params.is_none() && method.is_some() => {
                    params = Some(map.next_value::<Option<Box<CallParams>>>()?);
                }
                "jsonrpc" | "id" | "method" | "params" | "result" | "error" => return Err(elsewhere()),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let method = method.ok_or_else(elsewhere)?;
        Ok(CallLine { jsonrpc, id, method, params: params.flatten() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{Message, agrees_with_general};

    #[test]
    fn a_call_in_the_hosts_shape_is_decoded_in_one_pass_and_means_what_the_general_parse_says() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"Ada"}]}}"#;
        let Some(Frame::Single(Message::Request(request))) = parse(line) else { panic!("not taken") };
        let Params::Decoded(params) = &request.params else { panic!("not decoded") };
        assert_eq!(params.name.as_deref(), Some("greet"));
        assert!(agrees_with_general(line, parse(line)));
    }

    #[test]
    fn anything_else_is_left_to_the_general_parse() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"function.call","params":{{"name":"f","args":[{}1{}]}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for line in [
            // Not a call, or not a request.
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"type":"null"}}"#,
            // Params before the method, a key twice, an escaped key.
            r#"{"jsonrpc":"2.0","id":1,"params":{"name":"f"},"method":"function.call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f"},"params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"\u006dethod":"function.call","params":{"name":"f"}}"#,
            // Params that are not a call's, and a result beside the method.
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"f","args":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{},"result":1}"#,
            // Nested past serde_json's limit; not an object; not JSON.
            &deep,
            r#"[{"jsonrpc":"2.0","id":1,"method":"function.call"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"#,
        ] {
            assert!(parse(line).is_none(), "{line}");
        }
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"function.call","params":{{"name":"f","args":[{{"type":"string","value":"{}"}}]}}}}"#,
            "x".repeat(ONE_PASS_MAX)
        );
        assert!(parse(&long).is_none(), "a long line's params are decoded where the call runs");
    }

    #[test]
    fn what_it_takes_it_classifies_as_the_general_parse_does() {
        for line in [
            r#"{"jsonrpc":"2.0","id":"a","method":"object.new","params":{"class":"C","args":[],"kwargs":{"n":{"type":"int","value":1}}}}"#,
            r#"{"jsonrpc":"2.0","method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"object.destroy","params":null}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"object.call_method"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"function.call","extra":[1,{"x":2}],"params":{"name":"f","more":1}}"#,
            // Taken, then refused for its version or id, as the general parse refuses it.
            r#"{"jsonrpc":"1.0","id":3,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"id":3,"method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":[3],"method":"function.call","params":{"name":"f"}}"#,
            // Ids of every kind, white space around and inside, params as an array of fields.
            r#"{"jsonrpc":"2.0","id":"a\"b\u0041","method":"function.call","params":{"name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":-1.5e3,"method":"function.call","params":{"name":"f"}}"#,
            " \t{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"method\" : \"function.call\" , \"params\" : { \"name\" : \"f\" } } \r",
            r#"{"jsonrpc":"2.0","id":4,"method":"function.call","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"function.call","params":["f"]}"#,
        ] {
            assert!(agrees_with_general(line, parse(line)), "not taken: {line}");
        }
    }
}
