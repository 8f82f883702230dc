//! The JSON-RPC 2.0 envelope: parsing incoming frames and writing responses.
//!
//! Ids are kept as raw JSON and echoed byte for byte (numbers, strings, `0`,
//! `null`); a message without an `id` is a notification. A message carrying
//! `method` is a request, anything else with `result` or `error` is a
//! response to one of the plugin's own requests. This module is the single
//! place where an [`RpcError`] becomes an error object on the wire.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::error::{ErrorCode, RpcError};

/// A request id exactly as it appeared on the wire.
pub(crate) type Id = Box<RawValue>;

/// One incoming request.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// `None` for a notification.
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) method: &'a str,
    /// `None` when absent or `null`.
    pub(crate) params: Option<&'a RawValue>,
}

/// A response to one of the plugin's own requests.
#[derive(Debug)]
pub(crate) struct Response<'a> {
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) outcome: Result<&'a RawValue, RemoteErrorObject>,
}

/// The error object of a response from the host.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RemoteErrorObject {
    #[serde(default)]
    pub(crate) code: i64,
    #[serde(default)]
    pub(crate) message: String,
}

/// One element of an incoming frame, classified.
#[derive(Debug)]
pub(crate) enum Message<'a> {
    Request(Request<'a>),
    Response(Response<'a>),
    /// Not a valid message: answer with this error (and this id, if known).
    Invalid(Option<&'a RawValue>, RpcError),
}

/// An incoming line.
#[derive(Debug)]
pub(crate) enum Frame<'a> {
    Single(Message<'a>),
    Batch(Vec<Message<'a>>),
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Keeps a field that is present but `null` (an `id: null` request is not a
/// notification; a `result: null` response is a response).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Parses one line (without its newline).
pub(crate) fn parse_frame(line: &[u8]) -> Frame<'_> {
    let first = line.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'[') {
        return match serde_json::from_slice::<Vec<&RawValue>>(line) {
            Ok(items) if items.is_empty() => Frame::Single(Message::Invalid(
                None,
                RpcError::new(ErrorCode::InvalidRequest, "invalid request: empty batch"),
            )),
            Ok(items) => Frame::Batch(items.into_iter().map(|raw| classify(raw.get().as_bytes())).collect()),
            Err(e) => Frame::Single(Message::Invalid(None, parse_error(&e))),
        };
    }
    Frame::Single(classify(line))
}

fn classify(bytes: &[u8]) -> Message<'_> {
    let envelope = match serde_json::from_slice::<Envelope<'_>>(bytes) {
        Ok(env) => env,
        Err(e) => return invalid_envelope(bytes, &e),
    };
    if let Some(method) = envelope.method {
        let Ok(method) = serde_json::from_str::<&str>(method.get()) else {
            return Message::Invalid(
                envelope.id,
                RpcError::new(
                    ErrorCode::InvalidRequest,
                    "invalid request: \"method\" must be a string without escapes",
                ),
            );
        };
        let params = envelope.params.filter(|p| p.get() != "null");
        return Message::Request(Request { id: envelope.id, method, params });
    }
    if let Some(error) = envelope.error {
        let object = serde_json::from_str::<RemoteErrorObject>(error.get()).unwrap_or_else(|_| RemoteErrorObject {
            code: ErrorCode::InternalError.code(),
            message: format!("malformed error object: {}", error.get()),
        });
        return Message::Response(Response { id: envelope.id, outcome: Err(object) });
    }
    if let Some(result) = envelope.result {
        return Message::Response(Response { id: envelope.id, outcome: Ok(result) });
    }
    Message::Invalid(
        envelope.id,
        RpcError::new(ErrorCode::InvalidRequest, "invalid request: a request needs \"method\""),
    )
}

/// The envelope did not parse: tell invalid JSON (-32700) from valid JSON
/// that is not a request object (-32600).
fn invalid_envelope<'a>(bytes: &'a [u8], err: &serde_json::Error) -> Message<'a> {
    if std::str::from_utf8(bytes).is_err() || serde_json::from_slice::<IgnoredAny>(bytes).is_err() {
        return Message::Invalid(None, parse_error(err));
    }
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow, default, deserialize_with = "present")]
        id: Option<&'a RawValue>,
    }
    let id = serde_json::from_slice::<IdOnly<'_>>(bytes).ok().and_then(|x| x.id);
    let what = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => format!("invalid request: {err}"),
        _ => "invalid request: expected a JSON object or a batch array".to_owned(),
    };
    Message::Invalid(id, RpcError::new(ErrorCode::InvalidRequest, what))
}

fn parse_error(err: &serde_json::Error) -> RpcError {
    RpcError::new(ErrorCode::ParseError, format!("parse error: {err}"))
}

/// Writes a success response frame (with its trailing newline) into `out`.
///
/// `result` is the already-serialised result JSON.
pub(crate) fn write_result(out: &mut Vec<u8>, id: &RawValue, result: &[u8]) {
    out.reserve(result.len() + id.get().len() + 40);
    write_result_prefix(out, id);
    out.extend_from_slice(result);
    out.push(b'}');
}

