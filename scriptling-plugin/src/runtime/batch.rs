//! [`Batch`]: collects the answers of a batch's requests into one array, in
//! request order, and hands the array on when the last answer is in.
//!
//! Each element's completion fills its own slot; no task or thread is spent
//! per element, so a batch costs a small multiple of its size. Elements
//! without an id (notifications) owe nothing and are left out of the array.

use std::sync::{Arc, Mutex};

use crate::rpc::{self, Id};
use crate::runtime::done::{Done, Outcome};
use crate::support::lock;

/// Batches at least this long give back the memory they freed when done.
const LARGE: usize = 10_000;

/// Receives the batch's answer array, or `None` when it owes no answers.
pub(crate) type Finish = Box<dyn FnOnce(Option<Vec<u8>>) + Send>;

/// A batch being answered.
pub(crate) struct Batch {
    state: Mutex<State>,
}

struct State {
    /// One per element owing an answer, in request order.
    answers: Vec<(Id, Option<Outcome>)>,
    /// Answers still to come.
    owed: usize,
    /// Every element has been added.
    sealed: bool,
    finish: Option<Finish>,
}

impl Batch {
    /// A batch whose array goes to `finish`.
    pub(crate) fn new(finish: Finish) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State { answers: Vec::new(), owed: 0, sealed: false, finish: Some(finish) }),
        })
    }

    /// Adds the next element; its outcome goes to the returned completion.
    /// An element without an id owes nothing: its outcome is dropped.
    pub(crate) fn element(self: &Arc<Self>, id: Option<Id>) -> Done {
        let Some(id) = id else { return Done::nobody() };
        let mut state = lock(&self.state);
        let slot = state.answers.len();
        state.answers.push((id, None));
        state.owed += 1;
        drop(state);
        let batch = Arc::clone(self);
        Done::new(move |outcome| batch.fill(slot, outcome))
    }

    /// Declares every element added: the array goes out once all are answered.
    pub(crate) fn seal(&self) {
        let mut state = lock(&self.state);
        state.sealed = true;
        self.finish_if_complete(state);
    }

    fn fill(&self, slot: usize, outcome: Outcome) {
        let mut state = lock(&self.state);
        state.answers[slot].1 = Some(outcome);
        state.owed -= 1;
        self.finish_if_complete(state);
    }

    fn finish_if_complete(&self, mut state: std::sync::MutexGuard<'_, State>) {
        if !state.sealed || state.owed > 0 {
            return;
        }
        let Some(finish) = state.finish.take() else { return };
        let answers = std::mem::take(&mut state.answers);
        drop(state);
        let large = answers.len() >= LARGE;
        finish(frame(answers));
        if large {
            crate::sys::return_freed_memory();
        }
    }
}

/// The answer array (without its newline), or `None` if it would be empty.
fn frame(answers: Vec<(Id, Option<Outcome>)>) -> Option<Vec<u8>> {
    if answers.is_empty() {
        return None;
    }
    let size: usize = answers.iter().map(|(id, o)| id.get().len() + o.as_ref().map_or(0, answer_len) + 48).sum();
    let mut out = Vec::with_capacity(size + 2);
    out.push(b'[');
    for (i, (id, outcome)) in answers.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match outcome.expect("every answer is in") {
            Ok(result) => rpc::write_encoded(&mut out, &id, &result),
            Err(error) => rpc::write_error(&mut out, Some(&id), &error),
        }
    }
    out.push(b']');
    Some(out)
}

fn answer_len(outcome: &Outcome) -> usize {
    match outcome {
        Ok(result) => result.len(),
        Err(error) => error.message.len(),
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use crate::rpc::RpcError;
    use serde_json::value::RawValue;

    fn id(s: &str) -> Option<Id> {
        Some(RawValue::from_string(s.to_owned()).unwrap())
    }

    type Frames = Arc<Mutex<Vec<Option<String>>>>;

    fn collect() -> (Arc<Batch>, Frames) {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&out);
        let batch = Batch::new(Box::new(move |frame| {
            lock(&sink).push(frame.map(|f| String::from_utf8(f).unwrap()));
        }));
        (batch, out)
    }

    #[test]
    fn answers_come_out_in_request_order_once_all_are_in() {
        let (batch, out) = collect();
        let a = batch.element(id("1"));
        let note = batch.element(None);
        let b = batch.element(id("\"b\""));
        batch.seal();
        b.send(Err(RpcError::application("no")));
        note.send(Ok(b"null".to_vec().into()));
        assert!(lock(&out).is_empty(), "still owed one");
        a.send(Ok(br#"{"type":"int","value":1}"#.to_vec().into()));
        assert_eq!(
            lock(&out).as_slice(),
            [Some(
                r#"[{"jsonrpc":"2.0","id":1,"result":{"type":"int","value":1}},{"jsonrpc":"2.0","id":"b","error":{"code":-32000,"message":"no"}}]"#
                    .to_owned()
            )]
        );
    }

    #[test]
    fn answers_before_sealing_wait_for_the_seal() {
        let (batch, out) = collect();
        batch.element(id("1")).send(Ok(b"null".to_vec().into()));
        assert!(lock(&out).is_empty(), "more elements may follow");
        batch.seal();
        assert_eq!(lock(&out).len(), 1);
    }

    #[test]
    fn notifications_only_owe_nothing() {
        let (batch, out) = collect();
        let n = batch.element(None);
        batch.seal();
        assert_eq!(lock(&out).as_slice(), [None]);
        n.send(Ok(b"null".to_vec().into()));
        assert_eq!(lock(&out).len(), 1, "finished once");
    }
}
