//! The JSON-RPC 2.0 envelope: parsing incoming frames and writing responses.
//!
//! Ids are kept as raw JSON and echoed byte for byte (numbers, strings, `0`,
//! `null`); a message without an `id` is a notification. A message carrying
//! `method` is a request; one without it that carries `id`, `result` or
//! `error` is an answer to one of the plugin's own requests, and is never
//! answered itself, even when it is malformed (the host would read the
//! answer as one to its own request of that id). A request must say
//! `"jsonrpc": "2.0"` and have a string, number or null id; one that does
//! not is refused with `-32600` and a null id, as JSON-RPC 2.0 requires.
//! This module is the single place where an [`RpcError`] becomes an error
//! object on the wire.

pub(crate) mod error;
mod onepass;
pub(crate) mod params;
mod scan;

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

pub(crate) use error::{ErrorCode, RpcError};
pub(crate) use params::CallParams;

use crate::value::codec::Encoded;
use crate::value::{Value, codec};

/// A request id exactly as it appeared on the wire.
pub(crate) type Id = Box<RawValue>;

/// The protocol's methods (HOST-NOTES A.3), and `ping` for health checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Handshake,
    FunctionCall,
    ObjectNew,
    ObjectCall,
    Destroy,
    Shutdown,
    EnvironmentOpen,
    EnvironmentClose,
    Ping,
    /// The Supex bridge's `hello`: a client says who it is (and presents
    /// the token, where one is required).
    Hello,
    /// The Supex bridge's `tools/call`: a function called with plain JSON
    /// arguments by keyword.
    ToolsCall,
    /// `tools/list`: the functions `tools/call` can call.
    ToolsList,
    Unknown(String),
}

impl Method {
    pub(crate) fn parse(name: &str) -> Method {
        match name {
            "scriptling.handshake" => Method::Handshake,
            "function.call" => Method::FunctionCall,
            "object.new" => Method::ObjectNew,
            "object.call_method" => Method::ObjectCall,
            "object.destroy" => Method::Destroy,
            "plugin.shutdown" => Method::Shutdown,
            "environment.open" => Method::EnvironmentOpen,
            "environment.close" => Method::EnvironmentClose,
            "ping" => Method::Ping,
            "hello" => Method::Hello,
            "tools/call" => Method::ToolsCall,
            "tools/list" => Method::ToolsList,
            other => Method::Unknown(other.to_owned()),
        }
    }

    /// Whether its params are [`CallParams`]: a call of a function, a
    /// constructor or a method, or an object's destruction.
    pub(crate) fn is_call(&self) -> bool {
        matches!(self, Method::FunctionCall | Method::ObjectNew | Method::ObjectCall | Method::Destroy)
    }

    /// The method's wire name.
    pub(crate) fn name(&self) -> &str {
        match self {
            Method::Handshake => "scriptling.handshake",
            Method::FunctionCall => "function.call",
            Method::ObjectNew => "object.new",
            Method::ObjectCall => "object.call_method",
            Method::Destroy => "object.destroy",
            Method::Shutdown => "plugin.shutdown",
            Method::EnvironmentOpen => "environment.open",
            Method::EnvironmentClose => "environment.close",
            Method::Ping => "ping",
            Method::Hello => "hello",
            Method::ToolsCall => "tools/call",
            Method::ToolsList => "tools/list",
            Method::Unknown(name) => name,
        }
    }
}

/// Where `inner` (a slice of `outer`, such as a request's params) sits in
/// `outer`, so a request can outlive the borrow it was parsed from.
pub(crate) fn span(outer: &[u8], inner: &RawValue) -> std::ops::Range<usize> {
    let start = inner.get().as_ptr() as usize - outer.as_ptr() as usize;
    debug_assert!(start + inner.get().len() <= outer.len());
    start..start + inner.get().len()
}

/// One incoming request.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// `None` for a notification.
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) method: &'a str,
    pub(crate) params: Params<'a>,
}

/// A request's params.
#[derive(Debug)]
pub(crate) enum Params<'a> {
    /// Raw JSON, for whoever runs the request to decode (`None`: absent or
    /// `null`).
    Raw(Option<&'a RawValue>),
    /// A call's, decoded with the envelope (see [`parse_line`]); boxed, as
    /// the request is moved a dozen times on its way to run.
    Decoded(Box<CallParams>),
}

/// An answer to one of the plugin's own requests.
#[derive(Debug)]
pub(crate) struct Response<'a> {
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) outcome: Result<&'a RawValue, Failure>,
}

