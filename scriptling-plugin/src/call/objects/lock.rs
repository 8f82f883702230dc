//! [`ObjectLock`]: who may use an object, and how: shared (`&self`) or
//! exclusive (`&mut self`), first come first served.
//!
//! The rules, all decided under one mutex by [`Access::decide`]:
//! - **Re-entry fails at once.** A call that asks for an object it holds
//!   already, in a way that conflicts (exclusive with anything, anything
//!   with exclusive), is refused with an error naming the borrow, as PyO3's
//!   "already mutably borrowed" is: waiting would wait on itself. A second
//!   shared borrow by the same call is granted, even past waiting writers
//!   (holding one and waiting for the other would deadlock).
//! - **Fair.** Borrows that must wait queue in arrival order: a shared one
//!   goes when no exclusive one waits ahead of it, an exclusive one when it
//!   is first. So a waiting writer is served once the readers ahead of it
//!   are done, however many readers keep arriving, and no reader waits
//!   behind a stream of writers for longer than their turns.
//! - **Never wait on the host.** If the borrow cannot go now and a holder
//!   is waiting for the host to answer a callback (which may be the very
//!   script now asking), it is refused at once instead of waiting forever.
//!   Waiters re-decide whenever a holder starts waiting on the host.
//! - **Every wait has an event.** Waiters are woken by releases, by
//!   waiters leaving, and by holders starting to wait on the host; never by
//!   a timer.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::call::context::{CallState, HostWaitListener};
use crate::support::sync::{Condvar, Mutex, lock, wait};

/// How an object is borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `&self`: any number at once.
    Shared,
    /// `&mut self`: alone.
    Exclusive,
}

/// Why a borrow was refused at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The call holds the object already (`held`) and asked for it again
    /// in a conflicting way.
    Reentrant { held: Mode, wanted: Mode },
    /// A holder is waiting on the host, which may be waiting on this call.
    HolderWaitsOnHost,
}

/// One borrow held.
struct Holding {
    /// The call that holds it (`None`: code outside any call).
    call: Option<Arc<CallState>>,
    mode: Mode,
}

/// The lock's state (see the module docs).
#[derive(Default)]
struct Access {
    readers: usize,
    writer: bool,
    holders: Vec<Holding>,
    /// Borrows waiting, in arrival order.
    queue: VecDeque<(u64, Mode)>,
    next_ticket: u64,
    /// Async waiters to wake on any change, one per ticket (a future
    /// polled again replaces its waker rather than adding one).
    wakers: Vec<(u64, Waker)>,
    /// Blocking waiters (a condvar signal is a system call even with nobody
    /// waiting, so it is sent only to someone).
    blocked: usize,
}

/// What a borrow may do now.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Granted,
    /// Wait, with this place in the queue.
    Wait(u64),
    Refused(Refusal),
}

impl Access {
    /// Decides a borrow of `mode` for `call`, which waits at `ticket` if it
    /// has waited before (see the module docs). Leaves the queue unless told
    /// to wait.
    fn decide(&mut self, mode: Mode, call: Option<&Arc<CallState>>, ticket: Option<u64>) -> Decision {
        if let Some(held) = call.and_then(|call| self.held_by(call)) {
            if held == Mode::Exclusive || mode == Mode::Exclusive {
                self.leave(ticket);
                return Decision::Refused(Refusal::Reentrant { held, wanted: mode });
            }
            self.leave(ticket);
            self.grant(mode, call);
            return Decision::Granted;
        }
        let free = match mode {
            Mode::Shared => !self.writer,
            Mode::Exclusive => !self.writer && self.readers == 0,
        };
        let ahead = self.queue.iter().take_while(|(t, _)| Some(*t) != ticket);
        let its_turn = match mode {
            Mode::Shared => ahead.into_iter().all(|(_, m)| *m == Mode::Shared),
            Mode::Exclusive => ahead.count() == 0,
        };
        if free && its_turn {
            self.leave(ticket);
            self.grant(mode, call);
            return Decision::Granted;
        }
        if self.holders.iter().any(|h| h.call.as_ref().is_some_and(|c| c.is_waiting_on_host())) {
            self.leave(ticket);
            return Decision::Refused(Refusal::HolderWaitsOnHost);
        }
        Decision::Wait(ticket.unwrap_or_else(|| {
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            self.queue.push_back((ticket, mode));
            ticket
        }))
    }

    /// The strongest way `call` holds the object, if it does.
    fn held_by(&self, call: &Arc<CallState>) -> Option<Mode> {
        let mut held = None;
        for h in self.holders.iter().filter(|h| h.call.as_ref().is_some_and(|c| Arc::ptr_eq(c, call))) {
            if h.mode == Mode::Exclusive {
                return Some(Mode::Exclusive);
            }
            held = Some(Mode::Shared);
        }
        held
    }

