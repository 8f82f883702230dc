//! The primitives the model-checked parts of the core are built on: std's,
//! or `loom`'s when built with `--cfg scriptling_loom`, so the model checks
//! explore every interleaving of the very code that ships (see
//! ARCHITECTURE.md, "Model checks").
//!
//! Only the object lock and the call state it listens to, the frame
//! writer's queue, the in-flight count and the sync pool use these;
//! everything else uses std directly. (`Arc` stays
//! std's: loom's cannot hold trait objects.)

#[cfg(not(scriptling_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(scriptling_loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(scriptling_loom))]
pub(crate) use std::thread;

#[cfg(scriptling_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(scriptling_loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(scriptling_loom)]
pub(crate) use loom::thread;

use std::time::Duration;

/// Locks `mutex`, ignoring poison (see [`crate::support::lock`]).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits on `condvar`, ignoring poison.
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits on `condvar` for at most `limit`, ignoring poison. (Under loom
/// the limit is not modelled: the wait ends only when notified. So the
/// models say nothing about what happens when a wait times out; the unit
/// tests and the stress tests cover those paths.)
pub(crate) fn wait_for<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>, limit: Duration) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, limit) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

/// Runs `f` under loom's model checker, exploring the interleavings with
/// up to three preemptions each (as tokio's own CI does with two: bugs
/// found by more are rare, and the count of interleavings grows fast).
#[cfg(all(test, scriptling_loom))]
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}
