//! [`SyncPool`]: the threads that run sync handlers.
//!
//! Sync handlers may block for as long as they like: file I/O, sleeping,
//! waiting for the host to answer a callback. The pool keeps the number of
//! threads *pulling* work at the core count under load, and lends out a
//! thread's place whenever its handler blocks:
//!
//! - a handler that waits on the host says so (through the call context's
//!   blocking hook), and the pool at once starts or wakes another thread
//!   for the work queued behind it;
//! - a handler that blocks on anything else is noticed by a watchdog: when
//!   queued work has made no progress for [`STALL`], it looks at the running
//!   threads' scheduler states and adds a thread only if fewer than the core
//!   count are runnable (a handler that computes for long keeps the cores
//!   busy, and more threads would only compete for them);
//! - after each job a worker spins briefly ([`SPIN`]) for the next one, so
//!   back-to-back requests need no thread wake-up;
//! - a job can be *deferred* (the stdio reading, lent while the thread that
//!   read a request runs it): the pool hands it to another thread only once
//!   it has waited [`GRACE`] (a spinning worker takes it then; the watchdog
//!   within [`STALL`] otherwise), or at once if the lending thread starts
//!   waiting on the host. The lender takes it back if nobody did: a quick
//!   request is read and run on one thread, with no hand-over at all.
//!
//! The pool never grows past `max_threads`. When every one of those threads
//! is waiting on the host, queued work can only run once the host answers,
//! and the host may be waiting for exactly that work (a callback that calls
//! back into the plugin): such work is refused at once, with a reason, and
//! never left to wait.
//!
//! Why not a crate: `tokio::task::spawn_blocking` wakes or spawns a thread
//! per job (the benchmark measured ~3.4 context switches per call against
//! the protocol floor's 1, and 64 pipelined calls grew dozens of threads),
//! and neither it nor `rayon`, `threadpool` or `blocking` can lend a blocked
//! thread's place or refuse work that would deadlock.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use crate::call::context::{self, BlockingHook};
use crate::support::{lock, panic_message};

/// How long queued work may sit without progress before a worker is added.
const STALL: Duration = Duration::from_millis(1);
/// How long a worker spins for new work after finishing a job.
const SPIN: Duration = Duration::from_micros(50);
/// How long a deferred job waits before another thread may take it.
const GRACE: Duration = Duration::from_micros(50);
/// How long the watchdog keeps ticking after the last sign of work.
const ACTIVE: Duration = Duration::from_millis(100);
/// How long an idle worker waits before leaving (one always stays).
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// Work for the pool.
pub(crate) trait Job: Send {
    /// Runs the job on a pool thread.
    fn run(self: Box<Self>);
    /// The job will never run: all the pool's threads are waiting on the
    /// host. Called instead of `run`, on whichever thread noticed.
    fn refuse(self: Box<Self>, reason: String);
    /// Whether the job must run however busy the pool is (reading the
    /// host's input: the answers the waiting threads need arrive through
    /// it). Such a job is never refused; it gets a thread beyond the limit
    /// if it must.
    fn essential(&self) -> bool {
        false
    }
}

pub(crate) struct SyncPool {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Every worker's slot, for the watchdog to read their CPU clocks.
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Parked workers wait here.
    work: Condvar,
    /// The watchdog waits here.
    watch: Condvar,
    /// Queue length, for the spinner to peek at without the lock.
    queued: AtomicUsize,
    /// Running workers whose job is waiting on the host (atomic, so a
    /// thread starting or stopping such a wait takes the lock only when
    /// work is queued).
    on_host: AtomicUsize,
    /// Threads past `max_threads` exist (rare): the saturation check must
    /// look closer.
    beyond_limit: std::sync::atomic::AtomicBool,
    /// When the deferred job becomes due, in nanoseconds since `epoch`
    /// (0: none), for the spinner to watch without the lock.
    deferred_due: std::sync::atomic::AtomicU64,
    epoch: Instant,
    /// Set once the runtime is built (stdio starts reading before that, so
    /// the handshake does not wait for it).
    runtime: Option<Arc<OnceLock<Handle>>>,
    /// Asked of the system only when a second worker is considered: the
    /// question reads cgroup files, which the first answer need not wait for.
    parallelism: OnceLock<usize>,
    max_threads: usize,
    /// Started with the first worker, not with the pool, for the same reason.
    watchdog: std::sync::Once,
}

