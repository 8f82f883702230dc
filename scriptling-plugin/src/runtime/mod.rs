//! Running calls: the transport-independent dispatcher, the sync pool, the
//! in-flight count, answers (once each, and batched), panic handling, and
//! tearing down what a session leaves.

pub(crate) mod batch;
pub(crate) mod dispatch;
pub(crate) mod done;
pub(crate) mod inflight;
pub(crate) mod invoke;
pub(crate) mod panic;
pub(crate) mod pool;
pub(crate) mod teardown;
