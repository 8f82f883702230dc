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
//! - **A wait on the host is bounded.** If the borrow cannot go now and a
//!   holder is waiting for the host to answer a callback, the borrow waits
//!   (in its place) for at most a bound: the holder may be a call of
//!   another script thread, which will return, or the very call whose
//!   callback now asks (the wire cannot tell them apart), which would wait
//!   for ever. Past the bound it is refused, saying both. Waiters re-decide
//!   whenever a holder starts or stops waiting on the host.
//! - **Every wait has an event.** Waiters are woken by releases, by
//!   waiters leaving, and by holders starting to wait on the host; the one
//!   timer is the bound above.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::call::context::{CallState, HostWaitListener};
use crate::support::sync::{Condvar, Mutex, lock, wait, wait_for};
use crate::support::timer;

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
    /// A holder waited on the host for all of `waited`: it may be waiting
    /// on this very call (its callback asked), or its callback runs long.
    HolderWaitsOnHost { waited: Duration },
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
    /// Waits decided with a holder on the host (for the model checks).
    #[cfg(all(test, scriptling_loom))]
    on_host_seen: usize,
}

/// What a borrow may do now.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Granted,
    /// Wait, with this place in the queue; `on_host`: a holder waits on
    /// the host (the wait is then bounded).
    Wait {
        ticket: u64,
        on_host: bool,
    },
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
        let on_host = self.holders.iter().any(|h| h.call.as_ref().is_some_and(|c| c.is_waiting_on_host()));
        let ticket = ticket.unwrap_or_else(|| {
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            self.queue.push_back((ticket, mode));
            ticket
        });
        #[cfg(all(test, scriptling_loom))]
        if on_host {
            self.on_host_seen += 1;
        }
        Decision::Wait { ticket, on_host }
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

/// How long a waiter has waited while a holder waits on the host.
#[derive(Default)]
struct OnHostClock {
    since: Option<Instant>,
}

impl OnHostClock {
    /// Notes what a `Wait` decision said; returns how much of `bound` is
    /// left while a holder waits on the host (`None`: no holder does, the
    /// wait is unbounded), or the refusal once it has all passed.
    fn left(&mut self, on_host: bool, bound: Duration) -> Result<Option<Duration>, Refusal> {
        if !on_host {
            self.since = None;
            return Ok(None);
        }
        let waited = self.since.get_or_insert_with(Instant::now).elapsed();
        match bound.checked_sub(waited) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(Refusal::HolderWaitsOnHost { waited: bound }),
        }
    }
}

impl ObjectLock {
    /// Borrows the object, blocking while it must wait (sync handlers run
    /// on the SDK's own threads, where blocking is fine); while a holder
    /// waits on the host, for at most `bound`.
    pub(crate) fn acquire_blocking(
        &self,
        mode: Mode,
        call: Option<&Arc<CallState>>,
        bound: Duration,
    ) -> Result<(), Refusal> {
        let mut access = lock(&self.access);
        let mut ticket = None;
        let mut clock = OnHostClock::default();
        loop {
            let refusal = match access.decide(mode, call, ticket) {
                Decision::Granted => return Ok(()),
                Decision::Refused(refusal) => refusal,
                Decision::Wait { ticket: t, on_host } => match clock.left(on_host, bound) {
                    Ok(left) => {
                        ticket = Some(t);
                        access.blocked += 1;
                        access = match left {
                            Some(left) => wait_for(&self.changed, access, left),
                            None => wait(&self.changed, access),
                        };
                        access.blocked -= 1;
                        continue;
                    }
                    Err(refusal) => {
                        access.leave(Some(t));
                        refusal
                    }
                },
            };
            drop(access);
            self.changed_now();
            return Err(refusal);
        }
    }

