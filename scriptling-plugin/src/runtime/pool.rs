//! [`Pool`]: the threads that run sync handlers.
//!
//! Sync handlers may block for as long as they like: file I/O, sleeping,
//! waiting for the host to answer a callback. The pool's rules:
//!
//! - A job goes to an idle thread, or to a new one, while fewer threads
//!   than cores are busy; otherwise it queues, and the next thread to
//!   finish its job takes it. So quick calls under load need no thread
//!   wake-ups, and no more threads than cores compete for the cores.
//! - A thread that finds nothing queued polls the queue for a moment
//!   (`Plugin::input_spin`, 50 µs) before it sleeps, one thread at a time:
//!   the host's next request, handed over by the reader, then needs no
//!   thread wake-up. (The runtime's one spin rule, see ARCHITECTURE.md:
//!   for requests it sits here, not in the reader.) It is off on one core,
//!   where spinning could only delay the reader it waits for.
//! - A thread whose handler waits on the host says so
//!   ([`HostWaits`](crate::call::context::HostWaits)) and stops counting as
//!   busy at once: another thread takes the work queued behind it, so the
//!   host can always call back into the plugin.
//! - A thread blocked on anything else is noticed by the one rule about
//!   time: when queued work has waited [`STALL`] with no job starting, one
//!   more thread starts. (A handler that computes for longer than that
//!   while work waits gets company the OS time-slices with it.)
//! - The pool never exceeds `max_threads`. When every one of them is
//!   waiting on the host, queued work could only run once the host answers,
//!   and the host may be waiting for exactly that work (a callback that
//!   calls back into the plugin): such work is refused at once, with a
//!   reason, never left to wait.
//!
//! Why not a crate: `tokio::task::spawn_blocking`, `rayon`, `threadpool` or
//! `blocking` either wake or spawn a thread per job (the benchmark measured
//! ~3.4 context switches per call against the protocol floor's 1, and 64
//! pipelined calls grew dozens of threads) or cap concurrency at the cores
//! whatever blocks; none can be told a thread waits on the host, nor
//! refuses work that could only deadlock.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use crate::call::context::HostWaits;
use crate::support::panic_message;
use crate::support::sync::{AtomicUsize, Condvar, Mutex, MutexGuard, Ordering, lock, thread, wait_for};

/// How long queued work may wait, with no job starting, before one more
/// thread is brought in.
const STALL: Duration = Duration::from_millis(1);
/// How long an idle thread waits for work before leaving (one always stays).
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// Work for the pool.
pub(crate) trait Job: Send + 'static {
    /// Runs the job on a pool thread.
    fn run(self: Box<Self>);
    /// The job will never run (every thread waits on the host, or the pool
    /// closed): called instead of `run`, on whichever thread noticed.
    fn refuse(self: Box<Self>, reason: String);
}

/// The threads that run sync handlers (see the module docs).
#[derive(Clone)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Idle threads wait here.
    work: Condvar,
    /// Threads that pull work at once under load: the core count.
    parallelism: usize,
    max_threads: usize,
    /// How long an idle thread polls for work before it sleeps.
    spin: Duration,
    /// How long an idle thread waits for work before leaving.
    idle_exit: Duration,
    /// Jobs queued, mirrored from the state for the polling thread to watch
    /// without the lock (polling with `try_lock` made the reader's pushes
    /// contend with it: see ARCHITECTURE.md).
    queued: AtomicUsize,
    /// Entered by every thread (so handlers can use `tokio::spawn`), and
    /// the timer of the stall rule. `None` in the model checks.
    runtime: Option<Handle>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Box<dyn Job>>,
    /// Threads alive.
    threads: usize,
    /// Threads waiting for work, not yet told to look.
    idle: usize,
    /// Idle threads told to look for work that have not yet.
    notified: usize,
    /// Threads spawned that have not yet looked for work. (Kept apart from
    /// `notified`: an idle thread that times out takes a notification it
    /// cannot tell from its own, and a starting thread must not.)
    starting: usize,
    /// Threads whose job waits on the host.
    on_host: usize,
    /// A thread polls the queue for work (one at a time).
    spinning: bool,
    /// Jobs started so far: the stall rule's measure of progress.
    started: u64,
    /// A stall check is scheduled.
    stall_check: bool,
    closed: bool,
}

