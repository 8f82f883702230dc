//! [`FrameWriter`]: the one owner of the protocol stream, in lsp-server's
//! shape: every frame (answers, `callback.call`, `host.log`) goes into one
//! queue, in the order it was sent, and one thread (`plugin-stdout`, or a
//! connection's `plugin-tcp-out`) takes the queue and writes it with
//! blocking writes.
//!
//! One speed trick: a sender that finds the stream idle (nothing queued,
//! nobody writing) writes its small frame itself, and hands whatever queued
//! meanwhile to the writer thread when it is done. A lone answer, callback
//! or log record then costs no thread wake-up (measured in ARCHITECTURE.md:
//! callback round trips 29 → 20 µs, log records 20 → 15 µs). Such a write
//! blocks its sender while the host's pipe is full, as any handler may
//! block; so a reading thread while it reads, and async tasks (the async
//! runtime's thread or workers, shared by every task) never take this
//! path: they always queue.
//! (A reading thread running a call it read has put its reading down; its
//! call writes as any handler does, see [`sending`].) A second trick: a
//! reading thread holds back the answer of a call read with more lines
//! behind it ([`Sends::Held`]), so that the answers of calls read together
//! are written together, by the sender of the next frame or the writer
//! thread. So:
//!
//! - frames never interleave, and reach the host in the order they were
//!   sent (a call's log records before its answer);
//! - a slow host holds up at most the sync handler whose lone frame is
//!   being written, never the reader or the runtime. The reader waits while
//!   more than the high-water mark is unwritten
//!   ([`FrameWriter::wait_for_room`]), which bounds the queue;
//! - small frames are gathered into writes of at most [`GATHER`] bytes,
//!   which a pipe takes whole or not at all: a host that stops reading
//!   finds none of them cut, and what was written is counted exactly. A
//!   larger frame is written alone, in pieces of [`PIECE`] bytes;
//! - [`drain`](FrameWriter::drain) follows progress, not a clock: it waits
//!   while bytes keep being written, and gives up on a host that read
//!   nothing for its patience, counting what it could not deliver (the
//!   frames queued, and those of a write that never returned). A broken
//!   stream fails the writer at once and tells the session.
//!
//! A write that blocks for ever (a host that stopped reading and never
//! exits) keeps the writer thread until the process exits; nothing else
//! waits for it.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::mem;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::call::link::FrameSink;
use crate::support::sync::{Condvar, Mutex, MutexGuard, lock, thread, wait, wait_for};

/// The most bytes gathered into one write: POSIX's `PIPE_BUF` on Linux, the
/// size up to which a write to a pipe is never split. (macOS's is 512: a
/// frame between that and this may be cut there when the host stops
/// reading mid-write, and is then counted as lost.)
const GATHER: usize = 4096;
/// The largest piece of a large frame written at once, so that the drain
/// sees progress while a slow host reads it.
const PIECE: usize = 64 * 1024;

/// How a thread's frames are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sends {
    /// Always queued for the writer thread: a reading thread while it
    /// reads (a full pipe must not stop the reading), or a tokio task (a
    /// blocked runtime thread would stall every task on it).
    Queued,
    /// Written by the sender itself when it finds the stream idle: a
    /// handler thread, which may block.
    Written,
    /// As `Written`, but a small answer is held back: queued, nobody
    /// woken, until a later frame, [`FrameWriter::kick`] or a wait for
    /// progress takes it on, so that the answers of calls read together
    /// are written together. A reading thread sends so while it runs a call
    /// read with more lines behind it.
    Held,
}

thread_local! {
    /// How this thread sends: reading threads queue.
    static SENDS: Cell<Sends> = const { Cell::new(Sends::Written) };
    /// When this thread sent the answer it was asked to time (see
    /// [`time_next_answer`]).
    static ANSWER_SENT: Cell<Timing> = const { Cell::new(Timing::Off) };
}

/// Whether and when an answer was sent (see [`time_next_answer`]).
#[derive(Clone, Copy)]
enum Timing {
    Off,
    Armed,
    At(Instant),
}

/// Asks for the time this thread next sends an answer (not queued only):
/// the end of the call that made it, before the write, which the host it
/// wakes may preempt. [`answer_sent_at`] tells it.
pub(crate) fn time_next_answer() {
    ANSWER_SENT.with(|sent| sent.set(Timing::Armed));
}

/// When this thread sent the answer [`time_next_answer`] asked for (`None`
/// if it sent none, or queued it); asks for no more.
pub(crate) fn answer_sent_at() -> Option<Instant> {
    match ANSWER_SENT.with(|sent| sent.replace(Timing::Off)) {
        Timing::At(at) => Some(at),
        Timing::Off | Timing::Armed => None,
    }
}

/// Makes every frame this thread sends go through the queue.
pub(crate) fn queue_only_on_this_thread() {
    SENDS.with(|sends| sends.set(Sends::Queued));
}

/// Runs `f` with this thread's frames sent as said: a reading thread runs
/// a call it read as a handler thread (its reading put down, a write that
/// blocks holds up the call alone; the reading is taken over after the
/// stall time), holding its answer back when more lines are read behind
/// it; a call that reads for its callback's answer queues meanwhile (a
/// full pipe must not stop the reading).
pub(crate) fn sending<T>(sends: Sends, f: impl FnOnce() -> T) -> T {
    let outer = SENDS.with(|flag| flag.replace(sends));
    let result = f();
    SENDS.with(|flag| flag.set(outer));
    result
}

