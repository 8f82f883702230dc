//! A large string decoded from a line the decoder owns takes over the
//! line's buffer ([`decode_owned`]) instead of being copied out of it.
//!
//! A 16 MiB argument copied into a `String` of its own gets memory the
//! allocator maps afresh (`sys::tune_allocator`: 2 MiB and more are mapped)
//! and the kernel faults in page by page, while the line it was copied from
//! stays allocated beside it until the params are decoded. Instead, while
//! such a line is decoded, the first string of [`TAKE_FROM`] bytes or more
//! that lies in it unescaped is left out and a marker put in its place;
//! once the params are decoded, the line is cut down to that string (a move
//! within its own buffer, whose pages are already there) and put where the
//! marker is.
//!
//! The marker is found again by its address, and by being empty with
//! memory of its own: an empty string the codec decodes has none (`""` and
//! `String::new()` allocate nothing), so a string that reused the address
//! of a marker dropped meanwhile (a duplicate `value` key replaces the
//! first) is never taken for it.

use std::cell::Cell;
use std::ops::Range;

use serde::de::DeserializeOwned;

use crate::value::Value;
use crate::value::codec;

/// Strings at least this long are taken over rather than copied: from here
/// on a copy gets a mapping of its own (`sys::tune_allocator`).
pub(crate) const TAKE_FROM: usize = 2 << 20;

/// What [`decode_owned`] is decoding on this thread: where the line's bytes
/// are, and the string left out of it, once found.
#[derive(Clone, Copy)]
struct Decoding {
    start: usize,
    end: usize,
    taken: Option<Taken>,
}

/// The string left out of the line: where it lies, and its marker's address.
#[derive(Clone, Copy)]
struct Taken {
    from: usize,
    to: usize,
    marker: usize,
}

thread_local! {
    static DECODING: Cell<Option<Decoding>> = const { Cell::new(None) };
}

/// `text`, borrowed from the input being decoded, as an owned string: a
/// marker instead, when it is the first large string of a line that
/// [`decode_owned`] decodes.
pub(crate) fn to_owned(text: &str) -> String {
    if text.len() < TAKE_FROM {
        return text.to_owned();
    }
    let at = text.as_ptr() as usize;
    match DECODING.get() {
        Some(mut decoding) if decoding.taken.is_none() && at >= decoding.start && at + text.len() <= decoding.end => {
            let marker = String::with_capacity(1);
            let from = at - decoding.start;
            decoding.taken = Some(Taken { from, to: from + text.len(), marker: marker.as_ptr() as usize });
            DECODING.set(Some(decoding));
            marker
        }
        _ => text.to_owned(),
    }
}

/// What can hold decoded strings: finds the marker among them.
pub(crate) trait HoldsStrings {
    /// The string with this marker's address, if held.
    fn marker(&mut self, marker: usize) -> Option<&mut String>;
}

impl HoldsStrings for Value {
    fn marker(&mut self, marker: usize) -> Option<&mut String> {
        // Values nest up to `codec::MAX_DEPTH` deep: as every pass over them.
        crate::support::deep(|| match self {
            Value::String(s) if s.as_ptr() as usize == marker && s.is_empty() && s.capacity() != 0 => Some(s),
            Value::List(items) => items.iter_mut().find_map(|item| item.marker(marker)),
            Value::Dict(entries) => entries.values_mut().find_map(|value| value.marker(marker)),
            _ => None,
        })
    }
}

/// Decodes `T` from `line[range]`, text checked as UTF-8, as
/// [`codec::decode_str`] does, except that the first string of
/// [`TAKE_FROM`] bytes or more with nothing escaped in it becomes `line`
/// itself, cut down to it (see the module docs).
pub(crate) fn decode_owned<T: DeserializeOwned + HoldsStrings>(
    mut line: String,
    range: Range<usize>,
) -> serde_json::Result<T> {
    let start = line.as_ptr() as usize;
    let scope = Scope::enter(Decoding { start, end: start + line.len(), taken: None });
    let decoded = codec::decode_str_range::<T>(&line, range);
    let taken = scope.leave();
    let mut value = decoded?;
    if let Some(Taken { from, to, marker }) = taken {
        if let Some(slot) = value.marker(marker) {
            line.truncate(to);
            line.drain(..from);
            *slot = line;
        }
    }
    Ok(value)
}

/// The line being decoded on this thread, for as long as it lives (a panic
/// while decoding leaves nothing behind).
struct Scope;