/// Why an answer from the host carries no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The host answered with this error object.
    Remote(RemoteErrorObject),
    /// The answer is not a well-formed response (what is wrong with it).
    Malformed(String),
}

/// The error object of a response from the host.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

/// A message's fields.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
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

/// Parses one line (without its newline). A batch holds at most
/// `max_batch` elements; a longer one is refused whole, without being
/// classified.
#[cfg(any(feature = "http", fuzzing, test))]
pub(crate) fn parse_frame(line: &[u8], max_batch: usize) -> Frame<'_> {
    // Checked whole once: bytes in a field that is skipped are held to
    // UTF-8 too, and no string needs checking again.
    match std::str::from_utf8(line) {
        Ok(text) => parse_text(text, max_batch),
        Err(error) => Frame::Single(Message::Invalid(None, not_utf8(error))),
    }
}

/// The error for a line that is not UTF-8.
pub(crate) fn not_utf8(error: std::str::Utf8Error) -> RpcError {
    RpcError::new(ErrorCode::ParseError, format!("parse error: invalid UTF-8 at byte {}", error.valid_up_to()))
}

/// Lines up to this long have a call's params decoded with the envelope, on
/// the thread that reads them (`scan.rs`, `onepass.rs`): a few microseconds
/// at most. A longer line's params are decoded where the call runs (a pool
/// thread, for calls read one behind another), so that a large payload
/// never holds up the reading.
const ONE_PASS_MAX: usize = 4096;

/// Whether the scanner and serde's one pass take `text`; panics where
/// either makes of it what the general parse does not.
#[cfg(fuzzing)]
pub(crate) fn fast_parses_agree(text: &str) {
    agrees_with_general(text, scan::parse(text));
    agrees_with_general(text, onepass::parse(text));
}

/// Whether a fast parse took `text` (`fast` is what it made of it); panics
/// if that is not what the general parse makes of it.
#[cfg(any(fuzzing, test))]
pub(crate) fn agrees_with_general(text: &str, fast: Option<Frame<'_>>) -> bool {
    let Some(fast) = fast else { return false };
    assert_eq!(meaning(fast), meaning(parse_text(text, usize::MAX)), "{text}");
    true
}

/// What a frame says, with params decoded as a call's wherever they are.
#[cfg(any(fuzzing, test))]
fn meaning(frame: Frame<'_>) -> String {
    let Frame::Single(message) = frame else { return "a batch".into() };
    match message {
        Message::Request(Request { id, method, params }) => {
            // A request that is not a call keeps its params raw either way:
            // their text must agree, not only what a call would make of it.
            let raw = match &params {
                Params::Raw(raw) if !Method::parse(method).is_call() => raw.map(RawValue::get),
                _ => None,
            };
            let params = match params {
                Params::Decoded(params) => Some(Ok(*params)),
                Params::Raw(raw) => raw.map(|raw| codec::decode_str::<CallParams>(raw.get()).map_err(drop)),
            };
            format!("request {:?} {method} {params:?} {raw:?}", id.map(RawValue::get))
        }
        other => format!("{other:?}"),
    }
}

/// A value the host sent (a callback's result), decoded by the scanner when
/// it is in the usual shape (`scan.rs`), else by serde; the two agree (the
/// `codec` fuzz target checks it on every input).
pub(crate) fn decode_value(text: &str) -> serde_json::Result<Value> {
    scan::value(text).map_or_else(|| codec::decode_str(text), Ok)
}

/// Whether the scanner took `text` as a value alone; panics if serde makes
/// something else of it.
#[cfg(any(fuzzing, test))]
pub(crate) fn scanned_value_agrees(text: &str) -> bool {
    let Some(scanned) = scan::value(text) else { return false };
    assert_eq!(codec::decode_str::<Value>(text).ok(), Some(scanned), "{text}");
    true
}

/// [`parse_text`] for a line a session read: a call on a short line has its
/// params decoded in the same pass, by a scanner when it is in the shape a
/// host usually writes (`scan.rs`), else by serde (`onepass.rs`), and means
/// what [`parse_text`] would make of it.
pub(crate) fn parse_line(text: &str, max_batch: usize) -> Frame<'_> {
    scan::parse(text).or_else(|| onepass::parse(text)).unwrap_or_else(|| parse_text(text, max_batch))
}

