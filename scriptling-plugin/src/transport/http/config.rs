//! [`HttpConfig`]: how to serve a plugin over HTTP, every limit with its
//! default, from code or from `--listen` and `SCRIPTLING_PLUGIN_*`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::exports::error::ServeError;
pub(crate) use crate::transport::settings::parse_addr;
use crate::transport::settings::{self, Listen, Settings};

/// How to serve a plugin over HTTP, and the limits that keep a server
/// facing a network safe. Every limit has a default, a setter, and an
/// environment variable read by [`from_env_and_args`](HttpConfig::from_env_and_args):
///
/// | limit | default | variable |
/// |---|---|---|
/// | request body size | 16 MiB (`413` beyond) | `SCRIPTLING_PLUGIN_MAX_BODY` (bytes) |
/// | answer time per request | none (`-32000` beyond, the request's id kept) | `SCRIPTLING_PLUGIN_TIMEOUT` (seconds) |
/// | time to send a request's headers | 10 s (connection closed) | `SCRIPTLING_PLUGIN_HEADER_TIMEOUT` |
/// | time to send a request's body | 30 s (`408`) | `SCRIPTLING_PLUGIN_BODY_TIMEOUT` |
/// | idle keep-alive connection | 60 s (closed) | `SCRIPTLING_PLUGIN_IDLE_TIMEOUT` |
/// | open connections | 10 000 (`503` beyond) | `SCRIPTLING_PLUGIN_MAX_CONNECTIONS` |
/// | object idle time | 10 min (destroyed) | `SCRIPTLING_PLUGIN_OBJECT_TTL` (seconds, `0` = never) |
/// | live objects per client | 10 000 (`-32000` naming the limit beyond) | `SCRIPTLING_PLUGIN_MAX_OBJECTS` |
/// | `X-Scriptling-Client` length | 256 bytes (`431` beyond) | — |
/// | requests in a batch | `Plugin::max_batch_len`, 100 000 (`-32600` beyond) | — |
///
/// ```
/// use std::time::Duration;
/// use scriptling_plugin::HttpConfig;
///
/// let config = HttpConfig::new("127.0.0.1:8081".parse().unwrap())
///     .path("/json-rpc")
///     .token("s3cret")
///     .timeout(Duration::from_secs(30))
///     .max_connections(500)
///     .object_ttl(Some(Duration::from_secs(300)));
/// assert_eq!(config.addr().port(), 8081);
/// ```
#[derive(Clone, Debug)]
pub struct HttpConfig {
    pub(crate) addr: SocketAddr,
    pub(crate) path: String,
    pub(crate) token: Option<String>,
    pub(crate) max_body_bytes: usize,
    pub(crate) timeout: Option<Duration>,
    pub(crate) header_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) object_ttl: Option<Duration>,
    pub(crate) max_objects: usize,
}

/// The longest `X-Scriptling-Client` value accepted.
pub(crate) const MAX_CLIENT_ID_BYTES: usize = 256;

