//! [`Callback`]: a Scriptling function the host passed in, callable while
//! the call that received it is running.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::call::context::{self, CallScope};
use crate::call::error::CallError;
use crate::call::outgoing::{OutgoingError, Reply};
use crate::value::convert::{FromValue, FromValueError, IntoValue, IntoValueError};
use crate::value::{CallbackRef, Value, codec};

/// A host function received as an argument.
///
/// Calling it sends `callback.call` to the host, which runs the Scriptling
/// function and answers with its result. It works only while the plugin
/// call that received it is running (the host forgets callback ids when that
/// call returns); afterwards every call fails at once with an error that
/// starts `unknown callback <id>`, as the host's own would.
///
/// The four ways to call it follow one pattern: `call`, plus `_kw` to pass
/// keyword arguments, plus `_async` for `async` handlers. Each converts the
/// result to the type you ask for (`Value` takes anything):
///
/// | | positional | positional + keyword |
/// |---|---|---|
/// | sync handler (blocks its worker thread) | [`call`](Callback::call) | [`call_kw`](Callback::call_kw) |
/// | `async` handler | [`call_async`](Callback::call_async) | [`call_kw_async`](Callback::call_kw_async) |
///
/// An error the script raised comes back as `Err` with the host's message,
/// so `?` fails the outer call with it.
///
/// ```
/// use scriptling_plugin::{plugin_fn, Callback, CallError, Value};
///
/// /// Calls `on_item` for each item and returns how many it accepted.
/// #[plugin_fn]
/// fn each(items: Vec<String>, on_item: Callback) -> Result<usize, CallError> {
///     let mut accepted = 0;
///     for (index, item) in items.into_iter().enumerate() {
///         if on_item.call::<bool>((item, index))? {
///             accepted += 1;
///         }
///     }
///     // Ignore a result by asking for a `Value`.
///     on_item.call::<Value>(("done", accepted))?;
///     Ok(accepted)
/// }
/// ```
///
/// While a sync handler waits for the host's answer, its worker thread is
/// lent out: the plugin starts another thread for calls queued behind it,
/// up to [`Plugin::max_sync_threads`](crate::Plugin::max_sync_threads).
#[derive(Clone)]
pub struct Callback {
    id: String,
    scope: Option<CallScope>,
}

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Positional arguments for a callback: a tuple of convertible values
/// (`()`, `(a,)`, `(a, b)`, ...), or a `Vec<Value>`.
pub trait IntoArgs {
    /// Converts the arguments.
    fn into_args(self) -> Result<Vec<Value>, IntoValueError>;
}

impl IntoArgs for Vec<Value> {
    fn into_args(self) -> Result<Vec<Value>, IntoValueError> {
        Ok(self)
    }
}

impl IntoArgs for () {
    fn into_args(self) -> Result<Vec<Value>, IntoValueError> {
        Ok(Vec::new())
    }
}

impl<const N: usize> IntoArgs for [Value; N] {
    fn into_args(self) -> Result<Vec<Value>, IntoValueError> {
        Ok(self.into())
    }
}

macro_rules! args_tuple {
    ($($name:ident : $idx:tt),+) => {
        impl<$($name: IntoValue),+> IntoArgs for ($($name,)+) {
            fn into_args(self) -> Result<Vec<Value>, IntoValueError> {
                Ok(vec![$(self.$idx.into_value()?),+])
            }
        }
    };
}
args_tuple!(A: 0);
args_tuple!(A: 0, B: 1);
args_tuple!(A: 0, B: 1, C: 2);
args_tuple!(A: 0, B: 1, C: 2, D: 3);
args_tuple!(A: 0, B: 1, C: 2, D: 3, E: 4);
args_tuple!(A: 0, B: 1, C: 2, D: 3, E: 4, F: 5);

#[derive(Serialize)]
struct CallbackParams<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    kwargs: BTreeMap<String, Value>,
}

impl Callback {
    /// The host's id for the function (`"cb-1"`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Calls the function with positional arguments, blocking until the host
    /// answers, and converts its result to `T`.
    pub fn call<T: FromValue>(&self, args: impl IntoArgs) -> Result<T, CallError> {
        self.call_kw(args, BTreeMap::new())
    }

