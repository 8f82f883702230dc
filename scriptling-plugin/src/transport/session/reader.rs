//! [`Reader`]: the reading of the host's lines, which routes each: answers
//! to the plugin's own requests to their waiters, requests to the
//! dispatcher, `plugin.shutdown` and the input's end to the session.
//!
//! A call on a short line is parsed in one pass, params and all
//! (`rpc::parse_line`): the quick calls the reading thread runs itself then
//! cost no second pass and no copy of the line. A longer line's params stay
//! raw, decoded where the call runs (on the pool, for calls read behind
//! others: decoding large params while reading made the reader the
//! bottleneck of pipelined calls), in a copy of the line; a line of
//! [`MOVE_LINES_FROM`] or more is moved out of the read buffer whole rather
//! than copied.
//!
//! A call read with nothing behind it in the buffer runs on the thread that
//! read it, as the pool's guest, when the pool would start it at once: the
//! host calling one function after another then costs no thread wake-up
//! (ARCHITECTURE.md, "Calls run where they are read"). Meanwhile the
//! reading waits in the session's [`Baton`], and the session's other
//! reading thread takes it when the call waits on the host or has run for
//! the pool's stall time: a handler never holds up the reading of the
//! host's answers, nor, beyond that time, of its next requests. Calls read
//! behind one another run there too, in turn, while the last call run
//! there was quick (`Plugin::quick_calls`), their answers held back to go
//! out together ([`Sends::Held`]); after a longer call they go to the
//! pool, to run side by side.
//!
//! A call run on its reading thread that blocks on a callback takes the
//! reading back and reads the answer itself ([`lent`]), so nobody is woken
//! to read it and nobody to wake the call; where the input's wait cannot
//! keep the callback's deadline (a Windows pipe) it waits as before.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak, mpsc};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use crate::call::lent::{self, Held, Lends};
use crate::call::outgoing::{Outgoing, Routed};
use crate::rpc::{self, ErrorCode, Frame as Parsed, Id, Message, Method, RpcError};
use crate::runtime::batch::Batch;
use crate::runtime::dispatch::{Bytes, Dispatcher, Incoming};
use crate::runtime::done::{Done, Outcome};
use crate::runtime::pool::{self, Job};
use crate::support::timer;
use crate::sys::{self, Readable, Stop};
use crate::transport::session::baton::{Baton, Check};
use crate::transport::session::input::{Input, LineUnfinished};
use crate::transport::session::lines::{Line, LineReader};
use crate::transport::session::writer::{self, Frame, FrameWriter, Kind, NoProgress, Sends};
use crate::transport::session::{Control, Gate};

/// Lines at least this long are moved out of the reader whole (no copy, and
/// the buffer that held one is not kept); results at least this long are
/// written from where they were serialised.
const MOVE_LINES_FROM: usize = 64 * 1024;
/// Before a line at least this long is served, freed memory is handed back
/// to the system: glibc's heaps keep up to this much free at their tops
/// (`sys::tune_allocator`), and a payload this long gets mapped buffers of
/// its own on top of that.
const RETURN_FREED_BEFORE: usize = 4 << 20;

/// What the reader routes lines to.
pub(crate) struct Routes {
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) writer: Arc<FrameWriter>,
    pub(crate) outgoing: Arc<Outgoing>,
    pub(crate) control: mpsc::Sender<Control>,
    pub(crate) stop: Arc<Stop>,
    /// The token to present before anything but `hello` and `ping` is served.
    pub(crate) gate: Option<Arc<Gate>>,
    /// Who is at the other end, for messages (`None`: the stdio host).
    pub(crate) peer: Option<Arc<str>>,
    /// Set when a `hello` presented a wrong token: the reading ends after
    /// the line that held it (one guess per connection).
    pub(crate) wrong_token: AtomicBool,
}

