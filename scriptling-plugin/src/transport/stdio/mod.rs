//! The stdio transport: one host, over stdin and stdout.
//!
//! ```text
//! stdin ─► reading pool thread ─► decode ───┬─ answer to our request ─► its waiter
//!            │ hands the reading on         ├─ plugin.shutdown ─► the session
//!            ▼ to the next pool thread,     └─ request ─► run right here (sync)
//!              then runs the request                      or as a task (async)
//! stdout ◄─ FrameWriter (queued in order, coalesced) ◄─ answers, callbacks, logs
//! ```
//!
//! Reading is a job on the sync pool that one thread at a time holds. The
//! thread that reads a request runs it itself, lending the reading to the
//! pool meanwhile: if the request is quick (most are), the thread takes the
//! reading back and reads on, as a single-threaded server would; if it is
//! slow, another pool thread takes the reading over after a short grace
//! (50 µs, at most a millisecond when no thread is spinning), and at once if
//! the request waits on the host. So a request never moves between threads,
//! and a slow or waiting handler never holds up the requests behind it or
//! the answers its own callbacks wait for. Reading is the one job the pool
//! never refuses: it gets a thread even past the limit.
//!
//! Requests the host sent together (several lines already read) are
//! answered together: their answers are held back until the input runs dry
//! and leave in one write. A lone request's answer leaves the moment it is
//! ready, and the reader then polls stdin briefly before sleeping on it
//! (`Plugin::input_spin`), so a host calling in a loop finds it awake.
//!
//! The session ends on `plugin.shutdown`, on stdin's end, or on the first
//! SIGINT or SIGTERM (for plugins served with `run` or `serve_stdio`):
//! requests are refused from then on, in-flight calls finish (for up to the
//! shutdown grace), every live object is destroyed (its `#[del]` hook and
//! `Drop` run, and their log records reach the host), `plugin.shutdown` is
//! answered, and everything written is flushed before serving returns. A
//! second signal exits at once.

pub(crate) mod guard;
pub(crate) mod lines;
pub(crate) mod writer;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use crate::call::context;
use crate::call::link::{HostChannel, Link};
use crate::call::objects::ObjectTable;
use crate::call::outgoing::Outgoing;
use crate::exports::core::Core;
use crate::exports::error::ServeError;
use crate::rpc::{self, ErrorCode, Frame as Parsed, Id, Message, Method, RpcError};
use crate::runtime::batch::Batch;
use crate::runtime::dispatch::{Bytes, Dispatcher, Done, Incoming, Outcome};
use crate::runtime::pool::Job;
use crate::support::lock;
use crate::transport::signals::{Signal, Signals};
use crate::transport::stdio::lines::{Line, LineReader};
use crate::transport::stdio::writer::{Frame, FrameWriter, Hold};

/// Lines at least this long are moved out of the reader whole (no copy, and
/// the buffer that held one is not kept) and decoded after the reading is
/// lent.
const MOVE_LINES_FROM: usize = 64 * 1024;

/// Why the session ends.
enum Control {
    /// `plugin.shutdown`, with the completions that answer it.
    Shutdown(Vec<Done>),
    /// SIGINT or SIGTERM: a shutdown nobody asked over the wire.
    Signal(Signal),
    /// The input ended.
    Eof,
}

/// One stdio session: the reader runs from [`Session::start`];
/// [`Session::finish`] waits for its end on the runtime and cleans up.
pub(crate) struct Session {
    dispatcher: Arc<Dispatcher>,
    writer: Arc<FrameWriter>,
    outgoing: Arc<Outgoing>,
    control: mpsc::UnboundedReceiver<Control>,
    /// For signals, which end the session too.
    control_tx: mpsc::UnboundedSender<Control>,
}

