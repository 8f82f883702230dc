//! [`Connection`]: one host session, transport-independent. It turns parsed
//! frames into jobs, runs them concurrently and writes their responses.
//!
//! Sync handlers run on the sync pool (`pool.rs`) and async handlers as tasks, so
//! a slow call never delays another and the reader never waits on a handler.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::context::{self, CallScope, CallState, Scoped};
use crate::error::{ErrorCode, RpcError};
use crate::function::{Args, BoxFuture, CallOutcome, Function, Handler, Signature};
use crate::inflight::{InFlight, InFlightGuard};
use crate::objects::{self, Entry};
use crate::outgoing::{Outgoing, OutgoingError, Pending};
use crate::panic::{self, CatchUnwind};
use crate::plugin::Core;
use crate::pool::SyncPool;
use crate::rpc::{self, Frame, Id, Message, Request};
use crate::value::Value;
use crate::writer::FrameWriter;

/// The serialised result JSON of a request, or its error.
pub(crate) type Outcome = Result<Vec<u8>, RpcError>;

/// What the serving loop is told by the reader.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// `plugin.shutdown` was received and answered.
    Shutdown,
    /// The input ended.
    Eof,
}

/// How a request's outcome is produced.
pub(crate) enum Work {
    Ready(Outcome),
    Blocking(Box<dyn FnOnce() -> Outcome + Send>),
    Async(BoxFuture<Outcome>),
    Shutdown,
}

/// A request ready to run.
pub(crate) struct Job {
    id: Option<Id>,
    work: Work,
    _inflight: InFlightGuard,
}

pub(crate) struct Connection {
    pub(crate) core: Arc<Core>,
    pub(crate) writer: FrameWriter,
    pub(crate) outgoing: Arc<Outgoing>,
    pub(crate) inflight: Arc<InFlight>,
    shutting_down: AtomicBool,
    control: mpsc::UnboundedSender<Control>,
    /// Whether the transport can carry the plugin's own requests to the host
    /// (stdio can; HTTP cannot).
    pub(crate) can_call_host: bool,
    /// Runs sync handlers.
    pool: Arc<SyncPool>,
    /// The runtime async work is spawned on, set once it is built.
    runtime: Arc<OnceLock<Handle>>,
}

#[derive(Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    args: Option<Vec<Value>>,
    #[serde(default)]
    kwargs: Option<BTreeMap<String, Value>>,
}

#[derive(Deserialize)]
struct NewParams {
    class: String,
    #[serde(default)]
    args: Option<Vec<Value>>,
    #[serde(default)]
    kwargs: Option<BTreeMap<String, Value>>,
}

#[derive(Deserialize)]
struct MethodParams {
    object_id: String,
    method: String,
    #[serde(default)]
    args: Option<Vec<Value>>,
    #[serde(default)]
    kwargs: Option<BTreeMap<String, Value>>,
}

#[derive(Deserialize)]
struct DestroyParams {
    object_id: String,
}

/// How a call's value becomes its result.
#[derive(Clone, Copy)]
enum Encode {
    /// As a transport value.
    Value,
    /// As the bare `{"library","class","id"}` that `object.new` answers with.
    NewObject,
}

impl Connection {
    pub(crate) fn new(
        core: Arc<Core>,
        writer: FrameWriter,
        control: mpsc::UnboundedSender<Control>,
        can_call_host: bool,
        pool: Arc<SyncPool>,
        runtime: Arc<OnceLock<Handle>>,
    ) -> Self {
        Self {
            pool,
            runtime,
            can_call_host,
            core,
            writer,
            outgoing: Outgoing::new(),
            inflight: Arc::new(InFlight::default()),
            shutting_down: AtomicBool::new(false),
            control,
        }
    }

    /// Stops accepting new requests (responses to the plugin's own requests
    /// are still routed).
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// Handles one incoming line: routes responses, launches requests, and
    /// answers malformed input. Never blocks on a handler.
    pub(crate) fn handle_line(self: &Arc<Self>, line: &[u8]) {
        match rpc::parse_frame(line) {
            Frame::Single(Message::Request(req)) => {
                let job = self.prepare(req, 0);
                self.launch(job);
            }
            Frame::Single(Message::Response(resp)) => self.route(resp),
            Frame::Single(Message::Invalid(id, err)) => {
                let mut frame = Vec::new();
                rpc::write_error(&mut frame, id, &err);
                self.writer.write_frame(frame);
            }
            Frame::Batch(messages) => {
                let jobs = self.batch_jobs(messages, 0);
                if !jobs.is_empty() {
                    let this = Arc::clone(self);
                    self.rt().spawn(async move { this.run_batch(jobs).await });
                }
            }
        }
    }

