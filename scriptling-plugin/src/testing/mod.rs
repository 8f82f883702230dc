//! A test host: drive a plugin the way Scriptling does, from ordinary Rust
//! tests (feature `testing`).
//!
//! [`Host::in_process`] serves a [`Plugin`] inside the test process over a
//! pair of OS pipes, through exactly the event loop a real plugin uses.
//! [`Host::spawn`] starts a plugin executable and speaks the host side over
//! its stdin and stdout, capturing its stderr. Both answer the plugin's
//! `callback.call` requests with a handler you provide and record its
//! `host.log` records.
//!
//! Like the real Scriptling host, the test host serves the plugin's own
//! requests concurrently, each on its own thread and after a small random
//! delay (see [`Host::set_jitter`]), so they may be handled in any order and
//! after a response that followed them on the wire. A plugin that is right
//! here is right under the real host; one that only works when its
//! requests are handled in order, instantly, fails here too.
//!
//! ```
//! use scriptling_plugin::testing::Host;
//! use scriptling_plugin::{plugin_fn, Plugin, Value};
//!
//! /// Adds two numbers.
//! #[plugin_fn]
//! fn add(a: i64, #[arg(default = 1)] b: i64) -> i64 {
//!     a + b
//! }
//!
//! let host = Host::in_process(Plugin::new("math", "1.0.0", "").function::<add>()).unwrap();
//! let handshake = host.handshake().unwrap();
//! assert_eq!(handshake["schema"]["functions"][0]["description"], "add(a, b=1)\n\nAdds two numbers.");
//! assert_eq!(host.call("add", [Value::Int(2)]).unwrap(), Value::Int(3));
//! let err = host.call("add", [Value::from("x")]).unwrap_err();
//! assert_eq!(err.message(), "add(): argument 'a' must be an int, got string");
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::json;
use serde_json::value::RawValue;

#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
pub use http::{HttpClient, HttpResponse};

use crate::call::link::Link;
use crate::exports::error::ServeError;
use crate::exports::plugin::Plugin;
use crate::support::lock;
use crate::transport::stdio::Session;
use crate::transport::stdio::lines::LineReader;
use crate::value::{ObjectRef, Value};

/// How long a request waits for its response before failing with
/// [`HostError::Timeout`] (change it with [`Host::set_timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request made through a [`Host`] failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// The plugin answered with a JSON-RPC error.
    Rpc {
        /// The error code.
        code: i64,
        /// The message (what a Scriptling script would see).
        message: String,
    },
    /// No response arrived in time.
    Timeout,
    /// The plugin's output ended before the response arrived.
    Closed,
    /// The response did not have the expected shape.
    Decode(String),
}

impl HostError {
    /// The error message, for any kind of failure.
    pub fn message(&self) -> &str {
        match self {
            HostError::Rpc { message, .. } | HostError::Decode(message) => message,
            HostError::Timeout => "timed out waiting for the plugin",
            HostError::Closed => "the plugin closed its output",
        }
    }

    /// The JSON-RPC error code, if the plugin answered with an error.
    pub fn code(&self) -> Option<i64> {
        match self {
            HostError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code() {
            Some(code) => write!(f, "{} ({code})", self.message()),
            None => f.write_str(self.message()),
        }
    }
}

impl std::error::Error for HostError {}

/// A `host.log` record the plugin sent.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRecord {
    /// `trace`, `debug`, `info`, `warn`, `error` (or anything the plugin sent).
    pub level: String,
    /// The message.
    pub message: String,
    /// The flat key/value list of fields.
    pub args: Vec<Value>,
}

type CallbackHandler = dyn Fn(&str, Vec<Value>, BTreeMap<String, Value>) -> Result<Value, String> + Send + Sync;

/// The default for [`Host::set_jitter`].
pub const DEFAULT_JITTER: Duration = Duration::from_micros(300);

/// State shared between the [`Host`] and its reader thread.
struct Shared {
    writer: Mutex<Box<dyn Write + Send>>,
    /// Waiters for responses, by id; each gets the response line.
    pending: Mutex<HashMap<u64, Sender<String>>>,
    unrouted: Mutex<Sender<serde_json::Value>>,
    stray: Mutex<Vec<String>>,
    logs: Mutex<Vec<LogRecord>>,
    /// Signalled for every record handled.
    logged: Condvar,
    callback: Mutex<Option<Arc<CallbackHandler>>>,
    /// Idle workers that answer the plugin's requests (a cached pool: a
    /// callback may call back into the plugin, so a busy pool grows rather
    /// than queueing).
    idle_workers: Mutex<Vec<Sender<serde_json::Value>>>,
    /// The most a plugin request waits before it is handled, in nanoseconds.
    jitter: AtomicU64,
    /// A cheap random source for the jitter.
    seed: AtomicU64,
    /// Whether `host.log` requests are answered.
    ack_logs: std::sync::atomic::AtomicBool,
    /// Everything the plugin wrote to stderr (spawned plugins), and a
    /// signal for whoever waits for a line of it.
    stderr: Arc<Captured>,
}

