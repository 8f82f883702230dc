//! Serving a plugin over HTTP (feature `http`), safe to face a network.
//!
//! A Scriptling host loads it with
//! `scriptling.plugin.load(name, "http://127.0.0.1:8081/json-rpc", scriptling=True, headers={...})`.
//!
//! - `POST <path>` (default `/json-rpc`) with one request or a batch; a body
//!   of notifications only is answered `204 No Content`; any other method is
//!   `405`; a body over the limit is `413`, refused from its `Content-Length`
//!   or as soon as it streams past the limit, never read whole; a body that
//!   is not JSON is a JSON-RPC `-32700`.
//! - With a token, every request must carry `Authorization: Bearer <token>`
//!   (scheme in any case), compared in constant time; otherwise `401` with
//!   JSON-RPC error `-32001`, before anything else about the request
//!   (its body included) is read.
//! - `ping` answers `{"status":"ok"}` (on stdio too), for health checks.
//! - Clients are kept apart. A client that sends `X-Scriptling-Client: <id>`
//!   owns the objects it creates; object ids are 128 random bits, and an id
//!   that names another client's object is as unknown as one that never
//!   existed. Errors never list ids. `plugin.shutdown` stops nothing (the
//!   server serves other clients): it releases the objects of the client
//!   that sent it. Objects idle longer than the object TTL are destroyed,
//!   and all of them when the server stops.
//! - The host cannot be called back over HTTP: a `Callback` fails with
//!   "callbacks need a stdio or TCP connection; HTTP cannot reach the
//!   host", and log records go to stderr.
//! - Slow or hostile clients cannot hold the server down: header, body and
//!   idle timeouts close what dawdles, the number of connections is
//!   bounded (one over the limit is answered `503` and closed gracefully,
//!   so the client reads that answer, not a reset), and running out of
//!   file handles backs off (reported at most about once a second) and
//!   recovers when handles free up.
//! - SIGINT or SIGTERM stops the server gracefully: no new requests,
//!   in-flight ones finish (up to the shutdown grace), every object is
//!   destroyed, and `serve_http` returns `Ok(())`. A second signal exits at
//!   once.
//!
//! Every limit, its default and its variable are listed on [`HttpConfig`].
//!
//! Built on hyper 1 (HTTP/1.1) rather than a web framework: one route needs
//! no router, and hyper gives exact control of status codes and of the
//! streaming body limit.

mod config;
mod conn;
mod service;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::runtime::Handle;

pub use config::HttpConfig;
pub(crate) use config::parse_addr;
pub use service::CLIENT_HEADER;

use crate::call::link::Link;
use crate::call::objects::{Limit, ObjectTable};
use crate::exports::core::Core;
use crate::exports::error::ServeError;
use crate::runtime::dispatch::Dispatcher;
use crate::runtime::pool::Pool;
use crate::runtime::teardown;
use crate::transport::async_runtime;
use crate::transport::http::conn::{Activity, Watched};
use crate::transport::http::service::Service;
use crate::transport::refusals::Refusals;
use crate::transport::tcp::{LINGER, LINGER_BYTES};

/// Serves with a runtime of its own until SIGINT or SIGTERM.
pub(crate) fn run(core: Core, config: HttpConfig) -> Result<(), ServeError> {
    crate::sys::raise_file_limit(config.max_connections);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let stop_on_signal = move || {
        let _ = stop_tx.send(());
    };
    super::serve_owning_process(core.options.panic_backtraces, stop_on_signal, || {
        // A server's connections are tasks: they run side by side, one
        // worker per core unless the plugin says how many.
        let rt = async_runtime::multi_thread(core.options.async_workers.unwrap_or(0))?;
        let served = rt.block_on(async {
            let stop = async {
                // Without signals (already caught elsewhere), serve until killed.
                if stop_rx.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            serve(Arc::new(core), config, stop, |_| {}).await
        });
        // Handlers still running past the grace period are abandoned, not waited for.
        rt.shutdown_background();
        served
    })
}

/// Serves until `stop` resolves, then finishes in-flight requests, destroys
/// every object and returns. `bound` is told the address actually bound.
pub(crate) async fn serve(
    core: Arc<Core>,
    config: HttpConfig,
    stop: impl Future<Output = ()>,
    bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let listener = listen(config.addr)?;
    let local = listener.local_addr()?;
    eprintln!("scriptling-plugin: {} listening at http://{local}{}", core.library, config.path);
    if !local.ip().is_loopback() && config.token.is_none() {
        eprintln!(
            "scriptling-plugin: warning: serving on {local} without a token; anyone who can reach it can call the plugin (set SCRIPTLING_PLUGIN_TOKEN)"
        );
    }
    bound(local);
    let grace = core.options.shutdown_grace;
    let runtime = Handle::current();
    let classes = core.class_order.iter().map(|c| Arc::clone(&c.info));
    let limit = Limit {
        most: config.max_objects,
        setting: "SCRIPTLING_PLUGIN_MAX_OBJECTS, HttpConfig::max_objects",
        owner: "client",
    };
    let objects = ObjectTable::generated(random_id, Some(limit));
    let waits = core.options.waits;
    // HTTP cannot carry the plugin's own requests: no host channel.
    let options = &core.options;
    let pool = Pool::for_options(runtime.clone(), options);
    let link = Link::new(Arc::clone(&core.library), objects, classes, None, Some(runtime), waits);
    let dispatcher = Dispatcher::new(core, Arc::new(link), pool.clone());
    let sweeper = config.object_ttl.map(|ttl| tokio::spawn(expire_idle_objects(Arc::clone(&dispatcher), ttl)));
    let service = Arc::new(Service { dispatcher: Arc::clone(&dispatcher), config });
    let connections = GracefulShutdown::new();
    let open = Arc::new(AtomicUsize::new(0));
    let lingering = Arc::new(AtomicUsize::new(0));
    let mut refusals = Refusals::default();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    refusals.recovered();
                    serve_connection(stream, &service, &connections, &open, &lingering);
                }
                Err(e) => tokio::time::sleep(refusals.failed(&e)).await,
            }
        }
    }
    eprintln!("scriptling-plugin: stopping");
    if let Some(sweeper) = sweeper {
        sweeper.abort();
    }
    dispatcher.begin_closing();
    // Each connection finishes the request it is serving, writes its
    // response and closes.
    if tokio::time::timeout(grace, connections.shutdown()).await.is_err() {
        eprintln!(
            "scriptling-plugin: {} request(s) still running after {grace:?}; stopping without them",
            dispatcher.in_flight()
        );
    }
    dispatcher.abandon();
    pool.close();
    let remaining = dispatcher.link().objects.drain();
    let link = Arc::clone(dispatcher.link());
    let deadline = Instant::now().checked_add(grace);
    let released =
        tokio::task::spawn_blocking(move || teardown::release_within(&link, remaining, "server stop", deadline));
    if let Ok(Err(overran)) = released.await {
        eprintln!("scriptling-plugin: {overran}; stopping without waiting for it");
    }
    Ok(())
}