    /// Sends one of the plugin's own requests to the host and returns the
    /// waiter for its answer.
    pub(crate) fn request_host<P: serde::Serialize>(&self, method: &str, params: &P) -> Result<Pending, OutgoingError> {
        self.check_can_call_host(method)?;
        let pending = self.outgoing.register()?;
        self.write_request(pending.id(), method, params)?;
        Ok(pending)
    }

    /// Sends a request whose answer nobody waits for. Returns `false` when
    /// it could not be sent (the caller falls back, e.g. to stderr).
    pub(crate) fn send_host_detached<P: serde::Serialize>(&self, method: &str, params: &P) -> bool {
        if self.check_can_call_host(method).is_err() {
            return false;
        }
        match self.outgoing.register_detached() {
            Ok(id) => self.write_request(id, method, params).is_ok(),
            Err(_) => false,
        }
    }

    fn check_can_call_host(&self, method: &str) -> Result<(), OutgoingError> {
        if self.can_call_host {
            return Ok(());
        }
        let what = if method == "callback.call" { "callbacks" } else { "calling the host" };
        Err(OutgoingError::Unsupported(format!("{what} need the stdio transport")))
    }

    fn write_request<P: serde::Serialize>(&self, id: u64, method: &str, params: &P) -> Result<(), OutgoingError> {
        let mut frame = Vec::new();
        rpc::write_request(&mut frame, id, method, params)
            .map_err(|e| OutgoingError::Closed(format!("the request cannot be encoded: {e}")))?;
        self.writer.write_frame(frame);
        Ok(())
    }

    /// Reports the end of input to the serving loop.
    pub(crate) fn input_closed(&self) {
        let _ = self.control.send(Control::Eof);
    }

    fn route(&self, resp: rpc::Response<'_>) {
        let id = resp.id.map(|raw| raw.get().to_owned());
        if !self.outgoing.complete(resp.id, resp.outcome) {
            eprintln!(
                "scriptling-plugin: ignoring a response with id {} that no request is waiting for",
                id.as_deref().unwrap_or("null")
            );
        }
    }

    fn job(&self, id: Option<Id>, work: Work) -> Job {
        Job { id, work, _inflight: self.inflight.enter() }
    }

