//! Serving a plugin over TCP, or a Unix socket: line-delimited JSON-RPC 2.0
//! on persistent connections, in the Supex bridge's conventions.
//!
//! Each connection is a session exactly as a stdio host's is (the same
//! reader, writer, dispatcher and end, see `transport/session`), with the
//! whole Scriptling protocol: calls, objects, batches, and the plugin's own
//! `callback.call` and `host.log` sent to that connection, their answers
//! routed back. What a connection adds is its [`Setup`]:
//!
//! - `hello` answers `{"success": true, "message": "Client identified",
//!   "server": {...}}`. With a token configured, nothing but `hello` and
//!   `ping` is served until a `hello` presents it (compared in constant
//!   time; a wrong or missing one is `-32001`), and a connection that has
//!   not presented it within the hello timeout is closed.
//! - `tools/call {"name", "arguments"}` calls a function with plain JSON
//!   arguments by keyword; `tools/list` lists what it can call.
//! - Objects belong to the connection that made them (ids count from 1 on
//!   each), and are destroyed, hooks run once, when it closes.
//! - Limits: idle time, time to finish a line, open connections, line
//!   size, answers queued, calls waiting on callbacks and objects per
//!   connection (see [`TcpConfig`]): no single connection can deny
//!   service to the others. A `hello` with a wrong token is answered and
//!   its connection closed: one guess per connection.
//! - A connection the server ends is closed gracefully: its answers are
//!   sent, then what it still sends is read and dropped for up to
//!   [`LINGER`] (as nginx's lingering close), so that the client reads the
//!   last answer instead of a reset. When descriptors run out, a refused
//!   connection is told so in one line (a spare descriptor is kept for it).
//!
//! The sync pool is shared by every connection. SIGINT or SIGTERM stops
//! accepting, ends every session as a shutdown does (in-flight calls
//! finish, objects are destroyed, answers are written), closes the
//! connections and returns `Ok(())`; a second signal exits at once.

mod config;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
#[cfg(unix)]
use std::os::unix::net::{UnixListener, UnixStream};
#[cfg(unix)]
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use config::Endpoint;
pub use config::TcpConfig;

use crate::call::objects::{Limit, ObjectTable};
use crate::exports::core::Core;
use crate::exports::error::ServeError;
use crate::runtime::pool::Pool;
use crate::support::lock;
use crate::sys::{self, Readable, Stop};
use crate::transport::async_runtime::AsyncRuntime;
use crate::transport::refusals::Refusals;
use crate::transport::session::input::Input;
use crate::transport::session::lines::LineReader;
use crate::transport::session::setup::{Pooling, ThreadNames};
use crate::transport::session::{Ender, Gate, Session, Setup};

/// Serves with a runtime of its own until SIGINT or SIGTERM.
pub(crate) fn run(core: Core, config: TcpConfig) -> Result<(), ServeError> {
    let stop = Arc::new(Stop::new()?);
    let on_signal = Arc::clone(&stop);
    super::serve_owning_process(
        core.options.panic_backtraces,
        move || on_signal.stop(),
        || {
            // Handlers still running past the grace period are abandoned
            // when it drops, not waited for.
            let rt = AsyncRuntime::start(&core.options)?;
            serve(Arc::new(core), config, &stop, rt.handle().clone())
        },
    )
}

/// Serves until `stop`, then ends every connection's session and returns.
pub(crate) fn serve(core: Arc<Core>, config: TcpConfig, stop: &Stop, runtime: Handle) -> Result<(), ServeError> {
    let listener = Listener::bind(&config.endpoint)?;
    eprintln!("scriptling-plugin: {} listening at {}", core.library, listener.describe()?);
    if config.token.is_none() && !listener.is_local()? {
        eprintln!(
            "scriptling-plugin: warning: serving on {} without a token; anyone who can reach it can call the plugin (set SCRIPTLING_PLUGIN_TOKEN)",
            listener.describe()?
        );
    }
    // Each connection holds five descriptors on Unix: the accepted socket,
    // its two clones (reading, writing) and the two ends of its stop pipe.
    crate::sys::raise_file_limit(config.max_connections.saturating_mul(5));
    let options = &core.options;
    let pool = Pool::for_options(runtime.clone(), options);
    let server = Arc::new(Server { core, config, runtime, pool, open: Open::default() });
    let mut refusals = Refusals::default();
    let mut spare = open_spare();
    loop {
        match listener.next(stop) {
            Ok(Some(Accepted::Tcp(stream, peer))) => {
                refusals.recovered();
                server.admit(stream, peer);
            }
            #[cfg(unix)]
            Ok(Some(Accepted::Unix(stream, peer))) => {
                refusals.recovered();
                server.admit(stream, peer);
            }
            Ok(None) => break,
            Err(e) if sys::out_of_descriptors(&e) && spare.take().is_some() => {
                listener.refuse_one(&cannot_serve(&e));
                spare = open_spare();
            }
            Err(e) => std::thread::sleep(refusals.failed(&e)),
        }
    }
    drop(listener);
    server.stop();
    Ok(())
}

