//! Running one call: its scope, its arguments bound to its parameters, its
//! handler (on this pool thread, or as a task), its outcome encoded, and
//! its log records acknowledged before its answer goes.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::call::context::{self, CallScope, CallState, HostWaits, Scoped};
use crate::call::link::Link;
use crate::call::logstream;
use crate::call::objects::{self, Entry};
use crate::exports::function::{Args, AsyncHandler, CallOutcome, Signature, SyncHandler};
use crate::rpc::{self, RpcError};
use crate::runtime::done::{Done, Outcome};
use crate::runtime::panic::CatchUnwind;
use crate::support::panic_message;
use crate::value::Value;
use crate::value::plain::Plain;

/// How a call's value becomes its result.
#[derive(Clone, Copy)]
pub(crate) enum Encode {
    /// As a transport value.
    Value,
    /// As the bare `{"library","class","id"}` that `object.new` answers with.
    NewObject,
    /// As `tools/call` answers: `{"success": true, "result": <plain JSON>}`.
    Tool,
}

/// A call ready to run: what it runs, on what, with which arguments.
pub(crate) struct Call {
    pub(crate) signature: Arc<Signature>,
    pub(crate) receiver: Option<Entry>,
    pub(crate) args: (Vec<Value>, BTreeMap<String, Value>),
    pub(crate) encode: Encode,
    /// The client it came from (HTTP), who owns the objects it creates.
    pub(crate) owner: Option<Arc<str>>,
}

impl Call {
    fn scope(&self, link: &Arc<Link>, pool: Option<Arc<dyn HostWaits>>) -> (Arc<CallState>, CallScope) {
        let call = CallState::new(self.signature.label.clone());
        let scope = CallScope {
            link: Arc::clone(link),
            call: Arc::clone(&call),
            owner: self.owner.clone(),
            pool,
            in_async: false,
        };
        (call, scope)
    }

    fn bind(self, link: &Link) -> Result<Args, crate::call::error::CallError> {
        let receiver = self.receiver.map(|e| (e, Arc::clone(&link.library)));
        Args::bind(self.signature, receiver, self.args.0, self.args.1)
    }
}

/// Runs a sync handler right here, on a thread of `pool`.
pub(crate) fn run_sync(link: &Arc<Link>, pool: &Arc<dyn HostWaits>, call: Call, handler: &SyncHandler, done: Done) {
    let (state, scope) = call.scope(link, Some(Arc::clone(pool)));
    let (signature, encode) = (Arc::clone(&call.signature), call.encode);
    let entered = context::enter(scope);
    let result = catch_unwind(AssertUnwindSafe(|| call.bind(link).and_then(|mut args| handler(&mut args))));
    drop(entered);
    state.finish();
    let outcome = finish(&signature, encode, result.map_err(|p| panic_message(&*p).to_owned()));
    logstream::settle(&state, link, move || done.send(outcome));
}

/// Runs an async handler as a task on the session's runtime; `cancel`
/// drops it (answering an internal error) when the session ends abruptly.
pub(crate) fn spawn_async(
    link: &Arc<Link>,
    cancel: &CancellationToken,
    call: Call,
    handler: Arc<AsyncHandler>,
    done: Done,
) {
    let Some(runtime) = link.runtime() else {
        return done.send(Err(RpcError::application("async handlers need a runtime")));
    };
    let (state, scope) = call.scope(link, None);
    let (signature, encode) = (Arc::clone(&call.signature), call.encode);
    let bind_link = Arc::clone(link);
    let run = async move {
        let started = catch_unwind(AssertUnwindSafe(|| call.bind(&bind_link).and_then(|mut args| handler(&mut args))));
        match started {
            Ok(Ok(fut)) => CatchUnwind(fut).await,
            Ok(Err(e)) => Ok(Err(e)),
            Err(p) => Err(panic_message(&*p).to_owned()),
        }
    };
    let task = Scoped::new(scope, Box::pin(run));
    let (link, cancel) = (Arc::clone(link), cancel.clone());
    runtime.spawn(async move {
        // Cancelled: `done` is dropped, and answers an internal error.
        let Some(result) = cancel.run_until_cancelled(task).await else { return };
        state.finish();
        let outcome = finish(&signature, encode, result);
        logstream::settle(&state, &link, move || done.send(outcome));
    });
}

/// Drops `entries` inside a call scope named `label` (on this thread,
/// noting in `now` the one being dropped), then runs `then` once the host
/// has acknowledged their hooks' log records. `pool` is the pool whose
/// thread this is, told when a hook waits on the host.
pub(crate) fn release(
    link: &Arc<Link>,
    entries: Vec<Entry>,
    label: &str,
    owner: Option<Arc<str>>,
    pool: Option<Arc<dyn HostWaits>>,
    now: &Mutex<Option<String>>,
    then: impl FnOnce() + Send + 'static,
) {
    let call = CallState::new(label.into());
    let scope = CallScope { link: Arc::clone(link), call: Arc::clone(&call), owner, pool, in_async: false };
    {
        let _entered = context::enter(scope);
        objects::release(entries, now);
    }
    call.finish();
    logstream::settle(&call, link, then);
}

/// Encodes a call's result, or names the call in its error.
fn finish(signature: &Signature, encode: Encode, result: Result<CallOutcome, String>) -> Outcome {
    let label = &signature.label;
    match result {
        Ok(Ok(Value::Object(remote))) if matches!(encode, Encode::NewObject) => rpc::encode_result(&remote, label),
        Ok(Ok(other)) if matches!(encode, Encode::NewObject) => Err(RpcError::application(format!(
            "{label}: the constructor returned {} instead of a new instance",
            other.type_name()
        ))),
        Ok(Ok(value)) if matches!(encode, Encode::Tool) => {
            #[derive(serde::Serialize)]
            struct Answer<'a> {
                success: bool,
                result: Plain<'a>,
            }
            rpc::encode_result(&Answer { success: true, result: Plain(&value) }, label)
        }
        Ok(Ok(value)) => rpc::encode_value(value, label),
        Ok(Err(e)) => Err(RpcError::application(e.into_message(label))),
        Err(panic) => Err(RpcError::application(format!("{label}: panicked: {panic}"))),
    }
}
