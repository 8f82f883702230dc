//! A server facing a network: no single client, with the token or
//! without, can deny service to the others or hold the server's memory.
//! Each test plays one such client against the fixture plugin served over
//! TCP (or a Unix socket): one that never reads its answers, one that
//! dribbles a line, one that guesses the token, one that never answers its
//! callbacks, many that come and go, a second server on a live socket, a
//! signal while a call waits on a callback, a process out of descriptors.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use scriptling_plugin::Value;
use serde_json::json;

mod common;

use common::call_line;
use common::tcp::{WAIT, serve};

/// A callback argument as the wire carries it.
const CALLBACK: &str = r#"{"type":"callback","callback":{"id":"cb"}}"#;

/// The resident memory of process `pid` in KiB (Linux; `None` elsewhere).
fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Sends 8 KB `echo` calls without ever reading an answer, until the
/// server stops reading (a write makes no progress for half a second).
fn flood_without_reading(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"value": "x".repeat(8000)}}});
    let line = format!("{call}\n");
    let mut sent = 0usize;
    while (&stream).write_all(line.as_bytes()).is_ok() {
        sent += line.len();
        assert!(sent < 1 << 30, "the server read 1 GiB of calls whose answers nobody reads");
    }
    stream
}

/// Whether the server ends the connection within [`WAIT`] (what it had
/// sent is read and thrown away).
fn ended_by_server(mut stream: &TcpStream) -> bool {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut chunk = vec![0; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => return !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    }
}

#[test]
fn a_client_that_never_reads_is_paused_at_a_small_queue_and_then_closed() {
    let server = serve(&[("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", "2"), ("FIXTURE_GRACE_MS", "300")]);
    let pid = server.raw.child.id();
    assert_eq!(server.line_client().request(1, "ping", json!({}))["result"]["status"], "ok");
    let before = resident_kib(pid);
    let hogs: Vec<TcpStream> = (0..2).map(|_| flood_without_reading(server.addr)).collect();
    if let (Some(before), Some(after)) = (before, resident_kib(pid)) {
        // Each holds at most the default 4 MiB of answers, plus what its
        // socket and the calls under way hold (without the bound: ~100 MiB).
        assert!(after.saturating_sub(before) < 32 * 1024, "RSS {before} KiB -> {after} KiB");
    }
    // Meanwhile others are served.
    assert_eq!(server.line_client().request(1, "ping", json!({}))["result"]["status"], "ok");
    for hog in &hogs {
        assert!(ended_by_server(hog), "a client that reads none of its answers is closed");
    }
    server.raw.wait_for_stderr("closing: it read none of its answers for 2s", WAIT);
}

