//! [`FrameWriter`]: the one owner of the protocol stream.
//!
//! Every frame (answers, `callback.call`, `host.log`) goes into one queue,
//! in the order it was sent. A thread that queues a frame when nobody is
//! writing writes the queue itself, as long as stdout takes it without
//! waiting; when the host reads slowly and the pipe fills, it leaves the
//! rest to the writer thread, which waits for room and writes on. So:
//!
//! - frames never interleave, and reach the host in the order they were
//!   sent (a call's log records before its answer);
//! - a lone answer costs its sender one `write` and no thread wake-up, and
//!   frames queued meanwhile leave together in one `writev`;
//! - when stdout is a pipe or a socket (as a host makes it), no thread but
//!   the writer ever waits on it: a slow host holds up nobody's handler.
//!   The reader of stdin waits for room ([`FrameWriter::wait_for_room`])
//!   before taking more requests, which bounds what the queue can hold;
//! - only whole frames are written when the stream says how much room it
//!   has (a pipe, see `output.rs`), so [`drain`](FrameWriter::drain)
//!   normally gives up on a host that stopped reading at a frame's end. It
//!   counts what it could not deliver, a frame it had to cut included (one
//!   larger than the pipe, written in parts); a broken stream fails the
//!   writer at once and tells the session.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::mem;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::call::link::FrameSink;
use crate::support::sync::{Condvar, Mutex, MutexGuard, lock, thread, wait, wait_for};
use crate::transport::session::output::{Room, Stream};

/// Queued bytes above which the stdin reader stops taking requests.
const HIGH_WATER: usize = 64 << 20;
/// Slices handed to one `writev` (Linux's `IOV_MAX` is 1024).
const MAX_SLICES: usize = 256;
/// How long the writer thread waits for room before looking at its queue
/// again (to notice that the session gave up on the host).
const POLL_SLICE: Duration = Duration::from_millis(50);
/// How long a closing drain waits for whoever writes to stop.
const WRITER_STOP: Duration = Duration::from_secs(1);

/// What a frame is, for the count of what was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An answer to one of the host's requests.
    Answer,
    /// One of the plugin's own requests (`callback.call`, `host.log`).
    Request,
}

/// One frame: its bytes (newline included) as one to three parts.
pub(crate) struct Frame {
    kind: Kind,
    parts: Parts,
}

enum Parts {
    /// A whole frame in one buffer.
    Line(Vec<u8>),
    /// An answer written from where its result was serialised: head,
    /// result, tail.
    Split(Vec<u8>, Vec<u8>, Vec<u8>),
}

impl Frame {
    /// A frame from `line` (without its newline; it is appended in place).
    pub(crate) fn line(kind: Kind, mut line: Vec<u8>) -> Frame {
        line.push(b'\n');
        Frame { kind, parts: Parts::Line(line) }
    }

    /// An answer made of `head`, `body` and `tail` (a newline follows).
    pub(crate) fn split(head: Vec<u8>, body: Vec<u8>, tail: Vec<u8>) -> Frame {
        Frame { kind: Kind::Answer, parts: Parts::Split(head, body, tail) }
    }

    fn len(&self) -> usize {
        match &self.parts {
            Parts::Line(line) => line.len(),
            Parts::Split(head, body, tail) => head.len() + body.len() + tail.len() + 1,
        }
    }

    /// The frame's bytes from `skip` on, as slices.
    fn slices<'a>(&'a self, skip: usize, out: &mut Vec<IoSlice<'a>>) {
        let parts: [&[u8]; 4] = match &self.parts {
            Parts::Line(line) => [line, b"", b"", b""],
            Parts::Split(head, body, tail) => [head, body, tail, b"\n"],
        };
        let mut skip = skip;
        for part in parts {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            out.push(IoSlice::new(&part[skip..]));
            skip = 0;
        }
    }
}

/// Frames that could not be delivered, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Undelivered {
    pub(crate) answers: usize,
    pub(crate) requests: usize,
}

impl Undelivered {
    fn count(&mut self, frame: &Frame) {
        match frame.kind {
            Kind::Answer => self.answers += 1,
            Kind::Request => self.requests += 1,
        }
    }

    fn of(frames: &VecDeque<Frame>) -> Undelivered {
        let mut counts = Undelivered::default();
        frames.iter().for_each(|frame| counts.count(frame));
        counts
    }

    fn plus(self, other: Undelivered) -> Undelivered {
        Undelivered { answers: self.answers + other.answers, requests: self.requests + other.requests }
    }
}

