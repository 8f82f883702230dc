//! [`after`]: deadlines for the runtime's own bounds (the sync pool's stall
//! rule, how long an async handler waits for a callback, how long an answer
//! waits for its log records' acknowledgements), kept on one thread of the
//! process's (`plugin-timer`), so that none of them needs tokio's timer:
//! `serve_stdio` serves on a runtime built without `enable_time` too.
//!
//! The thread sleeps until the earliest deadline (or for ever, with none),
//! and is woken when an earlier one is set. An action runs on it when its
//! deadline passes, unless its [`Deadline`] was dropped first (which takes
//! it out at once: a deadline set for every callback and cancelled within
//! microseconds leaves nothing behind); actions must be quick (they hand
//! work on, they do not do it).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::support::{lock, panic_message};

type Action = Box<dyn FnOnce() + Send>;

struct Timer {
    state: Mutex<State>,
    /// The thread waits here for the earliest deadline or a new one.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The actions still to run, earliest deadline first (the id tells
    /// deadlines at the same moment apart).
    due: BTreeMap<(Instant, u64), Action>,
    next: u64,
    started: bool,
    /// The thread waits on `changed` (not running actions, which sets the
    /// deadlines a repeating check sets without waking anybody: it looks
    /// at them again before it waits).
    waiting: bool,
}

/// A pending deadline: dropping it cancels its action (a no-op once run).
/// `None`: a deadline too far away to ever pass.
#[must_use = "dropping the deadline cancels it"]
pub(crate) struct Deadline(Option<(Instant, u64)>);

impl Deadline {
    /// Lets the action run when due, whatever becomes of this handle.
    pub(crate) fn detach(self) {
        std::mem::forget(self);
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(key) = self.0 {
            lock(&the_timer().state).due.remove(&key);
        }
    }
}

fn the_timer() -> &'static Timer {
    static TIMER: OnceLock<Timer> = OnceLock::new();
    TIMER.get_or_init(|| Timer { state: Mutex::new(State::default()), changed: Condvar::new() })
}

/// Runs `action` on the timer's thread once `delay` has passed, unless the
/// returned [`Deadline`] is dropped first. A delay too long to add to now
/// never passes.
pub(crate) fn after(delay: Duration, action: impl FnOnce() + Send + 'static) -> Deadline {
    let timer = the_timer();
    let mut state = lock(&timer.state);
    state.next += 1;
    let key = Instant::now().checked_add(delay).map(|at| (at, state.next));
    if let Some(key) = key {
        let earliest = state.due.first_key_value().is_none_or(|(first, _)| key < *first);
        state.due.insert(key, Box::new(action));
        if !state.started {
            state.started = true;
            let spawned = std::thread::Builder::new().name("plugin-timer".into()).spawn(|| the_timer().run());
            if let Err(e) = spawned {
                state.started = false;
                eprintln!("scriptling-plugin: cannot start the timer thread: {e}; deadlines wait for the next one");
            }
        } else if earliest && state.waiting {
            timer.changed.notify_one();
        }
    }
    Deadline(key)
}

impl Timer {
    fn run(&self) {
        let mut state = lock(&self.state);
        loop {
            let now = Instant::now();
            let mut ready = Vec::new();
            while let Some(entry) = state.due.first_entry().filter(|entry| entry.key().0 <= now) {
                ready.push(entry.remove());
            }
            if !ready.is_empty() {
                drop(state);
                for action in ready {
                    // An action that panics must not take the thread with it.
                    if let Err(p) = catch_unwind(AssertUnwindSafe(action)) {
                        eprintln!("scriptling-plugin: a timer action panicked: {}", panic_message(&*p));
                    }
                }
                state = lock(&self.state);
                continue;
            }
            state.waiting = true;
            state = match state.due.first_key_value() {
                Some(((at, _), _)) => {
                    let left = at.saturating_duration_since(now);
                    self.changed.wait_timeout(state, left).unwrap_or_else(std::sync::PoisonError::into_inner).0
                }
                None => self.changed.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner),
            };
            state.waiting = false;
        }
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn actions_run_in_deadline_order_after_their_delay_unless_cancelled() {
        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        let sender = |label: &'static str| {
            let tx = tx.clone();
            move || tx.send((label, started.elapsed())).unwrap()
        };
        let late = after(Duration::from_millis(60), sender("late"));
        let early = after(Duration::from_millis(20), sender("early"));
        let cancelled = after(Duration::from_millis(40), sender("cancelled"));
        drop(cancelled);
        let (first, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(first, "early");
        assert!(at >= Duration::from_millis(20), "{at:?}");
        let (second, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(second, "late");
        assert!(at >= Duration::from_millis(60), "{at:?}");
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "the cancelled one never runs");
        drop((early, late));
    }

    #[test]
    fn a_deadline_an_action_sets_is_kept() {
        let (tx, rx) = mpsc::channel();
        let _far = after(Duration::from_secs(3600), || {});
        let started = Instant::now();
        after(Duration::from_millis(5), move || {
            after(Duration::from_millis(5), move || tx.send(()).unwrap()).detach();
        })
        .detach();
        rx.recv_timeout(Duration::from_secs(5)).expect("the repeated check ran");
        assert!(started.elapsed() >= Duration::from_millis(10));
    }

    #[test]
    fn an_earlier_deadline_set_while_the_thread_sleeps_wakes_it() {
        let (tx, rx) = mpsc::channel();
        let _far = after(Duration::from_secs(3600), || {});
        std::thread::sleep(Duration::from_millis(10));
        let started = Instant::now();
        let _near = after(Duration::from_millis(5), move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_cancelled_deadline_leaves_nothing_behind() {
        let far = after(Duration::from_secs(3600), || {});
        let key = far.0.expect("an hour can be added to now");
        assert!(lock(&the_timer().state).due.contains_key(&key));
        drop(far);
        assert!(!lock(&the_timer().state).due.contains_key(&key), "taken out when dropped, not when due");
    }

    #[test]
    fn a_panicking_action_leaves_the_timer_running() {
        let _boom = after(Duration::ZERO, || panic!("timer action"));
        let (tx, rx) = mpsc::channel();
        let _next = after(Duration::from_millis(5), move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
}
