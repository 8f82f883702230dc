//! Host callbacks and logging: `callback.call` and `host.log` travelling
//! over the same stream as the calls that make them, in process and against
//! the built callback and logger examples.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scriptling_plugin::testing::{Host, LogRecord};
use scriptling_plugin::{CallArgs, CallError, Callback, Logger, Plugin, Returned, Value, plugin_class, plugin_fn};
use serde_json::json;

#[plugin_fn]
fn call_each(items: Vec<Value>, on_item: Callback) -> Result<Vec<Value>, CallError> {
    items.into_iter().map(|item| on_item.call((item,)).map(Returned::into_value)).collect()
}

#[plugin_fn]
fn call_nested(handlers: Vec<Callback>, named: BTreeMap<String, Callback>) -> Result<Vec<String>, CallError> {
    let mut out = Vec::new();
    for h in &handlers {
        out.push(h.call(())?.extract::<String>()?);
    }
    for (k, h) in &named {
        out.push(format!("{k}={}", h.call(())?.extract::<String>()?));
    }
    Ok(out)
}

#[plugin_fn]
fn call_with_kwargs(cb: Callback) -> Result<Value, CallError> {
    cb.call(CallArgs::new((1,)).kwarg("flag", true)).map(Returned::into_value)
}

#[plugin_fn]
fn expect_int(cb: Callback) -> Result<i64, CallError> {
    cb.call(())?.extract::<i64>()
}

/// The line a user writes first: the script's result is ignored, whatever it is.
#[plugin_fn]
fn process(items: Vec<String>, on_progress: Option<Callback>) -> Result<usize, CallError> {
    if let Some(on_progress) = &on_progress {
        for item in &items {
            on_progress.call((item,))?;
        }
        on_progress.call(())?.extract::<()>()?;
    }
    Ok(items.len())
}

static KEPT: Mutex<Option<Callback>> = Mutex::new(None);

#[plugin_fn]
fn keep(cb: Callback) {
    *KEPT.lock().unwrap() = Some(cb);
}

#[plugin_fn]
fn use_kept() -> Result<Value, CallError> {
    let cb = KEPT.lock().unwrap().clone().expect("kept");
    cb.call(()).map(Returned::into_value)
}

/// Makes `rounds` callbacks and logs after each one.
#[plugin_fn]
fn busy(n: i64, rounds: i64, cb: Callback) -> Result<i64, CallError> {
    let log = Logger::current().with("n", n);
    let mut total = 0;
    for round in 0..rounds {
        total += cb.call((n, round))?.extract::<i64>()?;
        log.with("round", round).debug("round done");
    }
    Ok(total)
}

#[plugin_fn]
async fn async_busy(n: i64, rounds: i64, cb: Callback) -> Result<i64, CallError> {
    let mut total = 0;
    for round in 0..rounds {
        total += cb.call_async((n, round)).await?.extract::<i64>()?;
        Logger::current().with("round", round).info("async round done");
    }
    Ok(total)
}

#[plugin_fn]
async fn async_blocking_misuse(cb: Callback) -> Result<Value, CallError> {
    cb.call(()).map(Returned::into_value)
}

#[plugin_fn]
fn log_then_answer(name: String) -> String {
    let log = Logger::current().with("plugin", "test");
    log.trace("t");
    log.debug("d");
    log.with("name", name.as_str()).info("i");
    log.warn("w");
    log.error("e");
    format!("done:{name}")
}

#[plugin_fn]
fn log_from_thread() -> String {
    std::thread::spawn(|| Logger::current().info("from a spawned thread")).join().unwrap();
    "ok".into()
}

/// Re-entrancy: a callback that calls back into the object holding it.
#[plugin_class]
struct Box2 {
    value: i64,
}

#[plugin_class]
impl Box2 {
    #[constructor]
    fn new(value: i64) -> Self {
        Box2 { value }
    }

    fn get(&self) -> i64 {
        self.value
    }

    fn set(&mut self, value: i64) {
        self.value = value;
    }

    /// Holds the object exclusively while calling back.
    fn mutate_with(&mut self, cb: Callback) -> Result<Value, CallError> {
        self.value += 1;
        cb.call(()).map(Returned::into_value)
    }

