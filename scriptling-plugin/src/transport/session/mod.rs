//! A session: one host over a byte stream in each direction (stdin and
//! stdout, or a TCP connection), in the shape of lsp-server's: one reader,
//! one writer, a dispatcher.
//!
//! ```text
//! stdin ─► reader thread ─► decode ──┬─ answer to our request ─► its waiter
//!                                    ├─ plugin.shutdown, EOF ─► the session
//!                                    └─ request ─► dispatcher ─► sync pool / task
//! stdout ◄─ FrameWriter (one queue, in order) ◄─ answers, callbacks, logs
//! ```
//!
//! What differs between the stdio host's session and a connection's (a
//! token, idle and size limits, a shared pool) is its [`Setup`].
//!
//! The session ends on `plugin.shutdown`, on the input's end, on the first
//! SIGINT or SIGTERM (for plugins served with `run` or `serve_stdio`; a
//! server ends its connections' sessions itself), when a connection's
//! limits say so, or when the host closes the output. Then ([`Session::run_to_end`]), within the
//! shutdown grace: requests are refused, in-flight calls finish, every live
//! object is destroyed (its `#[del]` hook and `Drop` run, and their log
//! records reach the host; a hook that overruns is named on stderr and left
//! behind), every `plugin.shutdown` is answered, the reader stops, and the
//! writer drains for as long as the host keeps reading. Serving returns an
//! error if an answer could not be delivered. When it has returned, no
//! thread of the SDK reads stdin or writes stdout.

mod baton;
pub(crate) mod input;
pub(crate) mod lines;
mod reader;
pub(crate) mod setup;
pub(crate) mod writer;

use std::io::{Read, Write};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::call::link::{HostChannel, Link};
use crate::call::outgoing::Outgoing;
use crate::exports::core::Core;
use crate::exports::error::ServeError;
use crate::rpc::{self, Frame as Parsed, Message, Method};
use crate::runtime::dispatch::{Dispatcher, parallelism};
use crate::runtime::done::Done;
use crate::runtime::pool::Pool;
use crate::runtime::teardown;
use crate::sys::{Readable, Signal, Stop};
use crate::transport::session::input::Input;
use crate::transport::session::lines::LineReader;
use crate::transport::session::reader::{Reader, Reading, Routes};
pub(crate) use crate::transport::session::setup::{Gate, Setup};
use crate::transport::session::writer::{FrameWriter, Undelivered};
use crate::transport::signals::{SignalWatch, Signals};

/// How long the session's end waits for its reader to stop. A read that
/// cannot be cancelled (a console on some Windows versions, a pipe made by
/// a Unix program under Wine) is left to the process's exit.
const READER_STOP: Duration = Duration::from_secs(1);

/// How long calls get to end once their waits on the host have failed at
/// the end of the shutdown grace.
const SETTLE: Duration = Duration::from_secs(1);

/// Why the session ends (or, after the first, more to answer as it does).
pub(crate) enum Control {
    /// `plugin.shutdown`, with the completion that answers it.
    Shutdown(Done),
    /// SIGINT or SIGTERM: a shutdown nobody asked over the wire.
    Signal(Signal),
    /// The server serving this connection is stopping (it reports why).
    ServerStop,
    /// The input ended.
    Eof,
    /// A write to stdout failed: the host has closed it.
    OutputClosed(String),
}

/// One session: the reader runs from [`Session::start`];
/// [`Session::run_to_end`] waits for its end and cleans up.
pub(crate) struct Session {
    routes: Arc<Routes>,
    control: mpsc::Receiver<Control>,
    /// Ends the reading.
    end_reading: Box<dyn Fn() + Send>,
    /// Disconnected when the reading ends (nobody reads the input any more).
    reader_ended: mpsc::Receiver<()>,
    signals: Option<SignalWatch>,
    /// The session's own pool, closed when it ends (`None`: a shared one).
    own_pool: Option<Pool>,
}

/// Ends a session from outside (a server stopping).
#[derive(Clone)]
pub(crate) struct Ender(mpsc::Sender<Control>);

impl Ender {
    /// Asks the session to end, as a shutdown nobody asked over the wire.
    pub(crate) fn end(&self) {
        let _ = self.0.send(Control::ServerStop);
    }
}

