//! [`Dispatcher`]: runs requests against a plugin's exports, whatever the
//! transport.
//!
//! A transport hands it one request at a time with a completion that
//! receives the request's outcome exactly once. Cheap answers (handshake,
//! ping, unknown methods) complete at once on the caller's thread; calls go
//! to the sync pool, where their params are parsed (unless the transport
//! decoded them with the envelope), looked up and bound, and sync handlers
//! run on the spot while async handlers become tasks. So a thread that
//! reads input for others (HTTP's connections, a batch) only classifies
//! envelopes: argument decoding and every error path of a call run
//! elsewhere, in parallel. (The stdio reader runs a request itself, so it
//! decodes the params in the envelope's pass: see `rpc::parse_frame_decoding`.)
//!
//! Before a call's outcome is handed over, the host must have acknowledged
//! the call's log records (see `call/logger.rs`).

use std::collections::BTreeMap;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::call::context::{self, CallScope, CallState, Scoped};
use crate::call::link::Link;
use crate::call::logger;
use crate::call::objects::{self, Entry};
use crate::exports::core::Core;
use crate::exports::function::{Args, CallOutcome, Function, Handler, Signature};
use crate::rpc::{self, CallParams, ErrorCode, Method, Params, RpcError};
use crate::runtime::inflight::{InFlight, InFlightGuard};
use crate::runtime::panic::CatchUnwind;
use crate::runtime::pool::{self, Job, SyncPool};
use crate::support::panic_message;
use crate::value::{Value, codec};

/// The serialised result JSON of a request, or its error.
pub(crate) type Outcome = Result<Vec<u8>, RpcError>;

/// Receives a request's outcome, exactly once. The request counts as in
/// flight (see [`Dispatcher::wait_idle`]) until its outcome is handed over.
pub(crate) struct Done {
    to: Box<dyn FnOnce(Outcome) + Send>,
    in_flight: Option<InFlightGuard>,
}

impl Done {
    /// Hands the outcome to `to`.
    pub(crate) fn new(to: impl FnOnce(Outcome) + Send + 'static) -> Self {
        Self { to: Box::new(to), in_flight: None }
    }

    /// Drops the outcome: the request was a notification.
    pub(crate) fn nobody() -> Self {
        // A closure that captures nothing is boxed without an allocation.
        Self::new(|_| {})
    }

    /// Hands `outcome` over; only then does the request stop being in flight.
    pub(crate) fn send(self, outcome: Outcome) {
        let Done { to, in_flight } = self;
        to(outcome);
        drop(in_flight);
    }

    /// Counts the request as in flight until the outcome is handed over.
    fn counted(mut self, guard: InFlightGuard) -> Self {
        self.in_flight = Some(guard);
        self
    }
}

/// The bytes a request was parsed from, kept alive while it runs (until its
/// params are parsed), and shared by every request of a batch.
#[derive(Clone)]
pub(crate) enum Bytes {
    /// A line copied out of the reader's buffer: one allocation.
    Copied(Arc<[u8]>),
    /// A buffer handed over whole, with no copy: a large line, an HTTP body.
    Whole(Arc<dyn AsRef<[u8]> + Send + Sync>),
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            Bytes::Copied(bytes) => bytes,
            Bytes::Whole(bytes) => (**bytes).as_ref(),
        }
    }
}

/// A request, owned: its method and its params.
pub(crate) struct Incoming {
    pub(crate) method: Method,
    params: Payload,
}

/// An owned request's params.
enum Payload {
    /// Still raw: where they are in the frame, which is kept until they
    /// are decoded.
    InFrame(Bytes, Range<usize>),
    /// Decoded already (`None`: absent).
    Decoded(Option<CallParams>),
}

/// Runs requests for one session (a stdio host, or an HTTP server's clients).
pub(crate) struct Dispatcher {
    core: Arc<Core>,
    link: Arc<Link>,
    pool: SyncPool,
    inflight: Arc<InFlight>,
    closing: AtomicBool,
}

/// A required field of `method`'s params.
fn required(method: &Method, field: Option<String>, name: &str) -> Result<String, RpcError> {
    field.ok_or_else(|| {
        RpcError::new(ErrorCode::InvalidParams, format!("{}: invalid params: missing field `{name}`", method.name()))
    })
}

/// How a call's value becomes its result.
#[derive(Clone, Copy)]
enum Encode {
    /// As a transport value.
    Value,
    /// As the bare `{"library","class","id"}` that `object.new` answers with.
    NewObject,
}