    /// Holds the object shared while calling back.
    fn read_with(&self, cb: Callback) -> Result<Value, CallError> {
        cb.call(()).map(Returned::into_value)
    }
}

fn plugin() -> Plugin {
    Plugin::new("cbtest", "1.0.0", "")
        .function::<call_each>()
        .function::<call_nested>()
        .function::<call_with_kwargs>()
        .function::<expect_int>()
        .function::<process>()
        .function::<keep>()
        .function::<use_kept>()
        .function::<busy>()
        .function::<async_busy>()
        .function::<async_blocking_misuse>()
        .function::<log_then_answer>()
        .function::<log_from_thread>()
        .class::<Box2>()
}

fn cb(id: &str) -> Value {
    Value::Callback(scriptling_plugin::CallbackRef::new(id))
}

#[test]
fn callbacks_receive_arguments_and_return_results() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|id, args, kwargs| match id {
        "cb-double" => Ok(Value::Int(args[0].as_int().unwrap() * 2)),
        "cb-kw" => Ok(Value::from(format!("{args:?} {kwargs:?}"))),
        other => Err(format!("unknown callback {other}")),
    });
    let out = host.call("call_each", [Value::List(vec![1.into(), 2.into(), 3.into()]), cb("cb-double")]).unwrap();
    assert_eq!(out, Value::List(vec![2.into(), 4.into(), 6.into()]));
    let out = host.call("call_with_kwargs", [cb("cb-kw")]).unwrap();
    assert_eq!(out, Value::from(r#"[Int(1)] {"flag": Bool(true)}"#));
}

#[test]
fn callbacks_nested_in_lists_and_dicts_work() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|id, _, _| Ok(Value::from(id.to_uppercase())));
    let named: Value = [("x", cb("cb-x")), ("y", cb("cb-y"))].into_iter().collect();
    let out = host.call("call_nested", [Value::List(vec![cb("cb-a"), cb("cb-b")]), named]).unwrap();
    assert_eq!(out.to_string(), r#"["CB-A", "CB-B", "x=CB-X", "y=CB-Y"]"#);
    // Also by keyword.
    let kwargs = BTreeMap::from([("on_item".to_string(), cb("cb-k"))]);
    let out = host.call_kw("call_each", [Value::List(vec![Value::Null])], kwargs).unwrap();
    assert_eq!(out, Value::List(vec![Value::from("CB-K")]));
}

#[test]
fn host_errors_fail_the_outer_call_naming_the_function_and_callback() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|_, _, _| Err("argument error: got 1 arguments, want 0".into()));
    let err = host.call("call_each", [Value::List(vec![1.into()]), cb("cb-1")]).unwrap_err();
    assert_eq!(err.message(), "call_each(): on_item failed: argument error: got 1 arguments, want 0");
    // Without a handler the host answers as the real one does.
    let host = Host::in_process(plugin()).unwrap();
    let err = host.call("call_each", [Value::List(vec![1.into()]), cb("cb-9")]).unwrap_err();
    assert_eq!(err.message(), "call_each(): on_item failed: unknown callback cb-9");
}

#[test]
fn a_raised_exception_is_explained_since_the_host_does_not_pass_it() {
    // What Scriptling 0.20.1 answers when the script's function raises, or
    // returns what it cannot encode (tests/real_host.rs checks the real one).
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|_, _, _| Err("unsupported plugin value type EXCEPTION".into()));
    let err = host.call("call_each", [Value::List(vec![1.into()]), cb("cb-1")]).unwrap_err();
    assert_eq!(
        err.message(),
        "call_each(): on_item failed: it raised an exception, and the Scriptling host does not pass exceptions \
         or their messages to plugins (the host said: unsupported plugin value type EXCEPTION)"
    );
    host.on_callback(|_, _, _| Err("unsupported plugin value type SET".into()));
    let err = host.call("call_each", [Value::List(vec![1.into()]), cb("cb-2")]).unwrap_err();
    assert_eq!(
        err.message(),
        "call_each(): on_item failed: it returned a SET, which the host cannot send to a plugin \
         (unsupported plugin value type SET)"
    );
}

