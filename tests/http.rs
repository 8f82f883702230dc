//! The HTTP transport over real loopback sockets: the built `http` example
//! and the fixture plugin switched to HTTP by environment or arguments.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use scriptling_plugin::testing::example_path;
use serde_json::{Value as J, json};

/// A plugin process serving HTTP, stopped when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<(Mutex<String>, Condvar)>,
}

impl Served {
    fn start(mut command: Command) -> Served {
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening at http://").nth(1) {
                    let addr = rest.split('/').next().unwrap().to_owned();
                    let _ = tx.send(addr);
                }
                sink.0.lock().unwrap().push_str(&format!("{line}\n"));
                sink.1.notify_all();
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).expect("the plugin reports where it listens");
        Served { child, addr: addr.parse().unwrap(), stderr: log }
    }

    fn example() -> Served {
        let mut cmd = Command::new(example_path("http"));
        cmd.args(["--listen", "127.0.0.1:0"]);
        Served::start(cmd)
    }

    fn fixture(env: &[(&str, &str)]) -> Served {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
        cmd.env("SCRIPTLING_PLUGIN_LISTEN", "127.0.0.1:0");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Served::start(cmd)
    }

    /// Waits until stderr holds `needle`; returns all of stderr then.
    fn wait_for_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let (text, grew) = &*self.stderr;
        let mut text = text.lock().unwrap();
        while !text.contains(needle) {
            let left = deadline.checked_duration_since(Instant::now());
            let left = left.unwrap_or_else(|| panic!("stderr never said {needle:?}:\n{text}"));
            text = grew.wait_timeout(text, left).unwrap().0;
        }
        text.clone()
    }

    fn stderr(&self) -> String {
        self.stderr.0.lock().unwrap().clone()
    }

    /// Waits for the process to exit (at most 10 s).
    fn exit_status(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the plugin did not exit");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn post(&self, body: &str) -> (u16, J) {
        self.post_with(&[], body.as_bytes())
    }

    fn post_with(&self, headers: &[(&str, &str)], body: &[u8]) -> (u16, J) {
        let (status, _, body) = request(self.addr, "POST", "/json-rpc", headers, body);
        let json = if body.is_empty() { J::Null } else { serde_json::from_slice(&body).unwrap_or(J::Null) };
        (status, json)
    }

    fn call(&self, headers: &[(&str, &str)], name: &str, args: J) -> J {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": "function.call", "params": {"name": name, "args": args}});
        self.post_with(headers, body.to_string().as_bytes()).1
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on a fresh connection: (status, headers, body).
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    read_response(&mut stream)
}

