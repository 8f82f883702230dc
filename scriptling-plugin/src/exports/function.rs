//! [`Function`]: a callable export (its name, parameters and handler), and
//! [`Args`]: the arguments of one call, bound to those parameters.
//!
//! `#[plugin_fn]` generates exactly these calls; writing them by hand is the
//! macro-free way to export a function:
//!
//! ```
//! use scriptling_plugin::{Args, Function};
//!
//! let greet = Function::new("greet", |args: &mut Args| {
//!     let name: String = args.take(0)?;
//!     let greeting: String = args.take_or_else(1, || "Hello".to_string())?;
//!     Ok(format!("{greeting}, {name}"))
//! })
//! .param("name")
//! .optional_param("greeting", "\"Hello\"")
//! .description("Greets someone.");
//! assert_eq!(greet.get_name(), "greet");
//! assert_eq!(greet.get_description(), "Greets someone.");
//! ```

use std::borrow::Cow;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::call::error::{CallError, Label};
use crate::call::objects::{Entry, Object, PluginClass};
use crate::exports::script;
use crate::support::quoted_names;
use crate::value::Value;
use crate::value::convert::{FromValue, IntoValue, IntoValueError};

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
pub(crate) type CallOutcome = Result<Value, CallError>;
pub(crate) type SyncHandler = dyn Fn(&mut Args) -> CallOutcome + Send + Sync;
pub(crate) type AsyncHandler = dyn Fn(&mut Args) -> Result<BoxFuture<CallOutcome>, CallError> + Send + Sync;

/// How a call runs: on the sync pool, or as a task.
#[derive(Clone)]
pub(crate) enum Handler {
    Sync(Arc<SyncHandler>),
    Async(Arc<AsyncHandler>),
}

/// One declared parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    name: Cow<'static, str>,
    default: Option<Cow<'static, str>>,
}

impl Param {
    /// The parameter's name, which is also its keyword.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The default as shown in help text, or `None` when the argument is
    /// required.
    pub fn default(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// Whether a call must supply this argument.
    pub fn is_required(&self) -> bool {
        self.default.is_none()
    }
}

/// What an error message needs to know about a callable: how to name it
/// and its parameters. Shared by every call through an `Arc`.
#[derive(Debug)]
pub(crate) struct Signature {
    /// `greet()`, `Counter.inc()`, or `can't set attribute 'value' of
    /// Counter` for a setter.
    pub(crate) label: Label,
    pub(crate) params: Vec<Param>,
}

/// A function (or method, or constructor) that Scriptling can call.
///
/// Build one with [`Function::new`] (a sync handler) or
/// [`Function::new_async`], declare its parameters in order, and register it
/// with [`Plugin::add_function`](crate::Plugin::add_function).
///
/// Setters take the plain name (`.description(..)`); the matching getters
/// are `get_*` (`.get_description()`), as in clap's builders.
///
/// ```
/// use scriptling_plugin::{Args, Function};
///
/// let greet = Function::new("greet", |args: &mut Args| {
///     let name: String = args.take(0)?;
///     let greeting: String = args.take_or_else(1, || "Hello".to_string())?;
///     Ok(format!("{greeting}, {name}"))
/// })
/// .param("name")
/// .optional_param("greeting", "\"Hello\"")
/// .description("Greets someone.");
/// assert_eq!(greet.get_name(), "greet");
/// assert_eq!(greet.get_params()[1].default(), Some("\"Hello\""));
/// ```
pub struct Function {
    name: String,
    description: String,
    source: Option<String>,
    hidden: bool,
    /// Exists only as Scriptling source: calls over RPC are refused before
    /// any argument is looked at.
    script_only: bool,
    pub(crate) signature: Arc<Signature>,
    pub(crate) handler: Handler,
}

impl Function {
    /// A function whose handler runs on the SDK's sync worker pool, so it may
    /// block (file I/O, waiting on a host callback) without delaying other
    /// calls.
    pub fn new<F, R>(name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&mut Args) -> Result<R, CallError> + Send + Sync + 'static,
        R: IntoValue,
    {
        Self::with_handler(name.into(), Handler::Sync(Arc::new(move |args| handler(args).and_then(result_value))))
    }