    /// Turns a request into a job. Cheap work (the handshake, errors) is done
    /// here; calls become closures or futures that run elsewhere.
    fn prepare(self: &Arc<Self>, req: Request<'_>, client: u64) -> Job {
        let id = req.id.map(ToOwned::to_owned);
        if self.shutting_down.load(Ordering::Acquire) {
            return self.job(id, Work::Ready(Err(RpcError::application("the plugin is shutting down"))));
        }
        let work = match req.method {
            "function.call" => self.prepare_call(req.params, client),
            "object.new" => self.prepare_new(req.params, client),
            "object.call_method" => self.prepare_method(req.params, client),
            "object.destroy" => self.prepare_destroy(req.params),
            "scriptling.handshake" => Work::Ready(Ok(self.core.handshake.clone())),
            "environment.open" | "environment.close" => Work::Ready(Ok(b"null".to_vec())),
            "ping" => Work::Ready(Ok(br#"{"status":"ok"}"#.to_vec())),
            "plugin.shutdown" => Work::Shutdown,
            other => Work::Ready(Err(RpcError::new(ErrorCode::MethodNotFound, format!("method not found: {other}")))),
        };
        self.job(id, work)
    }

    fn prepare_call(self: &Arc<Self>, params: Option<&RawValue>, client: u64) -> Work {
        let params: CallParams = match parse_params("function.call", params) {
            Ok(p) => p,
            Err(e) => return Work::Ready(Err(e)),
        };
        let Some(function) = self.core.functions.get(&params.name) else {
            return Work::Ready(Err(RpcError::application(format!(
                "unknown function {} (available: {})",
                params.name, self.core.function_list
            ))));
        };
        if let Some(refusal) = function.refuse_rpc() {
            return Work::Ready(Err(RpcError::application(refusal.message())));
        }
        let (args, kwargs) = (params.args.unwrap_or_default(), params.kwargs.unwrap_or_default());
        self.invoke(function, None, args, kwargs, Encode::Value, client)
    }

    fn prepare_new(self: &Arc<Self>, params: Option<&RawValue>, client: u64) -> Work {
        let params: NewParams = match parse_params("object.new", params) {
            Ok(p) => p,
            Err(e) => return Work::Ready(Err(e)),
        };
        let Some(class) = self.core.classes.get(&params.class) else {
            return Work::Ready(Err(RpcError::application(format!(
                "unknown class {} (available: {})",
                params.class, self.core.class_list
            ))));
        };
        let args = params.args.unwrap_or_default();
        self.invoke(&class.constructor, None, args, params.kwargs.unwrap_or_default(), Encode::NewObject, client)
    }

    fn prepare_method(self: &Arc<Self>, params: Option<&RawValue>, client: u64) -> Work {
        let params: MethodParams = match parse_params("object.call_method", params) {
            Ok(p) => p,
            Err(e) => return Work::Ready(Err(e)),
        };
        let Some(entry) = self.core.objects.get(&params.object_id) else {
            return Work::Ready(Err(RpcError::application(self.unknown_object(&params.object_id))));
        };
        let class = Arc::clone(&entry.class);
        let args = params.args.unwrap_or_default();
        let kwargs = params.kwargs.unwrap_or_default();
        if let Some(method) = class.methods.get(&params.method) {
            return self.invoke(method, Some(entry), args, kwargs, Encode::Value, client);
        }
        let Some(property) = class.properties.get(&params.method) else {
            return Work::Ready(Err(RpcError::application(format!(
                "unknown method {} on {} (available: {})",
                params.method, class.name, class.member_list
            ))));
        };
        let name = &params.method;
        let refuse = |message: String| Work::Ready(Err(RpcError::application(message)));
        match (args.len(), kwargs.is_empty()) {
            (0, true) => self.invoke(&property.getter, Some(entry), args, kwargs, Encode::Value, client),
            (0, false) => refuse(format!("property '{name}' of {} does not accept keyword arguments", class.name)),
            (1, true) => match &property.setter {
                Some(setter) => self.invoke(setter, Some(entry), args, kwargs, Encode::Value, client),
                None => refuse(format!("can't set attribute '{name}': property is read-only")),
            },
            (n, _) => refuse(format!(
                "property '{name}' of {} takes no arguments to get or one positional argument to set, got {n}{}",
                class.name,
                if kwargs.is_empty() { "" } else { " and keyword arguments" }
            )),
        }
    }

    fn prepare_destroy(&self, params: Option<&RawValue>) -> Work {
        let params: DestroyParams = match parse_params("object.destroy", params) {
            Ok(p) => p,
            Err(e) => return Work::Ready(Err(e)),
        };
        // Idempotent: an unknown or already destroyed id is not an error.
        match self.core.objects.remove(&params.object_id) {
            None => Work::Ready(Ok(b"null".to_vec())),
            // The destroy hook and Drop are plugin code: run them off the reader.
            Some(entry) => Work::Blocking(Box::new(move || {
                objects::release(vec![entry]);
                Ok(b"null".to_vec())
            })),
        }
    }

    fn unknown_object(&self, id: &str) -> String {
        let (ids, total) = self.core.objects.some_ids(10);
        let listed: Vec<String> = ids.iter().map(u64::to_string).collect();
        match total {
            0 => format!("unknown object {id} (no objects are alive)"),
            n if n > listed.len() => {
                format!("unknown object {id} (alive: {}, and {} more)", listed.join(", "), n - listed.len())
            }
            _ => format!("unknown object {id} (alive: {})", listed.join(", ")),
        }
    }

    /// Prepares a call of `function` (on `receiver`, for methods), run inside
    /// the call's context.
    fn invoke(
        self: &Arc<Self>,
        function: &Function,
        receiver: Option<Entry>,
        positional: Vec<Value>,
        keywords: BTreeMap<String, Value>,
        encode: Encode,
        client: u64,
    ) -> Work {
        let signature = Arc::clone(&function.signature);
        let receiver = receiver.map(|e| (e, Arc::clone(&self.core.library)));
        let scope = CallScope { conn: Arc::clone(self), call: Arc::new(CallState::default()), client };
        match &function.handler {
            Handler::Sync(f) => {
                let f = Arc::clone(f);
                Work::Blocking(Box::new(move || {
                    let entered = context::enter(scope.clone());
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        Args::bind(Arc::clone(&signature), receiver, positional, keywords)
                            .and_then(|mut args| f(&mut args))
                    }));
                    drop(entered);
                    scope.call.finish();
                    finish(&signature, encode, result.map_err(|p| panic::message(&*p).to_owned()))
                }))
            }
            Handler::Async(f) => {
                let f = Arc::clone(f);
                let call = Arc::clone(&scope.call);
                let run = async move {
                    let started = catch_unwind(AssertUnwindSafe(|| {
                        Args::bind(Arc::clone(&signature), receiver, positional, keywords)
                            .and_then(|mut args| f(&mut args))
                    }));
                    let result = match started {
                        Ok(Ok(fut)) => CatchUnwind(fut).await,
                        Ok(Err(e)) => Ok(Err(e)),
                        Err(p) => Err(panic::message(&*p).to_owned()),
                    };
                    call.finish();
                    finish(&signature, encode, result)
                };
                Work::Async(Box::pin(Scoped { scope, inner: Box::pin(run) }))
            }
        }
    }

    /// The runtime, waiting for it in the moment between start-up and its
    /// creation (only async work needs it; the handshake does not).
    fn rt(&self) -> &Handle {
        self.runtime.wait()
    }

    /// Starts a job: ready answers are written at once, sync work goes to
    /// the sync pool and async work becomes a task.
    fn launch(self: &Arc<Self>, job: Job) {
        let Job { id, work, _inflight } = job;
        match work {
            Work::Ready(outcome) => self.respond(id.as_deref(), outcome),
            Work::Blocking(f) => {
                let this = Arc::clone(self);
                self.pool.submit(move || {
                    let outcome = f();
                    this.respond(id.as_deref(), outcome);
                    drop(_inflight);
                });
            }
            Work::Async(fut) => {
                let this = Arc::clone(self);
                self.rt().spawn(async move {
                    let outcome = fut.await;
                    this.respond(id.as_deref(), outcome);
                    drop(_inflight);
                });
            }
            Work::Shutdown => {
                self.begin_shutdown();
                self.respond(id.as_deref(), Ok(b"null".to_vec()));
                drop(_inflight);
                let _ = self.control.send(Control::Shutdown);
            }
        }
    }

    fn respond(&self, id: Option<&RawValue>, outcome: Outcome) {
        let Some(id) = id else { return };
        match &outcome {
            // Write the result where it was serialised: no copy of a large payload.
            Ok(result) => {
                let (prefix, suffix) = rpc::result_envelope(id);
                self.writer.write_parts(&[&prefix, result, suffix]);
            }
            Err(err) => {
                let mut frame = Vec::new();
                rpc::write_error(&mut frame, Some(id), err);
                self.writer.write_frame(frame);
            }
        }
    }

    /// Runs a batch's jobs concurrently and answers them with one array, in
    /// request order, leaving out notifications.
    async fn run_batch(self: Arc<Self>, jobs: Vec<Job>) {
        let (answers, shutdown) = self.run_jobs(jobs).await;
        if let Some(frame) = batch_frame(&answers) {
            self.writer.write_frame(frame);
        }
        if shutdown {
            self.begin_shutdown();
            let _ = self.control.send(Control::Shutdown);
        }
    }

    /// The jobs of a batch: its requests, with an error job for each invalid
    /// element; responses to the plugin's own requests are routed at once.
    fn batch_jobs(self: &Arc<Self>, messages: Vec<Message<'_>>, client: u64) -> Vec<Job> {
        let mut jobs = Vec::with_capacity(messages.len());
        for message in messages {
            match message {
                Message::Request(req) => jobs.push(self.prepare(req, client)),
                Message::Response(resp) => self.route(resp),
                Message::Invalid(id, err) => jobs.push(self.job(Some(id_or_null(id)), Work::Ready(Err(err)))),
            }
        }
        jobs
    }

    /// Runs jobs concurrently and returns their answers in request order
    /// (notifications have none), and whether one of them was
    /// `plugin.shutdown`.
    async fn run_jobs(&self, jobs: Vec<Job>) -> (Vec<Vec<u8>>, bool) {
        let mut shutdown = false;
        let mut tasks = Vec::with_capacity(jobs.len());
        for Job { id, work, _inflight } in jobs {
            shutdown |= matches!(work, Work::Shutdown);
            tasks.push((id, tokio::spawn(complete(Arc::clone(&self.pool), work)), _inflight));
        }
        let mut answers = Vec::with_capacity(tasks.len());
        let mut guards = Vec::with_capacity(tasks.len());
        for (id, task, guard) in tasks {
            let outcome = task
                .await
                .unwrap_or_else(|e| Err(RpcError::new(ErrorCode::InternalError, format!("internal error: {e}"))));
            guards.push(guard);
            if let Some(id) = id {
                let mut answer = Vec::new();
                write_response(&mut answer, &id, &outcome);
                answers.push(answer);
            }
        }
        (answers, shutdown)
    }

    /// Answers one whole message (a request or a batch) for a transport
    /// that answers in kind, such as HTTP: the response body, or `None`
    /// when only notifications were sent; and whether it held
    /// `plugin.shutdown`. Requests run as `client` (see `CallScope`).
    #[cfg(feature = "http")]
    pub(crate) async fn answer(self: &Arc<Self>, body: &[u8], client: u64) -> (Option<Vec<u8>>, bool) {
        match rpc::parse_frame(body) {
            Frame::Single(Message::Request(req)) => {
                let job = self.prepare(req, client);
                let (answers, shutdown) = self.run_jobs(vec![job]).await;
                (answers.into_iter().next(), shutdown)
            }
            Frame::Single(Message::Response(resp)) => {
                self.route(resp);
                (None, false)
            }
            Frame::Single(Message::Invalid(id, err)) => {
                let mut frame = Vec::new();
                rpc::write_error(&mut frame, id, &err);
                (Some(frame), false)
            }
            Frame::Batch(messages) => {
                let jobs = self.batch_jobs(messages, client);
                let (answers, shutdown) = self.run_jobs(jobs).await;
                (batch_frame(&answers), shutdown)
            }
        }
    }
}

