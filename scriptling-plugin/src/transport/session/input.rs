//! [`Input`]: the host's requests, read so that the session can stop the
//! reading at any moment.
//!
//! Every read first waits for the input *or* the session's [`Stop`] (one
//! `poll` on both), so a session that ends stops its reader at once instead
//! of leaving a thread blocked on the process's stdin.
//!
//! While the plugin awaits an answer from the host (a callback's result, a
//! log record's acknowledgement), the reader polls the input for up to
//! `Plugin::input_spin` before it sleeps: the answer typically comes within
//! microseconds, and waking the reader costs up to ~25 µs on a virtual
//! machine's idle core, once per callback. (See the spin rule in
//! ARCHITECTURE.md: a thread that expects the host's next message within
//! microseconds polls for it; the other such thread is an idle pool thread.)

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Tells a reader to stop, through a pipe its `poll` watches.
pub(crate) struct Stop {
    stopped: AtomicBool,
    #[cfg(unix)]
    read: std::os::fd::OwnedFd,
    #[cfg(unix)]
    write: std::os::fd::OwnedFd,
}

impl Stop {
    pub(crate) fn new() -> io::Result<Arc<Stop>> {
        #[cfg(unix)]
        {
            use std::os::fd::FromRawFd;
            let mut fds = [0; 2];
            // SAFETY: pipe2 fills the two-element array we own.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: the two fds were just created and are ours alone.
            let (read, write) =
                unsafe { (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1])) };
            Ok(Arc::new(Stop { stopped: AtomicBool::new(false), read, write }))
        }
        #[cfg(not(unix))]
        Ok(Arc::new(Stop { stopped: AtomicBool::new(false) }))
    }

    /// Stops the reader (it returns [`stopped`] from its next or current read).
    pub(crate) fn stop(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let byte = 0u8;
            // SAFETY: writes one byte from a local to a pipe we own.
            unsafe {
                libc::write(self.write.as_raw_fd(), (&raw const byte).cast(), 1);
            }
        }
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// A descriptor that becomes readable once stopped, for `poll`.
    #[cfg(unix)]
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.read.as_raw_fd()
    }
}

/// The error a read returns once the reader was told to stop. (Not
/// `Interrupted`, which buffered readers retry.)
pub(crate) fn stopped() -> io::Error {
    io::Error::other("the session stopped reading")
}

/// What a [`Quiet`] hook says when the input has been quiet for a while.
pub(crate) enum Quiet {
    /// Keep waiting, until this moment at the latest (`None`: for ever)
    /// before asking again.
    Until(Option<std::time::Instant>),
    /// Stop reading, for this reason (the read fails as `TimedOut`).
    End(String),
}

/// Asked before the input waits, with when it last delivered bytes: how
/// long a quiet input is left waiting (a connection's idle and `hello`
/// limits).
pub(crate) type QuietHook = Box<dyn FnMut(std::time::Instant) -> Quiet + Send>;

/// The host's requests (see the module docs).
pub(crate) struct Input<R> {
    inner: R,
    stop: Arc<Stop>,
    /// How long a quiet input waits (`None`: for ever).
    quiet: Option<QuietHook>,
    /// When the input last delivered bytes.
    last_read: std::time::Instant,
    /// How long to poll the input before sleeping, when an answer is due.
    spin: std::time::Duration,
    /// An answer from the host is due (see [`Input::expect_answer`]).
    expecting: bool,
}

impl<R> Input<R> {
    /// Reads `inner` until `stop`.
    pub(crate) fn new(inner: R, stop: Arc<Stop>) -> Self {
        let last_read = std::time::Instant::now();
        let spin = std::time::Duration::ZERO;
        Self { inner, stop, quiet: None, last_read, spin, expecting: false }
    }

    /// Limits how long the input may stay quiet (see [`Quiet`]).
    pub(crate) fn limit_quiet(&mut self, hook: QuietHook) {
        self.quiet = Some(hook);
    }