/// The reading thread's state.
pub(crate) struct Reader<R> {
    pub(crate) lines: LineReader<Input<R>>,
    pub(crate) buf: Vec<u8>,
    pub(crate) routes: Arc<Routes>,
    /// How long the host may read none of its answers, while the queue is
    /// full, before the session ends (`None`: for ever).
    pub(crate) patience: Option<Duration>,
    /// Dropped with the reading: then nobody reads the input any more.
    pub(crate) _ended: mpsc::Sender<()>,
    /// When this reading's thread answered the call it ran, until the next
    /// line comes.
    pub(crate) answered: Option<Instant>,
    /// The host sent its last request within the input's spin of the
    /// answer before it: after an answer, the input is polled for the next.
    pub(crate) quick_host: bool,
    /// The host's last answer to a request of the plugin's that a call read
    /// for itself came within the input's spin of the wait's start: the
    /// input is polled for the next such answer (a script's callback,
    /// which the real host runs in ~100 µs, is not polled for).
    pub(crate) quick_answers: bool,
    /// The last call run on a reading thread ended within `quick_limit`:
    /// calls read behind others run on the reading thread too.
    pub(crate) quick_calls: bool,
    /// `Plugin::quick_calls`.
    pub(crate) quick_limit: Duration,
    /// A call run here held its answer back: it is handed on before the
    /// input may block.
    pub(crate) holds: bool,
}

/// What reading one line came to.
enum Step {
    /// A call, for the reading thread to run or to submit to the pool.
    Call(Box<dyn Job>),
    /// A line read and routed, or skipped.
    Read,
    /// The reading has ended (the session was told, unless it stopped it).
    End,
}

/// What a request line made.
enum Served {
    /// A call, for the reading thread to run or to submit to the pool.
    Call(Box<dyn Job>),
    /// An answer to one of the plugin's own requests.
    Answer,
    /// Anything else (answered already, or handed on).
    Other,
}

/// How long a call reading for its callback's answer waits for input at a
/// time before it looks whether the answer came another way: the session
/// ending fails the callback with no line read (`Outgoing::close`), and
/// nothing else would wake the wait.
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// The most threads that take turns at a session's reading (see [`Baton`]).
const READING_THREADS: usize = 3;

/// A session's reading, shared by its reading threads (see the module docs
/// and [`Baton`]).
pub(crate) struct Reading<R> {
    /// Boxed: the reading changes hands on every call run where it is read,
    /// and a box moves as a pointer (the state itself would be copied, some
    /// hundreds of bytes, three times a call).
    baton: Baton<Box<Reader<R>>>,
    thread_name: &'static str,
    /// The input's waits keep deadlines: a call waiting on a callback may
    /// read its answer (see [`lent`]).
    lendable: bool,
    /// Where the requests whose answers it reads are registered.
    outgoing: Arc<Outgoing>,
    /// Where its calls' answers go.
    writer: Arc<FrameWriter>,
}