type Queue = VecDeque<Box<dyn Job>>;

#[derive(Default)]
struct State {
    queue: Queue,
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
    /// The deferred job, if any, and when it becomes due.
    deferred: Option<(Box<dyn Job>, Instant)>,
    /// Jobs deferred so far: with `started`, the watchdog's sign of activity.
    defers: u64,
    /// The watchdog is waiting with no deadline (the pool was idle).
    watchdog_waiting: bool,
    closed: bool,
}

impl State {
    /// Workers that can take a job now (parked, spinning, or about to look).
    fn free(&self) -> usize {
        self.workers - self.running
    }

    /// Whether the deferred job has waited its grace.
    fn deferred_is_due(&self) -> bool {
        self.deferred.as_ref().is_some_and(|(_, due)| *due <= Instant::now())
    }
}

impl SyncPool {
    /// A pool whose workers run inside `runtime`'s context (so handlers can
    /// use `tokio::spawn` and `Handle::current()`).
    ///
    /// `parallelism` is the number of workers that pull work at once under
    /// load (`None`: the core count, asked when first needed); `max_threads`
    /// the most it will ever run.
    pub(crate) fn new(runtime: Option<Arc<OnceLock<Handle>>>, parallelism: Option<usize>, max_threads: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            slots: Mutex::new(Vec::new()),
            work: Condvar::new(),
            watch: Condvar::new(),
            queued: AtomicUsize::new(0),
            on_host: AtomicUsize::new(0),
            beyond_limit: std::sync::atomic::AtomicBool::new(false),
            deferred_due: std::sync::atomic::AtomicU64::new(0),
            epoch: Instant::now(),
            runtime,
            parallelism: parallelism.map(|n| OnceLock::from(n.max(1))).unwrap_or_default(),
            max_threads: max_threads.max(1),
            watchdog: std::sync::Once::new(),
        });
        SyncPool { shared }
    }

    /// Runs `job` on a pool thread, or refuses it at once if it could only
    /// wait for threads that are all waiting on the host.
    pub(crate) fn submit(&self, job: Box<dyn Job>) {
        let shared = &self.shared;
        let mut st = lock(&shared.state);
        st.queue.push_back(job);
        shared.queued.store(st.queue.len(), Ordering::SeqCst);
        if !st.spinning && st.notified == 0 {
            if st.idle > 0 {
                st.notified += 1;
                shared.work.notify_one();
            } else if shared.below_parallelism(st.running) {
                spawn_worker(shared, &mut st);
            }
        }
        if st.watchdog_waiting {
            st.watchdog_waiting = false;
            shared.watch.notify_one();
        }
        shared.refuse_if_starved(st);
        start_watchdog(shared);
    }

    /// Holds `job` back for [`GRACE`]: after that a spinning worker (or the
    /// watchdog, within [`STALL`]) runs it, or at once if the calling thread
    /// starts waiting on the host. At most one job is deferred at a time.
    pub(crate) fn defer(&self, job: Box<dyn Job>) {
        let shared = &self.shared;
        let due = Instant::now() + GRACE;
        let mut st = lock(&shared.state);
        debug_assert!(st.deferred.is_none(), "one deferred job at a time");
        st.deferred = Some((job, due));
        st.defers += 1;
        shared.deferred_due.store(shared.nanos(due).max(1), Ordering::Release);
        if st.watchdog_waiting {
            st.watchdog_waiting = false;
            shared.watch.notify_one();
        }
        drop(st);
        start_watchdog(shared);
    }

    /// Takes the deferred job back if nobody has started it.
    pub(crate) fn reclaim(&self) -> Option<Box<dyn Job>> {
        let shared = &self.shared;
        let mut st = lock(&shared.state);
        let (job, _) = st.deferred.take()?;
        shared.deferred_due.store(0, Ordering::Release);
        Some(job)
    }

    /// Whether every thread but the calling one (a pool thread running a
    /// job) is waiting on the host and the pool is at its limit: a call
    /// taken now could only run on a thread past the limit.
    pub(crate) fn saturated(&self) -> bool {
        let shared = &self.shared;
        if !shared.beyond_limit.load(Ordering::Acquire) {
            return false;
        }
        let st = lock(&shared.state);
        st.workers > shared.max_threads && shared.on_host() + 1 >= st.running
    }

    /// Counts for tests and reports: (threads, running, waiting on host, queued).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize, usize) {
        let st = lock(&self.shared.state);
        (st.workers, st.running, self.shared.on_host(), st.queue.len())
    }
}