fn read_response(stream: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

fn s(v: &str) -> J {
    json!({"type": "string", "value": v})
}

fn i(v: i64) -> J {
    json!({"type": "int", "value": v})
}

#[test]
fn the_example_serves_functions_objects_constants_and_ping() {
    let served = Served::example();
    let (status, hs) =
        served.post(r#"{"jsonrpc":"2.0","id":1,"method":"scriptling.handshake","params":{"protocol":"1.0"}}"#);
    assert_eq!(status, 200);
    assert_eq!(hs["result"]["library"]["name"], "hello_http");
    assert_eq!(hs["result"]["schema"]["constants"][0]["name"], "default_name");
    assert_eq!(served.call(&[], "greet", json!([s("Ada")]))["result"], s("Hello, Ada"));
    let (_, ping) = served.post(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    assert_eq!(ping, json!({"jsonrpc": "2.0", "id": "p", "result": {"status": "ok"}}));
    // Objects live across requests (and connections).
    let (_, created) = served.post(r#"{"jsonrpc":"2.0","id":2,"method":"object.new","params":{"class":"Counter","args":[{"type":"int","value":5}]}}"#);
    let id = created["result"]["id"].as_str().unwrap().to_owned();
    for want in [7, 9] {
        let body = json!({"jsonrpc":"2.0","id":3,"method":"object.call_method","params":{"object_id": id, "method":"inc","args":[i(2)]}});
        assert_eq!(served.post(&body.to_string()).1["result"], i(want));
    }
}

#[test]
fn status_codes_for_the_http_layer() {
    let served = Served::example();
    let (status, head, _) = request(served.addr, "GET", "/json-rpc", &[], b"");
    assert_eq!(status, 405);
    assert!(head.to_ascii_lowercase().contains("allow: post"), "{head}");
    assert_eq!(request(served.addr, "POST", "/elsewhere", &[], b"{}").0, 404);
    // Notifications only: 204, no body.
    let (status, _, body) = request(served.addr, "POST", "/json-rpc", &[], br#"{"jsonrpc":"2.0","method":"ping"}"#);
    assert_eq!((status, body.len()), (204, 0));
    let (status, _, body) = request(
        served.addr,
        "POST",
        "/json-rpc",
        &[],
        br#"[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"ping"}]"#,
    );
    assert_eq!((status, body.len()), (204, 0));
    // Malformed JSON and wrong content: -32700.
    let (status, err) = served.post("{not json");
    assert_eq!((status, err["error"]["code"].clone()), (200, json!(-32700)));
    let (_, err) = served.post_with(&[("Content-Type", "text/plain")], b"hello");
    assert_eq!(err["error"]["code"], -32700);
    assert!(err["error"]["message"].as_str().unwrap().contains("Content-Type: application/json"), "{err}");
}

#[test]
fn batches_get_one_array() {
    let served = Served::example();
    let (status, out) = served.post(concat!(
        r#"[{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"A"}]}},"#,
        r#"{"jsonrpc":"2.0","method":"ping"},"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"function.call","params":{"name":"nope"}}]"#
    ));
    assert_eq!(status, 200);
    let items = out.as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["result"], s("Hello, A"));
    assert!(items[1]["error"]["message"].as_str().unwrap().starts_with("unknown function nope"));
}

#[test]
fn bodies_over_the_limit_get_413_without_being_read_whole() {
    let served = Served::example();
    // Declared too large: refused before the body is sent at all.
    let mut stream = TcpStream::connect(served.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "POST /json-rpc HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", 64 << 20).unwrap();
    let (status, _, body) = read_response(&mut stream);
    assert_eq!(status, 413);
    let err: J = serde_json::from_slice(&body).unwrap();
    assert!(err["error"]["message"].as_str().unwrap().contains("exceeds the limit of 16777216 bytes"), "{err}");
    // Chunked, no length given: refused once it streams past the limit.
    let mut stream = TcpStream::connect(served.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(stream, "POST /json-rpc HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..17 {
        if write!(stream, "{:x}\r\n", chunk.len()).is_err()
            || stream.write_all(&chunk).is_err()
            || stream.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    assert_eq!(read_response(&mut stream).0, 413);
    // A 1 MiB body is fine.
    let big = "x".repeat(1 << 20);
    assert_eq!(
        served.call(&[], "greet", json!([s(&big)]))["result"]["value"].as_str().map(str::len),
        Some((1 << 20) + 7)
    );
}

#[test]
fn a_token_is_required_when_configured() {
    let served = Served::fixture(&[("SCRIPTLING_PLUGIN_TOKEN", "s3cret")]);
    let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for headers in [vec![], vec![("Authorization", "Bearer wrong")], vec![("Authorization", "s3cret")]] {
        let (status, err) = served.post_with(&headers, ping);
        assert_eq!(status, 401, "{headers:?}");
        assert_eq!(err["error"], json!({"code": -32001, "message": "authentication failed"}));
    }
    let (status, ok) = served.post_with(&[("Authorization", "Bearer s3cret")], ping);
    assert_eq!((status, ok["result"].clone()), (200, json!({"status": "ok"})));
}

#[test]
fn no_token_means_open_on_loopback() {
    let served = Served::fixture(&[]);
    assert_eq!(served.post(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).0, 200);
    assert!(!served.stderr().contains("warning"));
}

#[test]
fn callbacks_and_the_host_logger_need_stdio() {
    let served = Served::fixture(&[]);
    let out = served.call(&[], "call_me", json!([{"type": "callback", "callback": {"id": "cb-1"}}]));
    assert_eq!(out["error"]["message"], "callbacks need the stdio transport");
    assert_eq!(served.call(&[], "log_inside", json!([s("Ada")]))["result"], s("Ada"));
    served.wait_for_stderr("[info] logged inside a call name=\"Ada\"");
}

#[test]
fn shutdown_from_one_client_leaves_other_clients_objects_alone() {
    let served = Served::example();
    let new = r#"{"jsonrpc":"2.0","id":1,"method":"object.new","params":{"class":"Counter","args":[{"type":"int","value":1}]}}"#;
    let create = |headers: &[(&str, &str)]| {
        served.post_with(headers, new.as_bytes()).1["result"]["id"].as_str().unwrap().to_owned()
    };
    let alice = create(&[("X-Scriptling-Client", "alice")]);
    let bob = create(&[("X-Scriptling-Client", "bob")]);
    let anonymous = create(&[]);
    let inc = |client: &str, id: &str| {
        let body = json!({"jsonrpc":"2.0","id":2,"method":"object.call_method","params":{"object_id": id, "method":"inc","args":[i(1)]}});
        let headers: &[(&str, &str)] = if client.is_empty() { &[] } else { &[("X-Scriptling-Client", client)] };
        served.post_with(headers, body.to_string().as_bytes()).1
    };
    let shutdown = br#"{"jsonrpc":"2.0","id":9,"method":"plugin.shutdown"}"#;
    // Bob's shutdown releases Bob's objects only.
    let (status, out) = served.post_with(&[("X-Scriptling-Client", "bob")], shutdown);
    assert_eq!((status, out["result"].clone()), (200, J::Null));
    let gone = inc("bob", &bob);
    assert_eq!(
        gone["error"]["message"],
        format!("unknown object {bob} (it does not exist, has been destroyed, or belongs to another client)")
    );
    assert_eq!(inc("alice", &alice)["result"], i(2));
    // A shutdown without a client id releases nothing, and the server keeps serving.
    assert_eq!(served.post_with(&[], shutdown).1["result"], J::Null);
    assert_eq!(inc("alice", &alice)["result"], i(3));
    assert_eq!(inc("", &anonymous)["result"], i(2));
}

#[test]
fn fifty_concurrent_clients_lose_nothing() {
    let served = Served::example();
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..50)
            .map(|c| {
                let served = &served;
                scope.spawn(move || {
                    for k in 0..10 {
                        let name = format!("c{c}-{k}");
                        let out = served.call(&[], "greet", json!([s(&name)]));
                        assert_eq!(out["result"], s(&format!("Hello, {name}")));
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
    });
}

#[test]
fn sigterm_lets_in_flight_requests_finish_then_exits_zero() {
    let mut served = Served::fixture(&[]);
    let addr = served.addr;
    let slow = std::thread::spawn(move || {
        let body =
            json!({"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"sleep_ms","args":[i(500)]}});
        request(addr, "POST", "/json-rpc", &[], body.to_string().as_bytes())
    });
    served.wait_for_stderr("fixture: sleeping 500 ms");
    // SAFETY: sending SIGTERM to our own child process.
    unsafe {
        libc::kill(served.child.id() as i32, libc::SIGTERM);
    }
    let (status, _, body) = slow.join().unwrap();
    assert_eq!(status, 200);
    let out: J = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["result"], i(500));
    assert_eq!(served.exit_status().code(), Some(0));
}

#[test]
fn binding_beyond_loopback_without_a_token_warns() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    cmd.args(["--listen", "0.0.0.0:0"]);
    let served = Served::start(cmd);
    served.wait_for_stderr("warning: serving on 0.0.0.0");
    assert!(served.stderr().contains("without a token"), "{}", served.stderr());
}

#[test]
fn a_request_over_the_configured_timeout_gets_an_error_and_serving_continues() {
    let served = Served::fixture(&[("SCRIPTLING_PLUGIN_TIMEOUT", "0.2")]);
    let started = Instant::now();
    let out = served.call(&[], "sleep_ms", json!([i(2000)]));
    assert!(started.elapsed() < Duration::from_millis(1500), "took {:?}", started.elapsed());
    assert_eq!(out["error"]["code"], -32000);
    assert_eq!(out["error"]["message"], "function.call: the request did not finish within 200ms");
    assert_eq!(out["id"], 1, "a timed-out request keeps its id");
    assert_eq!(served.call(&[], "echo", json!([i(1)]))["result"], i(1));
}

#[test]
fn an_invalid_switch_is_a_clear_startup_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))
        .env("SCRIPTLING_PLUGIN_LISTEN", "127.0.0.1:0")
        .env("SCRIPTLING_PLUGIN_TIMEOUT", "soon")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        "Error: invalid transport configuration: SCRIPTLING_PLUGIN_TIMEOUT must be a positive number of seconds, got \"soon\""
    );
}
