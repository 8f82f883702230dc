//! [`Outgoing`]: the plugin's own requests to the host (`callback.call`,
//! `host.log`), in their own id space, with a map of pending waiters.
//!
//! Ids come from an atomic counter and never collide with each other; they
//! may equal host ids, which is legal because responses are told from
//! requests by the absence of `method`. The reader thread routes each
//! response straight to its waiter (a channel a call blocks or awaits on, or
//! a completion run in place); a waiter that is dropped (cancelled) removes
//! its entry; closing the connection fails every waiter at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::value::RawValue;
use tokio::sync::oneshot;

use crate::rpc::RemoteErrorObject;
use crate::support::lock;

/// Why one of the plugin's own requests did not get a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OutgoingError {
    /// The host answered with an error.
    Remote { code: i64, message: String },
    /// The connection closed (or was never able to reach the host).
    Closed(String),
    /// The transport cannot call the host (HTTP).
    Unsupported(String),
    /// The request could not be encoded (a NaN among its arguments).
    Unsendable(String),
}

pub(crate) type Reply = Result<Box<RawValue>, OutgoingError>;

/// How long a blocking waiter spins before parking.
const SPIN_FOR_REPLY: std::time::Duration = std::time::Duration::from_micros(60);

pub(crate) struct Outgoing {
    next_id: AtomicU64,
    state: Mutex<State>,
}

/// Who gets a response.
enum Waiter {
    /// A call blocking or awaiting on the other end.
    Channel(oneshot::Sender<Reply>),
    /// A completion run by whoever routes the response.
    Then(Box<dyn FnOnce(Reply) + Send>),
}

impl Waiter {
    fn deliver(self, reply: Reply) {
        match self {
            // The waiter may have given up in the meantime; nothing to do then.
            Waiter::Channel(tx) => drop(tx.send(reply)),
            Waiter::Then(f) => f(reply),
        }
    }
}

struct State {
    pending: HashMap<u64, Waiter>,
    /// Set once the connection is gone; new requests fail with it.
    closed: Option<String>,
}

/// A registered request awaiting its response. Dropping it unregisters it.
pub(crate) struct Pending {
    id: u64,
    rx: Option<oneshot::Receiver<Reply>>,
    owner: Arc<Outgoing>,
}

impl Outgoing {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            next_id: AtomicU64::new(1),
            state: Mutex::new(State { pending: HashMap::new(), closed: None }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Allocates an id and registers a waiter for its response.
    pub(crate) fn register(self: &Arc<Self>) -> Result<Pending, OutgoingError> {
        let (tx, rx) = oneshot::channel();
        let id = self.insert(Waiter::Channel(tx))?;
        Ok(Pending { id, rx: Some(rx), owner: Arc::clone(self) })
    }

    /// Allocates an id whose response is handed to `then`, wherever it is
    /// routed (so `then` must be quick). Closing the connection hands it the
    /// closing error.
    pub(crate) fn register_then(&self, then: impl FnOnce(Reply) + Send + 'static) -> Result<u64, OutgoingError> {
        self.insert(Waiter::Then(Box::new(then)))
    }

    /// Drops the waiter of `id` without telling it (its request was never sent).
    pub(crate) fn forget(&self, id: u64) {
        self.state().pending.remove(&id);
    }

    /// Allocates an id for `waiter`, unless the connection is closed.
    fn insert(&self, waiter: Waiter) -> Result<u64, OutgoingError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state();
        if let Some(reason) = &state.closed {
            return Err(OutgoingError::Closed(reason.clone()));
        }
        state.pending.insert(id, waiter);
        Ok(id)
    }

    /// Routes a response to its waiter. Returns `false` for an id nobody is
    /// waiting for (a late or foreign response), which the caller reports.
    pub(crate) fn complete(&self, id: Option<&RawValue>, outcome: Result<&RawValue, RemoteErrorObject>) -> bool {
        let Some(id) = id.and_then(|raw| raw.get().parse::<u64>().ok()) else {
            return false;
        };
        let Some(waiter) = self.state().pending.remove(&id) else {
            return false;
        };
        let reply = match outcome {
            Ok(result) => Ok(result.to_owned()),
            Err(e) => Err(OutgoingError::Remote { code: e.code, message: e.message }),
        };
        waiter.deliver(reply);
        true
    }