impl Session {
    /// Starts reading `lines`; answers go to `output`. `stop` must be the
    /// one `lines` watches.
    pub(crate) fn start<R: Readable + 'static>(
        mut setup: Setup,
        mut lines: LineReader<Input<R>>,
        stop: Arc<Stop>,
        output: Box<dyn Write + Send>,
    ) -> std::io::Result<Session> {
        let (control_tx, control) = mpsc::channel();
        let failed = control_tx.clone();
        let on_failure = Box::new(move |e: &std::io::Error| {
            let _ = failed.send(Control::OutputClosed(e.to_string()));
        });
        let writer = FrameWriter::new(output, on_failure, setup.threads.writer, setup.queue_limit)?;
        let outgoing = match setup.max_waiting_calls {
            Some(most) => Outgoing::limited(most, "SCRIPTLING_PLUGIN_MAX_WAITING_CALLS, TcpConfig::max_waiting_calls"),
            None => Outgoing::new(),
        };
        if let Some(limit) = setup.line_timeout {
            lines.source_mut().limit_lines(limit);
        }
        let (pool, owned) = setup.take_pool();
        let Setup { core, runtime, objects, gate, idle, peer, threads, .. } = setup;
        // Off on one core, where polling could only delay the thread that
        // answers the host.
        if parallelism() > 1 {
            lines.source_mut().set_spin(core.options.input_spin);
        }
        let quick_calls = core.options.quick_calls;
        let host = HostChannel { outgoing: Arc::clone(&outgoing), sink: Arc::new(Arc::clone(&writer)) };
        let classes = core.class_order.iter().map(|c| Arc::clone(&c.info));
        let waits = core.options.waits;
        let link = Link::new(Arc::clone(&core.library), objects, classes, Some(host), Some(runtime), waits);
        let link = match &peer {
            Some(peer) => link.for_connection(Arc::clone(peer)),
            None => link,
        };
        let dispatcher = Dispatcher::new(core, Arc::new(link), pool.clone());
        let quiet = setup::quiet_limits(gate.clone(), idle, Arc::clone(&dispatcher), Instant::now());
        if let Some(quiet) = quiet {
            lines.source_mut().limit_quiet(quiet);
        }
        let wrong_token = AtomicBool::new(false);
        let routes =
            Arc::new(Routes { dispatcher, writer, outgoing, control: control_tx, stop, gate, peer, wrong_token });
        let (_ended, reader_ended) = mpsc::channel::<()>();
        let reader = Reader {
            lines,
            buf: Vec::new(),
            routes: Arc::clone(&routes),
            patience: idle,
            _ended,
            answered: None,
            quick_host: false,
            quick_answers: true,
            quick_calls: false,
            quick_limit: quick_calls,
            holds: false,
        };
        let reading = Reading::start(reader, threads.reader)?;
        let end_reading = Box::new(move || reading.end());
        let own_pool = owned.then_some(pool);
        Ok(Session { routes, control, end_reading, reader_ended, signals: None, own_pool })
    }

    /// A handle that ends the session from outside.
    pub(crate) fn ender(&self) -> Ender {
        Ender(self.routes.control.clone())
    }

    /// Ends the session on the first SIGINT or SIGTERM too; the handlers
    /// are restored when the session ends.
    pub(crate) fn watch_signals(&mut self, signals: Signals) -> std::io::Result<()> {
        let control = self.routes.control.clone();
        self.signals = Some(signals.watch(move |signal| {
            let _ = control.send(Control::Signal(signal));
        })?);
        Ok(())
    }

    /// What the session's calls reach (for the test host's object count).
    #[cfg(feature = "testing")]
    pub(crate) fn link(&self) -> Arc<Link> {
        Arc::clone(self.routes.dispatcher.link())
    }

    /// Serves until the session ends, then ends it (see the module docs).
    pub(crate) fn run_to_end(mut self) -> Result<(), ServeError> {
        let why = self.control.recv().unwrap_or(Control::Eof);
        let routes = Arc::clone(&self.routes);
        let dispatcher = &routes.dispatcher;
        let grace = dispatcher.core().options.shutdown_grace;
        let deadline = Instant::now().checked_add(grace);
        let mut shutdowns = Vec::new();
        dispatcher.begin_closing();
        match why {
            Control::Shutdown(done) => shutdowns.push(done),
            Control::Signal(signal) => {
                eprintln!("scriptling-plugin: {signal} received, shutting down (send it again to exit at once)");
            }
            Control::ServerStop => {}
            // Nobody can answer callbacks any more: fail them so their calls end.
            Control::Eof => routes.outgoing.close("the host closed the connection"),
            Control::OutputClosed(error) => return self.end_abruptly(&error, deadline),
        }
        // Calls still waiting for the host's answer at the end of the grace
        // fail their waits, naming the shutdown, and so end with an answer.
        let idle = dispatcher.wait_idle(deadline.unwrap_or_else(far_future)) || {
            routes.outgoing.close(&format!("the plugin is shutting down and waited {grace:?} for the answer"));
            dispatcher.wait_idle(Instant::now() + SETTLE)
        };
        if !idle {
            // A call whose lone answer waits in its write looks like one
            // still running: say when the host is why.
            let unread = match routes.writer.unwritten() {
                0 => String::new(),
                bytes => format!(" (the host has not read {bytes} bytes of answers)"),
            };
            routes.note(&format!(
                "{} call(s) still running after {grace:?}{unread}; ending without them",
                dispatcher.in_flight()
            ));
            dispatcher.abandon();
        }
        self.release_objects(deadline);
        answer(&mut shutdowns);
        self.stop_reading();
        // Shutdowns read meanwhile are answered too.
        while let Ok(control) = self.control.try_recv() {
            if let Control::Shutdown(done) = control {
                shutdowns.push(done);
            }
        }
        answer(&mut shutdowns);
        routes.outgoing.close("the plugin is shutting down");
        dispatcher.abandon();
        let undelivered = routes.writer.drain(grace);
        self.close_own_pool();
        drop(self.signals.take());
        undelivered_error(undelivered, &format!("the host read nothing for {grace:?}"))
    }

    /// Lets the threads of the session's own pool leave (a shared pool is
    /// its maker's to close).
    fn close_own_pool(&mut self) {
        if let Some(pool) = self.own_pool.take() {
            pool.close();
        }
    }

    /// The host closed stdout: nothing can be answered any more. In-flight
    /// work is dropped, objects are destroyed, and serving fails.
    fn end_abruptly(mut self, error: &str, deadline: Option<Instant>) -> Result<(), ServeError> {
        let routes = Arc::clone(&self.routes);
        routes.outgoing.close("the host closed the plugin's output");
        routes.dispatcher.abandon();
        self.release_objects(deadline);
        self.stop_reading();
        let undelivered = routes.writer.close();
        self.close_own_pool();
        drop(self.signals.take());
        let why = format!("the host closed the plugin's output ({error})");
        undelivered_error(undelivered, &why)?;
        Err(ServeError::Io(std::io::Error::new(std::io::ErrorKind::BrokenPipe, why)))
    }

    /// Destroys every live object (the host never does), while the host
    /// still serves their hooks' log records, within `deadline`.
    fn release_objects(&self, deadline: Option<Instant>) {
        let link = self.routes.dispatcher.link();
        let remaining = link.objects.drain();
        if remaining.is_empty() {
            return;
        }
        if let Err(overran) = teardown::release_within(link, remaining, "plugin.shutdown", deadline) {
            self.routes.note(&format!("{overran}; ending without waiting for it"));
        }
    }

    /// Stops the reading and waits for it to end, for up to
    /// [`READER_STOP`]: from then on no thread of the session reads the
    /// input (unless its read could not be cancelled, which is said on
    /// stderr). A reading thread still running a call is not waited for.
    fn stop_reading(&mut self) {
        self.routes.stop.stop();
        self.routes.writer.wake();
        (self.end_reading)();
        if let Err(mpsc::RecvTimeoutError::Timeout) = self.reader_ended.recv_timeout(READER_STOP) {
            self.routes.note("the read of the input could not be stopped; it is left to the process's exit");
        }
    }
}