    fn grant(&mut self, mode: Mode, call: Option<&Arc<CallState>>) {
        match mode {
            Mode::Shared => self.readers += 1,
            Mode::Exclusive => self.writer = true,
        }
        self.holders.push(Holding { call: call.cloned(), mode });
    }

    fn leave(&mut self, ticket: Option<u64>) {
        if let Some(ticket) = ticket {
            self.queue.retain(|(t, _)| *t != ticket);
            self.wakers.retain(|(t, _)| *t != ticket);
        }
    }

    fn release(&mut self, mode: Mode, call: Option<&Arc<CallState>>) {
        match mode {
            Mode::Shared => self.readers -= 1,
            Mode::Exclusive => self.writer = false,
        }
        let same = |h: &Holding| h.mode == mode && h.call.as_ref().map(Arc::as_ptr) == call.map(Arc::as_ptr);
        if let Some(i) = self.holders.iter().position(same) {
            self.holders.swap_remove(i);
        }
    }
}

/// The lock of one object (see the module docs).
#[derive(Default)]
pub(crate) struct ObjectLock {
    access: Mutex<Access>,
    /// Blocking waiters.
    changed: Condvar,
}

impl ObjectLock {
    /// Borrows the object, blocking while it must wait (sync handlers run
    /// on the SDK's own threads, where blocking is fine).
    pub(crate) fn acquire_blocking(&self, mode: Mode, call: Option<&Arc<CallState>>) -> Result<(), Refusal> {
        let mut access = lock(&self.access);
        let mut ticket = None;
        loop {
            match access.decide(mode, call, ticket) {
                Decision::Granted => return Ok(()),
                Decision::Refused(refusal) => {
                    drop(access);
                    self.changed_now();
                    return Err(refusal);
                }
                Decision::Wait(t) => {
                    ticket = Some(t);
                    access.blocked += 1;
                    access = wait(&self.changed, access);
                    access.blocked -= 1;
                }
            }
        }
    }

    /// Borrows the object from async code.
    pub(crate) fn acquire<'a>(&'a self, mode: Mode, call: Option<&'a Arc<CallState>>) -> Acquire<'a> {
        Acquire { lock: self, mode, call, ticket: None, done: false }
    }

    /// Gives a borrow back.
    pub(crate) fn release(&self, mode: Mode, call: Option<&Arc<CallState>>) {
        lock(&self.access).release(mode, call);
        self.changed_now();
    }

    /// Wakes every waiter to decide again (something changed: a release, a
    /// waiter leaving the queue, a holder's wait on the host).
    fn changed_now(&self) {
        let mut access = lock(&self.access);
        let wakers = std::mem::take(&mut access.wakers);
        if access.blocked > 0 {
            self.changed.notify_all();
        }
        drop(access);
        for (_, waker) in wakers {
            waker.wake();
        }
    }
}

impl HostWaitListener for ObjectLock {
    fn holder_changed(&self) {
        self.changed_now();
    }
}

/// A borrow being waited for from async code; dropping it gives up its
/// place in the queue.
pub(crate) struct Acquire<'a> {
    lock: &'a ObjectLock,
    mode: Mode,
    call: Option<&'a Arc<CallState>>,
    ticket: Option<u64>,
    done: bool,
}

