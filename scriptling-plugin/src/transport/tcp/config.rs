//! [`TcpConfig`]: how to serve a plugin over TCP (or a Unix socket), every
//! limit with its default, from code or from `--listen` and
//! `SCRIPTLING_PLUGIN_*`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::exports::error::ServeError;
use crate::transport::settings::{self, Listen, Settings};

/// How to serve a plugin over TCP (or a Unix socket): line-delimited
/// JSON-RPC 2.0 on persistent connections, in the Supex bridge's
/// conventions, with the whole Scriptling protocol (callbacks and log
/// records included) on each connection.
///
/// Every limit has a default, a setter, and an environment variable read
/// by [`from_env_and_args`](TcpConfig::from_env_and_args):
///
/// | limit | default | variable |
/// |---|---|---|
/// | idle connection (nothing read, nothing running), and a client that reads none of its answers | 300 s, the Supex default (closed) | `SCRIPTLING_PLUGIN_IDLE_TIMEOUT` (seconds, `0` = never) |
/// | time to finish a line once it has begun | 30 s, as hyper's header timeout (an error line, then closed) | `SCRIPTLING_PLUGIN_LINE_TIMEOUT` (seconds, `0` = never) |
/// | time to send `hello` with the token, when one is set | 10 s (closed) | `SCRIPTLING_PLUGIN_HELLO_TIMEOUT` |
/// | `hello` with a wrong token | one (answered `-32001`, then closed) | — |
/// | open connections | 1 024 (an error line, then closed) | `SCRIPTLING_PLUGIN_MAX_CONNECTIONS` |
/// | line size | 16 MiB (an error, then that connection is closed) | `SCRIPTLING_PLUGIN_MAX_LINE` (bytes) |
/// | answers queued for a client that reads slowly | 4 MiB (its requests are not read meanwhile) | `SCRIPTLING_PLUGIN_MAX_QUEUE` (bytes) |
/// | calls waiting for one connection to answer callbacks | 64 (a callback beyond fails, naming the limit) | `SCRIPTLING_PLUGIN_MAX_WAITING_CALLS` |
/// | live objects per connection | 10 000 (`-32000` naming the limit beyond) | `SCRIPTLING_PLUGIN_MAX_OBJECTS` |
/// | requests in a batch | `Plugin::max_batch_len`, 100 000 (`-32600` beyond) | — |
///
/// Each is there so that no single client, with the token or without, can
/// deny service to the others: hold every connection slot (the line
/// timeout), the server's memory (the answer queue), or the shared sync
/// pool (the waiting calls), or guess the token at speed (one guess per
/// connection).
///
/// Each connection is served by two threads of its own (one reads, one
/// ends the session), besides the sync pool all connections share: the
/// connection limit bounds them.
///
/// ```
/// use std::time::Duration;
/// use scriptling_plugin::TcpConfig;
///
/// let config = TcpConfig::new("127.0.0.1:9876".parse().unwrap())
///     .token("s3cret")
///     .idle_timeout(Some(Duration::from_secs(60)))
///     .max_connections(200);
/// assert_eq!(config.to_string(), "tcp://127.0.0.1:9876");
/// ```
#[derive(Clone, Debug)]
pub struct TcpConfig {
    pub(crate) endpoint: Endpoint,
    pub(crate) token: Option<String>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) hello_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) max_line_bytes: usize,
    pub(crate) max_objects: usize,
    pub(crate) line_timeout: Option<Duration>,
    pub(crate) max_queued_bytes: usize,
    pub(crate) max_waiting_calls: usize,
}

/// Where a [`TcpConfig`] listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Tcp(SocketAddr),
    #[cfg(unix)]
    Unix(PathBuf),
}

impl TcpConfig {
    /// Serve at `addr` (port 0 picks a free port), no token, and the
    /// default limits in the table above.
    pub fn new(addr: SocketAddr) -> Self {
        Self::at(Endpoint::Tcp(addr))
    }

    /// Serve on a Unix socket at `path` (created when serving starts, and
    /// removed when it ends if it is still this server's). A socket another
    /// server listens on is never taken over: serving fails with "address
    /// in use"; a socket file nobody listens on (its server died) is
    /// replaced.
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub fn unix(path: impl Into<PathBuf>) -> Self {
        Self::at(Endpoint::Unix(path.into()))
    }

