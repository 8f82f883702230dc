//! [`LogStream`]: one call's log records on their way to the host, in
//! order, acknowledged before the call's answer; and [`LogHealth`]: what
//! the session has learnt about whether the host acknowledges them at all.
//!
//! The real host handles the plugin's requests concurrently, in any order:
//! records written back to back may be printed shuffled, or after the
//! script has already printed the call's result (HOST-NOTES F.1). So a
//! call's records travel one at a time, each sent once the host has
//! acknowledged the one before, and the call's answer waits until the last
//! one is acknowledged. Logging itself never waits: a record joins the
//! call's queue and the handler carries on.
//!
//! Every wait is bounded, in time and in what it holds:
//! - an answer waits at most the log timeout (`Plugin::log_ack_timeout`,
//!   5 s); the timer that bounds it ends as soon as the acknowledgements
//!   are in, so a busy plugin keeps no timers for calls already answered;
//! - a host that lets the bound pass is no longer trusted to acknowledge:
//!   from then on records are sent as they come and answers never wait
//!   (one stderr line says so). One record at a time is still tracked, as a
//!   probe: its acknowledgement restores the ordered mode, and one left
//!   unacknowledged past the bound is replaced by the next record. So
//!   against a host that never answers `host.log`, the plugin holds at most
//!   one waiter and no timers, however many records it sends.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::call::context::CallState;
use crate::call::link::Link;
use crate::call::logger::Record;
use crate::support::{lock, timer};

/// Whether the host acknowledges log records (see the module docs).
#[derive(Default)]
pub(crate) struct LogHealth {
    /// A record went unacknowledged past the bound.
    distrusted: AtomicBool,
    /// The probe record on its way, and when it left.
    probe: Mutex<Option<(u64, Instant)>>,
    /// The one stderr line has been written.
    reported: AtomicBool,
}

impl LogHealth {
    fn distrusted(&self) -> bool {
        self.distrusted.load(Ordering::Acquire)
    }

    fn distrust(&self, call: &CallState, bound: std::time::Duration) {
        self.distrusted.store(true, Ordering::Release);
        if !self.reported.swap(true, Ordering::AcqRel) {
            eprintln!(
                "scriptling-plugin: {}: the host did not acknowledge a log record within {bound:?}; records are now \
                 sent without waiting for acknowledgements, so their order is no longer guaranteed",
                call.label()
            );
        }
    }
}

/// One call's log records on their way to the host (see the module docs).
#[derive(Default)]
pub(crate) struct LogStream {
    state: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    /// Records waiting for the one in flight to be acknowledged.
    queued: VecDeque<Record>,
    /// The id of the record sent and not yet acknowledged.
    in_flight: Option<u64>,
    /// The call's answer has gone (or stopped waiting): later records are
    /// sent as they come.
    released: bool,
    /// The call's answer, waiting for the records before it.
    waiting: Option<Waiting>,
}

/// An answer held back for the call's records, and the deadline bounding it.
struct Waiting {
    respond: Box<dyn FnOnce() + Send>,
    /// Dropped when the answer goes, which cancels it.
    _deadline: timer::Deadline,
}

/// Queues `record` on the call's stream, sending it now if none is in flight.
pub(crate) fn push(call: &Arc<CallState>, link: &Arc<Link>, record: Record) {
    if link.log_health.distrusted() {
        return send_unordered(link, record);
    }
    let mut state = lock(&call.logs.state);
    if state.released {
        drop(state);
        send_unordered(link, record);
    } else if state.in_flight.is_some() {
        state.queued.push_back(record);
    } else {
        send_in_order(call, link, state, record);
    }
}

/// Sends `record` as the stream's one in flight (its id noted before it
/// leaves, so its acknowledgement always finds it); the acknowledgement
/// sends the next. A record that cannot be sent (the host has gone) goes
/// to stderr and the stream moves on.
fn send_in_order(
    call: &Arc<CallState>,
    link: &Arc<Link>,
    mut state: std::sync::MutexGuard<'_, StreamState>,
    mut record: Record,
) {
    loop {
        let (ack_call, ack_link) = (Arc::clone(call), Arc::clone(link));
        let sent = link.register_then(move |id, _| acknowledged(&ack_call, &ack_link, id)).and_then(|id| {
            state.in_flight = Some(id);
            link.send_request(id, "host.log", &record.params()).inspect_err(|_| link.forget(id))
        });
        if sent.is_ok() {
            return;
        }
        record.to_stderr(link.peer());
        state.in_flight = None;
        match state.queued.pop_front() {
            Some(next) => record = next,
            None => return release(state),
        }
    }
}

/// The host acknowledged record `id` (or the connection closed).
fn acknowledged(call: &Arc<CallState>, link: &Arc<Link>, id: u64) {
    let mut state = lock(&call.logs.state);
    if state.in_flight != Some(id) {
        return; // given up on already
    }
    state.in_flight = None;
    match state.queued.pop_front() {
        Some(next) => send_in_order(call, link, state, next),
        None => release(state),
    }
}