impl Session {
    /// Starts reading `input`; answers go to `output`. Calls run inside
    /// `runtime` once it is set (the handshake is answered before that).
    ///
    /// With `first_here`, the first line is read and served on the calling
    /// thread before the reading moves to the pool (pass it only when a line
    /// is already waiting): cheap answers to it need no thread.
    ///
    /// `spin` is how long the reading polls the input before it sleeps on
    /// it (see [`spin_for_input`]): `Plugin::input_spin` for the process's
    /// stdin, zero for anything else, which cannot be polled.
    pub(crate) fn start<R, W>(
        core: Arc<Core>,
        lines: LineReader<R>,
        output: W,
        runtime: Arc<OnceLock<Handle>>,
        first_here: bool,
        spin: Duration,
    ) -> Result<Session, ServeError>
    where
        R: Read + Send + 'static,
        W: Write + Send + 'static,
    {
        let (control_tx, control) = mpsc::unbounded_channel();
        let writer = Arc::new(FrameWriter::new(Box::new(output)));
        let outgoing = Outgoing::new();
        let host = HostChannel { outgoing: Arc::clone(&outgoing), sink: writer.clone() };
        let classes = core.class_order.iter().map(|c| Arc::clone(&c.info));
        let link =
            Link::new(Arc::clone(&core.library), ObjectTable::sequential(), classes, Some(host), Arc::clone(&runtime));
        let dispatcher = Dispatcher::new(core, Arc::new(link), runtime);
        let reader = Arc::new(Reader {
            dispatcher: Arc::clone(&dispatcher),
            writer: Arc::clone(&writer),
            outgoing: Arc::clone(&outgoing),
            control: control_tx.clone(),
            spin,
        });
        let reading = Reading { lines, buf: Vec::new() };
        let job = ReadJob { reader, reading: Arc::new(Mutex::new(reading)) };
        let session = Session { dispatcher, writer, outgoing, control, control_tx };
        if first_here && matches!(job.turn(false, &mut None, None), Turn::Ended) {
            let _ = session.control_tx.send(Control::Eof);
            return Ok(session);
        }
        session.dispatcher.submit(Box::new(job));
        Ok(session)
    }

    /// What the session's calls reach (for the test host's object count).
    #[cfg(feature = "testing")]
    pub(crate) fn link(&self) -> Arc<Link> {
        Arc::clone(self.dispatcher.link())
    }

    /// Serves until the session ends (see the module docs). With
    /// `signals`, the first SIGINT or SIGTERM ends it too.
    pub(crate) async fn finish(mut self, signals: Option<Signals>) -> Result<(), ServeError> {
        if let Some(signals) = signals {
            let control = self.control_tx.clone();
            signals.deliver(move |signal| {
                let _ = control.send(Control::Signal(signal));
            });
        }
        let why = self.control.recv().await.unwrap_or(Control::Eof);
        if let Control::Signal(signal) = why {
            eprintln!("scriptling-plugin: {signal} received, shutting down (send it again to exit at once)");
        }
        let dispatcher = &self.dispatcher;
        let grace = dispatcher.core().options.shutdown_grace;
        dispatcher.begin_closing();
        if matches!(why, Control::Eof) {
            // Nobody can answer callbacks any more: fail them so their calls end.
            self.outgoing.close("the host closed the connection");
        }
        if !dispatcher.wait_idle(grace).await {
            eprintln!(
                "scriptling-plugin: {} call(s) still running after {grace:?}; exiting without them",
                dispatcher.in_flight()
            );
        }
        // The host never destroys objects itself: destroy every one now,
        // while the host still serves our log records.
        let remaining = dispatcher.link().objects.drain();
        if !remaining.is_empty() {
            let (released_tx, released) = oneshot::channel();
            let releasing = Arc::clone(dispatcher);
            // The hooks are plugin code: run them off the runtime's threads.
            drop(tokio::task::spawn_blocking(move || {
                let then = Box::new(move || {
                    let _ = released_tx.send(());
                });
                releasing.release(remaining, "plugin.shutdown".into(), None, then);
            }));
            let _ = released.await;
        }
        if let Control::Shutdown(answers) = why {
            for answer in answers {
                answer.send(Ok(b"null".to_vec()));
            }
        }
        self.outgoing.close("the plugin is shutting down");
        let writer = Arc::clone(&self.writer);
        if !tokio::task::spawn_blocking(move || writer.drain(grace)).await.unwrap_or(false) {
            eprintln!("scriptling-plugin: the host did not read the last answers within {grace:?}");
        }
        Ok(())
    }
}

/// What the reading needs, shared by every turn of it.
struct Reader {
    dispatcher: Arc<Dispatcher>,
    writer: Arc<FrameWriter>,
    outgoing: Arc<Outgoing>,
    control: mpsc::UnboundedSender<Control>,
    /// How long to poll stdin before sleeping on it (zero: not stdin).
    spin: Duration,
}

/// The reading of stdin, as a pool job: see the module docs. Only one
/// exists at a time (in a thread's hands, lent, or queued).
struct ReadJob<R> {
    reader: Arc<Reader>,
    reading: Arc<Mutex<Reading<R>>>,
}

