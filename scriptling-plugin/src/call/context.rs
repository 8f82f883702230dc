//! The per-call context: the state of one call and what it may reach,
//! found by conversions and handles through a thread-local.
//!
//! Some conversions need more than the value: returning a class instance
//! inserts it into the object table, a `ObjectRef<T>` argument looks its id up
//! there, and a `Callback` must remember how to reach the host. They find the
//! current call here. The SDK installs the context around a sync handler's
//! whole run and around every poll of an async handler's future, so it is
//! present in argument conversion, the handler body and result conversion
//! alike, wherever a value is nested. Code running on threads or tasks the
//! handler spawns itself has no current call.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::call::link::Link;
use crate::call::logger::LogStream;
use crate::support::lock;

/// Something that wants to hear when a call starts or stops waiting on the
/// host: an object the call holds, whose waiters may then fail fast.
pub(crate) trait HostWaitListener: Send + Sync {
    /// The holder started or stopped waiting on the host.
    fn holder_changed(&self);
}

/// The state of one call, shared with anything that outlives its handler
/// (callback handles, object guards, its log records).
pub(crate) struct CallState {
    /// `greet`, `Counter.inc`: for reports about the call.
    label: Arc<str>,
    finished: AtomicBool,
    waiting_on_host: AtomicUsize,
    /// Objects this call holds a guard on.
    listeners: Mutex<Vec<Arc<dyn HostWaitListener>>>,
    /// The call's log records on their way to the host.
    pub(crate) logs: LogStream,
}

impl CallState {
    /// The state of a new call named `label`.
    pub(crate) fn new(label: Arc<str>) -> Arc<Self> {
        Arc::new(Self {
            label,
            finished: AtomicBool::new(false),
            waiting_on_host: AtomicUsize::new(0),
            listeners: Mutex::new(Vec::new()),
            logs: LogStream::default(),
        })
    }

    /// The call's name, for reports.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Marks the handler as returned: its callbacks expire.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Whether the call is blocked waiting for the host (a callback round
    /// trip), so the objects it holds stay held until the host answers.
    pub(crate) fn is_waiting_on_host(&self) -> bool {
        self.waiting_on_host.load(Ordering::Acquire) > 0
    }

    /// Registers an object the call now holds (see [`HostWaitListener`]).
    pub(crate) fn listen(&self, listener: Arc<dyn HostWaitListener>) {
        lock(&self.listeners).push(listener);
    }

    /// Forgets an object the call released.
    pub(crate) fn unlisten(&self, listener: &Arc<dyn HostWaitListener>) {
        let mut listeners = lock(&self.listeners);
        if let Some(i) = listeners.iter().position(|l| Arc::ptr_eq(l, listener)) {
            listeners.swap_remove(i);
        }
    }

    /// Marks the call as waiting for the host until the guard is dropped:
    /// the objects it holds tell their waiters, and the thread's pool lends
    /// its capacity to other calls meanwhile.
    pub(crate) fn wait_on_host(self: &Arc<Self>) -> WaitingOnHost {
        self.waiting_on_host.fetch_add(1, Ordering::AcqRel);
        self.tell_listeners();
        let blocking = BLOCKING.with(|b| b.borrow().clone());
        if let Some(hook) = &blocking {
            hook.enter();
        }
        WaitingOnHost { call: Arc::clone(self), blocking }
    }

    fn tell_listeners(&self) {
        let listeners = lock(&self.listeners).clone();
        for listener in listeners {
            listener.holder_changed();
        }
    }
}

/// Marks a call as waiting on the host while it lives.
pub(crate) struct WaitingOnHost {
    call: Arc<CallState>,
    blocking: Option<Arc<dyn BlockingHook>>,
}

impl Drop for WaitingOnHost {
    fn drop(&mut self) {
        if let Some(hook) = &self.blocking {
            hook.exit();
        }
        self.call.waiting_on_host.fetch_sub(1, Ordering::AcqRel);
        self.call.tell_listeners();
    }
}

/// What the current call can reach.
#[derive(Clone)]
pub(crate) struct CallScope {
    /// The session the call came from.
    pub(crate) link: Arc<Link>,
    pub(crate) call: Arc<CallState>,
    /// The client the call came from (HTTP's `X-Scriptling-Client`): the
    /// objects it creates are its own. `None` on stdio.
    pub(crate) owner: Option<Arc<str>>,
}

/// Told when a thread blocks waiting for the host, so the pool that owns
/// the thread can start another one for the work queued behind it.
pub(crate) trait BlockingHook: Send + Sync {
    /// This thread starts waiting on the host.
    fn enter(&self);
    /// This thread stopped waiting on the host.
    fn exit(&self);
}

