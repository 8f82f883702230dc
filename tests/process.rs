//! Plugins as the host sees them: separate executables spoken to over their
//! stdin and stdout. Covers the hello example, exit codes on shutdown and
//! EOF, and the stdout guard.

use std::process::Command;
use std::time::{Duration, Instant};

use scriptling_plugin::Value;
use scriptling_plugin::testing::{Host, example_path};
use serde_json::{Value as J, json};

mod common;

use common::{Stop, stop_name};

const WAIT: Duration = Duration::from_secs(10);

fn fixture() -> Host {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    common::own_group(&mut command);
    Host::spawn(command).expect("spawn the fixture plugin")
}

#[test]
fn hello_example_matches_the_upstream_surface() {
    let host = Host::spawn_example("hello").expect("spawn the hello example (built by cargo test)");
    let hs = host.handshake().unwrap();
    assert_eq!(hs["protocol"], "1.0");
    assert_eq!(hs["transport"], "json");
    assert_eq!(hs["library"]["name"], "hello");
    let functions: Vec<&str> =
        hs["schema"]["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(functions[..2], ["greet", "label"]);
    assert_eq!(
        hs["schema"]["constants"][0],
        json!({"name": "default_name", "value": {"type": "string", "value": "World"}})
    );
    assert_eq!(host.call("greet", [Value::from("Ada")]).unwrap(), Value::from("Hello, Ada"));
    assert_eq!(host.call("label", [Value::from("Ada")]).unwrap(), Value::from("built:Ada"));
    assert_eq!(
        host.call("greet", [Value::Int(7)]).unwrap_err().message(),
        "greet(): argument 'name' must be a string, got int"
    );
    host.shutdown().unwrap();
    let status = host.wait(WAIT).unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(host.stray_output().is_empty(), "{:?}", host.stray_output());
}

/// The README's transcript of the real host running the hello plugin is what
/// Scriptling prints: the call's result, then `help()`'s header line
/// (`Help for builtin function:`, from the host's `helpFunctionImpl`) and the
/// function's help text from the handshake.
#[test]
fn readme_host_transcript_matches_the_hello_plugin() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme.find("scriptling --plugin-dir plugins -c").expect("the README runs the host");
    let block = &readme[start..readme[start..].find("```").map(|end| start + end).unwrap()];
    let printed: Vec<&str> = block
        .lines()
        .skip(1)
        .map(|line| line.strip_prefix("# ").or(line.strip_prefix('#')).expect("transcript lines are comments"))
        .collect();

    let host = Host::spawn_example("hello").unwrap();
    let hs = host.handshake().unwrap();
    let greet = hs["schema"]["functions"].as_array().unwrap().iter().find(|f| f["name"] == "greet").unwrap();
    let Value::String(result) = host.call("greet", [Value::from("Ada")]).unwrap() else { panic!() };
    let mut expected = vec![result.as_str(), "Help for builtin function:"];
    expected.extend(greet["description"].as_str().unwrap().lines());
    assert_eq!(printed, expected);
    host.shutdown().unwrap();
}

