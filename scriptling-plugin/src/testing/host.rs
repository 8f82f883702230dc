//! [`Host`]: the test host's API: start a plugin, speak to it, and look at
//! what it did.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use serde_json::value::RawValue;

use crate::call::link::Link;
use crate::exports::error::ServeError;
use crate::exports::plugin::Plugin;
use crate::support::lock;
use crate::sys::Stop;
use crate::testing::wire::{self, Captured, Envelope, Shared};
use crate::testing::{DEFAULT_TIMEOUT, HostError, LogRecord, example_path};
use crate::transport::session::input::Input;
use crate::transport::session::lines::LineReader;
use crate::transport::session::{Session, Setup};
use crate::value::{ObjectRef, Value};

enum Backend {
    InProcess {
        finished: Option<Receiver<Result<(), ServeError>>>,
        link: Arc<Link>,
    },
    Process {
        child: Child,
    },
    /// A connection to a plugin served over TCP or a Unix socket: `closed`
    /// says when the plugin has closed it.
    Connection {
        closed: Receiver<()>,
    },
}

/// The host side of a plugin connection. See the [module docs](crate::testing).
pub struct Host {
    shared: Arc<Shared>,
    next_id: AtomicU64,
    unrouted: Mutex<Receiver<serde_json::Value>>,
    /// How long a request waits for its response, in nanoseconds.
    timeout: AtomicU64,
    backend: Mutex<Backend>,
}

impl Host {
    /// Serves `plugin` inside this process and connects to it. Fails if the
    /// plugin's registrations are invalid.
    pub fn in_process(plugin: Plugin) -> Result<Host, ServeError> {
        let core = Arc::new(plugin.build()?);
        let (plugin_in, host_out) = std::io::pipe()?;
        let (host_in, plugin_out) = std::io::pipe()?;
        let runtime = crate::transport::async_runtime::AsyncRuntime::start(&core.options)?;
        let stop = Arc::new(Stop::new()?);
        let lines = LineReader::new(Input::new(plugin_in, Arc::clone(&stop)), core.options.max_frame_bytes);
        let session = Session::start(Setup::stdio(core, runtime.handle().clone()), lines, stop, Box::new(plugin_out))?;
        let link = session.link();
        let (finished_tx, finished) = mpsc::channel();
        std::thread::Builder::new().name("scriptling-test-plugin".into()).spawn(move || {
            let result = session.run_to_end();
            drop(runtime);
            let _ = finished_tx.send(result);
        })?;
        let backend = Backend::InProcess { finished: Some(finished), link };
        Ok(Host::connect(Box::new(host_out), host_in, backend, Arc::new(Captured::default())))
    }