thread_local! {
    static CURRENT: RefCell<Option<CallScope>> = const { RefCell::new(None) };
    /// Set while an async handler's future is being polled on this thread.
    static IN_ASYNC_POLL: Cell<bool> = const { Cell::new(false) };
    /// The pool this thread belongs to, if any.
    static BLOCKING: RefCell<Option<Arc<dyn BlockingHook>>> = const { RefCell::new(None) };
}

/// Runs `wait`, a wait for the host that is not a call's (reading its
/// next line), telling this thread's pool so it can lend the thread's place.
pub(crate) fn waiting_on_host<R>(wait: impl FnOnce() -> R) -> R {
    // Once per line read: the hook is borrowed where it is, not cloned (a
    // `WaitingOnHost` keeps its own, as it may be dropped on another thread).
    fn tell(step: fn(&dyn BlockingHook)) {
        BLOCKING.with(|b| b.borrow().as_deref().map(step));
    }
    /// Tells the pool the wait is over, even if `wait` unwinds.
    struct Waiting;
    impl Drop for Waiting {
        fn drop(&mut self) {
            tell(|hook| hook.exit());
        }
    }
    tell(|hook| hook.enter());
    let _waiting = Waiting;
    wait()
}

/// Declares the pool that owns this thread (set once by each pool thread).
pub(crate) fn set_blocking_hook(hook: Arc<dyn BlockingHook>) {
    BLOCKING.with(|b| *b.borrow_mut() = Some(hook));
}

/// Whether this thread is polling an async handler (where blocking on the
/// host would stall the runtime).
pub(crate) fn in_async_poll() -> bool {
    IN_ASYNC_POLL.with(Cell::get)
}

/// Installs `scope` as the current call until the guard is dropped.
pub(crate) fn enter(scope: CallScope) -> Entered {
    let previous = CURRENT.with(|c| c.replace(Some(scope)));
    Entered { previous }
}

/// Restores the previous scope (scopes nest when a handler runs an inner
/// call synchronously).
pub(crate) struct Entered {
    previous: Option<CallScope>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The current call, if the SDK is running one on this thread.
pub(crate) fn current() -> Option<CallScope> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The current call's name, if the SDK is running one on this thread.
pub(crate) fn current_label() -> Option<Arc<str>> {
    CURRENT.with(|c| c.borrow().as_ref().map(|s| Arc::clone(&s.call.label)))
}

/// A future that runs every poll of `F` inside `scope`.
pub(crate) struct Scoped<F> {
    pub(crate) scope: CallScope,
    pub(crate) inner: F,
}

impl<F: Future + Unpin> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = enter(self.scope.clone());
        let was_async = IN_ASYNC_POLL.with(|f| f.replace(true));
        let poll = Pin::new(&mut self.inner).poll(cx);
        IN_ASYNC_POLL.with(|f| f.set(was_async));
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counting(AtomicUsize);

    impl HostWaitListener for Counting {
        fn holder_changed(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl BlockingHook for Counting {
        fn enter(&self) {
            self.0.fetch_add(10, Ordering::SeqCst);
        }
        fn exit(&self) {
            self.0.fetch_add(100, Ordering::SeqCst);
        }
    }

    #[test]
    fn waiting_on_the_host_tells_held_objects_and_the_pool() {
        let call = CallState::new("f".into());
        let object = Arc::new(Counting(AtomicUsize::new(0)));
        let listener: Arc<dyn HostWaitListener> = object.clone();
        call.listen(Arc::clone(&listener));
        let pool = Arc::new(Counting(AtomicUsize::new(0)));
        set_blocking_hook(pool.clone());
        assert!(!call.is_waiting_on_host());
        let waiting = call.wait_on_host();
        assert!(call.is_waiting_on_host());
        assert_eq!((object.0.load(Ordering::SeqCst), pool.0.load(Ordering::SeqCst)), (1, 10));
        drop(waiting);
        assert!(!call.is_waiting_on_host());
        assert_eq!((object.0.load(Ordering::SeqCst), pool.0.load(Ordering::SeqCst)), (2, 110));
        call.unlisten(&listener);
        drop(call.wait_on_host());
        assert_eq!(object.0.load(Ordering::SeqCst), 2, "a released object hears nothing");
    }

    #[test]
    fn finishing_expires_the_call() {
        let call = CallState::new("f".into());
        assert!(!call.is_finished());
        call.finish();
        assert!(call.is_finished());
        assert_eq!(call.label(), "f");
    }
}
