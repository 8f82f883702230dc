//! [`Logger`]: log records that reach the host's logger (`host.log`), and
//! the per-call stream that delivers them in order, before the call's answer.
//!
//! The real host handles the plugin's requests concurrently, in any order:
//! records written back to back may be printed shuffled, or after the
//! script has already printed the call's result (HOST-NOTES F.1). So a
//! call's records travel one at a time, each sent once the host has
//! acknowledged the one before, and the call's response waits until the
//! last one is acknowledged. Logging itself never waits: a record joins the
//! call's queue and the handler carries on.
//!
//! The wait is bounded: a host that stops acknowledging holds a response
//! back for at most the plugin's log timeout (5 s unless configured with
//! `Plugin::log_ack_timeout`); the call's remaining records are then sent
//! without waiting and the response follows.

use std::collections::VecDeque;
use std::fmt::{self, Display};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::call::context::{self, CallScope, CallState};
use crate::call::link::Link;
use crate::support::lock;
use crate::value::Value;
use crate::value::convert::IntoValue;

/// A log level. There is no `fatal`: the host calls its logger's `Fatal`,
/// which may end the host process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the plugin handled.
    Warn,
    /// A failure.
    Error,
}

impl Level {
    /// The level's name on the wire.
    ///
    /// ```
    /// assert_eq!(scriptling_plugin::Level::Warn.as_str(), "warn");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

impl Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Writes log records through the host's logger.
///
/// [`Logger::current`] gives the logger of the call the SDK is running on
/// this thread (in sync and async handlers alike). Logging costs the handler
/// no round trip: records queue and travel to the host one after another,
/// so the host prints them in the order they were written, and the call's
/// answer waits until the host has acknowledged them all, so a script
/// never sees its call return before the call's log lines. The wait is
/// bounded by [`Plugin::log_ack_timeout`](crate::Plugin::log_ack_timeout).
///
/// Outside a call (at start-up, on a thread the handler spawned) or over a
/// transport that cannot call the host (HTTP), records go to stderr, never
/// to stdout.
///
/// ```
/// use scriptling_plugin::{plugin_fn, Logger};
///
/// #[plugin_fn]
/// fn work(name: String) -> String {
///     let log = Logger::current().with("plugin", "logger");
///     log.with("name", &name).info("plugin work started");
///     format!("logged:{name}")
/// }
/// ```
#[derive(Clone, Default)]
pub struct Logger {
    scope: Option<CallScope>,
    /// Flat key/value pairs, as the host expects them.
    fields: Vec<Value>,
}

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logger").field("attached", &self.scope.is_some()).field("fields", &self.fields).finish()
    }
}

impl Logger {
    /// The current call's logger (falls back to stderr outside a call).
    pub fn current() -> Logger {
        Logger { scope: context::current(), fields: Vec::new() }
    }

    /// A logger that always writes to stderr.
    pub fn stderr() -> Logger {
        Logger::default()
    }

    /// A logger that adds `key = value` to every record. A value that
    /// cannot be converted is logged as its error message.
    pub fn with(&self, key: impl Into<String>, value: impl IntoValue) -> Logger {
        let mut fields = self.fields.clone();
        fields.push(Value::String(key.into()));
        fields.push(value.into_value().unwrap_or_else(|e| Value::String(format!("<{e}>"))));
        Logger { scope: self.scope.clone(), fields }
    }

    /// Logs at `trace`.
    pub fn trace(&self, message: impl Display) {
        self.log(Level::Trace, message);
    }

    /// Logs at `debug`.
    pub fn debug(&self, message: impl Display) {
        self.log(Level::Debug, message);
    }

    /// Logs at `info`.
    pub fn info(&self, message: impl Display) {
        self.log(Level::Info, message);
    }

    /// Logs at `warn`.
    pub fn warn(&self, message: impl Display) {
        self.log(Level::Warn, message);
    }

    /// Logs at `error`.
    pub fn error(&self, message: impl Display) {
        self.log(Level::Error, message);
    }

    /// Logs at `level`.
    pub fn log(&self, level: Level, message: impl Display) {
        self.log_fields(level, &message.to_string(), &[]);
    }

    /// Logs with extra fields (flat key/value values) after the logger's own.
    pub(crate) fn log_fields(&self, level: Level, message: &str, extra: &[Value]) {
        let args = if extra.is_empty() { self.fields.clone() } else { [self.fields.as_slice(), extra].concat() };
        let record = Record { level, message: message.to_owned(), args };
        match &self.scope {
            Some(scope) if scope.link.can_reach_host() => push(&scope.call, &scope.link, record),
            _ => record.to_stderr(),
        }
    }
}