    /// A function whose handler returns a future, run as a tokio task.
    ///
    /// The handler takes its arguments synchronously (so argument errors are
    /// reported before anything runs) and returns the future to await.
    ///
    /// ```
    /// use scriptling_plugin::{Args, Function};
    ///
    /// let slow = Function::new_async("slow_double", |args: &mut Args| {
    ///     let n: i64 = args.take(0)?;
    ///     Ok(async move {
    ///         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    ///         Ok(n * 2)
    ///     })
    /// })
    /// .param("n");
    /// assert_eq!(slow.get_params().len(), 1);
    /// ```
    pub fn new_async<F, Fut, R>(name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&mut Args) -> Result<Fut, CallError> + Send + Sync + 'static,
        Fut: Future<Output = Result<R, CallError>> + Send + 'static,
        R: IntoValue,
    {
        Self::with_handler(
            name.into(),
            Handler::Async(Arc::new(move |args| {
                let fut = handler(args)?;
                Ok(Box::pin(async move { fut.await.and_then(result_value) }) as BoxFuture<_>)
            })),
        )
    }

    fn with_handler(name: String, handler: Handler) -> Self {
        Self {
            signature: Arc::new(Signature { label: name.as_str().into(), params: Vec::new() }),
            name,
            description: String::new(),
            source: None,
            hidden: false,
            script_only: false,
            handler,
        }
    }

    /// Declares the next parameter as required.
    pub fn param(self, name: impl Into<Cow<'static, str>>) -> Self {
        self.push_param(Param { name: name.into(), default: None })
    }

    /// Declares the next parameter as optional. `shown_default` is how the
    /// default appears in help text (`"\"Hello\""`, `"None"`); the handler
    /// supplies the value itself with [`Args::take_or_else`].
    pub fn optional_param(
        self,
        name: impl Into<Cow<'static, str>>,
        shown_default: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.push_param(Param { name: name.into(), default: Some(shown_default.into()) })
    }

    fn push_param(mut self, param: Param) -> Self {
        self.signature_mut().params.push(param);
        self
    }

    fn signature_mut(&mut self) -> &mut Signature {
        Arc::get_mut(&mut self.signature).expect("a Function's signature is shared only once it is registered")
    }

    /// Sets the help text shown by Scriptling's `help()` (after the
    /// signature line the SDK writes itself).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// Attaches Scriptling `source` that the host runs in place of its
    /// generated proxy (a wrapper around the RPC, or pure Scriptling). Any
    /// source switches the whole library to the host's script mode; see
    /// [`Plugin::script_function`](crate::Plugin::script_function).
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Keeps the function callable over RPC (`function.call`) but out of the
    /// schema, so Scriptling code sees it only through a wrapper that calls
    /// `scriptling.plugin.call_function`.
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    /// A function that exists only as Scriptling `source`: it appears in
    /// the schema, and calling it over RPC fails with a clear error.
    pub fn script_only(name: impl Into<String>, source: impl Into<String>) -> Self {
        let mut function = Function::new(name, |_: &mut Args| Ok(())).source(source);
        function.script_only = true;
        function
    }

    /// The error for an RPC call of a source-only function, if this is one.
    pub(crate) fn refuse_rpc(&self) -> Option<CallError> {
        self.script_only.then(|| {
            CallError::new(format!("{} is written in Scriptling: call it from a script, not over RPC", self.name))
        })
    }

    /// Help text: the Scriptling signature, then the doc comment. A
    /// source-only function's parameters are in its source, so it has no
    /// signature line.
    pub(crate) fn help_text(&self) -> String {
        if self.script_only {
            return self.description.clone();
        }
        script::help(&script::signature(&self.name, self.get_params()), &self.description)
    }

    /// The attached Scriptling source, if any (set by [`source`](Function::source)).
    pub fn get_source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// Whether the function is left out of the schema (set by [`hidden`](Function::hidden)).
    pub fn is_hidden(&self) -> bool {
        self.hidden
    }

    /// The exported name.
    pub fn get_name(&self) -> &str {
        &self.name
    }

    /// The help text (set by [`description`](Function::description)).
    pub fn get_description(&self) -> &str {
        &self.description
    }

    /// The declared parameters, in order.
    pub fn get_params(&self) -> &[Param] {
        &self.signature.params
    }

    /// Renames the callable in error messages (`Counter.inc`), for methods.
    pub(crate) fn qualify(mut self, qualified: String) -> Self {
        self.signature_mut().label = qualified.into();
        self
    }

