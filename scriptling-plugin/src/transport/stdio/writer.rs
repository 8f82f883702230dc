//! [`FrameWriter`]: the one owner of the protocol stream.
//!
//! Every frame (responses, `callback.call`, `host.log`) is queued here in
//! the order it was sent. A sender that finds nobody writing becomes the
//! writer: it writes everything queued (its own frame and any that arrive
//! meanwhile) with vectored writes, then leaves. So:
//!
//! - frames never interleave, and reach the host in the order they were
//!   sent (a call's log records before its response);
//! - with nothing else queued, a response costs its sender one `write` and
//!   no thread wake-up; under load, frames queued together go out together;
//! - when the host reads slowly, only the thread currently writing waits on
//!   stdout: every other thread queues its frame and moves on, so no thread
//!   is held (and none is started) for a slow reader. The reader of stdin
//!   instead waits for room ([`FrameWriter::wait_for_room`]) before taking
//!   more requests, which bounds the memory queued frames can take;
//! - a thread that is working through requests the host sent together can
//!   hold back the frames it sends ([`FrameWriter::hold`]) until its input
//!   runs dry, so they leave in one write: a write to a pipe costs more than
//!   answering a small call, and every one wakes the host. Frames sent by
//!   other threads are never held, and take the held ones with them.

use std::io::{IoSlice, Write};
use std::mem;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::call::link::FrameSink;
use crate::support::lock;

/// Queued bytes above which the stdin reader stops taking requests.
const HIGH_WATER: usize = 64 << 20;
/// Held frames are written anyway past this many bytes or frames.
const HOLD_BYTES: usize = 256 << 10;
const HOLD_FRAMES: usize = 256;

