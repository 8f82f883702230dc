//! The protocol's floor: the leanest straightforward hand-written plugin
//! that answers the benchmark's requests, no SDK. The SDK is judged as a
//! ratio to it, so it must not be beatable by accident: each step below is
//! the least a correct plugin can do.
//!
//! - **One read** of each line from stdin's buffer into a reused `Vec`
//!   (`read_until`): the protocol is line-delimited, so a plugin must find
//!   the newline before it can parse.
//! - **One parse** of the whole line with serde_json, borrowing: the
//!   envelope, the params (one struct that fits every method's params) and
//!   each argument's value (a string borrowed from the line when it has no
//!   escapes) in a single pass. No `RawValue` re-parse, no `Value` tree.
//! - **One result build**: `greet` `format!`s its answer, as any plugin
//!   function builds the `String` it returns.
//! - **One escaped write** of the result straight into the output buffer
//!   (`serde_json::to_writer`): no intermediate `Vec`, no second UTF-8 check
//!   of bytes serde_json just produced from a `&str`.
//! - One thread, one flushed write per frame.
//!
//! With `--listen tcp://HOST:PORT` it serves the same way on TCP
//! connections, one at a time: the floor of the TCP transport's figure.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufWriter, Write};

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

/// Every method's params in one shape: `function.call` has `name` and
/// `args`, `object.call_method` `object_id` and `args`, `object.destroy`
/// `object_id`; what a method does not use is absent.
#[derive(Deserialize, Default)]
struct Params<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    object_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    args: Vec<Arg<'a>>,
}

#[derive(Deserialize)]
struct Arg<'a> {
    #[serde(borrow, default)]
    value: Scalar<'a>,
    #[serde(borrow)]
    callback: Option<CallbackId<'a>>,
}

/// An argument's `value`, decoded in the same pass as the line: the
/// benchmark's functions take strings and ints; anything else is skipped.
#[derive(Default)]
enum Scalar<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    #[default]
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ScalarVisitor<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(v).map_or(Scalar::Other, Scalar::Int))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        deserializer.deserialize_any(ScalarVisitor(std::marker::PhantomData))
    }
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
    match args.get(i).map(|a| &a.value) {
        Some(Scalar::Int(n)) => *n,
        _ => 0,
    }
}

impl<R: BufRead, W: Write> Floor<R, W> {
    fn respond(&mut self, id: Option<&RawValue>, result: &str) -> io::Result<()> {
        let Some(id) = id else { return Ok(()) };
        write!(self.out, r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Answers with a string result, escaped straight into the output.
    fn respond_string(&mut self, id: Option<&RawValue>, result: &str) -> io::Result<()> {
        let Some(id) = id else { return Ok(()) };
        write!(self.out, r#"{{"jsonrpc":"2.0","id":{},"result":{{"type":"string","value":"#, id.get())?;
        serde_json::to_writer(&mut self.out, result)?;
        self.out.write_all(b"}}\n")?;
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
            let params = req.params.unwrap_or_default();
            match &*method {
                "scriptling.handshake" => self.respond(req.id, HANDSHAKE)?,
                "function.call" => {
                    let Some(name) = params.name else {
                        self.error(req.id, "bad params")?;
                        continue;
                    };
                    match &*name {
                        "greet" => {
                            let name = match params.args.first().map(|a| &a.value) {
                                Some(Scalar::Str(s)) => &**s,
                                _ => "",
                            };
                            let result = format!("Hello, {name}");
                            self.respond_string(req.id, &result)?;
                        }
                        "ping_back" => {
                            let cb = params.args.first().and_then(|a| a.callback.as_ref()).map(|c| c.id.to_string());
                            let n = int_arg(&params.args, 1);
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
                            let n = int_arg(&params.args, 0);
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
                    let start = int_arg(&params.args, 0);
                    self.next_object += 1;
                    self.counters.insert(self.next_object, start);
                    let result = format!(r#"{{"library":"floor","class":"Counter","id":"{}"}}"#, self.next_object);
                    self.respond(req.id, &result)?;
                }
                "object.call_method" => {
                    let Some(object_id) = params.object_id else {
                        self.error(req.id, "bad params")?;
                        continue;
                    };
                    let amount = int_arg(&params.args, 0);
                    match object_id.parse().ok().and_then(|id: u64| self.counters.get_mut(&id)) {
                        Some(value) => {
                            *value += amount;
                            let result = format!(r#"{{"type":"int","value":{value}}}"#);
                            self.respond(req.id, &result)?;
                        }
                        None => self.error(req.id, "unknown object")?,
                    }
                }
                "object.destroy" => {
                    if let Some(id) = params.object_id.and_then(|id| id.parse::<u64>().ok()) {
                        self.counters.remove(&id);
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
