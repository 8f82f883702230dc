//! Serving a plugin over HTTP (feature `http`).
//!
//! A Scriptling host loads it with
//! `scriptling.plugin.load(name, "http://127.0.0.1:8081/json-rpc", scriptling=True, headers={...})`.
//!
//! - `POST <path>` (default `/json-rpc`) with one request or a batch; a body
//!   of notifications only is answered `204 No Content`; any other method is
//!   `405`; a body over the limit (default 16 MiB) is `413`, refused from its
//!   `Content-Length` or as soon as it streams past the limit, never read whole;
//!   a body that is not JSON is a JSON-RPC `-32700`.
//! - With a token, every request must carry `Authorization: Bearer <token>`,
//!   compared in constant time; otherwise `401` with JSON-RPC error `-32001`
//!   "authentication failed".
//! - `ping` answers `{"status":"ok"}` (on stdio too), for health checks.
//! - The object table is shared by every client. `plugin.shutdown` over HTTP
//!   answers `null` and stops nothing: the server serves other clients. It
//!   cannot tell which objects belong to whom unless clients say so: a
//!   client that sends `X-Scriptling-Client: <any id>` owns the objects it
//!   creates, and its `plugin.shutdown` releases exactly those. Objects are
//!   otherwise released by `object.destroy`, and all of them when the server
//!   stops.
//! - The host cannot be called back over HTTP: a `Callback` fails with
//!   "callbacks need the stdio transport", and log records go to stderr.
//! - SIGINT or SIGTERM stops the server gracefully: no new requests,
//!   in-flight ones finish (up to the shutdown grace), every object is
//!   dropped, and `serve_http` returns `Ok(())`.
//!
//! Built on hyper 1 (HTTP/1.1) rather than a web framework: one route needs
//! no router, and hyper gives exact control of status codes and of the
//! streaming body limit.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::connection::Connection;
use crate::error::{ErrorCode, RpcError, ServeError};
use crate::objects;
use crate::plugin::Core;
use crate::pool::SyncPool;
use crate::rpc;
use crate::writer::FrameWriter;

/// The header by which an HTTP client claims the objects it creates.
pub const CLIENT_HEADER: &str = "x-scriptling-client";

/// How to serve a plugin over HTTP.
///
/// ```
/// use std::time::Duration;
/// use scriptling_plugin::HttpConfig;
///
/// let config = HttpConfig::new("127.0.0.1:8081".parse().unwrap())
///     .path("/json-rpc")
///     .token("s3cret")
///     .timeout(Duration::from_secs(30));
/// assert_eq!(config.addr().port(), 8081);
/// ```
#[derive(Clone, Debug)]
pub struct HttpConfig {
    addr: SocketAddr,
    path: String,
    token: Option<String>,
    max_body_bytes: usize,
    timeout: Option<Duration>,
}