    /// Polls the input for up to `spin` before sleeping, when an answer
    /// from the host is due.
    pub(crate) fn set_spin(&mut self, spin: std::time::Duration) {
        self.spin = spin;
    }

    /// Says whether an answer from the host is due: the plugin awaits one,
    /// or the host has just answered one (a handler calling back in a loop
    /// sends its next request as soon as it has the answer).
    pub(crate) fn expect_answer(&mut self, due: bool) {
        self.expecting = due;
    }
}

#[cfg(unix)]
impl<R: Read + std::os::fd::AsRawFd> Input<R> {
    /// Waits until the input has something to read (or has ended), or the
    /// reader is told to stop.
    fn wait_readable(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        self.unless_stopped()?;
        let input = self.inner.as_raw_fd();
        if self.expecting && !self.spin.is_zero() {
            let until = std::time::Instant::now() + self.spin;
            while std::time::Instant::now() < until {
                if poll(&mut [pollin(input)], 0)? > 0 {
                    return self.unless_stopped();
                }
                // The thread that answers the host may need this core.
                std::thread::yield_now();
            }
        }
        loop {
            let until = match &mut self.quiet {
                None => None,
                Some(hook) => match hook(self.last_read) {
                    Quiet::Until(until) => until,
                    Quiet::End(reason) => return Err(io::Error::new(io::ErrorKind::TimedOut, reason)),
                },
            };
            let timeout = until.map_or(-1, |until| {
                // Rounded up: waking before the moment would only ask again.
                let left = until.saturating_duration_since(std::time::Instant::now());
                libc::c_int::try_from(left.as_millis() + 1).unwrap_or(libc::c_int::MAX)
            });
            let mut fds = [pollin(input), pollin(self.stop.read.as_raw_fd())];
            if poll(&mut fds, timeout)? > 0 {
                return self.unless_stopped();
            }
        }
    }

    fn unless_stopped(&self) -> io::Result<()> {
        if self.stop.is_stopped() { Err(stopped()) } else { Ok(()) }
    }
}

#[cfg(unix)]
pub(crate) fn pollin(fd: std::os::fd::RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// `poll(2)`, retried when interrupted by a signal.
#[cfg(unix)]
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    loop {
        // SAFETY: `fds` is a valid array of pollfds of its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(unix)]
impl<R: Read + std::os::fd::AsRawFd> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A socket's writing clone shares its open file description, so the
        // input may be non-blocking too: a wake-up with nothing to read
        // waits again.
        let n = loop {
            self.wait_readable()?;
            match self.inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => break other?,
            }
        };
        if self.quiet.is_some() {
            self.last_read = std::time::Instant::now();
        }
        Ok(n)
    }
}

/// Without `poll` the input is read as it is: the reading cannot be stopped
/// early, and nothing spins.
#[cfg(not(unix))]
impl<R: Read> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.is_stopped() {
            return Err(stopped());
        }
        self.inner.read(buf)
    }
}

/// Whether a line (or the end) is waiting on stdin already, so reading it
/// will not block (bar a host that stops mid-line).
pub(crate) fn stdin_waiting() -> bool {
    #[cfg(unix)]
    {
        poll(&mut [pollin(0)], 0).is_ok_and(|n| n > 0)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

#[cfg(all(test, unix, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    #[test]
    fn a_blocked_read_returns_when_stopped_and_reads_what_arrives_otherwise() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let stop = Stop::new().unwrap();
        let mut input = Input::new(reader, Arc::clone(&stop));
        writer.write_all(b"hi").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(input.read(&mut buf).unwrap(), 2);
        let blocked = std::thread::spawn(move || input.read(&mut buf).map_err(|e| e.kind()));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!blocked.is_finished(), "waits for input");
        stop.stop();
        assert_eq!(blocked.join().unwrap(), Err(io::ErrorKind::Other));
        drop(writer);
    }
}