#[test]
fn shutdown_finishes_in_flight_calls_then_answers_and_exits_zero_without_stdin_closing() {
    let host = fixture();
    host.handshake().unwrap();
    // Read in order: both calls are running before the shutdown is read.
    host.send_raw(r#"{"jsonrpc":"2.0","id":"slow","method":"function.call","params":{"name":"sleep_ms","args":[{"type":"int","value":400}]}}"#)
        .unwrap();
    host.send_raw(r#"{"jsonrpc":"2.0","id":"slow-async","method":"function.call","params":{"name":"async_sleep_ms","args":[{"type":"int","value":400}]}}"#)
        .unwrap();
    let started = Instant::now();
    host.shutdown().unwrap();
    // The answer to plugin.shutdown comes once the calls in flight have
    // answered (within the 5 s grace, inside the host's 10 s wait).
    assert!(started.elapsed() >= Duration::from_millis(300), "answered after the calls: {:?}", started.elapsed());
    let mut answered: Vec<serde_json::Value> =
        (0..2).filter_map(|_| host.next_frame(Duration::ZERO)).map(|f| f["id"].clone()).collect();
    answered.sort_by_key(ToString::to_string);
    assert_eq!(answered, [json!("slow"), json!("slow-async")], "in-flight calls are answered before shutdown");
    // stdin stays open: the plugin must exit on its own.
    let status = host.wait(WAIT).unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// Runs the fixture with stdin read from a file holding `input`: every
/// line is waiting before the plugin starts (so the first is served on the
/// main thread, before any other thread exists). Returns stdout's lines.
fn run_fixture_on_file(input: &str) -> (Vec<J>, Option<i32>) {
    let path = std::env::temp_dir().join(format!("scriptling-plugin-input-{}-{}", std::process::id(), input.len()));
    std::fs::write(&path, input).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))
        .stdin(std::fs::File::open(&path).unwrap())
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let lines = String::from_utf8(output.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (lines, output.status.code())
}

#[test]
fn input_waiting_at_start_is_served_whole_from_the_first_line_on() {
    let call = |id: u32, name: &str, n: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"function.call","params":{{"name":"{name}","args":[{{"type":"int","value":{n}}}]}}}}"#
        )
    };
    let lines = [
        r#"{"jsonrpc":"2.0","id":0,"method":"scriptling.handshake","params":{"protocol":"1.0"}}"#.to_owned(),
        call(1, "sleep_ms", 1),
        call(2, "async_sleep_ms", 1),
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#.to_owned(),
    ];
    let (out, code) = run_fixture_on_file(&(lines.join("\n") + "\n"));
    assert_eq!(code, Some(0));
    let mut ids: Vec<u64> = out.iter().map(|f| f["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3], "{out:?}");
    assert!(out.iter().all(|f| f.get("error").is_none()), "{out:?}");
    // The handshake is answered before anything else is set up, so first.
    assert_eq!(out[0]["id"], 0, "{out:?}");
    assert_eq!(out[0]["result"]["protocol"], "1.0");
    // Also with a CRLF line end, and with nothing after it.
    let handshake = r#"{"jsonrpc":"2.0","id":"h","method":"scriptling.handshake","params":{"protocol":"1.0"}}"#;
    let (out, code) = run_fixture_on_file(&format!("{handshake}\r\n"));
    assert_eq!((out.len(), code), (1, Some(0)));
    assert_eq!(out[0]["id"], "h");

    // A first line that is not the handshake, and input that is empty.
    let (out, code) = run_fixture_on_file(&(call(7, "sleep_ms", 1) + "\n"));
    assert_eq!((out.len(), code), (1, Some(0)));
    assert_eq!(out[0]["result"], json!({"type": "int", "value": 1}));
    assert_eq!(run_fixture_on_file(""), (vec![], Some(0)));
}

/// Runs the hello example with `args` and no input; returns its exit code,
/// stdout and stderr.
fn hello_with(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(example_path("hello")).args(args).stdin(std::process::Stdio::null()).output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn a_plugin_binary_describes_itself_without_a_host() {
    let (code, out, _) = hello_with(&["--describe"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("hello 1.0.0: Example Rust plugin\n"), "{out}");
    for expected in [
        "functions:\n  greet(name, greeting=\"Hello\")\n      Returns a greeting for `name`.\n",
        "classes:\n",
        "  Counter(start)\n",
        "    inc(amount)\n        Adds `amount` and returns the new value.\n",
        "constants:\n  default_name = \"World\"\n",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }

    let (code, out, _) = hello_with(&["--schema"]);
    assert_eq!(code, Some(0));
    let schema: J = serde_json::from_str(&out).unwrap();
    let host = Host::spawn_example("hello").unwrap();
    assert_eq!(schema, host.handshake().unwrap(), "--schema prints the handshake answer");

    assert_eq!(
        hello_with(&["--version"]),
        (Some(0), format!("hello 1.0.0 (scriptling-plugin {})\n", env!("CARGO_PKG_VERSION")), String::new())
    );
    let (code, out, _) = hello_with(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("usage: hello [--describe"), "{out}");
}

/// The first fenced block after `marker` in PROTOCOL.md, as lines.
fn protocol_block(marker: &str) -> Vec<String> {
    let doc = include_str!("../PROTOCOL.md");
    let after = &doc[doc.find(marker).expect("marker in PROTOCOL.md")..];
    let block = &after[after.find("```text\n").expect("a text block") + 8..];
    block[..block.find("```").expect("closed block")].lines().map(str::to_owned).collect()
}

#[test]
fn the_protocol_pages_session_gives_the_answers_it_shows() {
    use std::io::{BufRead, BufReader, Write};

    let input = protocol_block("<!-- session:input");
    let expected = protocol_block("<!-- session:output");
    assert_eq!(input.len(), expected.len(), "one answer per request in PROTOCOL.md");
    let mut child = common::spawn_piped(&mut Command::new(example_path("hello")));
    let mut stdin = child.stdin.take().unwrap();
    // Read on a thread of its own, so a lost answer fails the test instead
    // of hanging it.
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.expect("stdout is UTF-8")).is_err() {
                return;
            }
        }
    });
    // As the page says and the host does: each line after the previous answer.
    for (request, expected) in input.iter().zip(&expected) {
        writeln!(stdin, "{request}").unwrap();
        let got = lines.recv_timeout(WAIT).unwrap_or_else(|e| panic!("no answer to {request}: {e}"));
        match expected.strip_suffix('…') {
            Some(prefix) => assert!(got.starts_with(prefix), "{got}\ndoes not start with\n{prefix}"),
            None => assert_eq!(&got, expected),
        }
    }
    drop(stdin);
    match lines.recv_timeout(WAIT) {
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {}
        Ok(line) => panic!("nothing comes after the shutdown answer, but: {line}"),
        Err(e) => panic!("stdout was not closed after the shutdown answer: {e}"),
    }
    reader.join().unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn an_unknown_argument_is_refused_with_the_usage() {
    let (code, out, err) = hello_with(&["--descibe"]);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert!(err.contains("unknown argument `--descibe`"), "{err}");
    assert!(err.contains("usage: hello [--describe"), "{err}");
}

