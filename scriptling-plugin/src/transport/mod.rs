//! Transports: how frames reach a [`Connection`](crate::connection::Connection).

pub(crate) mod guard;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod lines;
pub(crate) mod stdio;
