//! Transports: how frames reach a [`Connection`](crate::connection::Connection).

pub(crate) mod guard;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod lines;
pub(crate) mod stdio;

/// The runtime `run` and `serve_http` serve on: one worker per core (the
/// core count is asked once, shared with the sync pool).
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(crate::pool::parallelism())
        .enable_all()
        .thread_name("scriptling-plugin")
        .build()
}
