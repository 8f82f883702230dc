//! [`SyncPool`]: the threads that run sync handlers.
//!
//! Why not `tokio::task::spawn_blocking`: it wakes (or spawns) one thread
//! per job, so a burst of 64 pipelined calls became 64 thread wake-ups and
//! as many parked threads, and the benchmark showed ~3.4 context switches
//! per call against the protocol floor's 1. This pool keeps the number of
//! threads pulling work at the core count under load, and lets one worker
//! spin briefly after each job so back-to-back requests need no wake-up.
//!
//! Sync handlers may block for as long as they like (file I/O, sleeping,
//! waiting on a host callback). A watchdog adds a worker whenever queued
//! work has made no progress for [`STALL`], so a slow call never holds up
//! the others by more than about that long.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long queued work may sit without progress before a worker is added.
const STALL: Duration = Duration::from_millis(1);
/// How long a worker spins for new work after finishing a job.
const SPIN: Duration = Duration::from_micros(50);
/// How long an idle worker waits before leaving (one always stays).
const IDLE_EXIT: Duration = Duration::from_secs(10);
/// The most threads the pool will ever run.
const MAX_WORKERS: usize = 512;

type Job = Box<dyn FnOnce() + Send>;

pub(crate) struct SyncPool {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Parked workers wait here.
    work: Condvar,
    /// The watchdog waits here.
    watch: Condvar,
    /// Queue length, for the spinner to peek at without the lock.
    queued: AtomicUsize,
    /// Set once the runtime is built (the plugin starts reading before that,
    /// so the handshake does not wait for it).
    runtime: Option<Arc<std::sync::OnceLock<tokio::runtime::Handle>>>,
    parallelism: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    workers: usize,
    /// Workers parked on `work`.
    idle: usize,
    /// Workers told to wake that have not yet looked at the queue.
    notified: usize,
    /// Workers running a job.
    running: usize,
    /// One worker at a time may spin waiting for work.
    spinning: bool,
    /// Jobs started so far: the watchdog's measure of progress.
    started: u64,
    watchdog_waiting: bool,
    closed: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SyncPool {
    /// A pool whose workers run inside `runtime`'s context (so handlers can
    /// use `tokio::spawn` and `Handle::current()`).
    ///
    /// `parallelism` is the number of workers that pull work at once under
    /// load (the core count).
    pub(crate) fn new(runtime: Option<Arc<std::sync::OnceLock<tokio::runtime::Handle>>>, parallelism: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            watch: Condvar::new(),
            queued: AtomicUsize::new(0),
            runtime,
            parallelism: parallelism.max(1),
        });
        // Started eagerly: starting it from the first `submit` (on the reader
        // thread) measurably slowed every later call (sequential p50 ~22 µs
        // -> ~35 µs in the benchmark), for reasons not yet understood.
        let watchdog = Arc::clone(&shared);
        let _ = std::thread::Builder::new().name("scriptling-plugin-watchdog".into()).spawn(move || watch(&watchdog));
        SyncPool { shared }
    }

    /// Runs `job` on a pool thread.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        let shared = &self.shared;
        let mut st = lock(&shared.state);
        st.queue.push_back(Box::new(job));
        shared.queued.store(st.queue.len(), Ordering::Release);
        if !st.spinning && st.notified == 0 {
            if st.idle > 0 {
                st.notified += 1;
                shared.work.notify_one();
            } else if st.running < shared.parallelism {
                spawn_worker(shared, &mut st);
            }
        }
        if st.watchdog_waiting {
            st.watchdog_waiting = false;
            shared.watch.notify_one();
        }
    }
}

impl Drop for SyncPool {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_all();
        self.shared.watch.notify_all();
    }
}

