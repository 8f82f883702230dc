//! [`Callback`]: a Scriptling function the host passed in, callable while
//! the call that received it is running.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::call::context::{self, CallScope};
use crate::call::error::CallError;
use crate::call::outgoing::{OutgoingError, Reply};
use crate::rpc;
use crate::value::convert::{FromValue, FromValueError, IntoValue, IntoValueError};
use crate::value::{CallbackRef, Value};

/// A host function received as an argument.
///
/// Calling it sends `callback.call` to the host, which runs the Scriptling
/// function and answers with what it returned. It works only while the
/// plugin call that received it is running (the host forgets callback ids
/// when that call returns); afterwards every call fails at once with an
/// error that starts `unknown callback`, as the host's own would.
///
/// [`call`](Callback::call) blocks a sync handler's thread until the host
/// answers; [`call_async`](Callback::call_async) is the same for `async`
/// handlers. Both take the arguments as a tuple (`()`, `(x,)`, `(x, y)`) or
/// as [`CallArgs`] when there are keyword arguments too, and give back what
/// the function returned as a [`Returned`]: drop it to ignore the result, or
/// [`extract`](Returned::extract) the type you expect.
///
/// Errors name the plugin function and the parameter the callback came in
/// by (`each(): on_item returned a value that must be a bool, got string`),
/// and so does a failure of the script's function, whose own message
/// follows (`each(): on_item failed: division by zero`), so `?` fails the
/// outer call with an error that says where it came from. The Scriptling
/// host does not pass exceptions to plugins: a function that `raise`s
/// reaches the plugin as the host's `unsupported plugin value type
/// EXCEPTION`, which the error explains.
///
/// ```
/// use scriptling_plugin::{plugin_fn, Callback, CallError};
///
/// /// Calls `on_item` for each item and returns how many it accepted.
/// #[plugin_fn]
/// fn each(items: Vec<String>, on_item: Callback) -> Result<usize, CallError> {
///     let mut accepted = 0;
///     for (index, item) in items.into_iter().enumerate() {
///         if on_item.call((item, index))?.extract::<bool>()? {
///             accepted += 1;
///         }
///     }
///     // Whatever the script returns this time is ignored.
///     on_item.call(("done", accepted))?;
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
    /// The parameter it came in by, when it was a function's argument.
    param: Option<Cow<'static, str>>,
    scope: Option<CallScope>,
}

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback").field("id", &self.id).field("param", &self.param).finish_non_exhaustive()
    }
}

/// Arguments for a callback: positional ones, and keyword ones if any.
///
/// Tuples convert into positional arguments on their own (`()`, `(x,)`,
/// `(x, y)`, up to six), so `CallArgs` is needed only for keyword arguments
/// or for a list of arguments built at run time. A one-element tuple needs
/// its comma, `(x,)`: a bare `Vec` or tuple would be one list argument.
///
/// ```
/// use scriptling_plugin::{CallArgs, Value};
///
/// let args = CallArgs::new((1, "two")).kwarg("verbose", true);
/// let dynamic = CallArgs::from_values(vec![Value::Int(1), Value::Int(2)]);
/// # let _ = (args, dynamic);
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallArgs {
    positional: Vec<Value>,
    keyword: BTreeMap<String, Value>,
    /// The first argument that could not be converted, reported at the call.
    error: Option<IntoValueError>,
}

impl CallArgs {
    /// Positional arguments from a tuple.
    pub fn new(positional: impl IntoArgs) -> Self {
        positional.into_args().unwrap_or_else(|error| CallArgs { error: Some(error), ..CallArgs::default() })
    }

    /// Positional arguments already converted to values.
    pub fn from_values(positional: Vec<Value>) -> Self {
        CallArgs { positional, ..CallArgs::default() }
    }

    /// Adds the keyword argument `name=value` (a later one of the same name
    /// replaces it).
    pub fn kwarg(mut self, name: impl Into<String>, value: impl IntoValue) -> Self {
        match value.into_value() {
            Ok(value) => {
                self.keyword.insert(name.into(), value);
            }
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }
}

/// What a callback can be called with: a tuple of convertible values
/// (`()`, `(a,)`, `(a, b)`, ... up to six) or [`CallArgs`].
pub trait IntoArgs {
    /// Converts the arguments.
    fn into_args(self) -> Result<CallArgs, IntoValueError>;
}

impl IntoArgs for CallArgs {
    fn into_args(self) -> Result<CallArgs, IntoValueError> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self),
        }
    }
}

impl IntoArgs for () {
    fn into_args(self) -> Result<CallArgs, IntoValueError> {
        Ok(CallArgs::default())
    }
}

