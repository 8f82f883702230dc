//! The TCP transport, driven from outside: the fixture plugin is run with
//! `--listen tcp://127.0.0.1:0` (or a Unix socket) and spoken to over
//! sockets, as a Supex-style driver or a Scriptling host on the network
//! would: `hello` and its token, `ping`, `tools/call` and `tools/list` with
//! plain JSON, the Scriptling protocol with callbacks and logs on the same
//! connection, objects per connection, the limits and the signals.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use scriptling_plugin::testing::Host;
use scriptling_plugin::{CallbackRef, Value};
use serde_json::{Value as Json, json};

mod common;

use common::tcp::{LineClient, WAIT, serve, serve_example, tool};

#[test]
fn hello_is_optional_without_a_token_and_says_who_the_server_is() {
    let server = serve(&[]);
    let mut client = server.line_client();
    // Served before any hello.
    assert_eq!(client.request(1, "ping", json!({}))["result"], json!({"status": "ok"}));
    let answer =
        client.request(2, "hello", json!({"name": "supex-driver", "version": "0.2.0", "agent": "test", "pid": 1}));
    assert_eq!(
        answer["result"],
        json!({"success": true, "message": "Client identified", "server": {"name": "fixture", "version": "0.0.1"}})
    );
    assert_eq!(
        tool(&mut client, 3, "echo", json!({"value": "hi"}))["result"],
        json!({"success": true, "result": "hi"})
    );
    // A batch is answered with one array, as on stdio.
    client.send(
        r#"[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"value":5}}}]"#,
    );
    let mut answers = client.recv().expect("the batch's answer");
    let answers = answers.as_array_mut().expect("an array");
    answers.sort_by_key(|a| a["id"].as_u64());
    assert_eq!(answers[0]["result"]["status"], "ok");
    assert_eq!(answers[1]["result"], json!({"success": true, "result": 5}));
}

#[test]
fn with_a_token_only_hello_and_ping_are_served_until_hello_presents_it() {
    let server = serve(&[("SCRIPTLING_PLUGIN_TOKEN", "s3cret")]);
    let mut client = server.line_client();
    // Missing: nothing but ping is served.
    let refused = tool(&mut client, 1, "echo", json!({"value": 1}));
    assert_eq!(refused["error"]["code"], -32001, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("send hello with the server's token"));
    assert_eq!(client.request(2, "ping", json!({}))["result"]["status"], "ok");
    assert_eq!(client.request(5, "function.call", json!({"name": "echo", "args": []}))["error"]["code"], -32001);
    // Missing in hello, or wrong: answered, and that connection closed.
    let mut missing = server.line_client();
    assert_eq!(missing.request(3, "hello", json!({"name": "x"}))["error"]["code"], -32001);
    assert!(missing.recv().is_none());
    let mut wrong = server.line_client();
    let answer = wrong.request(4, "hello", json!({"name": "x", "token": "s3cre"}));
    assert_eq!(
        answer["error"],
        json!({"code": -32001, "message": "authentication failed: hello must carry the server's token; closing the connection"})
    );
    assert!(wrong.recv().is_none());
    // Right: served from then on, the Scriptling protocol too.
    assert_eq!(client.request(6, "hello", json!({"name": "x", "token": "s3cret"}))["result"]["success"], true);
    assert_eq!(tool(&mut client, 7, "echo", json!({"value": 1}))["result"]["result"], 1);
    let call = client.request(8, "function.call", json!({"name": "echo", "args": [{"type": "int", "value": 2}]}));
    assert_eq!(call["result"], json!({"type": "int", "value": 2}));
    // Another connection starts behind the gate again.
    let mut other = server.line_client();
    assert_eq!(tool(&mut other, 1, "echo", json!({"value": 1}))["error"]["code"], -32001);
}

#[test]
fn a_connection_that_does_not_present_the_token_in_time_is_closed() {
    let server = serve(&[("SCRIPTLING_PLUGIN_TOKEN", "s3cret"), ("SCRIPTLING_PLUGIN_HELLO_TIMEOUT", "0.3")]);
    let mut client = server.line_client();
    assert!(client.closed_within(Duration::from_secs(5)), "closed without hello");
    server.raw.wait_for_stderr("no hello with the token within 300ms", WAIT);
    // One that presents it stays open past the deadline.
    let mut client = server.line_client();
    assert_eq!(client.request(1, "hello", json!({"token": "s3cret"}))["result"]["success"], true);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(client.request(2, "ping", json!({}))["result"]["status"], "ok");
}

