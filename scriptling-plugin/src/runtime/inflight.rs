//! [`InFlight`]: the requests that still owe an answer, and the switch that
//! stops new ones, so shutdown can wait for exactly the requests it let in.
//!
//! Both live under one mutex: a request either entered before closing (and
//! shutdown waits for it) or is refused (and answered so): there is no
//! moment in which one slips past both.

use std::sync::Arc;
use std::time::Instant;

#[cfg(scriptling_loom)]
use crate::support::sync::wait;
use crate::support::sync::{Condvar, Mutex, lock, wait_for};

#[derive(Default)]
pub(crate) struct InFlight {
    state: Mutex<State>,
    idle: Condvar,
}

#[derive(Default)]
struct State {
    count: usize,
    closing: bool,
    /// Threads waiting for the count to reach zero (a condvar signal is a
    /// system call even with nobody waiting, so it is sent only to someone).
    waiters: usize,
    /// When the count last fell to zero (a connection's idle time counts
    /// from the later of this and the last request read), kept once
    /// [`InFlight::time_finishes`] asked: a clock read every call otherwise.
    last_finished: Option<Instant>,
    timed: bool,
}

/// Held by a request until its answer has been handed over.
pub(crate) struct InFlightGuard(Arc<InFlight>);

impl InFlight {
    /// Counts a new request, unless closing has begun (`None`: refuse it).
    pub(crate) fn enter(self: &Arc<Self>) -> Option<InFlightGuard> {
        let mut state = lock(&self.state);
        if state.closing {
            return None;
        }
        state.count += 1;
        Some(InFlightGuard(Arc::clone(self)))
    }

    /// Refuses new requests from now on.
    pub(crate) fn close(&self) {
        lock(&self.state).closing = true;
    }

    pub(crate) fn count(&self) -> usize {
        lock(&self.state).count
    }

    /// Keeps when the count falls to zero, for [`last_finished`](Self::last_finished).
    pub(crate) fn time_finishes(&self) {
        lock(&self.state).timed = true;
    }

    /// When the last request in flight finished (`None` before any did, or
    /// before [`time_finishes`](Self::time_finishes)).
    pub(crate) fn last_finished(&self) -> Option<Instant> {
        lock(&self.state).last_finished
    }

    /// Waits until no request is in flight, or `deadline` has passed.
    /// Returns whether it became idle.
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
        let mut state = lock(&self.state);
        while state.count > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
            state.waiters += 1;
            state = wait_for(&self.idle, state, left);
            state.waiters -= 1;
        }
        true
    }

    /// Waits until no request is in flight (for the model checks, where
    /// time does not pass).
    #[cfg(scriptling_loom)]
    fn wait_until_idle(&self) {
        let mut state = lock(&self.state);
        while state.count > 0 {
            state.waiters += 1;
            state = wait(&self.idle, state);
            state.waiters -= 1;
        }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        state.count -= 1;
        if state.count == 0 {
            if state.timed {
                state.last_finished = Some(Instant::now());
            }
            if state.waiters > 0 {
                self.0.idle.notify_all();
            }
        }
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn waits_for_the_last_guard_and_refuses_once_closing() {
        let inflight = Arc::new(InFlight::default());
        let a = inflight.enter().unwrap();
        let b = inflight.enter().unwrap();
        assert!(!inflight.wait_idle(Instant::now() + Duration::from_millis(10)));
        inflight.close();
        assert!(inflight.enter().is_none(), "refused once closing");
        let waiter = std::thread::spawn({
            let inflight = Arc::clone(&inflight);
            move || inflight.wait_idle(Instant::now() + Duration::from_secs(5))
        });
        drop(a);
        drop(b);
        assert!(waiter.join().unwrap());
        assert_eq!(inflight.count(), 0);
    }

    #[test]
    fn the_last_finish_is_kept_only_once_asked() {
        let inflight = Arc::new(InFlight::default());
        drop(inflight.enter().unwrap());
        assert_eq!(inflight.last_finished(), None, "no clock read for nobody");
        inflight.time_finishes();
        let before = Instant::now();
        let (a, b) = (inflight.enter().unwrap(), inflight.enter().unwrap());
        drop(a);
        assert_eq!(inflight.last_finished(), None, "one still in flight");
        drop(b);
        assert!(inflight.last_finished().is_some_and(|at| at >= before));
    }
}

/// Every interleaving of a request arriving while shutdown begins (see
/// ARCHITECTURE.md).
#[cfg(all(test, scriptling_loom))]
mod model {
    use super::*;
    use crate::support::sync::{AtomicBool, Ordering, thread};

    /// A request is either refused or waited for: shutdown never finishes
    /// while a request it let in is still running.
    #[test]
    fn a_request_is_refused_or_waited_for() {
        crate::support::sync::model(|| {
            let inflight = Arc::new(InFlight::default());
            let running = Arc::new(AtomicBool::new(false));
            let request = {
                let (inflight, running) = (Arc::clone(&inflight), Arc::clone(&running));
                thread::spawn(move || {
                    if let Some(guard) = inflight.enter() {
                        running.store(true, Ordering::SeqCst);
                        running.store(false, Ordering::SeqCst);
                        drop(guard);
                    }
                })
            };
            inflight.close();
            inflight.wait_until_idle();
            assert!(!running.load(Ordering::SeqCst), "shutdown finished with a request running");
            request.join().unwrap();
        });
    }
}