macro_rules! args_tuple {
    ($($name:ident : $idx:tt),+) => {
        impl<$($name: IntoValue),+> IntoArgs for ($($name,)+) {
            fn into_args(self) -> Result<CallArgs, IntoValueError> {
                Ok(CallArgs::from_values(vec![$(self.$idx.into_value()?),+]))
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

/// What a callback's Scriptling function returned.
///
/// Ignore it, or convert it with [`extract`](Returned::extract), whose error
/// names the plugin function and the callback's parameter.
///
/// It borrows the callback, so an error can name where it came from without
/// building that text for every call that succeeds.
#[derive(Debug, Clone)]
pub struct Returned<'a> {
    value: Value,
    callback: &'a Callback,
}

impl Returned<'_> {
    /// Converts the result to `T`.
    ///
    /// Fails, naming the callback and what `T` expects, when it does not fit:
    /// `each(): on_item returned a value that must be a bool, got string`.
    pub fn extract<T: FromValue>(self) -> Result<T, CallError> {
        T::from_value(self.value).map_err(|e| {
            CallError::new(format!("{} returned a value that{} {}", self.callback.origin(), e.path(), e.reason()))
        })
    }

    /// The result as it came.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The result as it came, owned.
    pub fn into_value(self) -> Value {
        self.value
    }
}

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

    /// Calls the function, blocking until the host answers.
    ///
    /// For sync handlers; `async` ones use [`call_async`](Callback::call_async)
    /// (this form fails there, since it would stall the async runtime).
    pub fn call(&self, args: impl IntoArgs) -> Result<Returned<'_>, CallError> {
        if context::in_async() {
            return Err(CallError::new(format!(
                "{}: use `call_async(..).await` in async code; the blocking form would stall the async runtime",
                self.origin()
            )));
        }
        let (scope, params) = self.prepare(args)?;
        let reply = {
            let _waiting = scope.call.wait_on_host();
            // A call run on the thread that read it reads its callback's
            // answer there (`held`).
            let (pending, held) = scope.link.request_blocking("callback.call", &params).map_err(|e| self.failure(e))?;
            pending.wait_reading(scope.link.waits.callback, held)
        };
        self.reply(reply)
    }

    /// Calls the function from async code.
    pub async fn call_async(&self, args: impl IntoArgs) -> Result<Returned<'_>, CallError> {
        let (scope, params) = self.prepare(args)?;
        let reply = {
            let _waiting = scope.call.wait_on_host();
            let pending = scope.link.request_async("callback.call", &params).map_err(|e| self.failure(e))?;
            pending.wait(scope.link.waits.callback).await
        };
        self.reply(reply)
    }

    /// `each(): on_item (cb-1)`: the plugin function, the parameter and the id.
    fn origin(&self) -> String {
        let function = self.scope.as_ref().map(|s| s.call.label());
        match (function, &self.param) {
            (Some(function), Some(param)) => format!("{function}: {param}"),
            (Some(function), None) => format!("{function}: callback {}", self.id),
            (None, Some(param)) => format!("{param}"),
            (None, None) => format!("callback {}", self.id),
        }
    }

    /// Checks the callback can still be called and builds its request.
    ///
    /// The caller marks its call as waiting on the host *before* sending it:
    /// by the time the host sees the request (and may send the plugin more
    /// work), the pool already counts this thread as waiting and has handed
    /// on what was lent to it.
    fn prepare(&self, args: impl IntoArgs) -> Result<(&CallScope, CallbackParams<'_>), CallError> {
        let id = &self.id;
        let Some(scope) = &self.scope else {
            return Err(CallError::as_is(format!(
                "unknown callback {id}: it was received outside a plugin call, so it can never be called"
            )));
        };
        if scope.call.is_finished() {
            return Err(CallError::as_is(format!(
                "unknown callback {id}: it expired when the plugin call that received it returned"
            )));
        }
        let args = args
            .into_args()
            .map_err(|e| CallError::new(format!("{}: cannot send its arguments: {e}", self.origin())))?;
        Ok((scope, CallbackParams { id, args: args.positional, kwargs: args.keyword }))
    }

    fn reply(&self, reply: Reply) -> Result<Returned<'_>, CallError> {
        let raw = reply.map_err(|e| self.failure(e))?;
        let value = rpc::decode_value(raw.get())
            .map_err(|e| CallError::new(format!("{}: the host's answer is not a value: {e}", self.origin())))?;
        Ok(Returned { value, callback: self })
    }

    fn failure(&self, error: OutgoingError) -> CallError {
        match error {
            OutgoingError::Remote { message, .. } => {
                CallError::new(format!("{} failed: {}", self.origin(), explain_host_error(&message)))
            }
            OutgoingError::Closed(reason) => CallError::new(format!("{} failed: {reason}", self.origin())),
            OutgoingError::Malformed(why) => {
                CallError::new(format!("{}: the host's answer is malformed: {why}", self.origin()))
            }
            OutgoingError::TimedOut(limit) => CallError::new(format!(
                "{}: the host did not answer within {limit:?} (Plugin::callback_timeout)",
                self.origin()
            )),
            OutgoingError::Unsupported(reason) | OutgoingError::Unsendable(reason) => {
                CallError::new(format!("{}: {reason}", self.origin()))
            }
            OutgoingError::Crowded(reason) => CallError::new(format!("{} not called: {reason}", self.origin())),
        }
    }
}

/// The host's message for a failed callback, with what it means where the
/// host's own words do not say.
///
/// The host's encoder (`plugin/codec.go`) rejects what the function gave back
/// with `unsupported plugin value type <TYPE>`, and a `raise` gives back an
/// exception object, which no version up to 0.20.1 turns into an error: its
/// message never reaches the plugin.
fn explain_host_error(message: &str) -> Cow<'_, str> {
    match message.strip_prefix("unsupported plugin value type ") {
        Some("EXCEPTION") => Cow::Owned(format!(
            "it raised an exception, and the Scriptling host does not pass exceptions or their messages \
             to plugins (the host said: {message})"
        )),
        Some(kind) => Cow::Owned(format!("it returned a {kind}, which the host cannot send to a plugin ({message})")),
        None => Cow::Borrowed(message),
    }
}

impl FromValue for Callback {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Callback(CallbackRef { id }) => Ok(Callback { id, param: None, scope: context::current() }),
            other => Err(FromValueError::mismatch("a function", &other)),
        }
    }
    fn from_argument(value: Value, param: &Cow<'static, str>) -> Result<Self, FromValueError> {
        let mut callback = Self::from_value(value)?;
        callback.param = Some(param.clone());
        Ok(callback)
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
