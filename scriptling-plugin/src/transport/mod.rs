//! Transports: stdio and HTTP, each feeding the dispatcher, and the
//! `Plugin` methods that serve a plugin over them.

pub(crate) mod async_runtime;
pub(crate) mod cli;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod refusals;
pub(crate) mod session;
pub(crate) mod settings;
pub(crate) mod signals;
pub(crate) mod tcp;

use std::sync::Arc;

use crate::exports::describe;
use crate::exports::error::ServeError;
use crate::exports::plugin::Plugin;
use crate::runtime::panic;
use crate::sys::{self, Stop};
use crate::transport::async_runtime::AsyncRuntime;
use crate::transport::cli::Command;
use crate::transport::session::input::Input;
use crate::transport::session::lines::LineReader;
use crate::transport::session::{Session, Setup};
use crate::transport::signals::Signals;

impl Plugin {
    /// Serves the plugin over stdio until the host shuts it down, closes
    /// stdin, or the process gets SIGINT or SIGTERM (on Windows: Ctrl-C,
    /// Ctrl-Break, or its console closing), on a tokio runtime of its own.
    ///
    /// Before anything else, those stop events are caught (so one that
    /// comes at any moment after start-up ends the session gracefully), and
    /// the process's stdout is taken for the protocol while its standard
    /// output (file descriptor 1; on Windows the standard output handle) is
    /// pointed at stderr, so `println!` anywhere in the process cannot
    /// corrupt the stream.
    ///
    /// Shutdown, whatever its cause, answers the calls in flight, destroys
    /// every live object (running its `#[del]` hook and `Drop`) and answers
    /// `plugin.shutdown`, all within
    /// [`shutdown_grace`](Plugin::shutdown_grace) (what overruns it is
    /// named on stderr and left behind); then it writes what is left for as
    /// long as the host keeps reading, and returns `Ok(())`, so `main`
    /// exits with status 0. If the host stops reading (nothing read for the
    /// grace) or closes stdout, answers are lost: it returns
    /// [`ServeError::Undelivered`] (or [`ServeError::Io`]) saying how many,
    /// so `main` exits non-zero. A second stop event exits at once (status
    /// 130 after SIGINT or Ctrl-C, 143 after SIGTERM).
    ///
    /// It also tunes glibc's allocator, where it is the allocator, so that
    /// large payload buffers do not stay resident in per-thread arenas, and
    /// reports panics in calls in one stderr line (see
    /// [`panic_backtraces`](Plugin::panic_backtraces));
    /// [`serve_stdio`](Plugin::serve_stdio) leaves the allocator alone.
    ///
    /// Returns the registration problems if the plugin is inconsistent.
    ///
    /// The binary also describes itself, without a host: `--describe`
    /// prints every function, class, method, property and constant with its
    /// Scriptling signature and help, `--schema` the handshake answer as
    /// JSON, `--version` the library's name and version, `--help` the usage.
    /// Any other argument is refused with the usage line, unless the plugin
    /// takes arguments of its own ([`own_args`](Plugin::own_args)).
    ///
    /// The same binary can serve a network instead, with no code change:
    /// `--listen tcp://HOST:PORT` (or `unix:/path`) serves line-delimited
    /// JSON-RPC on a socket (see [`serve_tcp_with`](Plugin::serve_tcp_with)
    /// and the limits on [`TcpConfig`](crate::TcpConfig)); `--listen ADDR`
    /// (and optionally `--path /json-rpc`) serves HTTP, with the `http`
    /// feature (limits on `HttpConfig`). The other `SCRIPTLING_PLUGIN_*`
    /// variables set the limits; arguments win over the environment.
    /// `SCRIPTLING_PLUGIN_LISTEN` may say where to listen instead of
    /// `--listen`, but only when stdin is not a pipe (a terminal, a
    /// container, a service manager): a Scriptling host starts its plugins
    /// with pipes and passes them its whole environment, and a plugin it
    /// starts serves it over stdio whatever that holds (one stderr line
    /// says the variable was ignored).
    pub fn run(self) -> Result<(), ServeError> {
        let core = self.build()?;
        let args: Vec<String> = std::env::args().skip(1).collect();
        let command = cli::parse(&args, core.options.own_args)
            .map_err(|e| ServeError::Usage(format!("{e}\n\n{}", cli::usage())))?;
        let answer = || serde_json::from_slice::<serde_json::Value>(&core.handshake).expect("the handshake is JSON");
        let text = match command {
            Command::Serve => None,
            Command::Describe => Some(describe::describe(&answer())),
            Command::Schema => Some(format!("{:#}\n", answer())),
            Command::Version => {
                let library = &answer()["library"];
                let field = |key: &str| library[key].as_str().unwrap_or_default().to_owned();
                Some(format!(
                    "{} {} (scriptling-plugin {})\n",
                    field("name"),
                    field("version"),
                    env!("CARGO_PKG_VERSION")
                ))
            }
            Command::Help => Some(cli::usage()),
        };
        if let Some(text) = text {
            use std::io::Write;
            return std::io::stdout().write_all(text.as_bytes()).map_err(ServeError::Io);
        }
        let settings = settings::for_run(&args);
        if let Some(config) = tcp::TcpConfig::from_settings(&settings)? {
            return tcp::run(core, config);
        }
        #[cfg(feature = "http")]
        if let Some(config) = crate::transport::http::HttpConfig::from_settings(&settings)? {
            return crate::transport::http::run(core, config);
        }
        #[cfg(not(feature = "http"))]
        if settings.listen().map_err(ServeError::Config)?.is_some() {
            return Err(ServeError::Config(
                "HTTP serving was requested, but this plugin was built without the `http` feature of scriptling-plugin \
                 (tcp://HOST:PORT and unix:/path need no feature)"
                    .to_owned(),
            ));
        }
        // Stop events first: from the moment the plugin can answer anything,
        // one ends the session gracefully (no default action killing it with
        // its objects' hooks unrun). Fd 1 points at the original stdout again
        // only once `_stdout` drops, after the session has ended.
        let signals = Signals::install();
        let (mut out, _stdout) = sys::take_stdout()?;
        let stop = Arc::new(Stop::new()?);
        let stdin = std::io::stdin();
        let waiting = sys::ready_now(&stdin);
        let mut lines = LineReader::new(Input::new(stdin, Arc::clone(&stop)), core.options.max_frame_bytes);
        // A handshake already waiting is answered before the runtime and the
        // session's threads exist (a speed trick: ARCHITECTURE.md).
        if waiting {
            session::answer_early_handshake(&core, &mut lines, &mut out);
        }
        let rt = AsyncRuntime::start(&core.options)?;
        sys::tune_allocator();
        panic::install_hook(core.options.panic_backtraces);
        let setup = Setup::stdio(Arc::new(core), rt.handle().clone());
        let mut session = Session::start(setup, lines, stop, Box::new(out))?;
        if let Some(signals) = signals {
            session.watch_signals(signals)?;
        }
        let result = session.run_to_end();
        // Handlers still running past the grace period are abandoned, not waited for.
        drop(rt);
        result
    }

