//! One HTTP connection's deadlines: how long it may sit idle between
//! requests, and how long a client may take to send a request's headers
//! once it has started.
//!
//! hyper's own header timeout also runs while a keep-alive connection is
//! idle, so it cannot be short for slow clients and long for idle ones at
//! once. Here the socket is wrapped to see when a request's first byte
//! arrives, the service says when a request is being handled, and a watch
//! future resolves when the current phase outlives its deadline; the
//! connection is then dropped, which closes the socket.

use std::io;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::support::lock;

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request (since then).
    Idle(Instant),
    /// A request's first bytes arrived (then); its headers are not all in.
    Head(Instant),
    /// A request is being handled.
    Busy,
}

/// A connection's phase, shared by its socket, its service and its watch.
pub(crate) struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { phase: Mutex::new(Phase::Idle(Instant::now())), changed: Notify::new() })
    }

    fn set(&self, phase: Phase) {
        *lock(&self.phase) = phase;
        self.changed.notify_waiters();
    }

    /// A request's headers are in: it is being handled until the guard drops.
    pub(crate) fn busy(self: &Arc<Self>) -> BusyGuard {
        self.set(Phase::Busy);
        BusyGuard(Arc::clone(self))
    }

    fn read_bytes(&self) {
        let mut phase = lock(&self.phase);
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Head(Instant::now());
            drop(phase);
            self.changed.notify_waiters();
        }
    }

    /// Resolves when the connection has been idle longer than `idle`, or a
    /// request's headers have taken longer than `header`.
    pub(crate) async fn expired(&self, header: Duration, idle: Duration) {
        loop {
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            // A limit too long to add to an instant is no limit at all.
            let deadline = match *lock(&self.phase) {
                Phase::Idle(since) => since.checked_add(idle),
                Phase::Head(since) => since.checked_add(header),
                Phase::Busy => None,
            };
            match deadline {
                None => changed.await,
                Some(deadline) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(deadline) => return,
                    }
                }
            }
        }
    }
}

/// Marks the connection idle again when the request is answered.
pub(crate) struct BusyGuard(Arc<Activity>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.set(Phase::Idle(Instant::now()));
    }
}

/// A socket that tells its [`Activity`] when bytes arrive.
pub(crate) struct Watched<S> {
    pub(crate) inner: S,
    pub(crate) activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read_bytes();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_and_slow_headers_expire_busy_never_does() {
        let activity = Activity::new();
        let header = Duration::from_secs(10);
        let idle = Duration::from_secs(60);
        // Idle: expires after the idle timeout.
        let started = Instant::now();
        activity.expired(header, idle).await;
        assert_eq!(started.elapsed(), idle);
        // A request's first bytes: the header deadline applies from then.
        activity.set(Phase::Idle(Instant::now()));
        activity.read_bytes();
        let started = Instant::now();
        activity.expired(header, idle).await;
        assert_eq!(started.elapsed(), header);
        // Busy: no deadline until the request is answered.
        let guard = activity.busy();
        let watch = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.expired(header, idle).await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!watch.is_finished());
        let answered = Instant::now();
        drop(guard);
        watch.await.unwrap();
        assert_eq!(answered.elapsed(), idle, "idle again from the answer");
    }
}