/// One log record.
struct Record {
    level: Level,
    message: String,
    args: Vec<Value>,
}

#[derive(Serialize)]
struct LogParams<'a> {
    level: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    args: &'a [Value],
}

impl Record {
    fn params(&self) -> LogParams<'_> {
        LogParams { level: self.level.as_str(), message: &self.message, args: &self.args }
    }

    fn to_stderr(&self) {
        let mut line = format!("[{}] {}", self.level, self.message);
        for pair in self.args.chunks(2) {
            match pair {
                [Value::String(k), v] => line.push_str(&format!(" {k}={v}")),
                [k, v] => line.push_str(&format!(" {k}={v}")),
                [k] => line.push_str(&format!(" {k}")),
                _ => {}
            }
        }
        eprintln!("{line}");
    }
}

/// One call's log records on their way to the host (see the module docs).
#[derive(Default)]
pub(crate) struct LogStream {
    state: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    /// Records waiting for the one in flight to be acknowledged.
    queued: VecDeque<Record>,
    /// A record has been sent and not yet acknowledged.
    in_flight: bool,
    /// The call's response has been written (or given up waiting): later
    /// records are sent as they come.
    released: bool,
    /// The call's response, waiting for the records before it.
    waiting: Option<Box<dyn FnOnce() + Send>>,
}

/// Queues `record` on the call's stream, sending it now if none is in flight.
fn push(call: &Arc<CallState>, link: &Arc<Link>, record: Record) {
    let mut state = lock(&call.logs.state);
    if state.released {
        drop(state);
        send_unordered(link, record);
    } else if state.in_flight {
        state.queued.push_back(record);
    } else {
        state.in_flight = true;
        drop(state);
        send_in_order(call, link, record);
    }
}

/// Sends `record` as the stream's one in flight; its acknowledgement sends
/// the next. A record that cannot be sent (the host has gone) goes to
/// stderr and the stream moves on.
fn send_in_order(call: &Arc<CallState>, link: &Arc<Link>, mut record: Record) {
    loop {
        let (ack_call, ack_link) = (Arc::clone(call), Arc::clone(link));
        match link.request_then("host.log", &record.params(), move |_| acknowledged(&ack_call, &ack_link)) {
            Ok(()) => return,
            Err(_) => record.to_stderr(),
        }
        match next_or_release(call) {
            Some(next) => record = next,
            None => return,
        }
    }
}

/// The host acknowledged the record in flight (or the connection closed).
fn acknowledged(call: &Arc<CallState>, link: &Arc<Link>) {
    if let Some(next) = next_or_release(call) {
        send_in_order(call, link, next);
    }
}

/// The next queued record (still in flight), or: nothing in flight any
/// more, and the waiting response is released.
fn next_or_release(call: &CallState) -> Option<Record> {
    let mut state = lock(&call.logs.state);
    if let Some(next) = state.queued.pop_front() {
        return Some(next);
    }
    state.in_flight = false;
    let waiting = state.waiting.take();
    if waiting.is_some() {
        state.released = true;
    }
    drop(state);
    if let Some(respond) = waiting {
        respond();
    }
    None
}

fn send_unordered(link: &Link, record: Record) {
    if link.request_then("host.log", &record.params(), |_| {}).is_err() {
        record.to_stderr();
    }
}

/// Runs `respond` once the host has acknowledged every record the call
/// wrote, or after `bound` at the latest (then the rest are sent without
/// waiting). Runs it at once when nothing is outstanding.
pub(crate) fn settle(
    call: &Arc<CallState>,
    link: &Arc<Link>,
    bound: Duration,
    respond: impl FnOnce() + Send + 'static,
) {
    let mut state = lock(&call.logs.state);
    if !state.in_flight {
        state.released = true;
        drop(state);
        return respond();
    }
    state.waiting = Some(Box::new(respond));
    drop(state);
    let (call, link) = (Arc::clone(call), Arc::clone(link));
    link.runtime().clone().spawn(async move {
        tokio::time::sleep(bound).await;
        give_up_waiting(&call, &link, bound);
    });
}