impl State {
    /// Threads running a job that is not waiting on the host, or about to
    /// look for one.
    fn busy(&self) -> usize {
        self.threads - self.idle - self.on_host
    }

    /// Every thread exists and waits on the host: queued work cannot run.
    fn starved(&self, max_threads: usize) -> bool {
        !self.queue.is_empty() && self.threads >= max_threads && self.on_host >= self.threads
    }
}

impl Pool {
    /// The pool a plugin's `options` ask for: as many pulling threads as
    /// cores, at most `max_sync_threads`, spinning for `input_spin`.
    pub(crate) fn for_options(runtime: Handle, options: &crate::exports::core::Options) -> Self {
        let parallelism = crate::runtime::dispatch::parallelism();
        Self::new(Some(runtime), parallelism, options.max_sync_threads, options.input_spin)
    }

    /// A pool of at most `max_threads` threads, `parallelism` of which pull
    /// work at once, each inside `runtime`; an idle thread polls for work
    /// for `spin` before it sleeps (not on one core).
    pub(crate) fn new(runtime: Option<Handle>, parallelism: usize, max_threads: usize, spin: Duration) -> Self {
        Self::with_idle_exit(runtime, parallelism, max_threads, spin, IDLE_EXIT)
    }

    fn with_idle_exit(
        runtime: Option<Handle>,
        parallelism: usize,
        max_threads: usize,
        spin: Duration,
        idle_exit: Duration,
    ) -> Self {
        let parallelism = parallelism.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            parallelism,
            max_threads: max_threads.max(1),
            spin: if parallelism > 1 { spin } else { Duration::ZERO },
            idle_exit,
            queued: AtomicUsize::new(0),
            runtime,
        });
        Pool { shared }
    }

    /// Runs `job` on a pool thread, or refuses it at once if it could only
    /// wait for threads that all wait on the host.
    pub(crate) fn submit(&self, job: Box<dyn Job>) {
        let shared = &self.shared;
        let mut state = lock(&shared.state);
        if state.closed {
            drop(state);
            return job.refuse("the plugin is shutting down".to_owned());
        }
        state.queue.push_back(job);
        shared.queued.store(state.queue.len(), Ordering::Release);
        if state.busy() < shared.parallelism {
            shared.bring_in(&mut state);
        } else {
            shared.schedule_stall_check(&mut state);
        }
        shared.refuse_if_starved(state);
    }

    /// Refuses queued work and lets the threads leave once their jobs end.
    pub(crate) fn close(&self) {
        let mut state = lock(&self.shared.state);
        state.closed = true;
        let queued = std::mem::take(&mut state.queue);
        self.shared.queued.store(0, Ordering::Release);
        self.shared.work.notify_all();
        drop(state);
        for job in queued {
            job.refuse("the plugin is shutting down".to_owned());
        }
    }

    /// The handle a call running on one of this pool's threads uses to say
    /// it waits on the host.
    pub(crate) fn host_waits(&self) -> Arc<dyn HostWaits> {
        Arc::new(self.clone())
    }

    /// Counts for tests: (threads, on host, queued).
    #[cfg(all(test, not(scriptling_loom)))]
    fn counts(&self) -> (usize, usize, usize) {
        let state = lock(&self.shared.state);
        (state.threads, state.on_host, state.queue.len())
    }
}

impl Shared {
    /// Gets queued work a thread: an idle one, or a new one.
    fn bring_in(self: &Arc<Self>, state: &mut State) {
        if state.queue.len() <= state.notified + state.starting + usize::from(state.spinning) {
            return; // threads told already, or polling, will take it
        }
        if state.idle > 0 {
            state.idle -= 1;
            state.notified += 1;
            self.work.notify_one();
        } else if state.threads < self.max_threads {
            self.spawn(state);
        }
    }

    fn spawn(self: &Arc<Self>, state: &mut State) {
        let shared = Arc::clone(self);
        let spawned = thread::Builder::new().name("plugin-sync".into()).spawn(move || shared.work_loop());
        match spawned {
            // It looks at the queue as soon as it starts.
            Ok(_) => {
                state.threads += 1;
                state.starting += 1;
            }
            Err(e) => {
                eprintln!("scriptling-plugin: cannot start a thread for sync handlers: {e}");
                // The stall rule tries again, so queued work is not
                // stranded while the threads that exist are blocked.
                self.schedule_stall_check(state);
            }
        }
    }