impl<R: Readable + 'static> Reading<R> {
    /// Starts reading with `reader` on a thread named `thread_name` (the
    /// others, when needed, are named so too).
    pub(crate) fn start(mut reader: Reader<R>, thread_name: &'static str) -> std::io::Result<Arc<Self>> {
        let lendable = reader.lines.source_mut().keeps_deadlines();
        let outgoing = Arc::clone(&reader.routes.outgoing);
        let writer = Arc::clone(&reader.routes.writer);
        let reading = Arc::new(Reading { baton: Baton::new(READING_THREADS), thread_name, lendable, outgoing, writer });
        // The plugin awaits the host's answer: a reading that is down is
        // wanted, whichever thread or task awaits (not only the call that
        // put it down).
        let this: Weak<Self> = Arc::downgrade(&reading);
        reader.routes.outgoing.on_awaiting(Box::new(move || {
            if let Some(reading) = this.upgrade() {
                reading.baton.want();
            }
        }));
        let first = Arc::clone(&reading);
        std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || first.serve(Some(Box::new(reader)), false))?;
        Ok(reading)
    }

    /// Ends the reading (the session is ending): a reading put down by a
    /// call still running is dropped, and the waiting thread leaves.
    pub(crate) fn end(&self) {
        drop(self.baton.end());
    }

    /// The body of every reading thread: read, and run here the calls read
    /// with nothing behind them, and those read behind others while calls
    /// are quick, for as long as this thread holds the reading; then wait
    /// for a turn. A thread taking a turn takes over from a call that
    /// waits or runs long: the calls read behind others go to the pool
    /// until one run here is quick again.
    /// A `fresh` thread was counted as waiting when it was reserved.
    fn serve(self: Arc<Self>, mut held: Option<Box<Reader<R>>>, mut fresh: bool) {
        writer::queue_only_on_this_thread();
        loop {
            let mut reader = match held.take() {
                Some(reader) => reader,
                None => match self.baton.take_turn(std::mem::take(&mut fresh)) {
                    Some(mut reader) => {
                        reader.quick_calls = false;
                        reader
                    }
                    None => return,
                },
            };
            // A thread taking over may be there for the host's answer; one
            // that has just answered may expect a quick host's next request.
            let soon = reader.routes.outgoing.awaiting() || (reader.answered.is_some() && reader.quick_host);
            reader.lines.source_mut().expect_soon(soon);
            let Some((job, behind)) = reader.read() else {
                drop(reader);
                return self.end();
            };
            let Some(guest) = reader.routes.dispatcher.pool().guest() else {
                reader.routes.dispatcher.pool().submit(job);
                held = Some(reader);
                continue;
            };
            // A thread waits to take the reading before it is put down.
            if self.baton.reserve_thread() {
                self.start_another();
            }
            // One clock read: when the call starts, and the reading goes down.
            let started = Instant::now();
            if let Some(reader) = self.put_down(reader, started) {
                // Nobody would take it (none could start, or it ended).
                drop(guest);
                reader.routes.dispatcher.pool().submit(job);
                held = Some(reader);
                continue;
            }
            let lent = self.lendable.then(|| Arc::clone(&self) as Arc<dyn Lends>);
            writer::time_next_answer();
            // The answers of calls read together are written together.
            let sends = if behind { Sends::Held } else { Sends::Written };
            lent::lending(lent, || writer::sending(sends, || guest.run(job)));
            let answered = writer::answer_sent_at().unwrap_or_else(Instant::now);
            held = self.baton.pick_up();
            match &mut held {
                Some(reader) => {
                    reader.quick_calls = answered.saturating_duration_since(started) < reader.quick_limit;
                    // A line read behind the call says the host was quick
                    // already: no clock to read for it.
                    reader.answered = (!behind).then_some(answered);
                    reader.holds |= behind;
                }
                // Its holder may be blocked reading: what this call held
                // back goes to the writer thread.
                None => self.writer.kick(),
            }
        }
    }

    /// Puts the reading down at `now` (see [`Baton::put_down_at`]), wanted at once if
    /// requests await the host's answer, and watched for the stall time;
    /// hands it back if it cannot be.
    fn put_down(self: &Arc<Self>, reader: Box<Reader<R>>, now: Instant) -> Option<Box<Reader<R>>> {
        match self.baton.put_down_at(reader, now, |reader| reader.routes.outgoing.awaiting()) {
            Ok(true) => self.watch(pool::STALL),
            Ok(false) => {}
            Err(reader) => return Some(reader),
        }
        None
    }

    /// Checks, after `delay`, whether the reading has been down for the
    /// stall time (one check is due at a time, set when it is put down).
    fn watch(self: &Arc<Self>, delay: Duration) {
        let this = Arc::clone(self);
        timer::after(delay, move || match this.baton.check(pool::STALL) {
            Check::Held => {}
            Check::Again(delay) => this.watch(delay),
            // The call runs long: what the calls before it held back is
            // not held up by it any longer.
            Check::Overdue => this.writer.kick(),
        })
        .detach();
    }

    /// Starts the reading thread [`Baton::reserve_thread`] counted.
    fn start_another(self: &Arc<Self>) {
        let another = Arc::clone(self);
        let spawned =
            std::thread::Builder::new().name(self.thread_name.into()).spawn(move || another.serve(None, true));
        if let Err(e) = spawned {
            eprintln!(
                "scriptling-plugin: cannot start a thread to read while a call runs: {e}; calls run on the pool \
                 when no reading thread waits"
            );
            self.baton.start_failed();
        }
    }
}