#[test]
fn stdin_eof_exits_zero_promptly() {
    let host = fixture();
    host.handshake().unwrap();
    let started = Instant::now();
    host.close_input();
    let status = host.wait(WAIT).unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[test]
fn a_panic_is_an_error_response_and_the_process_keeps_serving() {
    let host = fixture();
    let err = host.call("boom", []).unwrap_err();
    assert_eq!(err.message(), "boom(): panicked: kaboom");
    assert_eq!(host.call("echo", [Value::Int(5)]).unwrap(), Value::Int(5));
    // stderr is its own stream: the report may reach the host after the answers.
    let stderr = host.wait_for_stderr("kaboom", WAIT);
    assert!(stderr.is_ok(), "the panic report goes to stderr: {stderr:?}");
}

#[test]
fn stdout_guard_keeps_prints_off_the_protocol_stream() {
    let host = fixture();
    host.handshake().unwrap();
    for _ in 0..3 {
        assert_eq!(host.call("noisy", [Value::from("quiet")]).unwrap(), Value::from("QUIET"));
    }
    host.shutdown().unwrap();
    host.wait(WAIT).unwrap();
    assert!(host.stray_output().is_empty(), "stdout carried non-protocol bytes: {:?}", host.stray_output());
    let stderr = host.stderr();
    assert_eq!(stderr.matches("println noise from the plugin").count(), 3, "{stderr}");
    assert_eq!(stderr.matches("raw fd 1 noise").count(), 3, "{stderr}");
    assert!(stderr.contains("unterminated noise"), "{stderr}");
}

#[test]
fn malformed_lines_do_not_stop_a_real_process() {
    let host = fixture();
    host.send_raw("this is not json").unwrap();
    let f = host.next_frame(WAIT).unwrap();
    assert_eq!((f["id"].clone(), f["error"]["code"].clone()), (json!(null), json!(-32700)));
    host.send_raw([0xff, 0xfe, b'{', b'}']).unwrap();
    assert_eq!(host.next_frame(WAIT).unwrap()["error"]["code"], -32700);
    assert_eq!(host.call("echo", [Value::from("still here")]).unwrap(), Value::from("still here"));
}

#[test]
fn hello_example_classes() {
    let host = Host::spawn_example("hello").unwrap();
    let hs = host.handshake().unwrap();
    let classes: Vec<&str> =
        hs["schema"]["classes"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(classes, ["Config", "Counter"]);
    let config = host.new_object("Config", [Value::from("prod")]).unwrap();
    assert_eq!(host.call_method(&config.id, "get", [Value::from("anything")]).unwrap(), Value::from("prod"));
    let counter = host.new_object("Counter", [Value::Int(10)]).unwrap();
    assert_eq!(host.call_method(&counter.id, "inc", [Value::Int(5)]).unwrap(), Value::Int(15));
    assert_eq!(host.call_method(&counter.id, "get", []).unwrap(), Value::Int(15));
    assert_eq!(
        host.call_method(&counter.id, "inc", [Value::from("x")]).unwrap_err().message(),
        "Counter.inc(): argument 'amount' must be an int, got string"
    );
    host.destroy(&counter.id).unwrap();
    host.destroy(&counter.id).unwrap();
}

#[test]
fn properties_example_matches_upstream() {
    let host = Host::spawn_example("properties").unwrap();
    let hs = host.handshake().unwrap();
    assert_eq!(hs["library"]["name"], "properties");
    assert_eq!(
        hs["schema"]["classes"][0]["properties"],
        json!([
            {"name": "value", "description": "value\n\nThe current value; assignable.", "settable": true},
            {"name": "label", "description": "label\n\nA label describing the counter (read-only).", "settable": false}
        ])
    );
    let c = host.new_object("Counter", [Value::Int(5)]).unwrap();
    assert_eq!(host.call_method(&c.id, "value", []).unwrap(), Value::Int(5));
    host.call_method(&c.id, "value", [Value::Int(7)]).unwrap();
    assert_eq!(host.call_method(&c.id, "label", []).unwrap(), Value::from("counter:7"));
    assert_eq!(
        host.call_method(&c.id, "label", [Value::from("x")]).unwrap_err().message(),
        "can't set attribute 'label' of Counter: property is read-only"
    );
    assert_eq!(host.call_method(&c.id, "add", [Value::Int(3)]).unwrap(), Value::Int(10));
}

/// Sends `stop` to the plugin; `false` where it cannot be delivered (see
/// `common::send_stop`).
fn signal(host: &Host, stop: Stop) -> bool {
    common::send_stop(host.pid().unwrap(), stop)
}

/// Sends a request and a ping after it: once the ping is answered, the
/// reader has handed the request over (lines are read in order).
fn start(host: &Host, line: &str) {
    host.send_raw(line).unwrap();
    assert_eq!(host.request("ping", J::Null).unwrap(), json!({"status": "ok"}));
}

#[test]
fn sigterm_finishes_calls_destroys_objects_and_exits_zero() {
    let host = fixture();
    host.handshake().unwrap();
    let db = host.new_object("Resource", [Value::from("db")]).unwrap();
    start(
        &host,
        &json!({"jsonrpc":"2.0","id":"held","method":"object.call_method",
               "params":{"object_id": db.id, "method":"hold","args":[{"type":"int","value":400}]}})
        .to_string(),
    );
    if !signal(&host, Stop::Terminate) {
        return;
    }
    let answer = host.next_frame(WAIT).expect("the call in flight is answered");
    assert_eq!((answer["id"].clone(), answer["result"]["value"].clone()), (json!("held"), json!(400)));
    let status = host.wait(WAIT).unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
    let stderr = host.stderr();
    let received = format!("{} received, shutting down", stop_name(Stop::Terminate));
    assert!(stderr.contains(&received), "{stderr}");
    assert!(stderr.contains("fixture: closed db"), "the object was destroyed: {stderr}");
}

#[test]
fn sigint_behaves_the_same_and_a_second_signal_exits_at_once() {
    let host = fixture();
    start(
        &host,
        r#"{"jsonrpc":"2.0","id":"stuck","method":"function.call","params":{"name":"sleep_ms","args":[{"type":"int","value":30000}]}}"#,
    );
    if !signal(&host, Stop::Interrupt) {
        return;
    }
    host.wait_for_stderr(&format!("{} received", stop_name(Stop::Interrupt)), WAIT).unwrap();
    let started = Instant::now();
    assert!(signal(&host, Stop::Interrupt));
    let status = host.wait(WAIT).unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    // 128 + the signal's number (Ctrl-Break is SIGBREAK, 21, on Windows).
    assert_eq!(status.code(), Some(if cfg!(windows) { 149 } else { 130 }));
}

#[test]
fn a_panic_costs_one_stderr_line_even_when_the_host_asks_for_backtraces() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    command.env("RUST_BACKTRACE", "1");
    let host = Host::spawn(command).unwrap();
    for _ in 0..10 {
        assert_eq!(host.call("boom", []).unwrap_err().message(), "boom(): panicked: kaboom");
    }
    host.shutdown().unwrap();
    host.wait(WAIT).unwrap();
    let stderr = host.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("fixture:")).collect();
    assert_eq!(lines.len(), 10, "one line per panic:\n{stderr}");
    for line in lines {
        assert!(line.starts_with("scriptling-plugin: boom() panicked at tests/fixtures/fixture_plugin.rs:"), "{line}");
        assert!(line.ends_with(": kaboom"), "{line}");
    }
}

