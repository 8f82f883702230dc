//! What a running call can do and reach: its context, the host (callbacks,
//! log records), and the session's objects.
//!
//! Above `value` and `rpc`, below `exports`: a handler's arguments
//! ([`Object<T>`](objects::Object), [`Callback`](callback::Callback)) and its
//! [`Logger`](logger::Logger) live here, so the export descriptions above can
//! name them.

pub(crate) mod callback;
pub(crate) mod context;
pub(crate) mod error;
pub(crate) mod lent;
pub(crate) mod link;
pub(crate) mod logger;
pub(crate) mod logstream;
pub(crate) mod objects;
pub(crate) mod outgoing;