/// Who writes the queue now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    Nobody,
    /// A thread that sent a frame, while the stream takes it.
    Sender,
    /// The writer thread, waiting for room.
    Thread,
}

/// Whether the stream is still written.
#[derive(Debug, PartialEq, Eq)]
enum Status {
    Open,
    /// A write failed (the host closed stdout): nothing more is written.
    Failed,
    /// The session gave up on the host, or ended: nothing more is written.
    Closed,
}

struct Queue {
    frames: VecDeque<Frame>,
    /// Bytes of the front frame already written.
    front_written: usize,
    /// Bytes queued and not yet written.
    bytes: usize,
    /// Bytes written so far: the drain's measure of progress.
    written: u64,
    writer: Writer,
    thread_started: bool,
    status: Status,
    undelivered: Undelivered,
    /// The frames taken out of the queue by whoever writes now, by kind:
    /// what a drain that stops waiting for the writer counts as lost.
    out: Undelivered,
    /// Threads waiting on `changed` (a condvar signal is a system call even
    /// with nobody waiting, so it is sent only to someone).
    waiters: usize,
}

/// Told once when a write fails.
type OnFailure = Box<dyn Fn(&io::Error) + Send + Sync>;

pub(crate) struct FrameWriter {
    queue: Mutex<Queue>,
    /// Signalled on progress and on every change of writer or status.
    changed: Condvar,
    /// Held by whoever writes (the `writer` role makes it uncontended).
    out: Mutex<Box<dyn Stream>>,
    on_failure: OnFailure,
}