impl HttpConfig {
    /// Serve at `addr` (port 0 picks a free port), path `/json-rpc`, no
    /// token, and the default limits in the table above.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            path: "/json-rpc".into(),
            token: None,
            max_body_bytes: 16 << 20,
            timeout: None,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            object_ttl: Some(Duration::from_secs(600)),
            max_objects: 10_000,
        }
    }

    /// The endpoint's path.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Requires `Authorization: Bearer <token>` on every request (the
    /// scheme's case does not matter, as RFC 7235 says).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The largest request body accepted (default 16 MiB).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Answers a request (or a batch element) with a `-32000` timeout error,
    /// under its own id, if it takes longer. The handler itself keeps
    /// running: Rust cannot cancel it safely.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long a client may take to send a request's headers, from its
    /// first byte (default 10 s); a slower one is disconnected.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// How long a client may take to send a request's body once its headers
    /// are in (default 30 s); a slower one is answered `408`.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// How long a keep-alive connection may sit idle between requests
    /// (default 60 s, below the 90 s Go's HTTP client, and so Scriptling's
    /// host, keeps idle connections for).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The most connections open at once (default 10 000); one more is
    /// answered `503` and closed. Serving raises the process's open-file
    /// limit towards this where the system allows.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Destroys objects no request has named for this long (default 10
    /// minutes; `None` keeps them until destroyed or the server stops).
    ///
    /// The real Scriptling host sends `plugin.shutdown` without any client
    /// header when a script unloads an HTTP plugin, so objects a script never
    /// released would otherwise live as long as the server. Their `#[del]`
    /// hook and `Drop` run as for `object.destroy`. To release a script's
    /// objects promptly at unload, load the plugin with a client id:
    /// `scriptling.plugin.load(name, url, scriptling=True, headers={"X-Scriptling-Client": "my-script"})`.
    pub fn object_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.object_ttl = ttl;
        self
    }

    /// The most objects one client may keep alive at once (default 10 000;
    /// clients without an `X-Scriptling-Client` id share one allowance).
    /// Creating one more fails, with a message naming this limit, until the
    /// client destroys some: a client cannot fill the server's memory.
    pub fn max_objects(mut self, objects: usize) -> Self {
        self.max_objects = objects.max(1);
        self
    }

    /// The address to bind.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reads the switch from the command line (`--listen ADDR`, `--path P`)
    /// and the environment (`SCRIPTLING_PLUGIN_LISTEN`, `_PATH`, `_TOKEN`,
    /// and the limits in the table above); arguments win. `None` means stdio.
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
        Self::from_settings(&settings::from_process(&std::env::args().skip(1).collect::<Vec<_>>()))
    }

    /// Like [`from_env_and_args`](Self::from_env_and_args), from settings
    /// already gathered (`Plugin::run`'s: see `settings::for_run`).
    pub(crate) fn from_settings(
        settings: &Settings<'_, impl Fn(&str) -> Option<String>>,
    ) -> Result<Option<HttpConfig>, ServeError> {
        Self::parse(settings).map_err(ServeError::Config)
    }

    fn parse(settings: &Settings<'_, impl Fn(&str) -> Option<String>>) -> Result<Option<HttpConfig>, String> {
        let Some(Listen::Http(listen)) = settings.listen()? else { return Ok(None) };
        let mut config = HttpConfig::new(parse_addr(&listen)?);
        if let Some(path) = settings.arg_or_env("--path", "SCRIPTLING_PLUGIN_PATH")? {
            if !path.starts_with('/') {
                return Err(format!("the HTTP path must start with '/', got {path:?}"));
            }
            config = config.path(path);
        }
        if let Some(token) = settings.env("SCRIPTLING_PLUGIN_TOKEN") {
            config = config.token(token);
        }
        if let Some(t) = settings.seconds("SCRIPTLING_PLUGIN_TIMEOUT")? {
            config = config.timeout(t);
        }
        if let Some(t) = settings.seconds("SCRIPTLING_PLUGIN_HEADER_TIMEOUT")? {
            config = config.header_timeout(t);
        }
        if let Some(t) = settings.seconds("SCRIPTLING_PLUGIN_BODY_TIMEOUT")? {
            config = config.body_timeout(t);
        }
        if let Some(t) = settings.seconds("SCRIPTLING_PLUGIN_IDLE_TIMEOUT")? {
            config = config.idle_timeout(t);
        }
        if let Some(ttl) = settings.seconds_or_never("SCRIPTLING_PLUGIN_OBJECT_TTL")? {
            config = config.object_ttl(ttl);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_CONNECTIONS")? {
            config = config.max_connections(n);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_BODY")? {
            config = config.max_body_bytes(n);
        }
        if let Some(n) = settings.count("SCRIPTLING_PLUGIN_MAX_OBJECTS")? {
            config = config.max_objects(n);
        }
        Ok(Some(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Option<HttpConfig>, String> {
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        HttpConfig::parse(&Settings::new(&args, |name: &str| env.get(name).cloned()))
    }

    #[test]
    fn limits_come_from_the_environment() {
        assert!(parse(&[], &[]).unwrap().is_none());
        let config = parse(
            &["--listen", "9000"],
            &[
                ("SCRIPTLING_PLUGIN_HEADER_TIMEOUT", "0.5"),
                ("SCRIPTLING_PLUGIN_BODY_TIMEOUT", "2"),
                ("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", "3"),
                ("SCRIPTLING_PLUGIN_MAX_CONNECTIONS", "7"),
                ("SCRIPTLING_PLUGIN_OBJECT_TTL", "0"),
                ("SCRIPTLING_PLUGIN_MAX_BODY", "1024"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.addr.port(), 9000);
        assert_eq!(config.header_timeout, Duration::from_millis(500));
        assert_eq!(config.body_timeout, Duration::from_secs(2));
        assert_eq!(config.idle_timeout, Duration::from_secs(3));
        assert_eq!(config.max_connections, 7);
        assert_eq!(config.object_ttl, None);
        assert_eq!(config.max_body_bytes, 1024);
        let defaults = parse(&["--listen=9000"], &[]).unwrap().unwrap();
        assert_eq!(defaults.object_ttl, Some(Duration::from_secs(600)));
        let err = parse(&["--listen", "9000"], &[("SCRIPTLING_PLUGIN_MAX_CONNECTIONS", "lots")]).unwrap_err();
        assert_eq!(err, "SCRIPTLING_PLUGIN_MAX_CONNECTIONS must be a positive whole number, got \"lots\"");
        let err = parse(&["--listen", "9000"], &[("SCRIPTLING_PLUGIN_TIMEOUT", "-1")]).unwrap_err();
        assert!(err.starts_with("SCRIPTLING_PLUGIN_TIMEOUT must be a positive number of seconds"));
        for huge in ["1e20", "1e300", "4000000000"] {
            let err = parse(&["--listen", "9000"], &[("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", huge)]).unwrap_err();
            assert!(err.starts_with("SCRIPTLING_PLUGIN_IDLE_TIMEOUT must be at most"), "{err}");
        }
        let objects = parse(&["--listen", "9000"], &[("SCRIPTLING_PLUGIN_MAX_OBJECTS", "3")]).unwrap().unwrap();
        assert_eq!(objects.max_objects, 3);
    }
}