impl Drop for Session {
    /// A session dropped without being run to its end stops its reading.
    fn drop(&mut self) {
        self.routes.stop.stop();
        self.routes.writer.wake();
        (self.end_reading)();
    }
}

fn answer(shutdowns: &mut Vec<Done>) {
    for done in shutdowns.drain(..) {
        done.send(Ok(b"null".to_vec().into()));
    }
}

/// A deadline for a grace too long to add to now: never.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(60 * 60 * 24 * 365)
}

fn undelivered_error(undelivered: Undelivered, why: &str) -> Result<(), ServeError> {
    if undelivered.answers == 0 {
        return Ok(());
    }
    Err(ServeError::Undelivered { answers: undelivered.answers, reason: why.to_owned() })
}

/// Answers the host's handshake at once if it is the first line and has
/// arrived whole already, before the session exists: the host's wait for a
/// starting plugin then ends before the plugin sets up the rest (the
/// runtime, the session and their threads). Stop events must be caught
/// before this is called. Returns whether it answered; anything else is
/// left in `lines` for the session. The answer is written to `out`, the
/// protocol stream, before anything else is.
pub(crate) fn answer_early_handshake<R: Read>(core: &Core, lines: &mut LineReader<R>, out: &mut impl Write) -> bool {
    let Ok(Some(line)) = lines.peek_line() else { return false };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // A line over the limit is for the session to refuse.
    if line.len() > core.options.max_frame_bytes {
        return false;
    }
    let Ok(text) = std::str::from_utf8(line) else { return false };
    // The host's usual handshake line is scanned (`rpc/scan.rs`): serde's
    // general parse is code a session may never run again, paid for cold.
    let Parsed::Single(Message::Request(request)) = rpc::parse_line(text, 1) else { return false };
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