/// Output captured from a pipe, with a signal for whoever waits on it.
#[derive(Default)]
struct Captured {
    bytes: Mutex<Vec<u8>>,
    grew: Condvar,
    closed: Mutex<bool>,
}

impl Shared {
    fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut w = lock(&self.writer);
        w.write_all(line)?;
        w.write_all(b"\n")?;
        w.flush()
    }
}

enum Backend {
    InProcess { finished: Option<Receiver<Result<(), ServeError>>>, link: Arc<Link> },
    Process { child: Child },
}

/// The host side of a plugin connection. See the [module docs](self).
pub struct Host {
    shared: Arc<Shared>,
    next_id: AtomicU64,
    unrouted: Mutex<Receiver<serde_json::Value>>,
    timeout: Duration,
    backend: Mutex<Backend>,
}

impl Host {
    /// Serves `plugin` inside this process and connects to it. Fails if the
    /// plugin's registrations are invalid.
    pub fn in_process(plugin: Plugin) -> Result<Host, ServeError> {
        let core = Arc::new(plugin.build()?);
        let (plugin_in, host_out) = std::io::pipe()?;
        let (host_in, plugin_out) = std::io::pipe()?;
        let runtime = Arc::new(OnceLock::new());
        let lines = LineReader::new(plugin_in, core.options.max_frame_bytes);
        let session = Session::start(core, lines, plugin_out, Arc::clone(&runtime), false, Duration::ZERO)?;
        let link = session.link();
        let (finished_tx, finished) = mpsc::channel();
        std::thread::Builder::new().name("scriptling-test-plugin".into()).spawn(move || {
            let result = crate::transport::runtime().map_err(ServeError::from).and_then(|rt| {
                let _ = runtime.set(rt.handle().clone());
                let result = rt.block_on(session.finish(None));
                rt.shutdown_background();
                result
            });
            let _ = finished_tx.send(result);
        })?;
        let backend = Backend::InProcess { finished: Some(finished), link };
        Ok(Host::connect(Box::new(host_out), host_in, backend, Arc::new(Captured::default())))
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
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        let shared = Arc::new(Shared {
            writer: Mutex::new(writer),
            pending: Mutex::new(HashMap::new()),
            unrouted: Mutex::new(unrouted_tx),
            stray: Mutex::new(Vec::new()),
            logs: Mutex::new(Vec::new()),
            logged: Condvar::new(),
            callback: Mutex::new(None),
            idle_workers: Mutex::new(Vec::new()),
            jitter: AtomicU64::new(DEFAULT_JITTER.as_nanos() as u64),
            seed: AtomicU64::new(seed | 1),
            ack_logs: std::sync::atomic::AtomicBool::new(true),
            stderr,
        });
        let reader_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("scriptling-test-host".into())
            .spawn(move || read_loop(&reader_shared, reader))
            .expect("spawn the host reader thread");
        Host {
            shared,
            next_id: AtomicU64::new(1),
            unrouted: Mutex::new(unrouted_rx),
            timeout: DEFAULT_TIMEOUT,
            backend: Mutex::new(backend),
        }
    }

    /// Changes how long requests wait for their response.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The most each of the plugin's own requests (`callback.call`,
    /// `host.log`) waits, at random, before this host handles it (default
    /// [`DEFAULT_JITTER`]; zero handles each at once, still concurrently).
    /// Longer delays shake out ordering bugs: a plugin must not rely on its
    /// requests being handled in the order it sent them.
    pub fn set_jitter(&self, max: Duration) {
        self.shared.jitter.store(u64::try_from(max.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
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
        let params = with_args(json!({ "class": class }), args, BTreeMap::new());
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
        let response = rx.recv_timeout(self.timeout);
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

    /// Closes the plugin's input (stdin EOF).
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
            Backend::Process { .. } => None,
        }
    }

    /// The process id of a spawned plugin.
    pub fn pid(&self) -> Option<u32> {
        match &*lock(&self.backend) {
            Backend::Process { child, .. } => Some(child.id()),
            Backend::InProcess { .. } => None,
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

/// The path of an example binary of the package under test, found next to
/// the running test executable (`target/<profile>/examples/<name>`).
pub fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir: &Path = exe.parent().expect("a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("a profile directory");
    }
    dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
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

/// What the host needs of a frame from the plugin to route it; nested
/// payloads are skipped, not parsed, so any depth is fine.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

/// Keeps a field that is present but `null` (`"result": null` is a result).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

#[derive(serde::Deserialize)]
struct ErrorObject {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
}

fn read_loop(shared: &Arc<Shared>, reader: impl Read) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.is_empty() {
            continue;
        }
        let Some((is_request, id)) = route_of(text) else {
            lock(&shared.stray).push(text.to_owned());
            continue;
        };
        if is_request {
            // Handled on another thread, after a random delay, as the real
            // host does: a callback may itself call the plugin, and nothing
            // says the plugin's requests are handled in the order sent.
            match serde_json::from_str(text) {
                Ok(frame) => dispatch_to_worker(shared, frame),
                Err(_) => lock(&shared.stray).push(text.to_owned()),
            }
            continue;
        }
        match id.and_then(|id| lock(&shared.pending).remove(&id)) {
            Some(tx) => {
                let _ = tx.send(text.to_owned());
            }
            None => {
                // Frames nobody waits for are handed out parsed; one too deep
                // for serde_json's parser is handed out as a string.
                let frame = serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()));
                let _ = lock(&shared.unrouted).send(frame);
            }
        }
    }
    // Dropping the waiters' senders wakes them with `Closed`.
    lock(&shared.pending).clear();
}