    /// Names the callable as the setter of the property `qualified`
    /// (`Counter.value`), whose errors say what could not be set.
    pub(crate) fn qualify_setter(mut self, qualified: String) -> Self {
        self.signature_mut().label = Label::setter(qualified);
        self
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("params", &self.signature.params)
            .finish_non_exhaustive()
    }
}

fn result_value<R: IntoValue>(r: R) -> CallOutcome {
    returned(r.into_value())
}

/// A returned value as the call's outcome, or why it cannot be returned.
pub(crate) fn returned(value: Result<Value, IntoValueError>) -> CallOutcome {
    value.map_err(|e| match e.is_refusal() {
        true => CallError::about_call(e.to_string()),
        false => CallError::about_call(format!("cannot return the result: {e}")),
    })
}

/// The arguments of one call, bound to the callable's parameters.
///
/// Binding has already checked the call's shape (too many arguments, unknown
/// or repeated keywords, missing required ones); [`take`](Args::take)
/// converts each argument and names it in any error.
pub struct Args {
    signature: Arc<Signature>,
    slots: Vec<Option<Value>>,
    /// The object a method was called on, and the library name for its refs.
    receiver: Option<(Entry, Arc<str>)>,
}

impl Args {
    /// Binds positional and keyword arguments to `signature`'s parameters.
    pub(crate) fn bind(
        signature: Arc<Signature>,
        receiver: Option<(Entry, Arc<str>)>,
        positional: Vec<Value>,
        keywords: impl IntoIterator<Item = (String, Value)>,
    ) -> Result<Args, CallError> {
        let params = &signature.params;
        if positional.len() > params.len() {
            let got = positional.len();
            return Err(CallError::about_call(match params.len() {
                0 => format!("takes no arguments, got {got}"),
                n => format!(
                    "expected at most {n} argument{} ({}), got {got}",
                    if n == 1 { "" } else { "s" },
                    join_names(params)
                ),
            }));
        }
        let mut slots: Vec<Option<Value>> = positional.into_iter().map(Some).collect();
        slots.resize_with(params.len(), || None);
        for (key, value) in keywords {
            let Some(index) = params.iter().position(|p| p.name == key) else {
                return Err(CallError::about_call(match params.len() {
                    0 => format!("unexpected keyword argument '{key}' (takes no arguments)"),
                    _ => format!("unexpected keyword argument '{key}' (parameters: {})", join_names(params)),
                }));
            };
            if slots[index].is_some() {
                return Err(CallError::about_call(format!(
                    "argument '{key}' given twice (positionally and by keyword)"
                )));
            }
            slots[index] = Some(value);
        }
        let missing: Vec<&Param> =
            params.iter().zip(&slots).filter(|(p, s)| p.is_required() && s.is_none()).map(|(p, _)| p).collect();
        if !missing.is_empty() {
            let names = quoted_names(missing.iter().map(|p| &*p.name));
            let plural = if missing.len() == 1 { "" } else { "s" };
            return Err(CallError::about_call(format!("missing required argument{plural} {names}")));
        }
        Ok(Args { signature, slots, receiver })
    }

    /// The object a method was called on.
    ///
    /// Fails when the callable was not called as a method of a `T` object.
    pub fn receiver<T: PluginClass>(&self) -> Result<Object<T>, CallError> {
        let Some((entry, library)) = &self.receiver else {
            return Err(CallError::about_call("must be called as a method on an object"));
        };
        Object::from_entry(entry.clone(), Arc::clone(library)).ok_or_else(|| {
            CallError::about_call(format!(
                "must be called on a {} object, not a {} object",
                T::NAME,
                entry.class().name
            ))
        })
    }

    /// Takes and converts the required argument at `index`.
    pub fn take<T: FromValue>(&mut self, index: usize) -> Result<T, CallError> {
        match self.slot(index)? {
            Some(value) => self.convert(index, value),
            None => {
                Err(CallError::about_call(format!("missing required argument '{}'", self.signature.params[index].name)))
            }
        }
    }

    /// Takes and converts the argument at `index`, or computes the default
    /// when the call left it out.
    pub fn take_or_else<T: FromValue>(&mut self, index: usize, default: impl FnOnce() -> T) -> Result<T, CallError> {
        match self.slot(index)? {
            Some(value) => self.convert(index, value),
            None => Ok(default()),
        }
    }

    /// Takes the raw argument at `index`, if the call supplied it.
    pub fn take_raw(&mut self, index: usize) -> Result<Option<Value>, CallError> {
        self.slot(index)
    }

