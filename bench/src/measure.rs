//! The measurements, each driving a spawned plugin through the real
//! protocol with the testing kit's host.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use scriptling_plugin::Value;
use scriptling_plugin::testing::Host;
use serde_json::Value as J;

/// How much work each figure does.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Warm-up calls before timing.
    pub warmup: usize,
    /// Sequential calls timed.
    pub sequential: usize,
    /// Pipelined calls timed.
    pub pipelined: usize,
    /// Payload round trips per size (1 MiB, 16 MiB).
    pub payload_runs: (usize, usize),
    /// Object churn cycles.
    pub churn: usize,
    /// Callbacks made from one call.
    pub callbacks: usize,
    /// Log records written from one call.
    pub logs: usize,
    /// Spawns timed.
    pub spawns: usize,
    /// Soak: (calls, object cycles); zero skips it.
    pub soak: (usize, usize),
}

impl Sizes {
    /// The full run.
    pub const FULL: Sizes = Sizes {
        warmup: 2_000,
        sequential: 20_000,
        pipelined: 300_000,
        payload_runs: (10, 5),
        churn: 5_000,
        callbacks: 20_000,
        logs: 20_000,
        spawns: 20,
        soak: (0, 0),
    };
    /// A smoke run of a few seconds (CI): every path runs, figures are rough.
    pub const QUICK: Sizes = Sizes {
        warmup: 100,
        sequential: 1_000,
        pipelined: 2_000,
        payload_runs: (1, 1),
        churn: 200,
        callbacks: 500,
        logs: 500,
        spawns: 2,
        soak: (0, 0),
    };
}

/// One named figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// Stable key, e.g. `seq_p50_us`.
    pub key: &'static str,
    /// Unit for display.
    pub unit: &'static str,
    /// `None` when the plugin could not be measured for it.
    pub value: Option<f64>,
}

/// The figures of one plugin, in a fixed order.
#[derive(Clone, Debug, Default)]
pub struct Figures(pub Vec<Figure>);

impl Figures {
    fn push(&mut self, key: &'static str, unit: &'static str, value: Option<f64>) {
        self.0.push(Figure { key, unit, value });
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.0.iter().find(|f| f.key == key).and_then(|f| f.value)
    }
}

/// Raw request ids, far from the host's own.
struct Raw<'a> {
    host: &'a Host,
    next: u64,
}

impl<'a> Raw<'a> {
    fn new(host: &'a Host) -> Self {
        Raw { host, next: 1_000_000_000 }
    }