    /// Calls the function with positional and keyword arguments, blocking
    /// until the host answers.
    pub fn call_kw<T: FromValue>(&self, args: impl IntoArgs, kwargs: BTreeMap<String, Value>) -> Result<T, CallError> {
        if context::with_current(|scope| scope.is_some_and(|s| s.in_async)) {
            return Err(CallError::new(format!(
                "callback {}: use `call_async(..).await` in async code; the blocking form would stall the async runtime",
                self.id
            )));
        }
        let (scope, params) = self.prepare(args, kwargs)?;
        let reply = {
            let _waiting = scope.call.wait_on_host();
            let pending = scope.link.request_blocking("callback.call", &params).map_err(|e| self.failure(e))?;
            pending.wait_blocking(scope.link.waits.callback)
        };
        self.reply(reply)
    }

    /// Calls the function from async code and converts its result to `T`.
    pub async fn call_async<T: FromValue>(&self, args: impl IntoArgs) -> Result<T, CallError> {
        self.call_kw_async(args, BTreeMap::new()).await
    }

    /// Calls the function from async code, with keyword arguments.
    pub async fn call_kw_async<T: FromValue>(
        &self,
        args: impl IntoArgs,
        kwargs: BTreeMap<String, Value>,
    ) -> Result<T, CallError> {
        let (scope, params) = self.prepare(args, kwargs)?;
        let reply = {
            let _waiting = scope.call.wait_on_host();
            let pending = scope.link.request_async("callback.call", &params).map_err(|e| self.failure(e))?;
            pending.wait(scope.link.waits.callback).await
        };
        self.reply(reply)
    }

    /// Checks the callback can still be called and builds its request.
    ///
    /// The caller marks its call as waiting on the host *before* sending it:
    /// by the time the host sees the request (and may send the plugin more
    /// work), the pool already counts this thread as waiting and has handed
    /// on what was lent to it.
    fn prepare<'a>(
        &'a self,
        args: impl IntoArgs,
        kwargs: BTreeMap<String, Value>,
    ) -> Result<(&'a CallScope, CallbackParams<'a>), CallError> {
        let id = &self.id;
        let Some(scope) = &self.scope else {
            return Err(CallError::new(format!(
                "unknown callback {id}: it was received outside a plugin call, so it can never be called"
            )));
        };
        if scope.call.is_finished() {
            return Err(CallError::new(format!(
                "unknown callback {id}: it expired when the plugin call that received it returned"
            )));
        }
        let args =
            args.into_args().map_err(|e| CallError::new(format!("callback {id}: cannot send its arguments: {e}")))?;
        Ok((scope, CallbackParams { id, args, kwargs }))
    }

    fn reply<T: FromValue>(&self, reply: Reply) -> Result<T, CallError> {
        let raw = reply.map_err(|e| self.failure(e))?;
        let value: Value = codec::decode(raw.get().as_bytes())
            .map_err(|e| CallError::new(format!("callback {}: the host's answer is not a value: {e}", self.id)))?;
        T::from_value(value).map_err(|e| {
            CallError::new(format!("callback {} returned a value that{} {}", self.id, e.path(), e.reason()))
        })
    }

    fn failure(&self, error: OutgoingError) -> CallError {
        match error {
            // The script's own error: pass its message through untouched.
            OutgoingError::Remote { message, .. } => CallError::new(message),
            OutgoingError::Closed(reason) => CallError::new(format!("callback {} failed: {reason}", self.id)),
            OutgoingError::Malformed(why) => {
                CallError::new(format!("callback {}: the host's answer is malformed: {why}", self.id))
            }
            OutgoingError::TimedOut(limit) => CallError::new(format!(
                "callback {}: the host did not answer within {limit:?} (Plugin::callback_timeout)",
                self.id
            )),
            OutgoingError::Unsupported(reason) => CallError::new(reason),
            OutgoingError::Unsendable(reason) => CallError::new(format!("callback {}: {reason}", self.id)),
        }
    }
}

impl FromValue for Callback {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Callback(CallbackRef { id }) => Ok(Callback { id, scope: context::current() }),
            other => Err(FromValueError::mismatch("a function", &other)),
        }
    }
    fn expected() -> std::borrow::Cow<'static, str> {
        "a function".into()
    }
}

impl IntoValue for Callback {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Callback(CallbackRef { id: self.id }))
    }
}