/// How this thread sends now (inside a tokio task, always queued).
fn this_thread_sends() -> Sends {
    match SENDS.with(Cell::get) {
        Sends::Queued => Sends::Queued,
        _ if tokio::task::try_id().is_some() => Sends::Queued,
        sends => sends,
    }
}

/// What a frame is, for the count of what was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An answer to one of the host's requests.
    Answer,
    /// One of the plugin's own requests (`callback.call`, `host.log`).
    Request,
}

/// One frame: its bytes (newline included) as one to four parts.
pub(crate) struct Frame {
    kind: Kind,
    parts: Parts,
    /// Bytes [`reserve`](FrameWriter::reserve)d that sending it releases
    /// (the request it answers), in the lock the send takes anyway.
    releases: usize,
}

enum Parts {
    /// A whole frame in one buffer.
    Line(Vec<u8>),
    /// An answer written from where its result was serialised: head,
    /// result, tail (a newline follows).
    Split(Vec<u8>, Vec<u8>, Vec<u8>),
}

impl Frame {
    /// A frame from `line` (without its newline; it is appended in place).
    pub(crate) fn line(kind: Kind, mut line: Vec<u8>) -> Frame {
        line.push(b'\n');
        Frame { kind, parts: Parts::Line(line), releases: 0 }
    }

    /// An answer made of `head`, `body` and `tail` (a newline follows).
    pub(crate) fn split(head: Vec<u8>, body: Vec<u8>, tail: Vec<u8>) -> Frame {
        Frame { kind: Kind::Answer, parts: Parts::Split(head, body, tail), releases: 0 }
    }

    /// The frame, releasing `bytes` reserved for the request it answers.
    pub(crate) fn releasing(mut self, bytes: usize) -> Frame {
        self.releases = bytes;
        self
    }

    fn len(&self) -> usize {
        self.parts().iter().map(|part| part.len()).sum()
    }

    fn parts(&self) -> [&[u8]; 4] {
        match &self.parts {
            Parts::Line(line) => [line, b"", b"", b""],
            Parts::Split(head, body, tail) => [head, body, tail, b"\n"],
        }
    }
}

/// Frames that could not be delivered (or are not yet), by kind.
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

    fn of<'a>(frames: impl IntoIterator<Item = &'a Frame>) -> Undelivered {
        let mut counts = Undelivered::default();
        frames.into_iter().for_each(|frame| counts.count(frame));
        counts
    }

    fn plus(self, other: Undelivered) -> Undelivered {
        Undelivered { answers: self.answers + other.answers, requests: self.requests + other.requests }
    }

    fn minus(self, other: Undelivered) -> Undelivered {
        Undelivered { answers: self.answers - other.answers, requests: self.requests - other.requests }
    }

    fn any(self) -> bool {
        self.answers + self.requests > 0
    }
}

/// Whether the stream is still written.
#[derive(Debug, PartialEq, Eq)]
enum Status {
    Open,
    /// A write failed (the host closed the stream): nothing more is written.
    Failed,
    /// The session gave up on the host, or ended: nothing more is written.
    Closed,
}

struct State {
    queue: VecDeque<Frame>,
    /// Bytes sent and not yet written: with `reserved`, what the
    /// high-water mark bounds.
    pending: usize,
    /// Bytes of requests read whose answers are not yet sent (see
    /// [`FrameWriter::reserve`]).
    reserved: usize,
    /// Bytes written so far: the drain's measure of progress.
    written: u64,
    /// The frames the writer thread took and has not finished writing.
    writing: Undelivered,
    status: Status,
    undelivered: Undelivered,
    /// The writer thread waits for frames (tell it, once, when one comes).
    writer_waits: bool,
    /// Threads waiting for progress (a condvar signal is a system call
    /// even with nobody waiting, so it is sent only to someone).
    progress_waiters: usize,
    /// Bytes of answers queued that the writer thread was not told of
    /// (at most [`GATHER`]: one write's worth).
    held: usize,
}

impl State {
    /// Nothing more is written: what is queued or being written is counted
    /// as undelivered.
    fn stop_writing(&mut self, status: Status) {
        self.status = status;
        let queued = Undelivered::of(&self.queue);
        self.undelivered = self.undelivered.plus(self.writing).plus(queued);
        self.queue.clear();
        self.pending = 0;
    }
}

/// The writing's progress, for a wait that gives up after a time without
/// any.
struct Progress {
    written: u64,
    since: Instant,
}

impl Progress {
    fn at(state: &State, now: Instant) -> Progress {
        Progress { written: state.written, since: now }
    }

    /// What is left of `patience` since the last progress (`None`: it ran out).
    fn left(&mut self, state: &State, patience: Duration) -> Option<Duration> {
        if state.written != self.written {
            *self = Progress::at(state, Instant::now());
        }
        patience.checked_sub(self.since.elapsed())
    }
}

/// A host that read none of its answers for the patience given.
#[derive(Debug)]
pub(crate) struct NoProgress;

/// Told once when a write fails.
type OnFailure = Box<dyn Fn(&io::Error) + Send + Sync>;

