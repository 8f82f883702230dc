//! [`Outgoing`]: the plugin's own requests to the host (`callback.call`,
//! `host.log`), in their own id space, with a map of pending waiters.
//!
//! Ids come from a counter and never collide with each other; they may
//! equal host ids, which is legal because answers are told from requests by
//! the absence of `method`. The reader routes each answer straight to its
//! waiter (a channel a call blocks or awaits on, or a completion run in
//! place); a waiter that gives up (times out, is cancelled) removes its
//! entry, so a host that never answers leaves nothing behind; closing the
//! connection fails every waiter at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use tokio::sync::oneshot;

use crate::call::lent::Held;
use crate::rpc::Failure;
use crate::support::{lock, timer};

/// Why one of the plugin's own requests did not get a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OutgoingError {
    /// The host answered with an error.
    Remote { code: i64, message: String },
    /// The host's answer is not a well-formed response (what is wrong).
    Malformed(String),
    /// No answer came within the limit.
    TimedOut(Duration),
    /// The connection closed (or was never able to reach the host).
    Closed(String),
    /// The transport cannot call the host (HTTP).
    Unsupported(String),
    /// The request could not be encoded (a NaN among its arguments).
    Unsendable(String),
    /// Not sent: as many sync calls as allowed already wait for this host
    /// (the message says so, naming the limit).
    Crowded(String),
}

pub(crate) type Reply = Result<Box<RawValue>, OutgoingError>;

/// What became of an answer from the host.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Routed {
    /// Handed to its waiter.
    Delivered,
    /// An answer to a request the plugin sent but stopped waiting for.
    Late,
    /// No request of the plugin's ever had this id.
    Unknown,
}

pub(crate) struct Outgoing {
    next_id: AtomicU64,
    state: Mutex<State>,
    /// Told when a request that awaits an answer is registered: the
    /// session's reading must be there to read it (see [`Outgoing::on_awaiting`]).
    on_awaiting: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// Who gets an answer.
enum Waiter {
    /// A sync handler blocking on the other end.
    Blocking(mpsc::SyncSender<Reply>),
    /// An async handler awaiting the other end.
    Async(oneshot::Sender<Reply>),
    /// A completion run by whoever routes the answer, told its id.
    Then(Box<dyn FnOnce(u64, Reply) + Send>),
}

impl Waiter {
    fn deliver(self, id: u64, reply: Reply) {
        match self {
            // The waiter may have given up in the meantime; nothing to do then.
            Waiter::Blocking(tx) => drop(tx.try_send(reply)),
            Waiter::Async(tx) => drop(tx.send(reply)),
            Waiter::Then(f) => f(id, reply),
        }
    }
}

struct State {
    pending: HashMap<u64, Waiter>,
    /// Set once the connection is gone; new requests fail with it.
    closed: Option<String>,
    /// How many of `pending` are sync handlers blocking on the host.
    blocking: usize,
    /// The most that may (`None`: no limit), and the setting that raises
    /// it, for the message.
    max_blocking: Option<(usize, &'static str)>,
}

impl State {
    /// Takes the waiter of `id` out, keeping the count of blocking ones.
    fn take(&mut self, id: u64) -> Option<Waiter> {
        let waiter = self.pending.remove(&id);
        if matches!(waiter, Some(Waiter::Blocking(_))) {
            self.blocking -= 1;
        }
        waiter
    }
}

/// A registered request awaiting its answer. Dropping it unregisters it.
pub(crate) struct Pending {
    id: u64,
    rx: Receiver,
    owner: Arc<Outgoing>,
}

enum Receiver {
    Blocking(mpsc::Receiver<Reply>),
    Async(oneshot::Receiver<Reply>),
}

impl Outgoing {
    pub(crate) fn new() -> Arc<Self> {
        Self::with_limit(None)
    }

    /// Lets at most `most` sync handlers block on the host at once (a
    /// network connection's bound, so that a client that never answers
    /// cannot hold every thread of a pool the connections share); one
    /// more fails at once, naming `setting`.
    pub(crate) fn limited(most: usize, setting: &'static str) -> Arc<Self> {
        Self::with_limit(Some((most, setting)))
    }