#[test]
fn typed_results_and_argument_errors() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|_, _, _| Ok(Value::from("not a number")));
    let err = host.call("expect_int", [cb("cb-1")]).unwrap_err();
    assert_eq!(err.message(), "expect_int(): cb returned a value that must be an int, got string");
    let err = host.call("expect_int", [Value::from("print")]).unwrap_err();
    assert_eq!(err.message(), "expect_int(): argument 'cb' must be a function, got string");
}

#[test]
fn a_result_can_be_ignored_and_errors_name_the_function_and_parameter() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|_, args, _| Ok(if args.is_empty() { Value::from("done") } else { Value::Int(1) }));
    // Ignored results of any type; the typed last call fails, naming where.
    let err = host.call("process", [Value::List(vec!["a".into(), "b".into()]), cb("cb-2")]).unwrap_err();
    assert_eq!(err.message(), "process(): on_progress returned a value that must be None, got string");
    host.on_callback(|_, _, _| Ok(Value::Null));
    assert_eq!(host.call("process", [Value::List(vec!["a".into()]), cb("cb-2")]).unwrap(), Value::Int(1));
    // A callback nested in a list has no parameter of its own: its id says which.
    host.on_callback(|_, _, _| Ok(Value::Int(3)));
    let err = host.call("call_nested", [Value::List(vec![cb("cb-a")]), Value::Dict(BTreeMap::new())]).unwrap_err();
    assert_eq!(err.message(), "call_nested(): callback cb-a returned a value that must be a string, got int");
}

#[test]
fn a_callback_used_after_its_call_returned_fails_locally() {
    let host = Host::in_process(plugin()).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    host.on_callback(move |_, _, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Value::Null)
    });
    host.call("keep", [cb("cb-kept")]).unwrap();
    let err = host.call("use_kept", []).unwrap_err();
    assert_eq!(err.message(), "unknown callback cb-kept: it expired when the plugin call that received it returned");
    assert_eq!(asked.load(Ordering::SeqCst), 0, "the host was never asked");
}

#[test]
fn two_hundred_concurrent_calls_with_callbacks_and_logs_all_complete() {
    let host = Arc::new(Host::in_process(plugin()).unwrap());
    let seed = AtomicUsize::new(1);
    host.on_callback(move |_, args, _| {
        // Answer after a pseudo-random delay so answers arrive out of order.
        let x = seed.fetch_add(7919, Ordering::Relaxed) % 4;
        std::thread::sleep(Duration::from_millis(x as u64));
        Ok(Value::Int(args[0].as_int().unwrap() + args[1].as_int().unwrap()))
    });
    let rounds = 4;
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..200i64)
            .map(|n| {
                let host = Arc::clone(&host);
                scope.spawn(move || {
                    let name = if n % 2 == 0 { "busy" } else { "async_busy" };
                    let got = host.call(name, [Value::Int(n), Value::Int(rounds), cb(&format!("cb-{n}"))]).unwrap();
                    assert_eq!(got, Value::Int(n * rounds + (0..rounds).sum::<i64>()), "call {n}");
                })
            })
            .collect();
        calls.into_iter().for_each(|c| c.join().unwrap());
    });
    assert_eq!(host.logs().len(), 200 * rounds as usize);
}

#[test]
fn async_handlers_must_use_call_async() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|_, _, _| Ok(Value::Null));
    let err = host.call("async_blocking_misuse", [cb("cb-1")]).unwrap_err();
    assert!(err.message().contains("use `call_async(..).await` in async code"), "{err}");
}

#[test]
fn log_records_carry_levels_fields_and_precede_the_response() {
    let host = Host::in_process(plugin()).unwrap();
    assert_eq!(host.call("log_then_answer", [Value::from("Ada")]).unwrap(), Value::from("done:Ada"));
    // The response has arrived, so every record written before it has too.
    let logs = host.logs();
    let levels: Vec<&str> = logs.iter().map(|r| r.level.as_str()).collect();
    assert_eq!(levels, ["trace", "debug", "info", "warn", "error"]);
    assert_eq!(
        logs[2],
        LogRecord {
            level: "info".into(),
            message: "i".into(),
            args: vec!["plugin".into(), "test".into(), "name".into(), "Ada".into()]
        }
    );
}