/// What every connection shares.
struct Server {
    core: Arc<Core>,
    config: TcpConfig,
    runtime: Handle,
    pool: Pool,
    open: Open,
}

/// The connections being served, so that stopping can end them.
#[derive(Default)]
struct Open {
    sessions: Mutex<Connections>,
    /// Signalled when a connection ends.
    ended: Condvar,
}

#[derive(Default)]
struct Connections {
    /// Each one's way to end its session (`None` while it starts).
    enders: HashMap<u64, Option<Ender>>,
    next: u64,
    stopping: bool,
}

impl Server {
    /// Serves `stream` on threads of its own, or turns it away when as many
    /// connections as allowed are open.
    fn admit<S: Socket>(self: &Arc<Self>, stream: S, peer: String) {
        let id = {
            let mut open = lock(&self.open.sessions);
            if open.enders.len() >= self.config.max_connections {
                drop(open);
                let limit = self.config.max_connections;
                return turn_away(
                    stream,
                    &format!(
                        "too many connections: the server serves at most {limit} at once \
                         (SCRIPTLING_PLUGIN_MAX_CONNECTIONS); try again shortly"
                    ),
                );
            }
            open.next += 1;
            let id = open.next;
            open.enders.insert(id, None);
            id
        };
        let server = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("plugin-tcp".into()).spawn(move || {
            let mut stream = stream;
            match server.start_session(&stream, &peer) {
                Ok(session) => {
                    if let Err(e) = server.run_session(id, session) {
                        eprintln!("scriptling-plugin: {peer}: {e}");
                    }
                }
                Err(e) => {
                    eprintln!("scriptling-plugin: {peer}: {e}");
                    tell(&mut stream, &cannot_serve(&e));
                }
            }
            // Its place comes back now; the linger is the socket's alone
            // (on the connection's own thread, which may linger).
            server.forget(id);
            linger(stream);
            // The connection's buffers and its threads' allocator arenas
            // go back to the system (glibc keeps them otherwise).
            sys::return_freed_memory();
        });
        if let Err(e) = spawned {
            eprintln!("scriptling-plugin: cannot start a thread for a connection: {e}");
            self.forget(id);
        }
    }

    /// Starts one connection's session.
    fn start_session<S: Socket>(&self, stream: &S, peer: &str) -> io::Result<Session> {
        let config = &self.config;
        let stop = Arc::new(Stop::new()?);
        let input = Input::new(stream.try_clone()?, Arc::clone(&stop));
        let lines = LineReader::new(input, config.max_line_bytes).stop_at_long_lines();
        let output = Box::new(stream.try_clone()?);
        let limit = Limit {
            most: config.max_objects,
            setting: "SCRIPTLING_PLUGIN_MAX_OBJECTS, TcpConfig::max_objects",
            owner: "connection",
        };
        let gate = config.token.as_deref().map(|token| Arc::new(Gate::new(token.into(), config.hello_timeout)));
        let setup = Setup {
            core: Arc::clone(&self.core),
            runtime: self.runtime.clone(),
            pool: Pooling::Shared(self.pool.clone()),
            objects: ObjectTable::sequential_limited(limit),
            gate,
            idle: config.idle_timeout,
            peer: Some(format!("connection {peer}").into()),
            queue_limit: config.max_queued_bytes,
            line_timeout: config.line_timeout,
            max_waiting_calls: Some(config.max_waiting_calls),
            threads: ThreadNames { reader: "plugin-tcp-in", writer: "plugin-tcp-out" },
        };
        Session::start(setup, lines, stop, output)
    }

    /// Runs connection `id`'s session to its end (a server stopping ends it).
    fn run_session(&self, id: u64, session: Session) -> Result<(), ServeError> {
        let ender = session.ender();
        {
            let mut open = lock(&self.open.sessions);
            // Stopping began while this one started: it ends at once.
            if open.stopping {
                ender.end();
            }
            open.enders.insert(id, Some(ender));
        }
        session.run_to_end()
    }

    fn forget(&self, id: u64) {
        lock(&self.open.sessions).enders.remove(&id);
        self.open.ended.notify_all();
    }

