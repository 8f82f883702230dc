//! Nothing lost, nothing hung, at the edges: log records under a host that
//! handles them concurrently, answers owed at exit, the sync pool when
//! calls wait on the host, the cost of error paths, shapes that are not
//! requests, batch limits, and compatibility with scripts written for the
//! Go SDK. (Signals and panics, which need a real process, are in
//! `process.rs`.)

use std::collections::BTreeMap;
#[cfg(target_os = "linux")]
use std::io::{Read, Write};
#[cfg(target_os = "linux")]
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use scriptling_plugin::testing::Host;
#[cfg(target_os = "linux")]
use scriptling_plugin::testing::example_path;
use scriptling_plugin::{CallError, Callback, CallbackRef, Logger, Plugin, Returned, Value, plugin_class, plugin_fn};
use serde_json::{Value as J, json};

mod common;

/// Logs `n` numbered records, then answers `n`.
#[plugin_fn]
fn log_many(n: i64) -> i64 {
    let log = Logger::current();
    for i in 0..n {
        log.with("i", i).info(format!("record {i}"));
    }
    n
}

/// Waits for the host to answer `cb`.
#[plugin_fn]
fn wait_for_host(cb: Callback) -> Result<Value, CallError> {
    cb.call(()).map(Returned::into_value)
}

#[plugin_fn]
fn quick(n: i64) -> i64 {
    n
}

#[plugin_fn]
async fn quick_async(n: i64) -> i64 {
    n
}

/// A resource whose `__del__` logs through the host.
#[plugin_class]
struct Resource {
    name: String,
}

#[plugin_class]
impl Resource {
    #[constructor]
    fn new(name: String) -> Self {
        Resource { name }
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    #[del]
    fn close(&mut self) {
        Logger::current().info(format!("closing {}", self.name));
    }
}

/// Counts; made in bulk by `make_counters`.
#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new(#[arg(default = 0)] value: i64) -> Self {
        Counter { value }
    }

    fn get(&self) -> i64 {
        self.value
    }
}

/// Makes `n` counters at once.
#[plugin_fn]
fn make_counters(n: usize) -> Vec<Counter> {
    (0..n).map(|i| Counter { value: i as i64 }).collect()
}

/// A class scripts written for the Go SDK build with `Fragile(0)`.
#[plugin_class]
struct Fragile {
    broken: bool,
}

#[plugin_class]
impl Fragile {
    #[constructor]
    fn new(broken: bool) -> Self {
        Fragile { broken }
    }

    fn is_broken(&self) -> bool {
        self.broken
    }
}

fn plugin() -> Plugin {
    Plugin::new("edges", "1.0.0", "")
        .function::<log_many>()
        .function::<wait_for_host>()
        .function::<quick>()
        .function::<quick_async>()
        .function::<make_counters>()
        .class::<Resource>()
        .class::<Counter>()
        .class::<Fragile>()
}

fn cb(id: &str) -> Value {
    Value::Callback(CallbackRef::new(id))
}

const WAIT: Duration = Duration::from_secs(10);

// ---- log records reach the host before the answer -------------------------

#[test]
fn every_record_is_handled_in_order_before_its_call_returns_under_a_concurrent_host() {
    let host = Host::in_process(plugin()).unwrap();
    // The host handles each record on its own thread after up to 2 ms, as
    // Scriptling's host does: records sent without waiting would be handled
    // after the answer, and out of order.
    host.set_jitter(Duration::from_millis(2));
    for round in 0..5 {
        let before = host.logs().len();
        assert_eq!(host.call("log_many", [Value::Int(40)]).unwrap(), Value::Int(40));
        let messages: Vec<String> = host.logs()[before..].iter().map(|r| r.message.clone()).collect();
        let expected: Vec<String> = (0..40).map(|i| format!("record {i}")).collect();
        assert_eq!(messages, expected, "round {round}: all records handled, in order, before the answer");
    }
}

#[test]
fn concurrent_calls_each_keep_their_records_in_order_and_first() {
    let host = Arc::new(Host::in_process(plugin()).unwrap());
    host.set_jitter(Duration::from_millis(1));
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let host = Arc::clone(&host);
            scope.spawn(move || {
                assert_eq!(host.call("log_many", [Value::Int(10)]).unwrap(), Value::Int(10));
            });
        }
    });
    let logs = host.logs();
    assert_eq!(logs.len(), 80, "every record was handled before its call returned");
}

