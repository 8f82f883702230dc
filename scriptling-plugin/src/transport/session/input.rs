//! [`Input`]: the host's requests, read so that the session can stop the
//! reading at any moment ([`sys::Stop`](crate::sys::Stop): how is each OS's
//! business) and a network session can limit how long it stays quiet.
//!
//! While the plugin awaits an answer from the host (a callback's result, a
//! log record's acknowledgement), the reader polls the input for up to
//! `Plugin::input_spin` before it sleeps, when the answer is expected that
//! soon (the reader says so, [`Input::expect_soon`]; a call reading its own
//! callback's answer expects it while the host's last one came that
//! quickly): waking the reader costs up to ~25 µs on a virtual machine's
//! idle core, once per callback. (See the spin rule in
//! ARCHITECTURE.md: a thread that expects the host's next message within
//! microseconds polls for it; the other such thread is an idle pool thread.)
//! Where the input cannot be asked whether it has bytes without reading
//! (a console on Windows), nothing spins.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sys::{self, Readable, Stop};

/// What a [`Quiet`] hook says when the input has been quiet for a while.
pub(crate) enum Quiet {
    /// Keep waiting, until this moment at the latest (`None`: for ever)
    /// before asking again.
    Until(Option<Instant>),
    /// Stop reading, for this reason (the read fails as `TimedOut`).
    End(String),
}

/// The error a read fails with when a line begun [`Input::limit_lines`]
/// ago is still not finished (a client dribbling it a byte at a time).
#[derive(Debug)]
pub(crate) struct LineUnfinished(pub(crate) Duration);

impl std::fmt::Display for LineUnfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a request line begun {:?} ago is still not finished", self.0)
    }
}

impl std::error::Error for LineUnfinished {}

/// Asked before the input waits, with when it last delivered bytes: how
/// long a quiet input is left waiting (a connection's idle and `hello`
/// limits).
pub(crate) type QuietHook = Box<dyn FnMut(Instant) -> Quiet + Send>;

/// The host's requests (see the module docs).
pub(crate) struct Input<R> {
    inner: R,
    stop: Arc<Stop>,
    /// How long a quiet input waits (`None`: for ever).
    quiet: Option<QuietHook>,
    /// When the input last delivered bytes.
    last_read: Instant,
    /// How long to poll the input before sleeping, when an answer is due.
    spin: Duration,
    /// An answer from the host is due (see [`Input::expect_soon`]).
    expecting: bool,
    /// [`wait_for_bytes`](Input::wait_for_bytes) found bytes (or the stop):
    /// the next read need not wait for them again.
    waited: bool,
    /// How long a line may take once begun (`None`: for ever).
    line_limit: Option<Duration>,
    /// When the line not yet finished began (`None`: none has).
    line_started: Option<Instant>,
}

impl<R: Readable> Input<R> {
    /// Reads `inner` until `stop`.
    pub(crate) fn new(inner: R, stop: Arc<Stop>) -> Self {
        Self {
            inner,
            stop,
            quiet: None,
            last_read: Instant::now(),
            spin: Duration::ZERO,
            expecting: false,
            waited: false,
            line_limit: None,
            line_started: None,
        }
    }

    /// Fails the read (with [`LineUnfinished`], as `TimedOut`) once a line
    /// has taken `limit` since its first byte came: every byte resets the
    /// quiet limits, this one it cannot.
    pub(crate) fn limit_lines(&mut self, limit: Duration) {
        self.line_limit = Some(limit);
    }

    /// Moves the start of the line under way `held` later: the reader was
    /// held back that long (the host read its answers slowly), and what the
    /// client sent meanwhile waited unread through no fault of its own.
    pub(crate) fn hold_line_clock(&mut self, held: Duration) {
        if let Some(started) = &mut self.line_started {
            *started = started.checked_add(held).unwrap_or(*started);
        }
    }

    /// Notes where the bytes just read, `now`, leave the line under way.
    fn track_line(&mut self, read: &[u8], now: Instant) {
        match read.iter().rposition(|&b| b == b'\n') {
            Some(end) => self.line_started = (end + 1 < read.len()).then_some(now),
            None if !read.is_empty() => {
                self.line_started.get_or_insert(now);
            }
            None => {}
        }
    }

    /// The moment the line under way must be finished by, or the error
    /// if it has passed.
    fn line_deadline(&self) -> io::Result<Option<Instant>> {
        let (Some(limit), Some(started)) = (self.line_limit, self.line_started) else { return Ok(None) };
        let deadline = started.checked_add(limit);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, LineUnfinished(limit)));
        }
        Ok(deadline)
    }

    /// Limits how long the input may stay quiet (see [`Quiet`]).
    pub(crate) fn limit_quiet(&mut self, hook: QuietHook) {
        self.quiet = Some(hook);
    }

    /// Polls the input for up to `spin` before sleeping, when an answer
    /// from the host is due.
    pub(crate) fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Says whether the host's next message is due within the spin: the
    /// plugin awaits an answer, or the host has just answered one (a
    /// handler calling back in a loop sends its next request as soon as it
    /// has the answer), or has just been answered and sent its last request
    /// that quickly (see `reader.rs`).
    pub(crate) fn expect_soon(&mut self, due: bool) {
        self.expecting = due;
    }

    /// How long the input is polled before sleeping, when a message is due.
    pub(crate) fn spin_time(&self) -> Duration {
        self.spin
    }

    /// Polls for bytes for up to the spin, when a message is due; returns
    /// whether they came.
    fn spin(&self) -> bool {
        if !self.expecting || self.spin.is_zero() {
            return false;
        }
        let until = Instant::now() + self.spin;
        while Instant::now() < until {
            if sys::ready_now(&self.inner) {
                return true;
            }
            // The thread that answers the host may need this core.
            std::thread::yield_now();
        }
        false
    }
}

impl<R: Readable> Input<R> {
    /// Whether [`wait_for_bytes`](Self::wait_for_bytes) can keep a deadline.
    pub(crate) fn keeps_deadlines(&self) -> bool {
        sys::keeps_deadlines(&self.inner)
    }

    /// Waits, polling first for the spin when a message is due, until the
    /// input has bytes (or has ended, or the reading is stopped): `true`;
    /// `false` once `until` has passed.
    pub(crate) fn wait_for_bytes(&mut self, until: Instant) -> io::Result<bool> {
        let ready = self.spin() || sys::wait_readable(&self.inner, &self.stop, until)?;
        self.waited = ready;
        Ok(ready)
    }
}

impl<R: Readable> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // (A stopped input is read as the stop says, ready or not.)
        let mut ready = std::mem::take(&mut self.waited) || self.spin();
        loop {
            let quiet = match &mut self.quiet {
                None => None,
                Some(hook) => match hook(self.last_read) {
                    Quiet::Until(until) => until,
                    Quiet::End(reason) => return Err(io::Error::new(io::ErrorKind::TimedOut, reason)),
                },
            };
            let until = quiet.into_iter().chain(self.line_deadline()?).min();
            if let Some(n) = sys::read(&mut self.inner, &self.stop, buf, until, std::mem::take(&mut ready))? {
                if self.quiet.is_some() || self.line_limit.is_some() {
                    let now = Instant::now();
                    self.last_read = now;
                    if self.line_limit.is_some() {
                        self.track_line(&buf[..n], now);
                    }
                }
                return Ok(n);
            }
        }
    }
}
