//! The per-call context: the state of one call and what it may reach, found
//! by conversions and handles through one thread-local.
//!
//! Some conversions need more than the value: returning a class instance
//! inserts it into the object table, an `Object<T>` argument looks its id
//! up there, and a `Callback` must remember how to reach the host. They
//! find the current call here. The SDK installs the context around a sync
//! handler's whole run and around every poll of an async handler's future
//! ([`Scoped`]), so it is present in argument conversion, the handler body
//! and result conversion alike, wherever a value is nested. Code running on
//! threads or tasks the handler spawns itself has no current call.
//!
//! This is the only thread-local the runtime keeps about calls: whether a
//! thread polls an async handler, and which pool (if any) lends its place
//! while it waits on the host, are part of the scope.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::call::error::Label;
use crate::call::link::Link;
use crate::call::logstream::LogStream;
use crate::support::sync::{self, AtomicBool, AtomicUsize, Ordering};

/// Something that wants to hear when a call starts or stops waiting on the
/// host: an object the call holds, whose waiters may then fail fast.
pub(crate) trait HostWaitListener: Send + Sync {
    /// The holder started or stopped waiting on the host.
    fn holder_changed(&self);
}

/// A pool whose thread runs the current call: told when the call waits on
/// the host, so it can start another thread for queued work meanwhile.
pub(crate) trait HostWaits: Send + Sync {
    /// This thread starts waiting on the host; its place is free until the
    /// returned guard is dropped.
    fn host_wait(&self) -> Box<dyn Send>;
}

/// The state of one call, shared with anything that outlives its handler
/// (callback handles, object guards, its log records).
pub(crate) struct CallState {
    /// `greet()`, `Counter.inc()`: for reports about the call.
    label: Label,
    finished: AtomicBool,
    waiting_on_host: AtomicUsize,
    /// Objects this call holds a guard on.
    listeners: sync::Mutex<Vec<Arc<dyn HostWaitListener>>>,
    /// The call's log records on their way to the host.
    pub(crate) logs: LogStream,
}

impl CallState {
    /// The state of a new call named `label`.
    pub(crate) fn new(label: Label) -> Arc<Self> {
        Arc::new(Self {
            label,
            finished: AtomicBool::new(false),
            waiting_on_host: AtomicUsize::new(0),
            listeners: sync::Mutex::new(Vec::new()),
            logs: LogStream::default(),
        })
    }

    /// The call's name, for reports.
    pub(crate) fn label(&self) -> &Label {
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
        sync::lock(&self.listeners).push(Arc::clone(&listener));
        // The call may have begun waiting on the host between being granted
        // the object and this registration (another task of an async call
        // awaits a callback): a borrow that queued meanwhile was not told.
        // Registered first, then checked, so no start of a wait is missed.
        if self.is_waiting_on_host() {
            listener.holder_changed();
        }
    }

    /// Forgets an object the call released.
    pub(crate) fn unlisten(&self, listener: &Arc<dyn HostWaitListener>) {
        let mut listeners = sync::lock(&self.listeners);
        if let Some(i) = listeners.iter().position(|l| Arc::ptr_eq(l, listener)) {
            listeners.swap_remove(i);
        }
    }

    /// Marks the call as waiting for the host until the guard is dropped:
    /// the objects it holds tell their waiters, and if this thread is the
    /// pool thread running the call, the pool lends its place meanwhile.
    pub(crate) fn wait_on_host(self: &Arc<Self>) -> WaitingOnHost {
        self.waiting_on_host.fetch_add(1, Ordering::AcqRel);
        self.tell_listeners();
        let pool = CURRENT.with(|current| {
            let current = current.borrow();
            let scope = current.as_ref().filter(|s| Arc::ptr_eq(&s.call, self))?;
            scope.pool.as_ref().map(|pool| pool.host_wait())
        });
        WaitingOnHost { call: Arc::clone(self), _pool: pool }
    }

    fn tell_listeners(&self) {
        let listeners = sync::lock(&self.listeners).clone();
        for listener in listeners {
            listener.holder_changed();
        }
    }
}

/// Marks a call as waiting on the host while it lives.
pub(crate) struct WaitingOnHost {
    call: Arc<CallState>,
    /// The pool's own guard. Fields drop after `Drop::drop` runs, so the
    /// pool counts this thread busy again only once the call's objects have
    /// been told it stopped waiting (either order is correct: the pool's
    /// count only decides when to bring in another thread).
    _pool: Option<Box<dyn Send>>,
}

