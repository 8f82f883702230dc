//! # scriptling-plugin
//!
//! Write [Scriptling](https://github.com/paularlott/scriptling) plugins in
//! Rust. A plugin is an executable that speaks line-delimited JSON-RPC 2.0
//! with the Scriptling host over stdin/stdout; this crate turns ordinary Rust
//! functions into such a plugin.
//!
//! ```no_run
//! use scriptling_plugin::{plugin_fn, Plugin};
//!
//! /// Returns a friendly greeting.
//! #[plugin_fn]
//! fn greet(name: String) -> String {
//!     format!("Hello, {name}")
//! }
//!
//! fn main() -> Result<(), scriptling_plugin::ServeError> {
//!     Plugin::new("hello", "1.0.0", "Greets people")
//!         .function::<greet>()
//!         .constant("default_name", "World")
//!         .run()
//! }
//! ```
//!
//! The attributes are sugar over a public builder: everything
//! `#[plugin_fn]` generates can be written by hand with [`Function`] and
//! [`Plugin::add_function`].
//!
//! The wire protocol, with a session to paste into a plugin's stdin, is in
//! `PROTOCOL.md` at the repository's root.
//!
//! # Naming
//!
//! - A plugin's instances are **objects** everywhere in this API:
//!   [`Object<T>`](Object), [`ObjectRef`], [`Value::Object`],
//!   [`into_object`], `type_name() == "object"`. Only the wire calls them
//!   `remote`.
//! - The builder types ([`Plugin`], [`Function`], [`Class`], [`Property`])
//!   use the bare name for the setter and `get_` for the getter
//!   (`description(text)` / `get_description()`), as
//!   [`std::process::Command`] does; read-only types ([`Param`],
//!   [`CallError`], [`FromValueError`]) use bare getters.
//! - Errors are built with `new` ([`CallError::new`],
//!   [`FromValueError::new`], [`IntoValueError::new`]).
//!
//! # Features
//!
//! | feature | default | gives |
//! |---|---|---|
//! | `macros` | yes | `#[plugin_fn]`, `#[plugin_class]`, `#[derive(FromValue, IntoValue)]` |
//! | `testing` | no | `scriptling_plugin::testing`: in-process and spawned hosts for your tests |
//! | `tracing` | no | `tracing` events sent to the host's log |
//! | `log` | no | `log` records sent to the host's log |
//! | `http` | no | serving over HTTP (`Plugin::serve_http`, `--listen`); turns on `multi-thread` |
//! | `multi-thread` | no | `Plugin::async_worker_threads`: async handlers on tokio's multi-thread scheduler |
//!
//! Async handlers run on one thread of their own unless
//! `Plugin::async_worker_threads` (with `multi-thread`) says otherwise: they
//! are for waiting, and sync handlers, on the SDK's pool of up to one thread
//! per core, are for computing. Tokio's multi-thread scheduler links `libm`
//! into the program: measured, a stdio plugin built with it starts ~0.1 ms
//! later (of ~1.3 ms) and idles 0.3-0.5 MiB larger. `http` links it and an HTTP
//! server into the program even where it serves stdio: such a plugin idles
//! about 0.8 MiB larger and starts ~0.15 ms later than one without. Turn it
//! on only in plugins that serve HTTP (TCP serving needs no feature).
//!
//! Items behind a feature say so on their page; these docs show every
//! feature only when built with `cargo doc --all-features --open` (as on
//! docs.rs).

#![cfg_attr(docsrs, feature(doc_cfg))]

// Layers, lowest first; a module imports only from layers below its own
// (tests/layers.rs checks): support, value, rpc, call, exports, runtime,
// transport, then the entry points (testing, bridge, fuzz).
mod bridge;
mod call;
mod exports;
mod rpc;
mod runtime;
mod support;
mod sys;
mod transport;
mod value;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzz;

#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub use bridge::tracing;

#[cfg(feature = "log")]
#[cfg_attr(docsrs, doc(cfg(feature = "log")))]
pub use bridge::log;

pub use call::callback::{CallArgs, Callback, IntoArgs, Returned};
pub use call::error::CallError;
pub use call::logger::{Level, Logger};
pub use call::objects::{Object, ObjectReadGuard, ObjectWriteGuard, PluginClass, into_object};
pub use exports::class::{Class, PluginClassMethods, Property};
pub use exports::error::{DefinitionError, ExportKind, ServeError};
pub use exports::function::{Args, Function, Param};
pub use exports::plugin::{Plugin, PluginFunction};
pub use value::convert::{FromValue, FromValueError, IntoValue, IntoValueError};
pub use value::json::Json;
pub use value::{CallbackRef, ObjectRef, Value};

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use transport::http::{CLIENT_HEADER, HttpConfig};
pub use transport::tcp::TcpConfig;