/// Runs a job's work to completion wherever the caller is.
async fn complete(pool: Arc<SyncPool>, work: Work) -> Outcome {
    match work {
        Work::Ready(outcome) => outcome,
        Work::Blocking(f) => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            pool.submit(move || {
                let _ = tx.send(f());
            });
            rx.await
                .unwrap_or_else(|_| Err(RpcError::new(ErrorCode::InternalError, "internal error: a handler was lost")))
        }
        Work::Async(fut) => fut.await,
        Work::Shutdown => Ok(b"null".to_vec()),
    }
}

/// One array of a batch's answers, or `None` if it owes none.
fn batch_frame(answers: &[Vec<u8>]) -> Option<Vec<u8>> {
    if answers.is_empty() {
        return None;
    }
    let mut frame = Vec::with_capacity(answers.iter().map(|a| a.len() + 1).sum::<usize>() + 2);
    frame.push(b'[');
    for (i, answer) in answers.iter().enumerate() {
        if i > 0 {
            frame.push(b',');
        }
        frame.extend_from_slice(answer);
    }
    frame.push(b']');
    Some(frame)
}

fn id_or_null(id: Option<&RawValue>) -> Id {
    id.map_or_else(|| RawValue::from_string("null".to_owned()).expect("null is JSON"), ToOwned::to_owned)
}