impl<R: Readable + 'static> Lends for Reading<R> {
    fn reads_for(&self, outgoing: &Arc<Outgoing>) -> bool {
        Arc::ptr_eq(&self.outgoing, outgoing)
    }

    fn take_back(self: Arc<Self>) -> Option<Box<dyn Held>> {
        let reader = self.baton.take_back()?;
        Some(Box::new(HeldReading { reading: self, reader: Some(reader) }))
    }
}

/// The reading, taken back by the thread whose call waits on a callback;
/// put down again when dropped.
struct HeldReading<R: Readable + 'static> {
    reading: Arc<Reading<R>>,
    /// `None` once the reading has ended.
    reader: Option<Box<Reader<R>>>,
}

impl<R: Readable + 'static> Held for HeldReading<R> {
    fn read_until(&mut self, answered: &mut dyn FnMut() -> bool, until: Instant) {
        let Some(reader) = self.reader.as_mut() else { return };
        // A full pipe must not stop the reading: this thread queues.
        if !writer::sending(Sends::Queued, || reader.read_while_waiting(answered, until)) {
            drop(self.reader.take());
            self.reading.end();
        }
    }
}

impl<R: Readable + 'static> Drop for HeldReading<R> {
    fn drop(&mut self) {
        // A thread waited when it was taken back, and waits still (one
        // leaves only by taking a reading that is down): down it goes,
        // unless the reading ended meanwhile (then it is dropped).
        if let Some(reader) = self.reader.take() {
            drop(self.reading.put_down(reader, Instant::now()));
        }
    }
}

impl<R: Readable> Reader<R> {
    /// Reads and routes lines until a call is read with nothing behind it
    /// in the buffer, or any call while calls are quick (returned, and
    /// whether lines are behind it: the caller runs it or submits it), or
    /// the reading ends (`None`; the session is told unless it stopped it).
    /// Before it may block on the input, answers held back go to the
    /// writer thread.
    fn read(&mut self) -> Option<(Box<dyn Job>, bool)> {
        let routes = Arc::clone(&self.routes);
        loop {
            if self.holds && !self.lines.has_line_buffered() {
                self.holds = false;
                routes.writer.kick();
            }
            match self.step(&routes) {
                Step::Call(job) => {
                    let behind = self.lines.has_line_buffered();
                    if self.quick_calls || !behind {
                        return Some((job, behind));
                    }
                    routes.dispatcher.pool().submit(job);
                    self.lines.source_mut().expect_soon(routes.outgoing.awaiting());
                }
                Step::Read => {}
                Step::End => return None,
            }
        }
    }