impl Drop for SyncPool {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_all();
        self.shared.watch.notify_all();
    }
}

impl Shared {
    /// Workers that pull work at once under load (the core count).
    fn parallelism(&self) -> usize {
        *self.parallelism.get_or_init(parallelism)
    }

    /// Whether another worker may be brought in while `running` run: the
    /// first never waits for the core count.
    fn below_parallelism(&self, running: usize) -> bool {
        let busy = running.saturating_sub(self.on_host());
        busy == 0 || busy < self.parallelism()
    }

    fn on_host(&self) -> usize {
        self.on_host.load(Ordering::SeqCst)
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Moves the deferred job to the queue's front (it is due, or its
    /// lender blocked); the caller then finds it a thread.
    fn release_deferred(&self, st: &mut State) -> bool {
        let Some((job, _)) = st.deferred.take() else { return false };
        self.deferred_due.store(0, Ordering::Release);
        st.queue.push_front(job);
        self.queued.store(st.queue.len(), Ordering::SeqCst);
        true
    }

    /// Takes the deferred job if it is due.
    fn take_due(&self, st: &mut State) -> Option<Box<dyn Job>> {
        if !st.deferred_is_due() {
            return None;
        }
        self.deferred_due.store(0, Ordering::Release);
        st.deferred.take().map(|(job, _)| job)
    }

    /// Refuses the queued jobs when no thread can ever take them without
    /// the host answering first: every thread is busy, the pool is full,
    /// and every busy thread is waiting on the host.
    fn refuse_if_starved(self: &Arc<Self>, mut st: MutexGuard<'_, State>) {
        let starved =
            !st.queue.is_empty() && st.free() == 0 && st.workers >= self.max_threads && self.on_host() >= st.running;
        if !starved {
            return;
        }
        let (essential, refused): (Queue, Queue) = st.queue.drain(..).partition(|job| job.essential());
        st.queue = essential;
        self.queued.store(st.queue.len(), Ordering::Release);
        if !st.queue.is_empty() && st.notified == 0 {
            // Beyond the limit: nothing else can run it.
            spawn_worker_beyond_limit(self, &mut st);
        }
        let threads = self.max_threads;
        drop(st);
        if refused.is_empty() {
            return;
        }
        let reason = format!(
            "the plugin cannot take this call now: all {threads} of its threads for sync handlers are waiting for \
             the host to answer callbacks, and this call could only run after one of them is answered \
             (raise Plugin::max_sync_threads, or make the handlers that call back async)"
        );
        for job in refused {
            job.refuse(reason.clone());
        }
    }

    /// Brings in a thread for queued work if none is free to take it.
    fn cover_queue(self: &Arc<Self>, st: &mut State) {
        if st.queue.is_empty() || st.free() > 0 || st.notified > 0 {
            return;
        }
        if st.idle > 0 {
            st.notified += 1;
            self.work.notify_one();
        } else {
            spawn_worker(self, st);
        }
    }
}

/// A pool thread's hook: its handler is waiting on the host.
struct PoolThread(Arc<Shared>);

impl BlockingHook for PoolThread {
    fn enter(&self) {
        let shared = &self.0;
        // Paired with `submit`, which publishes the queue length before it
        // reads `on_host`: one of the two always sees the other.
        shared.on_host.fetch_add(1, Ordering::SeqCst);
        if shared.queued.load(Ordering::SeqCst) == 0 && shared.deferred_due.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut st = lock(&shared.state);
        // A job this thread deferred cannot wait for it any more.
        shared.release_deferred(&mut st);
        shared.cover_queue(&mut st);
        shared.refuse_if_starved(st);
    }