    fn line(&mut self, method: &str, params: &str) -> String {
        self.next += 1;
        format!(r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#, self.next)
    }

    fn send(&self, line: &str) -> Option<()> {
        self.host.send_raw(line).ok()
    }

    fn recv(&self) -> Option<J> {
        let frame = self.host.next_frame(Duration::from_secs(120))?;
        frame.get("result").is_some().then_some(frame)
    }

    fn round_trip(&mut self, method: &str, params: &str) -> Option<(Duration, J)> {
        let line = self.line(method, params);
        let start = Instant::now();
        self.send(&line)?;
        let frame = self.recv()?;
        Some((start.elapsed(), frame))
    }
}

fn greet_params(name: &str) -> String {
    format!(r#"{{"name":"greet","args":[{{"type":"string","value":{}}}]}}"#, serde_json::to_string(name).unwrap())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// `VmRSS` / `VmHWM` of a process, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Measures the plugin at `path`.
pub fn measure(path: &Path, sizes: Sizes) -> Figures {
    let mut figures = Figures::default();
    let host = match Host::spawn(Command::new(path)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("cannot start {}: {e}", path.display());
            return figures;
        }
    };
    host.on_callback(|_, _, _| Ok(Value::Null));
    let pid = host.pid().unwrap_or(0);
    let handshake_ok = host.handshake().is_ok();
    std::thread::sleep(Duration::from_millis(50));
    let idle_rss = if handshake_ok { status_kib(pid, "VmRSS:") } else { None };
    let mut raw = Raw::new(&host);

    // 1. Sequential round trips.
    let greet = greet_params("Ada");
    for _ in 0..sizes.warmup {
        raw.round_trip("function.call", &greet);
    }
    let mut lat = Vec::with_capacity(sizes.sequential);
    let start = Instant::now();
    for _ in 0..sizes.sequential {
        match raw.round_trip("function.call", &greet) {
            Some((d, _)) => lat.push(d),
            None => break,
        }
    }
    let total = start.elapsed();
    lat.sort_unstable();
    let complete = lat.len() == sizes.sequential && !lat.is_empty();
    let p50 = complete.then(|| percentile(&lat, 0.5).as_secs_f64() * 1e6);
    figures.push("seq_p50_us", "µs", p50);
    figures.push("seq_p99_us", "µs", complete.then(|| percentile(&lat, 0.99).as_secs_f64() * 1e6));
    figures.push("seq_calls_per_s", "calls/s", complete.then(|| sizes.sequential as f64 / total.as_secs_f64()));

    // 2. Pipelined, 64 in flight.
    figures.push("pipelined_calls_per_s", "calls/s", pipelined(&mut raw, &greet, sizes.pipelined, 64));

    // 3. Payloads.
    for (key_rtt, key_rate, size, runs) in [
        ("payload_1mib_rtt_ms", "payload_1mib_mb_per_s", 1usize << 20, sizes.payload_runs.0),
        ("payload_16mib_rtt_ms", "payload_16mib_mb_per_s", 16 << 20, sizes.payload_runs.1),
    ] {
        let params = greet_params(&"x".repeat(size));
        let mut rtts = Vec::new();
        for _ in 0..runs {
            match raw.round_trip("function.call", &params) {
                Some((d, frame)) if frame["result"]["value"].as_str().map(str::len) == Some(size + 7) => {
                    rtts.push(d.as_secs_f64());
                }
                _ => break,
            }
        }
        let rtt = if rtts.len() == runs { median(rtts) } else { None };
        figures.push(key_rtt, "ms", rtt.map(|r| r * 1e3));
        // Bytes that crossed the pipes, both directions, per second.
        figures.push(key_rate, "MB/s", rtt.map(|r| (2 * size) as f64 / r / 1e6));
    }
    figures.push("peak_rss_kib", "KiB", status_kib(pid, "VmHWM:"));
    figures.push("idle_rss_kib", "KiB", idle_rss);

    // 4. Object churn.
    figures.push("churn_cycles_per_s", "cycles/s", churn(&mut raw, sizes.churn));

    // 5. Callbacks from inside one call; 5b. log records.
    let plain = p50.map(|us| us / 1e6);
    let cb_params = format!(
        r#"{{"name":"ping_back","args":[{{"type":"callback","callback":{{"id":"cb-1"}}}},{{"type":"int","value":{}}}]}}"#,
        sizes.callbacks
    );
    let callback_total = raw.round_trip("function.call", &cb_params).map(|(d, _)| d.as_secs_f64());
    let per_callback = callback_total.zip(plain).map(|(t, p)| ((t - p) / sizes.callbacks as f64).max(0.0));
    figures.push("callback_rtt_us", "µs", per_callback.map(|s| s * 1e6));
    figures.push("callbacks_per_s", "calls/s", callback_total.map(|t| sizes.callbacks as f64 / t));
    let log_params = format!(r#"{{"name":"log_burst","args":[{{"type":"int","value":{}}}]}}"#, sizes.logs);
    let log_total = raw.round_trip("function.call", &log_params).map(|(d, _)| d.as_secs_f64());
    let per_log = log_total.zip(plain).map(|(t, p)| ((t - p) / sizes.logs as f64).max(0.0));
    figures.push("log_record_us", "µs", per_log.map(|s| s * 1e6));

    // 7. Soak: no growth.
    if sizes.soak.0 > 0 {
        let _ = pipelined(&mut raw, &greet, 10_000, 64);
        let before = status_kib(pid, "VmRSS:");
        let _ = pipelined(&mut raw, &greet, sizes.soak.0, 64);
        let _ = churn(&mut raw, sizes.soak.1);
        let after = status_kib(pid, "VmRSS:");
        figures.push("rss_after_10k_kib", "KiB", before);
        figures.push("rss_after_soak_kib", "KiB", after);
        figures.push("rss_growth_pct", "%", before.zip(after).map(|(b, a)| (a - b) / b * 100.0));
    }
    let _ = host.shutdown();
    let _ = host.wait(Duration::from_secs(10));
    drop(host);

    // 6. Spawn → handshake answered.
    let mut spawns = Vec::new();
    for _ in 0..sizes.spawns {
        let start = Instant::now();
        let Ok(h) = Host::spawn(Command::new(path)) else { break };
        if h.handshake().is_err() {
            break;
        }
        spawns.push(start.elapsed().as_secs_f64() * 1e3);
        let _ = h.shutdown();
        let _ = h.wait(Duration::from_secs(10));
    }
    let spawn = if spawns.len() == sizes.spawns { median(spawns) } else { None };
    figures.push("spawn_handshake_ms", "ms", spawn);
    figures
}

fn pipelined(raw: &mut Raw<'_>, params: &str, total: usize, window: usize) -> Option<f64> {
    let start = Instant::now();
    let mut sent = 0;
    let mut received = 0;
    while sent < window.min(total) {
        let line = raw.line("function.call", params);
        raw.send(&line)?;
        sent += 1;
    }
    while received < total {
        raw.recv()?;
        received += 1;
        if sent < total {
            let line = raw.line("function.call", params);
            raw.send(&line)?;
            sent += 1;
        }
    }
    Some(total as f64 / start.elapsed().as_secs_f64())
}

fn churn(raw: &mut Raw<'_>, cycles: usize) -> Option<f64> {
    let start = Instant::now();
    for _ in 0..cycles {
        let (_, created) = raw.round_trip("object.new", r#"{"class":"Counter","args":[{"type":"int","value":1}]}"#)?;
        let id = created["result"]["id"].as_str()?.to_owned();
        let inc = format!(r#"{{"object_id":"{id}","method":"inc","args":[{{"type":"int","value":2}}]}}"#);
        let (_, sum) = raw.round_trip("object.call_method", &inc)?;
        if sum["result"]["value"] != 3 {
            return None;
        }
        raw.round_trip("object.destroy", &format!(r#"{{"object_id":"{id}"}}"#))?;
    }
    Some(cycles as f64 / start.elapsed().as_secs_f64())
}

/// HTTP load: requests/s of `greet` with `clients` keep-alive connections,
/// each sending `per_client` requests one after another, and the 99th
/// percentile of their latencies in microseconds.
pub fn http_load(addr: std::net::SocketAddr, clients: usize, per_client: usize) -> Option<(f64, f64)> {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"function.call","params":{"name":"greet","args":[{"type":"string","value":"Ada"}]}}"#;
    let start = Instant::now();
    let latencies = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(move || -> Option<Vec<Duration>> {
                    let mut client = scriptling_plugin::testing::HttpClient::new(addr);
                    let mut latencies = Vec::with_capacity(per_client);
                    for _ in 0..per_client {
                        let sent = Instant::now();
                        if client.post("/json-rpc", body).ok()?.status != 200 {
                            return None;
                        }
                        latencies.push(sent.elapsed());
                    }
                    Some(latencies)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().ok().flatten()).collect::<Option<Vec<_>>>()
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    let mut all: Vec<Duration> = latencies.into_iter().flatten().collect();
    all.sort_unstable();
    let p99 = percentile(&all, 0.99).as_secs_f64() * 1e6;
    Some(((clients * per_client) as f64 / elapsed, p99))
}

/// Opens `n` connections that each send half a request header and then
/// nothing: slow (or hostile) clients holding connections open. Keep the
/// returned sockets alive for as long as they should stay open.
pub fn slow_connections(addr: std::net::SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    (0..n)
        .filter_map(|_| {
            let mut stream = std::net::TcpStream::connect(addr).ok()?;
            stream.write_all(b"POST /json-rpc HTTP/1.1\r\nHost: slow\r\nContent-Le").ok()?;
            Some(stream)
        })
        .collect()
}

/// Raises this process's soft limit on open files to its hard limit (the
/// slow-connections run needs thousands).
pub fn raise_file_limit() {
    // SAFETY: getrlimit/setrlimit read and write a struct we own.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