#[test]
fn tools_call_converts_plain_json_both_ways() {
    let server = serve(&[]);
    let mut client = server.line_client();
    let round_trip = [
        (json!(7), "7"),
        (json!(-7), "-7"),
        (json!(7.0), "7.0"),
        (json!(2.5e3), "2500.0"),
        (json!("text"), "\"text\""),
        (json!(true), "true"),
        (json!(null), "null"),
        (json!([1, 2.5, "x", [null]]), "[1,2.5,\"x\",[null]]"),
        (json!({"b": {"c": [1]}, "a": 1}), "{\"a\":1,\"b\":{\"c\":[1]}}"),
    ];
    for (i, (value, written)) in round_trip.into_iter().enumerate() {
        let id = i as u64 + 1;
        let answer = tool(&mut client, id, "echo", json!({ "value": value }));
        assert_eq!(answer["result"]["success"], true, "{answer}");
        // The exact text: 7.0 stays a float, 7 an int.
        let text = serde_json::to_string(&answer["result"]["result"]).unwrap();
        assert_eq!(text, written, "{value}");
    }
    // In the other direction, numbers keep the kind the function returned.
    client
        .send(r#"{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"echo","arguments":{"value":1.0}}}"#);
    let mut line = String::new();
    client.reader.read_line(&mut line).unwrap();
    assert!(line.contains(r#""result":{"success":true,"result":1.0}"#), "{line}");
    // What plain JSON cannot say, and what is not a tool.
    let huge = tool(&mut client, 51, "echo", json!({"value": u64::MAX}));
    assert_eq!(huge["error"]["code"], -32602, "{huge}");
    assert!(huge["error"]["message"].as_str().unwrap().contains("does not fit in a Scriptling int"), "{huge}");
    let unknown = tool(&mut client, 52, "nope", json!({}));
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(unknown["error"]["message"].as_str().unwrap().starts_with("unknown tool nope (available: "), "{unknown}");
    let not_object = client.request(53, "tools/call", json!({"name": "echo", "arguments": [1]}));
    assert_eq!(not_object["error"]["code"], -32602, "{not_object}");
    // Nesting: as deep as protocol values may be (serde_json alone stops at
    // 128 levels), and past that the same clear refusal.
    let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let line = |id: u64, depth: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"value":{}}}}}}}"#,
            nested(depth)
        )
    };
    client.send(&line(54, 500));
    let mut deep = String::new();
    client.reader.read_line(&mut deep).unwrap();
    assert!(deep.contains(&format!(r#""result":{{"success":true,"result":{}}}"#, nested(500))), "{deep}");
    client.send(&line(55, 5_000));
    let mut too_deep = String::new();
    client.reader.read_line(&mut too_deep).unwrap();
    assert!(too_deep.contains("-32602") && too_deep.contains("nested more than 1000 levels deep"), "{too_deep}");
}

#[test]
fn a_tools_errors_are_what_the_script_would_see() {
    let server = serve(&[]);
    let mut client = server.line_client();
    let missing = tool(&mut client, 1, "echo", json!({}));
    assert_eq!(missing["error"]["code"], -32000, "{missing}");
    assert_eq!(missing["error"]["message"], "echo(): missing required argument 'value'");
    let wrong_type = tool(&mut client, 2, "sleep_ms", json!({"ms": "soon"}));
    assert_eq!(wrong_type["error"]["message"], "sleep_ms(): argument 'ms' must be an int, got string");
    let panicked = tool(&mut client, 3, "boom", json!({}));
    assert_eq!(panicked["error"]["message"], "boom(): panicked: kaboom");
    let callback = tool(&mut client, 4, "call_me", json!({"cb": "print"}));
    assert_eq!(callback["error"]["message"], "call_me(): argument 'cb' must be a function, got string");
}

/// The Supex driver's `status` calls `ping` as a tool, as the Supex runtime
/// answers it: built in, unless the plugin exports a `ping` of its own.
#[test]
fn the_ping_tool_answers_as_the_supex_runtime_does_unless_the_plugin_has_one() {
    let server = serve(&[]);
    let mut client = server.line_client();
    let answer = tool(&mut client, 1, "ping", json!({}));
    assert_eq!(
        answer["result"],
        json!({"success": true, "status": "connected", "message": "fixture 0.0.1 is serving this connection", "version": "0.0.1"}),
        "{answer}"
    );
    // A plugin's own `ping` wins.
    use scriptling_plugin::{Plugin, plugin_fn};
    /// Answers pong.
    #[plugin_fn]
    fn ping() -> String {
        "pong".into()
    }
    let host = Host::in_process(Plugin::new("own", "1.0.0", "").function::<ping>()).unwrap();
    let answer = host.request("tools/call", json!({"name": "ping", "arguments": {}})).unwrap();
    assert_eq!(answer, json!({"success": true, "result": "pong"}));
}

/// A client that never sent `scriptling.handshake` (a Supex-style tool
/// client) is never sent a `host.log` request it could not answer: its
/// calls' log records go to the plugin's stderr, naming the connection, and
/// its answer comes at once.
#[test]
fn a_client_that_is_not_a_scriptling_host_gets_only_its_answers() {
    let server = serve(&[]);
    let mut client = server.line_client();
    let started = Instant::now();
    let answer = tool(&mut client, 1, "log_inside", json!({"name": "Ada"}));
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 1, "result": {"success": true, "result": "Ada"}}));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    let stderr = server.raw.wait_for_stderr(r#"[info] logged inside a call name="Ada""#, WAIT);
    assert!(stderr.contains("connection 127.0.0.1:"), "{stderr}");
    // One that says it is a Scriptling host gets the record as host.log.
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"scriptling.handshake","params":{"protocol":"1.0"}}"#);
    assert_eq!(client.recv().unwrap()["id"], 2);
    client.send(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"log_inside","arguments":{"name":"Bo"}}}"#,
    );
    let log = client.recv().unwrap();
    assert_eq!(log["method"], "host.log", "{log}");
}

