//! The stdio transport: one host, over stdin and stdout.
//!
//! ```text
//! stdin ─► reader thread ─► classify ─┬─ answer to our request ─► its waiter
//!                                     ├─ plugin.shutdown ─► the session
//!                                     └─ request ─► Dispatcher ─► pool / task
//! stdout ◄─ FrameWriter (queued in order, coalesced) ◄─ answers, callbacks, logs
//! ```
//!
//! stdin is read on a dedicated thread so that a handler waiting for the
//! host's answer to a callback can never block the reader that delivers it.
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
use std::sync::{Arc, OnceLock};

use serde_json::value::RawValue;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use crate::call::link::{HostChannel, Link};
use crate::call::objects::ObjectTable;
use crate::call::outgoing::Outgoing;
use crate::exports::core::Core;
use crate::exports::error::ServeError;
use crate::rpc::{self, ErrorCode, Frame as Parsed, Id, Message, Method, RpcError};
use crate::runtime::batch::Batch;
use crate::runtime::dispatch::{Bytes, Dispatcher, Done, Incoming, Outcome};
use crate::transport::signals::{Signal, Signals};
use crate::transport::stdio::lines::{Line, LineReader};
use crate::transport::stdio::writer::{Frame, FrameWriter};

/// Lines at least this long are handed to their request without a copy.
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
    pub(crate) fn start<R, W>(
        core: Arc<Core>,
        input: R,
        output: W,
        runtime: Arc<OnceLock<Handle>>,
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
        let max_frame = core.options.max_frame_bytes;
        let dispatcher = Dispatcher::new(core, Arc::new(link), runtime);
        let reader = Reader {
            dispatcher: Arc::clone(&dispatcher),
            writer: Arc::clone(&writer),
            outgoing: Arc::clone(&outgoing),
            control: control_tx.clone(),
        };
        std::thread::Builder::new()
            .name("scriptling-plugin-stdin".into())
            .spawn(move || reader.run(LineReader::new(input, max_frame)))?;
        Ok(Session { dispatcher, writer, outgoing, control, control_tx })
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
                answer(Ok(b"null".to_vec()));
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

/// The stdin side of a session.
struct Reader {
    dispatcher: Arc<Dispatcher>,
    writer: Arc<FrameWriter>,
    outgoing: Arc<Outgoing>,
    control: mpsc::UnboundedSender<Control>,
}

impl Reader {
    fn run<R: Read>(self, mut lines: LineReader<R>) {
        let mut buf = Vec::new();
        loop {
            // A host that reads our answers slowly gets its requests read slowly.
            self.writer.wait_for_room();
            match lines.next(&mut buf) {
                Ok(Line::Frame) => self.line(&mut buf),
                Ok(Line::TooLong(len)) => {
                    let max = self.dispatcher.core().options.max_frame_bytes;
                    let message =
                        format!("invalid request: the line of at least {len} bytes exceeds the limit of {max} bytes");
                    self.error(None, &RpcError::new(ErrorCode::InvalidRequest, message));
                }
                Ok(Line::Eof) => break,
                Err(e) => {
                    eprintln!("scriptling-plugin: reading from the host failed: {e}");
                    break;
                }
            }
        }
        let _ = self.control.send(Control::Eof);
    }

    fn line(&self, buf: &mut Vec<u8>) {
        let frame: Bytes =
            if buf.len() >= MOVE_LINES_FROM { Arc::new(std::mem::take(buf)) } else { Arc::new(buf.clone()) };
        let max_batch = self.dispatcher.core().options.max_batch_len;
        match rpc::parse_frame((*frame).as_ref(), max_batch) {
            Parsed::Single(Message::Request(request)) => {
                let id = request.id.map(ToOwned::to_owned);
                let incoming = Incoming::new(&frame, &request);
                let done = self.answer(id);
                if incoming.method == Method::Shutdown {
                    self.shutdown(vec![done]);
                } else {
                    self.dispatcher.dispatch(incoming, None, done);
                }
            }
            Parsed::Single(Message::Response(response)) => self.route(&response),
            Parsed::Single(Message::Invalid(id, error)) => self.error(id, &error),
            Parsed::Batch(messages) => self.batch(&frame, messages),
        }
    }

    /// Runs a batch's requests concurrently; one array answers them all.
    fn batch(&self, frame: &Bytes, messages: Vec<Message<'_>>) {
        let writer = Arc::clone(&self.writer);
        let batch = Batch::new(Box::new(move |array| {
            if let Some(array) = array {
                writer.send(Frame::Line(array));
            }
        }));
        let mut shutdowns = Vec::new();
        for message in messages {
            match message {
                Message::Request(request) => {
                    let done = batch.element(request.id.map(ToOwned::to_owned));
                    let incoming = Incoming::new(frame, &request);
                    if incoming.method == Method::Shutdown {
                        shutdowns.push(done);
                    } else {
                        self.dispatcher.dispatch(incoming, None, done);
                    }
                }
                Message::Response(response) => self.route(&response),
                Message::Invalid(id, error) => batch.element(Some(id_or_null(id)))(Err(error)),
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

    fn route(&self, response: &rpc::Response<'_>) {
        if !self.outgoing.complete(response.id, response.outcome.clone()) {
            eprintln!(
                "scriptling-plugin: ignoring a response with id {} that no request is waiting for",
                response.id.map_or("null", RawValue::get)
            );
        }
    }

    fn error(&self, id: Option<&RawValue>, error: &RpcError) {
        let mut line = Vec::new();
        rpc::write_error(&mut line, id, error);
        self.writer.send(Frame::Line(line));
    }

    /// Writes the answer to request `id`; a notification's is dropped.
    fn answer(&self, id: Option<Id>) -> Done {
        let Some(id) = id else { return Box::new(|_| {}) };
        let writer = Arc::clone(&self.writer);
        Box::new(move |outcome: Outcome| {
            writer.send(match outcome {
                // Written from where it was serialised: no copy of a large result.
                Ok(result) => Frame::Parts(rpc::result_head(&id), result, rpc::RESULT_TAIL),
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
