//! [`Done`]: where a request's outcome goes, exactly once, by construction.
//!
//! A `Done` is handed the outcome with [`send`](Done::send), which consumes
//! it; one dropped unsent (a lost job, a cancelled task, a panic in the
//! SDK) answers an internal error instead, so a request with an id is never
//! left unanswered, and a batch holding it still completes.

use crate::rpc::{ErrorCode, RpcError};
use crate::runtime::inflight::InFlightGuard;
use crate::value::codec::Encoded;

/// The serialised result JSON of a request, or its error.
pub(crate) type Outcome = Result<Encoded, RpcError>;

/// Receives a request's outcome, exactly once. The request counts as in
/// flight (when counted) until its outcome is handed over.
pub(crate) struct Done {
    to: Option<Box<dyn FnOnce(Outcome) + Send>>,
    /// Dropped after `to` has run (field order).
    in_flight: Option<InFlightGuard>,
}

impl Done {
    /// Hands the outcome to `to`.
    pub(crate) fn new(to: impl FnOnce(Outcome) + Send + 'static) -> Self {
        Self { to: Some(Box::new(to)), in_flight: None }
    }

    /// Drops the outcome: the request was a notification.
    pub(crate) fn nobody() -> Self {
        // A closure that captures nothing is boxed without an allocation.
        Self::new(|_| {})
    }

    /// Hands `outcome` over; only then does the request stop being in flight.
    pub(crate) fn send(mut self, outcome: Outcome) {
        if let Some(to) = self.to.take() {
            to(outcome);
        }
    }

    /// Counts the request as in flight until the outcome is handed over.
    pub(crate) fn counted(mut self, guard: InFlightGuard) -> Self {
        self.in_flight = Some(guard);
        self
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(to) = self.to.take() {
            to(Err(RpcError::new(
                ErrorCode::InternalError,
                "internal error: the plugin dropped this request without answering it",
            )));
        }
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn recorder() -> (Arc<Mutex<Vec<Outcome>>>, impl Fn() -> Done) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        (seen, move || {
            let sink = Arc::clone(&sink);
            Done::new(move |outcome| sink.lock().unwrap().push(outcome))
        })
    }

    #[test]
    fn an_outcome_is_handed_over_once_and_a_dropped_done_answers_an_internal_error() {
        let (seen, done) = recorder();
        done().send(Ok(b"1".to_vec().into()));
        drop(done());
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0], Ok(b"1".to_vec().into()));
        let dropped = seen[1].as_ref().unwrap_err();
        assert_eq!(dropped.code, ErrorCode::InternalError);
        assert!(dropped.message.contains("without answering"), "{}", dropped.message);
        assert_eq!(seen.len(), 2);
    }
}