pub(crate) struct FrameWriter {
    state: Mutex<State>,
    /// The writer thread waits here for frames.
    work: Condvar,
    /// Drains and the reader wait here for bytes to be written.
    progress: Condvar,
    /// Bytes unwritten above which the reader stops taking requests.
    high_water: usize,
    on_failure: OnFailure,
    /// The stream, held by whoever writes (the writer thread, or a sender
    /// that found it idle): `writing` in the state says who may.
    out: Mutex<Box<dyn Write + Send>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

/// Why the writer thread stops writing what it holds.
enum Halt {
    /// The session closed the stream.
    Closed,
    /// A write failed.
    Failed(io::Error),
}

impl FrameWriter {
    /// Starts the thread (named `name`) that writes to `out`; `on_failure`
    /// is told when a write fails; the reader waits while more than
    /// `high_water` bytes are unwritten.
    pub(crate) fn new(
        out: Box<dyn Write + Send>,
        on_failure: OnFailure,
        name: &str,
        high_water: usize,
    ) -> io::Result<Arc<Self>> {
        let writer = Arc::new(Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                pending: 0,
                reserved: 0,
                written: 0,
                writing: Undelivered::default(),
                status: Status::Open,
                undelivered: Undelivered::default(),
                writer_waits: false,
                progress_waiters: 0,
                held: 0,
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
            high_water,
            on_failure,
            out: Mutex::new(out),
            thread: Mutex::new(None),
        });
        let running = Arc::clone(&writer);
        let handle = thread::Builder::new().name(name.into()).spawn(move || running.run())?;
        *lock(&writer.thread) = Some(handle);
        Ok(writer)
    }

    /// Sends `frame`: written at once by this thread when the stream is
    /// idle, the frame small and the thread one that may block (see the
    /// module docs), with the answers held back if there are; held back
    /// itself, if it is a small answer of a thread that holds its answers
    /// and less than a write's worth is held; else queued for the writer
    /// thread.
    pub(crate) fn send(&self, frame: Frame) {
        let sends = this_thread_sends();
        if frame.kind == Kind::Answer && sends != Sends::Queued {
            ANSWER_SENT.with(|sent| {
                if let Timing::Armed = sent.get() {
                    sent.set(Timing::At(Instant::now()));
                }
            });
        }
        self.send_as(frame, sends);
    }

    /// Sends `frame` as a thread that `sends` so.
    fn send_as(&self, frame: Frame, sends: Sends) {
        let mut state = lock(&self.state);
        state.reserved -= frame.releases;
        // Room came back, or a request of the plugin's own may be what the
        // reader must now read the answer to: it looks again.
        if (frame.releases > 0 || frame.kind == Kind::Request) && state.progress_waiters > 0 {
            self.progress.notify_all();
        }
        if state.status != Status::Open {
            state.undelivered.count(&frame);
            return;
        }
        let len = frame.len();
        state.pending += len;
        // Held on top of held answers only (a queue the writer thread was
        // told of is its own), and no more than one write takes.
        let holds = sends == Sends::Held && frame.kind == Kind::Answer;
        if holds && state.held + len <= GATHER && (state.held > 0 || state.queue.is_empty()) {
            state.queue.push_back(frame);
            state.held += len;
            return;
        }
        let may_write = sends != Sends::Queued && len <= GATHER && !state.writing.any();
        if may_write && state.held > 0 {
            // Answers held back, nobody writing: this thread writes them
            // with its own frame, two writes' worth at most.
            state.held = 0;
            let mut frames = mem::take(&mut state.queue);
            frames.push_back(frame);
            state.writing = Undelivered::of(&frames);
            drop(state);
            let mut gathered = Vec::with_capacity(GATHER);
            if let Err(Halt::Failed(e)) = self.write(&mut **lock(&self.out), &frames, &mut gathered) {
                self.fail(lock(&self.state), &e);
            }
            return;
        }
        if may_write && state.queue.is_empty() {
            state.writing.count(&frame);
            drop(state);
            let written = {
                let mut out = lock(&self.out);
                frame.parts().iter().try_for_each(|part| out.write_all(part)).and_then(|()| out.flush())
            };
            if let Err(e) = written {
                return self.fail(lock(&self.state), &e);
            }
            let _ = self.book(len, Undelivered::of([&frame]));
            return;
        }
        state.queue.push_back(frame);
        state.held = 0;
        if !state.writing.any() && mem::take(&mut state.writer_waits) {
            self.work.notify_one();
        }
    }

    /// Hands answers held back (see [`Sends::Held`]) to the writer
    /// thread: the reading calls it before it may block on its input, the
    /// stall watch when a call has held the reading down that long, and a
    /// thread whose held call ended after another took the reading over.
    pub(crate) fn kick(&self) {
        let mut state = lock(&self.state);
        self.kick_locked(&mut state);
    }

    fn kick_locked(&self, state: &mut State) {
        if mem::take(&mut state.held) > 0
            && !state.queue.is_empty()
            && !state.writing.any()
            && mem::take(&mut state.writer_waits)
        {
            self.work.notify_one();
        }
    }

