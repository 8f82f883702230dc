//! Everything that needs an operating system, one module per OS with all of
//! its `unsafe`, behind the small interface below; the rest of the crate is
//! portable std and tokio. (`mlua-sys` and `pyo3-ffi` confine theirs the
//! same way.)
//!
//! | need | Unix (`unix.rs`) | Windows (`windows.rs`) |
//! |---|---|---|
//! | a read another thread can stop ([`Stop`], [`read`]) | wait in `poll` on the input and a stop pipe (`select` on macOS, whose `poll` refuses terminals and other devices) | sockets: `WSAPoll` on the socket and a loopback UDP socket the stop writes to; pipes, consoles and files: a blocking read the stop cancels with `CancelSynchronousIo` |
//! | a deadline on a read ([`read`]'s `until`) | the wait's timeout | sockets: the wait's timeout; handles: none (only network sessions set deadlines) |
//! | the stdout guard ([`take_stdout`]) | duplicate fd 1 for the protocol, `dup2` stderr onto it | duplicate the handle for the protocol, `SetStdHandle` stderr's in its place |
//! | stop events ([`StopEvents`]) | SIGINT and SIGTERM: `sigaction`, chained to the previous handler and restored | Ctrl-C, Ctrl-Break, console close, log-off and system shutdown: `SetConsoleCtrlHandler`, removed again |
//! | allocator tuning ([`tune_allocator`], [`return_freed_memory`]) | glibc's `mallopt` and `malloc_trim` | nothing |
//! | the open-files limit ([`raise_file_limit`]) | `setrlimit` | nothing (no such limit) |
//! | is stdin a pipe? ([`stdin_is_pipe`]: a host's, not a person's) | `fstat`, through std | `GetFileType` |
//! | a thread's CPU use, read by another ([`ThreadClock`]) | `pthread_getcpuclockid` (Linux), `thread_info` (macOS); none elsewhere | `QueryThreadCycleTime` |

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as os;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

#[cfg(not(any(unix, windows)))]
compile_error!("scriptling-plugin serves plugins on Unix (Linux, macOS, the BSDs) and Windows");

pub(crate) use os::{
    Readable, StopEvents, ThreadClock, out_of_descriptors, raise_file_limit, ready_now, return_freed_memory,
    stdin_is_pipe, take_stdout, tune_allocator, wait_to_accept,
};

/// Tells a reader to stop: its current or next read returns [`stopped`]
/// (after one last read of what is there already, see [`read`]). How a
/// waiting or reading thread is woken is the OS module's `Waker`.
pub(crate) struct Stop {
    stopped: AtomicBool,
    /// How many bytes a stopped reader may still read (see [`LAST_READS`]).
    last_reads: AtomicUsize,
    waker: os::Waker,
}

/// What a stopped reader still reads of what the host has sent already, at
/// most: a Linux pipe's default capacity (and what one read of the largest
/// read buffer took before the buffer grew from 8 KiB).
const LAST_READS: usize = 64 * 1024;

impl Stop {
    pub(crate) fn new() -> io::Result<Stop> {
        Ok(Stop { stopped: AtomicBool::new(false), last_reads: AtomicUsize::new(LAST_READS), waker: os::Waker::new()? })
    }

    /// Stops the reader.
    pub(crate) fn stop(&self) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            self.waker.wake();
        }
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// Reads `source` into `buf` once it has bytes (or has ended): `Some(n)`;
/// `None` once `until` has passed with nothing to read (a deadline the OS
/// module can keep: on Windows, a socket's). Once `stop` is told to, what
/// the host has already sent is read, up to [`LAST_READS`] bytes in as many
/// reads as the buffer needs (until one does not fill it), so that what it
/// sent before the end is answered; then every read returns [`stopped`]. `ready`
/// says the caller has just seen bytes there (no wait before the first read).
pub(crate) fn read<R: Readable + ?Sized>(
    source: &mut R,
    stop: &Stop,
    buf: &mut [u8],
    until: Option<Instant>,
    mut ready: bool,
) -> io::Result<Option<usize>> {
    loop {
        if stop.is_stopped() {
            return last_read(source, stop, buf);
        }
        let timeout = match until.map(left_until) {
            None => None,
            Some(None) => return Ok(None),
            Some(left) => left,
        };
        if !std::mem::take(&mut ready) && !os::wait(source, stop, timeout)? {
            continue; // stopped, timed out, or a signal: look again
        }
        match os::read(source, stop, buf) {
            // A socket shared with a non-blocking clone may have nothing after all.
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            // A read the stop cancelled.
            Err(_) if stop.is_stopped() => return last_read(source, stop, buf),
            read => return read.map(Some),
        }
    }
}