#[test]
fn a_host_that_never_acknowledges_delays_an_answer_by_the_bound_only() {
    let host = Host::in_process(plugin().log_ack_timeout(Duration::from_millis(300))).unwrap();
    host.acknowledge_logs(false);
    let started = Instant::now();
    assert_eq!(host.call("log_many", [Value::Int(5)]).unwrap(), Value::Int(5));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "the answer waited for the bound: {took:?}");
    assert!(took < Duration::from_secs(3), "and no longer: {took:?}");
    // The records were not dropped: once the bound passed they went out unwaited.
    assert_eq!(host.wait_for_logs(5, WAIT).unwrap().len(), 5);
}

#[test]
fn against_a_host_that_never_acknowledges_only_the_first_answer_waits_and_nothing_piles_up() {
    let host = Host::in_process(plugin().log_ack_timeout(Duration::from_millis(100))).unwrap();
    host.set_jitter(Duration::ZERO);
    host.acknowledge_logs(false);
    // Each call used to wait out the bound (5 000 x 100 ms), and to leave a
    // waiter for every record for good.
    let started = Instant::now();
    for i in 0..5_000 {
        assert_eq!(host.call("log_many", [Value::Int(1)]).unwrap(), Value::Int(1), "call {i}");
    }
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    let pending = host.pending_requests().unwrap();
    assert!(pending <= 1, "{pending} records wait for an acknowledgement");
    assert_eq!(host.wait_for_logs(5_000, WAIT).unwrap().len(), 5_000, "every record was sent");
    // A host that acknowledges again is waited for again, once a probe
    // record sent after the last one went stale is acknowledged.
    host.acknowledge_logs(true);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(host.call("log_many", [Value::Int(1)]).unwrap(), Value::Int(1));
    host.wait_for_logs(5_001, WAIT).unwrap();
    let deadline = Instant::now() + WAIT;
    while host.pending_requests() != Some(0) {
        assert!(Instant::now() < deadline, "the probe was acknowledged");
        std::thread::yield_now();
    }
    assert_eq!(host.call("log_many", [Value::Int(3)]).unwrap(), Value::Int(3));
    // Ordered again: the answer came after all three were handled.
    assert_eq!(host.logs().len(), 5_004);
}

/// Resident memory of process `pid`, in KiB (Linux).
#[cfg(target_os = "linux")]
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap()
}

#[test]
#[cfg(target_os = "linux")] // reads resident memory from /proc
fn acknowledged_log_records_leave_nothing_behind_their_calls() {
    let host = Host::spawn(Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))).unwrap();
    host.set_jitter(Duration::ZERO);
    let log = |n: usize| {
        for _ in 0..n {
            assert_eq!(host.call("log_inside", [Value::from("x")]).unwrap(), Value::from("x"));
        }
    };
    log(2_000);
    let before = rss_kib(host.pid().unwrap());
    log(20_000);
    let after = rss_kib(host.pid().unwrap());
    // A timer per call, each holding its call for 5 s, once grew this by
    // tens of MiB.
    assert!(after < before + 4 * 1024, "RSS {before} -> {after} KiB over 20 000 logging calls");
}

#[test]
fn destroy_hooks_log_through_the_host_before_destroy_is_answered() {
    let host = Host::in_process(plugin()).unwrap();
    host.set_jitter(Duration::from_millis(2));
    let db = host.new_object("Resource", [Value::from("db")]).unwrap();
    host.destroy(&db.id).unwrap();
    let messages: Vec<String> = host.logs().into_iter().map(|r| r.message).collect();
    assert_eq!(messages, ["closing db"]);
}

#[test]
fn shutdown_hooks_log_through_the_host_before_shutdown_is_answered() {
    let host = Host::in_process(plugin()).unwrap();
    host.set_jitter(Duration::from_millis(2));
    for name in ["a", "b", "c"] {
        host.new_object("Resource", [Value::from(name)]).unwrap();
    }
    host.shutdown().unwrap();
    let mut messages: Vec<String> = host.logs().into_iter().map(|r| r.message).collect();
    messages.sort();
    assert_eq!(messages, ["closing a", "closing b", "closing c"]);
    host.wait(WAIT).unwrap();
}