    /// Serves the plugin over HTTP at `addr` (`"127.0.0.1:8081"`, or a port
    /// alone for loopback) until SIGINT or SIGTERM (Ctrl-C or Ctrl-Break on
    /// Windows), with the default limits.
    ///
    /// Both forms exist because most servers need only an address, written
    /// as the user typed it; [`serve_http_with`](Plugin::serve_http_with) is
    /// the form that sets a token, a path or limits.
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn serve_http(self, addr: &str) -> Result<(), ServeError> {
        let config = crate::transport::http::HttpConfig::new(
            crate::transport::http::parse_addr(addr).map_err(ServeError::Config)?,
        );
        self.serve_http_with(config)
    }

    /// Serves the plugin over HTTP with `config`, on a runtime of its own,
    /// until SIGINT or SIGTERM (Ctrl-C or Ctrl-Break on Windows); then
    /// in-flight requests finish and every object is dropped.
    ///
    /// The runtime is tokio's multi-thread scheduler, one worker per core
    /// unless [`async_worker_threads`](Plugin::async_worker_threads) says
    /// otherwise: the connections and the async handlers of many clients
    /// run side by side (sync handlers run on the SDK's pool, as always).
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn serve_http_with(self, config: crate::transport::http::HttpConfig) -> Result<(), ServeError> {
        let core = self.build()?;
        crate::transport::http::run(core, config)
    }

    /// Serves the plugin over TCP at `addr` (`"127.0.0.1:9876"`, or a port
    /// alone for loopback; `"unix:/path"` for a Unix socket, on Unix) until
    /// SIGINT or SIGTERM (Ctrl-C or Ctrl-Break on Windows), with the default
    /// limits. As for HTTP, the address form is
    /// the one-liner; [`serve_tcp_with`](Plugin::serve_tcp_with) sets a token
    /// or limits.
    pub fn serve_tcp(self, addr: &str) -> Result<(), ServeError> {
        let config = tcp::TcpConfig::at_address(addr).map_err(ServeError::Config)?;
        self.serve_tcp_with(config)
    }

