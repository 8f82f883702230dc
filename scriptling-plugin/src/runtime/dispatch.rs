//! [`Dispatcher`]: routes requests to a plugin's exports, whatever the
//! transport.
//!
//! A transport hands it one request at a time with a [`Done`] that receives
//! the request's outcome exactly once. Cheap answers (handshake, ping,
//! unknown methods) complete at once on the caller's thread. A call is
//! looked up and run where its handler belongs (a sync handler on the pool,
//! or on the thread that read it as the pool's guest; an async one as a
//! task) by a job that first decodes its params if they are still raw: a
//! session decodes a short line's with the envelope (`rpc::parse_line`, a
//! few microseconds at most), and leaves a longer line's to the job, so
//! that a large payload never holds up the reading.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::call::context::HostWaits;
use crate::call::link::Link;
use crate::call::objects::Entry;
use crate::exports::core::Core;
use crate::exports::function::{Function, Handler};
use crate::rpc::{self, CallParams, ErrorCode, Method, Params, RpcError};
use crate::runtime::done::Done;
use crate::runtime::inflight::InFlight;
use crate::runtime::invoke::{self, Call, Encode};
use crate::runtime::pool::{Job, Pool};
use crate::value::plain::PlainObject;
use crate::value::{codec, taken};

/// The bytes a request was parsed from, kept alive while its params are
/// still raw, and shared by every request of a batch.
#[derive(Clone)]
pub(crate) enum Bytes {
    /// A line copied out of the reader's buffer, checked as UTF-8 once when
    /// read: one allocation, and its params are not checked again.
    Text(Arc<str>),
    /// A large line handed over whole, with no copy, checked as `Text` is.
    WholeText(Arc<String>),
    /// A buffer handed over whole, not checked yet: an HTTP body.
    #[cfg(feature = "http")]
    Whole(Arc<dyn AsRef<[u8]> + Send + Sync>),
}

impl Bytes {
    /// The frame as text, when it was checked as UTF-8 on arrival.
    pub(crate) fn text(&self) -> Option<&str> {
        match self {
            Bytes::Text(text) => Some(text),
            Bytes::WholeText(text) => Some(text),
            #[cfg(feature = "http")]
            Bytes::Whole(_) => None,
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            Bytes::Text(text) => text.as_bytes(),
            Bytes::WholeText(text) => text.as_bytes(),
            #[cfg(feature = "http")]
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
    /// A call's, decoded with the envelope (`rpc::parse_line`).
    Decoded(Box<CallParams>),
    /// Absent or `null`.
    Absent,
}

impl Incoming {
    /// The owned form of `request`, parsed from `text`. Raw params stay in
    /// the frame `text` is kept in (`frame`: made only for them, and shared
    /// with the rest of a batch) until the request runs.
    pub(crate) fn new(request: rpc::Request<'_>, text: &[u8], frame: impl FnOnce() -> Bytes) -> Self {
        let params = match request.params {
            Params::Raw(None) => Payload::Absent,
            Params::Raw(Some(raw)) => Payload::InFrame(frame(), rpc::span(text, raw)),
            Params::Decoded(params) => Payload::Decoded(params),
        };
        Self { method: Method::parse(request.method), params }
    }

    /// The `token` a `hello` presents, if its params carry a string one.
    pub(crate) fn token(&self) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Hello {
            #[serde(default)]
            token: Option<String>,
        }
        let Payload::InFrame(frame, range) = &self.params else { return None };
        serde_json::from_slice::<Hello>(&frame.as_ref()[range.clone()]).ok()?.token
    }
}

/// Runs requests for one session (a stdio host, a TCP connection, or an
/// HTTP server's clients). Sessions may share one [`Pool`] (a TCP server's
/// connections do); whoever made the pool closes it.
pub(crate) struct Dispatcher {
    core: Arc<Core>,
    link: Arc<Link>,
    pool: Pool,
    /// `pool`, as calls running on it tell it they wait on the host.
    host_waits: Arc<dyn HostWaits>,
    inflight: Arc<InFlight>,
    /// Cancels async calls, and refuses queued sync ones, when the session
    /// ends without waiting for them.
    cancel: CancellationToken,
}

impl Dispatcher {
    /// A dispatcher for `core`, whose calls reach `link`; sync handlers run
    /// on `pool`.
    pub(crate) fn new(core: Arc<Core>, link: Arc<Link>, pool: Pool) -> Arc<Self> {
        let host_waits = pool.host_waits();
        Arc::new(Self {
            core,
            link,
            pool,
            host_waits,
            inflight: Arc::new(InFlight::default()),
            cancel: CancellationToken::new(),
        })
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    pub(crate) fn link(&self) -> &Arc<Link> {
        &self.link
    }

    /// Refuses requests from now on (the plugin is shutting down); those
    /// already let in finish.
    pub(crate) fn begin_closing(&self) {
        self.inflight.close();
    }

    /// Requests still owing their outcome.
    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.count()
    }

