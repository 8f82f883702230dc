//! Helpers every layer shares: poison-tolerant locking, panic messages,
//! readable type names, stack for deep recursion, maps keyed by export
//! names, and the primitives the model-checked core is built on. The
//! lowest layer: it imports nothing from the crate.

pub(crate) mod sync;
pub(crate) mod timer;

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// A map from export names (functions, classes, methods, properties) to
/// what they name, hashed with rustc's FxHash.
///
/// Every call looks a name up; std's SipHash cost ~2% of a plain call's
/// CPU. SipHash defends maps that grow from untrusted keys; these are
/// built once from the plugin's own registrations and only read after, so
/// a host's names can make a lookup miss but never make the map slow.
pub(crate) type NameMap<V> = HashMap<String, V, rustc_hash::FxBuildHasher>;

/// Locks `mutex`, ignoring poison.
///
/// A panic in plugin code never happens while the SDK holds one of its own
/// locks (handlers run outside them), so a poisoned lock still guards
/// consistent data; refusing it would turn one failed call into a dead plugin.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `a` equals `b`, in time that depends only on their lengths (for
/// tokens: how long a wrong guess takes says nothing of how close it was).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    std::hint::black_box(diff) == 0
}

/// Where the first byte JSON must escape is in `bytes` (a control
/// character, `"` or `\`: exactly what serde_json escapes), if any.
///
/// Each 64-byte chunk is tested whole, without an early exit inside it,
/// which the compiler turns into vector instructions, so a long string is
/// searched at memory speed. (Figures in ARCHITECTURE.md, "Speed tricks".)
pub(crate) fn json_special(bytes: &[u8]) -> Option<usize> {
    const CHUNK: usize = 64;
    let special = |b: u8| (b < 0x20) | (b == b'"') | (b == b'\\');
    let first = |part: &[u8], offset: usize| part.iter().position(|&b| special(b)).map(|at| offset + at);
    let mut chunks = bytes.chunks_exact(CHUNK);
    let mut offset = 0;
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |found, &b| found | special(b)) {
            return first(chunk, offset);
        }
        offset += CHUNK;
    }
    first(chunks.remainder(), offset)
}

/// Runs `f`, on a fresh stack segment if this thread's is nearly used up.
///
/// Wrapped around each level of the SDK's recursive work on values
/// (decoding, encoding, formatting, cloning): values may nest 1 000 levels
/// deep, which in a debug build needs several MiB of stack, more than a
/// worker thread has. Costs a comparison when the stack has room.
pub(crate) fn deep<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, f)
}

/// Names sorted and joined with commas, or `none`: for messages that list
/// what exists (`unknown function x (available: a, b)`).
pub(crate) fn sorted_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// Names quoted as Scriptling messages quote them: `'a', 'b'`.
pub(crate) fn quoted_names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names.into_iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
}

/// `text` as a string literal between `quote`s (`"` for Scriptling source,
/// `'` in messages that show keys as scripts index them), with the quote,
/// backslashes and control characters escaped: a key or name from the host
/// cannot break the text it is shown in.
pub(crate) fn string_literal(text: &str, quote: char) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The message a panic carried, when it carried one.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a panic without a message"
    }
}

/// `T`'s name without module paths, generics included:
/// `alloc::vec::Vec<my_crate::Point>` becomes `Vec<Point>`.
pub(crate) fn short_type_name<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            continue;
        }
        out.push_str(last_segment(&full[segment_start..i]));
        out.push(c);
        segment_start = i + c.len_utf8();
    }
    out.push_str(last_segment(&full[segment_start..]));
    out
}

fn last_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Point;

    #[test]
    fn the_escape_search_finds_the_first_special_byte_at_every_length_and_place() {
        // Across the byte-at-a-time head, whole chunks and the remainder.
        for len in 0..300 {
            let mut bytes = vec![b'x'; len];
            assert_eq!(json_special(&bytes), None, "clean, {len} bytes");
            for at in 0..len {
                for special in [b'"', b'\\', b'\n', 0x1f] {
                    bytes[at] = special;
                    bytes[len - 1] = if at == len - 1 { special } else { b'"' };
                    assert_eq!(json_special(&bytes), Some(at), "{special:#x} at {at} of {len}");
                    bytes[len - 1] = b'x';
                    bytes[at] = b'x';
                }
            }
        }
        assert_eq!(json_special("é\u{7f}ü".as_bytes()), None, "no byte of non-ASCII text is special");
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abd", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"", b"abc"));
    }

    #[test]
    fn short_names_drop_every_path() {
        assert_eq!(short_type_name::<Point>(), "Point");
        assert_eq!(short_type_name::<Vec<Point>>(), "Vec<Point>");
        assert_eq!(short_type_name::<std::collections::HashMap<String, Vec<Point>>>(), "HashMap<String, Vec<Point>>");
        assert_eq!(short_type_name::<(i64, &str)>(), "(i64, &str)");
    }

    #[test]
    fn panic_messages() {
        let p = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(panic_message(&*p), "boom 1");
        let p = std::panic::catch_unwind(|| std::panic::panic_any(5)).unwrap_err();
        assert_eq!(panic_message(&*p), "a panic without a message");
    }
}