    /// `HOST:PORT`, a port, `tcp://HOST:PORT` or `unix:/path`.
    pub(crate) fn at_address(text: &str) -> Result<Self, String> {
        let unix = text.starts_with("unix:");
        let listen = if unix || text.starts_with("tcp://") { text.to_owned() } else { format!("tcp://{text}") };
        match settings::parse_listen(&listen)? {
            Listen::Tcp(addr) => Ok(Self::new(addr)),
            Listen::Unix(path) => Self::unix_or_refuse(path),
            Listen::Http(_) => Err(format!("{text:?} is not a TCP address")),
        }
    }

    #[cfg(unix)]
    fn unix_or_refuse(path: PathBuf) -> Result<Self, String> {
        Ok(Self::unix(path))
    }

    #[cfg(not(unix))]
    fn unix_or_refuse(path: PathBuf) -> Result<Self, String> {
        Err(format!(
            "unix:{} asks for a Unix socket, which is served on Unix only; use tcp://HOST:PORT",
            path.display()
        ))
    }

    fn at(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            token: None,
            idle_timeout: Some(Duration::from_secs(300)),
            hello_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_line_bytes: 16 << 20,
            max_objects: 10_000,
            line_timeout: Some(Duration::from_secs(30)),
            max_queued_bytes: 4 << 20,
            max_waiting_calls: 64,
        }
    }

    /// Requires every connection to send `hello` with this token (compared
    /// in constant time) before anything but `hello` and `ping` is served;
    /// a wrong or missing token is answered `-32001`.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How long a connection may sit with nothing read and no call running
    /// before it is closed (default 300 s; `None` never closes it).
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long a connection has to send `hello` with the token, when a
    /// token is set (default 10 s); then it is closed.
    pub fn hello_timeout(mut self, timeout: Duration) -> Self {
        self.hello_timeout = timeout;
        self
    }

    /// The most connections open at once (default 1 024); one more is sent
    /// one error line and closed. Serving raises the process's open-file
    /// limit towards what they need where the system allows.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// The longest line accepted (default 16 MiB). A longer one is answered
    /// with an error and its connection closed, before the rest of it is
    /// read.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes.max(1);
        self
    }

    /// The most objects one connection may keep alive at once (default
    /// 10 000). Creating one more fails, with a message naming this limit,
    /// until the connection destroys some.
    pub fn max_objects(mut self, objects: usize) -> Self {
        self.max_objects = objects.max(1);
        self
    }

    /// How long a client has to finish a line once it has sent its first
    /// byte (default 30 s; `None`: no limit). A client that dribbles a
    /// line a byte at a time resets the idle limit with every byte; this
    /// one it cannot: it is sent an error line and closed, and its place
    /// among the connections comes back.
    pub fn line_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.line_timeout = timeout;
        self
    }

    /// The most bytes of answers queued for one connection (default 4 MiB)
    /// before its requests stop being read: a client that sends calls and
    /// reads their answers slowly is slowed to its reading speed, and holds
    /// about this much of the server's memory, not more. A client that
    /// reads none of its answers for the idle time is closed.
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.max_queued_bytes = bytes.max(1);
        self
    }

    /// The most calls of one connection that may wait, on threads of the
    /// sync pool every connection shares, for that connection to answer a
    /// callback (default 64). A callback beyond it fails at once, with a
    /// message naming this limit, so a client that never answers its
    /// callbacks refuses its own calls only. (Async handlers wait without
    /// a thread, and are not counted.)
    pub fn max_waiting_calls(mut self, calls: usize) -> Self {
        self.max_waiting_calls = calls.max(1);
        self
    }

    /// Reads the switch from the command line (`--listen tcp://HOST:PORT`
    /// or `--listen unix:/path`) and the environment
    /// (`SCRIPTLING_PLUGIN_LISTEN`, `_TOKEN`, and the limits in the table
    /// above); arguments win. `None` when nothing asks for TCP or a Unix
    /// socket.
    ///
    /// [`Plugin::run`](crate::Plugin::run) uses this; call it yourself to
    /// default to TCP when nothing is set:
    ///
    /// ```no_run
    /// # use scriptling_plugin::{Plugin, ServeError, TcpConfig};
    /// # fn main() -> Result<(), ServeError> {
    /// let config = TcpConfig::from_env_and_args()?
    ///     .unwrap_or_else(|| TcpConfig::new("127.0.0.1:9876".parse().unwrap()));
    /// Plugin::new("bridge", "1.0.0", "").serve_tcp_with(config)
    /// # }
    /// ```
    pub fn from_env_and_args() -> Result<Option<TcpConfig>, ServeError> {
        Self::from_settings(&settings::from_process(&std::env::args().skip(1).collect::<Vec<_>>()))
    }

    /// Like [`from_env_and_args`](Self::from_env_and_args), from settings
    /// already gathered (`Plugin::run`'s: see `settings::for_run`).
    pub(crate) fn from_settings(
        settings: &Settings<'_, impl Fn(&str) -> Option<String>>,
    ) -> Result<Option<TcpConfig>, ServeError> {
        Self::parse(settings).map_err(ServeError::Config)
    }

    fn parse(settings: &Settings<'_, impl Fn(&str) -> Option<String>>) -> Result<Option<TcpConfig>, String> {
        let mut config = match settings.listen()? {
            Some(Listen::Tcp(addr)) => TcpConfig::new(addr),
            Some(Listen::Unix(path)) => TcpConfig::unix_or_refuse(path)?,
            Some(Listen::Http(_)) | None => return Ok(None),
        };
        if let Some(token) = settings.env("SCRIPTLING_PLUGIN_TOKEN") {
            config = config.token(token);
        }
        if let Some(t) = settings.seconds_or_never("SCRIPTLING_PLUGIN_IDLE_TIMEOUT")? {
            config = config.idle_timeout(t);
        }
        if let Some(t) = settings.seconds("SCRIPTLING_PLUGIN_HELLO_TIMEOUT")? {
            config = config.hello_timeout(t);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_CONNECTIONS")? {
            config = config.max_connections(n);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_LINE")? {
            config = config.max_line_bytes(n);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_OBJECTS")? {
            config = config.max_objects(n);
        }
        if let Some(t) = settings.seconds_or_never("SCRIPTLING_PLUGIN_LINE_TIMEOUT")? {
            config = config.line_timeout(t);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_QUEUE")? {
            config = config.max_queued_bytes(n);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_WAITING_CALLS")? {
            config = config.max_waiting_calls(n);
        }
        Ok(Some(config))
    }
}

