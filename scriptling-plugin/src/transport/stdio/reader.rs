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

use std::io::Read;
use std::sync::{Arc, mpsc};

use serde_json::value::RawValue;

use crate::call::outgoing::{Outgoing, Routed};
use crate::rpc::{self, ErrorCode, Frame as Parsed, Id, Message, Method, RpcError};
use crate::runtime::batch::Batch;
use crate::runtime::dispatch::{Bytes, Dispatcher, Incoming};
use crate::runtime::done::{Done, Outcome};
use crate::transport::stdio::Control;
use crate::transport::stdio::input::{Input, Stop};
use crate::transport::stdio::lines::{Line, LineReader};
use crate::transport::stdio::writer::{Frame, FrameWriter, Kind};

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
}

/// The reading thread's state.
pub(crate) struct Reader<R> {
    pub(crate) lines: LineReader<Input<R>>,
    pub(crate) buf: Vec<u8>,
    pub(crate) routes: Arc<Routes>,
}

impl<R> Reader<R>
where
    Input<R>: Read,
{
    /// Reads and routes lines until the input ends or the session stops it.
    pub(crate) fn run(mut self) {
        let routes = Arc::clone(&self.routes);
        loop {
            // A host that reads our answers slowly gets its requests read slowly.
            routes.writer.wait_for_room(|| routes.stop.is_stopped());
            match self.lines.next(&mut self.buf) {
                Ok(Line::Frame) => {
                    let answer = self.serve_line();
                    let due = answer || routes.outgoing.awaiting();
                    self.lines.source_mut().expect_answer(due);
                }
                Ok(Line::TooLong(len)) => {
                    // What the skipped line grew the buffer to is not kept.
                    self.buf = Vec::new();
                    let max = routes.dispatcher.core().options.max_frame_bytes;
                    let message =
                        format!("invalid request: the line of at least {len} bytes exceeds the limit of {max} bytes");
                    routes.error(None, &RpcError::new(ErrorCode::InvalidRequest, message));
                }
                Ok(Line::Eof) => break,
                Err(_) if routes.stop.is_stopped() => return,
                Err(e) => {
                    eprintln!("scriptling-plugin: reading from the host failed: {e}");
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
        let frame = if self.buf.len() >= MOVE_LINES_FROM {
            Bytes::Whole(Arc::new(std::mem::take(&mut self.buf)))
        } else {
            Bytes::Copied(Arc::from(&self.buf[..]))
        };
        routes.serve_frame(&frame, max_batch)
    }
}

impl Routes {
    /// Serves a frame parsed the general way: its requests' params are
    /// decoded on the pool. Returns whether it was an answer to one of the
    /// plugin's requests.
    fn serve_frame(&self, frame: &Bytes, max_batch: usize) -> bool {
        match rpc::parse_frame(frame.as_ref(), max_batch) {
            Parsed::Single(Message::Request(request)) => {
                let id = request.id.map(ToOwned::to_owned);
                self.serve(Incoming::new(frame, request), id);
            }
            Parsed::Single(Message::Response(response)) => {
                self.route(&response);
                return true;
            }
            Parsed::Single(Message::Invalid(id, error)) => self.error(id, &error),
            Parsed::Batch(messages) => self.batch(frame, messages),
        }
        false
    }

    /// Runs one request; `plugin.shutdown` goes to the session.
    fn serve(&self, incoming: Incoming, id: Option<Id>) {
        let done = self.answer(id);
        if incoming.method == Method::Shutdown {
            let _ = self.control.send(Control::Shutdown(done));
        } else {
            self.dispatcher.dispatch(incoming, None, done);
        }
    }

    /// Runs a batch's requests concurrently; one array answers them all.
    fn batch(&self, frame: &Bytes, messages: Vec<Message<'_>>) {
        let writer = Arc::clone(&self.writer);
        let batch = Batch::new(Box::new(move |array| {
            if let Some(array) = array {
                writer.send(Frame::line(Kind::Answer, array));
            }
        }));
        for message in messages {
            match message {
                Message::Request(request) => {
                    let done = batch.element(request.id.map(ToOwned::to_owned));
                    let incoming = Incoming::new(frame, request);
                    if incoming.method == Method::Shutdown {
                        let _ = self.control.send(Control::Shutdown(done));
                    } else {
                        self.dispatcher.dispatch(incoming, None, done);
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

    /// Writes the answer to request `id`; a notification's is dropped.
    fn answer(&self, id: Option<Id>) -> Done {
        let Some(id) = id else { return Done::nobody() };
        let writer = Arc::clone(&self.writer);
        Done::new(move |outcome: Outcome| {
            writer.send(match outcome {
                // Written from where it was serialised: no copy of a large result.
                Ok(result) if result.len() >= MOVE_LINES_FROM => {
                    Frame::split(rpc::result_head(&id), result, rpc::RESULT_TAIL)
                }
                Ok(result) => {
                    let mut line = Vec::new();
                    rpc::write_result(&mut line, &id, &result);
                    Frame::line(Kind::Answer, line)
                }
                Err(error) => {
                    let mut line = Vec::new();
                    rpc::write_error(&mut line, Some(&id), &error);
                    Frame::line(Kind::Answer, line)
                }
            });
        })
    }
}

fn id_or_null(id: Option<&RawValue>) -> Id {
    id.map_or_else(|| RawValue::from_string("null".to_owned()).expect("null is JSON"), ToOwned::to_owned)
}