#[test]
fn a_plugin_can_opt_into_full_panic_reports() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    command.env("RUST_BACKTRACE", "1").env("SCRIPTLING_PLUGIN_BACKTRACE", "1");
    let host = Host::spawn(command).unwrap();
    assert_eq!(host.call("boom", []).unwrap_err().message(), "boom(): panicked: kaboom");
    let stderr = host.wait_for_stderr("stack backtrace", WAIT);
    assert!(stderr.is_ok(), "{stderr:?}");
}

#[test]
fn shutdown_hooks_log_through_a_real_host_connection() {
    let host = fixture();
    host.set_jitter(Duration::from_millis(2));
    host.new_object("Resource", [Value::from("cache")]).unwrap();
    host.shutdown().unwrap();
    let messages: Vec<String> = host.logs().into_iter().map(|r| r.message).collect();
    assert_eq!(messages, ["closing cache"], "handled before shutdown was answered");
    assert_eq!(host.wait(WAIT).unwrap().unwrap().code(), Some(0));
}

/// Handlers that compute keep the sync pool at the core count: forty calls
/// at once of a function that computes for 50 ms. (The stall rule could not
/// tell a computing thread from a blocked one, and added a thread every
/// millisecond until there was one a call.)
#[test]
#[cfg(target_os = "linux")] // counts the plugin's threads in /proc
fn computing_handlers_keep_the_sync_pool_at_the_core_count() {
    let mut raw = common::Raw::spawn(&mut Command::new(env!("CARGO_BIN_EXE_fixture-plugin")));
    raw.handshake();
    let pid = raw.child.id();
    let sync_threads = move || {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
        let names = tasks.filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok());
        names.filter(|name| name.trim_end() == "plugin-sync").count()
    };
    let calls = 40;
    for id in 0..calls {
        raw.send(&common::call_line(10 + id, "spin_ms", r#"{"type":"int","value":50}"#));
    }
    let (done_tx, done) = std::sync::mpsc::channel();
    let sampler = std::thread::spawn(move || {
        let mut most = 0;
        while done.recv_timeout(Duration::from_millis(5)).is_err() {
            most = most.max(sync_threads());
        }
        most
    });
    for _ in 0..calls {
        assert_eq!(raw.recv().unwrap()["result"]["value"], 50, "{}", raw.stderr());
    }
    done_tx.send(()).unwrap();
    let most = sampler.join().unwrap();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    assert!(most <= cores + 1, "{most} sync threads for {calls} computing calls on {cores} cores");
}

/// Voluntary context switches of every thread of process `pid` (Linux):
/// how often its threads went to sleep.
#[cfg(target_os = "linux")]
fn sleeps(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok())
        .filter_map(|status| {
            let line = status.lines().find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

/// Sleeps per round trip of the fixture, polling stdin for `spin_us`, over
/// `calls` sequential calls each sent `gap` after the last answer.
#[cfg(target_os = "linux")]
fn sleeps_per_call(spin_us: u32, calls: u32, gap: Duration) -> f64 {
    use std::io::{BufRead, BufReader, Write};
    let mut child = common::spawn_piped(
        Command::new(env!("CARGO_BIN_EXE_fixture-plugin")).env("FIXTURE_INPUT_SPIN_US", spin_us.to_string()),
    );
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut round_trip = |id: u32, method: &str, params: &str| {
        writeln!(input, r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#).unwrap();
        line.clear();
        output.read_line(&mut line).unwrap();
        assert!(line.contains(r#""result""#), "{line}");
    };
    round_trip(0, "scriptling.handshake", r#"{"protocol":"1.0"}"#);
    let echo = r#"{"name":"echo","args":[{"type":"int","value":1}]}"#;
    for id in 1..=100 {
        round_trip(id, "function.call", echo);
    }
    let before = sleeps(child.id());
    for id in 0..calls {
        let answered = Instant::now();
        while answered.elapsed() < gap {
            std::hint::spin_loop();
        }
        round_trip(1_000 + id, "function.call", echo);
    }
    let per_call = (sleeps(child.id()) - before) as f64 / f64::from(calls);
    drop(input);
    child.wait().unwrap();
    per_call
}

#[test]
#[cfg(target_os = "linux")] // counts the plugin's sleeps in /proc
fn the_reader_polls_for_the_next_request_instead_of_sleeping_when_asked() {
    // On one CPU the spin is off by design (`Plugin::input_spin`): polling
    // would only take the CPU from the host that is to write the request.
    if std::thread::available_parallelism().map_or(2, usize::from) < 2 {
        eprintln!("one CPU: the input spin is off there, nothing to measure");
        return;
    }
    // Each request comes 300 µs after the last answer: long enough for
    // the plugin to be waiting for it, well inside a generous window (so a
    // busy test machine does not outlast it).
    let gap = Duration::from_micros(300);
    // Other threads sleep too (the pool's watchdog ticks while calls come),
    // about as often either way: the reading thread makes the difference.
    let polling = sleeps_per_call(5_000, 1_000, gap);
    let sleeping = sleeps_per_call(0, 1_000, gap);
    assert!(
        sleeping - polling > 0.7,
        "polling stdin should save the reading thread a sleep per call: {sleeping:.2} sleeps per call without, {polling:.2} with"
    );
}

/// The fixture's CPU time per callback, polling stdin for `spin` when an
/// answer is due, over `calls` calls of `call_me` whose callback the host
/// answers `delay` after it is asked.
#[cfg(target_os = "linux")]
fn cpu_per_callback(spin: Duration, calls: u32, delay: Duration) -> Duration {
    let spin_us = spin.as_micros().to_string();
    let mut raw = common::Raw::spawn(
        Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))
            .env("FIXTURE_INPUT_SPIN_US", spin_us)
            .env("FIXTURE_CALLBACK_TIMEOUT_MS", "10000"),
    );
    raw.handshake();
    let before = common::cpu_time(raw.child.id());
    for id in 0..calls {
        raw.send(&common::call_line(u64::from(id), "call_me", r#"{"type":"callback","callback":{"id":"cb"}}"#));
        let asked = raw.recv().expect("the callback request");
        assert_eq!(asked["method"], "callback.call", "{asked}");
        std::thread::sleep(delay);
        raw.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"type": "int", "value": 1}}).to_string());
        let answer = raw.recv().expect("the call's answer");
        assert_eq!(answer["result"]["value"], 1, "{answer}");
    }
    let per_callback = (common::cpu_time(raw.child.id()) - before) / calls;
    raw.close_input();
    raw.wait(Duration::from_secs(10));
    per_callback
}

#[test]
#[cfg(target_os = "linux")] // reads the plugin's CPU time in /proc
fn a_callback_answered_slowly_is_not_polled_for_again() {
    if std::thread::available_parallelism().map_or(2, usize::from) < 2 {
        eprintln!("one CPU: the input spin is off there, nothing to measure");
        return;
    }
    // A script's callback takes the real host ~100 µs, past the spin: each
    // wait polled for it would cost the whole spin in CPU for nothing. Here
    // the spin is 2 ms and the host answers after 5 ms: polling every time
    // costs ~2 ms of CPU a callback more than not polling (less when the
    // cores are shared, as the poll yields); learning from the first costs
    // it once.
    let (calls, delay) = (40, Duration::from_millis(5));
    let polling = cpu_per_callback(Duration::from_millis(2), calls, delay);
    let not_polling = cpu_per_callback(Duration::ZERO, calls, delay);
    let spent = polling.saturating_sub(not_polling);
    assert!(
        spent < Duration::from_micros(400),
        "a callback the host answers after the spin cost {spent:?} more CPU with the spin ({polling:?} against \
         {not_polling:?}): the input was polled for it every time"
    );
}
