//! A protocol fuzzer: fixed seeds, bounded, a few seconds. It feeds the
//! hello example a mix of mutated requests, garbage lines, batches, stray
//! responses and notifications, then checks the invariants that must hold
//! whatever the input:
//!
//! - the plugin never dies or hangs: it answers a final ping and exits 0
//!   at EOF;
//! - every request carrying an id is answered exactly once, with that id
//!   echoed byte for byte, and nothing answers an id nobody sent (a line
//!   without `method` is an answer to one of the plugin's requests, and is
//!   never answered itself);
//! - stdout carries only JSON lines.
//!
//! The coverage-guided fuzz targets for the codec and the envelope are in
//! `fuzz/` (cargo fuzz, nightly).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use scriptling_plugin::testing::example_path;
use serde_json::value::RawValue;
use serde_json::{Map, Value as J, json};

mod common;

/// xorshift64*: reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Wire values, valid and not: every tag, wrong payloads, odd numbers,
/// escapes, nesting.
fn value(rng: &mut Rng, depth: usize) -> J {
    let tags = ["null", "bool", "int", "float", "string", "list", "dict", "callback", "remote", "Int", "set", ""];
    let payloads = [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(9_223_372_036_854_775_807_i64),
        json!(1.5),
        json!(""),
        json!("x"),
        json!("\u{0}\u{2028}é😀"),
        json!([]),
        json!({}),
        json!({"id": "cb-1"}),
        json!({"library": "plugin.hello", "class": "Counter", "id": "1"}),
    ];
    let mut object = Map::new();
    if rng.chance(95) {
        object.insert("type".into(), json!(rng.pick(&tags)));
    }
    match rng.below(4) {
        0 if depth < 4 => {
            let items: Vec<J> = (0..rng.below(4)).map(|_| value(rng, depth + 1)).collect();
            object.insert("items".into(), J::Array(items));
        }
        1 if depth < 4 => {
            let entries: Map<String, J> = (0..rng.below(3)).map(|i| (format!("k{i}"), value(rng, depth + 1))).collect();
            object.insert("entries".into(), J::Object(entries));
        }
        _ => {
            object.insert("value".into(), rng.pick(&payloads).clone());
        }
    }
    if rng.chance(5) {
        object.insert("callback".into(), json!({"id": "cb-9"}));
    }
    J::Object(object)
}

/// Params for `method`, right or wrong.
fn params(rng: &mut Rng, method: &str) -> Option<J> {
    if rng.chance(5) {
        return Some(rng.pick(&[json!(null), json!([1, 2]), json!("params"), json!(7)]).clone());
    }
    let mut p = Map::new();
    let names = ["greet", "label", "nope", "", "Counter", "Config"];
    match method {
        "function.call" => {
            p.insert("name".into(), json!(rng.pick(&names)));
        }
        "object.new" => {
            p.insert("class".into(), json!(rng.pick(&names)));
        }
        "object.call_method" | "object.destroy" => {
            let ids = ["1", "2", "3", "+1", "0001", "999", "", "x"];
            p.insert("object_id".into(), json!(rng.pick(&ids)));
            p.insert("method".into(), json!(rng.pick(&["inc", "get", "nope", "value"])));
        }
        _ => {}
    }
    if rng.chance(70) {
        let args: Vec<J> = (0..rng.below(3)).map(|_| value(rng, 0)).collect();
        p.insert("args".into(), J::Array(args));
    }
    if rng.chance(20) {
        p.insert("kwargs".into(), json!({"name": value(rng, 0), "start": value(rng, 0)}));
    }
    if rng.chance(5) {
        p.remove(&rng.pick(&["name", "class", "object_id", "method"]).to_string());
    }
    Some(J::Object(p))
}