#[test]
fn a_line_dribbled_byte_by_byte_is_cut_off_and_its_place_comes_back() {
    let server = serve(&[
        ("SCRIPTLING_PLUGIN_MAX_CONNECTIONS", "3"),
        ("SCRIPTLING_PLUGIN_IDLE_TIMEOUT", "3"),
        ("SCRIPTLING_PLUGIN_LINE_TIMEOUT", "1"),
    ]);
    let addr = server.addr;
    let dribblers: Vec<_> = (0..3)
        .map(|_| {
            let mut stream = TcpStream::connect(addr).unwrap();
            std::thread::spawn(move || {
                let text = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"#;
                let started = Instant::now();
                for byte in text.iter().cycle() {
                    // Each byte resets the idle limit; only the line's deadline ends this.
                    if stream.write_all(&[*byte]).is_err() {
                        return Some(started.elapsed());
                    }
                    if started.elapsed() > WAIT {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                unreachable!("the text cycles for ever")
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    server.wait_until_a_new_client_is_served("the dribblers kept every place");
    for dribbler in dribblers {
        let took = dribbler.join().unwrap().expect("the dribbler is cut off");
        assert!(took < Duration::from_secs(6), "cut off after {took:?}");
    }
    server.raw.wait_for_stderr("closing: a request line begun 1s ago is still not finished", WAIT);
}

#[test]
fn a_wrong_token_is_answered_once_and_its_connection_closed() {
    let server = serve(&[("SCRIPTLING_PLUGIN_TOKEN", "s3cret")]);
    let mut guesser = server.line_client();
    let guesses: String = (1..=20_000)
        .map(|i| {
            format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": i, "method": "hello", "params": {"token": format!("guess{i}")}})
            )
        })
        .collect();
    let writer = guesser.writer.try_clone().unwrap();
    // The server stops reading after the first: the rest may never be taken.
    std::thread::spawn(move || {
        let _ = (&writer).write_all(guesses.as_bytes());
    });
    let answer = guesser.recv().expect("the first guess is answered");
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (json!(1), json!(-32001)), "{answer}");
    assert!(guesser.recv().is_none(), "then the connection is closed: one guess per connection");
    server.raw.wait_for_stderr("closing: hello presented a wrong token", WAIT);

    // A wrong hello after a right one fails, and closes, like any other.
    let mut client = server.line_client();
    assert_eq!(client.request(1, "hello", json!({"token": "s3cret"}))["result"]["success"], true);
    let answer = client.request(2, "hello", json!({"token": "wrong"}));
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    assert!(client.recv().is_none(), "closed");
}

#[test]
fn a_client_that_never_answers_its_callbacks_cannot_take_the_pool() {
    let server = serve(&[("FIXTURE_MAX_SYNC_THREADS", "8"), ("SCRIPTLING_PLUGIN_MAX_WAITING_CALLS", "4")]);
    let mut hog = server.line_client();
    for id in 1..=12 {
        hog.send(&call_line(id, "call_me", CALLBACK));
    }
    let (mut callbacks, mut refused) = (0, 0);
    while callbacks + refused < 12 {
        let message = hog.recv().expect("a callback or an answer");
        if message["method"] == "callback.call" {
            callbacks += 1;
            continue;
        }
        let error = message["error"]["message"].as_str().unwrap_or_else(|| panic!("{message}"));
        assert!(
            error.starts_with(
                "call_me(): cb not called: this connection has 4 calls waiting for it to answer callbacks"
            ),
            "{error}"
        );
        assert!(error.contains("SCRIPTLING_PLUGIN_MAX_WAITING_CALLS"), "{error}");
        refused += 1;
    }
    assert_eq!((callbacks, refused), (4, 8));
    // Every other connection is served as before.
    let other = server.host();
    assert_eq!(other.call("echo", [Value::Int(1)]).unwrap(), Value::Int(1));
    assert_eq!(other.call("sleep_ms", [Value::Int(1)]).unwrap(), Value::Int(1));
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn memory_comes_back_once_connections_close() {
    let server = serve(&[]);
    let pid = server.raw.child.id();
    let start = resident_kib(pid).unwrap();
    for _ in 0..3 {
        let clients: Vec<_> = (0..100)
            .map(|i| {
                let host = server.host();
                std::thread::spawn(move || {
                    for n in 0..100 {
                        host.new_object("Resource", [Value::from(format!("{i}-{n}"))]).unwrap();
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
    }
    // The connections end (and their objects are destroyed) on their own threads.
    let deadline = Instant::now() + WAIT;
    let mut now = resident_kib(pid).unwrap();
    while now > start + 6 * 1024 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        now = resident_kib(pid).unwrap();
    }
    assert!(now <= start + 6 * 1024, "RSS {start} KiB at the start, {now} KiB once 300 connections closed");
}

#[test]
#[cfg(unix)] // Unix sockets are served on Unix only.
fn a_live_unix_socket_is_never_taken_over_and_a_server_removes_only_its_own() {
    use common::Raw;
    use scriptling_plugin::testing::Host;

    let dir = std::env::temp_dir().join(format!("scriptling-tcp-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plugin.sock");
    let start = |path: &std::path::Path| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
        command.arg(format!("--listen=unix:{}", path.display()));
        Raw::spawn(&mut command)
    };
    let mut first = start(&path);
    first.wait_for_stderr("listening at unix:", WAIT);
    let mut second = start(&path);
    let status = second.wait(WAIT);
    assert!(!status.success(), "the second server refuses the live socket");
    assert!(second.stderr().contains("address in use"), "{}", second.stderr());
    let echo = |path: &std::path::Path| Host::connect_unix(path).unwrap().call("echo", [Value::Int(3)]).unwrap();
    assert_eq!(echo(&path), Value::Int(3), "the first still serves");

    // The first's file replaced by another server's: the first, ending,
    // leaves the other's socket alone.
    std::fs::remove_file(&path).unwrap();
    let mut third = start(&path);
    third.wait_for_stderr("listening at unix:", WAIT);
    assert!(first.stop(common::Stop::Terminate));
    assert_eq!(first.wait(WAIT).code(), Some(0));
    assert_eq!(echo(&path), Value::Int(3), "the third's socket is still there");

    // A socket file nobody listens on (its server killed) is stale: replaced.
    third.child.kill().unwrap();
    third.wait(WAIT);
    assert!(path.exists());
    let fourth = start(&path);
    fourth.wait_for_stderr("listening at unix:", WAIT);
    assert_eq!(echo(&path), Value::Int(3));
    drop(fourth);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigterm_answers_calls_waiting_on_a_callback_before_closing() {
    let mut server = serve(&[("FIXTURE_GRACE_MS", "300")]);
    let mut client = server.line_client();
    client.send(&call_line(1, "call_me", CALLBACK));
    assert_eq!(client.recv().expect("the callback")["method"], "callback.call");
    let Some(status) = server.terminate() else { return };
    assert_eq!(status.code(), Some(0), "{}", server.raw.stderr());
    let answer = client.recv().expect("the call is answered");
    assert_eq!(answer["id"], 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("call_me(): cb failed: the plugin is shutting down"), "{answer}");
    assert!(client.recv().is_none(), "then closed");
}

#[test]
fn a_lone_surrogate_and_the_object_limit_are_named() {
    let server = serve(&[("SCRIPTLING_PLUGIN_MAX_OBJECTS", "1")]);
    let mut client = server.line_client();
    client.send(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"value":"a\ud800b"}}}"#,
    );
    let answer = client.recv().unwrap();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(r"half of a UTF-16 surrogate pair (\ud800-\udfff) without its other half"), "{answer}");
    client.send(&call_line(2, "echo", r#"{"type":"string","value":"\udc00"}"#));
    let answer = client.recv().unwrap();
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("surrogate pair"), "{answer}");

    let host = server.host();
    host.new_object("Resource", [Value::from("1")]).unwrap();
    let err = host.new_object("Resource", [Value::from("2")]).unwrap_err();
    assert!(
        err.message().starts_with("Resource(): this connection's object limit is reached: it has 1 objects alive"),
        "{err}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn a_connection_refused_for_want_of_descriptors_is_told_why() {
    let script = r#"ulimit -n 40 && exec "$0" --listen tcp://127.0.0.1:0"#;
    let mut command = std::process::Command::new("sh");
    command.args(["-c", script, env!("CARGO_BIN_EXE_fixture-plugin")]);
    let server: common::tcp::Server = common::tcp::serve_command(command);
    let mut served = Vec::new();
    for _ in 0..40 {
        let mut client = server.line_client();
        client.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let answer = client.recv().expect("an answer or a refusal, never silence");
        if answer["result"]["status"] == "ok" {
            served.push(client);
            continue;
        }
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("out of file descriptors"), "{answer}");
        assert!(client.recv().is_none(), "then closed");
        assert!(served.len() >= 2, "only {} served", served.len());
        // A place freed is a place taken.
        served.clear();
        return server.wait_until_a_new_client_is_served("descriptors never came back");
    }
    panic!("40 connections were served on 40 descriptors");
}

/// The queue bound never keeps the reader from the host's answers: a call
/// under way that waits on a callback gets it, however small the bound.
#[test]
fn a_call_waiting_on_a_callback_is_answered_whatever_the_queue_bound() {
    let server = serve(&[("SCRIPTLING_PLUGIN_MAX_QUEUE", "50"), ("FIXTURE_CALLBACK_TIMEOUT_MS", "3000")]);
    let mut client = server.line_client();
    client.send(&call_line(1, "call_me", CALLBACK));
    let request = client.recv().expect("the callback");
    assert_eq!(request["method"], "callback.call", "{request}");
    client.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"type": "int", "value": 7}}).to_string());
    let answer = client.recv().expect("the answer");
    assert_eq!(answer["result"], json!({"type": "int", "value": 7}), "{answer}");
}

/// A batch of hellos is one guess: after a wrong one, none is checked.
#[test]
fn a_batch_of_hellos_is_one_guess() {
    let server = serve(&[("SCRIPTLING_PLUGIN_TOKEN", "s3cret")]);
    let mut client = server.line_client();
    client.send(
        &json!([
            {"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"token": "wrong"}},
            {"jsonrpc": "2.0", "id": 2, "method": "hello", "params": {"token": "s3cret"}},
        ])
        .to_string(),
    );
    let answers = client.recv().expect("the batch's answers");
    let codes: Vec<_> = answers.as_array().unwrap().iter().map(|a| a["error"]["code"].clone()).collect();
    assert_eq!(codes, [json!(-32001), json!(-32001)], "{answers}");
    assert!(client.recv().is_none(), "closed");
}

/// Time the reader is held back (the queue is full) does not count
/// against the line that arrived meanwhile.
#[test]
fn a_line_is_not_timed_while_the_reader_is_held_back() {
    let server = serve(&[("SCRIPTLING_PLUGIN_MAX_QUEUE", "50"), ("SCRIPTLING_PLUGIN_LINE_TIMEOUT", "1")]);
    let mut client = server.line_client();
    let slow = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "sleep_ms", "arguments": {"ms": 1500}}});
    let next = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let (head, tail) = next.split_at(10);
    // The slow call fills the bound; half of the next line comes with it.
    client.writer.write_all(format!("{slow}\n{head}").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    client.send(tail);
    assert_eq!(client.recv().expect("the slow call's answer")["id"], 1);
    assert_eq!(client.recv().expect("the ping's answer")["result"]["status"], "ok");
}