// ---- answers owed at exit ---------------------------------------------------

fn run_hello(input: Vec<u8>) -> (Vec<u8>, Option<i32>) {
    common::run_example("hello", input)
}

fn ping_batch(size: usize) -> String {
    let items: Vec<String> = (0..size).map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#)).collect();
    format!("[{}]\n", items.join(","))
}

fn lines(out: &[u8]) -> Vec<J> {
    String::from_utf8_lossy(out).lines().map(|l| serde_json::from_str(l).expect("only JSON lines")).collect()
}

#[test]
fn a_batch_followed_by_eof_is_answered_whole_before_exit() {
    for size in [10, 1_000, 10_000] {
        for run in 0..3 {
            let (out, code) = run_hello(ping_batch(size).into_bytes());
            assert_eq!(code, Some(0));
            let frames = lines(&out);
            assert_eq!(frames.len(), 1, "size {size}, run {run}");
            let ids: Vec<u64> = frames[0].as_array().unwrap().iter().map(|a| a["id"].as_u64().unwrap()).collect();
            assert_eq!(ids, (0..size as u64).collect::<Vec<_>>(), "size {size}, run {run}");
        }
    }
}

#[test]
fn a_batch_followed_by_shutdown_is_answered_whole_before_exit() {
    for run in 0..3 {
        let input = ping_batch(10_000) + r#"{"jsonrpc":"2.0","id":"bye","method":"plugin.shutdown"}"# + "\n";
        let (out, code) = run_hello(input.into_bytes());
        assert_eq!(code, Some(0));
        let frames = lines(&out);
        assert_eq!(frames.len(), 2, "run {run}");
        assert_eq!(frames[0].as_array().unwrap().len(), 10_000);
        assert_eq!(frames[1], json!({"jsonrpc": "2.0", "id": "bye", "result": null}), "shutdown is answered last");
    }
}

#[test]
fn a_batch_holding_shutdown_is_answered_whole() {
    let input = concat!(
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"plugin.shutdown"},"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}]"#,
        "\n"
    );
    let (out, code) = run_hello(input.as_bytes().to_vec());
    assert_eq!(code, Some(0));
    let frames = lines(&out);
    assert_eq!(frames.len(), 1);
    let ids: Vec<&J> = frames[0].as_array().unwrap().iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
}

// ---- the sync pool ------------------------------------------------------------

