//! [`FrameWriter`]: the one owner of the protocol stream.
//!
//! Every frame (responses, `callback.call`, `host.log`) goes through
//! [`FrameWriter::write_frame`], which writes the whole line with one
//! `write_all` under a lock and flushes it. The lock is taken by the thread
//! that produced the frame rather than handing the frame to a writer thread:
//! that saves a thread wake-up per response, and still guarantees that frames
//! never interleave and that one handler's frames (its log records, then its
//! response) reach the host in the order it wrote them.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct FrameWriter {
    out: Mutex<Box<dyn Write + Send>>,
    failed: AtomicBool,
}

impl FrameWriter {
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Self {
        Self { out: Mutex::new(out), failed: AtomicBool::new(false) }
    }

    /// Appends the newline and writes the frame. A failed write (the host has
    /// gone) is reported once on stderr; the stdin side then sees EOF and the
    /// plugin exits.
    pub(crate) fn write_frame(&self, mut frame: Vec<u8>) {
        frame.push(b'\n');
        self.write_parts(&[&frame]);
    }

    /// Writes one frame given as consecutive parts (the last must end with
    /// the newline), without first copying them into one buffer: a 16 MiB
    /// result is written from where it was serialised.
    pub(crate) fn write_parts(&self, parts: &[&[u8]]) {
        let mut out = self.out.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let result = write_all_vectored(&mut **out, parts).and_then(|()| out.flush());
        drop(out);
        if let Err(e) = result {
            if !self.failed.swap(true, Ordering::Relaxed) {
                eprintln!("scriptling-plugin: cannot write to the host: {e}");
            }
        }
    }
}

/// `Write::write_all_vectored` (unstable in std): one `writev` for small
/// frames, a loop over partial writes for large ones.
fn write_all_vectored(out: &mut dyn Write, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut index = 0;
    let mut offset = 0;
    while index < parts.len() {
        let slices: Vec<std::io::IoSlice<'_>> = std::iter::once(&parts[index][offset..])
            .chain(parts[index + 1..].iter().copied())
            .map(std::io::IoSlice::new)
            .collect();
        let mut written = match out.write_vectored(&slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while index < parts.len() && written >= parts[index].len() - offset {
            written -= parts[index].len() - offset;
            index += 1;
            offset = 0;
        }
        offset += written;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts at most 3 bytes per call, to exercise partial writes.
    struct Trickle(Vec<u8>);

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(3);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn vectored_writes_survive_partial_writes() {
        let mut out = Trickle(Vec::new());
        write_all_vectored(&mut out, &[b"ab", b"", b"cdefg", b"h\n"]).unwrap();
        assert_eq!(out.0, b"abcdefgh\n");
    }
}