/// Exports a free function (see the attribute's full reference below).
///
/// ```
/// use scriptling_plugin::{plugin_fn, Plugin, PluginFunction};
///
/// /// Returns a greeting.
/// #[plugin_fn]
/// fn greet(name: String, #[arg(default = "Hello")] greeting: String) -> String {
///     format!("{greeting}, {name}")
/// }
///
/// // Still an ordinary function...
/// assert_eq!(greet("Ada".into(), "Hi".into()), "Hi, Ada");
/// // ...described for Scriptling by a hidden type of the same name.
/// let f = <greet as PluginFunction>::function();
/// assert_eq!(f.get_params()[1].default(), Some("\"Hello\""));
/// assert_eq!(f.get_description(), "Returns a greeting.");
/// let plugin = Plugin::new("hello", "1.0.0", "").function::<greet>();
/// # let _ = plugin;
/// ```
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use scriptling_plugin_macros::plugin_fn;
/// Exports every marked item of an inline module: nothing marked can be
/// left unregistered (see the attribute's full reference below).
///
/// ```
/// use scriptling_plugin::{plugin_module, testing::Host, Plugin, Value};
///
/// #[plugin_module]
/// mod textkit {
///     use scriptling_plugin::{plugin_class, plugin_fn};
///
///     /// How many words `text` has.
///     #[plugin_fn]
///     fn count(text: String) -> usize {
///         text.split_whitespace().count()
///     }
///
///     /// Words seen so far.
///     #[plugin_class]
///     struct Index {
///         words: Vec<String>,
///     }
///
///     #[plugin_class]
///     impl Index {
///         #[constructor]
///         fn new() -> Self {
///             Index { words: Vec::new() }
///         }
///     }
///
///     /// The version of the word rules.
///     #[constant]
///     const RULES: i64 = 3;
/// }
///
/// let plugin = Plugin::new("textkit", "1.0.0", "Text tools").exports(textkit::exports);
/// # #[cfg(feature = "testing")] {
/// let host = Host::in_process(plugin).unwrap();
/// assert_eq!(host.call("count", [Value::from("a b c")]).unwrap(), Value::Int(3));
/// # }
/// ```
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use scriptling_plugin_macros::plugin_module;

/// Exports a struct and its impl block as a class (see the attribute's full
/// reference below).
///
/// ```
/// use scriptling_plugin::{plugin_class, Plugin, PluginClass, PluginClassMethods};
///
/// /// Counts things.
/// #[plugin_class]
/// struct Counter { value: i64 }
///
/// #[plugin_class]
/// impl Counter {
///     #[constructor]
///     fn new(#[arg(default = 0)] start: i64) -> Self { Counter { value: start } }
///
///     fn inc(&mut self, amount: i64) -> i64 { self.value += amount; self.value }
///
///     #[property(settable)]
///     fn value(&self) -> i64 { self.value }
///     fn set_value(&mut self, value: i64) { self.value = value }
/// }
///
/// assert_eq!(Counter::NAME, "Counter");
/// assert_eq!(Counter::DESCRIPTION, "Counts things.");
/// assert_eq!(<Counter as PluginClassMethods>::class().get_name(), "Counter");
/// let plugin = Plugin::new("demo", "1.0.0", "").class::<Counter>();
/// # let _ = plugin;
/// ```
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use scriptling_plugin_macros::plugin_class;

/// Derives [`FromValue`](trait@FromValue) and [`IntoValue`](trait@IntoValue)
/// for your own types (see the derive's full reference below).
///
/// ```
/// use scriptling_plugin::{FromValue, IntoValue, Value};
///
/// #[derive(Debug, PartialEq, FromValue, IntoValue)]
/// #[scriptling(rename_all = "camelCase")]
/// struct FindOptions {
///     #[scriptling(default = 10)]
///     max_hits: u32,
///     case_sensitive: Option<bool>,
/// }
///
/// let dict = Value::Dict([("maxHits".to_owned(), Value::Int(3))].into());
/// let options = FindOptions::from_value(dict).unwrap();
/// assert_eq!(options, FindOptions { max_hits: 3, case_sensitive: None });
///
/// let err = FindOptions::from_value(Value::Dict([("maxHits".to_owned(), Value::from("x"))].into()));
/// assert_eq!(err.unwrap_err().to_string(), "value['maxHits'] must be an int, got string");
///
/// let back = FindOptions { max_hits: 5, case_sensitive: Some(true) }.into_value().unwrap();
/// assert_eq!(back.to_string(), r#"{"caseSensitive": True, "maxHits": 5}"#);
/// ```
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use scriptling_plugin_macros::FromValue;

/// Derives [`IntoValue`](trait@IntoValue): see [`FromValue`](macro@FromValue)
/// for the value forms and options.
///
/// ```
/// use scriptling_plugin::{IntoValue, Value};
///
/// #[derive(IntoValue)]
/// enum Shape {
///     Point,
///     Circle(f64),
///     Rect { w: f64, h: f64 },
/// }
///
/// assert_eq!(Shape::Point.into_value().unwrap(), Value::from("Point"));
/// assert_eq!(Shape::Circle(1.5).into_value().unwrap().to_string(), r#"{"Circle": 1.5}"#);
/// assert_eq!(
///     Shape::Rect { w: 2.0, h: 1.0 }.into_value().unwrap().to_string(),
///     r#"{"Rect": {"h": 1.0, "w": 2.0}}"#
/// );
/// ```
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use scriptling_plugin_macros::IntoValue;

// The READMEs' Rust snippets are compiled and run as doctests (the
// repository's guide, and this crate's own page on crates.io).
#[cfg(all(doctest, feature = "macros", feature = "testing"))]
#[doc = include_str!("../../README.md")]
mod readme {}

#[cfg(all(doctest, feature = "macros"))]
#[doc = include_str!("../README.md")]
mod crate_readme {}

/// Items used by the code the attributes generate. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::exports::private::*;
    pub use crate::value::derive::*;
}