/// The input and the buffer its lines are read into.
struct Reading<R> {
    lines: LineReader<R>,
    buf: Vec<u8>,
}

/// Whether a line (or the end) is waiting on stdin already, so reading it
/// will not block (bar a host that stops mid-line).
pub(crate) fn input_waiting() -> bool {
    #[cfg(unix)]
    {
        let mut fd = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, a zero timeout.
        unsafe { libc::poll(&mut fd, 1, 0) == 1 }
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Polls stdin for up to `spin`, returning as soon as input is waiting, so
/// the blocking read that follows finds it without sleeping.
///
/// A host that calls in a loop sends its next request microseconds after
/// reading an answer, and waking a thread that sleeps on a pipe costs about
/// 3 µs (more under virtualisation): a third of a round trip. Polling for a
/// little while first keeps the thread running for that request, at the
/// price of up to `spin` of CPU time after each answer that no request
/// follows (see `Plugin::input_spin`).
fn spin_for_input(spin: Duration) {
    // Elsewhere stdin cannot be polled: sleep on it at once.
    if spin.is_zero() || cfg!(not(unix)) {
        return;
    }
    let until = Instant::now() + spin;
    while !input_waiting() && Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Answers the host's handshake at once if it is the first line and has
/// arrived whole already, before the session exists: the host's wait for a
/// starting plugin then ends before the plugin sets up the rest (signals,
/// the session, its threads). Returns whether it did; anything else is
/// left in `lines` for the session. The answer is written to `out`, the
/// protocol stream, before anything else is.
pub(crate) fn answer_early_handshake<R: Read>(core: &Core, lines: &mut LineReader<R>, out: &mut impl Write) -> bool {
    let Ok(Some(line)) = lines.peek_line() else { return false };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // A line over the limit is for the session to refuse.
    if line.len() > core.options.max_frame_bytes {
        return false;
    }
    let Parsed::Single(Message::Request(request)) = rpc::parse_frame_decoding(line, 1) else { return false };
    let Some(id) = request.id.filter(|_| request.method == Method::Handshake.name()) else { return false };
    let mut answer = Vec::with_capacity(core.handshake.len() + 64);
    rpc::write_result(&mut answer, id, &core.handshake);
    answer.push(b'\n');
    // Answered, even if the write fails part-way: the session must not
    // answer it again (a failed stream is the session's to notice).
    let _ = out.write_all(&answer).and_then(|()| out.flush());
    lines.consume_line();
    true
}

/// What one turn of the reading did.
enum Turn {
    /// Served a line (or skipped a bad one); the reading goes on here.
    Served,
    /// A request it ran was slow: another thread reads now.
    HandedOn,
    /// The input ended.
    Ended,
}

impl<R: Read + Send + 'static> ReadJob<R> {
    /// Reads one line and serves it. With `lend`, a request runs right here
    /// while the reading is lent to the pool (as `spare`, if this thread
    /// has one from lending it before); without, requests go to the pool and
    /// only cheap answers (the handshake) are written from here. With
    /// `hold`, answers are held back while more lines are read already.
    fn turn(&self, lend: bool, spare: &mut Option<Box<dyn Job>>, hold: Option<&Hold<'_>>) -> Turn {
        let reader = &self.reader;
        let mut reading = lock(&self.reading);
        let Reading { lines, buf } = &mut *reading;
        if let Err(turn) = self.next_line(lines, buf, lend, hold) {
            return turn;
        }
        // A small line is decoded in one pass straight from the buffer: it
        // is neither copied nor read twice.
        let max_batch = reader.dispatcher.core().options.max_batch_len;
        let decoded = if buf.len() < MOVE_LINES_FROM {
            match rpc::parse_frame_decoding(buf, max_batch) {
                // Answers to our own requests, and lines that are not
                // requests, are dealt with here; the reading goes on.
                Parsed::Single(Message::Response(response)) => return reader.route(&response),
                Parsed::Single(Message::Invalid(id, error)) => return reader.error(id, &error),
                Parsed::Single(Message::Request(request)) => {
                    let id = request.id.map(ToOwned::to_owned);
                    Incoming::decoded(request).map(|incoming| (incoming, id))
                }
                Parsed::Batch(_) => None,
            }
        } else {
            None
        };
        let Some((incoming, id)) = decoded else {
            // A large line (its params then decoded after the reading is
            // lent, so the requests behind it are read meanwhile), a batch,
            // or params that are not call params (for the method to
            // refuse): served from a frame of their own.
            let frame = take_line(buf);
            drop(reading);
            return self.serve_frame(frame, lend, spare);
        };
        drop(reading);
        self.serve(incoming, id, lend, spare)
    }

    /// Reads the next line into `buf`, first writing what was held back
    /// and waiting for room if the input has run dry (see the module
    /// docs); `Err` says how the turn ends instead (a line over the limit
    /// answered, the input's end).
    fn next_line(
        &self,
        lines: &mut LineReader<R>,
        buf: &mut Vec<u8>,
        lend: bool,
        hold: Option<&Hold<'_>>,
    ) -> Result<(), Turn> {
        let reader = &self.reader;
        let buffered = lines.has_line();
        if !buffered {
            // The input ran dry: answer what was held before waiting.
            reader.writer.flush();
        }
        // A host that reads our answers slowly gets its requests read slowly.
        reader.writer.wait_for_room();
        if !buffered && lend {
            spin_for_input(reader.spin);
        }
        // Blocked on the host's input, this thread takes no place in the
        // pool (and a pool at its limit counts it as waiting on the host).
        let next = if buffered { lines.next(buf) } else { context::waiting_on_host(|| lines.next(buf)) };
        match next {
            Ok(Line::Frame) => {
                if let Some(hold) = hold {
                    hold.set_input_waiting(lines.has_line());
                }
                Ok(())
            }
            Ok(Line::TooLong(len)) => {
                // What the skipped line grew the buffer to is not kept.
                *buf = Vec::new();
                let max = reader.dispatcher.core().options.max_frame_bytes;
                let message =
                    format!("invalid request: the line of at least {len} bytes exceeds the limit of {max} bytes");
                Err(reader.error(None, &RpcError::new(ErrorCode::InvalidRequest, message)))
            }
            Ok(Line::Eof) => Err(Turn::Ended),
            Err(e) => {
                eprintln!("scriptling-plugin: reading from the host failed: {e}");
                Err(Turn::Ended)
            }
        }
    }

    /// Serves a frame parsed the general way: its requests' params are
    /// decoded where they run.
    fn serve_frame(&self, frame: Bytes, lend: bool, spare: &mut Option<Box<dyn Job>>) -> Turn {
        let reader = &self.reader;
        let max_batch = reader.dispatcher.core().options.max_batch_len;
        let (incoming, id) = match rpc::parse_frame(frame.as_ref(), max_batch) {
            Parsed::Single(Message::Request(request)) => {
                let id = request.id.map(ToOwned::to_owned);
                (Incoming::new(&frame, request), id)
            }
            Parsed::Single(Message::Response(response)) => return reader.route(&response),
            Parsed::Single(Message::Invalid(id, error)) => return reader.error(id, &error),
            Parsed::Batch(messages) => {
                reader.batch(&frame, messages);
                return Turn::Served;
            }
        };
        // The request holds the frame now, and lets go of it once its
        // params are decoded: a large payload is not kept while its call runs.
        drop(frame);
        self.serve(incoming, id, lend, spare)
    }

    /// Runs one request: here with `lend` (see [`turn`](Self::turn)),
    /// otherwise on the pool.
    fn serve(&self, incoming: Incoming, id: Option<Id>, lend: bool, spare: &mut Option<Box<dyn Job>>) -> Turn {
        let reader = &self.reader;
        let done = reader.answer(id);
        if incoming.method == Method::Shutdown {
            reader.shutdown(vec![done]);
        } else if !lend || reader.dispatcher.saturated() {
            // Every other thread waits on the host, at the limit: this one
            // keeps reading, and the request goes to the pool, which serves
            // async handlers and refuses sync ones at once.
            reader.dispatcher.dispatch(incoming, None, done);
        } else {
            // In flight from now, so an EOF read by another thread cannot
            // end the session before it is dispatched.
            let held = reader.dispatcher.hold();
            let lent = spare.take().unwrap_or_else(|| {
                Box::new(ReadJob { reader: Arc::clone(reader), reading: Arc::clone(&self.reading) })
            });
            reader.dispatcher.defer(lent);
            reader.dispatcher.dispatch_here(incoming, None, done, held);
            match reader.dispatcher.reclaim() {
                // Kept for lending the reading again.
                Some(lent) => *spare = Some(lent),
                None => return Turn::HandedOn,
            }
        }
        Turn::Served
    }
}

impl<R: Read + Send + 'static> Job for ReadJob<R> {
    fn run(self: Box<Self>) {
        // What a thread that ran a slow request held back leaves now.
        self.reader.writer.flush();
        let hold = self.reader.writer.hold();
        let mut spare = None;
        loop {
            match self.turn(true, &mut spare, Some(&hold)) {
                Turn::Served => {}
                Turn::HandedOn => return,
                Turn::Ended => break,
            }
        }
        let _ = self.reader.control.send(Control::Eof);
    }

    fn refuse(self: Box<Self>, _reason: String) {
        unreachable!("the reading is essential: the pool never refuses it")
    }

    fn essential(&self) -> bool {
        true
    }
}

/// The line in `buf`, as a frame requests can keep: a large one is moved
/// out whole, a small one copied (and `buf` kept for the next line).
fn take_line(buf: &mut Vec<u8>) -> Bytes {
    if buf.len() >= MOVE_LINES_FROM {
        Bytes::Whole(Arc::new(std::mem::take(buf)))
    } else {
        Bytes::Copied(Arc::from(&buf[..]))
    }
}

impl Reader {
    /// Runs a batch's requests concurrently; one array answers them all.
    fn batch(&self, frame: &Bytes, messages: Vec<Message<'_>>) {
        let writer = Arc::clone(&self.writer);
        let batch = Batch::new(Box::new(move |array| {
            if let Some(array) = array {
                writer.send_answer(Frame::Line(array));
            }
        }));
        let mut shutdowns = Vec::new();
        for message in messages {
            match message {
                Message::Request(request) => {
                    let done = batch.element(request.id.map(ToOwned::to_owned));
                    let incoming = Incoming::new(frame, request);
                    if incoming.method == Method::Shutdown {
                        shutdowns.push(done);
                    } else {
                        self.dispatcher.dispatch(incoming, None, done);
                    }
                }
                Message::Response(response) => {
                    self.route(&response);
                }
                Message::Invalid(id, error) => batch.element(Some(id_or_null(id))).send(Err(error)),
            }
        }
        batch.seal();
        if !shutdowns.is_empty() {
            self.shutdown(shutdowns);
        }
    }

    /// Ends the session; `answers` are completed once it has cleaned up.
    fn shutdown(&self, answers: Vec<Done>) {
        self.dispatcher.begin_closing();
        let _ = self.control.send(Control::Shutdown(answers));
    }

    /// Hands an answer to one of our own requests to its waiter.
    fn route(&self, response: &rpc::Response<'_>) -> Turn {
        if !self.outgoing.complete(response.id, response.outcome.clone()) {
            eprintln!(
                "scriptling-plugin: ignoring a response with id {} that no request is waiting for",
                response.id.map_or("null", RawValue::get)
            );
        }
        Turn::Served
    }

    /// Answers a line that is not a valid message.
    fn error(&self, id: Option<&RawValue>, error: &RpcError) -> Turn {
        let mut line = Vec::new();
        rpc::write_error(&mut line, id, error);
        self.writer.send(Frame::Line(line));
        Turn::Served
    }

    /// Writes the answer to request `id`; a notification's is dropped.
    fn answer(&self, id: Option<Id>) -> Done {
        let Some(id) = id else { return Done::nobody() };
        let writer = Arc::clone(&self.writer);
        Done::new(move |outcome: Outcome| {
            writer.send_answer(match outcome {
                // Written from where it was serialised: no copy of a large result.
                Ok(result) if result.len() >= MOVE_LINES_FROM => {
                    Frame::Parts(rpc::result_head(&id), result, rpc::RESULT_TAIL)
                }
                Ok(result) => {
                    // One buffer, newline included: one write for a lone answer.
                    let mut line = Vec::new();
                    rpc::write_result(&mut line, &id, &result);
                    Frame::Line(line)
                }
                Err(error) => {
                    let mut line = Vec::new();
                    rpc::write_error(&mut line, Some(&id), &error);
                    Frame::Line(line)
                }
            });
        })
    }
}

fn id_or_null(id: Option<&RawValue>) -> Id {
    id.map_or_else(|| RawValue::from_string("null".to_owned()).expect("null is JSON"), ToOwned::to_owned)
}
