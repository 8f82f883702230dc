//! The per-call context: which connection a call came from and the state of
//! the call itself, made available to conversions and handles while the SDK
//! runs the call's handler.
//!
//! Some conversions need more than the value: returning a class instance
//! inserts it into the object table, a `Ref<T>` argument looks its id up
//! there, and a `Callback` must remember which connection can call the host.
//! They find the current call here. The SDK installs the context around a
//! sync handler's whole run and around every poll of an async handler's
//! future, so it is present in argument conversion, the handler body and
//! result conversion alike, wherever a value is nested. Code running on
//! threads or tasks the handler spawns itself has no current call.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use crate::connection::Connection;

/// The state of one call, shared with anything that outlives its handler
/// (callback handles, object guards).
#[derive(Default)]
pub(crate) struct CallState {
    finished: AtomicBool,
    waiting_on_host: AtomicUsize,
}

impl CallState {
    /// Marks the call as answered: its callbacks expire.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Whether the call is blocked waiting for the host (a callback round
    /// trip), so the objects it holds cannot be released until the host
    /// answers.
    pub(crate) fn is_waiting_on_host(&self) -> bool {
        self.waiting_on_host.load(Ordering::Acquire) > 0
    }

    /// Marks the call as waiting for the host until the guard is dropped.
    pub(crate) fn wait_on_host(self: &Arc<Self>) -> WaitingOnHost {
        self.waiting_on_host.fetch_add(1, Ordering::AcqRel);
        WaitingOnHost(Arc::clone(self))
    }
}

pub(crate) struct WaitingOnHost(Arc<CallState>);

impl Drop for WaitingOnHost {
    fn drop(&mut self) {
        self.0.waiting_on_host.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the current call can reach.
#[derive(Clone)]
pub(crate) struct CallScope {
    pub(crate) conn: Arc<Connection>,
    pub(crate) call: Arc<CallState>,
    /// The client the call came from: objects it creates are its own
    /// (always 0 on stdio; see the HTTP transport).
    pub(crate) client: u64,
}

thread_local! {
    static CURRENT: RefCell<Option<CallScope>> = const { RefCell::new(None) };
    /// Set while an async handler's future is being polled on this thread.
    static IN_ASYNC_POLL: Cell<bool> = const { Cell::new(false) };
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