impl Scope {
    fn enter(decoding: Decoding) -> Scope {
        DECODING.set(Some(decoding));
        Scope
    }

    /// Ends the decoding: the string left out, if any.
    fn leave(self) -> Option<Taken> {
        DECODING.get().and_then(|decoding| decoding.taken)
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        DECODING.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Args(Vec<Value>);

    impl HoldsStrings for Args {
        fn marker(&mut self, marker: usize) -> Option<&mut String> {
            self.0.iter_mut().find_map(|value| value.marker(marker))
        }
    }

    fn string(text: &str) -> String {
        serde_json::to_string(&Value::from(text)).unwrap()
    }

    fn decode(line: String) -> Args {
        let len = line.len();
        decode_owned::<Args>(line, 0..len).unwrap()
    }

    #[test]
    fn the_first_large_unescaped_string_takes_over_the_line() {
        let big = "x".repeat(TAKE_FROM);
        let other = "y".repeat(TAKE_FROM + 1);
        let list = Value::List(vec![Value::from(big.as_str()), Value::from("")]);
        let line = format!("[{},{},{}]", string("a"), serde_json::to_string(&list).unwrap(), string(&other));
        let buffer = line.as_ptr();
        let Args(values) = decode(line);
        let Value::List(items) = &values[1] else { panic!("{values:?}") };
        let Value::String(taken) = &items[0] else { panic!("{items:?}") };
        assert_eq!(taken, &big);
        assert_eq!(taken.as_ptr(), buffer, "the line's own buffer");
        assert_eq!(items[1], Value::from(""));
        assert_eq!(values[0], Value::from("a"));
        // Only the first is taken; the next is copied.
        assert_eq!(values[2], Value::from(other.as_str()));
        assert_ne!(values[2].as_str().unwrap().as_ptr(), buffer);
    }

    #[test]
    fn an_escaped_or_short_string_is_copied_as_before() {
        let escaped = format!("{}\n", "x".repeat(TAKE_FROM));
        let short = "x".repeat(TAKE_FROM - 1);
        let line = format!("[{},{}]", string(&escaped), string(&short));
        let buffer = line.as_ptr();
        let Args(values) = decode(line);
        assert_eq!(values, [Value::from(escaped.as_str()), Value::from(short.as_str())]);
        assert!(values.iter().all(|v| v.as_str().unwrap().as_ptr() != buffer));
    }

    #[test]
    fn a_marker_dropped_while_decoding_is_never_confused_with_a_string_kept() {
        // The second `value` replaces the first: the marker is dropped, and
        // the short string made next may reuse its address.
        let big = "x".repeat(TAKE_FROM);
        let line = format!(r#"[{{"type":"string","value":"{big}","value":"z"}},{}]"#, string("w"));
        let Args(values) = decode(line);
        assert_eq!(values, [Value::from("z"), Value::from("w")]);
    }

    #[test]
    fn nothing_is_taken_outside_decode_owned_or_after_a_failure() {
        let big = "x".repeat(TAKE_FROM);
        let line = format!("[{},", string(&big));
        let len = line.len();
        assert!(decode_owned::<Args>(line, 0..len).is_err());
        let text = format!("[{}]", string(&big));
        let Args(values) = codec::decode_str::<Args>(&text).unwrap();
        assert_eq!(values, [Value::from(big.as_str())]);
    }

    #[test]
    fn a_large_string_a_thousand_levels_deep_is_found_on_a_small_stack() {
        // The search goes as deep as values may nest, on a stack smaller
        // than a worker thread's (it is wrapped in `support::deep`, as
        // every pass over values is).
        let run = std::thread::Builder::new().stack_size(1 << 20).spawn(|| {
            let big = "x".repeat(TAKE_FROM);
            let depth = codec::MAX_DEPTH - 1;
            let mut line = String::from("[");
            line.push_str(&r#"{"type":"list","items":["#.repeat(depth - 1));
            line.push_str(&string(&big));
            line.push_str(&"]}".repeat(depth - 1));
            line.push(']');
            let buffer = line.as_ptr();
            let Args(values) = decode(line);
            let mut level = &values[0];
            while let Value::List(items) = level {
                level = &items[0];
            }
            assert_eq!(level.as_str().map(|s| (s.len(), s.as_ptr())), Some((big.len(), buffer)));
        });
        run.unwrap().join().unwrap();
    }
}