    /// Asks the runtime's timer to look at the queue after [`STALL`].
    fn schedule_stall_check(self: &Arc<Self>, state: &mut State) {
        let Some(runtime) = &self.runtime else { return };
        if state.stall_check {
            return;
        }
        state.stall_check = true;
        let (shared, started) = (Arc::clone(self), state.started);
        runtime.spawn(async move {
            tokio::time::sleep(STALL).await;
            shared.check_stall(started);
        });
    }

    /// The stall rule: work still queued and no job started since `started`
    /// means every busy thread is blocked: bring in one more.
    fn check_stall(self: &Arc<Self>, started: u64) {
        let mut state = lock(&self.state);
        state.stall_check = false;
        if state.queue.is_empty() || state.closed {
            return;
        }
        if state.started == started {
            if state.idle > 0 {
                state.idle -= 1;
                state.notified += 1;
                self.work.notify_one();
            } else if state.threads < self.max_threads {
                self.spawn(&mut state);
            }
        }
        self.schedule_stall_check(&mut state);
    }

    /// Refuses the queued jobs when no thread can ever take them without
    /// the host answering first.
    fn refuse_if_starved(&self, mut state: MutexGuard<'_, State>) {
        if !state.starved(self.max_threads) {
            return;
        }
        let refused = std::mem::take(&mut state.queue);
        self.queued.store(0, Ordering::Release);
        let threads = self.max_threads;
        drop(state);
        let reason = format!(
            "the plugin cannot take this call now: all {threads} of its threads for sync handlers are waiting for \
             the host to answer callbacks, and this call could only run after one of them is answered (raise \
             Plugin::max_sync_threads, or make the handlers that call back async)"
        );
        for job in refused {
            job.refuse(reason.clone());
        }
    }

    fn work_loop(self: Arc<Self>) {
        // Handlers can use `tokio::spawn` and `Handle::current()`.
        let _runtime = self.runtime.as_ref().map(Handle::enter);
        let mut state = lock(&self.state);
        state.starting -= 1;
        loop {
            if let Some(job) = state.queue.pop_front() {
                self.queued.store(state.queue.len(), Ordering::Release);
                state.started += 1;
                drop(state);
                // Jobs catch their handlers' panics themselves; this keeps
                // the pool's counts right should anything else panic.
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| job.run())) {
                    eprintln!("scriptling-plugin: a sync job panicked: {}", panic_message(&*p));
                }
                state = lock(&self.state);
                continue;
            }
            if state.closed {
                state.threads -= 1;
                return;
            }
            if !state.spinning && !self.spin.is_zero() {
                state.spinning = true;
                drop(state);
                state = self.poll_for_work();
                state.spinning = false;
                if !state.queue.is_empty() || state.closed {
                    continue;
                }
            }
            state.idle += 1;
            state = wait_for(&self.work, state, self.idle_exit);
            if state.notified > 0 {
                // Told to look (the teller counted it out of `idle`).
                state.notified -= 1;
                continue;
            }
            // Timed out, woken spuriously, or the pool closed.
            state.idle -= 1;
            let timed_out = state.queue.is_empty() && !state.closed;
            if timed_out && state.threads > 1 {
                state.threads -= 1;
                return;
            }
        }
    }
}

impl Shared {
    /// Polls the queue for up to `spin`, yielding the core now and then
    /// (the reader may need it to read the work); returns with the state
    /// locked.
    fn poll_for_work(&self) -> MutexGuard<'_, State> {
        let deadline = std::time::Instant::now() + self.spin;
        let mut turns = 0u32;
        while self.queued.load(Ordering::Acquire) == 0 {
            turns = turns.wrapping_add(1);
            if !turns.is_multiple_of(32) {
                std::hint::spin_loop();
                continue;
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            thread::yield_now();
        }
        lock(&self.state)
    }
}

/// A thread's wait on the host, counted until dropped.
struct OnHost(Arc<Shared>);