    /// Borrows the object from async code; while a holder waits on the
    /// host, for at most `bound`.
    pub(crate) fn acquire<'a>(&'a self, mode: Mode, call: Option<&'a Arc<CallState>>, bound: Duration) -> Acquire<'a> {
        Acquire {
            lock: self,
            mode,
            call,
            bound,
            ticket: None,
            clock: OnHostClock::default(),
            deadline: None,
            done: false,
        }
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
    bound: Duration,
    ticket: Option<u64>,
    clock: OnHostClock,
    /// Wakes the task (this waker) when the bound passes (the timer
    /// thread's).
    deadline: Option<(timer::Deadline, std::task::Waker)>,
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
            Decision::Wait { ticket, on_host } => match this.clock.left(on_host, this.bound) {
                Ok(left) => {
                    this.ticket = Some(ticket);
                    // Registered under the same lock as the decision: a
                    // change after it wakes this waker.
                    match access.wakers.iter_mut().find(|(t, _)| *t == ticket) {
                        Some((_, waker)) => waker.clone_from(cx.waker()),
                        None => access.wakers.push((ticket, cx.waker().clone())),
                    }
                    // The bound's moment is fixed once a holder waits on
                    // the host: set once, again only for a new waker.
                    match left {
                        None => this.deadline = None,
                        Some(_) if this.deadline.as_ref().is_some_and(|(_, w)| w.will_wake(cx.waker())) => {}
                        Some(left) => {
                            let waker = cx.waker().clone();
                            this.deadline = Some((timer::after(left, move || waker.wake()), cx.waker().clone()));
                        }
                    }
                    return Poll::Pending;
                }
                Err(refusal) => {
                    access.leave(Some(ticket));
                    Err(refusal)
                }
            },
        };
        drop(access);
        this.done = true;
        this.ticket = None;
        this.deadline = None;
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

/// A bound no test reaches.
#[cfg(test)]
const FOR_EVER: Duration = Duration::from_secs(3600);

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
        assert_eq!(access.decide(Mode::Exclusive, Some(&w), None), Decision::Wait { ticket: 0, on_host: false });
        assert_eq!(access.decide(Mode::Shared, Some(&a), None), Decision::Granted);
        assert_eq!(access.readers, 2);
    }

    #[test]
    fn borrows_are_served_in_arrival_order() {
        let mut access = Access::default();
        let (r1, w, r2, r3) = (call("r1"), call("w"), call("r2"), call("r3"));
        assert_eq!(access.decide(Mode::Shared, Some(&r1), None), Decision::Granted);
        let Decision::Wait { ticket: tw, .. } = access.decide(Mode::Exclusive, Some(&w), None) else { panic!() };
        // A reader arriving after the writer waits behind it.
        let Decision::Wait { ticket: t2, .. } = access.decide(Mode::Shared, Some(&r2), None) else { panic!() };
        access.release(Mode::Shared, Some(&r1));
        assert_eq!(access.decide(Mode::Shared, Some(&r2), Some(t2)), Decision::Wait { ticket: t2, on_host: false });
        assert_eq!(access.decide(Mode::Exclusive, Some(&w), Some(tw)), Decision::Granted);
        let Decision::Wait { ticket: t3, .. } = access.decide(Mode::Shared, Some(&r3), None) else { panic!() };
        access.release(Mode::Exclusive, Some(&w));
        // Both readers that waited go together.
        assert_eq!(access.decide(Mode::Shared, Some(&r3), Some(t3)), Decision::Granted);
        assert_eq!(access.decide(Mode::Shared, Some(&r2), Some(t2)), Decision::Granted);
        assert!(access.queue.is_empty());
    }

    #[test]
    fn a_holder_waiting_on_the_host_makes_the_wait_bounded() {
        let mut access = Access::default();
        let (holder, other) = (call("holder"), call("other"));
        assert_eq!(access.decide(Mode::Exclusive, Some(&holder), None), Decision::Granted);
        let Decision::Wait { ticket: t, on_host: false } = access.decide(Mode::Shared, Some(&other), None) else {
            panic!()
        };
        let waiting = holder.wait_on_host();
        assert_eq!(access.decide(Mode::Shared, Some(&other), Some(t)), Decision::Wait { ticket: t, on_host: true });
        drop(waiting);
        assert_eq!(access.decide(Mode::Shared, Some(&other), Some(t)), Decision::Wait { ticket: t, on_host: false });
    }

    /// A second caller behind a call that waits on its callback waits for
    /// it to return, as long as the bound allows; a nested caller (one the
    /// callback made, which would wait for ever) is refused at the bound.
    #[test]
    fn a_caller_behind_a_holder_waiting_on_the_host_waits_then_is_served_or_refused_at_the_bound() {
        let lock = Arc::new(ObjectLock::default());
        let holder = call("visit");
        lock.acquire_blocking(Mode::Exclusive, Some(&holder), Duration::from_secs(5)).unwrap();
        let listener: Arc<dyn HostWaitListener> = lock.clone();
        holder.listen(Arc::clone(&listener));
        let waiting = holder.wait_on_host();
        // Nested (or simply too patient for the bound): refused at 50 ms.
        let started = Instant::now();
        let nested = lock.acquire_blocking(Mode::Exclusive, Some(&call("bump")), Duration::from_millis(50));
        assert_eq!(nested, Err(Refusal::HolderWaitsOnHost { waited: Duration::from_millis(50) }));
        assert!(started.elapsed() >= Duration::from_millis(50), "{:?}", started.elapsed());
        // Concurrent: served once the holder's callback returns and it ends.
        let concurrent = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                lock.acquire_blocking(Mode::Exclusive, Some(&call("bump")), Duration::from_secs(5))
            })
        };
        std::thread::sleep(Duration::from_millis(30));
        assert!(!concurrent.is_finished(), "waits while the holder waits on the host");
        drop(waiting);
        holder.unlisten(&listener);
        lock.release(Mode::Exclusive, Some(&holder));
        assert_eq!(concurrent.join().unwrap(), Ok(()));
    }

    #[test]
    fn an_async_caller_behind_a_holder_waiting_on_the_host_is_refused_at_the_bound() {
        let lock = Arc::new(ObjectLock::default());
        let holder = call("visit");
        lock.acquire_blocking(Mode::Exclusive, Some(&holder), Duration::from_secs(5)).unwrap();
        let _waiting = holder.wait_on_host();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let bump = call("bump");
        let got = runtime.block_on(lock.acquire(Mode::Shared, Some(&bump), Duration::from_millis(30)));
        assert_eq!(got, Err(Refusal::HolderWaitsOnHost { waited: Duration::from_millis(30) }));
        assert_eq!(lock_queue_len(&lock), 0, "a refused borrow leaves the queue");
    }

    #[test]
    fn an_async_waiter_is_woken_by_the_release_and_gives_up_its_place_when_dropped() {
        let lock = ObjectLock::default();
        let (a, b, c) = (call("a"), call("b"), call("c"));
        lock.acquire_blocking(Mode::Exclusive, Some(&a), FOR_EVER).unwrap();
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        let mut writer = lock.acquire(Mode::Exclusive, Some(&b), FOR_EVER);
        assert!(Pin::new(&mut writer).poll(&mut cx).is_pending());
        let mut reader = lock.acquire(Mode::Shared, Some(&c), FOR_EVER);
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
                lock.acquire_blocking(mode, Some(&call), FOR_EVER).unwrap();
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
                    lock.acquire_blocking(Mode::Shared, Some(&call), FOR_EVER).unwrap();
                    lock.release(Mode::Shared, Some(&call));
                })
            };
            let call = CallState::new("self".into());
            lock.acquire_blocking(Mode::Exclusive, Some(&call), FOR_EVER).unwrap();
            let again = lock.acquire_blocking(Mode::Shared, Some(&call), FOR_EVER);
            assert_eq!(again, Err(Refusal::Reentrant { held: Mode::Exclusive, wanted: Mode::Shared }));
            lock.release(Mode::Exclusive, Some(&call));
            other.join().unwrap();
        });
    }

    /// A waiter behind a holder that starts waiting on the host is told
    /// (it decides again, and its wait becomes bounded), and is served once
    /// the holder's callback returns and the holder ends.
    #[test]
    fn a_waiter_behind_a_holder_waiting_on_the_host_is_told_and_then_served() {
        crate::support::sync::model(|| {
            let lock = Arc::new(ObjectLock::default());
            let holder = CallState::new("holder".into());
            lock.acquire_blocking(Mode::Exclusive, Some(&holder), FOR_EVER).unwrap();
            let listener: Arc<dyn HostWaitListener> = lock.clone();
            holder.listen(Arc::clone(&listener));
            let waiter = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let call = CallState::new("waiter".into());
                    let got = lock.acquire_blocking(Mode::Shared, Some(&call), FOR_EVER);
                    if got.is_ok() {
                        lock.release(Mode::Shared, Some(&call));
                    }
                    got
                })
            };
            let waiting = holder.wait_on_host();
            // The host answers only once the waiter has seen the wait (a
            // waiter never told would wait unbounded: this spins for ever).
            while lock_on_host_seen(&lock) == 0 {
                thread::yield_now();
            }
            drop(waiting);
            holder.unlisten(&listener);
            lock.release(Mode::Exclusive, Some(&holder));
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
    }

    /// The call may begin waiting on the host (another task of an async
    /// call awaits a callback) between being granted the object and
    /// registering as its holder: a waiter that queued in that gap is still
    /// told, never left waiting unbounded.
    #[test]
    fn a_wait_on_the_host_begun_before_the_holder_registers_is_seen() {
        crate::support::sync::model(|| {
            let lock = Arc::new(ObjectLock::default());
            let holder = CallState::new("holder".into());
            let other_task = {
                let holder = Arc::clone(&holder);
                thread::spawn(move || holder.wait_on_host())
            };
            let waiter = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let call = CallState::new("waiter".into());
                    if lock.acquire_blocking(Mode::Shared, Some(&call), FOR_EVER).is_ok() {
                        lock.release(Mode::Shared, Some(&call));
                    }
                })
            };
            lock.acquire_blocking(Mode::Exclusive, Some(&holder), FOR_EVER).unwrap();
            let listener: Arc<dyn HostWaitListener> = lock.clone();
            holder.listen(Arc::clone(&listener));
            // The other task's wait lasts until the waiter, if it is still
            // waiting, has seen it.
            let waiting = other_task.join().unwrap();
            while lock_waiting(&lock) && lock_on_host_seen(&lock) == 0 {
                thread::yield_now();
            }
            drop(waiting);
            holder.unlisten(&listener);
            lock.release(Mode::Exclusive, Some(&holder));
            waiter.join().unwrap();
        });
    }

    fn lock_on_host_seen(lock: &ObjectLock) -> usize {
        crate::support::sync::lock(&lock.access).on_host_seen
    }

    fn lock_waiting(lock: &ObjectLock) -> bool {
        !crate::support::sync::lock(&lock.access).queue.is_empty()
    }
}