#[test]
fn tools_list_names_each_function_with_its_doc_and_parameters() {
    let server = serve(&[]);
    let mut client = server.line_client();
    let list = client.request(1, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("a list");
    let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo");
    assert_eq!(
        *echo,
        json!({"name": "echo", "description": "Returns its argument.", "parameters": [{"name": "value", "required": true}]})
    );
    assert!(tools.iter().any(|t| t["name"] == "call_me"));
}

#[test]
fn callbacks_and_logs_travel_on_the_calling_connection() {
    let server = serve(&[]);
    let host = server.host();
    // It speaks the Scriptling protocol, and says so: log records come to it.
    host.handshake().unwrap();
    host.on_callback(|id, _, _| Ok(Value::from(format!("answered {id}"))));
    let answer = host.call("call_me", [Value::Callback(CallbackRef::new("cb-7"))]).unwrap();
    assert_eq!(answer, Value::from("answered cb-7"));
    assert_eq!(host.call("log_inside", [Value::from("ada")]).unwrap(), Value::from("ada"));
    let logs = host.wait_for_logs(1, WAIT).expect("the record");
    assert_eq!(logs[0].message, "logged inside a call");
    // Another connection's callbacks reach that connection's host only.
    let other = server.host();
    other.on_callback(|_, _, _| Ok(Value::from("the other one")));
    assert_eq!(
        other.call("call_me", [Value::Callback(CallbackRef::new("cb-1"))]).unwrap(),
        Value::from("the other one")
    );
    assert_eq!(host.logs().len(), 1);
}

#[test]
fn objects_belong_to_their_connection_and_are_destroyed_once_when_it_closes() {
    let server = serve(&[]);
    let a = server.host();
    let b = server.host();
    let made = a.new_object("Resource", [Value::from("of-a")]).unwrap();
    assert_eq!(made.id, "1");
    let made_b = b.new_object("Resource", [Value::from("of-b")]).unwrap();
    assert_eq!(made_b.id, "1", "ids count per connection");
    // b's "1" is its own: holding it says which object answered.
    assert_eq!(a.call_method("1", "hold", [Value::Int(1)]).unwrap(), Value::Int(1));
    a.destroy("1").unwrap();
    let err = a.call_method("1", "hold", [Value::Int(1)]).unwrap_err();
    assert!(err.message().starts_with("unknown object 1"), "{err}");
    assert_eq!(b.call_method("1", "hold", [Value::Int(1)]).unwrap(), Value::Int(1), "b's object lives on");
    // Closing b's connection destroys b's object, its hook run once.
    b.close_input();
    b.wait(WAIT).unwrap();
    server.raw.wait_for_stderr("fixture: closed of-b", WAIT);
    let stderr = server.raw.stderr();
    assert_eq!(stderr.matches("fixture: closed of-a").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("fixture: closed of-b").count(), 1, "{stderr}");
}

#[test]
fn an_idle_connection_is_closed_but_not_while_a_call_runs() {
    let server = serve(&[("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", "0.3")]);
    let mut idle = server.line_client();
    assert!(idle.closed_within(Duration::from_secs(5)), "idle connection closed");
    server.raw.wait_for_stderr("closing: idle for 300ms", WAIT);
    let mut busy = server.line_client();
    let started = Instant::now();
    let answer = tool(&mut busy, 1, "sleep_ms", json!({"ms": 700}));
    assert_eq!(answer["result"]["result"], 700, "{answer}");
    assert!(started.elapsed() >= Duration::from_millis(700));
    // And idle again from the answer on.
    assert_eq!(busy.request(2, "ping", json!({}))["result"]["status"], "ok");
    assert!(busy.closed_within(Duration::from_secs(5)));
}

#[test]
fn idle_time_counts_from_the_last_answer_not_the_last_request() {
    let server = serve(&[("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", "1")]);
    let mut client = server.line_client();
    // The reading looks at the idle limit 1 s after the request, while the
    // call runs, and again 1 s later: 0.3 s after the answer.
    let answer = tool(&mut client, 1, "sleep_ms", json!({"ms": 1700}));
    assert_eq!(answer["result"]["result"], 1700, "{answer}");
    std::thread::sleep(Duration::from_millis(500));
    // Idle for 0.5 s since the answer (2.2 s since the request): still open.
    assert_eq!(client.request(2, "ping", json!({}))["result"]["status"], "ok");
}

#[test]
fn connections_over_the_limit_are_told_why_and_closed() {
    let server = serve(&[("SCRIPTLING_PLUGIN_MAX_CONNECTIONS", "2")]);
    let mut first = server.line_client();
    let mut second = server.line_client();
    assert_eq!(first.request(1, "ping", json!({}))["result"]["status"], "ok");
    assert_eq!(second.request(1, "ping", json!({}))["result"]["status"], "ok");
    let mut third = server.line_client();
    let refusal = third.recv().expect("one error line");
    assert_eq!(refusal["id"], Json::Null);
    assert!(refusal["error"]["message"].as_str().unwrap().contains("at most 2 at once"), "{refusal}");
    assert!(third.recv().is_none(), "then closed");
    // A place freed is a place taken.
    drop(first);
    server.wait_until_a_new_client_is_served("the freed place was never given");
}

#[test]
fn a_line_over_the_limit_is_answered_and_closes_only_its_connection() {
    let server = serve(&[("SCRIPTLING_PLUGIN_MAX_LINE", "1000")]);
    let mut other = server.line_client();
    let mut client = server.line_client();
    client.send(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(5000)));
    let answer = client.recv().expect("an error");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("exceeds the limit of 1000 bytes"));
    assert!(client.recv().is_none(), "closed");
    assert_eq!(other.request(1, "ping", json!({}))["result"]["status"], "ok");
}