impl HostWaits for Pool {
    fn host_wait(&self) -> Box<dyn Send> {
        let shared = &self.shared;
        let mut state = lock(&shared.state);
        state.on_host += 1;
        // This thread's place is free: bring in a thread for queued work.
        if !state.queue.is_empty() {
            shared.bring_in(&mut state);
        }
        shared.refuse_if_starved(state);
        Box::new(OnHost(Arc::clone(shared)))
    }
}

impl Drop for OnHost {
    fn drop(&mut self) {
        lock(&self.0.state).on_host -= 1;
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Instant;

    /// A job from a closure; refusals are reported on `refused`.
    struct Task<F> {
        run: F,
        refused: Option<mpsc::Sender<String>>,
    }

    impl<F: FnOnce() + Send + 'static> Job for Task<F> {
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

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build().unwrap()
    }

    fn wait_for_counts(pool: &Pool, what: impl Fn((usize, usize, usize)) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !what(pool.counts()) {
            assert!(Instant::now() < deadline, "pool state never became right: {:?}", pool.counts());
            std::thread::yield_now();
        }
    }

    #[test]
    fn runs_every_job() {
        let rt = runtime();
        let pool = Pool::new(Some(rt.handle().clone()), 2, 64, Duration::from_micros(50));
        let (tx, rx) = mpsc::channel();
        for i in 0..1000 {
            let tx = tx.clone();
            pool.submit(task(move || tx.send(i).unwrap()));
        }
        let mut got: Vec<i32> = (0..1000).map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert!(pool.counts().0 <= 2, "quick jobs need no more threads than cores: {:?}", pool.counts());
    }

