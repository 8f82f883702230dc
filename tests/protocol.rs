//! The JSON-RPC layer and dispatch, driven in process through the real event
//! loop: framing, ids, batches, notifications, malformed input, argument
//! binding and error messages, payload limits and concurrency.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use scriptling_plugin::testing::Host;
use scriptling_plugin::{Json, Plugin, Value, plugin_fn};
use serde_json::{Value as J, json};

/// Returns a greeting.
///
/// The greeting defaults to "Hello".
#[plugin_fn]
fn greet(name: String, #[arg(default = "Hello")] greeting: String) -> String {
    format!("{greeting}, {name}")
}

/// Counts the items, if any.
#[plugin_fn(name = "count")]
fn count_items(items: Option<Vec<i64>>) -> usize {
    items.map_or(0, |v| v.len())
}

#[plugin_fn]
fn fail(message: String) -> Result<i64, String> {
    Err(message)
}

#[plugin_fn]
fn boom(n: i64) -> i64 {
    if n > 0 {
        panic!("exploded with {n}");
    }
    n
}

#[plugin_fn]
async fn double_later(n: i64, #[arg(default = 0)] delay_ms: u64) -> i64 {
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    n * 2
}

#[plugin_fn]
async fn async_boom() -> i64 {
    tokio::task::yield_now().await;
    panic!("async kaboom")
}