/// A callback that calls back into the object its caller holds waits at
/// most `busy_object_timeout` (the wire cannot tell it from another script
/// thread's call), then fails with a message that names both possibilities.
#[test]
fn reentering_an_object_held_by_a_call_waiting_on_its_callback_fails_at_the_bound_naming_both() {
    let bound = Duration::from_millis(200);
    let host = Arc::new(Host::in_process(plugin().busy_object_timeout(bound)).unwrap());
    let obj = host.new_object("Box2", [Value::Int(1)]).unwrap();
    let weak = Arc::downgrade(&host);
    let id = obj.id.clone();
    host.on_callback(move |which, _, _| {
        let host = weak.upgrade().unwrap();
        let result = match which {
            "cb-read" => host.call_method(&id, "get", []),
            _ => host.call_method(&id, "set", [Value::Int(9)]),
        };
        result.map_err(|e| e.message().to_owned())
    });
    let started = Instant::now();
    let err = host.call_method(&obj.id, "mutate_with", [cb("cb-read")]).unwrap_err();
    let took = started.elapsed();
    assert!(took >= bound && took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        err.message(),
        format!(
            "Box2.mutate_with(): cb failed: Box2.get(): Box2 object {} is held by a call that has been waiting on a callback for 200ms, the most a \
             call waits for it (Plugin::busy_object_timeout): either this call came from that callback (a callback \
             cannot use the object its caller holds: make both methods take &self, or call back before taking the \
             object), or the callback runs longer than that",
            obj.id
        )
    );
    // A shared hold lets a shared re-entrant call through...
    assert_eq!(host.call_method(&obj.id, "read_with", [cb("cb-read")]).unwrap(), Value::Int(2));
    // ...but not an exclusive one.
    let err = host.call_method(&obj.id, "read_with", [cb("cb-write")]).unwrap_err();
    assert!(err.message().starts_with("Box2.read_with(): cb failed: Box2.set(): Box2 object"), "{err}");
    // The object is usable afterwards.
    assert_eq!(host.call_method(&obj.id, "get", []).unwrap(), Value::Int(2));
}

/// While a call holds an object and waits on its callback, a call from
/// another script thread that needs the object waits its turn, and is
/// served when the first returns.
#[test]
fn a_concurrent_caller_waits_for_a_call_waiting_on_its_callback_and_is_served() {
    let host = Arc::new(Host::in_process(plugin()).unwrap());
    let obj = host.new_object("Box2", [Value::Int(1)]).unwrap();
    let (arrived_tx, arrived) = std::sync::mpsc::channel();
    let (release_tx, release) = std::sync::mpsc::channel::<()>();
    let (arrived_tx, release) = (Mutex::new(arrived_tx), Mutex::new(release));
    host.on_callback(move |_, _, _| {
        arrived_tx.lock().unwrap().send(()).unwrap();
        release.lock().unwrap().recv_timeout(Duration::from_secs(10)).map_err(|e| e.to_string())?;
        Ok(Value::Null)
    });
    let visit = {
        let (host, id) = (Arc::clone(&host), obj.id.clone());
        std::thread::spawn(move || host.call_method(&id, "mutate_with", [cb("cb-hold")]))
    };
    arrived.recv_timeout(Duration::from_secs(5)).expect("visit waits on its callback");
    let bump = {
        let (host, id) = (Arc::clone(&host), obj.id.clone());
        std::thread::spawn(move || host.call_method(&id, "set", [Value::Int(7)]))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(!bump.is_finished(), "the second caller waits its turn");
    release_tx.send(()).unwrap();
    assert_eq!(visit.join().unwrap().unwrap(), Value::Null);
    assert_eq!(bump.join().unwrap().unwrap(), Value::Null);
    assert_eq!(host.call_method(&obj.id, "get", []).unwrap(), Value::Int(7));
}

/// A callback handler that tells `arrived` it was called, then never
/// answers (for 30 s): a host that went away mid-callback.
fn never_answer(host: &Host) -> std::sync::mpsc::Receiver<()> {
    let (arrived_tx, arrived) = std::sync::mpsc::channel();
    let arrived_tx = Mutex::new(arrived_tx);
    let (_keep, never) = std::sync::mpsc::channel::<()>();
    let never = Mutex::new((never, _keep));
    host.on_callback(move |_, _, _| {
        arrived_tx.lock().unwrap().send(()).unwrap();
        let _ = never.lock().unwrap().0.recv_timeout(Duration::from_secs(30));
        Ok(Value::Null)
    });
    arrived
}

#[test]
fn host_eof_while_a_handler_waits_on_a_callback_exits_promptly() {
    let host = Host::in_process(plugin()).unwrap();
    let arrived = never_answer(&host);
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| host.call("call_each", [Value::List(vec![1.into()]), cb("cb-slow")]));
        arrived.recv_timeout(Duration::from_secs(10)).expect("the call is waiting on the host");
        let started = Instant::now();
        host.close_input();
        host.wait(Duration::from_secs(5)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        assert!(waiting.join().unwrap().is_err());
    });
}