    /// Ends every session (as a shutdown) and waits for them, for as long
    /// as their ends may take; then lets the pool's threads go.
    fn stop(&self) {
        let mut open = lock(&self.open.sessions);
        open.stopping = true;
        for ender in open.enders.values().flatten() {
            ender.end();
        }
        // A session's end: calls finish, objects are destroyed, answers
        // drain, each step within the grace; the drain may go on while
        // its peer reads, so this bounds the wait rather than promising it.
        let grace = self.core.options.shutdown_grace;
        let deadline = Instant::now() + grace.saturating_mul(3) + Duration::from_secs(2);
        while !open.enders.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                eprintln!(
                    "scriptling-plugin: {} connection(s) still closing; stopping without them",
                    open.enders.len()
                );
                break;
            };
            open = self.open.ended.wait_timeout(open, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        drop(open);
        self.pool.close();
    }
}

/// How long, and how much, a connection the server ends may go on sending
/// before it is closed regardless (see the module docs; HTTP's refusals
/// linger as long).
pub(crate) const LINGER: Duration = Duration::from_secs(1);
pub(crate) const LINGER_BYTES: usize = 1 << 20;

/// Closes a connection whose session has ended: sends the end, then reads
/// and drops what the client still sends, until it closes too or for
/// [`LINGER`]. Closing a socket with unread input resets the connection,
/// and a reset can destroy answers the client has not read yet (the one
/// to a wrong `hello`, a refusal). Sending the end also ends a write
/// stuck on a client that reads nothing.
fn linger<S: Socket>(mut stream: S) {
    if stream.shutdown_write().is_err() {
        return;
    }
    let until = Instant::now() + LINGER;
    let mut sink = [0u8; 16 * 1024];
    let mut dropped = 0;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        if dropped >= LINGER_BYTES || stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => dropped += n,
        }
    }
    let _ = stream.shutdown();
}

/// Why a connection cannot be served now, for its one line.
fn cannot_serve(error: &io::Error) -> String {
    if sys::out_of_descriptors(error) {
        format!(
            "the server cannot take another connection now: it is out of file descriptors ({error}); try again shortly"
        )
    } else {
        format!("the server cannot take another connection now: {error}; try again shortly")
    }
}

/// A descriptor kept open to be given up when descriptors run out, so
/// that a connection waiting to be accepted can be, and told why it is
/// refused, instead of waiting unanswered (`None`: none was free).
fn open_spare() -> Option<std::fs::File> {
    std::fs::File::open(if cfg!(windows) { "NUL" } else { "/dev/null" }).ok()
}

/// Tells a connection why it is not served, in one line, and closes it at
/// once (on the accepting thread, which must not linger).
fn turn_away<S: Socket>(mut stream: S, message: &str) {
    tell(&mut stream, message);
    let _ = stream.shutdown();
}

/// Writes `message` to `stream` as one JSON-RPC error line, best effort.
fn tell<S: Socket>(stream: &mut S, message: &str) {
    let mut line = Vec::new();
    crate::rpc::write_error(&mut line, None, &crate::rpc::RpcError::application(message));
    line.push(b'\n');
    // Best effort, without waiting: the line fits any socket buffer.
    let _ = stream.set_nonblocking(true);
    let _ = stream.write_all(&line);
    let _ = stream.set_nonblocking(false);
}

/// A listening socket.
enum Listener {
    Tcp(TcpListener),
    /// With the socket file's identity, to remove it only while it is
    /// still this server's.
    #[cfg(unix)]
    Unix(UnixListener, PathBuf, FileId),
}

/// A file's device and inode: which file a path names now.
#[cfg(unix)]
type FileId = (u64, u64);