#[plugin_fn]
fn sleep_ms(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

#[plugin_fn]
fn length(text: String) -> usize {
    text.len()
}

#[plugin_fn]
fn echo(value: Value) -> Value {
    value
}

#[plugin_fn]
fn nan() -> f64 {
    f64::NAN
}

#[plugin_fn]
fn small(n: u8, #[arg(default = None)] scale: Option<f32>) -> f64 {
    f64::from(n) * f64::from(scale.unwrap_or(1.0))
}

#[plugin_fn]
fn r#type(r#in: String) -> String {
    r#in
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Point {
    x: i64,
    y: i64,
}

#[plugin_fn]
fn mirror(p: Json<Point>) -> Json<Point> {
    Json(Point { x: p.0.y, y: p.0.x })
}

#[plugin_fn]
fn pair(p: (String, i64)) -> (i64, String) {
    (p.1, p.0)
}

#[plugin_fn]
fn nothing() {}

fn plugin() -> Plugin {
    Plugin::new("proto", "1.0.0", "Protocol test plugin")
        .function::<greet>()
        .function::<count_items>()
        .function::<fail>()
        .function::<boom>()
        .function::<double_later>()
        .function::<async_boom>()
        .function::<sleep_ms>()
        .function::<length>()
        .function::<echo>()
        .function::<nan>()
        .function::<small>()
        .function::<r#type>()
        .function::<mirror>()
        .function::<pair>()
        .function::<nothing>()
        .constant("answer", 42)
        .constant("ratio", 0.5)
}

fn host() -> Host {
    Host::in_process(plugin()).expect("valid plugin")
}

const WAIT: Duration = Duration::from_secs(10);

fn frame(host: &Host) -> J {
    host.next_frame(WAIT).expect("a frame")
}

fn s(text: &str) -> Value {
    Value::from(text)
}

fn kw(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

fn call_err(host: &Host, name: &str, args: Vec<Value>, kwargs: &[(&str, Value)]) -> String {
    let err = host.call_kw(name, args, kw(kwargs)).expect_err("an error");
    assert_eq!(err.code(), Some(-32000), "{err}");
    err.message().to_owned()
}

#[test]
fn handshake_describes_the_library_in_registration_order() {
    let host = host();
    let hs = host.handshake().unwrap();
    assert_eq!(hs["protocol"], "1.0");
    assert_eq!(hs["transport"], "json");
    assert_eq!(hs["library"], json!({"name": "proto", "version": "1.0.0", "description": "Protocol test plugin"}));
    assert_eq!(hs["capabilities"], json!(["remote_objects"]));
    let names: Vec<&str> =
        hs["schema"]["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "greet",
            "count",
            "fail",
            "boom",
            "double_later",
            "async_boom",
            "sleep_ms",
            "length",
            "echo",
            "nan",
            "small",
            "type",
            "mirror",
            "pair",
            "nothing"
        ]
    );
    // Help text: the Scriptling signature (with defaults), then the doc comment.
    assert_eq!(
        hs["schema"]["functions"][0]["description"],
        "greet(name, greeting=\"Hello\")\n\nReturns a greeting.\n\nThe greeting defaults to \"Hello\"."
    );
    assert_eq!(hs["schema"]["functions"][1]["description"], "count(items)\n\nCounts the items, if any.");
    assert_eq!(hs["schema"]["functions"][2]["description"], "fail(message)");
    assert_eq!(hs["schema"]["functions"][10]["description"], "small(n, scale=None)");
    // No source anywhere: the host builds a native proxy (no script mode).
    assert!(hs["schema"]["functions"].as_array().unwrap().iter().all(|f| f.get("source").is_none()));
    assert_eq!(
        hs["schema"]["constants"],
        json!([{"name": "answer", "value": {"type": "int", "value": 42}}, {"name": "ratio", "value": {"type": "float", "value": 0.5}}])
    );
    // Identical on every handshake.
    assert_eq!(host.handshake().unwrap(), hs);
}

#[test]
fn handshake_tolerates_unknown_and_missing_params() {
    let host = host();
    let with_policy = host
        .request(
            "scriptling.handshake",
            json!({"protocol": "1.0", "host": "scriptling", "policy": {"fs": "deny"}, "future": [1, 2]}),
        )
        .unwrap();
    assert_eq!(with_policy["protocol"], "1.0");
    assert_eq!(host.request("scriptling.handshake", J::Null).unwrap()["protocol"], "1.0");
}

#[test]
fn ids_are_echoed_verbatim() {
    let host = host();
    for id in ["0", "\"abc\"", "-5", "1.5e3", "18446744073709551616", "null"] {
        host.send_raw(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)).unwrap();
        let f = frame(&host);
        assert_eq!(f["id"].to_string(), serde_json::from_str::<J>(id).unwrap().to_string(), "{id}");
        assert_eq!(f["result"], json!({"status": "ok"}));
    }
    // Byte for byte, too: a fractional id is not reformatted.
    host.send_raw(r#"{"jsonrpc":"2.0","id":1.50,"method":"environment.open"}"#).unwrap();
    let f = frame(&host);
    assert_eq!(f["id"], json!(1.5));
    assert_eq!(f["result"], J::Null);
}

#[test]
fn notifications_get_no_response() {
    let host = host();
    host.send_raw(r#"{"jsonrpc":"2.0","method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"x"}]}}"#)
        .unwrap();
    host.send_raw(r#"{"jsonrpc":"2.0","method":"no.such.method"}"#).unwrap();
    host.send_raw(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#).unwrap();
    assert_eq!(frame(&host)["id"], 9);
    assert_eq!(host.next_frame(Duration::from_millis(200)), None);
}

#[test]
fn batches_get_one_array_without_notifications() {
    let host = host();
    host.send_raw(concat!(
        r#"[{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"double_later","args":[{"type":"int","value":4}],"kwargs":{"delay_ms":{"type":"int","value":50}}}},"#,
        r#"{"jsonrpc":"2.0","method":"ping"},"#,
        r#"{"jsonrpc":"2.0","id":"two","method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"Ada"}]}},"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"function.call","params":{"name":"nope"}},"#,
        r#"7]"#
    ))
    .unwrap();
    let f = frame(&host);
    let items = f.as_array().expect("one array");
    assert_eq!(items.len(), 4);
    assert_eq!(items[0], json!({"jsonrpc": "2.0", "id": 1, "result": {"type": "int", "value": 8}}));
    assert_eq!(items[1]["id"], "two");
    assert_eq!(items[1]["result"]["value"], "Hello, Ada");
    assert_eq!(
        items[2]["error"]["message"],
        "unknown function nope (available: async_boom, boom, count, double_later, echo, fail, greet, length, mirror, nan, nothing, pair, sleep_ms, small, type)"
    );
    assert_eq!(items[3]["id"], J::Null);
    assert_eq!(items[3]["error"]["code"], -32600);

    // All notifications: nothing at all is written.
    host.send_raw(r#"[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"ping"}]"#).unwrap();
    host.send_raw(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#).unwrap();
    assert_eq!(frame(&host)["id"], "after");
}

#[test]
fn malformed_input_is_answered_and_serving_continues() {
    let host = host();
    let cases: Vec<(&[u8], i64)> = vec![
        (b"{this is not json", -32700),
        (b"[{\"id\":1,", -32700),
        (b"{\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}", -32700),
        (b"[]", -32600),
        (b"42", -32600),
        (b"\"text\"", -32600),
        (b"{}", -32600),
        (b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":[1]}", -32600),
    ];
    for (line, code) in cases {
        host.send_raw(line).unwrap();
        let f = frame(&host);
        assert_eq!(f["error"]["code"], code, "{}: {f}", String::from_utf8_lossy(line));
        assert!(f["error"]["message"].as_str().unwrap().len() > 10, "{f}");
    }
    // The id is kept when it can be read from a request.
    host.send_raw(br#"{"jsonrpc":"2.0","id":7,"method":5}"#).unwrap();
    assert_eq!(frame(&host)["id"], 7);
    // Blank lines are skipped and a trailing CR is tolerated.
    host.send_raw(b"\n   \r\n{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}\r").unwrap();
    assert_eq!(frame(&host)["id"], 11);
    assert_eq!(host.call("greet", [s("Ada")]).unwrap(), s("Hello, Ada"));
}

#[test]
fn shapes_json_rpc_forbids_are_invalid_requests_with_a_null_id() {
    let host = host();
    let deep_id = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep = format!(r#"{{"jsonrpc":"2.0","id":{deep_id},"method":"ping"}}"#);
    let lines = [
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
        r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#,
        r#"{"id":6,"method":"ping"}"#,
        r#"{"jsonrpc":2,"id":7,"method":"ping"}"#,
        &deep,
    ];
    for line in lines {
        host.send_raw(line).unwrap();
        let f = frame(&host);
        assert_eq!((f["error"]["code"].as_i64(), &f["id"]), (Some(-32600), &J::Null), "{:.80}: {f}", line);
    }
    let f = host.request("ping", J::Null).unwrap();
    assert_eq!(f, json!({"status": "ok"}));
}

#[test]
fn a_message_that_is_not_a_request_is_never_answered() {
    let host = host();
    for line in [
        r#"{"jsonrpc":"2.0","id":5}"#,
        r#"{"jsonrpc":"2.0","id":6,"result":{"type":"null"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","id":8,"result":1,"error":{"code":1,"message":"both"}}"#,
        r#"{"jsonrpc":"2.0","id":9,"id":10,"result":1}"#,
    ] {
        host.send_raw(line).unwrap();
    }
    host.send_raw(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#).unwrap();
    assert_eq!(frame(&host)["id"], "after", "nothing answered the answers");
}

#[test]
fn unknown_methods_and_bad_params() {
    let host = host();
    let err = host.request("no.such", J::Null).unwrap_err();
    assert_eq!((err.code(), err.message()), (Some(-32601), "method not found: no.such"));
    let err = host.request("function.call", J::Null).unwrap_err();
    assert_eq!((err.code(), err.message()), (Some(-32602), "function.call: missing params"));
    let err = host.request("function.call", json!({"name": "greet", "args": "Ada"})).unwrap_err();
    assert_eq!(err.code(), Some(-32602));
    assert!(
        err.message().starts_with("function.call: invalid params: invalid type: string \"Ada\", expected a sequence"),
        "{err}"
    );
    let err =
        host.request("function.call", json!({"name": "greet", "args": [{"type": "bool", "value": 1}]})).unwrap_err();
    assert!(err.message().contains("invalid bool value: expected true or false, got a number"), "{err}");
    assert_eq!(host.request("environment.open", J::Null).unwrap(), J::Null);
    assert_eq!(host.request("environment.close", J::Null).unwrap(), J::Null);
    // params: null and absent args/kwargs are fine.
    assert_eq!(
        host.request("function.call", json!({"name": "nothing", "args": null, "kwargs": null})).unwrap(),
        json!({"type": "null"})
    );
}

#[test]
fn arguments_bind_positionally_and_by_keyword() {
    let host = host();
    assert_eq!(host.call("greet", [s("Ada")]).unwrap(), s("Hello, Ada"));
    assert_eq!(host.call("greet", [s("Ada"), s("Hi")]).unwrap(), s("Hi, Ada"));
    assert_eq!(host.call_kw("greet", [], kw(&[("greeting", s("Yo")), ("name", s("Bob"))])).unwrap(), s("Yo, Bob"));
    assert_eq!(host.call_kw("greet", [s("Cy")], kw(&[("greeting", s("Hey"))])).unwrap(), s("Hey, Cy"));
    // Option<T> accepts None but is still required without a default.
    assert_eq!(host.call("count", [Value::Null]).unwrap(), Value::Int(0));
    assert_eq!(host.call("count", [Value::List(vec![1.into(), 2.into()])]).unwrap(), Value::Int(2));
    assert_eq!(call_err(&host, "count", vec![], &[]), "count(): missing required argument 'items'");
    // A default of None.
    assert_eq!(host.call("small", [Value::Int(3)]).unwrap(), Value::Float(3.0));
    assert_eq!(host.call_kw("small", [Value::Int(3)], kw(&[("scale", Value::Float(0.5))])).unwrap(), Value::Float(1.5));
    // Raw identifiers are exported without `r#`.
    assert_eq!(host.call_kw("type", [], kw(&[("in", s("x"))])).unwrap(), s("x"));
}

#[test]
fn argument_errors_name_function_parameter_and_expectation() {
    let host = host();
    type Case<'a> = (&'a str, Vec<Value>, Vec<(&'a str, Value)>, &'a str);
    let cases: Vec<Case> = vec![
        ("greet", vec![Value::Int(1)], vec![], "greet(): argument 'name' must be a string, got int"),
        ("greet", vec![], vec![], "greet(): missing required argument 'name'"),
        (
            "greet",
            vec![s("a"), s("b"), s("c")],
            vec![],
            "greet(): expected at most 2 arguments (name, greeting), got 3",
        ),
        (
            "greet",
            vec![s("a")],
            vec![("nme", s("x"))],
            "greet(): unexpected keyword argument 'nme' (parameters: name, greeting)",
        ),
        (
            "greet",
            vec![s("a")],
            vec![("name", s("b"))],
            "greet(): argument 'name' given twice (positionally and by keyword)",
        ),
        ("greet", vec![s("a"), Value::Null], vec![], "greet(): argument 'greeting' must be a string, got None"),
        ("nothing", vec![Value::Int(1)], vec![], "nothing(): takes no arguments, got 1"),
        (
            "count",
            vec![Value::List(vec![1.into(), s("x")])],
            vec![],
            "count(): argument 'items'[1] must be an int, got string",
        ),
        ("small", vec![Value::Int(256)], vec![], "small(): argument 'n' must be an int between 0 and 255, got 256"),
        ("small", vec![Value::Float(1.0)], vec![], "small(): argument 'n' must be an int, got float"),
        ("small", vec![Value::Int(1), s("x")], vec![], "small(): argument 'scale' must be a float, got string"),
        (
            "pair",
            vec![Value::List(vec![s("a")])],
            vec![],
            "pair(): argument 'p' must be a list of 2 items, got a list of 1",
        ),
        (
            "mirror",
            vec![Value::Dict(BTreeMap::new())],
            vec![],
            "mirror(): argument 'p' is not a valid Point: missing field `x`",
        ),
    ];
    for (name, args, kwargs, want) in cases {
        assert_eq!(call_err(&host, name, args, &kwargs), want);
    }
}

#[test]
fn results_errors_and_panics() {
    let host = host();
    // A handler's own error is named like the SDK's (issue 29, item 10).
    assert_eq!(call_err(&host, "fail", vec![s("disk full")], &[]), "fail(): disk full");
    assert_eq!(call_err(&host, "boom", vec![Value::Int(3)], &[]), "boom(): panicked: exploded with 3");
    assert_eq!(host.call("boom", [Value::Int(0)]).unwrap(), Value::Int(0), "still serving after a panic");
    assert_eq!(call_err(&host, "async_boom", vec![], &[]), "async_boom(): panicked: async kaboom");
    assert_eq!(
        call_err(&host, "nan", vec![], &[]),
        "nan(): cannot send the result: cannot send the float NaN: JSON has no NaN or Infinity"
    );
    assert_eq!(host.call("double_later", [Value::Int(21)]).unwrap(), Value::Int(42));
    assert_eq!(host.call("nothing", []).unwrap(), Value::Null);
    let point: Value = [("x", Value::Int(1)), ("y", Value::Int(2))].into_iter().collect();
    assert_eq!(host.call("mirror", [point]).unwrap().to_string(), r#"{"x": 2, "y": 1}"#);
    assert_eq!(host.call("pair", [Value::List(vec![s("a"), 1.into()])]).unwrap().to_string(), r#"[1, "a"]"#);
}

#[test]
fn a_16_mib_string_round_trips() {
    let host = host();
    let big = "é".repeat(8 * 1024 * 1024);
    assert_eq!(big.len(), 16 * 1024 * 1024);
    assert_eq!(host.call("length", [s(&big)]).unwrap(), Value::Int(16 * 1024 * 1024));
    let back = host.call("echo", [s(&big)]).unwrap();
    assert_eq!(back.as_str().map(str::len), Some(big.len()));
    assert!(back.as_str() == Some(big.as_str()));
}

fn nested_json(depth: usize) -> String {
    let mut nested = String::new();
    for _ in 0..depth - 1 {
        nested.push_str(r#"{"type":"list","items":["#);
    }
    nested.push_str(r#"{"type":"int","value":1}"#);
    for _ in 0..depth - 1 {
        nested.push_str("]}");
    }
    nested
}

#[test]
fn a_thousand_levels_of_nesting_round_trip_and_deeper_is_a_clear_error() {
    let host = host();
    // Values nested 63 levels and more used to hit serde_json's recursion limit.
    let mut v = Value::Int(1);
    for _ in 1..1000 {
        v = Value::List(vec![v]);
    }
    assert_eq!(host.call("echo", [v.clone()]).unwrap(), v);
    for depth in [1001, 100_000] {
        host.send_raw(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"function.call","params":{{"name":"echo","args":[{}]}}}}"#,
            nested_json(depth)
        ))
        .unwrap();
        let f = frame(&host);
        assert_eq!(f["error"]["code"], -32602, "{depth}");
        let message = f["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("function.call: invalid params: values are nested more than 1000 levels deep"),
            "{message}"
        );
    }
    // Serving goes on.
    assert_eq!(host.call("echo", [Value::Int(7)]).unwrap(), Value::Int(7));
}

#[test]
fn oversized_lines_are_refused_without_stopping() {
    let host = Host::in_process(plugin().max_frame_bytes(1024)).unwrap();
    let big = "x".repeat(4096);
    host.send_raw(format!(r#"{{"jsonrpc":"2.0","id":1,"method":"function.call","params":{{"name":"length","args":[{{"type":"string","value":"{big}"}}]}}}}"#))
        .unwrap();
    let f = frame(&host);
    assert_eq!(f["id"], J::Null);
    assert_eq!(f["error"]["code"], -32600);
    assert!(f["error"]["message"].as_str().unwrap().contains("exceeds the limit of 1024 bytes"), "{f}");
    assert_eq!(host.call("length", [s("ok")]).unwrap(), Value::Int(2));
}

#[test]
fn five_hundred_pipelined_calls_are_each_answered_once() {
    let host = host();
    let mut batch = String::new();
    for i in 0..500u32 {
        let method = if i.is_multiple_of(2) { "double_later" } else { "length" };
        let arg = if i.is_multiple_of(2) {
            format!(r#"{{"type":"int","value":{i}}}"#)
        } else {
            r#"{"type":"string","value":"abc"}"#.to_owned()
        };
        batch.push_str(&format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"function.call","params":{{"name":"{method}","args":[{arg}]}}}}"#
        ));
        batch.push('\n');
    }
    host.send_raw(batch.trim_end()).unwrap();
    let mut seen = vec![0u32; 500];
    for _ in 0..500 {
        let f = frame(&host);
        let id = f["id"].as_u64().unwrap() as usize;
        seen[id] += 1;
        let want = if id.is_multiple_of(2) { json!(id * 2) } else { json!(3) };
        assert_eq!(f["result"]["value"], want, "{f}");
    }
    assert!(seen.iter().all(|&n| n == 1));
    assert_eq!(host.next_frame(Duration::from_millis(200)), None, "no extra frames");
}

#[test]
fn a_slow_call_does_not_delay_others() {
    let host = host();
    host.send_raw(r#"{"jsonrpc":"2.0","id":"slow","method":"function.call","params":{"name":"sleep_ms","args":[{"type":"int","value":1500}]}}"#)
        .unwrap();
    host.send_raw(r#"{"jsonrpc":"2.0","id":"slow-async","method":"function.call","params":{"name":"double_later","args":[{"type":"int","value":1},{"type":"int","value":1500}]}}"#)
        .unwrap();
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(host.call("greet", [s("x")]).unwrap(), s("Hello, x"));
    }
    assert!(started.elapsed() < Duration::from_millis(1000), "quick calls waited: {:?}", started.elapsed());
    let ids: Vec<J> = (0..2).map(|_| frame(&host)["id"].clone()).collect();
    assert!(ids.contains(&json!("slow")) && ids.contains(&json!("slow-async")));
}

#[test]
fn shutdown_answers_then_stops_serving() {
    let host = host();
    // Lines are read in order: the call is running when the shutdown is read.
    host.send_raw(r#"{"jsonrpc":"2.0","id":"late","method":"function.call","params":{"name":"sleep_ms","args":[{"type":"int","value":300}]}}"#)
        .unwrap();
    host.shutdown().unwrap();
    // The in-flight call was answered before the shutdown.
    let f = host.next_frame(Duration::ZERO).expect("answered before the shutdown");
    assert_eq!((f["id"].clone(), f["result"]["value"].clone()), (json!("late"), json!(300)));
    host.wait(WAIT).expect("serving ended without stdin closing");
}

#[test]
fn registration_problems_are_reported_before_serving() {
    let err = Host::in_process(Plugin::new("bad", "1", "").function::<greet>().function::<greet>().constant("1x", 1))
        .err()
        .expect("invalid");
    assert_eq!(
        err.to_string(),
        "invalid plugin definition: function name \"greet\" is already used by a function; constant name \"1x\" is not a valid Scriptling identifier"
    );
}