    /// The writer thread: writes until the stream is closed or fails, then
    /// lets the stream go. Whatever outlives the session (a `Callback` kept
    /// in a static holds the session's link, and so this writer) must not
    /// hold the host's pipe or socket open: the peer would never read the
    /// end of it.
    fn run(&self) {
        self.write_until_halted();
        // A sender that found the stream open may still be writing, or
        // about to: it holds the lock and is waited for, or writes to the
        // sink (its frame was counted undelivered when the stream closed).
        drop(mem::replace(&mut *lock(&self.out), Box::new(io::sink())));
    }

    /// Takes the whole queue when nobody writes, writes it, books it.
    fn write_until_halted(&self) {
        let mut gathered = Vec::with_capacity(GATHER);
        // The queue's buffer is swapped in and out, not given away each time.
        let mut frames = VecDeque::new();
        let mut state = lock(&self.state);
        loop {
            // Held answers wait to be handed on (see `kick`), even when a
            // spurious wake-up or its own last write brings this thread by.
            while (state.queue.is_empty() || state.writing.any() || state.held > 0) && state.status == Status::Open {
                state.writer_waits = true;
                state = wait(&self.work, state);
            }
            if state.status != Status::Open {
                return;
            }
            mem::swap(&mut frames, &mut state.queue);
            state.writing = Undelivered::of(&frames);
            drop(state);
            let halt = self.write(&mut **lock(&self.out), &frames, &mut gathered).err();
            // Freed now, not when the next frames come (a large one is large).
            frames.clear();
            state = lock(&self.state);
            if let Some(Halt::Failed(e)) = halt {
                return self.fail(state, &e);
            }
        }
    }

    /// Writes `frames` in order: small ones gathered, large ones in pieces;
    /// each write is booked as it returns.
    fn write(&self, out: &mut dyn Write, frames: &VecDeque<Frame>, gathered: &mut Vec<u8>) -> Result<(), Halt> {
        let mut held = Undelivered::default();
        for frame in frames {
            let len = frame.len();
            if gathered.len() + len > GATHER && !gathered.is_empty() {
                self.put(out, gathered, mem::take(&mut held))?;
            }
            if len <= GATHER {
                frame.parts().iter().for_each(|part| gathered.extend_from_slice(part));
                held.count(frame);
                continue;
            }
            for part in frame.parts() {
                for piece in part.chunks(PIECE) {
                    out.write_all(piece).map_err(Halt::Failed)?;
                    self.book(piece.len(), Undelivered::default())?;
                }
            }
            self.book(0, Undelivered::of([frame]))?;
        }
        if !gathered.is_empty() {
            self.put(out, gathered, held)?;
        }
        out.flush().map_err(Halt::Failed)
    }

    /// Writes the gathered frames (`held`) in one write, and books them.
    fn put(&self, out: &mut dyn Write, gathered: &mut Vec<u8>, held: Undelivered) -> Result<(), Halt> {
        out.write_all(gathered).map_err(Halt::Failed)?;
        let bytes = gathered.len();
        gathered.clear();
        self.book(bytes, held)
    }

    /// Books `bytes` written and `frames` finished; halts once the session
    /// closed the stream (what was held is then counted by the close).
    fn book(&self, bytes: usize, frames: Undelivered) -> Result<(), Halt> {
        let mut state = lock(&self.state);
        if state.status != Status::Open {
            return Err(Halt::Closed);
        }
        state.written += bytes as u64;
        state.pending -= bytes;
        state.writing = state.writing.minus(frames);
        if state.progress_waiters > 0 {
            self.progress.notify_all();
        }
        // A sender that wrote its own frame hands what queued meanwhile on
        // (not answers held back: they wait to be handed on).
        if !state.writing.any() && !state.queue.is_empty() && state.held == 0 && mem::take(&mut state.writer_waits) {
            self.work.notify_one();
        }
        Ok(())
    }

    /// A write failed: nothing more is written; the session is told.
    fn fail(&self, mut state: MutexGuard<'_, State>, error: &io::Error) {
        state.stop_writing(Status::Failed);
        state.writing = Undelivered::default();
        self.progress.notify_all();
        // The writer thread ends, and lets the stream go, when a sender's
        // own write failed too.
        self.work.notify_all();
        drop(state);
        (self.on_failure)(error);
    }

    /// Waits for progress (for at most `limit`), counted as a waiter.
    fn wait_progress<'a>(&'a self, mut state: MutexGuard<'a, State>, limit: Option<Duration>) -> MutexGuard<'a, State> {
        // Progress needs what is held back written.
        self.kick_locked(&mut state);
        state.progress_waiters += 1;
        let mut state = match limit {
            Some(limit) => wait_for(&self.progress, state, limit),
            None => wait(&self.progress, state),
        };
        state.progress_waiters -= 1;
        state
    }

    /// Counts `bytes` (a request just read) against the high-water mark
    /// until its answer is sent ([`Frame::releasing`]) or it is known to
    /// have none ([`release`](Self::release)): so the calls under way bound
    /// the reading too, not only the answers queued.
    pub(crate) fn reserve(&self, bytes: usize) {
        lock(&self.state).reserved += bytes;
    }

    /// Stops counting `bytes` [`reserve`](Self::reserve)d (their answer has
    /// been sent, or there is none).
    pub(crate) fn release(&self, bytes: usize) {
        let mut state = lock(&self.state);
        state.reserved -= bytes;
        if state.progress_waiters > 0 {
            self.progress.notify_all();
        }
    }

