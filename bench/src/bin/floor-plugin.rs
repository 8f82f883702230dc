//! The protocol's floor: the smallest hand-written plugin that answers the
//! benchmark's requests. One thread, serde_json with borrowed parsing, one
//! flushed write per frame, no SDK. The SDK is judged as a ratio to it.
//! With `--listen tcp://HOST:PORT` it serves the same way on TCP
//! connections, one at a time: the floor of the TCP transport's figure.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, BufRead, BufWriter, Write};

use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    args: Vec<Arg<'a>>,
}

#[derive(Deserialize)]
struct New<'a> {
    #[serde(borrow, default)]
    args: Vec<Arg<'a>>,
}

#[derive(Deserialize)]
struct Method<'a> {
    #[serde(borrow)]
    object_id: Cow<'a, str>,
    #[serde(borrow, default)]
    args: Vec<Arg<'a>>,
}

#[derive(Deserialize)]
struct Destroy<'a> {
    #[serde(borrow)]
    object_id: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Arg<'a> {
    #[serde(borrow)]
    value: Option<&'a RawValue>,
    #[serde(borrow)]
    callback: Option<CallbackId<'a>>,
}

#[derive(Deserialize)]
struct CallbackId<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
}

const HANDSHAKE: &str = r#"{"protocol":"1.0","transport":"json","library":{"name":"floor","version":"1.0.0"},"capabilities":["remote_objects"],"schema":{"functions":[{"name":"greet"},{"name":"ping_back"},{"name":"log_burst"}],"classes":[{"name":"Counter","constructor":{"name":"Counter"},"methods":[{"name":"inc"}],"properties":[]}],"constants":[]}}"#;

struct Floor<R, W> {
    input: R,
    out: W,
    counters: HashMap<u64, i64>,
    next_object: u64,
    next_request: u64,
}

