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
        let mut out = self.out.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let result = out.write_all(&frame).and_then(|()| out.flush());
        drop(out);
        if let Err(e) = result {
            if !self.failed.swap(true, Ordering::Relaxed) {
                eprintln!("scriptling-plugin: cannot write to the host: {e}");
            }
        }
    }
}