#[test]
#[cfg(target_os = "linux")] // pins the plugin to one CPU, which only Linux lets a test do before the child starts
fn on_one_cpu_a_callbacks_answer_is_read_while_another_handler_computes() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    common::on_one_cpu(&mut command);
    let host = Arc::new(Host::spawn(command).unwrap());
    host.set_jitter(Duration::ZERO);
    host.on_callback(|_, _, _| Ok(Value::Int(7)));
    host.handshake().unwrap();
    // Three sleeps at once grow the pool; their threads then wait idle.
    let sleeps: Vec<_> = (0..3)
        .map(|_| {
            let host = Arc::clone(&host);
            std::thread::spawn(move || host.call("sleep_ms", [Value::Int(50)]).unwrap())
        })
        .collect();
    for sleep in sleeps {
        sleep.join().unwrap();
    }
    // One handler computes for 3 s; meanwhile a call waits on the host.
    let spinner = {
        let host = Arc::clone(&host);
        std::thread::spawn(move || host.call("spin_ms", [Value::Int(3000)]).unwrap())
    };
    host.wait_for_stderr("fixture: sleeping", WAIT).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    assert_eq!(host.call("call_me", [cb("cb-1")]).unwrap(), Value::Int(7));
    let took = started.elapsed();
    spinner.join().unwrap();
    // The answer used to be read only once the computing handler ended.
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// A host whose `cb-hold` callbacks wait until released, reporting each
/// arrival, and whose `cb-reenter` callbacks call `quick` on the plugin.
struct Holding {
    host: Arc<Host>,
    arrived: mpsc::Receiver<()>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Holding {
    fn new(max_threads: usize) -> Holding {
        let host = Arc::new(Host::in_process(plugin().max_sync_threads(max_threads)).unwrap());
        host.set_jitter(Duration::ZERO);
        let (arrived_tx, arrived) = mpsc::channel();
        let arrived_tx = Mutex::new(arrived_tx);
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let weak = Arc::downgrade(&host);
        let held = Arc::clone(&gate);
        host.on_callback(move |id, _, _| {
            if id == "cb-reenter" {
                let host = weak.upgrade().ok_or("host gone")?;
                return host.call("quick", [Value::Int(5)]).map_err(|e| e.message().to_owned());
            }
            arrived_tx.lock().unwrap().send(()).unwrap();
            let (open, cv) = &*held;
            let mut open = open.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            Ok(Value::Null)
        });
        Holding { host, arrived, gate }
    }

    /// Starts `n` calls that wait on the host, and waits until they do.
    fn hold(&self, n: usize) -> Vec<std::thread::JoinHandle<Result<Value, String>>> {
        let calls = (0..n)
            .map(|_| {
                let host = Arc::clone(&self.host);
                std::thread::spawn(move || {
                    host.call("wait_for_host", [cb("cb-hold")]).map_err(|e| e.message().to_owned())
                })
            })
            .collect();
        for _ in 0..n {
            self.arrived.recv_timeout(WAIT).expect("the call reached the host");
        }
        calls
    }

    fn release(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }
}

#[test]
fn calls_waiting_on_the_host_lend_their_threads_and_the_limit_fails_fast() {
    let holding = Holding::new(8);
    let host = &holding.host;
    // Seven of eight threads wait on the host: other sync calls still run.
    let mut held = holding.hold(7);
    let started = Instant::now();
    assert_eq!(host.call("quick", [Value::Int(1)]).unwrap(), Value::Int(1));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // Now every thread waits on the host: a sync call fails at once, saying why.
    held.extend(holding.hold(1));
    let started = Instant::now();
    let err = host.call("quick", [Value::Int(2)]).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "refused at once: {:?}", started.elapsed());
    assert_eq!(
        err.message(),
        "quick(): the plugin cannot take this call now: all 8 of its threads for sync handlers are waiting \
         for the host to answer callbacks, and this call could only run after one of them is answered (raise \
         Plugin::max_sync_threads, or make the handlers that call back async)"
    );
    // Async handlers take no sync thread.
    assert_eq!(host.call("quick_async", [Value::Int(3)]).unwrap(), Value::Int(3));
    // Once the host answers, everything completes and sync calls run again.
    holding.release();
    for call in held {
        assert_eq!(call.join().unwrap(), Ok(Value::Null));
    }
    assert_eq!(host.call("quick", [Value::Int(4)]).unwrap(), Value::Int(4));
}

#[test]
fn a_callback_that_reenters_a_sync_function_is_served_below_the_limit_and_refused_at_it() {
    let holding = Holding::new(4);
    let host = &holding.host;
    let held = holding.hold(2);
    // Three of four threads wait: the re-entrant call gets the fourth.
    assert_eq!(host.call("wait_for_host", [cb("cb-reenter")]).unwrap(), Value::Int(5));
    // Four of four: the re-entrant call is refused at once instead of deadlocking.
    let mut held_more = holding.hold(1);
    let started = Instant::now();
    let err = host.call("wait_for_host", [cb("cb-reenter")]).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(err.message().contains("all 4 of its threads for sync handlers are waiting"), "{err}");
    holding.release();
    held_more.extend(held);
    for call in held_more {
        assert_eq!(call.join().unwrap(), Ok(Value::Null));
    }
}