impl HttpConfig {
    /// Serve at `addr` (port 0 picks a free port), path `/json-rpc`, no
    /// token, bodies up to 16 MiB, no request timeout.
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, path: "/json-rpc".into(), token: None, max_body_bytes: 16 << 20, timeout: None }
    }

    /// The endpoint's path.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Requires `Authorization: Bearer <token>` on every request.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The largest request body accepted (default 16 MiB).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Answers a request with a `-32000` timeout error if it takes longer
    /// (the handler itself keeps running: Rust cannot cancel it safely).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The address to bind.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reads the switch from the command line (`--listen ADDR`, `--path P`)
    /// and the environment (`SCRIPTLING_PLUGIN_LISTEN`, `_PATH`, `_TOKEN`,
    /// `_TIMEOUT` in seconds); arguments win. `None` means stdio.
    ///
    /// [`Plugin::run`](crate::Plugin::run) uses this; call it yourself to
    /// default to HTTP when nothing is set:
    ///
    /// ```no_run
    /// # use scriptling_plugin::{HttpConfig, Plugin, ServeError};
    /// # fn main() -> Result<(), ServeError> {
    /// let config = HttpConfig::from_env_and_args()?
    ///     .unwrap_or_else(|| HttpConfig::new("127.0.0.1:8081".parse().unwrap()));
    /// Plugin::new("hello_http", "1.0.0", "").serve_http_with(config)
    /// # }
    /// ```
    pub fn from_env_and_args() -> Result<Option<HttpConfig>, ServeError> {
        Self::parse_env_and_args().map_err(ServeError::Config)
    }

    fn parse_env_and_args() -> Result<Option<HttpConfig>, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let arg = |name: &str| -> Result<Option<String>, String> {
            match args.iter().position(|a| a == name) {
                Some(i) => args.get(i + 1).cloned().map(Some).ok_or_else(|| format!("{name} needs a value")),
                None => Ok(args.iter().find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_owned))),
            }
        };
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(listen) = arg("--listen")?.or_else(|| env("SCRIPTLING_PLUGIN_LISTEN")) else {
            return Ok(None);
        };
        let mut config = HttpConfig::new(parse_addr(&listen)?);
        if let Some(path) = arg("--path")?.or_else(|| env("SCRIPTLING_PLUGIN_PATH")) {
            if !path.starts_with('/') {
                return Err(format!("the HTTP path must start with '/', got {path:?}"));
            }
            config = config.path(path);
        }
        if let Some(token) = env("SCRIPTLING_PLUGIN_TOKEN") {
            config = config.token(token);
        }
        if let Some(timeout) = env("SCRIPTLING_PLUGIN_TIMEOUT") {
            let secs: f64 = timeout.parse().ok().filter(|s: &f64| s.is_finite() && *s > 0.0).ok_or_else(|| {
                format!("SCRIPTLING_PLUGIN_TIMEOUT must be a positive number of seconds, got {timeout:?}")
            })?;
            config = config.timeout(Duration::from_secs_f64(secs));
        }
        Ok(Some(config))
    }
}

/// `8081`, `:8081` (loopback), `127.0.0.1:8081`, `[::1]:8081`, `localhost:8081`.
pub(crate) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let port_only = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| format!("cannot listen on {text:?}: expected HOST:PORT or a port"))
}

/// Serves with a runtime of its own until SIGINT or SIGTERM.
pub(crate) fn run(core: Core, config: HttpConfig) -> Result<(), ServeError> {
    let rt = super::runtime()?;
    let result = rt.block_on(serve(Arc::new(core), config, stop_signal(), |_| {}));
    rt.shutdown_background();
    result
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn stop_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        () = terminate => {}
    }
}

struct Server {
    conn: Arc<Connection>,
    config: HttpConfig,
    clients: Mutex<HashMap<String, u64>>,
    next_client: AtomicU64,
}

/// Serves until `stop` resolves, then finishes in-flight requests, drops
/// every object and returns. `bound` is told the address actually bound.
pub(crate) async fn serve(
    core: Arc<Core>,
    config: HttpConfig,
    stop: impl Future<Output = ()>,
    bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(config.addr).await?;
    let local = listener.local_addr()?;
    eprintln!("scriptling-plugin: {} listening at http://{local}{}", core.library, config.path);
    if !local.ip().is_loopback() && config.token.is_none() {
        eprintln!(
            "scriptling-plugin: warning: serving on {local} without a token; anyone who can reach it can call the plugin (set SCRIPTLING_PLUGIN_TOKEN)"
        );
    }
    bound(local);
    let grace = core.options.shutdown_grace;
    // HTTP cannot carry the plugin's own requests: nothing is ever written here.
    let (control, _) = mpsc::unbounded_channel();
    let runtime = Arc::new(std::sync::OnceLock::new());
    let _ = runtime.set(Handle::current());
    let pool = Arc::new(SyncPool::new(Some(Arc::clone(&runtime)), crate::pool::parallelism()));
    let writer = FrameWriter::new(Box::new(std::io::sink()));
    let conn = Arc::new(Connection::new(core, writer, control, false, pool, runtime));
    let server = Arc::new(Server { conn, config, clients: Mutex::new(HashMap::new()), next_client: AtomicU64::new(1) });
    let connections = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        eprintln!("scriptling-plugin: accepting a connection failed: {e}");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let server = Arc::clone(&server);
                let service = service_fn(move |req| {
                    let server = Arc::clone(&server);
                    async move { Ok::<_, Infallible>(server.handle(req).await) }
                });
                let connection = connections.watch(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
        }
    }
    eprintln!("scriptling-plugin: stopping");
    let conn = &server.conn;
    conn.begin_shutdown();
    // Each connection finishes the request it is serving, writes its
    // response and closes.
    if tokio::time::timeout(grace, connections.shutdown()).await.is_err() {
        eprintln!(
            "scriptling-plugin: {} request(s) still running after {grace:?}; stopping without them",
            conn.inflight.count()
        );
    }
    let remaining = conn.core.objects.drain(None);
    let _ = tokio::task::spawn_blocking(move || objects::release(remaining)).await;
    Ok(())
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, content_type: Option<&'static str>, body: Vec<u8>) -> Reply {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    response
}

