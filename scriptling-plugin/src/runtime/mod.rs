//! Running calls: the transport-independent dispatcher, the sync pool, the
//! in-flight count, batch answers and panic handling.

pub(crate) mod batch;
pub(crate) mod dispatch;
pub(crate) mod inflight;
pub(crate) mod panic;
pub(crate) mod pool;