/// Waits until `source` has bytes (or has ended), or `stop` is told to:
/// `true`; `false` once `until` has passed. Only for a source whose waits
/// keep deadlines ([`keeps_deadlines`]); another is never waited for.
pub(crate) fn wait_readable<R: Readable + ?Sized>(source: &R, stop: &Stop, until: Instant) -> io::Result<bool> {
    loop {
        if stop.is_stopped() {
            return Ok(true);
        }
        let Some(left) = left_until(until) else { return Ok(false) };
        if os::wait(source, stop, Some(left))? {
            return Ok(true);
        }
    }
}

/// The time left until `until`; `None` once it has come.
fn left_until(until: Instant) -> Option<Duration> {
    until.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
}

/// Whether a wait for `source`'s bytes can end at a deadline: on Unix
/// always; on Windows, for a socket (a pipe's or console's read only blocks).
pub(crate) fn keeps_deadlines<R: Readable + ?Sized>(source: &R) -> bool {
    os::keeps_deadlines(source)
}

/// A read a stopped reader still makes: what is there already, while
/// [`LAST_READS`] allows. (One thread reads a session's input at a time.)
fn last_read<R: Readable + ?Sized>(source: &mut R, stop: &Stop, buf: &mut [u8]) -> io::Result<Option<usize>> {
    let left = stop.last_reads.swap(0, Ordering::AcqRel);
    if left > 0 && ready_now(source) {
        let limit = buf.len().min(left);
        let n = source.read(&mut buf[..limit])?;
        // A read that did not fill the buffer took all there was (bytes
        // sent after the stop are not waited for); one that filled it may
        // have left more.
        stop.last_reads.store(if n < limit { 0 } else { left - n }, Ordering::Release);
        return Ok(Some(n));
    }
    Err(stopped())
}

/// An event that asks the process to stop: a signal on Unix, a console
/// event on Windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT; Ctrl-C on Windows.
    Interrupt,
    /// SIGTERM.
    #[cfg(unix)]
    Terminate,
    /// Ctrl-Break.
    #[cfg(windows)]
    Break,
    /// The console closing, the user logging off or the system shutting
    /// down (the process is ended a few seconds later whatever it does).
    #[cfg(windows)]
    Close,
}

impl Signal {
    /// The number an exit status reports as 128 + n (SIGBREAK is 21 in
    /// the Windows C runtime; a console closing counts as SIGTERM).
    pub(crate) fn number(self) -> i32 {
        match self {
            Signal::Interrupt => 2,
            #[cfg(unix)]
            Signal::Terminate => 15,
            #[cfg(windows)]
            Signal::Close => 15,
            #[cfg(windows)]
            Signal::Break => 21,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Interrupt if cfg!(windows) => "Ctrl-C",
            Signal::Interrupt => "SIGINT",
            #[cfg(unix)]
            Signal::Terminate => "SIGTERM",
            #[cfg(windows)]
            Signal::Break => "Ctrl-Break",
            #[cfg(windows)]
            Signal::Close => "the console closing",
        })
    }
}

/// The error a read returns once its [`Stop`] was told to stop. (Not
/// `Interrupted`, which buffered readers retry.)
pub(crate) fn stopped() -> io::Error {
    io::Error::other("the session stopped reading")
}