/// Ids of every JSON shape, each unique (its text is its identity).
fn fresh_id(rng: &mut Rng, n: usize) -> String {
    match rng.below(5) {
        0 => n.to_string(),
        1 => format!("-{n}"),
        2 => format!(r#""id-{n} \u00e9\"q\"""#),
        3 => format!("{n}.50"),
        _ => format!(r#""{n}""#),
    }
}

/// One request line with `id` (raw JSON text), or a notification.
fn request(rng: &mut Rng, id: Option<&str>) -> String {
    request_and_kind(rng, id).0
}

/// [`request`], and whether the line is a request (has `method`).
fn request_and_kind(rng: &mut Rng, id: Option<&str>) -> (String, bool) {
    let methods = [
        "function.call",
        "object.new",
        "object.call_method",
        "object.destroy",
        "scriptling.handshake",
        "ping",
        "environment.open",
        "no.such.method",
    ];
    let method = *rng.pick(&methods);
    let mut fields = vec![r#""jsonrpc":"2.0""#.to_owned()];
    if let Some(id) = id {
        fields.push(format!(r#""id":{id}"#));
    }
    let is_request = match rng.below(20) {
        0 => {
            fields.push(r#""method":5"#.to_owned());
            true
        }
        // No method: an answer to a request of the plugin's (malformed).
        1 => false,
        _ => {
            fields.push(format!(r#""method":"{method}""#));
            true
        }
    };
    if let Some(p) = params(rng, method) {
        fields.push(format!(r#""params":{p}"#));
    }
    // Field order does not matter to a JSON-RPC server.
    let rotate = rng.below(fields.len());
    fields.rotate_left(rotate);
    (format!("{{{}}}", fields.join(",")), is_request)
}

/// Lines that are not requests: broken JSON, bytes that are not UTF-8,
/// other JSON shapes, lone surrogates, absurd numbers, deep nesting.
fn garbage(rng: &mut Rng) -> Vec<u8> {
    let fixed: [&[u8]; 12] = [
        b"{",
        b"not json",
        b"[]",
        b"[1,2,3]",
        b"[[1,\"ping\"],[7,\"plugin.shutdown\"]]",
        b"\"ping\"",
        b"42",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1e400}",
        b"{\"method\":\"ping\",\"params\":{\"x\":\"\\ud800\"}}",
        b"\xff\xfe{\"id\":1}",
        b"{\"a\":\"\0\"}",
        b"null",
    ];
    if rng.chance(70) {
        return rng.pick(&fixed).to_vec();
    }
    let depth = 1 + rng.below(3000);
    let mut deep = "[".repeat(depth).into_bytes();
    if rng.chance(50) {
        deep.extend("]".repeat(depth).bytes());
    }
    deep
}

/// A response to a request the plugin never sent.
fn stray_response(rng: &mut Rng) -> String {
    let id = rng.below(1000);
    if rng.chance(50) {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"type":"null"}}}}"#)
    } else {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"unknown callback cb-{id}"}}}}"#)
    }
}

/// The raw text of every id in an answer line (one, or a batch's).
fn answered_ids(line: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        id: &'a RawValue,
    }
    if line.starts_with('[') {
        let items: Vec<Answer<'_>> = serde_json::from_str(line).expect("a batch answer");
        items.into_iter().map(|a| a.id.get().to_owned()).collect()
    } else {
        vec![serde_json::from_str::<Answer<'_>>(line).expect("an answer").id.get().to_owned()]
    }
}

fn run(seed: u64, lines: usize) {
    let mut rng = Rng(seed);
    let mut input = Vec::new();
    // Per id (raw text): (times sent, times answered).
    let mut expected: HashMap<String, (usize, usize)> = HashMap::new();
    let mut next_id = 0;
    let mut id = |rng: &mut Rng| {
        next_id += 1;
        fresh_id(rng, next_id)
    };
    for _ in 0..lines {
        match rng.below(100) {
            0..60 => {
                let id = id(&mut rng);
                let (line, is_request) = request_and_kind(&mut rng, Some(&id));
                input.extend(line.bytes());
                expected.insert(id, (usize::from(is_request), 0));
            }
            60..70 => {
                let mut items = Vec::new();
                for _ in 0..1 + rng.below(5) {
                    if rng.chance(80) {
                        let id = id(&mut rng);
                        let (item, is_request) = request_and_kind(&mut rng, Some(&id));
                        items.push(item);
                        expected.insert(id, (usize::from(is_request), 0));
                    } else {
                        items.push(request(&mut rng, None));
                    }
                }
                input.extend(format!("[{}]", items.join(",")).bytes());
            }
            70..85 => {
                let line = garbage(&mut rng);
                // The one garbage line that is a request: its id is echoed verbatim.
                if line.starts_with(br#"{"jsonrpc":"2.0","method":"ping","id":1e400}"#) {
                    expected.entry("1e400".into()).or_default().0 += 1;
                }
                input.extend(line);
            }
            85..95 => input.extend(stray_response(&mut rng).bytes()),
            _ => input.extend(request(&mut rng, None).bytes()),
        }
        input.push(b'\n');
    }
    input.extend(br#"{"jsonrpc":"2.0","id":"final-ping","method":"ping"}"#);
    input.push(b'\n');

    let mut child = common::spawn_piped(&mut Command::new(example_path("hello")));
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).expect("the plugin kept reading");
    });
    let started = Instant::now();
    let mut unexpected = Vec::new();
    let mut final_ping = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.expect("stdout is UTF-8");
        serde_json::from_str::<serde::de::IgnoredAny>(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for id in answered_ids(&line) {
            if id == r#""final-ping""# {
                final_ping += 1;
            } else if let Some((_, answered)) = expected.get_mut(&id) {
                *answered += 1;
            } else if id != "null" {
                unexpected.push(id);
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "seed {seed}: the plugin hangs");
    }
    writer.join().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "seed {seed}: the plugin exits 0 at EOF");
    assert_eq!(final_ping, 1, "seed {seed}: still serving at the end");
    assert!(unexpected.is_empty(), "seed {seed}: answers to ids nobody sent: {unexpected:?}");
    let wrong: Vec<_> = expected.iter().filter(|(_, (sent, answered))| sent != answered).collect();
    assert!(wrong.is_empty(), "seed {seed}: ids not answered exactly once per request: {wrong:?}");
}

#[test]
fn mutated_input_never_breaks_the_invariants() {
    for seed in [0x5eed_0001, 0x5eed_0002, 0x5eed_0003, 0x5eed_0004, 0x5eed_0005] {
        run(seed, 4_000);
    }
}
