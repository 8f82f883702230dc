//! The host's side of the wire: reading the plugin's frames, routing
//! answers to the requests waiting for them, and serving the plugin's own
//! requests (`callback.call`, `host.log`) concurrently, as the real host does.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;

use crate::support::lock;
use crate::testing::{DEFAULT_JITTER, LogRecord};
use crate::value::Value;

pub(super) type CallbackHandler =
    dyn Fn(&str, Vec<Value>, BTreeMap<String, Value>) -> Result<Value, String> + Send + Sync;

/// State shared between the [`Host`] and its reader thread.
pub(super) struct Shared {
    pub(super) writer: Mutex<Box<dyn Write + Send>>,
    /// Waiters for responses, by id; each gets the response line.
    pub(super) pending: Mutex<HashMap<u64, Sender<String>>>,
    pub(super) unrouted: Mutex<Sender<serde_json::Value>>,
    pub(super) stray: Mutex<Vec<String>>,
    pub(super) logs: Mutex<Vec<LogRecord>>,
    /// Signalled for every record handled.
    pub(super) logged: Condvar,
    pub(super) callback: Mutex<Option<Arc<CallbackHandler>>>,
    /// Idle workers that answer the plugin's requests (a cached pool: a
    /// callback may call back into the plugin, so a busy pool grows rather
    /// than queueing).
    pub(super) idle_workers: Mutex<Vec<Sender<serde_json::Value>>>,
    /// The most a plugin request waits before it is handled, in nanoseconds.
    pub(super) jitter: AtomicU64,
    /// A cheap random source for the jitter.
    pub(super) seed: AtomicU64,
    /// Whether `host.log` requests are answered.
    pub(super) ack_logs: std::sync::atomic::AtomicBool,
    /// Everything the plugin wrote to stderr (spawned plugins), and a
    /// signal for whoever waits for a line of it.
    pub(super) stderr: Arc<Captured>,
}

/// Output captured from a pipe, with a signal for whoever waits on it.
#[derive(Default)]
pub(super) struct Captured {
    pub(super) bytes: Mutex<Vec<u8>>,
    pub(super) grew: Condvar,
    pub(super) closed: Mutex<bool>,
}

impl Shared {
    pub(super) fn new(
        writer: Box<dyn Write + Send>,
        unrouted: Sender<serde_json::Value>,
        stderr: Arc<Captured>,
    ) -> Self {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Shared {
            writer: Mutex::new(writer),
            pending: Mutex::new(HashMap::new()),
            unrouted: Mutex::new(unrouted),
            stray: Mutex::new(Vec::new()),
            logs: Mutex::new(Vec::new()),
            logged: Condvar::new(),
            callback: Mutex::new(None),
            idle_workers: Mutex::new(Vec::new()),
            jitter: AtomicU64::new(u64::try_from(DEFAULT_JITTER.as_nanos()).unwrap_or(u64::MAX)),
            seed: AtomicU64::new(seed | 1),
            ack_logs: std::sync::atomic::AtomicBool::new(true),
            stderr,
        }
    }

    pub(super) fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut w = lock(&self.writer);
        w.write_all(line)?;
        w.write_all(b"\n")?;
        w.flush()
    }
}

/// What the host needs of a frame from the plugin to route it; nested
/// payloads are skipped, not parsed, so any depth is fine.
#[derive(serde::Deserialize)]
pub(super) struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) result: Option<&'a RawValue>,
    #[serde(default)]
    pub(super) error: Option<ErrorObject>,
}

/// Keeps a field that is present but `null` (`"result": null` is a result).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

#[derive(serde::Deserialize)]
pub(super) struct ErrorObject {
    #[serde(default)]
    pub(super) code: i64,
    #[serde(default)]
    pub(super) message: String,
}

pub(super) fn read_loop(shared: &Arc<Shared>, reader: impl Read) {
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
