//! The reading a thread put down to run the call it read ([`lending`]):
//! while that call blocks on a callback, the thread takes the reading back
//! ([`Lends::take_back`]) and reads the host's answer itself, so no other
//! thread is woken to read it and none to wake this one (ARCHITECTURE.md,
//! "A call on its reading thread reads its callback's answer").

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use crate::call::outgoing::Outgoing;

/// A session's reading, as lent to the thread running a call it read.
pub(crate) trait Lends: Send + Sync {
    /// Whether it reads the answers to requests registered in `outgoing`
    /// (the same session's).
    fn reads_for(&self, outgoing: &Arc<Outgoing>) -> bool;

    /// The reading, taken back to read on this thread, if it may be (see
    /// `Baton::take_back`); put down again when the returned value drops.
    fn take_back(self: Arc<Self>) -> Option<Box<dyn Held>>;
}

/// The reading, taken back by the thread whose call waits on the host.
pub(crate) trait Held {
    /// Reads and routes the host's messages (any call read goes to the
    /// pool) until `answered()` says the awaited answer has come, `until`
    /// has passed, or the reading ends.
    fn read_until(&mut self, answered: &mut dyn FnMut() -> bool, until: Instant);
}

thread_local! {
    /// The reading this thread put down to run the call it runs.
    static LENT: RefCell<Option<Arc<dyn Lends>>> = const { RefCell::new(None) };
}

/// Runs `f` (a call this thread read) with `reading` lent to it (`None`:
/// none may be, see `sys::keeps_deadlines`).
pub(crate) fn lending<T>(reading: Option<Arc<dyn Lends>>, f: impl FnOnce() -> T) -> T {
    let outer = LENT.with(|lent| lent.replace(reading));
    let result = f();
    LENT.with(|lent| lent.replace(outer));
    result
}

/// The reading lent to this thread, if it reads the answers to requests
/// registered in `outgoing`.
pub(crate) fn lent_for(outgoing: &Arc<Outgoing>) -> Option<Arc<dyn Lends>> {
    LENT.with(|lent| lent.borrow().clone()).filter(|lent| lent.reads_for(outgoing))
}
