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

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod class;
pub mod codec;
pub mod convert;
pub mod function;

mod callback;
mod connection;
mod context;
mod error;
mod inflight;
mod json;
mod logger;
mod objects;
mod outgoing;
mod panic;
mod plugin;
mod pool;
mod rpc;
mod schema;
mod script;
mod transport;
mod value;
mod writer;

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(feature = "tracing")]
#[path = "tracing_bridge.rs"]
pub mod tracing;

#[cfg(feature = "log")]
#[path = "log_bridge.rs"]
pub mod log;

pub use callback::{Callback, IntoArgs};
pub use class::{Class, PluginClass, PluginClassMethods, Property};
pub use convert::{FromValue, FromValueError, IntoValue, IntoValueError};
pub use error::{CallError, ErrorCode, RpcError, ServeError};
pub use function::{Args, Function, IntoCallResult, Param};
pub use json::Json;
pub use logger::{Level, Logger};
pub use objects::{ReadGuard, Ref, WriteGuard, into_remote};
pub use plugin::{Plugin, PluginFunction};
pub use value::{CallbackRef, RemoteRef, Value};

#[cfg(feature = "http")]
pub use transport::http::{CLIENT_HEADER, HttpConfig};

#[cfg(feature = "macros")]
pub use scriptling_plugin_macros::{plugin_class, plugin_fn};

/// Items used by the code the attributes generate. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::class::ConstructorReturn;
    pub use crate::function::IntoCallResult;
}