    /// Threads that time out idle while others are being started must not
    /// take the starters' notifications: every thread started is counted
    /// out again.
    #[test]
    fn threads_coming_and_going_keep_the_counts_right() {
        let rt = runtime();
        let pool = Pool::with_idle_exit(Some(rt.handle().clone()), 2, 8, Duration::ZERO, Duration::from_micros(1));
        let (tx, rx) = mpsc::channel();
        for round in 0..10_000 {
            for _ in 0..3 {
                let tx = tx.clone();
                pool.submit(task(move || tx.send(round).unwrap()));
            }
            for _ in 0..3 {
                assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(round));
            }
            if round % 3 == 0 {
                std::thread::sleep(Duration::from_micros(30));
            }
        }
        // Every thread counted leaves when the pool closes: none was lost
        // to a miscount (an underflow panics the thread, which then never
        // counts itself out).
        pool.close();
        wait_for_counts(&pool, |(threads, _, _)| threads == 0);
    }

    #[test]
    fn blocked_threads_do_not_hold_up_other_jobs() {
        let rt = runtime();
        let pool = Pool::new(Some(rt.handle().clone()), 2, 64, Duration::from_micros(50));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
        // More blocked jobs than cores.
        for _ in 0..8 {
            let rx = Arc::clone(&release_rx);
            pool.submit(task(move || {
                let _ = rx.lock().unwrap().recv_timeout(Duration::from_secs(10));
            }));
        }
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).expect("the quick job ran");
        for _ in 0..8 {
            let _ = release_tx.send(());
        }
    }

    /// A job that waits "on the host" until released.
    fn on_host(pool: &Pool, gate: &Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>) -> Box<dyn Job> {
        let (gate, waits) = (Arc::clone(gate), pool.host_waits());
        task(move || {
            let _waiting = waits.host_wait();
            let (open, cv) = &*gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        })
    }

    #[test]
    fn threads_waiting_on_the_host_lend_their_place_at_once() {
        // No runtime: no stall rule, so only the host waits make room.
        let pool = Pool::new(None, 1, 64, Duration::ZERO);
        let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        for _ in 0..20 {
            pool.submit(on_host(&pool, &gate));
        }
        wait_for_counts(&pool, |(threads, waiting, queued)| threads >= 20 && waiting == 20 && queued == 0);
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).expect("another call still runs");
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        wait_for_counts(&pool, |(_, waiting, _)| waiting == 0);
    }

    #[test]
    fn when_every_thread_waits_on_the_host_new_work_is_refused_at_once() {
        let pool = Pool::new(None, 1, 4, Duration::ZERO);
        let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        for _ in 0..4 {
            pool.submit(on_host(&pool, &gate));
        }
        wait_for_counts(&pool, |(threads, waiting, _)| threads == 4 && waiting == 4);
        let (refused_tx, refused_rx) = mpsc::channel();
        pool.submit(Box::new(Task { run: || panic!("must not run"), refused: Some(refused_tx) }));
        let reason = refused_rx.recv_timeout(Duration::from_secs(1)).expect("refused at once");
        assert!(reason.contains("all 4 of its threads for sync handlers are waiting"), "{reason}");
        // Once the host answers, the pool serves again.
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        wait_for_counts(&pool, |(_, waiting, _)| waiting == 0);
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn a_panicking_job_leaves_the_counts_right_and_close_refuses_what_waits() {
        let rt = runtime();
        let pool = Pool::new(Some(rt.handle().clone()), 2, 8, Duration::from_micros(50));
        for _ in 0..10 {
            pool.submit(task(|| panic!("job panic")));
        }
        let (tx, rx) = mpsc::channel();
        pool.submit(task(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).expect("the pool still serves");
        pool.close();
        let (refused_tx, refused_rx) = mpsc::channel();
        pool.submit(Box::new(Task { run: || panic!("must not run"), refused: Some(refused_tx) }));
        assert_eq!(refused_rx.recv_timeout(Duration::from_secs(1)).unwrap(), "the plugin is shutting down");
        wait_for_counts(&pool, |(threads, _, _)| threads == 0);
    }
}

/// Every interleaving of the host-wait rule (see ARCHITECTURE.md).
#[cfg(all(test, scriptling_loom))]
mod model {
    use super::*;
    use crate::support::sync::{AtomicUsize, Ordering};

    struct Counted {
        ran: Arc<AtomicUsize>,
        refused: Arc<AtomicUsize>,
        body: Option<Box<dyn FnOnce() + Send>>,
    }

    impl Job for Counted {
        fn run(mut self: Box<Self>) {
            if let Some(body) = self.body.take() {
                body();
            }
            self.ran.fetch_add(1, Ordering::SeqCst);
        }
        fn refuse(self: Box<Self>, _: String) {
            self.refused.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// One thread at most; its job waits on the host for a second job (a
    /// callback that calls back in). The second job is refused at once, or
    /// runs: it never waits for ever behind the first.
    #[test]
    fn work_behind_a_full_pool_waiting_on_the_host_is_refused_never_stuck() {
        crate::support::sync::model(|| {
            let pool = Pool::new(None, 1, 1, Duration::ZERO);
            let (ran, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let inner_done = Arc::new(AtomicUsize::new(0));
            let (p, r, f, d) = (pool.clone(), Arc::clone(&ran), Arc::clone(&refused), Arc::clone(&inner_done));
            let body = Box::new(move || {
                let _waiting = p.host_wait();
                // "The host" sends the next call while this one waits.
                let d2 = Arc::clone(&d);
                let inner = Counted {
                    ran: Arc::clone(&r),
                    refused: Arc::clone(&f),
                    body: Some(Box::new(move || {
                        d2.fetch_add(1, Ordering::SeqCst);
                    })),
                };
                p.submit(Box::new(inner));
                // It was refused at once: the pool's one thread is this one.
                assert_eq!(f.load(Ordering::SeqCst) + d.load(Ordering::SeqCst), 1);
            });
            pool.submit(Box::new(Counted { ran: Arc::clone(&ran), refused: Arc::clone(&refused), body: Some(body) }));
            while ran.load(Ordering::SeqCst) + refused.load(Ordering::SeqCst) < 2 {
                loom::thread::yield_now();
            }
            assert_eq!(refused.load(Ordering::SeqCst), 1);
            pool.close();
        });
    }

    /// Two jobs submitted while the pool's threads come and go are both run.
    #[test]
    fn no_job_is_lost() {
        crate::support::sync::model(|| {
            let pool = Pool::new(None, 1, 2, Duration::ZERO);
            let ran = Arc::new(AtomicUsize::new(0));
            let refused = Arc::new(AtomicUsize::new(0));
            for _ in 0..2 {
                pool.submit(Box::new(Counted { ran: Arc::clone(&ran), refused: Arc::clone(&refused), body: None }));
            }
            while ran.load(Ordering::SeqCst) < 2 {
                loom::thread::yield_now();
            }
            assert_eq!(refused.load(Ordering::SeqCst), 0);
            pool.close();
        });
    }
}