#[test]
fn callback_example_streams_events() {
    let host = Host::spawn_example("callback").unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    host.on_callback(move |id, args, kwargs| {
        assert!(kwargs.is_empty());
        sink.lock().unwrap().push((id.to_owned(), args));
        Ok(Value::from("ack"))
    });
    assert_eq!(host.call("stream", [cb("cb-1")]).unwrap(), Value::from("Hello, Ada"));
    let events = events.lock().unwrap();
    let shown: Vec<String> = events.iter().map(|(id, args)| format!("{id} {}", Value::List(args.clone()))).collect();
    assert_eq!(
        shown,
        [
            r#"cb-1 [{"index": 0, "token": "Hello"}]"#,
            r#"cb-1 [{"index": 1, "token": ", "}]"#,
            r#"cb-1 [{"index": 2, "token": "Ada"}]"#,
            r#"cb-1 [["done", 3]]"#,
        ]
    );
    let err = {
        let host = Host::spawn_example("callback").unwrap();
        host.on_callback(|_, _, _| Err("stop".into()));
        host.call("stream", [cb("cb-2")]).unwrap_err()
    };
    assert_eq!(err.message(), "stream(): on_event failed: stop");
}

#[test]
fn logger_example_logs_through_the_host() {
    let host = Host::spawn_example("logger").unwrap();
    let tags = Value::List(vec!["a".into(), "b".into()]);
    assert_eq!(host.call("work", [Value::from("Ada"), tags.clone()]).unwrap(), Value::from("logged:Ada"));
    assert_eq!(
        host.logs(),
        [LogRecord {
            level: "info".into(),
            message: "plugin work started".into(),
            args: vec!["plugin".into(), "logger".into(), "name".into(), "Ada".into(), "tags".into(), tags],
        }]
    );
    let _ = json!(null);
}

#[test]
fn logging_outside_a_call_goes_to_stderr_not_stdout() {
    let host = Host::spawn(std::process::Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))).unwrap();
    assert_eq!(host.call("log_outside", []).unwrap(), Value::from("ok"));
    host.shutdown().unwrap();
    let stderr = host.wait_for_stderr("[info] from a spawned thread", Duration::from_secs(10));
    assert!(stderr.is_ok(), "{stderr:?}");
    host.wait(Duration::from_secs(10)).unwrap();
    assert!(host.logs().is_empty());
    assert!(host.stray_output().is_empty());
}

#[test]
fn in_process_logging_outside_a_call_is_not_sent_to_the_host() {
    let host = Host::in_process(plugin()).unwrap();
    assert_eq!(host.call("log_from_thread", []).unwrap(), Value::from("ok"));
    assert!(host.logs().is_empty());
}

#[test]
fn a_real_process_exits_zero_when_the_host_dies_mid_callback() {
    let host = Host::spawn_example("callback").unwrap();
    let arrived = never_answer(&host);
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| host.call("stream", [cb("cb-1")]));
        arrived.recv_timeout(Duration::from_secs(10)).expect("the call is waiting on the host");
        let started = Instant::now();
        host.close_input();
        let status = host.wait(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(status.code(), Some(0));
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        assert!(waiting.join().unwrap().is_err());
    });
}

