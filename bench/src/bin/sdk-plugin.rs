//! The benchmark surface written with the SDK, compared with `floor-plugin`.

use scriptling_plugin::{CallError, Callback, Logger, Plugin, ServeError, plugin_class, plugin_fn};

/// Returns a greeting for `name`.
#[plugin_fn]
fn greet(name: String) -> String {
    format!("Hello, {name}")
}

/// Calls `cb(i)` for `i` in `0..n`, then returns `n`.
#[plugin_fn]
fn ping_back(cb: Callback, n: i64) -> Result<i64, CallError> {
    for i in 0..n {
        cb.call((i,))?;
    }
    Ok(n)
}

/// Writes `n` log records, then returns `n`.
#[plugin_fn]
fn log_burst(n: i64) -> i64 {
    let log = Logger::current();
    for i in 0..n {
        log.with("i", i).info("burst");
    }
    n
}

/// Computes for `ms` milliseconds of its own thread's CPU time (wall time
/// where no thread clock is at hand), then returns `ms`.
#[plugin_fn]
fn compute(ms: u64) -> u64 {
    let budget = std::time::Duration::from_millis(ms);
    let start = cpu_time();
    let mut x = 0u64;
    while cpu_time().saturating_sub(start) < budget {
        for _ in 0..1_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    ms
}

/// This thread's CPU time (a monotonic clock elsewhere).
fn cpu_time() -> std::time::Duration {
    #[cfg(unix)]
    {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: reads this thread's CPU clock into a local.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        std::time::Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }
    #[cfg(not(unix))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed()
    }
}

/// A counter.
#[plugin_class]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new(start: i64) -> Self {
        Counter { value: start }
    }

    fn inc(&mut self, amount: i64) -> i64 {
        self.value += amount;
        self.value
    }
}

fn main() -> Result<(), ServeError> {
    Plugin::new("sdk", "1.0.0", "Benchmark plugin")
        .function::<greet>()
        .function::<ping_back>()
        .function::<log_burst>()
        .function::<compute>()
        .class::<Counter>()
        .run()
}