/// Nothing is in flight any more: the waiting answer, if any, goes.
fn release(mut state: std::sync::MutexGuard<'_, StreamState>) {
    let Some(waiting) = state.waiting.take() else { return };
    state.released = true;
    drop(state);
    (waiting.respond)();
}

/// Sends a record with nothing waiting on it, except one probe at a time
/// while the host is distrusted (see the module docs).
fn send_unordered(link: &Arc<Link>, record: Record) {
    let sent = match claim_probe(link) {
        Some(mut probe) => {
            let probe_link = Arc::clone(link);
            link.register_then(move |id, reply| {
                let health = &probe_link.log_health;
                let mut probe = lock(&health.probe);
                if probe.is_some_and(|(current, _)| current == id) {
                    *probe = None;
                    if reply.is_ok() {
                        health.distrusted.store(false, Ordering::Release);
                    }
                }
            })
            .and_then(|id| {
                *probe = Some((id, Instant::now()));
                link.send_request(id, "host.log", &record.params()).inspect_err(|_| link.forget(id))
            })
        }
        None => link.request_untracked("host.log", &record.params()),
    };
    if sent.is_err() {
        record.to_stderr(link.peer());
    }
}

/// The probe slot, if this record should be the probe: the host is
/// distrusted and no probe is on its way (one gone unanswered past the
/// bound is forgotten).
fn claim_probe(link: &Link) -> Option<std::sync::MutexGuard<'_, Option<(u64, Instant)>>> {
    let health = &link.log_health;
    if !health.distrusted() {
        return None;
    }
    let mut probe = lock(&health.probe);
    match *probe {
        Some((_, sent)) if sent.elapsed() < link.waits.log_ack => return None,
        Some((stale, _)) => link.forget(stale),
        None => {}
    }
    *probe = None;
    Some(probe)
}

/// Runs `respond` once the host has acknowledged every record the call
/// wrote, or after the session's log bound at the latest (then the rest are
/// sent without waiting). Runs it at once when nothing is outstanding.
pub(crate) fn settle(call: &Arc<CallState>, link: &Arc<Link>, respond: impl FnOnce() + Send + 'static) {
    let mut state = lock(&call.logs.state);
    if state.in_flight.is_none() {
        state.released = true;
        drop(state);
        return respond();
    }
    if link.log_health.distrusted() {
        drop(state);
        return give_up(call, link, Box::new(respond));
    }
    let deadline = {
        let (call, link) = (Arc::clone(call), Arc::clone(link));
        timer::after(link.waits.log_ack, move || {
            if let Some(respond) = take_waiting(&call) {
                link.log_health.distrust(&call, link.waits.log_ack);
                give_up(&call, &link, respond);
            }
        })
    };
    state.waiting = Some(Waiting { respond: Box::new(respond), _deadline: deadline });
}

fn take_waiting(call: &CallState) -> Option<Box<dyn FnOnce() + Send>> {
    lock(&call.logs.state).waiting.take().map(|w| w.respond)
}