    /// Keeps when the last request in flight finishes (an idle limit
    /// counts from it).
    pub(crate) fn time_finishes(&self) {
        self.inflight.time_finishes();
    }

    /// When the last request in flight finished (`None` before any did, or
    /// before [`time_finishes`](Self::time_finishes)).
    pub(crate) fn last_finished(&self) -> Option<Instant> {
        self.inflight.last_finished()
    }

    /// Waits until no request is in flight, or `deadline` has passed.
    /// Returns whether it became idle.
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
        self.inflight.wait_idle(deadline)
    }

    /// Ends the session's work without waiting for it: async calls are
    /// cancelled, and its sync calls still queued are refused when a thread
    /// takes them. (Sync handlers already running cannot be stopped; their
    /// answers have nowhere to go.) The pool itself is its maker's to close.
    pub(crate) fn abandon(&self) {
        self.cancel.cancel();
    }

    /// Whether the session's work was abandoned: queued jobs refuse to run.
    fn abandoned(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Runs one request for `owner` (HTTP's client, `None` on stdio); `done`
    /// gets its outcome exactly once, on whichever thread finishes it.
    /// `plugin.shutdown` belongs to the transport and never comes here.
    #[cfg(feature = "http")]
    pub(crate) fn dispatch(self: &Arc<Self>, request: Incoming, owner: Option<Arc<str>>, done: Done) {
        if let Some(job) = self.dispatch_or_hand_back(request, owner, done) {
            self.pool.submit(job);
        }
    }

    /// As [`dispatch`](Self::dispatch), but a request that would go to the
    /// pool (a call, its params still to decode) is handed back: the caller
    /// runs it ([`Pool::guest`]) or submits it to [`pool`](Self::pool).
    pub(crate) fn dispatch_or_hand_back(
        self: &Arc<Self>,
        request: Incoming,
        owner: Option<Arc<str>>,
        done: Done,
    ) -> Option<Box<dyn Job>> {
        let Some(guard) = self.inflight.enter() else {
            done.send(Err(RpcError::application("the plugin is shutting down")));
            return None;
        };
        let done = done.counted(guard);
        let ready = |result: &[u8]| Ok(result.to_vec().into());
        let answer = match &request.method {
            Method::Handshake => {
                self.link.heard_handshake();
                Ok(self.core.handshake.clone().into())
            }
            Method::Ping => ready(br#"{"status":"ok"}"#),
            Method::Hello => Ok(self.core.bridge().hello.clone().into()),
            Method::ToolsList => Ok(self.core.bridge().tools.clone().into()),
            Method::ToolsCall => match request.params {
                params @ Payload::InFrame(..) => {
                    return Some(self.decode_job(request.method, params, owner, done));
                }
                Payload::Absent => {
                    let message = "tools/call: invalid params: expected {\"name\": ..., \"arguments\": {...}}";
                    Err(RpcError::new(ErrorCode::InvalidParams, message))
                }
                // Only a call's params are decoded with the envelope.
                Payload::Decoded(_) => Err(RpcError::new(
                    ErrorCode::InternalError,
                    "internal error: tools/call params were decoded as a call's",
                )),
            },
            Method::EnvironmentOpen | Method::EnvironmentClose | Method::Shutdown => ready(b"null"),
            Method::Unknown(name) => Err(RpcError::new(ErrorCode::MethodNotFound, format!("method not found: {name}"))),
            Method::FunctionCall | Method::ObjectNew | Method::ObjectCall | Method::Destroy => match request.params {
                Payload::Absent => {
                    self.route(request.method, None, owner, done, Here::Away);
                    return None;
                }
                params @ (Payload::InFrame(..) | Payload::Decoded(_)) => {
                    return Some(self.decode_job(request.method, params, owner, done));
                }
            },
        };
        done.send(answer);
        None
    }

    /// The pool this session's sync handlers run on.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A job that decodes a request's params, if still raw, and runs the
    /// request.
    fn decode_job(
        self: &Arc<Self>,
        method: Method,
        params: Payload,
        owner: Option<Arc<str>>,
        done: Done,
    ) -> Box<dyn Job> {
        Box::new(DecodeJob { dispatcher: Arc::clone(self), method, params, owner, done })
    }

    /// Looks a call up and runs it where its handler belongs: `here` says
    /// whether this is a pool thread (where a sync handler runs at once).
    fn route(
        self: &Arc<Self>,
        method: Method,
        params: Option<CallParams>,
        owner: Option<Arc<str>>,
        done: Done,
        here: Here,
    ) {
        let params = match params {
            Some(params) => params,
            None => {
                let message = format!("{}: missing params", method.name());
                return done.send(Err(RpcError::new(ErrorCode::InvalidParams, message)));
            }
        };
        let target = match method {
            Method::Destroy => return self.destroy(params, owner, done, here),
            Method::FunctionCall => self.function_call(params),
            Method::ObjectNew => self.object_new(params),
            _ => self.call_method(params, owner.as_deref()),
        };
        let (function, receiver, args, encode) = match target {
            Ok(target) => target,
            Err(error) => return done.send(Err(error)),
        };
        let call = Call { signature: Arc::clone(&function.signature), receiver, args, encode, owner };
        self.run(function, call, done, here);
    }

    /// Runs `call` of `function` where its handler belongs.
    fn run(self: &Arc<Self>, function: &Function, call: Call, done: Done, here: Here) {
        match (&function.handler, here) {
            (Handler::Async(handler), _) => {
                invoke::spawn_async(&self.link, &self.cancel, call, Arc::clone(handler), done)
            }
            (Handler::Sync(handler), Here::Pool) => {
                invoke::run_sync(&self.link, &self.host_waits, call, &**handler, done)
            }
            (Handler::Sync(handler), Here::Away) => {
                let job = CallJob { dispatcher: Arc::clone(self), call, handler: Arc::clone(handler), done };
                self.pool.submit(Box::new(job));
            }
        }
    }

    /// `tools/call`: an exported function by name, with plain JSON
    /// arguments by keyword; its value is answered as plain JSON in
    /// `{"success": true, "result": ...}`.
    fn tools_call(self: &Arc<Self>, params: ToolParams, owner: Option<Arc<str>>, done: Done, here: Here) {
        let Some(name) = params.name else {
            let message = "tools/call: invalid params: missing field `name`";
            return done.send(Err(RpcError::new(ErrorCode::InvalidParams, message)));
        };
        let function = self.core.functions.get(&name).filter(|f| !f.is_hidden() && f.refuse_rpc().is_none());
        let Some(function) = function else {
            // The Supex runtime's health check, which its driver's `status`
            // calls as a tool: built in, unless the plugin has its own.
            if name == "ping" {
                return done.send(Ok(self.core.bridge().ping_tool.clone().into()));
            }
            let message = format!("unknown tool {name} (available: {})", self.core.function_list);
            return done.send(Err(RpcError::new(ErrorCode::InvalidParams, message)));
        };
        let kwargs = params.arguments.map(|a| a.0).unwrap_or_default();
        let signature = Arc::clone(&function.signature);
        let call = Call { signature, receiver: None, args: (Vec::new(), kwargs), encode: Encode::Tool, owner };
        self.run(function, call, done, here);
    }

    fn function_call(&self, mut p: CallParams) -> Result<Target<'_>, RpcError> {
        let name = required(&Method::FunctionCall, p.name.take(), "name")?;
        let Some(function) = self.core.functions.get(&name) else {
            let message = format!("unknown function {name} (available: {})", self.core.function_list);
            return Err(RpcError::application(message));
        };
        if let Some(refusal) = function.refuse_rpc() {
            return Err(RpcError::application(refusal.message()));
        }
        Ok((function, None, p.arguments(), Encode::Value))
    }

    fn object_new(&self, mut p: CallParams) -> Result<Target<'_>, RpcError> {
        let class = required(&Method::ObjectNew, p.class.take(), "class")?;
        let Some(entry) = self.core.classes.get(&class) else {
            let message = format!("unknown class {class} (available: {})", self.core.class_list);
            return Err(RpcError::application(message));
        };
        Ok((&entry.constructor, None, p.arguments(), Encode::NewObject))
    }

    fn call_method(&self, mut p: CallParams, owner: Option<&str>) -> Result<Target<'_>, RpcError> {
        let object_id = required(&Method::ObjectCall, p.object_id.take(), "object_id")?;
        let name = required(&Method::ObjectCall, p.method.take(), "method")?;
        let Some(entry) = self.link.objects.get(&object_id, owner) else {
            return Err(RpcError::application(self.unknown_object(&object_id)));
        };
        let class = &self.core.class_order[entry.class().index];
        let (args, kwargs) = p.arguments();
        if let Some(method) = class.methods.get(&name) {
            return Ok((method, Some(entry), (args, kwargs), Encode::Value));
        }
        let Some(property) = class.properties.get(&name) else {
            let message = format!("unknown method {name} on {} (available: {})", class.name(), class.member_list);
            return Err(RpcError::application(message));
        };
        let refused = match (args.len(), kwargs.is_empty(), &property.setter) {
            (0, true, _) => return Ok((&property.getter, Some(entry), (args, kwargs), Encode::Value)),
            (1, true, Some(setter)) => return Ok((setter, Some(entry), (args, kwargs), Encode::Value)),
            (0, false, _) => format!("property '{name}' of {} does not accept keyword arguments", class.name()),
            (1, true, None) => format!("can't set attribute '{name}' of {}: property is read-only", class.name()),
            (n, _, _) => format!(
                "property '{name}' of {} takes no arguments to get or one positional argument to set, got {n}{}",
                class.name(),
                if kwargs.is_empty() { "" } else { " and keyword arguments" }
            ),
        };
        Err(RpcError::application(refused))
    }