/// The bytes around a success response's result, for writing the result
/// from where it was serialised: `{"jsonrpc":"2.0","id":<id>,"result":`, and
/// `}` plus the newline.
pub(crate) fn result_envelope(id: &RawValue) -> (Vec<u8>, &'static [u8]) {
    let mut prefix = Vec::with_capacity(id.get().len() + 32);
    write_result_prefix(&mut prefix, id);
    (prefix, b"}\n")
}

fn write_result_prefix(out: &mut Vec<u8>, id: &RawValue) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(b",\"result\":");
}

/// Writes an error response frame into `out`. `id` is `None` when the
/// request's id could not be read (it is then `null`, as JSON-RPC requires).
pub(crate) fn write_error(out: &mut Vec<u8>, id: Option<&RawValue>, error: &RpcError) {
    #[derive(Serialize)]
    struct ErrorObject<'a> {
        code: i64,
        message: &'a str,
    }
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.map_or("null", RawValue::get).as_bytes());
    out.extend_from_slice(b",\"error\":");
    // Serialising a struct of an integer and a string cannot fail.
    let _ = serde_json::to_writer(&mut *out, &ErrorObject { code: error.code.code(), message: &error.message });
    out.push(b'}');
}

/// Serialises `value` as a result, or explains (for the call `qualified`) why
/// it cannot be sent.
pub(crate) fn encode_result<T: Serialize + ?Sized>(value: &T, qualified: &str) -> Result<Vec<u8>, RpcError> {
    serde_json::to_vec(value).map_err(|e| RpcError::application(format!("{qualified}(): cannot send the result: {e}")))
}

/// Writes a request frame for one of the plugin's own calls into `out`.
pub(crate) fn write_request<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: u64,
    method: &str,
    params: &P,
) -> serde_json::Result<()> {
    #[derive(Serialize)]
    struct Outgoing<'a, P: ?Sized> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        params: &'a P,
    }
    serde_json::to_writer(&mut *out, &Outgoing { jsonrpc: "2.0", id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(line: &str) -> Message<'_> {
        match parse_frame(line.as_bytes()) {
            Frame::Single(m) => m,
            Frame::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn ids_are_kept_verbatim() {
        for (line, id) in [
            (r#"{"jsonrpc":"2.0","id":0,"method":"m"}"#, Some("0")),
            (r#"{"jsonrpc":"2.0","id":"abc","method":"m"}"#, Some("\"abc\"")),
            (r#"{"jsonrpc":"2.0","id":1.50,"method":"m"}"#, Some("1.50")),
            (r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#, Some("null")),
            (r#"{"jsonrpc":"2.0","method":"m"}"#, None),
        ] {
            let Message::Request(r) = single(line) else { panic!("{line}") };
            assert_eq!(r.id.map(RawValue::get), id, "{line}");
        }
    }

    #[test]
    fn params_absent_or_null_are_none() {
        let Message::Request(r) = single(r#"{"id":1,"method":"m","params":null}"#) else { panic!() };
        assert!(r.params.is_none());
        let Message::Request(r) = single(r#"{"id":1,"method":"m","params":{"a":1}}"#) else { panic!() };
        assert_eq!(r.params.unwrap().get(), r#"{"a":1}"#);
    }

    #[test]
    fn responses_are_told_from_requests() {
        let Message::Response(r) = single(r#"{"jsonrpc":"2.0","id":7,"result":null}"#) else { panic!() };
        assert_eq!(r.outcome.unwrap().get(), "null");
        let Message::Response(r) = single(r#"{"id":7,"error":{"code":-32000,"message":"unknown callback cb-1"}}"#)
        else {
            panic!()
        };
        assert_eq!(r.outcome.unwrap_err().message, "unknown callback cb-1");
    }

    #[test]
    fn invalid_frames_get_the_right_code() {
        let cases = [
            ("{not json", ErrorCode::ParseError),
            ("[1,", ErrorCode::ParseError),
            ("[]", ErrorCode::InvalidRequest),
            ("42", ErrorCode::InvalidRequest),
            (r#"{"id":3}"#, ErrorCode::InvalidRequest),
            (r#"{"id":3,"method":5}"#, ErrorCode::InvalidRequest),
        ];
        for (line, code) in cases {
            let Message::Invalid(_, e) = single(line) else { panic!("{line}") };
            assert_eq!(e.code, code, "{line}");
        }
        let Message::Invalid(id, _) = single(r#"{"id":3}"#) else { panic!() };
        assert_eq!(id.map(RawValue::get), Some("3"));
    }

    #[test]
    fn batches_classify_each_element() {
        let Frame::Batch(items) = parse_frame(br#"[{"id":1,"method":"a"}, 5, {"method":"n"}]"#) else { panic!() };
        assert!(matches!(items[0], Message::Request(Request { id: Some(_), .. })));
        assert!(matches!(items[1], Message::Invalid(None, RpcError { code: ErrorCode::InvalidRequest, .. })));
        assert!(matches!(items[2], Message::Request(Request { id: None, .. })));
    }

    #[test]
    fn frames_are_written_compactly() {
        let id = RawValue::from_string("\"x\"".into()).unwrap();
        let mut out = Vec::new();
        write_result(&mut out, &id, br#"{"type":"null"}"#);
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":"x","result":{"type":"null"}}"#);
        out.clear();
        write_error(&mut out, None, &RpcError::new(ErrorCode::ParseError, "bad \"x\""));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"x\""}}"#
        );
    }
}