/// Whether a frame is a request, and the numeric id it carries; `None` if
/// it is not JSON (or is a batch, which only answers `send_raw` lines).
fn route_of(text: &str) -> Option<(bool, Option<u64>)> {
    if text.starts_with('[') {
        return serde_json::from_str::<serde::de::IgnoredAny>(text).ok().map(|_| (false, None));
    }
    let envelope: Envelope<'_> = serde_json::from_str(text).ok()?;
    Some((envelope.method.is_some(), envelope.id.and_then(|id| id.get().parse().ok())))
}

fn record_log(shared: &Shared, params: &serde_json::Value) {
    let args: Vec<Value> = serde_json::from_value(params["args"].clone()).unwrap_or_default();
    lock(&shared.logs).push(LogRecord {
        level: params["level"].as_str().unwrap_or_default().to_owned(),
        message: params["message"].as_str().unwrap_or_default().to_owned(),
        args,
    });
    shared.logged.notify_all();
}

/// Hands a plugin request to an idle worker, or to a new one.
fn dispatch_to_worker(shared: &Arc<Shared>, frame: serde_json::Value) {
    let mut frame = frame;
    while let Some(worker) = lock(&shared.idle_workers).pop() {
        match worker.send(frame) {
            Ok(()) => return,
            // That worker timed out and left; try the next.
            Err(mpsc::SendError(back)) => frame = back,
        }
    }
    let (tx, rx) = mpsc::channel::<serde_json::Value>();
    let weak = Arc::downgrade(shared);
    let _ = tx.send(frame);
    std::thread::spawn(move || {
        while let Ok(frame) = rx.recv_timeout(Duration::from_secs(5)) {
            let Some(shared) = weak.upgrade() else { return };
            shared.pause();
            answer_plugin_request(&shared, &frame);
            lock(&shared.idle_workers).push(tx.clone());
        }
    });
}

impl Shared {
    /// Waits a random time up to the jitter.
    fn pause(&self) {
        let max = self.jitter.load(Ordering::Relaxed);
        if max == 0 {
            return;
        }
        // xorshift64: enough randomness for scheduling noise.
        let mut x = self.seed.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed.store(x, Ordering::Relaxed);
        std::thread::sleep(Duration::from_nanos(x % (max + 1)));
    }
}

fn answer_plugin_request(shared: &Shared, frame: &serde_json::Value) {
    let params = frame.get("params").cloned().unwrap_or(serde_json::Value::Null);
    let outcome: Result<serde_json::Value, (i64, String)> = match frame["method"].as_str().unwrap_or_default() {
        "host.log" => {
            record_log(shared, &params);
            if !shared.ack_logs.load(Ordering::Relaxed) {
                return;
            }
            Ok(json!({"type": "null"}))
        }
        "callback.call" => {
            let id = params["id"].as_str().unwrap_or_default().to_owned();
            let args: Vec<Value> = serde_json::from_value(params["args"].clone()).unwrap_or_default();
            let kwargs: BTreeMap<String, Value> = serde_json::from_value(params["kwargs"].clone()).unwrap_or_default();
            let handler = lock(&shared.callback).clone();
            match handler {
                Some(h) => h(&id, args, kwargs)
                    .map(|v| serde_json::to_value(v).expect("finite values"))
                    .map_err(|m| (-32000, m)),
                None => Err((-32000, format!("unknown callback {id}"))),
            }
        }
        other => Err((-32601, format!("method not found: {other}"))),
    };
    let Some(id) = frame.get("id") else { return };
    let response = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    };
    let _ = shared.write_line(&serde_json::to_vec(&response).expect("JSON"));
}
