//! Transports: how frames reach a [`Connection`](crate::connection::Connection).

pub(crate) mod guard;
pub(crate) mod lines;
pub(crate) mod stdio;
