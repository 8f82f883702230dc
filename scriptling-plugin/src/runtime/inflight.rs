//! [`InFlight`]: counts requests that still owe a response, so shutdown can
//! wait for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// Held by a request until its response has been written.
pub(crate) struct InFlightGuard(Arc<InFlight>);

impl InFlight {
    pub(crate) fn enter(self: &Arc<Self>) -> InFlightGuard {
        self.count.fetch_add(1, Ordering::AcqRel);
        InFlightGuard(Arc::clone(self))
    }

    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Waits until no request is in flight, or `limit` has passed. Returns
    /// whether it became idle.
    pub(crate) async fn wait_idle(&self, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.idle.notified();
                if self.count() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_the_last_guard() {
        let inflight = Arc::new(InFlight::default());
        let a = inflight.enter();
        let b = inflight.enter();
        assert!(!inflight.wait_idle(Duration::from_millis(10)).await);
        let waiter = tokio::spawn({
            let inflight = Arc::clone(&inflight);
            async move { inflight.wait_idle(Duration::from_secs(5)).await }
        });
        drop(a);
        tokio::task::yield_now().await;
        drop(b);
        assert!(waiter.await.unwrap());
        assert_eq!(inflight.count(), 0);
    }
}