    /// Fails every pending request and every later one with `reason`.
    pub(crate) fn close(&self, reason: &str) {
        let drained: Vec<_> = {
            let mut state = self.state();
            state.closed.get_or_insert_with(|| reason.to_owned());
            state.pending.drain().collect()
        };
        for (_, waiter) in drained {
            waiter.deliver(Err(OutgoingError::Closed(reason.to_owned())));
        }
    }

    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        self.state().pending.len()
    }
}

impl Pending {
    /// The request id to put on the wire.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Waits for the response.
    pub(crate) async fn wait(mut self) -> Reply {
        let rx = self.rx.take().expect("waited once");
        rx.await.unwrap_or_else(|_| Err(OutgoingError::Closed("the connection closed".into())))
    }

    /// Waits for the response, blocking the thread (for sync handlers, which
    /// run on the sync pool, never on the async runtime).
    pub(crate) fn wait_blocking(mut self) -> Reply {
        let mut rx = self.rx.take().expect("waited once");
        // A quick host answers within a few tens of microseconds: spin for
        // that long before parking, which saves a thread wake-up per callback.
        let deadline = std::time::Instant::now() + SPIN_FOR_REPLY;
        let mut turns = 0u32;
        loop {
            match rx.try_recv() {
                Ok(reply) => return reply,
                Err(oneshot::error::TryRecvError::Closed) => {
                    return Err(OutgoingError::Closed("the connection closed".into()));
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            std::hint::spin_loop();
            turns = turns.wrapping_add(1);
            if turns.is_multiple_of(64) && std::time::Instant::now() >= deadline {
                break;
            }
        }
        rx.blocking_recv().unwrap_or_else(|_| Err(OutgoingError::Closed("the connection closed".into())))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.rx.is_some() {
            self.owner.state().pending.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[tokio::test]
    async fn responses_reach_their_own_waiter_in_any_order() {
        let out = Outgoing::new();
        let a = out.register().unwrap();
        let b = out.register().unwrap();
        assert_ne!(a.id(), b.id());
        let (ida, idb) = (raw(&a.id().to_string()), raw(&b.id().to_string()));
        assert!(out.complete(Some(&idb), Ok(&raw("\"B\""))));
        assert!(out.complete(Some(&ida), Err(RemoteErrorObject { code: -32000, message: "no".into() })));
        assert_eq!(b.wait().await.unwrap().get(), "\"B\"");
        assert_eq!(a.wait().await.unwrap_err(), OutgoingError::Remote { code: -32000, message: "no".into() });
        assert_eq!(out.pending_count(), 0);
    }

    #[test]
    fn unknown_and_foreign_ids_are_refused() {
        let out = Outgoing::new();
        assert!(!out.complete(Some(&raw("99")), Ok(&raw("null"))));
        assert!(!out.complete(Some(&raw("\"x\"")), Ok(&raw("null"))));
        assert!(!out.complete(None, Ok(&raw("null"))));
    }

    #[test]
    fn a_dropped_waiter_cleans_its_entry() {
        let out = Outgoing::new();
        let p = out.register().unwrap();
        let id = raw(&p.id().to_string());
        assert_eq!(out.pending_count(), 1);
        drop(p);
        assert_eq!(out.pending_count(), 0);
        assert!(!out.complete(Some(&id), Ok(&raw("null"))));
    }

    #[test]
    fn completions_run_on_the_response_or_on_close() {
        let out = Outgoing::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = |seen: &Arc<Mutex<Vec<Reply>>>| {
            let seen = Arc::clone(seen);
            move |reply| lock(&seen).push(reply)
        };
        let first = out.register_then(log(&seen)).unwrap();
        let _second = out.register_then(log(&seen)).unwrap();
        let forgotten = out.register_then(log(&seen)).unwrap();
        out.forget(forgotten);
        assert!(out.complete(Some(&raw(&first.to_string())), Ok(&raw("7"))));
        out.close("gone");
        let seen = lock(&seen);
        assert_eq!(seen.len(), 2, "the forgotten one is never told");
        assert_eq!(seen[0].as_ref().unwrap().get(), "7");
        assert_eq!(seen[1].as_ref().unwrap_err(), &OutgoingError::Closed("gone".into()));
        assert_eq!(out.register_then(|_| {}).unwrap_err(), OutgoingError::Closed("gone".into()));
    }

    #[test]
    fn close_fails_current_and_future_waiters() {
        let out = Outgoing::new();
        let p = out.register().unwrap();
        out.close("host gone");
        assert_eq!(p.wait_blocking().unwrap_err(), OutgoingError::Closed("host gone".into()));
        assert_eq!(out.register().err(), Some(OutgoingError::Closed("host gone".into())));
    }
}