thread_local! {
    /// Whether this thread's frames are being held (see [`FrameWriter::hold`]).
    static HOLDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
/// Slices handed to one `writev` (Linux's `IOV_MAX` is 1024); gathered on
/// the stack.
const MAX_SLICES: usize = 256;

/// One frame, as sent without its newline; the writer adds it.
pub(crate) enum Frame {
    /// A whole frame. Once queued it ends with its newline, appended in
    /// place so a lone frame is one contiguous write (`len` and `parts`
    /// count on it).
    Line(Vec<u8>),
    /// A success response written from where its result was serialised:
    /// head, result, tail.
    Parts(Vec<u8>, Vec<u8>, &'static [u8]),
}

impl Frame {
    fn len(&self) -> usize {
        match self {
            Frame::Line(line) => line.len(),
            Frame::Parts(head, body, tail) => head.len() + body.len() + tail.len() + 1,
        }
    }

    /// The frame's bytes, newline included, as up to four slices.
    fn parts(&self) -> impl Iterator<Item = &[u8]> {
        let parts: [&[u8]; 4] = match self {
            Frame::Line(line) => [line, b"", b"", b""],
            Frame::Parts(head, body, tail) => [head, body, tail, b"\n"],
        };
        parts.into_iter().filter(|part| !part.is_empty())
    }
}

pub(crate) struct FrameWriter {
    out: Mutex<Box<dyn Write + Send>>,
    queue: Mutex<Queue>,
    /// Signalled whenever the active writer finishes a round.
    written: Condvar,
    failed: AtomicBool,
    /// `Queue::bytes`, readable without the lock.
    backlog: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Queue {
    frames: Vec<Frame>,
    /// An empty vector kept for the next writer.
    spare: Vec<Frame>,
    /// Bytes queued or being written.
    bytes: usize,
    /// Someone is writing; it will take what is queued.
    writing: bool,
    /// Threads waiting on `written` (a condvar signal is a system call even
    /// with nobody waiting, so it is sent only to someone).
    waiters: usize,
}

impl FrameWriter {
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            out: Mutex::new(out),
            queue: Mutex::new(Queue::default()),
            written: Condvar::new(),
            failed: AtomicBool::new(false),
            backlog: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Queues `frame`, and writes the queue if nobody else is.
    pub(crate) fn send(&self, frame: Frame) {
        self.queue_frame(frame, false);
    }

    /// Like [`send`](Self::send) for an answer, which this thread may be
    /// holding back (see [`hold`](Self::hold)). Requests to the host are
    /// never held: a handler waits for their answers.
    pub(crate) fn send_answer(&self, frame: Frame) {
        self.queue_frame(frame, HOLDING.with(std::cell::Cell::get));
    }

    fn queue_frame(&self, mut frame: Frame, hold: bool) {
        if let Frame::Line(line) = &mut frame {
            // In place (there is usually room): a lone frame is then one
            // contiguous write, not a `writev` of two slices.
            line.push(b'\n');
        }
        let mut queue = lock(&self.queue);
        queue.bytes += frame.len();
        self.backlog.store(queue.bytes, Ordering::Relaxed);
        queue.frames.push(frame);
        let held = hold && queue.bytes < HOLD_BYTES && queue.frames.len() < HOLD_FRAMES;
        if queue.writing || held {
            return;
        }
        self.write_queue(queue);
    }

    /// Writes whatever is queued (the frames a thread held back).
    pub(crate) fn flush(&self) {
        let queue = lock(&self.queue);
        if queue.writing || queue.frames.is_empty() {
            return;
        }
        self.write_queue(queue);
    }

    /// Lets this thread hold back the answers it sends while more requests
    /// are waiting (see [`Hold::set_input_waiting`]), bounded by [`HOLD_BYTES`]
    /// and [`HOLD_FRAMES`]; what is held is written when the guard is
    /// dropped (or [`flush`](Self::flush) is called). For a thread
    /// answering requests that arrived together: the held frames leave in
    /// one write.
    pub(crate) fn hold(&self) -> Hold<'_> {
        Hold(self)
    }

    /// Writes the queue as the one active writer; `queue` is locked and
    /// nobody else is writing.
    fn write_queue<'a>(&'a self, mut queue: std::sync::MutexGuard<'a, Queue>) {
        queue.writing = true;
        // Frames taken out are written from a second vector, swapped back
        // each round, so a steady stream allocates nothing here.
        let mut frames = mem::take(&mut queue.spare);
        loop {
            mem::swap(&mut frames, &mut queue.frames);
            drop(queue);
            let bytes: usize = frames.iter().map(Frame::len).sum();
            self.write(&frames);
            frames.clear();
            queue = lock(&self.queue);
            queue.bytes -= bytes;
            self.backlog.store(queue.bytes, Ordering::Relaxed);
            if queue.waiters > 0 {
                self.written.notify_all();
            }
            if queue.frames.is_empty() {
                queue.writing = false;
                queue.spare = frames;
                return;
            }
        }
    }

    fn write(&self, frames: &[Frame]) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        let mut out = lock(&self.out);
        let result = write_all_vectored(&mut **out, frames.iter().flat_map(Frame::parts));
        if let Err(e) = result.and_then(|()| out.flush()) {
            // The host has gone: stdin will see EOF and the plugin exits.
            if !self.failed.swap(true, Ordering::Relaxed) {
                eprintln!("scriptling-plugin: cannot write to the host: {e}");
            }
        }
    }

    /// Blocks while more than the high-water mark is waiting to be written
    /// (the host is reading slowly).
    pub(crate) fn wait_for_room(&self) {
        if self.backlog.load(Ordering::Relaxed) <= HIGH_WATER {
            return;
        }
        let mut queue = lock(&self.queue);
        while queue.bytes > HIGH_WATER && !self.failed.load(Ordering::Relaxed) {
            queue.waiters += 1;
            queue = self.written.wait(queue).unwrap_or_else(|p| p.into_inner());
            queue.waiters -= 1;
        }
    }

    /// Waits until everything sent so far has been written, for up to
    /// `limit`. Returns whether it was.
    pub(crate) fn drain(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut queue = lock(&self.queue);
        while queue.bytes > 0 && !self.failed.load(Ordering::Relaxed) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
            queue.waiters += 1;
            queue = self.written.wait_timeout(queue, left).unwrap_or_else(|p| p.into_inner()).0;
            queue.waiters -= 1;
        }
        true
    }
}

/// Holds a thread's frames back while alive (see [`FrameWriter::hold`]).
pub(crate) struct Hold<'a>(&'a FrameWriter);

impl Hold<'_> {
    /// Whether more requests are read already: until this is next called,
    /// the answers this thread sends are held back if so (they leave with
    /// the answers to those requests), and written at once if not (a lone
    /// request's answer leaves the moment it is ready, and the clean-up
    /// after it is off the host's wait).
    pub(crate) fn set_input_waiting(&self, waiting: bool) {
        HOLDING.with(|h| h.set(waiting));
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        HOLDING.with(|h| h.set(false));
        self.0.flush();
    }
}

impl FrameSink for FrameWriter {
    fn send_frame(&self, frame: Vec<u8>) {
        self.send(Frame::Line(frame));
    }
}