impl Future for Acquire<'_> {
    type Output = Result<(), Refusal>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut access = lock(&this.lock.access);
        let decision = access.decide(this.mode, this.call, this.ticket);
        let outcome = match decision {
            Decision::Granted => Ok(()),
            Decision::Refused(refusal) => Err(refusal),
            Decision::Wait(ticket) => {
                this.ticket = Some(ticket);
                // Registered under the same lock as the decision: a change
                // after it wakes this waker.
                match access.wakers.iter_mut().find(|(t, _)| *t == ticket) {
                    Some((_, waker)) => waker.clone_from(cx.waker()),
                    None => access.wakers.push((ticket, cx.waker().clone())),
                }
                return Poll::Pending;
            }
        };
        drop(access);
        this.done = true;
        this.ticket = None;
        if outcome.is_err() {
            this.lock.changed_now();
        }
        Poll::Ready(outcome)
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if let (false, Some(ticket)) = (self.done, self.ticket) {
            lock(&self.lock.access).leave(Some(ticket));
            self.lock.changed_now();
        }
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;

    fn call(name: &str) -> Arc<CallState> {
        CallState::new(name.into())
    }

    #[test]
    fn the_same_call_may_share_but_never_conflict_with_itself() {
        let mut access = Access::default();
        let a = call("a");
        assert_eq!(access.decide(Mode::Exclusive, Some(&a), None), Decision::Granted);
        for wanted in [Mode::Shared, Mode::Exclusive] {
            let refused = Refusal::Reentrant { held: Mode::Exclusive, wanted };
            assert_eq!(access.decide(wanted, Some(&a), None), Decision::Refused(refused));
        }
        access.release(Mode::Exclusive, Some(&a));
        assert_eq!(access.decide(Mode::Shared, Some(&a), None), Decision::Granted);
        let refused = Refusal::Reentrant { held: Mode::Shared, wanted: Mode::Exclusive };
        assert_eq!(access.decide(Mode::Exclusive, Some(&a), None), Decision::Refused(refused));
        // A writer queues; the holder's second shared borrow still goes.
        let w = call("w");
        assert_eq!(access.decide(Mode::Exclusive, Some(&w), None), Decision::Wait(0));
        assert_eq!(access.decide(Mode::Shared, Some(&a), None), Decision::Granted);
        assert_eq!(access.readers, 2);
    }

    #[test]
    fn borrows_are_served_in_arrival_order() {
        let mut access = Access::default();
        let (r1, w, r2, r3) = (call("r1"), call("w"), call("r2"), call("r3"));
        assert_eq!(access.decide(Mode::Shared, Some(&r1), None), Decision::Granted);
        let Decision::Wait(tw) = access.decide(Mode::Exclusive, Some(&w), None) else { panic!() };
        // A reader arriving after the writer waits behind it.
        let Decision::Wait(t2) = access.decide(Mode::Shared, Some(&r2), None) else { panic!() };
        access.release(Mode::Shared, Some(&r1));
        assert_eq!(access.decide(Mode::Shared, Some(&r2), Some(t2)), Decision::Wait(t2));
        assert_eq!(access.decide(Mode::Exclusive, Some(&w), Some(tw)), Decision::Granted);
        let Decision::Wait(t3) = access.decide(Mode::Shared, Some(&r3), None) else { panic!() };
        access.release(Mode::Exclusive, Some(&w));
        // Both readers that waited go together.
        assert_eq!(access.decide(Mode::Shared, Some(&r3), Some(t3)), Decision::Granted);
        assert_eq!(access.decide(Mode::Shared, Some(&r2), Some(t2)), Decision::Granted);
        assert!(access.queue.is_empty());
    }

    #[test]
    fn a_holder_waiting_on_the_host_makes_waiting_borrows_fail_at_once() {
        let mut access = Access::default();
        let (holder, other) = (call("holder"), call("other"));
        assert_eq!(access.decide(Mode::Exclusive, Some(&holder), None), Decision::Granted);
        let Decision::Wait(t) = access.decide(Mode::Shared, Some(&other), None) else { panic!() };
        let waiting = holder.wait_on_host();
        let refused = Decision::Refused(Refusal::HolderWaitsOnHost);
        assert_eq!(access.decide(Mode::Shared, Some(&other), Some(t)), refused);
        assert!(access.queue.is_empty(), "a refused borrow leaves the queue");
        drop(waiting);
        assert!(matches!(access.decide(Mode::Shared, Some(&other), None), Decision::Wait(_)));
    }

    #[test]
    fn an_async_waiter_is_woken_by_the_release_and_gives_up_its_place_when_dropped() {
        let lock = ObjectLock::default();
        let (a, b, c) = (call("a"), call("b"), call("c"));
        lock.acquire_blocking(Mode::Exclusive, Some(&a)).unwrap();
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        let mut writer = lock.acquire(Mode::Exclusive, Some(&b));
        assert!(Pin::new(&mut writer).poll(&mut cx).is_pending());
        let mut reader = lock.acquire(Mode::Shared, Some(&c));
        assert!(Pin::new(&mut reader).poll(&mut cx).is_pending());
        assert_eq!(lock_queue_len(&lock), 2);
        // Polled again, a waiter keeps one waker, not one per poll.
        for _ in 0..3 {
            assert!(Pin::new(&mut reader).poll(&mut cx).is_pending());
        }
        assert_eq!(crate::support::sync::lock(&lock.access).wakers.len(), 2);
        // A dropped waiter leaves the queue.
        drop(reader);
        assert_eq!(lock_queue_len(&lock), 1);
        // Woken by that change, the writer decides again: still waiting.
        assert!(woken.0.swap(false, std::sync::atomic::Ordering::SeqCst));
        assert!(Pin::new(&mut writer).poll(&mut cx).is_pending());
        lock.release(Mode::Exclusive, Some(&a));
        assert!(woken.0.load(std::sync::atomic::Ordering::SeqCst), "woken by the release");
        assert_eq!(Pin::new(&mut writer).poll(&mut cx), Poll::Ready(Ok(())));
    }

    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn lock_queue_len(lock: &ObjectLock) -> usize {
        crate::support::sync::lock(&lock.access).queue.len()
    }
}