    /// Idempotent: an unknown or already destroyed id is not an error. The
    /// object's `__del__` hook and `Drop` run on the pool, inside this
    /// request's scope, so their log records reach the host before the
    /// answer.
    fn destroy(self: &Arc<Self>, mut p: CallParams, owner: Option<Arc<str>>, done: Done, here: Here) {
        let object_id = match required(&Method::Destroy, p.object_id.take(), "object_id") {
            Ok(id) => id,
            Err(e) => return done.send(Err(e)),
        };
        let Some(entry) = self.link.objects.remove(&object_id, owner.as_deref()) else {
            return done.send(Ok(b"null".to_vec().into()));
        };
        let pool = Some(Arc::clone(&self.host_waits));
        let job = DestroyJob { link: Arc::clone(&self.link), entry, owner, pool, done };
        match here {
            Here::Pool => Box::new(job).run(),
            Here::Away => self.pool.submit(Box::new(job)),
        }
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
}

/// `tools/call`'s params: a function's name and its arguments by keyword,
/// as plain JSON.
#[derive(serde::Deserialize)]
struct ToolParams {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<PlainObject>,
}

/// What a call runs, on what, with which arguments, and how its value is sent.
type Target<'a> = (
    &'a Function,
    Option<Entry>,
    (Vec<crate::value::Value>, std::collections::BTreeMap<String, crate::value::Value>),
    Encode,
);