    fn exit(&self) {
        self.0.on_host.fetch_sub(1, Ordering::SeqCst);
    }
}

fn spawn_worker(shared: &Arc<Shared>, st: &mut State) {
    if st.workers >= shared.max_threads {
        return;
    }
    spawn_worker_beyond_limit(shared, st);
}

fn spawn_worker_beyond_limit(shared: &Arc<Shared>, st: &mut State) {
    if st.workers >= shared.max_threads {
        shared.beyond_limit.store(true, Ordering::Release);
    }
    let me = Arc::clone(shared);
    let spawned = std::thread::Builder::new().name("plugin-sync".into()).spawn(move || work(&me));
    if spawned.is_ok() {
        st.workers += 1;
        // It looks at the queue as soon as it starts.
        st.notified += 1;
    }
}

/// A worker as the watchdog sees it.
struct Slot {
    thread: Option<ThreadState>,
    running: std::sync::atomic::AtomicBool,
}

/// Unregisters a worker's slot when its thread ends.
struct Registered<'a>(&'a Shared, Arc<Slot>);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        lock(&self.0.slots).retain(|s| !Arc::ptr_eq(s, &self.1));
    }
}

/// A pool thread's runtime, and its entry into it once a job needed it.
type ThreadRuntime = (Option<Arc<OnceLock<Handle>>>, Option<Entered>);

thread_local! {
    static RUNTIME: std::cell::RefCell<ThreadRuntime> = const { std::cell::RefCell::new((None, None)) };
}

/// A thread's entry into a runtime: the guard, and the handle it borrows,
/// which live as long as the thread and are freed together, the guard first.
struct Entered {
    guard: std::mem::ManuallyDrop<tokio::runtime::EnterGuard<'static>>,
    handle: std::ptr::NonNull<Handle>,
}

impl Entered {
    fn new(handle: Handle) -> Self {
        let handle = std::ptr::NonNull::from(Box::leak(Box::new(handle)));
        // SAFETY: the handle is a heap allocation of our own that stays
        // where it is until `drop`, which drops the guard before it.
        let guard = unsafe { handle.as_ref() }.enter();
        Self { guard: std::mem::ManuallyDrop::new(guard), handle }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // SAFETY: the guard is dropped once, here, before the handle it
        // borrows; the handle came from `Box::leak` in `new` and nothing
        // else frees it.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.guard);
            drop(Box::from_raw(self.handle.as_ptr()));
        }
    }
}

/// Makes the pool's runtime current on this thread, waiting the moment it
/// takes to be built (so handlers can use `tokio::spawn` and
/// `Handle::current()`). Threads start without it: reading the host's
/// input, and answering the handshake, need no runtime.
pub(crate) fn enter_runtime() {
    RUNTIME.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.1.is_some() {
            return;
        }
        let Some(cell) = slot.0.clone() else { return };
        slot.1 = Some(Entered::new(cell.wait().clone()));
    });
}

/// Leaves the runtime when the pool thread ends, before thread-locals are
/// torn down (tokio's own may already be gone by the time ours is).
struct LeaveRuntime;

impl Drop for LeaveRuntime {
    fn drop(&mut self) {
        let entered = RUNTIME.with(|slot| slot.borrow_mut().1.take());
        drop(entered);
    }
}