/// The names of process `pid`'s threads (Linux).
#[cfg(target_os = "linux")]
fn thread_names_of(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
#[cfg(target_os = "linux")] // counts the plugin's threads in /proc
fn a_host_that_reads_slowly_grows_no_threads() {
    let mut child = common::spawn_piped(&mut Command::new(env!("CARGO_BIN_EXE_fixture-plugin")));
    let pid = child.id();
    let payload = "x".repeat(64 * 1024);
    let requests = 1_200;
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..requests {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"function.call","params":{{"name":"echo","args":[{{"type":"string","value":"{payload}"}}]}}}}"#
            );
            if writeln!(stdin, "{line}").is_err() {
                return;
            }
        }
    });
    // Nobody reads stdout: 75 MiB of answers back up behind a full pipe.
    // Watch the threads that run handlers (the pool's, and the reading
    // threads, which run a call read alone) for two seconds meanwhile. The
    // pool once grew a thread per answer waiting on the pipe (~517). Now one
    // thread waits on the pipe, the thread reading stdin waits for room in
    // the output queue, at most three take turns at the reading, and the
    // core count's worth pull work; the watchdog may add a few more
    // while the machine is loaded (a worker descheduled while it holds a
    // lock makes the others look blocked: CI saw 11 on 2 cores). The bound
    // leaves room for that, and stays far below the defect on any machine.
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let bound = (4 * cores + 16).min(64);
    let watch_until = Instant::now() + Duration::from_secs(2);
    let mut peak = (0, Vec::new());
    while Instant::now() < watch_until {
        let names = thread_names_of(pid);
        let sync = names.iter().filter(|name| ["plugin-sync", "plugin-stdin"].contains(&name.as_str())).count();
        if sync > peak.0 {
            peak = (sync, names);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(peak.0 <= bound, "{} sync threads (bound {bound}) while the host read nothing: {:?}", peak.0, peak.1);
    assert!(peak.0 >= 1, "the threads are named plugin-sync and plugin-stdin: {:?}", peak.1);
    // Reading resumes: every request is answered exactly once.
    let mut out = Vec::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        stdout.read_to_end(&mut out).unwrap();
        out
    });
    writer.join().unwrap();
    drop(child.stdin.take());
    let out = reader.join().unwrap();
    let mut ids: Vec<u64> = lines(&out).iter().map(|f| f["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..requests).collect::<Vec<_>>());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

// ---- error paths ------------------------------------------------------------------

#[test]
fn unknown_object_errors_list_no_ids_and_stay_cheap_with_many_objects() {
    let host = Host::in_process(plugin()).unwrap();
    let made = host.call("make_counters", [Value::Int(100_000)]).unwrap();
    assert_eq!(made.as_list().map(<[Value]>::len), Some(100_000));
    let started = Instant::now();
    for _ in 0..200 {
        let err = host.call_method("999999999", "get", []).unwrap_err();
        assert_eq!(
            err.message(),
            "unknown object 999999999 (it does not exist or has been destroyed; 100000 objects alive)"
        );
    }
    // Sorting 100 000 ids per error (as before) took seconds here; a lookup takes microseconds.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

// ---- shapes that are not requests ---------------------------------------------------

#[test]
fn arrays_inside_a_batch_are_invalid_requests_not_positional_ones() {
    let host = Host::in_process(plugin()).unwrap();
    host.send_raw(r#"[[1,"ping"],[7,"plugin.shutdown"]]"#).unwrap();
    let answers = host.next_frame(WAIT).expect("the batch is answered");
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 2);
    for answer in answers {
        assert_eq!(answer["id"], J::Null);
        assert_eq!(answer["error"]["code"], -32600);
    }
    // Nothing was shut down.
    assert_eq!(host.call("quick", [Value::Int(9)]).unwrap(), Value::Int(9));
}

#[test]
fn an_object_id_is_exactly_the_string_issued() {
    let host = Host::in_process(plugin()).unwrap();
    let counter = host.new_object("Counter", [Value::Int(7)]).unwrap();
    assert_eq!(counter.id, "1");
    for alias in ["+1", "0001", "+01", "01", " 1", "1 "] {
        let err = host.call_method(alias, "get", []).unwrap_err();
        assert!(err.message().starts_with(&format!("unknown object {alias} (")), "{alias}: {err}");
        host.destroy(alias).unwrap();
    }
    assert_eq!(host.call_method("1", "get", []).unwrap(), Value::Int(7), "no alias destroyed it");
}

// ---- batch limits ------------------------------------------------------------------

#[test]
fn a_batch_over_the_limit_is_refused_whole_naming_the_limit() {
    let host = Host::in_process(plugin().max_batch_len(100)).unwrap();
    host.send_raw(ping_batch(101).trim_end()).unwrap();
    let refused = host.next_frame(WAIT).unwrap();
    assert_eq!(refused["id"], J::Null);
    assert_eq!(refused["error"]["code"], -32600);
    assert_eq!(refused["error"]["message"], "invalid request: a batch may hold at most 100 requests");
    host.send_raw(ping_batch(100).trim_end()).unwrap();
    assert_eq!(host.next_frame(WAIT).unwrap().as_array().map(Vec::len), Some(100));
}

/// The peak resident memory of process `pid`, in KiB (Linux).
#[cfg(target_os = "linux")]
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
#[cfg(target_os = "linux")] // reads peak resident memory from /proc
fn a_large_batch_peaks_at_a_small_multiple_of_its_size() {
    let mut child = common::spawn_piped(&mut Command::new(example_path("hello")));
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // A handshake first, to know the plugin's size before the batch.
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":0,"method":"ping"}}"#).unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    let before = peak_rss_kib(pid);
    let batch = ping_batch(100_000);
    let size_kib = batch.len() as u64 / 1024;
    let writer = std::thread::spawn(move || {
        stdin.write_all(batch.as_bytes()).unwrap();
        stdin
    });
    let mut out = Vec::new();
    let mut chunk = [0u8; 1 << 16];
    // Read until the batch's answer (the second line) is complete.
    while out.iter().filter(|b| **b == b'\n').count() < 2 {
        let n = stdout.read(&mut chunk).unwrap();
        assert!(n > 0, "the plugin closed its output");
        out.extend_from_slice(&chunk[..n]);
    }
    let grown = peak_rss_kib(pid).saturating_sub(before);
    drop(writer.join().unwrap());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(lines(&[&first[..], &out[..]].concat())[1].as_array().unwrap().len(), 100_000);
    // The batch, its parse, its answers and the answer array, all alive at
    // once, stay within a small multiple of the batch's own size.
    assert!(grown < 8 * size_kib, "a {size_kib} KiB batch grew the peak by {grown} KiB");
}

/// A call's params are decoded with the envelope on a short line (up to 4
/// KiB), from a copy of a longer one, and from a line of 64 KiB or more
/// moved whole: the same answer whichever way.
#[test]
fn calls_on_lines_of_every_length_are_answered_alike() {
    let host = Host::spawn_example("hello").unwrap();
    host.handshake().unwrap();
    for len in [0, 1, 3_900, 4_200, 10_000, 70_000] {
        let name = "é\"x".repeat(len / 4);
        let result = host.call("greet", [Value::from(name.clone())]).unwrap();
        assert_eq!(result.as_str(), Some(format!("Hello, {name}").as_str()), "a name of {len} bytes");
    }
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))] // glibc hands freed memory back; /proc has the peak
fn what_smaller_payloads_left_free_does_not_stack_under_a_large_ones_peak() {
    let host = Host::spawn_example("hello").unwrap();
    host.handshake().unwrap();
    let pid = host.pid().unwrap();
    let start = peak_rss_kib(pid);
    let greet = |len: usize| {
        let result = host.call("greet", [Value::from("x".repeat(len))]).unwrap();
        assert_eq!(result.as_str().map(str::len), Some(len + 7));
    };
    // 1 MiB payloads leave a few MiB free in the allocator's heaps (kept
    // there for the next such call: glibc keeps up to 4 MiB at a heap's top).
    for _ in 0..10 {
        greet(1 << 20);
    }
    // A 16 MiB payload's line, which becomes its argument, and its result:
    // 32 MiB over the plugin's start, and a little for the rest: 34.2 MiB
    // (hello, debug build, 2026-11-26, when the argument was a copy of the
    // line); 38.0-38.3 MiB with the 1 MiB payloads' leftovers under it.
    greet(16 << 20);
    let grown = peak_rss_kib(pid).saturating_sub(start);
    assert!(grown < (36 << 10) + 512, "a 16 MiB payload after 1 MiB ones grew the peak by {grown} KiB");
}

#[test]
#[cfg(target_os = "linux")] // reads resident memory from /proc
fn a_large_payload_is_not_kept_while_its_call_runs() {
    let host = Host::spawn(Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))).unwrap();
    host.handshake().unwrap();
    let resident = |payload: String| match host.call("resident_kib", [Value::from(payload)]).unwrap() {
        Value::Int(kib) => kib,
        other => panic!("{other:?}"),
    };
    let idle = resident(String::new());
    let mib: i64 = 16;
    let held = resident("x".repeat(16 << 20));
    // While the handler runs, it holds its argument (16 MiB), which the
    // request's line became (a large string takes its line over).
    let grown_mib = (held - idle) / 1024;
    assert!(grown_mib < mib + mib / 2, "{grown_mib} MiB resident for a {mib} MiB argument");
    host.shutdown().unwrap();
    host.wait(WAIT).unwrap();
}