    /// Reads and routes lines, every call to the pool (this thread runs
    /// one already, which waits on the host), until `answered()` or
    /// `until`, never blocking past either: it reads the source only when
    /// the buffer is empty and the source has bytes, and routes only whole
    /// lines buffered. It leaves the rest to the reading threads, with
    /// their waits, and returns, when a line is begun but not whole, or
    /// when answers wait unwritten past the high-water mark (the host reads
    /// slowly). `false` if the reading ended.
    fn read_while_waiting(&mut self, answered: &mut dyn FnMut() -> bool, until: Instant) -> bool {
        let routes = Arc::clone(&self.routes);
        let started = Instant::now();
        self.lines.source_mut().expect_soon(self.quick_answers);
        loop {
            if answered() {
                self.quick_answers = started.elapsed() < self.lines.source_mut().spin_time();
                return true;
            }
            if Instant::now() >= until {
                return true;
            }
            if self.lines.has_line_buffered() {
                let Some(read) = self.lines.next_buffered(&mut self.buf).transpose() else { continue };
                match self.serve_read(&routes, read) {
                    Step::Call(job) => routes.dispatcher.pool().submit(job),
                    Step::Read => {}
                    Step::End => return false,
                }
                self.lines.source_mut().expect_soon(self.quick_answers);
                continue;
            }
            if self.lines.has_bytes_buffered() || routes.writer.over_high_water() {
                return true;
            }
            let slice = Instant::now().checked_add(LOOK_AGAIN).map_or(until, |end| end.min(until));
            if let Ok(false) = self.lines.source_mut().wait_for_bytes(slice) {
                continue;
            }
            // One read, of bytes that are there; the end, or a failure (the
            // wait's too), is routed as any read's, and ends the reading.
            match self.lines.fill() {
                Ok(true) => {}
                Ok(false) => return !matches!(self.serve_read(&routes, Ok(Line::Eof)), Step::End),
                Err(e) => return !matches!(self.serve_read(&routes, Err(e)), Step::End),
            }
        }
    }

    /// Reads and routes one line: a call is returned, not run.
    fn step(&mut self, routes: &Routes) -> Step {
        // A host that reads our answers slowly gets its requests read
        // slowly; the time held back does not count against its line.
        let room =
            routes.writer.wait_for_room(|| routes.stop.is_stopped(), || routes.outgoing.awaiting(), self.patience);
        match room {
            Ok(held) if held.is_zero() => {}
            Ok(held) => self.lines.source_mut().hold_line_clock(held),
            Err(NoProgress) => {
                let (patience, unread) = (self.patience.unwrap_or_default(), routes.writer.unwritten());
                routes.note(&format!("closing: it read none of its answers for {patience:?} ({unread} bytes wait)"));
                return routes.end_reading();
            }
        }
        let read = self.lines.next(&mut self.buf);
        self.serve_read(routes, read)
    }

    /// Routes what a read of a line gave: a call is returned, not run.
    fn serve_read(&mut self, routes: &Routes, read: std::io::Result<Line>) -> Step {
        match read {
            Ok(Line::Frame) => {
                // A host that sends its next request within the spin of
                // our answer gets the input polled after the next one:
                // it saves that host a thread wake-up a call, and costs
                // a host that takes longer (a script between calls)
                // nothing.
                if let Some(answered) = self.answered.take() {
                    self.quick_host = answered.elapsed() < self.lines.source_mut().spin_time();
                }
                let served = self.serve_line();
                // Only a hello sets it, and a hello is never a call.
                if routes.wrong_token.load(Ordering::Relaxed) {
                    routes.note("closing: hello presented a wrong token");
                    return routes.end_reading();
                }
                let answer = match served {
                    Served::Call(job) => return Step::Call(job),
                    Served::Answer => true,
                    Served::Other => false,
                };
                let due = answer || routes.outgoing.awaiting();
                self.lines.source_mut().expect_soon(due);
                Step::Read
            }
            Ok(Line::TooLong(len)) => {
                // What the skipped line grew the buffer to is not kept.
                self.buf = Vec::new();
                let max = self.lines.max();
                let message =
                    format!("invalid request: the line of at least {len} bytes exceeds the limit of {max} bytes");
                routes.error(None, &RpcError::new(ErrorCode::InvalidRequest, message));
                // Over a network the stream after it cannot be
                // trusted to be in step: the session ends there.
                if self.lines.stops_at_long_lines() {
                    routes.note(&format!("closing: a line exceeded the limit of {max} bytes"));
                    return routes.end_reading();
                }
                Step::Read
            }
            Ok(Line::Eof) => routes.end_reading(),
            Err(_) if routes.stop.is_stopped() => Step::End,
            Err(e) if e.get_ref().is_some_and(|e| e.is::<LineUnfinished>()) => {
                let message = format!("invalid request: {e} (SCRIPTLING_PLUGIN_LINE_TIMEOUT)");
                routes.error(None, &RpcError::new(ErrorCode::InvalidRequest, message));
                routes.note(&format!("closing: {e}"));
                routes.end_reading()
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                routes.note(&format!("closing: {e}"));
                routes.end_reading()
            }
            Err(e) => {
                routes.note(&format!("reading from the host failed: {e}"));
                routes.end_reading()
            }
        }
    }