    /// The number of declared parameters.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the callable declares no parameters.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn slot(&mut self, index: usize) -> Result<Option<Value>, CallError> {
        match self.slots.get_mut(index) {
            Some(slot) => Ok(slot.take()),
            None => Err(CallError::about_call(format!(
                "the handler asked for argument {index}, but only {} parameters are declared",
                self.slots.len()
            ))),
        }
    }

    fn convert<T: FromValue>(&self, index: usize, value: Value) -> Result<T, CallError> {
        let name = &self.signature.params[index].name;
        T::from_argument(value, name).map_err(|e| match self.signature.label.is_setter() {
            // `p.name = 42`: the script assigned a value; it passed no argument.
            true => CallError::about_call(format!("the value{} {}", e.path(), e.reason())),
            false => CallError::about_call(format!("argument '{name}'{} {}", e.path(), e.reason())),
        })
    }
}

fn join_names(params: &[Param]) -> String {
    let mut out = String::new();
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}", p.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sig(params: &[(&'static str, bool)]) -> Arc<Signature> {
        Arc::new(Signature {
            label: "greet".into(),
            params: params
                .iter()
                .map(|(n, req)| Param { name: (*n).into(), default: (!req).then(|| "\"Hello\"".into()) })
                .collect(),
        })
    }

    fn bind_err(params: &[(&'static str, bool)], pos: Vec<Value>, kw: &[(&str, Value)]) -> String {
        let kw: BTreeMap<String, Value> = kw.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        match Args::bind(sig(params), None, pos, kw) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.into_message(&"greet".into()),
        }
    }

    #[test]
    fn binding_errors_name_the_function_and_parameter() {
        let p = &[("name", true), ("greeting", false)];
        assert_eq!(
            bind_err(p, vec![1.into(), 2.into(), 3.into()], &[]),
            "greet(): expected at most 2 arguments (name, greeting), got 3"
        );
        assert_eq!(bind_err(&[], vec![1.into()], &[]), "greet(): takes no arguments, got 1");
        assert_eq!(
            bind_err(p, vec![], &[("nme", "x".into())]),
            "greet(): unexpected keyword argument 'nme' (parameters: name, greeting)"
        );
        assert_eq!(
            bind_err(p, vec!["a".into()], &[("name", "b".into())]),
            "greet(): argument 'name' given twice (positionally and by keyword)"
        );
        assert_eq!(bind_err(p, vec![], &[("greeting", "x".into())]), "greet(): missing required argument 'name'");
        assert_eq!(bind_err(&[("a", true), ("b", true)], vec![], &[]), "greet(): missing required arguments 'a', 'b'");
    }

    #[test]
    fn take_converts_and_names_the_argument() {
        let mut args =
            Args::bind(sig(&[("name", true), ("greeting", false)]), None, vec![Value::Int(5)], BTreeMap::new())
                .unwrap();
        let err = args.take::<String>(0).unwrap_err().into_message(&"greet".into());
        assert_eq!(err, "greet(): argument 'name' must be a string, got int");
        assert_eq!(args.take_or_else(1, || "Hi".to_string()).unwrap(), "Hi");
        let mut args =
            Args::bind(sig(&[("names", true)]), None, vec![Value::List(vec!["a".into(), 2.into()])], BTreeMap::new())
                .unwrap();
        let err = args.take::<Vec<String>>(0).unwrap_err().into_message(&"greet".into());
        assert_eq!(err, "greet(): argument 'names'[1] must be a string, got int");
    }

    #[test]
    fn keywords_fill_parameters_by_name() {
        let kw =
            BTreeMap::from([("greeting".to_string(), Value::from("Yo")), ("name".to_string(), Value::from("Ada"))]);
        let mut args = Args::bind(sig(&[("name", true), ("greeting", false)]), None, vec![], kw).unwrap();
        assert_eq!(args.take::<String>(0).unwrap(), "Ada");
        assert_eq!(args.take_or_else(1, String::new).unwrap(), "Yo");
    }

    #[test]
    fn return_values_and_errors() {
        assert_eq!(returned(5i32.into_value()), Ok(Value::Int(5)));
        let err = returned(u64::MAX.into_value()).unwrap_err().into_message(&"f".into());
        assert!(err.starts_with("f(): cannot return the result: the u64"), "{err}");
    }
}