#[test]
#[cfg(target_os = "linux")] // reads the peak of resident memory from /proc
fn a_large_string_argument_takes_over_its_line_instead_of_being_copied() {
    let host = Host::spawn(Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))).unwrap();
    host.handshake().unwrap();
    let pid = host.pid().unwrap();
    let start = peak_rss_kib(pid);
    let payload = "x".repeat(16 << 20);
    assert!(matches!(host.call("resident_kib", [Value::from(payload)]).unwrap(), Value::Int(_)));
    // The line and a copy of the argument out of it would be 32 MiB at
    // once; the argument made of the line is 16.
    let grown = peak_rss_kib(pid).saturating_sub(start);
    assert!(grown < 24 << 10, "a 16 MiB argument grew the peak by {grown} KiB");
    // The argument arrived whole, wherever it lay in the line.
    let echo = |args: Vec<Value>| host.call("echo", args).unwrap();
    let big = "y".repeat(3 << 20);
    assert_eq!(echo(vec![Value::from(big.as_str())]).as_str().map(str::len), Some(big.len()));
    let nested = Value::List(vec![Value::from("a"), Value::from(big.as_str()), Value::from("b")]);
    assert_eq!(echo(vec![nested.clone()]), nested);
    host.shutdown().unwrap();
    host.wait(WAIT).unwrap();
}