    /// Blocks while more than the high-water mark is unwritten or reserved
    /// (the host reads slowly, or sends more than runs), until
    /// [`wake`](Self::wake) says to stop waiting; returns how long it
    /// waited (zero, with no clock read, when there was room). Fails if
    /// answers waited and none was written for `patience` (the host reads
    /// none of its answers); calls under way with no answer waiting have no
    /// limit. While `awaiting` says a call waits for the host's answer,
    /// only what is unwritten counts: the calls under way may need that
    /// answer read to end. (A request of the plugin's own sent meanwhile
    /// wakes the wait.)
    pub(crate) fn wait_for_room(
        &self,
        stop: impl Fn() -> bool,
        awaiting: impl Fn() -> bool,
        patience: Option<Duration>,
    ) -> Result<Duration, NoProgress> {
        let mut state = lock(&self.state);
        let must_wait = |state: &State| {
            let full =
                state.pending > self.high_water || (state.pending + state.reserved > self.high_water && !awaiting());
            full && state.status == Status::Open && !stop()
        };
        if !must_wait(&state) {
            return Ok(Duration::ZERO);
        }
        let started = Instant::now();
        let mut progress = Progress::at(&state, started);
        while must_wait(&state) {
            let limit = match patience {
                Some(patience) if state.pending > 0 => Some(progress.left(&state, patience).ok_or(NoProgress)?),
                // Only calls under way: the time without progress starts
                // when an answer waits.
                _ => {
                    progress = Progress::at(&state, Instant::now());
                    None
                }
            };
            state = self.wait_progress(state, limit);
        }
        Ok(started.elapsed())
    }

    /// Whether more than the high-water mark is unwritten (what
    /// [`wait_for_room`](Self::wait_for_room) waits out while a call awaits
    /// the host's answer).
    pub(crate) fn over_high_water(&self) -> bool {
        lock(&self.state).pending > self.high_water
    }

    /// Bytes sent and not yet written.
    pub(crate) fn unwritten(&self) -> usize {
        lock(&self.state).pending
    }

    /// Wakes whoever waits in [`wait_for_room`](Self::wait_for_room).
    pub(crate) fn wake(&self) {
        let _state = lock(&self.state);
        self.progress.notify_all();
    }

    /// Waits until everything sent so far has been written, for as long as
    /// the host keeps reading: gives up after `patience` without progress.
    /// Either way the stream is closed (later frames are dropped, counted)
    /// and what could not be delivered is returned.
    pub(crate) fn drain(&self, patience: Duration) -> Undelivered {
        let mut state = lock(&self.state);
        let mut progress = Progress::at(&state, Instant::now());
        while state.status == Status::Open && (!state.queue.is_empty() || state.writing.any()) {
            let Some(left) = progress.left(&state, patience) else { break };
            state = self.wait_progress(state, Some(left));
        }
        self.close_state(state)
    }

    /// Closes the stream without waiting: what is queued is dropped.
    pub(crate) fn close(&self) -> Undelivered {
        self.close_state(lock(&self.state))
    }

    /// Closes the stream: counts what is queued or being written as
    /// undelivered, and lets the writer thread end (waiting for it unless
    /// it is stuck in a write).
    fn close_state(&self, mut state: MutexGuard<'_, State>) -> Undelivered {
        if state.status == Status::Open {
            state.stop_writing(Status::Closed);
        }
        let stuck = state.status == Status::Closed && state.writing.any();
        let undelivered = state.undelivered;
        self.work.notify_all();
        self.progress.notify_all();
        drop(state);
        if !stuck {
            if let Some(thread) = lock(&self.thread).take() {
                let _ = thread.join();
            }
        }
        undelivered
    }
}