fn int_arg(args: &[Arg<'_>], i: usize) -> i64 {
    args.get(i).and_then(|a| a.value).and_then(|v| v.get().parse().ok()).unwrap_or(0)
}

impl<R: BufRead, W: Write> Floor<R, W> {
    fn respond(&mut self, id: Option<&RawValue>, result: &str) -> io::Result<()> {
        let Some(id) = id else { return Ok(()) };
        write!(self.out, r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    fn error(&mut self, id: Option<&RawValue>, message: &str) -> io::Result<()> {
        let id = id.map_or("null", RawValue::get);
        write!(self.out, r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"#)?;
        serde_json::to_writer(&mut self.out, message)?;
        self.out.write_all(b"}}\n")?;
        self.out.flush()
    }

    /// Sends `callback.call` and reads until its response arrives.
    fn callback(&mut self, cb: &str, i: i64, line: &mut Vec<u8>) -> io::Result<()> {
        self.next_request += 1;
        let id = self.next_request;
        write!(self.out, r#"{{"jsonrpc":"2.0","id":{id},"method":"callback.call","params":{{"id":"#)?;
        serde_json::to_writer(&mut self.out, cb)?;
        write!(self.out, r#","args":[{{"type":"int","value":{i}}}]}}}}"#)?;
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        self.await_response(id, line)
    }

    /// Sends one `host.log` record and reads until the host acknowledges
    /// it: what keeps a call's records in order, and before its answer,
    /// under a host that handles requests concurrently.
    fn log(&mut self, i: i64, line: &mut Vec<u8>) -> io::Result<()> {
        self.next_request += 1;
        let id = self.next_request;
        writeln!(
            self.out,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"host.log","params":{{"level":"info","message":"burst","args":[{{"type":"string","value":"i"}},{{"type":"int","value":{i}}}]}}}}"#
        )?;
        self.out.flush()?;
        self.await_response(id, line)
    }

    /// Reads lines until the response to request `id` arrives.
    fn await_response(&mut self, id: u64, line: &mut Vec<u8>) -> io::Result<()> {
        loop {
            line.clear();
            if self.input.read_until(b'\n', line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if let Ok(r) = serde_json::from_slice::<Response<'_>>(line) {
                if r.id.is_some_and(|raw| raw.get() == id.to_string()) {
                    return Ok(());
                }
            }
        }
    }

    fn serve(&mut self) -> io::Result<()> {
        let mut line = Vec::with_capacity(64 * 1024);
        let mut scratch = Vec::new();
        loop {
            line.clear();
            if self.input.read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            let Ok(req) = serde_json::from_slice::<Request<'_>>(&line) else {
                if !line.iter().all(u8::is_ascii_whitespace) {
                    self.error(None, "parse error")?;
                }
                continue;
            };
            // A response (to a log record): nothing to do.
            let Some(method) = req.method else { continue };
            let params = req.params.map_or("null", RawValue::get);
            match &*method {
                "scriptling.handshake" => self.respond(req.id, HANDSHAKE)?,
                "function.call" => {
                    let Ok(call) = serde_json::from_str::<Call<'_>>(params) else {
                        self.error(req.id, "bad params")?;
                        continue;
                    };
                    match &*call.name {
                        "greet" => {
                            let name: Cow<'_, str> = call
                                .args
                                .first()
                                .and_then(|a| a.value)
                                .and_then(|v| serde_json::from_str(v.get()).ok())
                                .unwrap_or_default();
                            let mut result = br#"{"type":"string","value":"#.to_vec();
                            serde_json::to_writer(&mut result, &format!("Hello, {name}"))?;
                            result.push(b'}');
                            let result = String::from_utf8(result).unwrap_or_default();
                            self.respond(req.id, &result)?;
                        }
                        "ping_back" => {
                            let cb = call.args.first().and_then(|a| a.callback.as_ref()).map(|c| c.id.to_string());
                            let n = int_arg(&call.args, 1);
                            let Some(cb) = cb else {
                                self.error(req.id, "ping_back needs a callback")?;
                                continue;
                            };
                            let id = req.id.map(ToOwned::to_owned);
                            for i in 0..n {
                                self.callback(&cb, i, &mut scratch)?;
                            }
                            self.respond(id.as_deref(), &format!(r#"{{"type":"int","value":{n}}}"#))?;
                        }
                        "log_burst" => {
                            let n = int_arg(&call.args, 0);
                            let id = req.id.map(ToOwned::to_owned);
                            for i in 0..n {
                                self.log(i, &mut scratch)?;
                            }
                            self.respond(id.as_deref(), &format!(r#"{{"type":"int","value":{n}}}"#))?;
                        }
                        other => self.error(req.id, &format!("unknown function {other}"))?,
                    }
                }
                "object.new" => {
                    let start = serde_json::from_str::<New<'_>>(params).map(|p| int_arg(&p.args, 0)).unwrap_or(0);
                    self.next_object += 1;
                    self.counters.insert(self.next_object, start);
                    let result = format!(r#"{{"library":"floor","class":"Counter","id":"{}"}}"#, self.next_object);
                    self.respond(req.id, &result)?;
                }
                "object.call_method" => {
                    let Ok(m) = serde_json::from_str::<Method<'_>>(params) else {
                        self.error(req.id, "bad params")?;
                        continue;
                    };
                    let amount = int_arg(&m.args, 0);
                    match m.object_id.parse().ok().and_then(|id: u64| self.counters.get_mut(&id)) {
                        Some(value) => {
                            *value += amount;
                            let result = format!(r#"{{"type":"int","value":{value}}}"#);
                            self.respond(req.id, &result)?;
                        }
                        None => self.error(req.id, "unknown object")?,
                    }
                }
                "object.destroy" => {
                    if let Ok(d) = serde_json::from_str::<Destroy<'_>>(params) {
                        if let Ok(id) = d.object_id.parse::<u64>() {
                            self.counters.remove(&id);
                        }
                    }
                    self.respond(req.id, "null")?;
                }
                "plugin.shutdown" => {
                    self.respond(req.id, "null")?;
                    return Ok(());
                }
                _ => self.error(req.id, "method not found")?,
            }
            if line.capacity() > 1 << 20 {
                line = Vec::with_capacity(64 * 1024);
            }
        }
    }
}

fn main() -> io::Result<()> {
    // `--listen tcp://HOST:PORT`: the same floor on TCP connections, one at
    // a time, for the TCP transport's figure.
    let args: Vec<String> = std::env::args().collect();
    if let Some(addr) = args.iter().position(|a| a == "--listen").and_then(|i| args.get(i + 1)) {
        let addr = addr.strip_prefix("tcp://").unwrap_or(addr);
        let listener = std::net::TcpListener::bind(addr)?;
        eprintln!("floor listening at tcp://{}", listener.local_addr()?);
        for stream in listener.incoming() {
            let stream = stream?;
            stream.set_nodelay(true)?;
            let mut floor = Floor {
                input: io::BufReader::with_capacity(64 * 1024, stream.try_clone()?),
                out: BufWriter::with_capacity(64 * 1024, stream),
                counters: HashMap::new(),
                next_object: 0,
                next_request: 0,
            };
            floor.serve()?;
        }
        return Ok(());
    }
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut floor = Floor {
        input: stdin.lock(),
        out: BufWriter::with_capacity(64 * 1024, stdout.lock()),
        counters: HashMap::new(),
        next_object: 0,
        next_request: 0,
    };
    floor.serve()
}