/// Stops waiting for the host: the record in flight is forgotten (its
/// acknowledgement, if it ever comes, is dropped as late), the rest are sent
/// without waiting, and `respond` runs.
fn give_up(call: &CallState, link: &Arc<Link>, respond: Box<dyn FnOnce() + Send>) {
    let mut state = lock(&call.logs.state);
    state.released = true;
    let in_flight = state.in_flight.take();
    let rest = std::mem::take(&mut state.queued);
    drop(state);
    if let Some(id) = in_flight {
        link.forget(id);
    }
    for record in rest {
        send_unordered(link, record);
    }
    respond();
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use crate::call::link::{FrameSink, HostChannel, Waits};
    use crate::call::logger::Level;
    use crate::call::outgoing::Outgoing;
    use std::time::Duration;

    /// Records frames; the test plays the host by completing their ids.
    #[derive(Default)]
    struct Frames(Mutex<Vec<serde_json::Value>>);

    impl FrameSink for Frames {
        fn send_frame(&self, frame: Vec<u8>) {
            lock(&self.0).push(serde_json::from_slice(&frame).unwrap());
        }
    }

    fn setup_with(bound: Duration) -> (Arc<CallState>, Arc<Link>, Arc<Frames>, Arc<Outgoing>, tokio::runtime::Runtime) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let frames = Arc::new(Frames::default());
        let outgoing = Outgoing::new();
        let host = HostChannel { outgoing: Arc::clone(&outgoing), sink: frames.clone() };
        let waits = Waits { log_ack: bound, ..Waits::default() };
        let link = Link::to_host(host, rt.handle().clone(), waits);
        (CallState::new("f".into()), Arc::new(link), frames, outgoing, rt)
    }

    fn setup() -> (Arc<CallState>, Arc<Link>, Arc<Frames>, Arc<Outgoing>, tokio::runtime::Runtime) {
        setup_with(Duration::from_secs(60))
    }

    fn record(message: &str) -> Record {
        Record { level: Level::Info, message: message.into(), args: vec![] }
    }

    fn ack(outgoing: &Outgoing, frames: &Frames, index: usize) {
        assert_eq!(try_ack(outgoing, frames, index), crate::call::outgoing::Routed::Delivered);
    }

    fn try_ack(outgoing: &Outgoing, frames: &Frames, index: usize) -> crate::call::outgoing::Routed {
        let id = lock(&frames.0)[index]["id"].to_string();
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).unwrap();
        outgoing.complete(Some(&raw(&id)), Ok(&raw(r#"{"type":"null"}"#)))
    }

    fn messages(frames: &Frames) -> Vec<String> {
        lock(&frames.0).iter().map(|f| f["params"]["message"].as_str().unwrap().to_owned()).collect()
    }

    fn answered_flag() -> (Arc<Mutex<bool>>, impl FnOnce() + Send + 'static) {
        let answered = Arc::new(Mutex::new(false));
        let flag = Arc::clone(&answered);
        (answered, move || *lock(&flag) = true)
    }

    #[test]
    fn records_go_one_at_a_time_and_the_answer_waits_for_the_last_ack() {
        let (call, link, frames, outgoing, rt) = setup();
        for m in ["a", "b", "c"] {
            push(&call, &link, record(m));
        }
        assert_eq!(messages(&frames), ["a"], "the next waits for the first ack");
        let (answered, respond) = answered_flag();
        settle(&call, &link, respond);
        ack(&outgoing, &frames, 0);
        assert_eq!(messages(&frames), ["a", "b"]);
        ack(&outgoing, &frames, 1);
        assert_eq!(messages(&frames), ["a", "b", "c"]);
        assert!(!*lock(&answered), "the answer waits for the last record");
        ack(&outgoing, &frames, 2);
        assert!(*lock(&answered));
        // The timer that bounded the wait is gone with it.
        rt.block_on(tokio::task::yield_now());
        assert_eq!(rt.metrics().num_alive_tasks(), 0);
        // After the answer, records go out as they come.
        push(&call, &link, record("late1"));
        push(&call, &link, record("late2"));
        assert_eq!(messages(&frames).len(), 5);
        assert_eq!(outgoing.pending_count(), 0, "nothing waits on records after the answer");
    }

    #[test]
    fn without_records_the_answer_goes_at_once() {
        let (call, link, _frames, _outgoing, rt) = setup();
        let (answered, respond) = answered_flag();
        settle(&call, &link, respond);
        assert!(*lock(&answered));
        assert_eq!(rt.metrics().num_alive_tasks(), 0);
    }

    #[test]
    fn a_host_that_never_acknowledges_delays_one_answer_by_the_bound_and_no_other() {
        let (call, link, frames, outgoing, rt) = setup_with(Duration::from_millis(50));
        push(&call, &link, record("a"));
        push(&call, &link, record("b"));
        let (tx, rx) = std::sync::mpsc::channel();
        let started = std::time::Instant::now();
        settle(&call, &link, move || tx.send(()).unwrap());
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(80)).await });
        rx.try_recv().expect("answered after the bound");
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(messages(&frames), ["a", "b"], "the rest is sent without waiting");
        // The unacknowledged record is forgotten; "b" went as the probe.
        assert_eq!(outgoing.pending_count(), 1);
        // Later calls answer at once; one record at a time is a probe.
        for i in 0..1000 {
            let call = CallState::new("g".into());
            push(&call, &link, record(&format!("r{i}")));
            let (answered, respond) = answered_flag();
            settle(&call, &link, respond);
            assert!(*lock(&answered), "call {i} answered at once");
        }
        assert_eq!(messages(&frames).len(), 1002);
        assert!(outgoing.pending_count() <= 1, "{}", outgoing.pending_count());
        assert_eq!(rt.metrics().num_alive_tasks(), 0, "no timers held");
        // The probe's acknowledgement restores order and waiting. (The probe
        // is "b", or a later record if the loop outlasted the bound and "b"
        // was replaced: the one still tracked.)
        let delivered = (0..messages(&frames).len())
            .rev()
            .any(|i| try_ack(&outgoing, &frames, i) == crate::call::outgoing::Routed::Delivered);
        assert!(delivered, "one record is tracked as the probe");
        let call = CallState::new("h".into());
        push(&call, &link, record("x"));
        push(&call, &link, record("y"));
        let (answered, respond) = answered_flag();
        settle(&call, &link, respond);
        assert!(!*lock(&answered), "trusted again: the answer waits");
        let x = messages(&frames).len() - 1;
        ack(&outgoing, &frames, x);
        ack(&outgoing, &frames, x + 1);
        assert!(*lock(&answered));
    }

    #[test]
    fn a_closed_connection_releases_the_answer() {
        let (call, link, frames, outgoing, _rt) = setup();
        push(&call, &link, record("a"));
        push(&call, &link, record("b"));
        let (answered, respond) = answered_flag();
        settle(&call, &link, respond);
        outgoing.close("host gone");
        assert!(*lock(&answered));
        assert_eq!(messages(&frames), ["a"], "b could not be sent and went to stderr");
    }
}
