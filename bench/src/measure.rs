//! The measurements, each driving a spawned plugin through the real
//! protocol the way a host does: one thread, one write per request (its
//! newline included), answers read as they come, the plugin's own requests
//! (`callback.call`, `host.log`) answered in place.
//!
//! An earlier driver went through the testing kit's host, which writes a
//! request and its newline separately and parses every frame on a reader
//! thread of its own; on two cores it measured the host as much as the
//! plugin, and flattered the plugin's pipelined ratio (0.88 × the floor
//! where an independent single-threaded driver saw 0.40-0.54 ×).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as J;
use serde_json::value::RawValue;

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
    /// CPU-bound calls timed (1 ms of CPU time each, 64 in flight).
    pub cpu_bound: usize,
    /// Spawns timed.
    pub spawns: usize,
    /// Soak: (calls, object cycles); zero skips it.
    pub soak: (usize, usize),
    /// Script loops through the real host: (plain calls, calls that call back).
    pub host_loops: (usize, usize),
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
        cpu_bound: 4_000,
        spawns: 100,
        soak: (0, 0),
        host_loops: (20_000, 3_000),
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
        cpu_bound: 200,
        spawns: 2,
        soak: (0, 0),
        host_loops: (200, 50),
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
    pub(crate) fn push(&mut self, key: &'static str, unit: &'static str, value: Option<f64>) {
        self.0.push(Figure { key, unit, value });
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.0.iter().find(|f| f.key == key).and_then(|f| f.value)
    }

    /// Replaces the value of `key`.
    ///
    /// # Panics
    ///
    /// If there is no figure `key`.
    pub fn set(&mut self, key: &str, value: Option<f64>) {
        let figure = self.0.iter_mut().find(|f| f.key == key).unwrap_or_else(|| panic!("no figure {key}"));
        figure.value = value;
    }
}

/// A host speaking to one spawned plugin, on the calling thread, over its
/// stdin and stdout or over a TCP connection.
struct Driver {
    child: Child,
    input: Box<dyn Write + Send>,
    output: BufReader<Box<dyn Read + Send>>,
    next: u64,
    line: Vec<u8>,
    /// Served over TCP: ended with SIGTERM rather than `plugin.shutdown`.
    over_tcp: bool,
}

/// What the driver needs of a frame from the plugin.
#[derive(serde::Deserialize)]
struct Frame<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
}

impl Driver {
    fn spawn(path: &Path) -> Option<Driver> {
        let mut child =
            Command::new(path).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
        let input = Box::new(child.stdin.take()?);
        let output: Box<dyn Read + Send> = Box::new(child.stdout.take()?);
        let output = BufReader::with_capacity(1 << 16, output);
        Some(Driver { child, input, output, next: 0, line: Vec::new(), over_tcp: false })
    }

    /// Spawns the plugin serving TCP on a free loopback port, and connects.
    /// `None` if it does not serve TCP (it does not print where it listens
    /// within a few seconds).
    fn spawn_tcp(path: &Path) -> Option<Driver> {
        let mut child = Command::new(path)
            .args(["--listen", "tcp://127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take()?;
        // Read on a thread of its own, to the end, so the plugin never blocks
        // on a full stderr pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if let Some(addr) = line.split("listening at tcp://").nth(1) {
                    let _ = addr_tx.send(addr.trim().to_owned());
                }
            }
        });
        let connected =
            addr_rx.recv_timeout(Duration::from_secs(5)).ok().and_then(|addr| std::net::TcpStream::connect(addr).ok());
        let Some(stream) = connected else {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        stream.set_nodelay(true).ok()?;
        let input = Box::new(stream.try_clone().ok()?);
        let output: Box<dyn Read + Send> = Box::new(stream);
        let output = BufReader::with_capacity(1 << 16, output);
        Some(Driver { child, input, output, next: 0, line: Vec::new(), over_tcp: true })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one request (one write, newline included).
    fn send(&mut self, method: &str, params: &str) -> Option<()> {
        self.next += 1;
        let line =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"{method}\",\"params\":{params}}}\n", self.next);
        self.input.write_all(line.as_bytes()).ok()
    }

    /// Reads the next answer into `self.line`, answering the plugin's own
    /// requests on the way.
    fn recv(&mut self) -> Option<()> {
        loop {
            self.line.clear();
            if self.output.read_until(b'\n', &mut self.line).ok()? == 0 {
                return None;
            }
            let frame: Frame<'_> = serde_json::from_slice(&self.line).ok()?;
            let Some(_) = frame.method else { return Some(()) };
            // callback.call and host.log: both answered with None at once.
            if let Some(id) = frame.id {
                let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"type\":\"null\"}}}}\n", id.get());
                self.input.write_all(answer.as_bytes()).ok()?;
            }
        }
    }

    /// One request and its answer; the answer stays in `self.line`.
    fn round_trip(&mut self, method: &str, params: &str) -> Option<Duration> {
        let start = Instant::now();
        self.send(method, params)?;
        self.recv()?;
        let elapsed = start.elapsed();
        self.answered().then_some(elapsed)
    }

    /// Whether the answer in `self.line` is a success.
    fn answered(&self) -> bool {
        self.line.windows(9).any(|w| w == b"\"result\":")
    }

    /// The answer in `self.line`, parsed.
    fn answer(&self) -> Option<J> {
        serde_json::from_slice(&self.line).ok()
    }

    /// Ends the session and waits for the plugin to exit.
    fn finish(mut self) {
        let _ = self.send("plugin.shutdown", "null");
        let _ = self.recv();
        drop(self.input);
        if self.over_tcp {
            stop_server(&mut self.child);
        }
        let _ = self.child.wait();
    }
}