    fn with_limit(max_blocking: Option<(usize, &'static str)>) -> Arc<Self> {
        Arc::new(Self {
            next_id: AtomicU64::new(1),
            state: Mutex::new(State { pending: HashMap::new(), closed: None, blocking: 0, max_blocking }),
            on_awaiting: OnceLock::new(),
        })
    }

    /// Calls `hook` whenever a request that awaits an answer is registered,
    /// before it is sent (the session's reading, put down while a call runs
    /// on its thread, is wanted: the answer must be read). Set once.
    pub(crate) fn on_awaiting(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_awaiting.set(hook);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Allocates an id whose answer a sync handler will block for.
    /// `announce`: tell the session's reading it is wanted (see
    /// [`on_awaiting`](Self::on_awaiting)); not when the handler's own
    /// thread is to read the answer (`call/lent.rs`).
    pub(crate) fn register_blocking(self: &Arc<Self>, announce: bool) -> Result<Pending, OutgoingError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let id = self.insert(Waiter::Blocking(tx), announce)?;
        Ok(Pending { id, rx: Receiver::Blocking(rx), owner: Arc::clone(self) })
    }

    /// Allocates an id whose answer an async handler will await.
    pub(crate) fn register_async(self: &Arc<Self>) -> Result<Pending, OutgoingError> {
        let (tx, rx) = oneshot::channel();
        let id = self.insert(Waiter::Async(tx), true)?;
        Ok(Pending { id, rx: Receiver::Async(rx), owner: Arc::clone(self) })
    }

    /// Allocates an id whose answer is handed to `then` (with the id),
    /// wherever it is routed (so `then` must be quick). Closing the
    /// connection hands it the closing error; [`forget`](Self::forget)
    /// drops it untold.
    pub(crate) fn register_then(&self, then: impl FnOnce(u64, Reply) + Send + 'static) -> Result<u64, OutgoingError> {
        self.insert(Waiter::Then(Box::new(then)), true)
    }

    /// Allocates an id nobody waits on: its answer, if any, is dropped as late.
    pub(crate) fn untracked(&self) -> Result<u64, OutgoingError> {
        if let Some(reason) = &self.state().closed {
            return Err(OutgoingError::Closed(reason.clone()));
        }
        Ok(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Drops the waiter of `id` without telling it.
    pub(crate) fn forget(&self, id: u64) {
        self.state().take(id);
    }

    /// Fails the request `id` with `error`, if it still waits (its answer,
    /// if it comes, is then late).
    fn expire(&self, id: u64, error: OutgoingError) {
        let waiter = self.state().take(id);
        if let Some(waiter) = waiter {
            waiter.deliver(id, Err(error));
        }
    }

    /// Allocates an id for `waiter`, unless the connection is closed.
    fn insert(&self, waiter: Waiter, announce: bool) -> Result<u64, OutgoingError> {
        let mut state = self.state();
        if let Some(reason) = &state.closed {
            return Err(OutgoingError::Closed(reason.clone()));
        }
        if let Waiter::Blocking(_) = waiter {
            if let Some((most, setting)) = state.max_blocking.filter(|&(most, _)| state.blocking >= most) {
                return Err(OutgoingError::Crowded(format!(
                    "this connection has {most} calls waiting for it to answer callbacks, the most it may ({setting}); \
                     answer them first"
                )));
            }
            state.blocking += 1;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        state.pending.insert(id, waiter);
        drop(state);
        if let Some(hook) = self.on_awaiting.get().filter(|_| announce) {
            hook();
        }
        Ok(id)
    }

    /// Routes an answer to its waiter.
    pub(crate) fn complete(&self, id: Option<&RawValue>, outcome: Result<&RawValue, Failure>) -> Routed {
        let Some(id) = id.and_then(|raw| raw.get().parse::<u64>().ok()) else {
            return Routed::Unknown;
        };
        let Some(waiter) = self.state().take(id) else {
            let issued = id != 0 && id < self.next_id.load(Ordering::Relaxed);
            return if issued { Routed::Late } else { Routed::Unknown };
        };
        let reply = match outcome {
            Ok(result) => Ok(result.to_owned()),
            Err(Failure::Remote(e)) => Err(OutgoingError::Remote { code: e.code, message: e.message }),
            Err(Failure::Malformed(why)) => Err(OutgoingError::Malformed(why)),
        };
        waiter.deliver(id, reply);
        Routed::Delivered
    }

    /// Fails every pending request and every later one with `reason`.
    pub(crate) fn close(&self, reason: &str) {
        let drained: Vec<_> = {
            let mut state = self.state();
            state.closed.get_or_insert_with(|| reason.to_owned());
            state.blocking = 0;
            state.pending.drain().collect()
        };
        for (id, waiter) in drained {
            waiter.deliver(id, Err(OutgoingError::Closed(reason.to_owned())));
        }
    }

    /// Whether any request waits for an answer (the reader then polls for
    /// it briefly, see `transport/session/input.rs`).
    pub(crate) fn awaiting(&self) -> bool {
        !self.state().pending.is_empty()
    }

    /// Requests waiting for an answer (for tests of boundedness).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn pending_count(&self) -> usize {
        self.state().pending.len()
    }
}

impl Pending {
    /// The request id to put on the wire.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Blocks the thread until the answer comes, for at most `limit` (a sync
    /// handler's wait: it runs on the sync pool, never on the runtime).
    pub(crate) fn wait_blocking(self, limit: Duration) -> Reply {
        let Receiver::Blocking(rx) = &self.rx else { unreachable!("registered for a blocking wait") };
        receive(rx, limit, limit)
    }

    /// Like [`wait_blocking`](Self::wait_blocking), reading the host's
    /// messages on this thread meanwhile when it holds the reading
    /// (`held`): then the answer is read here and nobody is woken for it.
    /// The reading is put down again (dropped) before any wait.
    pub(crate) fn wait_reading(self, limit: Duration, held: Option<Box<dyn Held>>) -> Reply {
        let Some(mut held) = held else { return self.wait_blocking(limit) };
        let Receiver::Blocking(rx) = &self.rx else { unreachable!("registered for a blocking wait") };
        let until = Instant::now().checked_add(limit);
        let mut reply = None;
        if let Some(until) = until {
            held.read_until(
                &mut || {
                    if let Ok(answer) = rx.try_recv() {
                        reply = Some(answer);
                    }
                    reply.is_some()
                },
                until,
            );
        }
        drop(held);
        match reply.or_else(|| rx.try_recv().ok()) {
            Some(reply) => reply,
            None => {
                let left = until.map_or(limit, |until| until.saturating_duration_since(Instant::now()));
                receive(rx, left, limit)
            }
        }
    }

    /// Awaits the answer, for at most `limit`. The bound is kept by the
    /// runtime's timer thread, not tokio's (the handler's runtime may have
    /// no timers): at the deadline it fails the request as timed out.
    pub(crate) async fn wait(mut self, limit: Duration) -> Reply {
        let (owner, id) = (Arc::clone(&self.owner), self.id);
        let _deadline = timer::after(limit, move || owner.expire(id, OutgoingError::TimedOut(limit)));
        let Receiver::Async(rx) = &mut self.rx else { unreachable!("registered for an async wait") };
        rx.await.unwrap_or_else(|_| Err(OutgoingError::Closed("the connection closed".into())))
    }
}

/// The answer on `rx`, waited for up to `left` (the wait began `limit` before its end).
fn receive(rx: &mpsc::Receiver<Reply>, left: Duration, limit: Duration) -> Reply {
    match rx.recv_timeout(left) {
        Ok(reply) => reply,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(OutgoingError::TimedOut(limit)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(OutgoingError::Closed("the connection closed".into())),
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Gone already if it was answered.
        self.owner.forget(self.id);
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use crate::rpc::RemoteErrorObject;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[tokio::test]
    async fn answers_reach_their_own_waiter_in_any_order() {
        let out = Outgoing::new();
        let a = out.register_async().unwrap();
        let b = out.register_async().unwrap();
        assert_ne!(a.id(), b.id());
        let (ida, idb) = (raw(&a.id().to_string()), raw(&b.id().to_string()));
        assert_eq!(out.complete(Some(&idb), Ok(&raw("\"B\""))), Routed::Delivered);
        let no = Failure::Remote(RemoteErrorObject { code: -32000, message: "no".into() });
        assert_eq!(out.complete(Some(&ida), Err(no)), Routed::Delivered);
        let limit = Duration::from_secs(5);
        assert_eq!(b.wait(limit).await.unwrap().get(), "\"B\"");
        assert_eq!(a.wait(limit).await.unwrap_err(), OutgoingError::Remote { code: -32000, message: "no".into() });
        assert_eq!(out.pending_count(), 0);
    }

    #[test]
    fn late_and_foreign_ids_are_told_apart() {
        let out = Outgoing::new();
        let issued = out.untracked().unwrap();
        assert_eq!(out.complete(Some(&raw(&issued.to_string())), Ok(&raw("null"))), Routed::Late);
        assert_eq!(out.complete(Some(&raw("99")), Ok(&raw("null"))), Routed::Unknown);
        assert_eq!(out.complete(Some(&raw("\"x\"")), Ok(&raw("null"))), Routed::Unknown);
        assert_eq!(out.complete(None, Ok(&raw("null"))), Routed::Unknown);
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_nothing_behind() {
        let out = Outgoing::new();
        let p = out.register_blocking(true).unwrap();
        let id = raw(&p.id().to_string());
        assert_eq!(out.pending_count(), 1);
        assert_eq!(
            p.wait_blocking(Duration::from_millis(10)).unwrap_err(),
            OutgoingError::TimedOut(Duration::from_millis(10))
        );
        assert_eq!(out.pending_count(), 0);
        assert_eq!(out.complete(Some(&id), Ok(&raw("null"))), Routed::Late);
    }

    #[test]
    fn a_malformed_answer_fails_its_request() {
        let out = Outgoing::new();
        let p = out.register_blocking(true).unwrap();
        let id = raw(&p.id().to_string());
        out.complete(Some(&id), Err(Failure::Malformed("it has neither".into())));
        assert_eq!(
            p.wait_blocking(Duration::from_secs(5)).unwrap_err(),
            OutgoingError::Malformed("it has neither".into())
        );
    }

    #[test]
    fn completions_run_on_the_answer_or_on_close() {
        let out = Outgoing::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = |seen: &Arc<Mutex<Vec<Reply>>>| {
            let seen = Arc::clone(seen);
            move |_, reply| lock(&seen).push(reply)
        };
        let first = out.register_then(log(&seen)).unwrap();
        let _second = out.register_then(log(&seen)).unwrap();
        let forgotten = out.register_then(log(&seen)).unwrap();
        out.forget(forgotten);
        assert_eq!(out.complete(Some(&raw(&first.to_string())), Ok(&raw("7"))), Routed::Delivered);
        out.close("gone");
        let seen = lock(&seen);
        assert_eq!(seen.len(), 2, "the forgotten one is never told");
        assert_eq!(seen[0].as_ref().unwrap().get(), "7");
        assert_eq!(seen[1].as_ref().unwrap_err(), &OutgoingError::Closed("gone".into()));
        assert_eq!(out.register_then(|_, _| {}).unwrap_err(), OutgoingError::Closed("gone".into()));
    }

    #[test]
    fn close_fails_current_and_future_waiters() {
        let out = Outgoing::new();
        let p = out.register_blocking(true).unwrap();
        out.close("host gone");
        assert_eq!(p.wait_blocking(Duration::from_secs(5)).unwrap_err(), OutgoingError::Closed("host gone".into()));
        assert_eq!(out.register_blocking(true).err(), Some(OutgoingError::Closed("host gone".into())));
    }
}