/// Where a call is being routed from.
#[derive(Clone, Copy)]
enum Here {
    /// A pool thread: a sync handler runs right here.
    Pool,
    /// Anywhere else: a sync handler goes to the pool.
    Away,
}

/// A required field of `method`'s params.
fn required(method: &Method, field: Option<String>, name: &str) -> Result<String, RpcError> {
    field.ok_or_else(|| {
        RpcError::new(ErrorCode::InvalidParams, format!("{}: invalid params: missing field `{name}`", method.name()))
    })
}

/// The number of cores this process may use, asked once: it reads cgroup
/// files, which is a measurable part of a plugin's start-up.
pub(crate) fn parallelism() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, usize::from))
}

/// Why a job of an abandoned session does not run.
const ABANDONED: &str = "the plugin is shutting down";

/// A call whose params may still be raw: decoded, looked up and run on the
/// pool (or by the thread that read it, as the pool's guest).
struct DecodeJob {
    dispatcher: Arc<Dispatcher>,
    method: Method,
    params: Payload,
    owner: Option<Arc<str>>,
    done: Done,
}

impl DecodeJob {
    fn decode_and_route(self, here: Here) {
        let DecodeJob { dispatcher, method, params, owner, done } = self;
        let (frame, range) = match params {
            Payload::InFrame(frame, range) => (frame, range),
            Payload::Decoded(params) => return dispatcher.route(method, Some(*params), owner, done, here),
            Payload::Absent => return dispatcher.route(method, None, owner, done, here),
        };
        if method == Method::ToolsCall {
            let parsed = codec::decode::<ToolParams>(&frame.as_ref()[range]);
            drop(frame);
            return match parsed {
                Ok(params) => dispatcher.tools_call(params, owner, done, here),
                Err(e) => {
                    let message = format!("tools/call: invalid params: {}", rpc::json_error(&e));
                    done.send(Err(RpcError::new(ErrorCode::InvalidParams, message)))
                }
            };
        }
        let parsed = match frame {
            // A large line of this request's alone: a large string in it
            // takes the line over instead of being copied out of it.
            Bytes::WholeText(line) => match Arc::try_unwrap(line) {
                Ok(line) => taken::decode_owned::<CallParams>(line, range),
                Err(line) => codec::decode_str_range::<CallParams>(&line, range),
            },
            frame => match frame.text() {
                Some(text) => codec::decode_str_range::<CallParams>(text, range),
                None => codec::decode::<CallParams>(&frame.as_ref()[range]),
            },
        };
        // The frame (perhaps a 16 MiB line) was let go of once decoded, or
        // became the large string in the params.
        match parsed {
            Ok(params) => dispatcher.route(method, Some(params), owner, done, here),
            Err(e) => {
                let message = format!("{}: invalid params: {}", method.name(), rpc::json_error(&e));
                done.send(Err(RpcError::new(ErrorCode::InvalidParams, message)));
            }
        }
    }
}