impl Drop for WaitingOnHost {
    fn drop(&mut self) {
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
    /// The pool whose thread runs the call (sync handlers only).
    pub(crate) pool: Option<Arc<dyn HostWaits>>,
    /// Set while an async handler's future is polled (where blocking on
    /// the host would stall the runtime).
    pub(crate) in_async: bool,
}

thread_local! {
    static CURRENT: RefCell<Option<CallScope>> = const { RefCell::new(None) };
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

/// `f` of the current call's scope, without cloning it.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&CallScope>) -> R) -> R {
    CURRENT.with(|c| f(c.borrow().as_ref()))
}

/// Whether this thread is polling an async handler: blocking here would
/// stall the async runtime (by default a single thread).
pub(crate) fn in_async() -> bool {
    with_current(|scope| scope.is_some_and(|s| s.in_async))
}

/// The current call's name, if the SDK is running one on this thread.
pub(crate) fn current_label() -> Option<Label> {
    with_current(|scope| scope.map(|s| s.call.label.clone()))
}

/// A future that runs every poll of `F` inside its scope (marked async).
pub(crate) struct Scoped<F> {
    scope: CallScope,
    inner: F,
}

impl<F> Scoped<F> {
    pub(crate) fn new(mut scope: CallScope, inner: F) -> Self {
        scope.in_async = true;
        scope.pool = None;
        Self { scope, inner }
    }
}

impl<F: Future + Unpin> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = enter(self.scope.clone());
        Pin::new(&mut self.inner).poll(cx)
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counting(AtomicUsize);

    impl HostWaitListener for Counting {
        fn holder_changed(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts host waits: +10 when one starts, +100 when it ends.
    struct Pool(Arc<AtomicUsize>);

    struct Waiting(Arc<AtomicUsize>);

    impl Drop for Waiting {
        fn drop(&mut self) {
            self.0.fetch_add(100, Ordering::SeqCst);
        }
    }

    impl HostWaits for Pool {
        fn host_wait(&self) -> Box<dyn Send> {
            self.0.fetch_add(10, Ordering::SeqCst);
            Box::new(Waiting(Arc::clone(&self.0)))
        }
    }

    fn scope(call: &Arc<CallState>, pool: Option<Arc<dyn HostWaits>>) -> CallScope {
        let link = Arc::new(crate::call::link::Link::detached());
        CallScope { link, call: Arc::clone(call), owner: None, pool, in_async: false }
    }

    #[test]
    fn waiting_on_the_host_tells_held_objects_and_the_running_threads_pool() {
        let call = CallState::new("f".into());
        let object = Arc::new(Counting(AtomicUsize::new(0)));
        let listener: Arc<dyn HostWaitListener> = object.clone();
        call.listen(Arc::clone(&listener));
        let counts = Arc::new(AtomicUsize::new(0));
        let entered = enter(scope(&call, Some(Arc::new(Pool(Arc::clone(&counts))))));
        assert!(!call.is_waiting_on_host());
        let waiting = call.wait_on_host();
        assert!(call.is_waiting_on_host());
        assert_eq!((object.0.load(Ordering::SeqCst), counts.load(Ordering::SeqCst)), (1, 10));
        drop(waiting);
        assert!(!call.is_waiting_on_host());
        assert_eq!((object.0.load(Ordering::SeqCst), counts.load(Ordering::SeqCst)), (2, 110));
        drop(entered);
        // From another thread (a handle passed on), the pool is not told;
        // the objects are.
        std::thread::scope(|s| {
            s.spawn(|| drop(call.wait_on_host()));
        });
        assert_eq!((object.0.load(Ordering::SeqCst), counts.load(Ordering::SeqCst)), (4, 110));
        call.unlisten(&listener);
        drop(call.wait_on_host());
        assert_eq!(object.0.load(Ordering::SeqCst), 4, "a released object hears nothing more");
    }

    #[test]
    fn finishing_expires_the_call() {
        let call = CallState::new("f".into());
        assert!(!call.is_finished());
        call.finish();
        assert!(call.is_finished());
        assert_eq!(call.label().to_string(), "f()");
    }
}