/// `tcp://HOST:PORT` or `unix:/path`: what `--listen` takes to serve so.
impl std::fmt::Display for TcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.endpoint {
            Endpoint::Tcp(addr) => write!(f, "tcp://{addr}"),
            #[cfg(unix)]
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Option<TcpConfig>, String> {
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        TcpConfig::parse(&Settings::new(&args, |name: &str| env.get(name).cloned()))
    }

    #[test]
    fn only_tcp_and_unix_listens_are_tcps() {
        assert!(parse(&[], &[]).unwrap().is_none());
        assert!(parse(&["--listen", "8081"], &[]).unwrap().is_none(), "HTTP's");
        let config = parse(&["--listen=tcp://127.0.0.1:9876"], &[]).unwrap().unwrap();
        assert_eq!(config.endpoint, Endpoint::Tcp("127.0.0.1:9876".parse().unwrap()));
        assert_eq!(config.idle_timeout, Some(Duration::from_secs(300)));
        let unix = parse(&[], &[("SCRIPTLING_PLUGIN_LISTEN", "unix:/tmp/x.sock")]);
        #[cfg(unix)]
        assert_eq!(unix.unwrap().unwrap().to_string(), "unix:/tmp/x.sock");
        #[cfg(not(unix))]
        assert!(unix.unwrap_err().contains("served on Unix only"));
    }

    #[test]
    fn limits_come_from_the_environment() {
        let config = parse(
            &["--listen", "tcp://9000"],
            &[
                ("SCRIPTLING_PLUGIN_TOKEN", "t"),
                ("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", "0"),
                ("SCRIPTLING_PLUGIN_HELLO_TIMEOUT", "0.5"),
                ("SCRIPTLING_PLUGIN_MAX_CONNECTIONS", "7"),
                ("SCRIPTLING_PLUGIN_MAX_LINE", "1024"),
                ("SCRIPTLING_PLUGIN_MAX_OBJECTS", "3"),
                ("SCRIPTLING_PLUGIN_LINE_TIMEOUT", "0"),
                ("SCRIPTLING_PLUGIN_MAX_QUEUE", "65536"),
                ("SCRIPTLING_PLUGIN_MAX_WAITING_CALLS", "2"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.token.as_deref(), Some("t"));
        assert_eq!(config.idle_timeout, None);
        assert_eq!(config.hello_timeout, Duration::from_millis(500));
        assert_eq!((config.max_connections, config.max_line_bytes, config.max_objects), (7, 1024, 3));
        assert_eq!((config.line_timeout, config.max_queued_bytes, config.max_waiting_calls), (None, 65536, 2));
        let err = parse(&["--listen", "tcp://9000"], &[("SCRIPTLING_PLUGIN_MAX_LINE", "big")]).unwrap_err();
        assert_eq!(err, "SCRIPTLING_PLUGIN_MAX_LINE must be a positive whole number, got \"big\"");
    }
}
