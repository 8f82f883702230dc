//! Entry points for the coverage-guided fuzz targets in `fuzz/`, built only
//! under `cargo fuzz` (which sets `--cfg fuzzing`; a feature would be public
//! API, since features are additive): each runs one decoder on arbitrary bytes
//! and panics if an invariant breaks.

use crate::rpc::{self, Frame, Message};
use crate::value::{Value, codec};

/// Decoding never panics; what decodes re-encodes, decodes to the same
/// value, and encodes the same way again; a value the scanner takes is what
/// serde makes of it.
pub fn value_round_trip(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        rpc::scanned_value_agrees(text);
    }
    let Ok(value) = codec::decode::<Value>(bytes) else { return };
    let text = serde_json::to_vec(&value).expect("a decoded value always encodes");
    assert_eq!(codec::encode(&value).expect("encodes directly too"), text, "direct encoding is serde's");
    let again: Value = codec::decode(&text).expect("an encoded value always decodes");
    assert_eq!(again, value);
    assert_eq!(serde_json::to_vec(&again).expect("encodes"), text, "encoding is stable");
}

/// Classifying a line never panics, a request's params are exactly where
/// the dispatcher will look for them, decoding them as a call's never
/// panics, and a call scanned or parsed in one pass (a session's short
/// lines) means what the general parse makes of it.
pub fn frame(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        rpc::fast_parses_agree(text);
    }
    let messages = match rpc::parse_frame(bytes, 1_000) {
        Frame::Single(message) => vec![message],
        Frame::Batch(messages) => messages,
    };
    for message in messages {
        if let Message::Request(request) = message {
            let _ = rpc::Method::parse(request.method);
            if let rpc::Params::Raw(Some(params)) = request.params {
                assert_eq!(&bytes[rpc::span(bytes, params)], params.get().as_bytes());
                let _ = codec::decode_str::<rpc::CallParams>(params.get());
            }
        }
    }
}