    /// Serves the line read.
    fn serve_line(&mut self) -> Served {
        let routes = &*self.routes;
        let max_batch = routes.dispatcher.core().options.max_batch_len;
        // A line this long will be decoded into buffers as long (the
        // allocator maps those afresh): what smaller payloads' buffers left
        // free in the allocator's heaps is handed back first, so they do
        // not stack under the peak.
        if self.buf.len() >= RETURN_FREED_BEFORE {
            sys::return_freed_memory();
        }
        // Checked as UTF-8 once, here: nothing parsed from the line checks again.
        if self.buf.len() >= MOVE_LINES_FROM {
            match String::from_utf8(std::mem::take(&mut self.buf)) {
                Ok(text) => {
                    let text = Arc::new(text);
                    routes.serve_frame(&OnceCell::from(Bytes::WholeText(Arc::clone(&text))), &text, max_batch)
                }
                Err(e) => routes.not_utf8(e.utf8_error()),
            }
        } else {
            match std::str::from_utf8(&self.buf) {
                // Copied out of the buffer only if raw params are kept.
                Ok(text) => routes.serve_frame(&OnceCell::new(), text, max_batch),
                Err(e) => routes.not_utf8(e),
            }
        }
    }
}

impl Routes {
    /// Answers a line that is not UTF-8 with a parse error.
    fn not_utf8(&self, error: std::str::Utf8Error) -> Served {
        self.error(None, &rpc::not_utf8(error));
        Served::Other
    }

    /// Serves the line `text`, kept in `frame` (made from `text` the first
    /// time a request's raw params need it): a call is handed back; a
    /// batch's calls go to the pool.
    fn serve_frame(&self, kept: &OnceCell<Bytes>, text: &str, max_batch: usize) -> Served {
        let frame = || kept.get_or_init(|| Bytes::Text(Arc::from(text))).clone();
        match rpc::parse_line(text, max_batch) {
            Parsed::Single(Message::Request(request)) => {
                let id = request.id.map(ToOwned::to_owned);
                let done = self.answer(id, text.len());
                if let Some(job) = self.run(Incoming::new(request, text.as_bytes(), frame), done) {
                    return Served::Call(job);
                }
            }
            Parsed::Single(Message::Response(response)) => {
                self.route(&response);
                return Served::Answer;
            }
            Parsed::Single(Message::Invalid(id, error)) => self.error(id, &error),
            Parsed::Batch(messages) => self.batch(text, frame, messages),
        }
        Served::Other
    }

    /// Runs one request (alone or in a batch): `plugin.shutdown` goes to
    /// the session, and behind a closed gate only `hello` and `ping` go on.
    /// A call is handed back (see [`Dispatcher::dispatch_or_hand_back`]).
    fn run(&self, incoming: Incoming, done: Done) -> Option<Box<dyn Job>> {
        if let Some(gate) = &self.gate {
            match incoming.method {
                // Every hello is checked, before and after the gate opens.
                // After a wrong one, none is checked: a batch of hellos is
                // one guess too.
                Method::Hello
                    if !self.wrong_token.load(Ordering::Relaxed) && gate.present(incoming.token().as_deref()) => {}
                Method::Hello => {
                    self.wrong_token.store(true, Ordering::Relaxed);
                    let message = "authentication failed: hello must carry the server's token; closing the connection";
                    done.send(Err(RpcError::new(ErrorCode::AuthenticationFailed, message)));
                    return None;
                }
                _ if gate.is_open() => {}
                Method::Ping => {}
                _ => {
                    let message = "authentication required: send hello with the server's token first";
                    done.send(Err(RpcError::new(ErrorCode::AuthenticationFailed, message)));
                    return None;
                }
            }
        }
        if incoming.method == Method::Shutdown {
            let _ = self.control.send(Control::Shutdown(done));
            return None;
        }
        self.dispatcher.dispatch_or_hand_back(incoming, None, done)
    }