fn rpc_error(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Reply {
    let mut body = Vec::new();
    rpc::write_error(&mut body, None, &RpcError::new(code, message));
    reply(status, Some("application/json"), body)
}

/// Compares without returning early, so timing does not reveal how much of
/// a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    std::hint::black_box(diff) == 0
}

impl Server {
    async fn handle(&self, req: Request<Incoming>) -> Reply {
        if req.uri().path() != self.config.path {
            return reply(
                StatusCode::NOT_FOUND,
                Some("text/plain"),
                format!("not found; the endpoint is {}\n", self.config.path).into_bytes(),
            );
        }
        if req.method() != Method::POST {
            let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, Some("text/plain"), b"use POST\n".to_vec());
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        if let Some(token) = &self.config.token {
            let expected = format!("Bearer {token}");
            let given = req.headers().get(header::AUTHORIZATION).map_or(&[][..], HeaderValue::as_bytes);
            if !constant_time_eq(given, expected.as_bytes()) {
                return rpc_error(StatusCode::UNAUTHORIZED, ErrorCode::AuthenticationFailed, "authentication failed");
            }
        }
        let max = self.config.max_body_bytes;
        let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > max as u64) {
            return too_large(max);
        }
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = String::from_utf8_lossy(ct.as_bytes()).to_ascii_lowercase();
            if !ct.starts_with("application/json") {
                return rpc_error(
                    StatusCode::OK,
                    ErrorCode::ParseError,
                    format!("parse error: the body must be JSON (Content-Type: application/json), got {ct}"),
                );
            }
        }
        let client = self.client_id(req.headers());
        let body = match Limited::new(req.into_body(), max).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(max),
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::ParseError,
                    format!("cannot read the request body: {e}"),
                );
            }
        };
        let answer = self.conn.answer(&body, client);
        let (body, shutdown) = match self.config.timeout {
            Some(limit) => match tokio::time::timeout(limit, answer).await {
                Ok(done) => done,
                Err(_) => {
                    return rpc_error(
                        StatusCode::OK,
                        ErrorCode::Application,
                        format!("the request did not finish within {limit:?}"),
                    );
                }
            },
            None => answer.await,
        };
        if shutdown && client != 0 {
            let mine = self.conn.core.objects.drain(Some(client));
            let _ = tokio::task::spawn_blocking(move || objects::release(mine)).await;
        }
        match body {
            Some(body) => reply(StatusCode::OK, Some("application/json"), body),
            None => reply(StatusCode::NO_CONTENT, None, Vec::new()),
        }
    }

    /// The client's id from its `X-Scriptling-Client` header; 0 without one.
    fn client_id(&self, headers: &HeaderMap) -> u64 {
        let Some(name) = headers.get(CLIENT_HEADER).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()) else {
            return 0;
        };
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        *clients.entry(name).or_insert_with(|| self.next_client.fetch_add(1, Ordering::Relaxed))
    }
}

fn too_large(max: usize) -> Reply {
    rpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::InvalidRequest,
        format!("invalid request: the body exceeds the limit of {max} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("8081").unwrap(), "127.0.0.1:8081".parse().unwrap());
        assert_eq!(parse_addr(":0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(parse_addr("0.0.0.0:9").unwrap(), "0.0.0.0:9".parse().unwrap());
        assert_eq!(parse_addr("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert!(parse_addr("nonsense").unwrap_err().contains("expected HOST:PORT"));
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"Bearer abc", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer abd", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer ab", b"Bearer abc"));
        assert!(!constant_time_eq(b"", b"Bearer abc"));
    }
}
