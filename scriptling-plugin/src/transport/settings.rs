//! Reading the serving settings from the command line and the
//! `SCRIPTLING_PLUGIN_*` variables: where to listen (`--listen`), and the
//! limits, each read the same way (arguments win over the environment).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// The longest time a variable may set: a century, far past any use, and
/// far from the overflow of a deadline computed from it.
const MAX_SECONDS: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// What `--listen` (or `SCRIPTLING_PLUGIN_LISTEN`) asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Listen {
    /// `HOST:PORT`, a port alone, or `http://HOST:PORT`: HTTP.
    Http(String),
    /// `tcp://HOST:PORT`: line-delimited JSON-RPC over TCP.
    Tcp(SocketAddr),
    /// `unix:/path`: the same over a Unix socket.
    Unix(PathBuf),
}

/// The arguments and the environment, as one source of settings.
pub(crate) struct Settings<'a, E> {
    args: &'a [String],
    env: E,
}

impl<'a, E: Fn(&str) -> Option<String>> Settings<'a, E> {
    /// `args` without the program name; `env` reads a variable (`None`
    /// when unset or empty).
    pub(crate) fn new(args: &'a [String], env: E) -> Self {
        Self { args, env }
    }

    /// The value of flag `name` (`--name VALUE` or `--name=VALUE`).
    pub(crate) fn arg(&self, name: &str) -> Result<Option<String>, String> {
        match self.args.iter().position(|a| a == name) {
            Some(i) => self.args.get(i + 1).cloned().map(Some).ok_or_else(|| format!("{name} needs a value")),
            None => Ok(self.args.iter().find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_owned))),
        }
    }

    /// Flag `flag`, else variable `var`.
    pub(crate) fn arg_or_env(&self, flag: &str, var: &str) -> Result<Option<String>, String> {
        Ok(self.arg(flag)?.or_else(|| self.env(var)))
    }

    /// Variable `name`.
    pub(crate) fn env(&self, name: &str) -> Option<String> {
        (self.env)(name)
    }

    /// Where to listen, if anywhere (`None`: serve stdio).
    pub(crate) fn listen(&self) -> Result<Option<Listen>, String> {
        let Some(text) = self.arg_or_env("--listen", LISTEN_VAR)? else { return Ok(None) };
        parse_listen(&text).map(Some)
    }

    /// Variable `name` as a positive number of seconds.
    pub(crate) fn seconds(&self, name: &str) -> Result<Option<Duration>, String> {
        self.seconds_from(name, false)
    }

    /// Variable `name` as seconds, `0` meaning no limit: `Some(None)`.
    pub(crate) fn seconds_or_never(&self, name: &str) -> Result<Option<Option<Duration>>, String> {
        Ok(self.seconds_from(name, true)?.map(|t| (!t.is_zero()).then_some(t)))
    }

    fn seconds_from(&self, name: &str, allow_zero: bool) -> Result<Option<Duration>, String> {
        let Some(text) = self.env(name) else { return Ok(None) };
        let secs: f64 = text
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && (*s > 0.0 || (allow_zero && *s == 0.0)))
            .ok_or_else(|| format!("{name} must be a positive number of seconds, got {text:?}"))?;
        // Beyond what a `Duration` (or a deadline) can hold: refused, not a panic.
        let duration = Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| *d <= MAX_SECONDS)
            .ok_or_else(|| format!("{name} must be at most {} seconds, got {text:?}", MAX_SECONDS.as_secs()))?;
        Ok(Some(duration))
    }

    /// Variable `name` as a positive whole number.
    pub(crate) fn count(&self, name: &str) -> Result<Option<usize>, String> {
        let Some(text) = self.env(name) else { return Ok(None) };
        text.parse()
            .ok()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| format!("{name} must be a positive whole number, got {text:?}"))
    }
}

/// The variable that asks for a network transport.
pub(crate) const LISTEN_VAR: &str = "SCRIPTLING_PLUGIN_LISTEN";

/// A variable of the process's environment (`None` when unset or empty).
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The process's arguments (without its name) and environment.
pub(crate) fn from_process(args: &[String]) -> Settings<'_, impl Fn(&str) -> Option<String>> {
    Settings::new(args, var)
}

/// What `Plugin::run` serves by: the arguments and the environment, except
/// that [`LISTEN_VAR`] applies only when stdin is not a pipe. A Scriptling
/// host always starts its plugins with pipes, and passes them its whole
/// environment: a variable a user exported to try a network transport
/// would otherwise turn every plugin the host starts away from it. (A
/// person at a terminal, a container or a service manager gives no pipe.)
/// `--listen` applies always. When the variable is set and not applied,
/// one stderr line says so.
pub(crate) fn for_run(args: &[String]) -> Settings<'_, impl Fn(&str) -> Option<String>> {
    let from_a_host = crate::sys::stdin_is_pipe();
    let settings =
        Settings::new(args, move |name: &str| if from_a_host && name == LISTEN_VAR { None } else { var(name) });
    if from_a_host && settings.arg("--listen").ok().flatten().is_none() {
        if let Some(value) = var(LISTEN_VAR) {
            eprintln!(
                "scriptling-plugin: {LISTEN_VAR}={value} is ignored: stdin is a pipe, as when a Scriptling host starts \
                 the plugin, so it serves the host over stdio (pass --listen to serve a network regardless)"
            );
        }
    }
    settings
}

/// `tcp://HOST:PORT`, `unix:/path`, or HTTP's forms (`HOST:PORT`, a port,
/// `http://HOST:PORT`).
pub(crate) fn parse_listen(text: &str) -> Result<Listen, String> {
    if let Some(addr) = text.strip_prefix("tcp://") {
        return parse_addr(addr).map(Listen::Tcp);
    }
    if let Some(path) = text.strip_prefix("unix:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() {
            return Err("unix: needs a socket path, as in unix:/run/plugin.sock".to_owned());
        }
        return Ok(Listen::Unix(PathBuf::from(path)));
    }
    Ok(Listen::Http(text.strip_prefix("http://").unwrap_or(text).to_owned()))
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
    fn the_scheme_chooses_the_transport() {
        assert_eq!(parse_listen("tcp://127.0.0.1:9876"), Ok(Listen::Tcp("127.0.0.1:9876".parse().unwrap())));
        assert_eq!(parse_listen("tcp://9876"), Ok(Listen::Tcp("127.0.0.1:9876".parse().unwrap())));
        assert_eq!(parse_listen("unix:/tmp/p.sock"), Ok(Listen::Unix("/tmp/p.sock".into())));
        assert_eq!(parse_listen("unix:///tmp/p.sock"), Ok(Listen::Unix("/tmp/p.sock".into())));
        assert!(parse_listen("unix:").is_err());
        assert_eq!(parse_listen("8081"), Ok(Listen::Http("8081".into())));
        assert_eq!(parse_listen("http://0.0.0.0:80"), Ok(Listen::Http("0.0.0.0:80".into())));
        assert!(parse_listen("tcp://nowhere").unwrap_err().contains("expected HOST:PORT"));
    }
}