impl FrameWriter {
    pub(crate) fn new(out: Box<dyn Stream>, on_failure: OnFailure) -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                front_written: 0,
                bytes: 0,
                written: 0,
                writer: Writer::Nobody,
                thread_started: false,
                status: Status::Open,
                undelivered: Undelivered::default(),
                out: Undelivered::default(),
                waiters: 0,
            }),
            changed: Condvar::new(),
            out: Mutex::new(out),
            on_failure,
        })
    }

    /// Queues `frame`, and writes the queue if nobody else is.
    pub(crate) fn send(self: &Arc<Self>, frame: Frame) {
        let mut queue = lock(&self.queue);
        if queue.status != Status::Open {
            queue.undelivered.count(&frame);
            return;
        }
        queue.bytes += frame.len();
        queue.frames.push_back(frame);
        if queue.writer != Writer::Nobody {
            return;
        }
        queue.writer = Writer::Sender;
        self.write_as_sender(queue);
    }

    /// Writes the queue while the stream takes it without waiting; hands
    /// the rest to the writer thread.
    fn write_as_sender<'a>(self: &'a Arc<Self>, mut queue: MutexGuard<'a, Queue>) {
        loop {
            let (frames, skip) = self.take_out(&mut queue);
            drop(queue);
            let result = write_fitting(&mut **lock(&self.out), &frames, skip);
            queue = lock(&self.queue);
            let done = self.account(&mut queue, frames, skip, result);
            if queue.status != Status::Open || queue.frames.is_empty() {
                return self.step_down(queue);
            }
            if !done {
                // The stream is full: the writer thread waits for room.
                queue.writer = Writer::Thread;
                self.start_thread(&mut queue);
                return self.tell(&queue);
            }
        }
    }

    /// Takes the queue out to write it (the queue lock is not held while
    /// writing), with how much of its front frame is written already.
    fn take_out(&self, queue: &mut Queue) -> (VecDeque<Frame>, usize) {
        let frames = mem::take(&mut queue.frames);
        queue.out = Undelivered::of(&frames);
        (frames, queue.front_written)
    }

    /// Books a write's outcome: the frames not written (whole or in part)
    /// go back to the front of the queue. Returns whether every frame was
    /// written.
    fn account(
        &self,
        queue: &mut Queue,
        mut frames: VecDeque<Frame>,
        skip: usize,
        result: io::Result<Progress>,
    ) -> bool {
        queue.out = Undelivered::default();
        let progress = match result {
            Ok(progress) => progress,
            Err(e) => {
                self.fail(queue, frames, &e);
                return false;
            }
        };
        let mut bytes = progress.bytes;
        queue.written += bytes as u64;
        // Saturating: a close meanwhile zeroed the count (it matters only
        // while the stream is open).
        queue.bytes = queue.bytes.saturating_sub(bytes);
        let mut skip = skip;
        while let Some(front) = frames.front() {
            let left = front.len() - skip;
            if bytes < left {
                break;
            }
            bytes -= left;
            skip = 0;
            frames.pop_front();
        }
        queue.front_written = skip + bytes;
        let done = frames.is_empty();
        if queue.status != Status::Open {
            // Closed while these were being written: they are not delivered.
            for frame in &frames {
                queue.undelivered.count(frame);
            }
            self.let_go();
            return done;
        }
        frames.append(&mut queue.frames);
        queue.frames = frames;
        done
    }

    fn fail(&self, queue: &mut Queue, frames: VecDeque<Frame>, error: &io::Error) {
        queue.status = Status::Failed;
        for frame in frames.iter().chain(&queue.frames) {
            queue.undelivered.count(frame);
        }
        queue.frames.clear();
        queue.bytes = 0;
        (self.on_failure)(error);
    }

    fn start_thread(self: &Arc<Self>, queue: &mut Queue) {
        if queue.thread_started {
            return;
        }
        queue.thread_started = true;
        let writer = Arc::clone(self);
        let spawned = thread::Builder::new().name("plugin-stdout".into()).spawn(move || writer.run_thread());
        if let Err(e) = spawned {
            let frames = mem::take(&mut queue.frames);
            self.fail(queue, frames, &e);
            queue.writer = Writer::Nobody;
        }
    }

    /// The writer thread: whenever the queue is handed to it, waits for
    /// room and writes until the queue is empty.
    fn run_thread(self: &Arc<Self>) {
        let mut queue = lock(&self.queue);
        loop {
            while queue.writer != Writer::Thread && queue.status == Status::Open {
                queue = self.wait(queue, None);
            }
            if queue.status != Status::Open {
                return self.step_down(queue);
            }
            drop(queue);
            let ready = lock(&self.out).wait_writable(POLL_SLICE);
            queue = lock(&self.queue);
            // The session may have given up on the host meanwhile: then
            // nothing more is written (the queue is counted as undelivered).
            if queue.status != Status::Open {
                return self.step_down(queue);
            }
            let (frames, skip) = self.take_out(&mut queue);
            drop(queue);
            let result = ready.and_then(|()| write_fitting(&mut **lock(&self.out), &frames, skip));
            let stalled = matches!(result, Ok(Progress { bytes: 0 }));
            queue = lock(&self.queue);
            self.account(&mut queue, frames, skip, result);
            if queue.frames.is_empty() {
                queue.writer = Writer::Nobody;
            }
            self.tell(&queue);
            if stalled && queue.writer == Writer::Thread && queue.status == Status::Open {
                // Room was signalled, but not enough for the next whole frame.
                queue = self.wait(queue, Some(Duration::from_millis(1)));
            }
        }
    }

    fn step_down(&self, mut queue: MutexGuard<'_, Queue>) {
        queue.writer = Writer::Nobody;
        if queue.status != Status::Open {
            self.let_go();
        }
        self.tell(&queue);
    }

    /// Gives the stream back as it was found, once nothing more is written
    /// (see [`Stream::release`]). Whoever holds it now is writing, and calls
    /// this again when it sees the stream closed.
    fn let_go(&self) {
        if let Ok(mut out) = self.out.try_lock() {
            out.release();
        }
    }

    /// Signals a change to whoever waits on it.
    fn tell(&self, queue: &Queue) {
        if queue.waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Waits for a change (for at most `limit`), counted as a waiter.
    fn wait<'a>(&'a self, mut queue: MutexGuard<'a, Queue>, limit: Option<Duration>) -> MutexGuard<'a, Queue> {
        queue.waiters += 1;
        let mut queue = match limit {
            Some(limit) => wait_for(&self.changed, queue, limit),
            None => wait(&self.changed, queue),
        };
        queue.waiters -= 1;
        queue
    }

    /// Blocks while more than the high-water mark waits to be written (the
    /// host reads slowly), until [`wake`](Self::wake) says to stop waiting.
    pub(crate) fn wait_for_room(&self, stop: impl Fn() -> bool) {
        let mut queue = lock(&self.queue);
        while queue.bytes > HIGH_WATER && queue.status == Status::Open && !stop() {
            queue = self.wait(queue, None);
        }
    }

    /// Wakes whoever waits in [`wait_for_room`](Self::wait_for_room).
    pub(crate) fn wake(&self) {
        let _queue = lock(&self.queue);
        self.changed.notify_all();
    }

    /// Waits until everything sent so far has been written, for as long as
    /// the host keeps reading: gives up after `patience` without progress.
    /// Either way the stream is closed (later frames are dropped, counted)
    /// and what could not be delivered is returned.
    pub(crate) fn drain(&self, patience: Duration) -> Undelivered {
        let mut queue = lock(&self.queue);
        let mut progress = (queue.written, Instant::now());
        while queue.status == Status::Open && !(queue.frames.is_empty() && queue.writer == Writer::Nobody) {
            if queue.written != progress.0 {
                progress = (queue.written, Instant::now());
            }
            let Some(left) = patience.checked_sub(progress.1.elapsed()) else { break };
            queue = self.wait(queue, Some(left));
        }
        self.close_queue(&mut queue);
        // Whoever writes stops within a poll slice (what it held is then
        // counted) unless a write blocks: a stream that is not a pipe, say
        // a terminal on hold. Then what it holds is counted lost, and the
        // session ends without it.
        let writer_deadline = Instant::now() + WRITER_STOP;
        while queue.writer != Writer::Nobody {
            let Some(left) = writer_deadline.checked_duration_since(Instant::now()) else {
                return queue.undelivered.plus(queue.out);
            };
            queue = self.wait(queue, Some(left));
        }
        queue.undelivered
    }

    /// Closes the stream without waiting: what is queued is dropped.
    pub(crate) fn close(&self) -> Undelivered {
        let mut queue = lock(&self.queue);
        self.close_queue(&mut queue);
        queue.undelivered
    }

    fn close_queue(&self, queue: &mut Queue) {
        if queue.status == Status::Open {
            queue.status = Status::Closed;
        }
        let frames = mem::take(&mut queue.frames);
        for frame in &frames {
            queue.undelivered.count(frame);
        }
        queue.bytes = 0;
        self.let_go();
        self.tell(queue);
    }

    /// Whether a write has failed (the host closed stdout).
    #[cfg(all(test, not(scriptling_loom)))]
    fn failed(&self) -> bool {
        lock(&self.queue).status == Status::Failed
    }
}