#[test]
fn objects_per_connection_are_limited() {
    let server = serve(&[("SCRIPTLING_PLUGIN_MAX_OBJECTS", "2")]);
    let host = server.host();
    host.new_object("Resource", [Value::from("1")]).unwrap();
    host.new_object("Resource", [Value::from("2")]).unwrap();
    let err = host.new_object("Resource", [Value::from("3")]).unwrap_err();
    assert!(err.message().contains("SCRIPTLING_PLUGIN_MAX_OBJECTS"), "{err}");
    // Another connection has an allowance of its own.
    server.host().new_object("Resource", [Value::from("elsewhere")]).unwrap();
}

#[test]
fn sigterm_stops_accepting_answers_what_is_in_flight_closes_and_exits_0() {
    let mut server = serve(&[]);
    let host = server.host();
    host.new_object("Resource", [Value::from("kept")]).unwrap();
    let mut client = server.line_client();
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep_ms","arguments":{"ms":400}}}"#);
    std::thread::sleep(Duration::from_millis(100));
    let Some(status) = server.terminate() else { return };
    assert_eq!(status.code(), Some(0), "{}", server.raw.stderr());
    let answer = client.recv().expect("the call in flight is answered");
    assert_eq!(answer["result"]["result"], 400, "{answer}");
    assert!(client.recv().is_none(), "then the connection closes");
    assert!(server.raw.stderr().contains("fixture: closed kept"), "{}", server.raw.stderr());
    assert!(TcpStream::connect(server.addr).is_err(), "no longer accepting");
}