fn spawn_worker(shared: &Arc<Shared>, st: &mut State) {
    if st.workers >= MAX_WORKERS {
        return;
    }
    let me = Arc::clone(shared);
    let spawned = std::thread::Builder::new().name("scriptling-plugin-sync".into()).spawn(move || work(&me));
    if spawned.is_ok() {
        st.workers += 1;
        // It looks at the queue as soon as it starts.
        st.notified += 1;
    }
}

fn work(shared: &Arc<Shared>) {
    let _runtime = shared.runtime.as_ref().map(|cell| cell.wait().enter());
    let mut st = lock(&shared.state);
    st.notified = st.notified.saturating_sub(1);
    loop {
        if let Some(job) = st.queue.pop_front() {
            shared.queued.store(st.queue.len(), Ordering::Release);
            st.started += 1;
            st.running += 1;
            // More work and nobody else awake for it: bring in one more
            // worker, up to the core count.
            if !st.queue.is_empty() && !st.spinning && st.notified == 0 && st.running < shared.parallelism {
                if st.idle > 0 {
                    st.notified += 1;
                    shared.work.notify_one();
                } else {
                    spawn_worker(shared, &mut st);
                }
            }
            drop(st);
            job();
            st = lock(&shared.state);
            st.running -= 1;
            continue;
        }
        if st.closed {
            st.workers -= 1;
            return;
        }
        if !st.spinning {
            st.spinning = true;
            drop(st);
            spin_for_work(shared);
            st = lock(&shared.state);
            st.spinning = false;
            if !st.queue.is_empty() {
                continue;
            }
        }
        st.idle += 1;
        let (guard, timeout) = shared.work.wait_timeout(st, IDLE_EXIT).unwrap_or_else(|p| p.into_inner());
        st = guard;
        st.idle -= 1;
        st.notified = st.notified.saturating_sub(1);
        if timeout.timed_out() && st.queue.is_empty() && st.workers > 1 {
            st.workers -= 1;
            return;
        }
    }
}

fn spin_for_work(shared: &Shared) {
    let deadline = Instant::now() + SPIN;
    let mut turns = 0u32;
    while shared.queued.load(Ordering::Acquire) == 0 {
        std::hint::spin_loop();
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(64) {
            if Instant::now() >= deadline {
                return;
            }
            std::thread::yield_now();
        }
    }
}

/// Adds a worker whenever queued work stops making progress (every worker
/// is blocked in a slow handler).
fn watch(shared: &Arc<Shared>) {
    let mut st = lock(&shared.state);
    loop {
        if st.closed {
            return;
        }
        if st.queue.is_empty() {
            st.watchdog_waiting = true;
            st = shared.watch.wait(st).unwrap_or_else(|p| p.into_inner());
            continue;
        }
        let started = st.started;
        st = shared.watch.wait_timeout(st, STALL).unwrap_or_else(|p| p.into_inner()).0;
        if !st.queue.is_empty() && st.started == started && st.notified == 0 {
            if st.idle > 0 {
                st.notified += 1;
                shared.work.notify_one();
            } else {
                spawn_worker(shared, &mut st);
            }
        }
    }
}

/// The number of cores this process may use, asked once: it reads cgroup
/// files, which is a measurable part of a plugin's start-up.
pub(crate) fn parallelism() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, usize::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn runs_every_job() {
        let pool = SyncPool::new(None, 2);
        let (tx, rx) = mpsc::channel();
        for i in 0..1000 {
            let tx = tx.clone();
            pool.submit(move || tx.send(i).unwrap());
        }
        let mut got: Vec<i32> = (0..1000).map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn blocked_workers_do_not_hold_up_other_jobs() {
        let pool = SyncPool::new(None, 2);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        // More blocked jobs than cores.
        for _ in 0..8 {
            let rx = Arc::clone(&release_rx);
            pool.submit(move || {
                let _ = rx.lock().map(|r| r.recv_timeout(Duration::from_secs(10)));
            });
        }
        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        pool.submit(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).expect("the quick job ran");
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        for _ in 0..8 {
            let _ = release_tx.send(());
        }
    }
}