impl FrameSink for Arc<FrameWriter> {
    fn send_frame(&self, frame: Vec<u8>) {
        self.send(Frame::line(Kind::Request, frame));
    }
}

/// What one write did.
#[derive(Debug)]
struct Progress {
    bytes: usize,
}

/// Writes, from `skip` bytes into the first frame, the frames the stream
/// has room for whole (all it takes, when it does not say), in one `writev`.
/// A frame that began already, or that is larger than the stream ever
/// holds, is written in parts: nothing else could make room for it.
fn write_fitting(out: &mut dyn Stream, frames: &VecDeque<Frame>, skip: usize) -> io::Result<Progress> {
    let wanted: usize = frames.iter().take(MAX_SLICES / 4).map(Frame::len).sum::<usize>() - skip;
    let room = out.room(wanted);
    let mut slices = Vec::with_capacity(frames.len().min(MAX_SLICES) * 2);
    let mut planned = 0;
    for (i, frame) in frames.iter().enumerate() {
        let skip = if i == 0 { skip } else { 0 };
        let left = frame.len() - skip;
        let fits = room.is_none_or(|Room { now, .. }| planned + left <= now);
        let in_parts = i == 0 && (skip > 0 || room.is_some_and(|Room { most, .. }| left > most));
        // A frame is up to four slices: only whole frames go in a writev.
        if (!fits && !in_parts) || slices.len() + 4 > MAX_SLICES {
            break;
        }
        frame.slices(skip, &mut slices);
        planned += left;
        if in_parts {
            break;
        }
    }
    if slices.is_empty() {
        return Ok(Progress { bytes: 0 });
    }
    let bytes = out.write_now(&slices)?;
    Ok(Progress { bytes })
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stream with a fixed room that a test empties by "reading".
    #[derive(Clone, Default)]
    struct Fake(Arc<std::sync::Mutex<FakeState>>);

    #[derive(Default)]
    struct FakeState {
        written: Vec<u8>,
        room: Option<usize>,
        writes: usize,
        broken: bool,
    }

    impl Fake {
        fn with_room(room: usize) -> Fake {
            let fake = Fake::default();
            fake.0.lock().unwrap().room = Some(room);
            fake
        }
        fn read_all(&self, room: usize) -> String {
            let mut state = self.0.lock().unwrap();
            state.room = Some(room);
            String::from_utf8(mem::take(&mut state.written)).unwrap()
        }
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().written.clone()).unwrap()
        }
    }

    impl Stream for Fake {
        fn room(&mut self, _: usize) -> Option<Room> {
            self.0.lock().unwrap().room.map(|now| Room { now, most: 61 * 1024 })
        }
        fn write_now(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let mut state = self.0.lock().unwrap();
            if state.broken {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            state.writes += 1;
            let mut budget = state.room.unwrap_or(usize::MAX);
            let mut n = 0;
            for buf in bufs {
                let take = buf.len().min(budget);
                state.written.extend_from_slice(&buf[..take]);
                budget -= take;
                n += take;
            }
            if let Some(room) = &mut state.room {
                *room -= n;
            }
            Ok(n)
        }
        fn wait_writable(&mut self, limit: Duration) -> io::Result<()> {
            std::thread::sleep(limit.min(Duration::from_millis(1)));
            Ok(())
        }
    }

    fn writer(fake: &Fake) -> (Arc<FrameWriter>, Arc<AtomicUsize>) {
        let failures = Arc::new(AtomicUsize::new(0));
        let told = Arc::clone(&failures);
        let writer = FrameWriter::new(
            Box::new(fake.clone()),
            Box::new(move |_| {
                told.fetch_add(1, Ordering::SeqCst);
            }),
        );
        (writer, failures)
    }

    fn answer(text: &str) -> Frame {
        Frame::line(Kind::Answer, text.as_bytes().to_vec())
    }

    #[test]
    fn a_lone_frame_is_one_write_by_its_sender() {
        let fake = Fake::default();
        let (writer, _) = writer(&fake);
        writer.send(answer("one"));
        writer.send(Frame::split(b"{h:".to_vec(), b"body".to_vec(), b"}".to_vec()));
        assert_eq!(fake.text(), "one\n{h:body}\n");
        assert_eq!(fake.0.lock().unwrap().writes, 2);
        assert_eq!(writer.drain(Duration::from_secs(1)), Undelivered::default());
    }

    #[test]
    fn a_full_stream_is_written_whole_frames_at_a_time_by_the_writer_thread() {
        let fake = Fake::with_room(10);
        let (writer, _) = writer(&fake);
        // "aaaa\n" fits, "bbbbbbbb\n" does not: it waits whole for room.
        writer.send(answer("aaaa"));
        writer.send(answer("bbbbbbbb"));
        writer.send(answer("cc"));
        assert_eq!(fake.text(), "aaaa\n");
        // The host reads: the rest follows, in order, from the writer thread.
        let mut seen = fake.read_all(100);
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen.len() < "aaaa\nbbbbbbbb\ncc\n".len() {
            assert!(Instant::now() < deadline, "{seen:?}");
            std::thread::yield_now();
            seen.push_str(&fake.read_all(100));
        }
        assert_eq!(seen, "aaaa\nbbbbbbbb\ncc\n");
        assert_eq!(writer.drain(Duration::from_secs(1)), Undelivered::default());
    }

    #[test]
    fn a_drain_gives_up_on_a_host_that_stopped_reading_at_a_frames_end() {
        let fake = Fake::with_room(12);
        let (writer, _) = writer(&fake);
        for text in ["first", "second", "third"] {
            writer.send(answer(text));
        }
        writer.send(Frame::line(Kind::Request, b"log".to_vec()));
        let undelivered = writer.drain(Duration::from_millis(50));
        assert_eq!(fake.text(), "first\n", "whole frames only");
        assert_eq!(undelivered, Undelivered { answers: 2, requests: 1 });
        // Closed: later frames are counted, never written.
        writer.send(answer("late"));
        assert_eq!(writer.close(), Undelivered { answers: 3, requests: 1 });
        fake.read_all(1000);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(fake.text(), "", "nothing after the drain gave up");
    }

    #[test]
    fn a_broken_stream_fails_the_writer_once_and_drops_what_is_queued() {
        let fake = Fake::default();
        let (writer, failures) = writer(&fake);
        fake.0.lock().unwrap().broken = true;
        writer.send(answer("lost"));
        writer.send(answer("lost too"));
        assert!(writer.failed());
        assert_eq!(failures.load(Ordering::SeqCst), 1);
        assert_eq!(writer.close(), Undelivered { answers: 2, requests: 0 });
    }

    /// A stream whose writes block until the test opens the gate: a
    /// blocking stdout (a terminal on hold), or a write caught mid-way.
    #[derive(Clone, Default)]
    struct Held(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

    impl Held {
        fn open(&self) {
            *self.0.0.lock().unwrap() = true;
            self.0.1.notify_all();
        }
    }

    impl Stream for Held {
        fn room(&mut self, _: usize) -> Option<Room> {
            None
        }
        fn write_now(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let mut open = self.0.0.lock().unwrap();
            while !*open {
                open = self.0.1.wait(open).unwrap();
            }
            Ok(bufs.iter().map(|b| b.len()).sum())
        }
        fn wait_writable(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_close_while_a_write_is_under_way_keeps_the_counts_right() {
        let held = Held::default();
        let writer = FrameWriter::new(Box::new(held.clone()), Box::new(|_| {}));
        let sender = {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || writer.send(answer("in flight")))
        };
        // Wait until the sender is inside its write.
        while lock(&writer.queue).out.answers == 0 {
            std::thread::yield_now();
        }
        assert_eq!(writer.close(), Undelivered::default());
        held.open();
        sender.join().expect("the sender's write is booked without underflow");
        assert_eq!(lock(&writer.queue).bytes, 0);
    }

    #[test]
    fn a_drain_does_not_wait_for_ever_on_a_write_that_blocks() {
        let held = Held::default();
        let writer = FrameWriter::new(Box::new(held.clone()), Box::new(|_| {}));
        {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || writer.send(answer("stuck")));
        }
        while lock(&writer.queue).out.answers == 0 {
            std::thread::yield_now();
        }
        let started = Instant::now();
        let undelivered = writer.drain(Duration::from_millis(20));
        assert!(started.elapsed() < WRITER_STOP + Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(undelivered, Undelivered { answers: 1, requests: 0 }, "the frame held by the write is counted");
        held.open();
    }

    #[test]
    fn a_frame_too_big_for_the_stream_goes_in_parts() {
        let fake = Fake::with_room(61 * 1024);
        let (writer, _) = writer(&fake);
        let big = "x".repeat(100 * 1024);
        writer.send(answer(&big));
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen.len() < big.len() + 1 {
            assert!(Instant::now() < deadline);
            seen.push_str(&fake.read_all(61 * 1024));
            std::thread::yield_now();
        }
        assert_eq!(seen.len(), big.len() + 1);
        assert_eq!(writer.drain(Duration::from_secs(1)), Undelivered::default());
    }
}

/// Every interleaving of senders, the hand-over to the writer thread and
/// the drain (see ARCHITECTURE.md).
#[cfg(all(test, scriptling_loom))]
mod model {
    use super::*;
    use crate::support::sync::Mutex;

    /// A stream that is full the first time it is asked, then takes all.
    struct Fake {
        written: Arc<Mutex<Vec<u8>>>,
        asked: bool,
    }

    impl Stream for Fake {
        fn room(&mut self, _: usize) -> Option<Room> {
            let now = if std::mem::replace(&mut self.asked, true) { 1000 } else { 0 };
            Some(Room { now, most: 1000 })
        }
        fn write_now(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let mut written = lock(&self.written);
            for buf in bufs {
                written.extend_from_slice(buf);
            }
            Ok(bufs.iter().map(|b| b.len()).sum())
        }
        fn wait_writable(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    /// Two senders, one of them finding the stream full: every frame is
    /// written whole, each sender's in the order sent, and the drain sees
    /// them all delivered.
    #[test]
    fn frames_are_written_whole_in_order_and_all_delivered() {
        crate::support::sync::model(|| {
            let written = Arc::new(Mutex::new(Vec::new()));
            let fake = Fake { written: Arc::clone(&written), asked: false };
            let writer = FrameWriter::new(Box::new(fake), Box::new(|_| {}));
            let other = {
                let writer = Arc::clone(&writer);
                thread::spawn(move || writer.send(Frame::line(Kind::Answer, b"b1".to_vec())))
            };
            writer.send(Frame::line(Kind::Answer, b"a1".to_vec()));
            writer.send(Frame::line(Kind::Request, b"a2".to_vec()));
            other.join().unwrap();
            assert_eq!(writer.drain(Duration::from_secs(60)), Undelivered::default());
            let text = String::from_utf8(lock(&written).clone()).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 3, "{text:?}");
            let a1 = lines.iter().position(|l| *l == "a1").unwrap();
            let a2 = lines.iter().position(|l| *l == "a2").unwrap();
            assert!(a1 < a2, "{text:?}");
            assert!(lines.contains(&"b1"));
        });
    }
}