/// [`parse_frame`] for text already checked.
pub(crate) fn parse_text(text: &str, max_batch: usize) -> Frame<'_> {
    if first_byte(text.as_bytes()) == Some(b'[') {
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = de.deserialize_seq(BatchVisitor { max: max_batch }).and_then(|items| de.end().map(|()| items));
        return match parsed {
            Ok(items) if items.is_empty() => Frame::Single(Message::Invalid(
                None,
                RpcError::new(ErrorCode::InvalidRequest, "invalid request: empty batch"),
            )),
            Ok(items) => Frame::Batch(items.into_iter().map(|raw| classify(raw.get())).collect()),
            Err(e) if e.is_data() && e.to_string().starts_with(BATCH_TOO_LONG) => Frame::Single(Message::Invalid(
                None,
                RpcError::new(ErrorCode::InvalidRequest, batch_too_long(max_batch)),
            )),
            Err(e) => Frame::Single(Message::Invalid(None, parse_error(&e))),
        };
    }
    Frame::Single(classify(text))
}

/// The first byte that is not whitespace.
fn first_byte(bytes: &[u8]) -> Option<u8> {
    bytes.iter().find(|b| !b.is_ascii_whitespace()).copied()
}

const BATCH_TOO_LONG: &str = "batch too long";

fn batch_too_long(max: usize) -> String {
    format!("invalid request: a batch may hold at most {max} requests")
}

/// Collects a batch's elements as raw JSON, stopping at the first one past
/// the limit so an oversized batch costs no more than the limit.
struct BatchVisitor {
    max: usize,
}

impl<'de> Visitor<'de> for BatchVisitor {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a batch array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while let Some(item) = seq.next_element::<&RawValue>()? {
            if items.len() == self.max {
                return Err(serde::de::Error::custom(BATCH_TOO_LONG));
            }
            items.push(item);
        }
        Ok(items)
    }
}

fn classify(text: &str) -> Message<'_> {
    // serde reads a struct from an array too (`[1,"ping"]` would be id 1,
    // method "ping"); only an object is a request.
    if first_byte(text.as_bytes()) != Some(b'{') {
        return match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => Message::Invalid(
                None,
                RpcError::new(ErrorCode::InvalidRequest, "invalid request: expected a JSON object or a batch array"),
            ),
            Err(e) => Message::Invalid(None, parse_error(&e)),
        };
    }
    match serde_json::from_str::<Envelope<'_>>(text) {
        Ok(envelope) => envelope.into_message(),
        Err(e) => invalid_envelope(text, &e),
    }
}