// ---- compatibility with scripts written for the Go SDK -------------------------------

#[test]
fn ints_pass_for_bool_parameters_by_truthiness() {
    let host = Host::in_process(plugin()).unwrap();
    for (given, broken) in [(Value::Int(0), false), (Value::Int(1), true), (Value::Int(-2), true)] {
        let fragile = host.new_object("Fragile", [given]).unwrap();
        assert_eq!(host.call_method(&fragile.id, "is_broken", []).unwrap(), Value::Bool(broken));
    }
    for refused in [Value::from("yes"), Value::Float(1.0), Value::Null] {
        let err = host.new_object("Fragile", [refused.clone()]).unwrap_err();
        assert!(err.message().starts_with("Fragile(): argument 'broken' must be a bool, got"), "{refused}: {err}");
    }
}

#[test]
fn a_callback_used_after_its_call_reads_as_an_unknown_callback() {
    static KEPT: Mutex<Option<Callback>> = Mutex::new(None);
    #[plugin_fn]
    fn keep(cb: Callback) {
        *KEPT.lock().unwrap() = Some(cb);
    }
    #[plugin_fn]
    fn use_kept() -> Result<Value, CallError> {
        KEPT.lock().unwrap().clone().expect("kept").call(()).map(Returned::into_value)
    }
    let asked = Arc::new(AtomicUsize::new(0));
    let host = Host::in_process(Plugin::new("kept", "1", "").function::<keep>().function::<use_kept>()).unwrap();
    let counter = Arc::clone(&asked);
    host.on_callback(move |_, _, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Value::Null)
    });
    host.call("keep", [cb("cb-1")]).unwrap();
    let err = host.call("use_kept", []).unwrap_err();
    // The host's own tests expect the text the host would send.
    assert!(err.message().starts_with("unknown callback cb-1: "), "{err}");
    assert_eq!(asked.load(Ordering::SeqCst), 0, "failed locally, the host never asked");
    let _ = BTreeMap::<String, Value>::new();
}