impl FrameSink for Arc<FrameWriter> {
    fn send_frame(&self, frame: Vec<u8>) {
        self.send(Frame::line(Kind::Request, frame));
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stream that records each write, blocks while `held`, or fails.
    #[derive(Clone, Default)]
    struct Fake(Arc<(std::sync::Mutex<FakeState>, std::sync::Condvar)>);

    #[derive(Default)]
    struct FakeState {
        writes: Vec<Vec<u8>>,
        held: bool,
        broken: bool,
    }

    impl Fake {
        fn held() -> Fake {
            let fake = Fake::default();
            fake.0.0.lock().unwrap().held = true;
            fake
        }
        fn release(&self) {
            self.0.0.lock().unwrap().held = false;
            self.0.1.notify_all();
        }
        fn text(&self) -> String {
            String::from_utf8(self.0.0.lock().unwrap().writes.concat()).unwrap()
        }
        fn write_sizes(&self) -> Vec<usize> {
            self.0.0.lock().unwrap().writes.iter().map(Vec::len).collect()
        }
    }

    impl Write for Fake {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut state = self.0.0.lock().unwrap();
            while state.held {
                state = self.0.1.wait(state).unwrap();
            }
            if state.broken {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            state.writes.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn writer(fake: &Fake) -> (Arc<FrameWriter>, Arc<AtomicUsize>) {
        writer_with_high_water(fake, usize::MAX)
    }

    fn writer_with_high_water(fake: &Fake, high_water: usize) -> (Arc<FrameWriter>, Arc<AtomicUsize>) {
        let failures = Arc::new(AtomicUsize::new(0));
        let told = Arc::clone(&failures);
        let on_failure = Box::new(move |_: &io::Error| {
            told.fetch_add(1, Ordering::SeqCst);
        });
        (FrameWriter::new(Box::new(fake.clone()), on_failure, "test-out", high_water).unwrap(), failures)
    }

    fn answer(text: &str) -> Frame {
        Frame::line(Kind::Answer, text.as_bytes().to_vec())
    }

    /// Sends `frame` from a thread of its own (it may block in its write);
    /// returns once the writer counts it as being written.
    fn send_inline_elsewhere(writer: &Arc<FrameWriter>, frame: Frame) -> std::thread::JoinHandle<()> {
        let sender = {
            let writer = Arc::clone(writer);
            std::thread::spawn(move || writer.send(frame))
        };
        while !lock(&writer.state).writing.any() {
            std::thread::yield_now();
        }
        sender
    }

    /// A thread that only queues, as the reader does.
    fn queueing(writer: &Arc<FrameWriter>, frames: Vec<Frame>) {
        let writer = Arc::clone(writer);
        std::thread::spawn(move || {
            queue_only_on_this_thread();
            frames.into_iter().for_each(|frame| writer.send(frame));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_lone_small_frame_is_written_by_its_sender() {
        let fake = Fake::default();
        let (writer, _) = writer(&fake);
        writer.send(answer("at once"));
        assert_eq!(fake.text(), "at once\n", "written before send returned");
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
    }

    #[test]
    fn the_stream_is_let_go_when_closed_or_broken_though_the_writer_lives_on() {
        // A `Callback` kept past its session holds the writer: the host's
        // pipe or socket must close all the same.
        let held_by = |fake: &Fake| Arc::strong_count(&fake.0) - 1;
        for end in ["drain", "close"] {
            let fake = Fake::default();
            let (writer, _) = writer(&fake);
            writer.send(answer("one"));
            assert_eq!(held_by(&fake), 1);
            match end {
                "drain" => writer.drain(Duration::from_secs(5)),
                _ => writer.close(),
            };
            assert_eq!(held_by(&fake), 0, "after {end}");
            writer.send(answer("dropped"));
            assert_eq!(fake.text(), "one\n");
        }
        let fake = Fake::default();
        fake.0.0.lock().unwrap().broken = true;
        let (writer, failures) = writer(&fake);
        writer.send(answer("fails"));
        let until = Instant::now() + Duration::from_secs(5);
        while held_by(&fake) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((held_by(&fake), failures.load(Ordering::SeqCst)), (0, 1), "let go after a failed write");
        drop(writer);
    }

    #[test]
    fn the_reader_and_async_tasks_never_write_themselves() {
        let fake = Fake::held();
        let (writer, _) = writer(&fake);
        // Neither blocks on the held stream: both queue.
        queueing(&writer, vec![answer("from the reader")]);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let task_writer = Arc::clone(&writer);
        runtime
            .block_on(async move { tokio::spawn(async move { task_writer.send(answer("from a task")) }).await })
            .unwrap();
        fake.release();
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
        assert_eq!(fake.text(), "from the reader\nfrom a task\n");
    }

    /// Waits until `fake` has `text`, for at most 5 s; returns what it has.
    fn written_soon(fake: &Fake, text: &str) -> String {
        let until = Instant::now() + Duration::from_secs(5);
        while fake.text() != text && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        fake.text()
    }

    /// A writer to a fresh stream holding `answers` back; nothing is
    /// written of them for a while.
    fn holding(answers: &[&str]) -> (Fake, Arc<FrameWriter>) {
        let fake = Fake::default();
        let (writer, _) = writer(&fake);
        answers.iter().for_each(|text| writer.send_as(answer(text), Sends::Held));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(fake.text(), "", "nobody was told of held answers");
        (fake, writer)
    }

    #[test]
    fn held_answers_wait_for_the_next_frame_and_go_with_it_in_one_write() {
        let (fake, writer) = holding(&["held 0", "held 1", "held 2"]);
        // A request is never held; a handler thread writes what was held with it.
        writer.send_as(Frame::line(Kind::Request, b"callback".to_vec()), Sends::Held);
        assert_eq!(fake.text(), "held 0\nheld 1\nheld 2\ncallback\n", "written before send returned");
        assert_eq!(fake.write_sizes().len(), 1, "{:?}", fake.write_sizes());
        writer.send_as(answer("held 3"), Sends::Held);
        writer.send_as(answer("last"), Sends::Written);
        assert_eq!(fake.text(), "held 0\nheld 1\nheld 2\ncallback\nheld 3\nlast\n");
        assert_eq!(fake.write_sizes().len(), 2, "{:?}", fake.write_sizes());
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
    }

    #[test]
    fn at_most_one_writes_worth_of_answers_is_held() {
        let fake = Fake::default();
        let (writer, _) = writer(&fake);
        let long = "x".repeat(999);
        for _ in 0..4 {
            writer.send_as(answer(&long), Sends::Held);
        }
        assert_eq!(fake.text(), "", "4000 bytes held");
        // A fifth would pass a write's worth: it is written, with the four.
        writer.send_as(answer(&long), Sends::Held);
        assert_eq!(fake.text(), format!("{long}\n").repeat(5), "written before send returned");
        assert!(fake.write_sizes().iter().all(|&n| n <= GATHER), "{:?}", fake.write_sizes());
        // An answer longer than that is never held.
        let longer = "y".repeat(GATHER);
        writer.send_as(answer(&longer), Sends::Held);
        let expected = format!("{}{longer}\n", format!("{long}\n").repeat(5));
        assert_eq!(written_soon(&fake, &expected), expected, "the writer thread wrote it");
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
    }

    #[test]
    fn held_answers_go_to_the_writer_thread_when_kicked_or_when_a_frame_is_queued() {
        let (fake, writer) = holding(&["held"]);
        writer.kick();
        assert_eq!(written_soon(&fake, "held\n"), "held\n", "the writer thread wrote it");
        writer.send_as(answer("held again"), Sends::Held);
        writer.send_as(answer("queued"), Sends::Queued);
        let expected = "held\nheld again\nqueued\n";
        assert_eq!(written_soon(&fake, expected), expected, "the writer thread wrote both");
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
    }

    #[test]
    fn a_drain_writes_what_was_held() {
        let (fake, writer) = holding(&["held"]);
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
        assert_eq!(fake.text(), "held\n");
    }

    #[test]
    fn frames_are_written_in_order_whole_and_small_ones_together() {
        let fake = Fake::held();
        let (writer, _) = writer(&fake);
        let first = send_inline_elsewhere(&writer, answer("first"));
        // The first sender is held in its write; these queue meanwhile.
        for i in 0..100 {
            writer.send(answer(&format!("frame {i:03}")));
        }
        writer.send(Frame::split(b"{h:".to_vec(), b"body".to_vec(), b"}".to_vec()));
        fake.release();
        first.join().unwrap();
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
        let mut expected = String::from("first\n");
        (0..100).for_each(|i| expected.push_str(&format!("frame {i:03}\n")));
        expected.push_str("{h:body}\n");
        assert_eq!(fake.text(), expected);
        let sizes = fake.write_sizes();
        assert!(sizes.iter().all(|&n| n <= GATHER), "{sizes:?}");
        assert!(sizes.len() <= 3, "the queued frames went in one gathered write: {sizes:?}");
    }

    #[test]
    fn a_large_frame_is_written_by_the_writer_thread_in_pieces() {
        let fake = Fake::default();
        let (writer, _) = writer(&fake);
        writer.send(answer("small"));
        let big = "x".repeat(3 * PIECE);
        writer.send(Frame::split(b"[".to_vec(), big.clone().into_bytes(), b"]".to_vec()));
        writer.send(answer("after"));
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
        assert_eq!(fake.text(), format!("small\n[{big}]\nafter\n"));
        assert!(fake.write_sizes().iter().all(|&n| n <= PIECE));
    }

    #[test]
    fn a_drain_gives_up_on_a_host_that_stopped_reading_and_counts_what_was_lost() {
        let fake = Fake::held();
        let (writer, _) = writer(&fake);
        let stuck = send_inline_elsewhere(&writer, answer("stuck in the write"));
        writer.send(answer("queued"));
        writer.send(Frame::line(Kind::Request, b"log".to_vec()));
        let started = Instant::now();
        let undelivered = writer.drain(Duration::from_millis(50));
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(undelivered, Undelivered { answers: 2, requests: 1 });
        // Closed: later frames are counted, never written.
        writer.send(answer("late"));
        assert_eq!(writer.close(), Undelivered { answers: 3, requests: 1 });
        fake.release();
        stuck.join().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(fake.text(), "stuck in the write\n", "nothing queued is written after the drain gave up");
    }

    #[test]
    fn a_drain_waits_for_as_long_as_the_host_keeps_reading() {
        let fake = Fake::default();
        let slow = SlowHost { inner: fake.clone(), pause: Duration::from_millis(20) };
        let writer = FrameWriter::new(Box::new(slow), Box::new(|_| {}), "test-out", usize::MAX).unwrap();
        // Queued whole: the writer thread writes them one per write.
        let frames = (0..20).map(|i| Frame::line(Kind::Answer, vec![b'a' + i; GATHER])).collect();
        queueing(&writer, frames);
        // Each write takes 20 ms, all of them 400 ms: far past the patience,
        // but the host never stops reading for that long.
        assert_eq!(writer.drain(Duration::from_millis(100)), Undelivered::default());
        assert_eq!(fake.text().len(), 20 * (GATHER + 1));
    }

    /// A host that takes `pause` to read each write.
    struct SlowHost {
        inner: Fake,
        pause: Duration,
    }

    impl Write for SlowHost {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            std::thread::sleep(self.pause);
            self.inner.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_broken_stream_fails_the_writer_once_and_drops_what_comes_after() {
        let fake = Fake::default();
        let (writer, failures) = writer(&fake);
        fake.0.0.lock().unwrap().broken = true;
        writer.send(answer("lost"));
        assert_eq!(failures.load(Ordering::SeqCst), 1);
        writer.send(answer("lost too"));
        assert_eq!(writer.close(), Undelivered { answers: 2, requests: 0 });
        assert_eq!(failures.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_broken_stream_fails_the_writer_thread_too() {
        let fake = Fake::held();
        let (writer, failures) = writer(&fake);
        fake.0.0.lock().unwrap().broken = true;
        queueing(&writer, vec![answer("lost"), answer("lost too")]);
        fake.release();
        let deadline = Instant::now() + Duration::from_secs(5);
        while failures.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline);
            std::thread::yield_now();
        }
        assert_eq!(writer.close(), Undelivered { answers: 2, requests: 0 });
    }

    #[test]
    fn the_reader_waits_while_more_than_the_high_water_mark_is_unwritten() {
        let fake = Fake::held();
        let (writer, _) = writer_with_high_water(&fake, 10);
        queueing(&writer, vec![answer("0123456789abcdef")]);
        let waiting = {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || writer.wait_for_room(|| false, || false, None))
        };
        std::thread::sleep(Duration::from_millis(30));
        assert!(!waiting.is_finished(), "16 bytes unwritten, 10 allowed");
        fake.release();
        waiting.join().unwrap().expect("room, not a stall");
        assert_eq!(writer.drain(Duration::from_secs(5)), Undelivered::default());
    }
}

/// Every interleaving of senders, the writer thread and the drain (see
/// ARCHITECTURE.md).
#[cfg(all(test, scriptling_loom))]
mod model {
    use super::*;

    /// A stream that appends to a shared buffer.
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A writer to a shared buffer, with the high-water mark `high_water`.
    fn shared_writer(high_water: usize) -> (Arc<FrameWriter>, Arc<Mutex<Vec<u8>>>) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let out = Box::new(Shared(Arc::clone(&written)));
        (FrameWriter::new(out, Box::new(|_| {}), "model-out", high_water).unwrap(), written)
    }

    /// Sends `text` as an answer from a thread of its own, releasing
    /// `releases` reserved bytes.
    fn send_from(writer: &Arc<FrameWriter>, text: &'static [u8], releases: usize) -> thread::JoinHandle<()> {
        let writer = Arc::clone(writer);
        thread::spawn(move || writer.send(Frame::line(Kind::Answer, text.to_vec()).releasing(releases)))
    }

    /// Two senders and a drain: every frame is written whole, each
    /// sender's in the order sent, the drain sees them all delivered, and
    /// the writer thread ends.
    #[test]
    fn frames_are_written_whole_in_order_and_all_delivered() {
        crate::support::sync::model(|| {
            let (writer, written) = shared_writer(usize::MAX);
            let other = send_from(&writer, b"b1", 0);
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

    /// A reading thread holds its calls' answers back while a handler
    /// thread sends on another, then kicks (as before it blocks): every
    /// frame is written, the held ones in order, whoever writes them.
    #[test]
    fn held_answers_are_all_written_after_a_kick_whatever_races_them() {
        crate::support::sync::model(|| {
            let (writer, written) = shared_writer(usize::MAX);
            let other = send_from(&writer, b"b", 0);
            writer.send_as(Frame::line(Kind::Answer, b"h1".to_vec()), Sends::Held);
            writer.send_as(Frame::line(Kind::Answer, b"h2".to_vec()), Sends::Held);
            writer.kick();
            other.join().unwrap();
            // Written by the writer thread, unasked: no drain waits here.
            loop {
                let text = String::from_utf8(lock(&written).clone()).unwrap();
                if text.lines().count() == 3 {
                    let h1 = text.find("h1").unwrap();
                    assert!(h1 < text.find("h2").unwrap(), "{text:?}");
                    break;
                }
                thread::yield_now();
            }
            // Written, and booked as delivered once the write returns.
            assert_eq!(writer.drain(Duration::from_secs(60)), Undelivered::default());
        });
    }

    /// A sender racing a close: its frame is written or counted as
    /// undelivered, never lost. (It may be both: a close counts the frames
    /// of a write under way, which may still complete.)
    #[test]
    fn a_frame_sent_during_a_close_is_written_or_counted() {
        crate::support::sync::model(|| {
            let (writer, written) = shared_writer(usize::MAX);
            let sender = send_from(&writer, b"x", 0);
            writer.close();
            sender.join().unwrap();
            let counted = writer.close();
            let written = lock(&written).len();
            assert!(written > 0 || counted.answers == 1, "written {written}, counted {counted:?}");
        });
    }

    /// The reader waits while requests' reserved bytes fill the queue; an
    /// answer that releases some and a notification's end that releases the
    /// rest, on other threads at any moment, always wake it (no lost
    /// wake-up), and the answer is delivered.
    #[test]
    fn releasing_room_wakes_the_waiting_reader() {
        crate::support::sync::model(|| {
            // Either release alone leaves more than 3 bytes reserved.
            let (writer, written) = shared_writer(3);
            writer.reserve(10);
            let answer = send_from(&writer, b"a", 6);
            let notification = {
                let writer = Arc::clone(&writer);
                thread::spawn(move || writer.release(4))
            };
            writer.wait_for_room(|| false, || false, None).expect("no patience: never a stall");
            answer.join().unwrap();
            notification.join().unwrap();
            assert_eq!(writer.drain(Duration::from_secs(60)), Undelivered::default());
            assert_eq!(*lock(&written), b"a\n");
        });
    }
}