/// The bound passed: answer now and send what is left without waiting.
fn give_up_waiting(call: &CallState, link: &Link, bound: Duration) {
    let mut state = lock(&call.logs.state);
    let Some(respond) = state.waiting.take() else { return };
    state.released = true;
    let rest = std::mem::take(&mut state.queued);
    drop(state);
    eprintln!(
        "scriptling-plugin: {}: the host did not acknowledge its log records within {bound:?}; answering without waiting",
        call.label()
    );
    for record in rest {
        send_unordered(link, record);
    }
    respond();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::link::{FrameSink, HostChannel};
    use crate::call::objects::ObjectTable;
    use crate::call::outgoing::Outgoing;

    /// Records frames; the test plays the host by completing their ids.
    #[derive(Default)]
    struct Frames(Mutex<Vec<serde_json::Value>>);

    impl FrameSink for Frames {
        fn send_frame(&self, frame: Vec<u8>) {
            lock(&self.0).push(serde_json::from_slice(&frame).unwrap());
        }
    }

    fn setup() -> (Arc<CallState>, Arc<Link>, Arc<Frames>, Arc<Outgoing>, tokio::runtime::Runtime) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let frames = Arc::new(Frames::default());
        let outgoing = Outgoing::new();
        let host = HostChannel { outgoing: Arc::clone(&outgoing), sink: frames.clone() };
        let runtime = Arc::new(std::sync::OnceLock::from(rt.handle().clone()));
        let link = Link::new("t".into(), ObjectTable::sequential(), [], Some(host), runtime);
        (CallState::new("f".into()), Arc::new(link), frames, outgoing, rt)
    }

    fn record(message: &str) -> Record {
        Record { level: Level::Info, message: message.into(), args: vec![] }
    }

    fn ack(outgoing: &Outgoing, frames: &Frames, index: usize) {
        let id = lock(&frames.0)[index]["id"].to_string();
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).unwrap();
        assert!(outgoing.complete(Some(&raw(&id)), Ok(&raw(r#"{"type":"null"}"#))));
    }

    fn messages(frames: &Frames) -> Vec<String> {
        lock(&frames.0).iter().map(|f| f["params"]["message"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn records_go_one_at_a_time_and_the_answer_waits_for_the_last_ack() {
        let (call, link, frames, outgoing, _rt) = setup();
        for m in ["a", "b", "c"] {
            push(&call, &link, record(m));
        }
        assert_eq!(messages(&frames), ["a"], "the next waits for the first ack");
        let answered = Arc::new(Mutex::new(false));
        let flag = Arc::clone(&answered);
        settle(&call, &link, Duration::from_secs(60), Box::new(move || *lock(&flag) = true));
        ack(&outgoing, &frames, 0);
        assert_eq!(messages(&frames), ["a", "b"]);
        ack(&outgoing, &frames, 1);
        assert_eq!(messages(&frames), ["a", "b", "c"]);
        assert!(!*lock(&answered), "the answer waits for the last record");
        ack(&outgoing, &frames, 2);
        assert!(*lock(&answered));
        // After the answer, records go out as they come.
        push(&call, &link, record("late1"));
        push(&call, &link, record("late2"));
        assert_eq!(messages(&frames).len(), 5);
    }

    #[test]
    fn without_records_the_answer_goes_at_once() {
        let (call, link, _frames, _outgoing, _rt) = setup();
        let answered = Arc::new(Mutex::new(false));
        let flag = Arc::clone(&answered);
        settle(&call, &link, Duration::from_secs(60), Box::new(move || *lock(&flag) = true));
        assert!(*lock(&answered));
    }

    #[test]
    fn a_host_that_never_acknowledges_delays_the_answer_by_the_bound_only() {
        let (call, link, frames, _outgoing, rt) = setup();
        push(&call, &link, record("a"));
        push(&call, &link, record("b"));
        let (tx, rx) = std::sync::mpsc::channel();
        let started = std::time::Instant::now();
        settle(&call, &link, Duration::from_millis(50), Box::new(move || tx.send(()).unwrap()));
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(80)).await });
        rx.try_recv().expect("answered after the bound");
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(messages(&frames), ["a", "b"], "the rest is sent without waiting");
    }

    #[test]
    fn a_closed_connection_releases_the_answer() {
        let (call, link, frames, outgoing, _rt) = setup();
        push(&call, &link, record("a"));
        push(&call, &link, record("b"));
        let answered = Arc::new(Mutex::new(false));
        let flag = Arc::clone(&answered);
        settle(&call, &link, Duration::from_secs(60), Box::new(move || *lock(&flag) = true));
        outgoing.close("host gone");
        assert!(*lock(&answered));
        assert_eq!(messages(&frames), ["a"], "b could not be sent and went to stderr");
    }
}