    /// Writes `message` on stderr, naming the peer (a connection's).
    pub(crate) fn note(&self, message: &str) {
        match &self.peer {
            Some(peer) => eprintln!("scriptling-plugin: {peer}: {message}"),
            None => eprintln!("scriptling-plugin: {message}"),
        }
    }

    /// The reading ends here: the session is told, as at the input's end.
    fn end_reading(&self) -> Step {
        let _ = self.control.send(Control::Eof);
        Step::End
    }

    /// Runs a batch's requests concurrently; one array answers them all.
    /// The bytes of its line, `text`, count against the queue until then.
    fn batch(&self, text: &str, frame: impl Fn() -> Bytes, messages: Vec<Message<'_>>) {
        let len = text.len();
        let writer = Arc::clone(&self.writer);
        writer.reserve(len);
        let batch = Batch::new(Box::new(move |array| match array {
            Some(array) => writer.send(Frame::line(Kind::Answer, array).releasing(len)),
            None => writer.release(len),
        }));
        for message in messages {
            match message {
                Message::Request(request) => {
                    let done = batch.element(request.id.map(ToOwned::to_owned));
                    if let Some(job) = self.run(Incoming::new(request, text.as_bytes(), &frame), done) {
                        self.dispatcher.pool().submit(job);
                    }
                }
                Message::Response(response) => self.route(&response),
                Message::Invalid(id, error) => batch.element(Some(id_or_null(id))).send(Err(error)),
            }
        }
        batch.seal();
    }

    /// Hands an answer to one of the plugin's own requests to its waiter.
    /// It is never answered itself, however malformed.
    fn route(&self, response: &rpc::Response<'_>) {
        if self.outgoing.complete(response.id, response.outcome.clone()) == Routed::Unknown {
            eprintln!(
                "scriptling-plugin: ignoring an answer with id {} that no request of the plugin's had",
                response.id.map_or("null", RawValue::get)
            );
        }
    }

    /// Answers a line that is not a valid request.
    fn error(&self, id: Option<&RawValue>, error: &RpcError) {
        let mut line = Vec::new();
        rpc::write_error(&mut line, id, error);
        self.writer.send(Frame::line(Kind::Answer, line));
    }

    /// Writes the answer to request `id` (a notification's is dropped);
    /// the request's `len` bytes count against the queue until then.
    fn answer(&self, id: Option<Id>, len: usize) -> Done {
        let writer = Arc::clone(&self.writer);
        writer.reserve(len);
        let Some(id) = id else { return Done::new(move |_| writer.release(len)) };
        Done::new(move |outcome: Outcome| {
            let frame = match outcome {
                // Written from where it was serialised: no copy of a large result.
                Ok(result) if result.len() >= MOVE_LINES_FROM => {
                    let mut head = rpc::result_head(&id);
                    head.extend_from_slice(result.head());
                    let mut tail = result.tail().to_vec();
                    tail.extend_from_slice(rpc::RESULT_TAIL);
                    Frame::split(head, result.body, tail)
                }
                Ok(result) => Frame::line(Kind::Answer, rpc::into_result_line(&id, result)),
                Err(error) => {
                    let mut line = Vec::new();
                    rpc::write_error(&mut line, Some(&id), &error);
                    Frame::line(Kind::Answer, line)
                }
            };
            writer.send(frame.releasing(len));
        })
    }
}

fn id_or_null(id: Option<&RawValue>) -> Id {
    id.map_or_else(|| RawValue::from_string("null".to_owned()).expect("null is JSON"), ToOwned::to_owned)
}