/// `Write::write_all_vectored` (unstable in std) over `parts`, gathered
/// [`MAX_SLICES`] at a time on the stack: one `writev` for a few frames, a
/// loop over partial writes for large ones, and no allocation.
fn write_all_vectored<'a>(out: &mut dyn Write, parts: impl Iterator<Item = &'a [u8]>) -> std::io::Result<()> {
    let mut parts = parts.peekable();
    let mut slices = [IoSlice::new(&[]); MAX_SLICES];
    while parts.peek().is_some() {
        let mut gathered = 0;
        for (slot, part) in slices.iter_mut().zip(&mut parts) {
            *slot = IoSlice::new(part);
            gathered += 1;
        }
        if gathered == 1 {
            // `write` costs the kernel less than a `writev` of one slice.
            out.write_all(&slices[0])?;
            continue;
        }
        let mut pending = &mut slices[..gathered];
        while !pending.is_empty() {
            match out.write_vectored(pending) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut pending, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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
        write_all_vectored(&mut out, [&b"ab"[..], b"", b"cdefg", b"h\n"].into_iter()).unwrap();
        assert_eq!(out.0, b"abcdefgh\n");
        // More parts than one writev takes.
        let mut out = Trickle(Vec::new());
        let many: Vec<String> = (0..MAX_SLICES * 2 + 3).map(|i| format!("{i},")).collect();
        write_all_vectored(&mut out, many.iter().map(|p| p.as_bytes())).unwrap();
        assert_eq!(out.0, many.concat().as_bytes());
    }

    /// Blocks every write until the test lets it through, recording writes.
    struct Gated {
        gate: Arc<(Mutex<usize>, Condvar)>,
        written: Arc<Mutex<Vec<u8>>>,
        calls: Arc<Mutex<usize>>,
    }

    impl Write for Gated {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            let (permits, cv) = &*self.gate;
            let mut permits = lock(permits);
            while *permits == 0 {
                permits = cv.wait(permits).unwrap();
            }
            *permits -= 1;
            *lock(&self.calls) += 1;
            let mut n = 0;
            for b in bufs {
                lock(&self.written).extend_from_slice(b);
                n += b.len();
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Records each write call's bytes separately.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).push(buf.to_vec());
            Ok(buf.len())
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = joined.len();
            lock(&self.0).push(joined);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn held_answers_leave_together_and_requests_are_never_held() {
        let writes = Writes::default();
        let writer = FrameWriter::new(Box::new(writes.clone()));
        let hold = writer.hold();
        // Nothing more read: an answer leaves at once.
        writer.send_answer(Frame::Line(b"alone".to_vec()));
        assert_eq!(lock(&writes.0).as_slice(), [b"alone\n".to_vec()]);
        lock(&writes.0).clear();
        // More requests read already: answers wait for theirs.
        hold.set_input_waiting(true);
        for i in 0..3 {
            writer.send_answer(Frame::Line(format!("answer {i}").into_bytes()));
        }
        assert!(lock(&writes.0).is_empty(), "held");
        // A request to the host goes at once, and takes the held answers along.
        writer.send(Frame::Line(b"callback".to_vec()));
        assert_eq!(lock(&writes.0).as_slice(), [b"answer 0\nanswer 1\nanswer 2\ncallback\n".to_vec()]);
        writer.send_answer(Frame::Line(b"answer 3".to_vec()));
        assert_eq!(lock(&writes.0).len(), 1);
        drop(hold);
        assert_eq!(lock(&writes.0)[1], b"answer 3\n");
        // Without a hold, an answer goes at once.
        writer.send_answer(Frame::Line(b"answer 4".to_vec()));
        assert_eq!(lock(&writes.0).len(), 3);
    }

    #[test]
    fn a_slow_reader_holds_one_thread_and_queued_frames_go_out_together_in_order() {
        let gate = Arc::new((Mutex::new(0usize), Condvar::new()));
        let written = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(Mutex::new(0));
        let out = Gated { gate: Arc::clone(&gate), written: Arc::clone(&written), calls: Arc::clone(&calls) };
        let writer = Arc::new(FrameWriter::new(Box::new(out)));
        // The first sender becomes the writer and blocks on the gate...
        let first = {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || writer.send(Frame::Line(b"first".to_vec())))
        };
        while lock(&writer.queue).frames.is_empty() && !lock(&writer.queue).writing {
            std::thread::yield_now();
        }
        // ...while 50 others queue and return at once.
        for i in 0..50 {
            writer.send(Frame::Parts(format!("head{i}:").into_bytes(), b"body".to_vec(), b";"));
        }
        assert_eq!(lock(&writer.queue).frames.len(), 50);
        *lock(&gate.0) = usize::MAX;
        gate.1.notify_all();
        first.join().unwrap();
        assert!(writer.drain(Duration::from_secs(5)));
        assert_eq!(*lock(&calls), 2, "the 50 queued frames went out in one writev");
        let text = String::from_utf8(lock(&written).clone()).unwrap();
        let expected: String =
            std::iter::once("first\n".to_owned()).chain((0..50).map(|i| format!("head{i}:body;\n"))).collect();
        assert_eq!(text, expected);
    }
}