/// Connections the kernel queues for `accept` (std's and tokio's `bind`
/// queue 128): a burst of clients connecting at once past the queue has
/// its connection attempts dropped, and each retries only after a second.
const ACCEPT_BACKLOG: u32 = 1024;

/// Binds `addr` with room for [`ACCEPT_BACKLOG`] connections not yet accepted.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // As std's bind does: a restarted server can take its port back at once.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Serves one accepted connection on a task of its own, within the
/// connection limit and its deadlines.
fn serve_connection(
    stream: TcpStream,
    service: &Arc<Service>,
    connections: &GracefulShutdown,
    open: &Arc<AtomicUsize>,
    lingering: &Arc<AtomicUsize>,
) {
    let config = &service.config;
    if open.fetch_add(1, Ordering::AcqRel) >= config.max_connections {
        open.fetch_sub(1, Ordering::AcqRel);
        tokio::spawn(refuse_busy(stream, Arc::clone(lingering)));
        return;
    }
    let slot = Counted(Arc::clone(open));
    let _ = stream.set_nodelay(true);
    let activity = Activity::new();
    let io = TokioIo::new(Watched { inner: stream, activity: Arc::clone(&activity) });
    let handler = {
        let (service, activity) = (Arc::clone(service), Arc::clone(&activity));
        service_fn(move |req| {
            let (service, activity) = (Arc::clone(&service), Arc::clone(&activity));
            async move {
                let _busy = activity.busy();
                Ok::<_, Infallible>(service.handle(req).await)
            }
        })
    };
    let connection = connections.watch(http1::Builder::new().serve_connection(io, handler));
    let (header, idle) = (config.header_timeout, config.idle_timeout);
    tokio::spawn(async move {
        let _slot = slot;
        // Dropping the connection when a deadline passes closes the socket.
        tokio::select! {
            _ = connection => {}
            () = activity.expired(header, idle) => {}
        }
    });
}

/// How many refused connections may linger at once (each holds a file
/// handle for up to [`LINGER`]; the process has room for 256 beyond the
/// connection limit): past it a refusal is closed as soon as it is sent.
const MAX_LINGERING: usize = 64;

/// Answers a connection over the limit with `503` and closes it
/// gracefully: the refusal and the end are sent, then what the client
/// still sends (its request) is read and dropped, as the TCP transport's
/// lingering close does, up to [`LINGER_BYTES`] and all within [`LINGER`].
/// Closed with its request unread, the connection would be reset, and
/// Windows clients then lose the refusal they have not read yet. A flood
/// of refusals lingers [`MAX_LINGERING`] at a time.
async fn refuse_busy(mut stream: TcpStream, lingering: Arc<AtomicUsize>) {
    let response = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n\
Connection: close\r\nContent-Length: 39\r\n\r\ntoo many connections; try again shortly";
    let linger = lingering.fetch_add(1, Ordering::AcqRel) < MAX_LINGERING;
    let _counted = Counted(lingering);
    let refuse = async {
        stream.write_all(response).await?;
        if !linger {
            return Ok(());
        }
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut dropped = 0;
        while dropped < LINGER_BYTES {
            match stream.read(&mut sink).await? {
                0 => break,
                n => dropped += n,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(LINGER, refuse).await;
}

/// Counts one (an open connection, a lingering refusal) until dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Destroys objects idle longer than `ttl`, checking a few times per TTL.
async fn expire_idle_objects(dispatcher: Arc<Dispatcher>, ttl: Duration) {
    let every = (ttl / 4).clamp(Duration::from_millis(10), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        let expired = dispatcher.link().objects.drain_idle(ttl);
        if expired.is_empty() {
            continue;
        }
        let link = Arc::clone(dispatcher.link());
        // The sweeper waits for the hooks, so a slow one delays the next sweep only.
        let _ =
            tokio::task::spawn_blocking(move || teardown::release_within(&link, expired, "object expiry", None)).await;
    }
}

/// An object id no client can guess: 128 bits from the operating system's
/// random source, as 32 hex digits.
fn random_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| format!("cannot make an object id: the system's random source failed: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_128_bits_and_differ() {
        let a = random_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, random_id().unwrap());
    }
}