fn greet_params(name: &str) -> String {
    format!(r#"{{"name":"greet","args":[{{"type":"string","value":{}}}]}}"#, serde_json::to_string(name).unwrap())
}

/// The `p` quantile (0 to 1) of `sorted`, which is not empty: the nearest
/// element's.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> T {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The median of `values` (the upper one of an even count); `None` if
/// there are none.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
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

/// How many threads of process `pid` are called `name` (Linux).
fn threads_named(pid: u32, name: &str) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let names = tasks.filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok());
    Some(names.filter(|comm| comm.trim_end() == name).count() as f64)
}

/// Measures the plugin at `path`.
pub fn measure(path: &Path, sizes: Sizes) -> Figures {
    let mut figures = Figures::default();
    let Some(mut driver) = Driver::spawn(path) else {
        eprintln!("cannot start {}", path.display());
        return figures;
    };
    let pid = driver.pid();
    let handshake_ok = driver.round_trip("scriptling.handshake", r#"{"protocol":"1.0"}"#).is_some();
    // Let start-up settle before reading the idle size.
    std::thread::sleep(Duration::from_millis(50));
    let idle_rss = if handshake_ok { status_kib(pid, "VmRSS:") } else { None };

    // 1. Sequential round trips.
    let greet = greet_params("Ada");
    for _ in 0..sizes.warmup {
        driver.round_trip("function.call", &greet);
    }
    let start = Instant::now();
    let lat = sequential(&mut driver, &greet, sizes.sequential);
    let total = start.elapsed();
    let us = |p: f64| lat.as_ref().map(|lat| percentile(lat, p).as_secs_f64() * 1e6);
    figures.push("seq_p50_us", "µs", us(0.5));
    figures.push("seq_p99_us", "µs", us(0.99));
    figures.push("seq_calls_per_s", "calls/s", lat.as_ref().map(|_| sizes.sequential as f64 / total.as_secs_f64()));

    // 2. Pipelined, 64 in flight.
    figures.push("pipelined_calls_per_s", "calls/s", pipelined(&mut driver, &greet, sizes.pipelined, 64));

    // 3. Payloads.
    for (key_rtt, key_rate, size, runs) in [
        ("payload_1mib_rtt_ms", "payload_1mib_mb_per_s", 1usize << 20, sizes.payload_runs.0),
        ("payload_16mib_rtt_ms", "payload_16mib_mb_per_s", 16 << 20, sizes.payload_runs.1),
    ] {
        let params = greet_params(&"x".repeat(size));
        let mut rtts = Vec::new();
        for _ in 0..runs {
            // "Hello, " and the JSON around the string come back too.
            match driver.round_trip("function.call", &params) {
                Some(d) if driver.line.len() > size + 7 => rtts.push(d.as_secs_f64()),
                _ => break,
            }
        }
        let rtt = if rtts.len() == runs { median(rtts) } else { None };
        figures.push(key_rtt, "ms", rtt.map(|r| r * 1e3));
        // Bytes that crossed the pipes, both directions, per second.
        figures.push(key_rate, "MB/s", rtt.map(|r| (2 * size) as f64 / r / 1e6));
    }
    driver.line = Vec::new();
    figures.push("peak_rss_kib", "KiB", status_kib(pid, "VmHWM:"));
    figures.push("idle_rss_kib", "KiB", idle_rss);

    // 4. Object churn.
    figures.push("churn_cycles_per_s", "cycles/s", churn(&mut driver, sizes.churn));

    // 5. Callbacks from inside one call; 5b. log records.
    let plain = us(0.5).map(|us| us / 1e6);
    let cb_params = format!(
        r#"{{"name":"ping_back","args":[{{"type":"callback","callback":{{"id":"cb-1"}}}},{{"type":"int","value":{}}}]}}"#,
        sizes.callbacks
    );
    let callback_total = driver.round_trip("function.call", &cb_params).map(|d| d.as_secs_f64());
    let per_callback = callback_total.zip(plain).map(|(t, p)| ((t - p) / sizes.callbacks as f64).max(0.0));
    figures.push("callback_rtt_us", "µs", per_callback.map(|s| s * 1e6));
    figures.push("callbacks_per_s", "calls/s", callback_total.map(|t| sizes.callbacks as f64 / t));
    let log_params = format!(r#"{{"name":"log_burst","args":[{{"type":"int","value":{}}}]}}"#, sizes.logs);
    let log_total = driver.round_trip("function.call", &log_params).map(|d| d.as_secs_f64());
    let per_log = log_total.zip(plain).map(|(t, p)| ((t - p) / sizes.logs as f64).max(0.0));
    figures.push("log_record_us", "µs", per_log.map(|s| s * 1e6));

    // 9. CPU-bound calls, 64 in flight, each computing for 1 ms of its
    // thread's CPU time: against the cores' 1 000 calls/s each; and the
    // plugin's threads for sync handlers afterwards (Linux: their names).
    let compute = r#"{"name":"compute","args":[{"type":"int","value":1}]}"#;
    // Only a plugin that has `compute` (the floor has not).
    let computes = driver.round_trip("function.call", compute).is_some();
    let cpu_bound = computes.then(|| pipelined(&mut driver, compute, sizes.cpu_bound, 64)).flatten();
    figures.push("cpu_bound_calls_per_s", "calls/s", cpu_bound);
    figures.push("cpu_bound_sync_threads", "threads", computes.then(|| threads_named(pid, "plugin-sync")).flatten());

    // 8. The same pipelined calls over a TCP connection (SDK plugins only:
    // the floor serves stdio alone).
    let over_tcp = Driver::spawn_tcp(path).and_then(|mut tcp| {
        tcp.round_trip("scriptling.handshake", r#"{"protocol":"1.0"}"#)?;
        pipelined(&mut tcp, &greet, sizes.warmup, 64)?;
        let rate = pipelined(&mut tcp, &greet, sizes.pipelined, 64);
        tcp.finish();
        rate
    });
    figures.push("tcp_pipelined_calls_per_s", "calls/s", over_tcp);

    // 7. Soak: no growth.
    if sizes.soak.0 > 0 {
        let _ = pipelined(&mut driver, &greet, 10_000, 64);
        let before = status_kib(pid, "VmRSS:");
        let _ = pipelined(&mut driver, &greet, sizes.soak.0, 64);
        let _ = churn(&mut driver, sizes.soak.1);
        let after = status_kib(pid, "VmRSS:");
        figures.push("rss_after_10k_kib", "KiB", before);
        figures.push("rss_after_soak_kib", "KiB", after);
        figures.push("rss_growth_pct", "%", before.zip(after).map(|(b, a)| (a - b) / b * 100.0));
    }
    driver.finish();

    // 6. Spawn → handshake answered.
    let spawns: Option<Vec<f64>> = (0..sizes.spawns).map(|_| spawn_to_handshake(path)).collect();
    let spawn = spawns.and_then(median);
    figures.push("spawn_handshake_ms", "ms", spawn);
    figures
}

/// Milliseconds from spawning the plugin to reading its handshake answer;
/// the plugin is shut down and waited for afterwards, untimed (killed, if
/// it did not answer).
pub fn spawn_to_handshake(path: &Path) -> Option<f64> {
    let start = Instant::now();
    let mut driver = Driver::spawn(path)?;
    if driver.round_trip("scriptling.handshake", r#"{"protocol":"1.0"}"#).is_none() {
        let _ = driver.child.kill();
        let _ = driver.child.wait();
        return None;
    }
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    driver.finish();
    Some(elapsed)
}

/// Median spawn-to-handshake milliseconds of each plugin, `spawns` each,
/// taken in turns: one spawn of each plugin per turn, in the opposite order
/// on every other turn, so that a change in the machine's load, or a
/// plugin's place in the turn, touches every plugin alike. A plugin that
/// fails once gets `None` and is not spawned again.
pub fn spawn_interleaved(paths: &[PathBuf], spawns: usize) -> Vec<Option<f64>> {
    let mut samples: Vec<Option<Vec<f64>>> = vec![Some(Vec::with_capacity(spawns)); paths.len()];
    for turn in 0..spawns {
        let mut order: Vec<usize> = (0..paths.len()).collect();
        if turn % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let Some(list) = &mut samples[i] else { continue };
            match spawn_to_handshake(&paths[i]) {
                Some(ms) => list.push(ms),
                None => samples[i] = None,
            }
        }
    }
    samples.into_iter().map(|list| list.and_then(median)).collect()
}

/// Pipelined `greet` calls alone (for profiling and quick comparisons):
/// calls/s over `total` calls with 64 in flight, and sequential p50 in µs
/// over `total / 10` round trips.
pub fn pipeline_only(path: &Path, total: usize) -> Option<(f64, f64)> {
    // PIPELINE_TCP=1 drives the plugin over a TCP connection instead.
    let mut driver =
        if std::env::var_os("PIPELINE_TCP").is_some() { Driver::spawn_tcp(path)? } else { Driver::spawn(path)? };
    driver.round_trip("scriptling.handshake", r#"{"protocol":"1.0"}"#)?;
    let greet = greet_params("Ada");
    // PIPELINE_SEQUENTIAL=1 profiles round trips alone; PIPELINE_PIPELINED=1
    // pipelined calls alone (a single round trip for the p50).
    let sequential_only = std::env::var_os("PIPELINE_SEQUENTIAL").is_some();
    let pipelined_only = std::env::var_os("PIPELINE_PIPELINED").is_some();
    let (warm, timed, round_trips) = match (sequential_only, pipelined_only) {
        (true, _) => (0, 0, total),
        (false, true) => (total / 10, total, 1),
        (false, false) => (total / 10, total, total / 10),
    };
    if warm > 0 {
        pipelined(&mut driver, &greet, warm, 64)?;
    }
    let rate = if timed > 0 { pipelined(&mut driver, &greet, timed, 64)? } else { 0.0 };
    let lat = sequential(&mut driver, &greet, round_trips)?;
    let p50 = percentile(&lat, 0.5).as_secs_f64() * 1e6;
    driver.finish();
    Some((rate, p50))
}

/// `n` round trips of `function.call` with `params`, one at a time: their
/// times, sorted, or `None` if any failed (or `n` is zero).
fn sequential(driver: &mut Driver, params: &str, n: usize) -> Option<Vec<Duration>> {
    let mut lat = (0..n).map(|_| driver.round_trip("function.call", params)).collect::<Option<Vec<_>>>()?;
    if lat.is_empty() {
        return None;
    }
    lat.sort_unstable();
    Some(lat)
}

fn pipelined(driver: &mut Driver, params: &str, total: usize, window: usize) -> Option<f64> {
    let start = Instant::now();
    let mut sent = 0;
    let mut received = 0;
    while sent < window.min(total) {
        driver.send("function.call", params)?;
        sent += 1;
    }
    while received < total {
        driver.recv()?;
        received += 1;
        if sent < total {
            driver.send("function.call", params)?;
            sent += 1;
        }
    }
    Some(total as f64 / start.elapsed().as_secs_f64())
}

fn churn(driver: &mut Driver, cycles: usize) -> Option<f64> {
    let start = Instant::now();
    for _ in 0..cycles {
        driver.round_trip("object.new", r#"{"class":"Counter","args":[{"type":"int","value":1}]}"#)?;
        let created = driver.answer()?;
        let id = created["result"]["id"].as_str()?.to_owned();
        let inc = format!(r#"{{"object_id":"{id}","method":"inc","args":[{{"type":"int","value":2}}]}}"#);
        driver.round_trip("object.call_method", &inc)?;
        if driver.answer()?["result"]["value"] != 3 {
            return None;
        }
        driver.round_trip("object.destroy", &format!(r#"{{"object_id":"{id}"}}"#))?;
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

/// Stops a plugin serving a network: SIGTERM, as an operator would (on
/// Windows, where the bench has no console to send Ctrl-Break through, it
/// is killed: the figures are taken before).
fn stop_server(child: &mut std::process::Child) {
    #[cfg(unix)]
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    #[cfg(not(unix))]
    let _ = child.kill();
}

/// Raises this process's soft limit on open files to its hard limit (the
/// slow-connections run needs thousands; elsewhere there is no such limit).
pub fn raise_file_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit read and write a struct we own.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