mod common;

/// Starts `call_me(cb)` on the fixture and returns the plugin's
/// `callback.call` request.
fn fixture_calling_back(command: &mut std::process::Command) -> (common::Raw, serde_json::Value) {
    let mut raw = common::Raw::spawn(command);
    raw.handshake();
    raw.send(&common::call_line(1, "call_me", r#"{"type":"callback","callback":{"id":"cb-1"}}"#));
    let request = raw.recv().expect("the plugin's callback.call");
    assert_eq!(request["method"], "callback.call", "{request}");
    (raw, request)
}

#[test]
fn a_malformed_answer_to_a_callback_fails_the_callback_and_is_never_answered() {
    let (mut raw, request) =
        fixture_calling_back(&mut std::process::Command::new(env!("CARGO_BIN_EXE_fixture-plugin")));
    // Neither result nor error: the host's id space must not see an answer to it.
    raw.send(&json!({"jsonrpc": "2.0", "id": request["id"]}).to_string());
    let answer = raw.recv().unwrap();
    assert_eq!(answer["id"], 1, "the only answer is the outer call's: {answer}");
    assert_eq!(
        answer["error"]["message"],
        r#"call_me(): cb: the host's answer is malformed: it has neither "result" nor "error""#
    );
    // Nothing else was written: the next frame answers the next request.
    raw.send(r#"{"jsonrpc":"2.0","id":"next","method":"ping"}"#);
    assert_eq!(raw.recv().unwrap()["id"], "next");
}

#[test]
fn a_callback_the_host_never_answers_fails_after_the_callback_timeout() {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    command.env("FIXTURE_CALLBACK_TIMEOUT_MS", "300");
    let (mut raw, _request) = fixture_calling_back(&mut command);
    let started = Instant::now();
    let answer = raw.recv().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    assert_eq!(answer["id"], 1);
    assert_eq!(
        answer["error"]["message"],
        "call_me(): cb: the host did not answer within 300ms (Plugin::callback_timeout)"
    );
    // A late answer is dropped quietly, and serving goes on.
    raw.send(&json!({"jsonrpc": "2.0", "id": _request["id"], "result": {"type": "null"}}).to_string());
    raw.send(r#"{"jsonrpc":"2.0","id":"next","method":"ping"}"#);
    assert_eq!(raw.recv().unwrap()["id"], "next");
    assert!(!raw.stderr().contains("ignoring"), "{}", raw.stderr());
}

#[test]
fn a_callbacks_timeout_holds_while_the_host_keeps_sending_other_lines() {
    // The call runs on the thread that read it, which reads while it waits
    // for its callback's answer: lines that keep coming must not keep it
    // reading past the callback's timeout.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    command.env("FIXTURE_CALLBACK_TIMEOUT_MS", "300");
    let (mut raw, _request) = fixture_calling_back(&mut command);
    let started = Instant::now();
    let mut pings = 0;
    let answer = loop {
        raw.send(&format!(r#"{{"jsonrpc":"2.0","id":"ping-{pings}","method":"ping"}}"#));
        pings += 1;
        let frame = raw.recv().expect("an answer");
        if frame["id"] == 1 {
            break frame;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "the call outlived its callback's timeout");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    assert_eq!(
        answer["error"]["message"],
        "call_me(): cb: the host did not answer within 300ms (Plugin::callback_timeout)"
    );
    assert!(pings > 10, "the host kept sending: {pings} pings");
}

#[test]
fn the_documented_tracing_init_line_works_in_a_main_returning_serve_error() {
    fn main_like() -> Result<(), scriptling_plugin::ServeError> {
        scriptling_plugin::tracing::init()?;
        // A second global subscriber is refused, as a ServeError.
        scriptling_plugin::tracing::init()?;
        Ok(())
    }
    let err = main_like().unwrap_err();
    assert!(matches!(err, scriptling_plugin::ServeError::Logging(_)), "{err}");
    assert!(err.to_string().starts_with("cannot send logs to the host: "), "{err}");
}