impl Dispatcher {
    /// A dispatcher for `core`, whose calls reach `link`. Sync handlers run
    /// on a pool of its own, inside `runtime` once it is set.
    pub(crate) fn new(core: Arc<Core>, link: Arc<Link>, runtime: Arc<OnceLock<Handle>>) -> Arc<Self> {
        let pool = SyncPool::new(Some(runtime), None, core.options.max_sync_threads);
        Arc::new(Self { core, link, pool, inflight: Arc::new(InFlight::default()), closing: AtomicBool::new(false) })
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    pub(crate) fn link(&self) -> &Arc<Link> {
        &self.link
    }

    /// Refuses requests from now on (the plugin is shutting down); those
    /// already running finish.
    pub(crate) fn begin_closing(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Requests still owing their outcome.
    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.count()
    }

    /// Waits until no request is in flight, or `limit` has passed. Returns
    /// whether it became idle.
    pub(crate) async fn wait_idle(&self, limit: Duration) -> bool {
        self.inflight.wait_idle(limit).await
    }

    /// Counts as a request in flight until dropped: held by a transport
    /// between reading requests and dispatching them, so shutdown cannot
    /// slip in between.
    pub(crate) fn hold(&self) -> InFlightGuard {
        self.inflight.enter()
    }

    /// Runs work on the dispatcher's sync pool.
    pub(crate) fn submit(&self, job: Box<dyn Job>) {
        self.pool.submit(job);
    }

    /// Lends `job` to the pool while this thread runs something else (see
    /// `SyncPool::defer`); [`reclaim`](Self::reclaim) takes it back. The
    /// pool holds one lent job at a time, and only the stdio reading is
    /// lent: what `reclaim` returns is the job lent last.
    pub(crate) fn defer(&self, job: Box<dyn Job>) {
        self.pool.defer(job);
    }

    /// Takes a lent job back, unless another thread has taken it.
    pub(crate) fn reclaim(&self) -> Option<Box<dyn Job>> {
        self.pool.reclaim()
    }

    /// Whether this pool thread is the only one not waiting on the host, at
    /// the pool's limit (see `SyncPool::saturated`).
    pub(crate) fn saturated(&self) -> bool {
        self.pool.saturated()
    }

    /// Runs one request for `owner` (HTTP's client, `None` on stdio); `done`
    /// gets its outcome exactly once, on whichever thread finishes it.
    /// `plugin.shutdown` belongs to the transport and never comes here.
    pub(crate) fn dispatch(self: &Arc<Self>, request: Incoming, owner: Option<Arc<str>>, done: Done) {
        let guard = self.inflight.enter();
        self.dispatch_on(request, owner, done, guard, false);
    }

    /// Like [`dispatch`](Self::dispatch), but a call is prepared (and a sync
    /// handler run) right here: for a pool thread that just read the
    /// request and has handed the reading on. `held` is the request's
    /// in-flight count, taken with [`hold`](Self::hold) before the reading
    /// was handed on.
    pub(crate) fn dispatch_here(
        self: &Arc<Self>,
        request: Incoming,
        owner: Option<Arc<str>>,
        done: Done,
        held: InFlightGuard,
    ) {
        self.dispatch_on(request, owner, done, held, true);
    }

    fn dispatch_on(
        self: &Arc<Self>,
        request: Incoming,
        owner: Option<Arc<str>>,
        done: Done,
        guard: InFlightGuard,
        here: bool,
    ) {
        let done = done.counted(guard);
        if self.closing.load(Ordering::Acquire) {
            return done.send(Err(RpcError::application("the plugin is shutting down")));
        }
        let ready = |result: &[u8]| Ok(result.to_vec());
        match &request.method {
            Method::Handshake => done.send(Ok(self.core.handshake.clone())),
            Method::Ping => done.send(ready(br#"{"status":"ok"}"#)),
            Method::EnvironmentOpen | Method::EnvironmentClose | Method::Shutdown => done.send(ready(b"null")),
            Method::Unknown(name) => {
                done.send(Err(RpcError::new(ErrorCode::MethodNotFound, format!("method not found: {name}"))));
            }
            Method::FunctionCall | Method::ObjectNew | Method::ObjectCall | Method::Destroy if here => {
                pool::enter_runtime();
                self.run(request, owner, Place::Pool, done);
            }
            Method::FunctionCall | Method::ObjectNew | Method::ObjectCall | Method::Destroy => {
                let job = CallJob { dispatcher: Arc::clone(self), request, owner, done };
                self.pool.submit(Box::new(job));
            }
        }
    }

    /// Parses, looks up and runs a call: on a pool thread, or (`Elsewhere`)
    /// on the runtime when the pool cannot take it.
    fn run(self: &Arc<Self>, request: Incoming, owner: Option<Arc<str>>, place: Place, done: Done) {
        let call = Call { owner, place };
        let Incoming { method, params } = request;
        let parsed = match params {
            Payload::Decoded(Some(params)) => Ok(params),
            Payload::Decoded(None) => parse_params(&method, None),
            // The frame (perhaps a 16 MiB line) is dropped once decoded.
            Payload::InFrame(frame, range) => parse_params(&method, Some(&frame.as_ref()[range])),
        };
        let result = match parsed {
            Ok(params) => match method {
                Method::FunctionCall => self.function_call(params, call, done),
                Method::ObjectNew => self.object_new(params, call, done),
                Method::ObjectCall => self.call_method(params, call, done),
                Method::Destroy => self.destroy(params, call, done),
                _ => unreachable!("only calls are sent to the pool"),
            },
            Err(e) => Err((e, done)),
        };
        // Each step either handed `done` on or gave it back with its error.
        if let Err((error, done)) = result {
            done.send(Err(error));
        }
    }

    fn function_call(self: &Arc<Self>, mut p: CallParams, call: Call, done: Done) -> Step {
        let name = match required(&Method::FunctionCall, p.name.take(), "name") {
            Ok(name) => name,
            Err(e) => return Err((e, done)),
        };
        let Some(function) = self.core.functions.get(&name) else {
            let message = format!("unknown function {name} (available: {})", self.core.function_list);
            return Err((RpcError::application(message), done));
        };
        if let Some(refusal) = function.refuse_rpc() {
            return Err((RpcError::application(refusal.message()), done));
        }
        self.invoke(function, None, p.arguments(), Encode::Value, call, done);
        Ok(())
    }

    fn object_new(self: &Arc<Self>, mut p: CallParams, call: Call, done: Done) -> Step {
        let class = match required(&Method::ObjectNew, p.class.take(), "class") {
            Ok(class) => class,
            Err(e) => return Err((e, done)),
        };
        let Some(entry) = self.core.classes.get(&class) else {
            let message = format!("unknown class {class} (available: {})", self.core.class_list);
            return Err((RpcError::application(message), done));
        };
        self.invoke(&entry.constructor, None, p.arguments(), Encode::NewObject, call, done);
        Ok(())
    }

    fn call_method(self: &Arc<Self>, mut p: CallParams, call: Call, done: Done) -> Step {
        let names = required(&Method::ObjectCall, p.object_id.take(), "object_id")
            .and_then(|id| Ok((id, required(&Method::ObjectCall, p.method.take(), "method")?)));
        let (object_id, name) = match names {
            Ok(names) => names,
            Err(e) => return Err((e, done)),
        };
        let Some(entry) = self.link.objects.get(&object_id, call.owner.as_deref()) else {
            return Err((RpcError::application(self.unknown_object(&object_id)), done));
        };
        let class = Arc::clone(&self.core.class_order[entry.class().index]);
        let (args, kwargs) = p.arguments();
        if let Some(method) = class.methods.get(&name) {
            self.invoke(method, Some(entry), (args, kwargs), Encode::Value, call, done);
            return Ok(());
        }
        let Some(property) = class.properties.get(&name) else {
            let message = format!("unknown method {name} on {} (available: {})", class.name(), class.member_list);
            return Err((RpcError::application(message), done));
        };
        let refused = match (args.len(), kwargs.is_empty(), &property.setter) {
            (0, true, _) => {
                self.invoke(&property.getter, Some(entry), (args, kwargs), Encode::Value, call, done);
                return Ok(());
            }
            (1, true, Some(setter)) => {
                self.invoke(setter, Some(entry), (args, kwargs), Encode::Value, call, done);
                return Ok(());
            }
            (0, false, _) => format!("property '{name}' of {} does not accept keyword arguments", class.name()),
            (1, true, None) => format!("can't set attribute '{name}': property is read-only"),
            (n, _, _) => format!(
                "property '{name}' of {} takes no arguments to get or one positional argument to set, got {n}{}",
                class.name(),
                if kwargs.is_empty() { "" } else { " and keyword arguments" }
            ),
        };
        Err((RpcError::application(refused), done))
    }

    /// Idempotent: an unknown or already destroyed id is not an error. The
    /// object's `__del__` hook and `Drop` run here, inside this request's
    /// scope, so their log records reach the host before the answer.
    fn destroy(self: &Arc<Self>, mut p: CallParams, call: Call, done: Done) -> Step {
        let object_id = match required(&Method::Destroy, p.object_id.take(), "object_id") {
            Ok(id) => id,
            Err(e) => return Err((e, done)),
        };
        let Some(entry) = self.link.objects.remove(&object_id, call.owner.as_deref()) else {
            done.send(Ok(b"null".to_vec()));
            return Ok(());
        };
        let label = format!("{}.__del__", entry.class().name);
        let then: Box<dyn FnOnce() + Send> = Box::new(move || done.send(Ok(b"null".to_vec())));
        match call.place {
            Place::Pool => self.release(vec![entry], label, call.owner, then),
            // The hooks are plugin code that may block: never on the runtime's threads.
            Place::Elsewhere(_) => {
                let dispatcher = Arc::clone(self);
                drop(tokio::task::spawn_blocking(move || dispatcher.release(vec![entry], label, call.owner, then)));
            }
        }
        Ok(())
    }

    /// Drops `entries` inside a call scope named `label` (on this thread),
    /// then runs `then` once the host has acknowledged their hooks' log
    /// records.
    pub(crate) fn release(
        &self,
        entries: Vec<Entry>,
        label: String,
        owner: Option<Arc<str>>,
        then: Box<dyn FnOnce() + Send>,
    ) {
        let call = CallState::new(label.into());
        let scope = CallScope { link: Arc::clone(&self.link), call: Arc::clone(&call), owner };
        {
            let _entered = context::enter(scope);
            objects::release(entries);
        }
        call.finish();
        logger::settle(&call, &self.link, self.core.options.log_ack_timeout, then);
    }

    /// O(1), and never lists ids: another client's object over HTTP is as
    /// unknown as one that never existed.
    fn unknown_object(&self, id: &str) -> String {
        if self.link.objects.isolates_owners() {
            format!("unknown object {id} (it does not exist, has been destroyed, or belongs to another client)")
        } else {
            let alive = self.link.objects.len();
            let plural = if alive == 1 { "" } else { "s" };
            format!("unknown object {id} (it does not exist or has been destroyed; {alive} object{plural} alive)")
        }
    }

    /// Runs `function` (on `receiver`, for methods) in a new call scope, and
    /// hands its outcome to `done` once its log records are acknowledged.
    fn invoke(
        self: &Arc<Self>,
        function: &Function,
        receiver: Option<Entry>,
        (positional, keywords): (Vec<Value>, BTreeMap<String, Value>),
        encode: Encode,
        Call { owner, place }: Call,
        done: Done,
    ) {
        // The pool could not take the call, and a sync handler needs it.
        if let (Handler::Sync(_), Place::Elsewhere(reason)) = (&function.handler, &place) {
            let message = format!("{}(): {reason}", function.signature.label);
            return done.send(Err(RpcError::application(message)));
        }
        let signature = &function.signature;
        let receiver = receiver.map(|e| (e, Arc::clone(&self.link.library)));
        let call = CallState::new(Arc::clone(&signature.label));
        let scope = CallScope { link: Arc::clone(&self.link), call: Arc::clone(&call), owner };
        let bound = self.core.options.log_ack_timeout;
        match &function.handler {
            // On this pool thread. (Borrowing what the async path must
            // clone: each clone is an atomic on a line other threads touch.)
            Handler::Sync(f) => {
                let entered = context::enter(scope);
                let result = catch_unwind(AssertUnwindSafe(|| {
                    Args::bind(Arc::clone(signature), receiver, positional, keywords).and_then(|mut args| f(&mut args))
                }));
                drop(entered);
                call.finish();
                let outcome = finish(signature, encode, result.map_err(|p| panic_message(&*p).to_owned()));
                logger::settle(&call, &self.link, bound, move || done.send(outcome));
            }
            Handler::Async(f) => {
                let f = Arc::clone(f);
                let signature = Arc::clone(signature);
                let bind_signature = Arc::clone(&signature);
                let run = async move {
                    let started = catch_unwind(AssertUnwindSafe(|| {
                        Args::bind(bind_signature, receiver, positional, keywords).and_then(|mut args| f(&mut args))
                    }));
                    match started {
                        Ok(Ok(fut)) => CatchUnwind(fut).await,
                        Ok(Err(e)) => Ok(Err(e)),
                        Err(p) => Err(panic_message(&*p).to_owned()),
                    }
                };
                let task = Scoped { scope, inner: Box::pin(run) };
                let link = Arc::clone(&self.link);
                self.link.runtime().spawn(async move {
                    let result = task.await;
                    call.finish();
                    let outcome = finish(&signature, encode, result);
                    logger::settle(&call, &link, bound, move || done.send(outcome));
                });
            }
        }
    }
}

/// A step of a call that may fail before its completion was handed on; the
/// completion comes back with the error.
type Step = Result<(), (RpcError, Done)>;

/// Where a call is being prepared.
enum Place {
    /// On a pool thread, where a sync handler can run.
    Pool,
    /// On the runtime, because the pool refused the call (the reason):
    /// async handlers still run, sync ones fail with the reason.
    Elsewhere(String),
}

/// Who a call is for, and where it is being prepared.
struct Call {
    owner: Option<Arc<str>>,
    place: Place,
}

/// A call waiting for a pool thread.
struct CallJob {
    dispatcher: Arc<Dispatcher>,
    request: Incoming,
    owner: Option<Arc<str>>,
    done: Done,
}

impl Job for CallJob {
    fn run(self: Box<Self>) {
        let CallJob { dispatcher, request, owner, done } = *self;
        pool::enter_runtime();
        dispatcher.run(request, owner, Place::Pool, done);
    }

    /// Every sync thread waits on the host: prepare the call on the runtime
    /// instead, so async handlers (and every error path) are still served.
    fn refuse(self: Box<Self>, reason: String) {
        let CallJob { dispatcher, request, owner, done } = *self;
        let runtime = dispatcher.link.runtime().clone();
        runtime.spawn(async move { dispatcher.run(request, owner, Place::Elsewhere(reason), done) });
    }
}

/// Parses a call's params, which must be present. Values may nest up to
/// the codec's depth limit.
fn parse_params(method: &Method, params: Option<&[u8]>) -> Result<CallParams, RpcError> {
    let method = method.name();
    let Some(params) = params else {
        return Err(RpcError::new(ErrorCode::InvalidParams, format!("{method}: missing params")));
    };
    codec::decode(params).map_err(|e| RpcError::new(ErrorCode::InvalidParams, format!("{method}: invalid params: {e}")))
}

/// Encodes a call's result, or names the call in its error.
fn finish(signature: &Signature, encode: Encode, result: Result<CallOutcome, String>) -> Outcome {
    let qualified = &signature.label;
    match result {
        Ok(Ok(Value::Remote(remote))) if matches!(encode, Encode::NewObject) => rpc::encode_result(&remote, qualified),
        Ok(Ok(other)) if matches!(encode, Encode::NewObject) => Err(RpcError::application(format!(
            "{qualified}(): the constructor returned {} instead of a new instance",
            other.type_name()
        ))),
        Ok(Ok(value)) => rpc::encode_value(&value, qualified),
        Ok(Err(e)) => Err(RpcError::application(e.into_message(qualified))),
        Err(panic) => Err(RpcError::application(format!("{qualified}(): panicked: {panic}"))),
    }
}

impl Incoming {
    /// The owned form of `request`, parsed from `frame`. Raw params stay
    /// in the frame (shared with the rest of a batch) until the request
    /// runs.
    pub(crate) fn new(frame: &Bytes, request: rpc::Request<'_>) -> Self {
        Self::owned(request, Some(frame)).expect("raw params have their frame")
    }

    /// The owned form of `request` if its params are decoded already (see
    /// `rpc::parse_frame_decoding`); `None` if they are raw, and need the
    /// frame.
    pub(crate) fn decoded(request: rpc::Request<'_>) -> Option<Self> {
        Self::owned(request, None)
    }

    fn owned(request: rpc::Request<'_>, frame: Option<&Bytes>) -> Option<Self> {
        let params = match request.params {
            None => Payload::Decoded(None),
            Some(Params::Call(params)) => Payload::Decoded(Some(params)),
            Some(Params::Raw(raw)) => {
                let frame = frame?;
                Payload::InFrame(frame.clone(), rpc::span(frame.as_ref(), raw))
            }
        };
        Some(Self { method: Method::parse(request.method), params })
    }
}