#[test]
fn two_hundred_connections_at_once_are_all_served() {
    let server = serve(&[]);
    let clients: Vec<LineClient> = (0..200).map(|_| server.line_client()).collect();
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut client)| {
            std::thread::spawn(move || {
                assert_eq!(client.request(1, "hello", json!({"name": format!("c{i}")}))["result"]["success"], true);
                tool(&mut client, 2, "echo", json!({ "value": i }))["result"]["result"].clone()
            })
        })
        .collect();
    for (i, thread) in threads.into_iter().enumerate() {
        assert_eq!(thread.join().unwrap(), json!(i));
    }
}

#[test]
#[cfg(unix)] // Unix sockets are served on Unix only.
fn a_unix_socket_serves_the_same_and_is_removed_at_the_end() {
    let dir = std::env::temp_dir().join(format!("scriptling-tcp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plugin.sock");
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    command.arg(format!("--listen=unix:{}", path.display()));
    let mut raw = common::Raw::spawn(&mut command);
    raw.wait_for_stderr("listening at unix:", WAIT);
    let host = Host::connect_unix(&path).unwrap();
    assert_eq!(host.call("echo", [Value::Int(5)]).unwrap(), Value::Int(5));
    drop(host);
    assert!(raw.stop(common::Stop::Terminate));
    assert_eq!(raw.wait(WAIT).code(), Some(0), "{}", raw.stderr());
    assert!(!path.exists(), "the socket file is removed");
    let _ = std::fs::remove_dir_all(dir);
}

/// A variable exported to try the TCP transport must not take the plugins
/// a host starts away from it: with stdin a pipe (as a host makes it) the
/// plugin serves stdio and says the variable was ignored; with stdin not a
/// pipe (a terminal, a container, a service manager) the variable applies.
#[test]
fn an_exported_listen_variable_never_takes_a_plugin_away_from_its_host() {
    let mut hosted = Command::new(scriptling_plugin::testing::example_path("hello"));
    hosted.env("SCRIPTLING_PLUGIN_LISTEN", "tcp://127.0.0.1:0");
    let host = Host::spawn(hosted).unwrap();
    host.set_timeout(WAIT);
    host.handshake().expect("served over stdio");
    host.wait_for_stderr("SCRIPTLING_PLUGIN_LISTEN=tcp://127.0.0.1:0 is ignored: stdin is a pipe", WAIT).unwrap();
    host.shutdown().unwrap();
    assert_eq!(host.wait(WAIT).unwrap().unwrap().code(), Some(0));

    let mut alone = Command::new(scriptling_plugin::testing::example_path("hello"));
    alone.env("SCRIPTLING_PLUGIN_LISTEN", "tcp://127.0.0.1:0").stdin(std::process::Stdio::null());
    let mut child = alone.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("listening at tcp://127.0.0.1:"), "{line}");
}

/// The README's Python client, run as it is against the `tcp` example (on
/// the port it got), prints what the block's closing comments say: it
/// answers the callbacks and log records that come while its call runs.
#[test]
fn the_readmes_python_client_answers_callbacks_and_log_records() {
    let readme = include_str!("../README.md");
    let after = &readme[readme.find("## Serving over TCP").expect("the section")..];
    let block = &after[after.find("```python\n").expect("a python block") + 10..];
    let script = &block[..block.find("```").expect("closed")];
    let expected: Vec<&str> = script.lines().filter_map(|l| l.strip_prefix("# ")).collect();
    let server = serve_example("tcp");
    let script = script.replace(r#"("127.0.0.1", 9876)"#, &format!(r#"("127.0.0.1", {})"#, server.addr.port()));
    let run = Command::new("python3").args(["-c", &script]).output();
    let Ok(out) = run else {
        // CI's Linux run has python3; the Windows run under Wine has none.
        if !cfg!(windows) {
            panic!("python3 is needed to run the README's client");
        }
        eprintln!("skipped: python3 cannot be started");
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn the_protocol_pages_tcp_session_gives_the_answers_it_shows() {
    let doc = include_str!("../PROTOCOL.md");
    let after = &doc[doc.find("<!-- tcp-session").expect("the marker")..];
    let block = &after[after.find("```text\n").expect("a text block") + 8..];
    let lines: Vec<&str> = block[..block.find("```").expect("closed")].lines().collect();
    let server = serve_example("tcp");
    let mut client = server.line_client();
    for line in lines {
        if let Some(sent) = line.strip_prefix("→ ") {
            client.send(sent);
        } else if let Some(expected) = line.strip_prefix("← ") {
            let mut got = String::new();
            client.reader.read_line(&mut got).unwrap();
            assert_eq!(got.trim_end(), expected);
        } else {
            panic!("a session line is sent (→) or received (←): {line}");
        }
    }
}