impl Job for DecodeJob {
    fn run(self: Box<Self>) {
        if self.dispatcher.abandoned() {
            return self.done.send(Err(RpcError::application(ABANDONED)));
        }
        self.decode_and_route(Here::Pool);
    }

    /// Every sync thread waits on the host: decode elsewhere, so an async
    /// handler is still served (a sync one is then refused with the reason).
    fn refuse(self: Box<Self>, _reason: String) {
        match self.dispatcher.link.runtime().cloned() {
            Some(runtime) => drop(runtime.spawn_blocking(move || self.decode_and_route(Here::Away))),
            None => self.done.send(Err(RpcError::application("the plugin is shutting down"))),
        }
    }
}

/// A sync call waiting for a pool thread.
struct CallJob {
    dispatcher: Arc<Dispatcher>,
    call: Call,
    handler: Arc<crate::exports::function::SyncHandler>,
    done: Done,
}

impl Job for CallJob {
    fn run(self: Box<Self>) {
        let CallJob { dispatcher, call, handler, done } = *self;
        if dispatcher.abandoned() {
            return done.send(Err(RpcError::application(ABANDONED)));
        }
        invoke::run_sync(&dispatcher.link, &dispatcher.host_waits, call, &*handler, done);
    }

    fn refuse(self: Box<Self>, reason: String) {
        let message = format!("{}: {reason}", self.call.signature.label);
        self.done.send(Err(RpcError::application(message)));
    }
}

/// An object being destroyed: its hooks are plugin code that may block.
struct DestroyJob {
    link: Arc<Link>,
    entry: Entry,
    owner: Option<Arc<str>>,
    /// The pool the hooks run on, told when they wait on the host (`None`
    /// off the pool).
    pool: Option<Arc<dyn HostWaits>>,
    done: Done,
}

impl Job for DestroyJob {
    fn run(self: Box<Self>) {
        let DestroyJob { link, entry, owner, pool, done } = *self;
        let label = format!("{}.__del__", entry.class().name);
        let now = Mutex::new(None);
        let then = move || done.send(Ok(b"null".to_vec().into()));
        invoke::release(&link, vec![entry], &label, owner, pool, &now, then);
    }

    /// Every sync thread waits on the host: run the hooks on a blocking
    /// thread of the runtime instead (the object is already gone).
    fn refuse(self: Box<Self>, _reason: String) {
        match self.link.runtime().cloned() {
            Some(runtime) => drop(runtime.spawn_blocking(move || Box::new(DestroyJob { pool: None, ..*self }).run())),
            None => self.done.send(Ok(b"null".to_vec().into())),
        }
    }
}