#[cfg(unix)]
fn file_id(path: &std::path::Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// An accepted connection and who made it.
enum Accepted {
    Tcp(TcpStream, String),
    #[cfg(unix)]
    Unix(UnixStream, String),
}

impl Listener {
    fn bind(endpoint: &Endpoint) -> io::Result<Listener> {
        let listener = match endpoint {
            Endpoint::Tcp(addr) => Listener::Tcp(TcpListener::bind(addr)?),
            #[cfg(unix)]
            Endpoint::Unix(path) => {
                // A socket file left by a server that died (nobody accepts
                // on it) is replaced; a live one, or any other file, is not.
                if std::fs::symlink_metadata(path).is_ok_and(|m| {
                    use std::os::unix::fs::FileTypeExt;
                    m.file_type().is_socket()
                }) {
                    if UnixStream::connect(path).is_ok() {
                        return Err(io::Error::new(
                            io::ErrorKind::AddrInUse,
                            format!("address in use: a server is listening on unix:{} already", path.display()),
                        ));
                    }
                    let _ = std::fs::remove_file(path);
                }
                let listener = UnixListener::bind(path)?;
                let id = file_id(path).ok_or_else(|| io::Error::other("the socket file vanished as it was made"))?;
                Listener::Unix(listener, path.clone(), id)
            }
        };
        // Accepted only once the wait says one is there, so never blocks; and
        // the stop can end the wait.
        match &listener {
            Listener::Tcp(l) => l.set_nonblocking(true)?,
            #[cfg(unix)]
            Listener::Unix(l, ..) => l.set_nonblocking(true)?,
        }
        Ok(listener)
    }

    /// Accepts one waiting connection (descriptors having been freed for
    /// it) and tells it `message`.
    fn refuse_one(&self, message: &str) {
        match self {
            Listener::Tcp(l) => {
                if let Ok((stream, _)) = l.accept() {
                    turn_away(stream, message);
                }
            }
            #[cfg(unix)]
            Listener::Unix(l, ..) => {
                if let Ok((stream, _)) = l.accept() {
                    turn_away(stream, message);
                }
            }
        }
    }

    /// `tcp://ADDR` (the port actually bound) or `unix:PATH`.
    fn describe(&self) -> io::Result<String> {
        Ok(match self {
            Listener::Tcp(l) => format!("tcp://{}", l.local_addr()?),
            #[cfg(unix)]
            Listener::Unix(_, path, _) => format!("unix:{}", path.display()),
        })
    }

    /// Whether only this machine can connect.
    fn is_local(&self) -> io::Result<bool> {
        Ok(match self {
            Listener::Tcp(l) => l.local_addr()?.ip().is_loopback(),
            #[cfg(unix)]
            Listener::Unix(..) => true,
        })
    }

    /// The next connection, or `None` once `stop` is set.
    fn next(&self, stop: &Stop) -> io::Result<Option<Accepted>> {
        loop {
            match self {
                Listener::Tcp(l) => sys::wait_to_accept(l, stop)?,
                #[cfg(unix)]
                Listener::Unix(l, ..) => sys::wait_to_accept(l, stop)?,
            }
            if stop.is_stopped() {
                return Ok(None);
            }
            let accepted = match self {
                Listener::Tcp(l) => l.accept().and_then(|(s, peer)| {
                    s.prepare()?;
                    Ok(Accepted::Tcp(s, peer.to_string()))
                }),
                #[cfg(unix)]
                Listener::Unix(l, path, _) => l.accept().and_then(|(s, _)| {
                    s.prepare()?;
                    Ok(Accepted::Unix(s, format!("on {}", path.display())))
                }),
            };
            match accepted {
                Ok(accepted) => return Ok(Some(accepted)),
                // Another wake-up, or a client that gave up first.
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionAborted) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        #[cfg(unix)]
        // Only while the file is still this server's: another may have
        // replaced it since.
        if let Listener::Unix(_, path, id) = self {
            if file_id(path) == Some(*id) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// What the server needs of an accepted connection: a TCP socket, or (on
/// Unix) a Unix socket.
trait Socket: Readable + Read + Write + Sized + 'static {
    fn try_clone(&self) -> io::Result<Self>;
    /// Blocking I/O (the session's reader waits before it reads), and
    /// answers sent as soon as written. (An accepted socket inherits the
    /// listener's non-blocking mode on some systems.)
    fn prepare(&self) -> io::Result<()>;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
    /// Closes both directions, whoever else still holds the socket (a
    /// handler left running past the grace): the peer sees the end.
    fn shutdown(&self) -> io::Result<()>;
    /// Sends the end; the peer's data can still be read.
    fn shutdown_write(&self) -> io::Result<()>;
    fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()>;
}

impl Socket for TcpStream {
    fn try_clone(&self) -> io::Result<Self> {
        TcpStream::try_clone(self)
    }
    fn prepare(&self) -> io::Result<()> {
        TcpStream::set_nonblocking(self, false)?;
        self.set_nodelay(true)
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        TcpStream::set_nonblocking(self, on)
    }
    fn shutdown(&self) -> io::Result<()> {
        TcpStream::shutdown(self, std::net::Shutdown::Both)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        TcpStream::shutdown(self, std::net::Shutdown::Write)
    }
    fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, limit)
    }
}

#[cfg(unix)]
impl Socket for UnixStream {
    fn try_clone(&self) -> io::Result<Self> {
        UnixStream::try_clone(self)
    }
    fn prepare(&self) -> io::Result<()> {
        UnixStream::set_nonblocking(self, false)
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        UnixStream::set_nonblocking(self, on)
    }
    fn shutdown(&self) -> io::Result<()> {
        UnixStream::shutdown(self, std::net::Shutdown::Both)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        UnixStream::shutdown(self, std::net::Shutdown::Write)
    }
    fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, limit)
    }
}