    /// Serves the plugin over TCP (or a Unix socket) with `config`, on a
    /// runtime of its own, until SIGINT or SIGTERM (Ctrl-C or Ctrl-Break on
    /// Windows): line-delimited JSON-RPC
    /// 2.0 in the Supex bridge's conventions (`hello` with an optional
    /// token, `ping`, `tools/call`, `tools/list`), and the whole Scriptling
    /// protocol, callbacks and log records included, on each connection.
    /// Then every connection's session ends as a shutdown does (in-flight
    /// calls finish, objects are destroyed, answers are written), and it
    /// returns `Ok(())`.
    ///
    /// ```no_run
    /// use scriptling_plugin::{Plugin, ServeError, TcpConfig};
    ///
    /// fn main() -> Result<(), ServeError> {
    ///     let config = TcpConfig::new("127.0.0.1:9876".parse().unwrap()).token("s3cret");
    ///     Plugin::new("bridge", "1.0.0", "").serve_tcp_with(config)
    /// }
    /// ```
    pub fn serve_tcp_with(self, config: tcp::TcpConfig) -> Result<(), ServeError> {
        let core = self.build()?;
        tcp::run(core, config)
    }

    /// Like [`run`](Plugin::run), on the caller's tokio runtime. Async
    /// handlers run on it; sync handlers run on the SDK's own worker
    /// threads, and the session's reading, writing and shutdown on threads
    /// of their own (so a single-threaded runtime serves too).
    ///
    /// SIGINT and SIGTERM end the session as under `run`, and whatever
    /// handled them before (your own `tokio::signal::ctrl_c()`, say) still
    /// does; when this returns, their previous handling is restored. (On
    /// Windows, Ctrl-C, Ctrl-Break and the console closing end the session
    /// too, and while it serves they are the plugin's alone: Windows offers
    /// no way to pass them on without ending the process. When this returns
    /// they are the application's again.)
    ///
    /// When this returns, no thread of the SDK reads stdin or writes stdout
    /// any more, with two exceptions said on stderr when they happen: a
    /// write to a host that stopped reading for the whole
    /// [`shutdown_grace`](Plugin::shutdown_grace) stays blocked until the
    /// host reads or exits, and on Windows a read of a console that cannot
    /// be cancelled waits for its line. While it serves, `println!` goes to
    /// stderr (stdout carries the protocol); afterwards stdout is yours
    /// again, as it was.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let core = self.build()?;
        let signals = Signals::install();
        panic::install_hook(core.options.panic_backtraces);
        let (out, stdout) = sys::take_stdout()?;
        let stop = Arc::new(Stop::new()?);
        let lines = LineReader::new(Input::new(std::io::stdin(), Arc::clone(&stop)), core.options.max_frame_bytes);
        let runtime = tokio::runtime::Handle::current();
        let mut session = Session::start(Setup::stdio(Arc::new(core), runtime), lines, stop, Box::new(out))?;
        if let Some(signals) = signals {
            session.watch_signals(signals)?;
        }
        tokio::task::spawn_blocking(move || {
            let served = session.run_to_end();
            // Nothing writes the protocol stream any more: fd 1 is stdout again.
            drop(stdout);
            served
        })
        .await
        .unwrap_or_else(|e| Err(ServeError::Io(std::io::Error::other(format!("serving stdio panicked: {e}")))))
    }
}

/// What a network server that owns the process (`--listen` over TCP or
/// HTTP) sets up around serving: SIGINT/SIGTERM call `stop` once (and are
/// given back their previous handlers after), the allocator tuning and the
/// panic hook; `serve` starts the runtime it needs.
pub(crate) fn serve_owning_process(
    panic_backtraces: bool,
    stop: impl FnOnce() + Send + 'static,
    serve: impl FnOnce() -> Result<(), ServeError>,
) -> Result<(), ServeError> {
    let signals = Signals::install();
    sys::tune_allocator();
    panic::install_hook(panic_backtraces);
    let _watch = match signals {
        Some(signals) => Some(signals.watch(move |signal| {
            eprintln!("scriptling-plugin: {signal} received, stopping (send it again to exit at once)");
            stop();
        })?),
        None => None,
    };
    serve()
}

// Where glibc is the allocator, `sys::tune_allocator` makes it serve
// allocations of 2 MiB and more with their own mappings, returned to the
// system when freed, and keep up to 4 MiB free at the top of its heaps.
//
// By default glibc raises the mapping threshold after large frees, so later
// large payload buffers come from per-thread arenas that keep them: with
// requests handled on several threads, a plugin that saw five 16 MiB
// payloads held ~99 MiB at peak; with the thresholds fixed it holds ~39 MiB.
// The threshold is 2 MiB, not lower, so a 1 MiB payload's buffers are reused
// rather than mapped, faulted in page by page and unmapped on every call;
// the trim threshold (128 KiB once the other is fixed) is raised to match,
// or the heap gave those pages back after each call just the same. Measured
// against 1 MiB / 128 KiB (`plugin-bench compare`, 3 interleaved runs):
// 1 MiB round trips 629 → 771 MB/s, 16 MiB 499 → 536 MB/s, peak RSS with
// 16 MiB payloads 36.3 → 39.2 MiB; with 4 MiB / 4 MiB or 4 / 8 the peak
// passed 40 MiB (ARCHITECTURE.md lists every setting tried). Only the
// methods that own the process (`run`, `serve_http`, `serve_tcp`) do this.