fn write_response(frame: &mut Vec<u8>, id: &RawValue, outcome: &Outcome) {
    match outcome {
        Ok(result) => rpc::write_result(frame, id, result),
        Err(err) => rpc::write_error(frame, Some(id), err),
    }
}

/// Parses a method's params, which must be present.
pub(crate) fn parse_params<T: for<'de> Deserialize<'de>>(
    method: &str,
    params: Option<&RawValue>,
) -> Result<T, RpcError> {
    let Some(params) = params else {
        return Err(RpcError::new(ErrorCode::InvalidParams, format!("{method}: missing params")));
    };
    serde_json::from_str(params.get()).map_err(|e| {
        let detail = e.to_string();
        let detail = if detail.starts_with("recursion limit exceeded") {
            format!("a value is nested too deeply ({detail})")
        } else {
            detail
        };
        RpcError::new(ErrorCode::InvalidParams, format!("{method}: invalid params: {detail}"))
    })
}

/// Encodes a call's result, or names the call in its error.
fn finish(signature: &Signature, encode: Encode, result: Result<CallOutcome, String>) -> Outcome {
    let qualified = &signature.qualified;
    match result {
        Ok(Ok(Value::Remote(remote))) if matches!(encode, Encode::NewObject) => rpc::encode_result(&remote, qualified),
        Ok(Ok(other)) if matches!(encode, Encode::NewObject) => Err(RpcError::application(format!(
            "{qualified}(): the constructor returned {} instead of a new instance",
            other.type_name()
        ))),
        Ok(Ok(value)) => rpc::encode_result(&value, qualified),
        Ok(Err(e)) => Err(RpcError::application(e.into_message(qualified))),
        Err(panic) => Err(RpcError::application(format!("{qualified}(): panicked: {panic}"))),
    }
}