    /// Connects to a plugin served over TCP ([`Plugin::serve_tcp`], or a
    /// plugin binary run with `--listen tcp://HOST:PORT`) and speaks the
    /// Scriptling protocol on that connection, answering its callbacks and
    /// recording its log records as for a spawned plugin. The Supex
    /// bridge's methods go through [`request`](Host::request):
    ///
    /// ```no_run
    /// use scriptling_plugin::testing::Host;
    /// use serde_json::json;
    ///
    /// let host = Host::connect_tcp("127.0.0.1:9876".parse().unwrap()).unwrap();
    /// host.request("hello", json!({"name": "test", "token": "s3cret"})).unwrap();
    /// let answer = host.request("tools/call", json!({"name": "greet", "arguments": {"name": "Ada"}})).unwrap();
    /// assert_eq!(answer, json!({"success": true, "result": "Hello, Ada"}));
    /// ```
    ///
    /// A connection speaks the Scriptling protocol once it has sent
    /// `scriptling.handshake` ([`handshake`](Host::handshake)): until then
    /// the plugin sends it no `host.log` requests (a tool client could not
    /// answer them), and its calls' log records go to the plugin's stderr.
    ///
    /// [`close_input`](Host::close_input) closes this side of the
    /// connection; [`wait`](Host::wait) waits for the plugin to close its
    /// side.
    pub fn connect_tcp(addr: std::net::SocketAddr) -> std::io::Result<Host> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Host::connect_socket(SocketWriter(stream.try_clone()?), stream))
    }

    /// Like [`connect_tcp`](Host::connect_tcp), for a plugin served on a
    /// Unix socket (`--listen unix:/path`).
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub fn connect_unix(path: impl AsRef<std::path::Path>) -> std::io::Result<Host> {
        let stream = std::os::unix::net::UnixStream::connect(path)?;
        Ok(Host::connect_socket(SocketWriter(stream.try_clone()?), stream))
    }

    fn connect_socket<S: HalfClose + 'static>(writer: SocketWriter<S>, reader: impl Read + Send + 'static) -> Host {
        let (closed_tx, closed) = mpsc::channel();
        let reader = NoticeEnd { inner: reader, ended: Some(closed_tx) };
        Host::connect(Box::new(writer), reader, Backend::Connection { closed }, Arc::new(Captured::default()))
    }

    /// Starts a plugin executable with piped stdin and stdout; its stderr
    /// is captured (see [`stderr`](Host::stderr)).
    pub fn spawn(mut command: Command) -> std::io::Result<Host> {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let stdin: ChildStdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let mut stderr_pipe = child.stderr.take().expect("piped");
        let stderr = Arc::new(Captured::default());
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                lock(&sink.bytes).extend_from_slice(&chunk[..n]);
                sink.grew.notify_all();
            }
            *lock(&sink.closed) = true;
            // Taken so a waiter between its check and its wait sees this.
            drop(lock(&sink.bytes));
            sink.grew.notify_all();
        });
        Ok(Host::connect(Box::new(stdin), stdout, Backend::Process { child }, stderr))
    }

    /// Starts one of the current package's examples (`cargo test` builds
    /// them next to the test binaries): `Host::spawn_example("hello")`.
    pub fn spawn_example(name: &str) -> std::io::Result<Host> {
        Host::spawn(Command::new(example_path(name)))
    }

    fn connect(
        writer: Box<dyn Write + Send>,
        reader: impl Read + Send + 'static,
        backend: Backend,
        stderr: Arc<Captured>,
    ) -> Host {
        let (unrouted_tx, unrouted_rx) = mpsc::channel();
        let shared = Arc::new(Shared::new(writer, unrouted_tx, stderr));
        let reader_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("scriptling-test-host".into())
            .spawn(move || wire::read_loop(&reader_shared, reader))
            .expect("spawn the host reader thread");
        Host {
            shared,
            next_id: AtomicU64::new(1),
            unrouted: Mutex::new(unrouted_rx),
            timeout: AtomicU64::new(nanos(DEFAULT_TIMEOUT)),
            backend: Mutex::new(backend),
        }
    }

    /// Changes how long requests wait for their response. Takes `&self`,
    /// like [`set_jitter`](Host::set_jitter), so a host shared between
    /// threads can be tuned.
    pub fn set_timeout(&self, timeout: Duration) {
        self.timeout.store(nanos(timeout), Ordering::Relaxed);
    }

    /// The most each of the plugin's own requests (`callback.call`,
    /// `host.log`) waits, at random, before this host handles it (default
    /// [`DEFAULT_JITTER`](crate::testing::DEFAULT_JITTER); zero handles each at once, still concurrently).
    /// Longer delays shake out ordering bugs: a plugin must not rely on its
    /// requests being handled in the order it sent them.
    pub fn set_jitter(&self, max: Duration) {
        self.shared.jitter.store(nanos(max), Ordering::Relaxed);
    }

    /// Answers the plugin's `callback.call` requests with `handler(id, args,
    /// kwargs)`; an `Err(message)` becomes a JSON-RPC error, as when the
    /// Scriptling callback raised. Without a handler every callback fails
    /// with `unknown callback <id>`, as on the real host.
    pub fn on_callback(
        &self,
        handler: impl Fn(&str, Vec<Value>, BTreeMap<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) {
        *lock(&self.shared.callback) = Some(Arc::new(handler));
    }

    /// Stops (or resumes) answering `host.log` requests, as a host that
    /// never acknowledges them would; the records are still recorded.
    pub fn acknowledge_logs(&self, acknowledge: bool) {
        self.shared.ack_logs.store(acknowledge, Ordering::Relaxed);
    }

    /// The `host.log` records handled so far, in the order this host
    /// handled them (see the module docs on concurrency).
    pub fn logs(&self) -> Vec<LogRecord> {
        lock(&self.shared.logs).clone()
    }

    /// Waits until at least `count` `host.log` records have been handled,
    /// for up to `timeout`, and returns them all; `Err` with those handled
    /// so far if the time runs out.
    pub fn wait_for_logs(&self, count: usize, timeout: Duration) -> Result<Vec<LogRecord>, Vec<LogRecord>> {
        let deadline = Instant::now() + timeout;
        let mut logs = lock(&self.shared.logs);
        while logs.len() < count {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return Err(logs.clone()) };
            logs = self.shared.logged.wait_timeout(logs, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        Ok(logs.clone())
    }

    /// Lines the plugin wrote to its protocol stream that are not JSON. A
    /// correct plugin never writes any.
    pub fn stray_output(&self) -> Vec<String> {
        lock(&self.shared.stray).clone()
    }

    /// Sends `scriptling.handshake` as the real host does and returns the result.
    pub fn handshake(&self) -> Result<serde_json::Value, HostError> {
        self.request(
            "scriptling.handshake",
            json!({"protocol": "1.0", "host": "scriptling", "host_version": "dev",
                   "transports": ["json"], "capabilities": ["remote_objects"]}),
        )
    }

    /// Calls a function with positional arguments.
    pub fn call(&self, name: &str, args: impl IntoIterator<Item = Value>) -> Result<Value, HostError> {
        self.call_kw(name, args, BTreeMap::new())
    }

    /// Calls a function with positional and keyword arguments.
    pub fn call_kw(
        &self,
        name: &str,
        args: impl IntoIterator<Item = Value>,
        kwargs: BTreeMap<String, Value>,
    ) -> Result<Value, HostError> {
        let params = with_args(json!({ "name": name }), args, kwargs);
        self.request_value("function.call", params)
    }

    /// Constructs an object (`object.new`) and returns its bare reference.
    pub fn new_object(&self, class: &str, args: impl IntoIterator<Item = Value>) -> Result<ObjectRef, HostError> {
        self.new_object_kw(class, args, BTreeMap::new())
    }

    /// Constructs an object with keyword arguments too.
    pub fn new_object_kw(
        &self,
        class: &str,
        args: impl IntoIterator<Item = Value>,
        kwargs: BTreeMap<String, Value>,
    ) -> Result<ObjectRef, HostError> {
        let params = with_args(json!({ "class": class }), args, kwargs);
        let result = self.request_raw("object.new", Some(params))?;
        serde_json::from_str(result.get()).map_err(|e| HostError::Decode(e.to_string()))
    }

    /// Calls a method, or gets (no args) or sets (one arg) a property.
    pub fn call_method(
        &self,
        object_id: &str,
        method: &str,
        args: impl IntoIterator<Item = Value>,
    ) -> Result<Value, HostError> {
        self.call_method_kw(object_id, method, args, BTreeMap::new())
    }

    /// Calls a method with keyword arguments too.
    pub fn call_method_kw(
        &self,
        object_id: &str,
        method: &str,
        args: impl IntoIterator<Item = Value>,
        kwargs: BTreeMap<String, Value>,
    ) -> Result<Value, HostError> {
        let params = with_args(json!({ "object_id": object_id, "method": method }), args, kwargs);
        self.request_value("object.call_method", params)
    }

    /// Destroys an object (`object.destroy`).
    pub fn destroy(&self, object_id: &str) -> Result<(), HostError> {
        self.request("object.destroy", json!({ "object_id": object_id })).map(drop)
    }

    /// Sends `plugin.shutdown` and waits for its answer.
    pub fn shutdown(&self) -> Result<(), HostError> {
        self.request("plugin.shutdown", serde_json::Value::Null).map(drop)
    }

    /// Sends any request and waits for its result.
    pub fn request(&self, method: &str, params: serde_json::Value) -> Result<serde_json::Value, HostError> {
        let params = (!params.is_null()).then(|| params.to_string());
        let result = self.request_raw(method, params)?;
        serde_json::from_str(result.get()).map_err(|e| HostError::Decode(e.to_string()))
    }

    /// A request whose result is a transport value (decoded however deep
    /// it nests, as the plugin's own decoder would).
    fn request_value(&self, method: &str, params: String) -> Result<Value, HostError> {
        let result = self.request_raw(method, Some(params))?;
        crate::value::codec::decode(result.get().as_bytes()).map_err(|e| HostError::Decode(e.to_string()))
    }

    /// Sends a request with `params` (JSON text) and returns its raw result.
    fn request_raw(&self, method: &str, params: Option<String>) -> Result<Box<RawValue>, HostError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.shared.pending).insert(id, tx);
        let method = serde_json::to_string(method).map_err(|e| HostError::Decode(e.to_string()))?;
        let mut line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method}"#);
        if let Some(params) = params {
            line.push_str(r#","params":"#);
            line.push_str(&params);
        }
        line.push('}');
        if self.shared.write_line(line.as_bytes()).is_err() {
            lock(&self.shared.pending).remove(&id);
            return Err(HostError::Closed);
        }
        let response = rx.recv_timeout(Duration::from_nanos(self.timeout.load(Ordering::Relaxed)));
        lock(&self.shared.pending).remove(&id);
        let response = match response {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => return Err(HostError::Timeout),
            Err(RecvTimeoutError::Disconnected) => return Err(HostError::Closed),
        };
        let envelope: Envelope<'_> = serde_json::from_str(&response).map_err(|e| HostError::Decode(e.to_string()))?;
        if let Some(err) = envelope.error {
            return Err(HostError::Rpc { code: err.code, message: err.message });
        }
        envelope
            .result
            .map(ToOwned::to_owned)
            .ok_or_else(|| HostError::Decode(format!("response without result: {response}")))
    }

    /// Writes a raw line (a newline is added) to the plugin's input.
    pub fn send_raw(&self, line: impl AsRef<[u8]>) -> std::io::Result<()> {
        self.shared.write_line(line.as_ref())
    }

    /// The next frame that no [`request`](Host::request) is waiting for
    /// (answers to [`send_raw`](Host::send_raw) lines, batch arrays, errors
    /// with a `null` id), or `None` after `timeout`.
    pub fn next_frame(&self, timeout: Duration) -> Option<serde_json::Value> {
        lock(&self.unrouted).recv_timeout(timeout).ok()
    }

    /// Closes the plugin's input (stdin EOF; over a connection, this
    /// side of it).
    pub fn close_input(&self) {
        *lock(&self.shared.writer) = Box::new(std::io::sink());
    }

    /// Waits for the plugin to finish serving, for up to `timeout`. Returns
    /// the exit status of a spawned plugin (`None` in process), or `Err` with
    /// a description if it did not finish in time.
    pub fn wait(&self, timeout: Duration) -> Result<Option<ExitStatus>, String> {
        let deadline = Instant::now() + timeout;
        let mut backend = lock(&self.backend);
        match &mut *backend {
            // std has no timed wait for a child: ask often, it is cheap.
            Backend::Process { child, .. } => loop {
                if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                    return Ok(Some(status));
                }
                if Instant::now() >= deadline {
                    return Err(format!("the plugin did not exit within {timeout:?}"));
                }
                std::thread::sleep(Duration::from_millis(1));
            },
            Backend::InProcess { finished, .. } => {
                let Some(rx) = finished else { return Ok(None) };
                match rx.recv_timeout(timeout) {
                    Ok(result) => {
                        *finished = None;
                        result.map(|()| None).map_err(|e| e.to_string())
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        Err(format!("the plugin did not stop serving within {timeout:?}"))
                    }
                    Err(RecvTimeoutError::Disconnected) => Err("the plugin's serving thread panicked".into()),
                }
            }
            Backend::Connection { closed } => match closed.recv_timeout(timeout) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => Ok(None),
                Err(RecvTimeoutError::Timeout) => {
                    Err(format!("the plugin did not close the connection within {timeout:?}"))
                }
            },
        }
    }

    /// What a spawned plugin wrote to stderr so far (empty in process).
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&lock(&self.shared.stderr.bytes)).into_owned()
    }

    /// Waits until a spawned plugin's stderr contains `needle`, for up to
    /// `timeout`, and returns the stderr read so far. `Err` carries what was
    /// read when the time ran out or the plugin closed stderr without it.
    pub fn wait_for_stderr(&self, needle: &str, timeout: Duration) -> Result<String, String> {
        let captured = &self.shared.stderr;
        let deadline = Instant::now() + timeout;
        let mut bytes = lock(&captured.bytes);
        loop {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if text.contains(needle) {
                return Ok(text);
            }
            if *lock(&captured.closed) {
                return Err(text);
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return Err(text) };
            bytes = captured.grew.wait_timeout(bytes, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// How many objects are alive in an in-process plugin's object table
    /// (`None` for a spawned plugin): for leak checks.
    pub fn live_objects(&self) -> Option<usize> {
        match &*lock(&self.backend) {
            Backend::InProcess { link, .. } => Some(link.objects.len()),
            Backend::Process { .. } | Backend::Connection { .. } => None,
        }
    }

    /// How many of an in-process plugin's own requests (`callback.call`,
    /// `host.log`) still wait for this host's answer (`None` for a spawned
    /// plugin): for checks that nothing piles up.
    pub fn pending_requests(&self) -> Option<usize> {
        match &*lock(&self.backend) {
            Backend::InProcess { link, .. } => Some(link.pending_requests()),
            Backend::Process { .. } | Backend::Connection { .. } => None,
        }
    }

    /// The process id of a spawned plugin.
    pub fn pid(&self) -> Option<u32> {
        match &*lock(&self.backend) {
            Backend::Process { child, .. } => Some(child.id()),
            Backend::InProcess { .. } | Backend::Connection { .. } => None,
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.close_input();
        if let Backend::Process { child, .. } = &mut *lock(&self.backend) {
            if matches!(child.try_wait(), Ok(None)) {
                let deadline = Instant::now() + Duration::from_secs(2);
                while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The params of a call: `head` (its names) plus `args` and `kwargs`, as
/// JSON text. Written by hand so that deeply nested values are encoded by
/// the SDK's own (stack-safe) encoder.
fn with_args(
    head: serde_json::Value,
    args: impl IntoIterator<Item = Value>,
    kwargs: BTreeMap<String, Value>,
) -> String {
    let args: Vec<Value> = args.into_iter().collect();
    let mut params = head.to_string();
    params.pop();
    // As the real host does: `args` and `kwargs` are left out when empty.
    if !args.is_empty() {
        params.push_str(r#","args":"#);
        params.push_str(&serde_json::to_string(&args).expect("finite values"));
    }
    if !kwargs.is_empty() {
        params.push_str(r#","kwargs":"#);
        params.push_str(&serde_json::to_string(&kwargs).expect("finite values"));
    }
    params.push('}');
    params
}

/// The writing half of a socket: dropping it (as [`Host::close_input`]
/// does) shuts the socket's sending side, so the plugin reads its end.
struct SocketWriter<S: HalfClose>(S);

/// A socket whose sending side can be shut alone.
trait HalfClose: Write + Send {
    fn close_write(&self);
}

impl HalfClose for std::net::TcpStream {
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

#[cfg(unix)]
impl HalfClose for std::os::unix::net::UnixStream {
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl<S: HalfClose> Write for SocketWriter<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl<S: HalfClose> Drop for SocketWriter<S> {
    fn drop(&mut self) {
        self.0.close_write();
    }
}

/// A reader that says when its input has ended.
struct NoticeEnd<R> {
    inner: R,
    ended: Option<mpsc::Sender<()>>,
}

impl<R: Read> Read for NoticeEnd<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf);
        if matches!(read, Ok(0) | Err(_)) {
            if let Some(ended) = self.ended.take() {
                let _ = ended.send(());
            }
        }
        read
    }
}

/// `duration` in nanoseconds, saturating (an atomic holds it).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