fn work(shared: &Arc<Shared>) {
    RUNTIME.with(|slot| slot.borrow_mut().0.clone_from(&shared.runtime));
    let _leave = LeaveRuntime;
    context::set_blocking_hook(Arc::new(PoolThread(Arc::clone(shared))));
    let slot =
        Arc::new(Slot { thread: ThreadState::of_this_thread(), running: std::sync::atomic::AtomicBool::new(false) });
    lock(&shared.slots).push(Arc::clone(&slot));
    let _registered = Registered(shared, Arc::clone(&slot));
    let mut st = lock(&shared.state);
    st.notified = st.notified.saturating_sub(1);
    loop {
        let next = match st.queue.pop_front() {
            Some(job) => Some(job),
            None => shared.take_due(&mut st),
        };
        if let Some(job) = next {
            shared.queued.store(st.queue.len(), Ordering::Release);
            st.started += 1;
            st.running += 1;
            // More work and nobody else awake for it: bring in one more
            // worker, up to the core count.
            if !st.queue.is_empty() && !st.spinning && st.notified == 0 && shared.below_parallelism(st.running) {
                if st.idle > 0 {
                    st.notified += 1;
                    shared.work.notify_one();
                } else {
                    spawn_worker(shared, &mut st);
                }
            }
            drop(st);
            slot.running.store(true, Ordering::Release);
            // Jobs catch their handlers' panics themselves; this keeps the
            // pool's counts right should anything else in a job panic.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| job.run())) {
                eprintln!("scriptling-plugin: a sync job panicked: {}", panic_message(&*p));
            }
            slot.running.store(false, Ordering::Release);
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
            if !st.queue.is_empty() || st.deferred_is_due() {
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
    let due = |shared: &Shared| {
        let due = shared.deferred_due.load(Ordering::Acquire);
        due != 0 && shared.nanos(Instant::now()) >= due
    };
    while shared.queued.load(Ordering::Acquire) == 0 && !due(shared) {
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

/// Adds a worker whenever queued work stops making progress and the cores
/// are not all busy computing (some worker is blocked in a slow handler),
/// and hands a deferred job that has come due to a thread when no spinning
/// worker took it.
///
/// While the pool is busy it ticks every [`STALL`] (deferred jobs come and
/// go many thousand times a second without telling it); idle, it waits to
/// be told of new work.
/// Starts the pool's watchdog, once: from the first `submit` or `defer`,
/// after the work they bring has a thread. (Started from the old reader
/// thread instead, it once slowed every later call, sequential p50
/// ~22 µs -> ~35 µs, for reasons never understood.)
fn start_watchdog(shared: &Arc<Shared>) {
    shared.watchdog.call_once(|| {
        let watchdog = Arc::clone(shared);
        let _ = std::thread::Builder::new().name("plugin-watchdog".into()).spawn(move || watch(&watchdog));
    });
}

fn watch(shared: &Arc<Shared>) {
    let mut st = lock(&shared.state);
    let mut seen = (st.started, st.defers);
    let mut last_active = Instant::now();
    loop {
        if st.closed {
            return;
        }
        if (st.started, st.defers) != seen {
            seen = (st.started, st.defers);
            last_active = Instant::now();
        }
        if st.deferred_is_due() && !st.spinning && st.notified == 0 && shared.release_deferred(&mut st) {
            shared.cover_queue(&mut st);
            if st.notified == 0 && st.free() == 0 {
                // The reading must go on, past the limit if need be.
                spawn_worker_beyond_limit(shared, &mut st);
            }
        }
        if st.queue.is_empty() {
            if st.deferred.is_none() && last_active.elapsed() > ACTIVE {
                st.watchdog_waiting = true;
                st = shared.watch.wait(st).unwrap_or_else(|p| p.into_inner());
            } else {
                st = shared.watch.wait_timeout(st, STALL).unwrap_or_else(|p| p.into_inner()).0;
            }
            continue;
        }
        let started = st.started;
        st = shared.watch.wait_timeout(st, STALL).unwrap_or_else(|p| p.into_inner()).0;
        if st.queue.is_empty() || st.started != started || st.notified != 0 {
            continue;
        }
        drop(st);
        let computing = runnable_workers(shared);
        st = lock(&shared.state);
        if computing >= shared.parallelism() || st.queue.is_empty() || st.notified != 0 {
            continue;
        }
        if st.idle > 0 {
            st.notified += 1;
            shared.work.notify_one();
        } else {
            spawn_worker(shared, &mut st);
        }
    }
}

/// How many workers running a job are runnable (computing, or waiting for
/// a core) rather than blocked. A worker whose state cannot be read counts
/// as blocked, so the pool grows as it would without this check.
fn runnable_workers(shared: &Shared) -> usize {
    let slots = lock(&shared.slots).clone();
    slots
        .iter()
        .filter(|slot| slot.running.load(Ordering::Acquire))
        .filter(|slot| slot.thread.as_ref().and_then(ThreadState::runnable) == Some(true))
        .count()
}

/// A thread's scheduler state, readable from other threads (Linux's
/// `/proc/self/task/<tid>/stat`); elsewhere unknown.
struct ThreadState {
    #[cfg(target_os = "linux")]
    stat: std::path::PathBuf,
}

impl ThreadState {
    fn of_this_thread() -> Option<ThreadState> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: gettid takes no arguments and cannot fail.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            Some(ThreadState { stat: format!("/proc/self/task/{tid}/stat").into() })
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Whether the thread is runnable (`R`), as opposed to sleeping or
    /// waiting on I/O; `None` if unknown (or the thread has ended).
    fn runnable(&self) -> Option<bool> {
        #[cfg(target_os = "linux")]
        {
            // "tid (name) S ...": the state follows the last parenthesis.
            let stat = std::fs::read_to_string(&self.stat).ok()?;
            let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
            Some(state == 'R')
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

/// The number of cores this process may use, asked once: it reads cgroup
/// files, which is a measurable part of a plugin's start-up.
pub(crate) fn parallelism() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, usize::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A job from a closure; refusals are reported on `refused`.
    struct Task<F> {
        run: F,
        refused: Option<mpsc::Sender<String>>,
    }

    impl<F: FnOnce() + Send> Job for Task<F> {
        fn run(self: Box<Self>) {
            (self.run)()
        }
        fn refuse(self: Box<Self>, reason: String) {
            if let Some(tx) = self.refused {
                let _ = tx.send(reason);
            }
        }
    }

    fn task(run: impl FnOnce() + Send + 'static) -> Box<dyn Job> {
        Box::new(Task { run, refused: None })
    }

    fn wait_for(pool: &SyncPool, what: impl Fn((usize, usize, usize, usize)) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !what(pool.counts()) {
            assert!(Instant::now() < deadline, "pool state never became right: {:?}", pool.counts());
            std::thread::yield_now();
        }
    }

    #[test]
    fn runs_every_job() {
        let pool = SyncPool::new(None, Some(2), 64);
        let (tx, rx) = mpsc::channel();
        for i in 0..1000 {
            let tx = tx.clone();
            pool.submit(task(move || tx.send(i).unwrap()));
        }
        let mut got: Vec<i32> = (0..1000).map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn blocked_workers_do_not_hold_up_other_jobs() {
        let pool = SyncPool::new(None, Some(2), 64);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        // More blocked jobs than cores.
        for _ in 0..8 {
            let rx = Arc::clone(&release_rx);
            pool.submit(task(move || {
                let _ = lock(&rx).recv_timeout(Duration::from_secs(10));
            }));
        }
        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).expect("the quick job ran");
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        for _ in 0..8 {
            let _ = release_tx.send(());
        }
    }

    /// A job that waits "on the host" (its hook told) until released.
    fn on_host(gate: &Arc<(Mutex<bool>, Condvar)>) -> Box<dyn Job> {
        let gate = Arc::clone(gate);
        task(move || {
            let call = crate::call::context::CallState::new("f".into());
            let _waiting = call.wait_on_host();
            let (open, cv) = &*gate;
            let mut open = lock(open);
            while !*open {
                open = cv.wait(open).unwrap();
            }
        })
    }

    #[test]
    fn threads_waiting_on_the_host_lend_their_place_at_once() {
        let pool = SyncPool::new(None, Some(1), 64);
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        for _ in 0..20 {
            pool.submit(on_host(&gate));
        }
        // Each waiting thread brought in the next without the watchdog's
        // stall delay: 20 threads, all waiting, none queued.
        wait_for(&pool, |(workers, _, waiting, queued)| workers >= 20 && waiting == 20 && queued == 0);
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).expect("another call still runs");
        *lock(&gate.0) = true;
        gate.1.notify_all();
        wait_for(&pool, |(_, running, waiting, _)| running == 0 && waiting == 0);
    }

    #[test]
    fn when_every_thread_waits_on_the_host_new_work_is_refused_at_once() {
        let pool = SyncPool::new(None, Some(1), 4);
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        for _ in 0..4 {
            pool.submit(on_host(&gate));
        }
        wait_for(&pool, |(workers, _, waiting, _)| workers == 4 && waiting == 4);
        let (refused_tx, refused_rx) = mpsc::channel();
        let started = Instant::now();
        pool.submit(Box::new(Task { run: || panic!("must not run"), refused: Some(refused_tx) }));
        let reason = refused_rx.recv_timeout(Duration::from_secs(1)).expect("refused at once");
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(reason.contains("all 4 of its threads for sync handlers are waiting"), "{reason}");
        // Once the host answers, the pool serves again.
        *lock(&gate.0) = true;
        gate.1.notify_all();
        wait_for(&pool, |(_, running, waiting, _)| running == 0 && waiting == 0);
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn jobs_that_compute_for_long_add_no_threads_jobs_that_block_do() {
        let pool = SyncPool::new(None, Some(2), 64);
        let (tx, rx) = mpsc::channel();
        // Twenty jobs that each compute for 20 ms: the cores are busy, so
        // the watchdog must not add threads for them.
        for _ in 0..20 {
            let tx = tx.clone();
            pool.submit(task(move || {
                let until = Instant::now() + Duration::from_millis(20);
                let mut x = 0u64;
                while Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                tx.send(()).unwrap();
            }));
        }
        for _ in 0..20 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        let (computing_threads, ..) = pool.counts();
        assert!(computing_threads <= 6, "{computing_threads} threads for two cores of computing");
        // Twenty jobs that sleep: the watchdog adds threads so they overlap.
        let started = Instant::now();
        for _ in 0..20 {
            let tx = tx.clone();
            pool.submit(task(move || {
                std::thread::sleep(Duration::from_millis(50));
                tx.send(()).unwrap();
            }));
        }
        for _ in 0..20 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        assert!(started.elapsed() < Duration::from_millis(500), "blocked jobs overlapped: {:?}", started.elapsed());
    }

    #[test]
    fn a_deferred_job_is_taken_back_if_quick_and_run_elsewhere_if_not() {
        let pool = SyncPool::new(None, Some(2), 8);
        let (tx, rx) = mpsc::channel();
        // Quick: the lender takes it back before anyone else runs it.
        let ran = tx.clone();
        pool.defer(task(move || ran.send("deferred ran").unwrap()));
        assert!(pool.reclaim().is_some());
        assert!(pool.reclaim().is_none());
        // Slow: nobody reclaims it, so the watchdog runs it within a few ticks.
        let started = Instant::now();
        pool.defer(task(move || tx.send("deferred ran").unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "deferred ran");
        assert!(started.elapsed() >= GRACE, "not before its grace: {:?}", started.elapsed());
        assert!(pool.reclaim().is_none(), "taken by then");
    }

    #[test]
    fn a_lender_that_waits_on_the_host_gives_up_its_deferred_job_at_once() {
        let pool = Arc::new(SyncPool::new(None, Some(2), 8));
        let (tx, rx) = mpsc::channel();
        let lender = Arc::clone(&pool);
        pool.submit(task(move || {
            let ran = tx.clone();
            lender.defer(task(move || ran.send(Instant::now()).unwrap()));
            let call = crate::call::context::CallState::new("f".into());
            let waiting = call.wait_on_host();
            let blocked_at = Instant::now();
            let taken_at: Instant = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            drop(waiting);
            assert!(taken_at.duration_since(blocked_at) < Duration::from_millis(500));
        }));
        wait_for(&pool, |(_, running, _, queued)| running == 0 && queued == 0);
    }

    #[test]
    fn a_panicking_job_leaves_the_counts_right() {
        let pool = SyncPool::new(None, Some(2), 8);
        for _ in 0..10 {
            pool.submit(task(|| panic!("job panic")));
        }
        wait_for(&pool, |(_, running, waiting, queued)| running == 0 && waiting == 0 && queued == 0);
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).expect("the pool still serves");
        let (workers, ..) = pool.counts();
        assert!(workers <= 8);
    }
}