/// Every interleaving of small scenarios, under `--cfg scriptling_loom`
/// (see ARCHITECTURE.md).
#[cfg(all(test, scriptling_loom))]
mod model {
    use super::*;
    use crate::support::sync::{AtomicUsize, Ordering, thread};

    /// Two readers and a writer: the writer always gets in (no deadlock,
    /// never starved by the readers), and never while a reader is in.
    #[test]
    fn writers_are_served_and_exclusive() {
        crate::support::sync::model(|| {
            let lock = Arc::new(ObjectLock::default());
            let inside = Arc::new(AtomicUsize::new(0));
            let borrow = |lock: &ObjectLock, inside: &AtomicUsize, mode: Mode| {
                let call = CallState::new("c".into());
                lock.acquire_blocking(mode, Some(&call)).unwrap();
                let flag = if mode == Mode::Exclusive { 100 } else { 1 };
                let before = inside.fetch_add(flag, Ordering::SeqCst);
                assert!(if mode == Mode::Exclusive { before == 0 } else { before < 100 });
                inside.fetch_sub(flag, Ordering::SeqCst);
                lock.release(mode, Some(&call));
            };
            let threads: Vec<_> = [Mode::Shared, Mode::Exclusive]
                .into_iter()
                .map(|mode| {
                    let (lock, inside) = (Arc::clone(&lock), Arc::clone(&inside));
                    thread::spawn(move || borrow(&lock, &inside, mode))
                })
                .collect();
            borrow(&lock, &inside, Mode::Shared);
            for t in threads {
                t.join().unwrap();
            }
        });
    }

    /// A call that re-enters its own object is refused whatever another
    /// call does meanwhile, and the other call still gets in.
    #[test]
    fn reentry_fails_and_leaves_the_lock_usable() {
        crate::support::sync::model(|| {
            let lock = Arc::new(ObjectLock::default());
            let other = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let call = CallState::new("other".into());
                    lock.acquire_blocking(Mode::Shared, Some(&call)).unwrap();
                    lock.release(Mode::Shared, Some(&call));
                })
            };
            let call = CallState::new("self".into());
            lock.acquire_blocking(Mode::Exclusive, Some(&call)).unwrap();
            let again = lock.acquire_blocking(Mode::Shared, Some(&call));
            assert_eq!(again, Err(Refusal::Reentrant { held: Mode::Exclusive, wanted: Mode::Shared }));
            lock.release(Mode::Exclusive, Some(&call));
            other.join().unwrap();
        });
    }

    /// A waiter behind a holder that starts waiting on the host is told at
    /// once (refused), or got in before: it never waits for ever.
    #[test]
    fn a_holder_waiting_on_the_host_never_leaves_a_waiter_hanging() {
        crate::support::sync::model(|| {
            let lock = Arc::new(ObjectLock::default());
            let holder = CallState::new("holder".into());
            lock.acquire_blocking(Mode::Exclusive, Some(&holder)).unwrap();
            let listener: Arc<dyn HostWaitListener> = lock.clone();
            holder.listen(Arc::clone(&listener));
            let waiter = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let call = CallState::new("waiter".into());
                    let got = lock.acquire_blocking(Mode::Shared, Some(&call));
                    if got.is_ok() {
                        lock.release(Mode::Shared, Some(&call));
                    }
                    got
                })
            };
            let waiting = holder.wait_on_host();
            // The host "answers" only after the waiter has its outcome.
            let got = waiter.join().unwrap();
            assert_eq!(got, Err(Refusal::HolderWaitsOnHost));
            drop(waiting);
            lock.release(Mode::Exclusive, Some(&holder));
        });
    }

    /// The call may begin waiting on the host (another task of an async
    /// call awaits a callback) between being granted the object and
    /// registering as its holder: a waiter that queued in that gap is still
    /// told, never left hanging.
    #[test]
    fn a_wait_on_the_host_begun_before_the_holder_registers_is_seen() {
        crate::support::sync::model(|| {
            let lock = Arc::new(ObjectLock::default());
            let holder = CallState::new("holder".into());
            // Its wait lasts until the end: the host answers only once the
            // waiter has its outcome.
            let other_task = {
                let holder = Arc::clone(&holder);
                thread::spawn(move || holder.wait_on_host())
            };
            let waiter = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let call = CallState::new("waiter".into());
                    if lock.acquire_blocking(Mode::Shared, Some(&call)).is_ok() {
                        lock.release(Mode::Shared, Some(&call));
                    }
                })
            };
            lock.acquire_blocking(Mode::Exclusive, Some(&holder)).unwrap();
            let listener: Arc<dyn HostWaitListener> = lock.clone();
            holder.listen(Arc::clone(&listener));
            waiter.join().unwrap();
            drop(other_task.join().unwrap());
            holder.unlisten(&listener);
            lock.release(Mode::Exclusive, Some(&holder));
        });
    }
}