impl<'a> Envelope<'a> {
    /// What the message is.
    fn into_message(self) -> Message<'a> {
        let Some(method) = self.method else { return self.into_answer() };
        let method = serde_json::from_str::<&str>(method.get()).ok();
        checked_request(self.jsonrpc, self.id, method, Params::Raw(self.params))
    }

    /// A message without `method`: an answer to one of the plugin's own
    /// requests if it says which (never answered, however malformed), and
    /// otherwise not a message at all.
    fn into_answer(self) -> Message<'a> {
        let outcome = match (self.result, self.error) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(match serde_json::from_str::<RemoteErrorObject>(error.get()) {
                Ok(object) => Failure::Remote(object),
                Err(_) => Failure::Malformed(format!("its \"error\" is not an error object: {}", error.get())),
            }),
            (Some(_), Some(_)) => Err(Failure::Malformed(r#"it has both "result" and "error""#.to_owned())),
            (None, None) if self.id.is_some() => {
                Err(Failure::Malformed(r#"it has neither "result" nor "error""#.to_owned()))
            }
            (None, None) => return Message::Invalid(None, invalid(r#"invalid request: a request needs "method""#)),
        };
        Message::Response(Response { id: self.id, outcome })
    }
}

/// A request, if its version and id are sound and its method is a string
/// without escapes (`method`: `None` if not).
fn checked_request<'a>(
    jsonrpc: Option<&RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a str>,
    params: Params<'a>,
) -> Message<'a> {
    if jsonrpc.map(RawValue::get) != Some(r#""2.0""#) {
        return Message::Invalid(None, invalid(r#"invalid request: "jsonrpc" must be "2.0""#));
    }
    let Some(id) = valid_id(id) else {
        return Message::Invalid(None, invalid(r#"invalid request: "id" must be a string, a number or null"#));
    };
    let Some(method) = method else {
        return Message::Invalid(id, invalid(r#"invalid request: "method" must be a string without escapes"#));
    };
    Message::Request(Request { id, method, params })
}

/// A request's id if it is one JSON-RPC allows (absent, a string, a number
/// or null); `None` if it is an object, an array or a boolean.
fn valid_id(id: Option<&RawValue>) -> Option<Option<&RawValue>> {
    match id.map(|raw| raw.get().as_bytes().first().copied()) {
        None => Some(None),
        Some(Some(b'"' | b'-' | b'0'..=b'9' | b'n')) => Some(id),
        Some(_) => None,
    }
}

fn invalid(message: &str) -> RpcError {
    RpcError::new(ErrorCode::InvalidRequest, message)
}

/// The envelope did not parse: tell invalid JSON (-32700) from valid JSON
/// that is not a request object (-32600).
fn invalid_envelope<'a>(text: &'a str, err: &serde_json::Error) -> Message<'a> {
    if serde_json::from_str::<IgnoredAny>(text).is_err() {
        return Message::Invalid(None, parse_error(err));
    }
    // `{"id": 1, "id": 2, ...}`: serde refuses duplicate fields. Read the
    // first of each again, leniently, to tell a request from an answer.
    let fields = serde_json::from_str::<FirstFields<'_>>(text).unwrap_or_default();
    if fields.method.is_none() {
        // Not a request: an answer to one of ours, which is never answered.
        return Message::Response(Response { id: fields.id, outcome: Err(Failure::Malformed(err.to_string())) });
    }
    // The id is echoed only from a request whose id and version are right.
    let id = Some(fields)
        .filter(|f| f.jsonrpc.map(RawValue::get) == Some(r#""2.0""#))
        .and_then(|f| valid_id(f.id).flatten());
    Message::Invalid(id, RpcError::new(ErrorCode::InvalidRequest, format!("invalid request: {err}")))
}

/// The first `jsonrpc`, `id` and `method` of an object, whatever else it
/// holds (repeated keys included).
#[derive(Default)]
struct FirstFields<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for FirstFields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = FirstFields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = FirstFields::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    let slot = match &*key {
                        "jsonrpc" => &mut fields.jsonrpc,
                        "id" => &mut fields.id,
                        "method" => &mut fields.method,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

fn parse_error(err: &serde_json::Error) -> RpcError {
    RpcError::new(ErrorCode::ParseError, format!("parse error: {}", json_error(err)))
}

/// What serde_json says is wrong with a text, in words a client can act
/// on. Its two errors for a string escape that is half of a UTF-16
/// surrogate pair ("unexpected end of hex escape", and "lone leading
/// surrogate in hex escape" for a trailing half) are said as what they are.
pub(crate) fn json_error(err: &serde_json::Error) -> String {
    let text = err.to_string();
    if !text.contains("hex escape") {
        return text;
    }
    format!(
        "a string escape is half of a UTF-16 surrogate pair (\\ud800-\\udfff) without its other half, which is \
         not a character, at line {} column {}",
        err.line(),
        err.column()
    )
}

/// Writes a success response frame (without a trailing newline) into `out`.
///
/// `result` is the already-serialised result JSON.
pub(crate) fn write_result(out: &mut Vec<u8>, id: &RawValue, result: &[u8]) {
    out.reserve(result.len() + id.get().len() + 40);
    write_result_prefix(out, id);
    out.extend_from_slice(result);
    out.push(b'}');
}

/// A success response frame (without a trailing newline) made in the
/// result's own buffer: the envelope's start goes in front of it, which for
/// a small result costs less than a second buffer.
pub(crate) fn into_result_line(id: &RawValue, result: Encoded) -> Vec<u8> {
    let (head, tail) = (result.head(), result.tail());
    let start = [RESULT_START, id.get().as_bytes(), RESULT_KEY, head];
    let shift: usize = start.iter().map(|part| part.len()).sum();
    let mut line = result.body;
    let len = line.len();
    // Room for the tail and the newline the frame adds, so neither regrows it.
    line.reserve(shift + tail.len() + RESULT_TAIL.len() + 1);
    line.resize(len + shift, 0);
    line.copy_within(..len, shift);
    let mut at = 0;
    for part in start {
        line[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    line.extend_from_slice(tail);
    line.extend_from_slice(RESULT_TAIL);
    line
}

/// [`write_result`] for a result in parts.
pub(crate) fn write_encoded(out: &mut Vec<u8>, id: &RawValue, result: &Encoded) {
    out.reserve(result.len() + id.get().len() + 40);
    write_result_prefix(out, id);
    result.write_to(out);
    out.push(b'}');
}

/// The start of a success response, up to its result:
/// `{"jsonrpc":"2.0","id":<id>,"result":`. The result and [`RESULT_TAIL`]
/// follow, so a large result is written from where it was serialised.
pub(crate) fn result_head(id: &RawValue) -> Vec<u8> {
    let mut head = Vec::with_capacity(id.get().len() + 32);
    write_result_prefix(&mut head, id);
    head
}

/// What follows a success response's result.
pub(crate) const RESULT_TAIL: &[u8] = b"}";

const RESULT_START: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
const RESULT_KEY: &[u8] = b",\"result\":";

fn write_result_prefix(out: &mut Vec<u8>, id: &RawValue) {
    out.extend_from_slice(RESULT_START);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(RESULT_KEY);
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
pub(crate) fn encode_result<T: Serialize + ?Sized>(value: &T, label: &impl fmt::Display) -> Result<Encoded, RpcError> {
    serde_json::to_vec(value).map(Encoded::from).map_err(|e| cannot_send(label, &e))
}

/// [`encode_result`] for a value (see `codec::encode_owned`).
pub(crate) fn encode_value(value: Value, label: &impl fmt::Display) -> Result<Encoded, RpcError> {
    codec::encode_owned(value).map_err(|e| cannot_send(label, &e))
}

fn cannot_send(label: &impl fmt::Display, error: &serde_json::Error) -> RpcError {
    RpcError::application(format!("{label}: cannot send the result: {error}"))
}

/// Writes a request frame for one of the plugin's own calls into `out`. The
/// envelope's keys are written as they are: serialised field by field, a
/// callback's envelope cost serde as much as its params did.
pub(crate) fn write_request<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: u64,
    method: &str,
    params: &P,
) -> serde_json::Result<()> {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut *out, &id)?;
    out.extend_from_slice(br#","method":"#);
    serde_json::to_writer(&mut *out, method)?;
    out.extend_from_slice(br#","params":"#);
    serde_json::to_writer(&mut *out, params)?;
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(line: &str) -> Message<'_> {
        match parse_frame(line.as_bytes(), 100) {
            Frame::Single(m) => m,
            Frame::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn the_plugins_requests_are_written_as_one_object_keys_in_the_usual_order() {
        let mut out = Vec::new();
        let params = serde_json::json!({"id": "cb-\"1", "args": [1]});
        write_request(&mut out, u64::MAX, "callback.call", &params).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"callback.call","params":{"args":[1],"id":"cb-\"1"}}"#
        );
        // Params serde cannot write are an error, not a broken frame sent.
        let mut keyed = std::collections::HashMap::new();
        keyed.insert(vec![1u8], 1);
        assert!(write_request(&mut Vec::new(), 1, "host.log", &keyed).is_err());
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
        let Message::Request(r) = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#) else { panic!() };
        assert!(matches!(r.params, Params::Raw(None)));
        let Message::Request(r) = single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}"#) else { panic!() };
        assert!(matches!(r.params, Params::Raw(Some(raw)) if raw.get() == r#"{"a":1}"#));
    }

    #[test]
    fn malformed_or_not_utf8_lines_are_parse_errors() {
        for line in [
            &b"{nope"[..],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}",
            b"{\"jsonrpc\":\"2.0\xc3\",\"id\":1,\"method\":\"ping\"}",
        ] {
            let Frame::Single(Message::Invalid(_, e)) = parse_frame(line, 100) else { panic!() };
            assert_eq!(e.code, ErrorCode::ParseError);
        }
    }

    #[test]
    fn responses_are_told_from_requests() {
        let Message::Response(r) = single(r#"{"jsonrpc":"2.0","id":7,"result":null}"#) else { panic!() };
        assert_eq!(r.outcome.unwrap().get(), "null");
        let Message::Response(r) = single(r#"{"id":7,"error":{"code":-32000,"message":"unknown callback cb-1"}}"#)
        else {
            panic!()
        };
        assert_eq!(
            r.outcome.unwrap_err(),
            Failure::Remote(RemoteErrorObject { code: -32000, message: "unknown callback cb-1".into() })
        );
    }

    #[test]
    fn malformed_answers_are_answers_never_requests() {
        for (line, problem) in [
            (r#"{"jsonrpc":"2.0","id":1}"#, "neither"),
            (r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1}}"#, "both"),
            (r#"{"jsonrpc":"2.0","id":1,"error":"no"}"#, "not an error object"),
            (r#"{"id":1,"id":2,"result":1}"#, "duplicate field"),
        ] {
            let Message::Response(r) = single(line) else { panic!("{line}") };
            assert_eq!(r.id.map(RawValue::get), Some("1"), "{line}");
            let Err(Failure::Malformed(why)) = r.outcome else { panic!("{line}") };
            assert!(why.contains(problem), "{line}: {why}");
        }
    }

    #[test]
    fn invalid_frames_get_the_right_code_and_a_null_id_unless_it_is_sound() {
        let cases = [
            ("{not json", ErrorCode::ParseError, None),
            ("[1,", ErrorCode::ParseError, None),
            ("[]", ErrorCode::InvalidRequest, None),
            ("42", ErrorCode::InvalidRequest, None),
            ("{}", ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":"2.0","id":3,"method":5}"#, ErrorCode::InvalidRequest, Some("3")),
            (r#"{"id":3,"method":"ping"}"#, ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#, ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":2.0,"id":3,"method":"ping"}"#, ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#, ErrorCode::InvalidRequest, None),
            (r#"{"jsonrpc":"2.0","id":3,"id":4,"method":"ping"}"#, ErrorCode::InvalidRequest, Some("3")),
            (r#"{"jsonrpc":"2.0","id":[3],"id":4,"method":"ping"}"#, ErrorCode::InvalidRequest, None),
        ];
        for (line, code, id) in cases {
            let Message::Invalid(got, e) = single(line) else { panic!("{line}") };
            assert_eq!((e.code, got.map(RawValue::get)), (code, id), "{line}");
        }
    }

    #[test]
    fn batches_classify_each_element() {
        let Frame::Batch(items) =
            parse_frame(br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 5, {"jsonrpc":"2.0","method":"n"}]"#, 100)
        else {
            panic!()
        };
        assert!(matches!(items[0], Message::Request(Request { id: Some(_), .. })));
        assert!(matches!(items[1], Message::Invalid(None, RpcError { code: ErrorCode::InvalidRequest, .. })));
        assert!(matches!(items[2], Message::Request(Request { id: None, .. })));
    }

    #[test]
    fn arrays_are_never_requests() {
        // serde would read `[1,"ping"]` as a struct: id 1, method "ping".
        let Frame::Batch(items) = parse_frame(br#"[[1,"ping"],[7,"plugin.shutdown"]]"#, 100) else { panic!() };
        for item in &items {
            let Message::Invalid(None, e) = item else { panic!("{item:?}") };
            assert_eq!(e.code, ErrorCode::InvalidRequest);
        }
        let Frame::Batch(items) = parse_frame(br#"[[1,"ping"]]"#, 100) else { panic!() };
        assert!(matches!(&items[0], Message::Invalid(None, RpcError { code: ErrorCode::InvalidRequest, .. })));
        let Message::Invalid(None, e) = single(r#"  "ping""#) else { panic!() };
        assert_eq!(e.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn batches_over_the_limit_are_refused_whole() {
        let line = format!("[{}]", [r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#; 4].join(","));
        assert!(matches!(parse_frame(line.as_bytes(), 4), Frame::Batch(items) if items.len() == 4));
        let Frame::Single(Message::Invalid(None, e)) = parse_frame(line.as_bytes(), 3) else { panic!() };
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert_eq!(e.message, "invalid request: a batch may hold at most 3 requests");
        // A malformed batch is still a parse error.
        let Frame::Single(Message::Invalid(None, e)) = parse_frame(b"[{\"id\":1,", 3) else { panic!() };
        assert_eq!(e.code, ErrorCode::ParseError);
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

    /// Every way of writing an answer writes the same bytes: framed in the
    /// result's own buffer, appended from its parts, or from whole JSON.
    #[test]
    fn answers_are_the_same_however_they_are_framed() {
        let id = RawValue::from_string(r#""call-7""#.to_owned()).unwrap();
        for value in
            [Value::Int(3), Value::from("small"), Value::from("x".repeat(100_000)), Value::from("é\n".repeat(40_000))]
        {
            let whole = codec::encode(&value).unwrap();
            let mut expected = Vec::new();
            write_result(&mut expected, &id, &whole);
            let mut appended = Vec::new();
            write_encoded(&mut appended, &id, &codec::encode_owned(value.clone()).unwrap());
            assert_eq!(appended, expected);
            let framed = into_result_line(&id, codec::encode_owned(value).unwrap());
            assert_eq!(framed, expected);
            assert!(framed.capacity() > framed.len(), "room for the newline");
        }
    }
}
