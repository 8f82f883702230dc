//! [`Reader`]: the thread that reads the host's lines and routes each:
//! answers to the plugin's own requests to their waiters, requests to the
//! dispatcher, `plugin.shutdown` and the input's end to the session.
//!
//! It never runs a handler: a handler waiting on the host can never hold
//! up the reading of the host's answer. It reads only a line's envelope
//! (the params stay raw, decoded on the pool: measured, decoding them here
//! made the reader the bottleneck of pipelined calls); a line of
//! [`MOVE_LINES_FROM`] or more is moved out of the read buffer whole rather
//! than copied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use serde_json::value::RawValue;

use crate::call::outgoing::{Outgoing, Routed};
use crate::rpc::{self, ErrorCode, Frame as Parsed, Id, Message, Method, RpcError};
use crate::runtime::batch::Batch;
use crate::runtime::dispatch::{Bytes, Dispatcher, Incoming};
use crate::runtime::done::{Done, Outcome};
use crate::sys::{Readable, Stop};
use crate::transport::session::input::{Input, LineUnfinished};
use crate::transport::session::lines::{Line, LineReader};
use crate::transport::session::writer::{self, Frame, FrameWriter, Kind, NoProgress};
use crate::transport::session::{Control, Gate};

/// Lines at least this long are moved out of the reader whole (no copy, and
/// the buffer that held one is not kept); results at least this long are
/// written from where they were serialised.
const MOVE_LINES_FROM: usize = 64 * 1024;

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
}

impl<R: Readable> Reader<R> {
    /// Reads and routes lines until the input ends or the session stops it.
    pub(crate) fn run(mut self) {
        let routes = Arc::clone(&self.routes);
        writer::queue_only_on_this_thread();
        loop {
            // A host that reads our answers slowly gets its requests read
            // slowly; the time held back does not count against its line.
            let room =
                routes.writer.wait_for_room(|| routes.stop.is_stopped(), || routes.outgoing.awaiting(), self.patience);
            match room {
                Ok(held) if held.is_zero() => {}
                Ok(held) => self.lines.source_mut().hold_line_clock(held),
                Err(NoProgress) => {
                    let (patience, unread) = (self.patience.unwrap_or_default(), routes.writer.unwritten());
                    routes
                        .note(&format!("closing: it read none of its answers for {patience:?} ({unread} bytes wait)"));
                    break;
                }
            }
            match self.lines.next(&mut self.buf) {
                Ok(Line::Frame) => {
                    let answer = self.serve_line();
                    if routes.wrong_token.load(Ordering::Relaxed) {
                        routes.note("closing: hello presented a wrong token");
                        break;
                    }
                    let due = answer || routes.outgoing.awaiting();
                    self.lines.source_mut().expect_answer(due);
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
                        break;
                    }
                }
                Ok(Line::Eof) => break,
                Err(_) if routes.stop.is_stopped() => return,
                Err(e) if e.get_ref().is_some_and(|e| e.is::<LineUnfinished>()) => {
                    let message = format!("invalid request: {e} (SCRIPTLING_PLUGIN_LINE_TIMEOUT)");
                    routes.error(None, &RpcError::new(ErrorCode::InvalidRequest, message));
                    routes.note(&format!("closing: {e}"));
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    routes.note(&format!("closing: {e}"));
                    break;
                }
                Err(e) => {
                    routes.note(&format!("reading from the host failed: {e}"));
                    break;
                }
            }
        }
        let _ = routes.control.send(Control::Eof);
    }

    /// Serves the line read; returns whether it answered one of the
    /// plugin's requests.
    fn serve_line(&mut self) -> bool {
        let routes = &*self.routes;
        let max_batch = routes.dispatcher.core().options.max_batch_len;
        // Checked as UTF-8 once, here: nothing parsed from the line checks again.
        if self.buf.len() >= MOVE_LINES_FROM {
            match String::from_utf8(std::mem::take(&mut self.buf)) {
                Ok(text) => {
                    let text = Arc::new(text);
                    routes.serve_frame(&Bytes::WholeText(Arc::clone(&text)), &text, max_batch)
                }
                Err(e) => routes.not_utf8(e.utf8_error()),
            }
        } else {
            match std::str::from_utf8(&self.buf) {
                Ok(text) => {
                    let text: Arc<str> = Arc::from(text);
                    routes.serve_frame(&Bytes::Text(Arc::clone(&text)), &text, max_batch)
                }
                Err(e) => routes.not_utf8(e),
            }
        }
    }
}

impl Routes {
    /// Answers a line that is not UTF-8 with a parse error.
    fn not_utf8(&self, error: std::str::Utf8Error) -> bool {
        self.error(None, &rpc::not_utf8(error));
        false
    }

    /// Serves `frame`, whose text is `text`: its requests' params are
    /// decoded on the pool. Returns whether it was an answer to one of the
    /// plugin's requests.
    fn serve_frame(&self, frame: &Bytes, text: &str, max_batch: usize) -> bool {
        match rpc::parse_text(text, max_batch) {
            Parsed::Single(Message::Request(request)) => {
                let id = request.id.map(ToOwned::to_owned);
                let done = self.answer(id, text.len());
                self.run(Incoming::new(frame, request), done);
            }
            Parsed::Single(Message::Response(response)) => {
                self.route(&response);
                return true;
            }
            Parsed::Single(Message::Invalid(id, error)) => self.error(id, &error),
            Parsed::Batch(messages) => self.batch(frame, text.len(), messages),
        }
        false
    }

    /// Runs one request (alone or in a batch): `plugin.shutdown` goes to
    /// the session, and behind a closed gate only `hello` and `ping` go on.
    fn run(&self, incoming: Incoming, done: Done) {
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
                    return done.send(Err(RpcError::new(ErrorCode::AuthenticationFailed, message)));
                }
                _ if gate.is_open() => {}
                Method::Ping => {}
                _ => {
                    let message = "authentication required: send hello with the server's token first";
                    return done.send(Err(RpcError::new(ErrorCode::AuthenticationFailed, message)));
                }
            }
        }
        if incoming.method == Method::Shutdown {
            let _ = self.control.send(Control::Shutdown(done));
        } else {
            self.dispatcher.dispatch(incoming, None, done);
        }
    }

    /// Writes `message` on stderr, naming the peer (a connection's).
    pub(crate) fn note(&self, message: &str) {
        match &self.peer {
            Some(peer) => eprintln!("scriptling-plugin: {peer}: {message}"),
            None => eprintln!("scriptling-plugin: {message}"),
        }
    }

    /// Runs a batch's requests concurrently; one array answers them all.
    /// Its `len` bytes count against the queue until then.
    fn batch(&self, frame: &Bytes, len: usize, messages: Vec<Message<'_>>) {
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
                    self.run(Incoming::new(frame, request), done);
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
