//! [`Output`]: the protocol stream, written without waiting, and how much
//! room it has, so the writer can send whole frames or none.
//!
//! When stdout is a pipe (as a host makes it) or a socket, writes never
//! block: it is switched to non-blocking mode for the session and back
//! when the session lets it go ([`release`](Stream::release)). For a pipe,
//! [`room`](Stream::room) also reads how many bytes it can take now (its
//! capacity less what the host has not read yet, counted in whole pages:
//! a lower bound for ordinary writes). The writer writes only frames that
//! fit, so when a host stops reading, the plugin normally stops at a
//! frame's end; a frame larger than the pipe goes in parts and can be cut,
//! and is then counted as undelivered. Anything else (a file, a terminal)
//! is written as it is, blocking, with no room known.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::time::Duration;

/// How many bytes a stream takes without waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Room {
    /// Now.
    pub(crate) now: usize,
    /// When the host has read everything: a frame larger than this can
    /// only be written in parts.
    pub(crate) most: usize,
}

/// What the frame writer needs of the protocol stream.
pub(crate) trait Stream: Send {
    /// How many more bytes the stream takes now without waiting, if known;
    /// the answer may be an underestimate when it is at least `wanted`.
    fn room(&mut self, wanted: usize) -> Option<Room>;
    /// Writes what the stream takes now from `bufs` (0 when it is full).
    fn write_now(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Waits until the stream takes more, for at most `limit`.
    fn wait_writable(&mut self, limit: Duration) -> io::Result<()>;
    /// Gives the stream back as it was found (blocking again): nothing more
    /// is written to it. (The process's stdout outlives the session.)
    fn release(&mut self) {}
}

/// The process's stdout (or a test's pipe).
pub(crate) struct Output {
    file: File,
    /// The flags to give `file` back, when it was made non-blocking.
    #[cfg(unix)]
    restore: Option<libc::c_int>,
    /// Set when `file` is a pipe: its capacity and room.
    #[cfg(unix)]
    pipe: Option<Pipe>,
}

#[cfg(unix)]
struct Pipe {
    capacity: usize,
    /// Room measured last, less what was written since: a lower bound
    /// (the host only ever makes more), so a write that fits it needs no
    /// measuring (an `ioctl` per answer, otherwise).
    known: usize,
}

/// Bytes the kernel moves in one page of a pipe.
#[cfg(unix)]
const PAGE: usize = 4096;

impl Output {
    /// Takes `file` for the protocol, switching a pipe or socket to
    /// non-blocking mode until it is released (or the `Output` dropped).
    pub(crate) fn new(file: File) -> Output {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let fd = file.as_raw_fd();
            // SAFETY: fstat on an fd we own, into a zeroed stat.
            let kind = unsafe {
                let mut stat: libc::stat = std::mem::zeroed();
                if libc::fstat(fd, &mut stat) == 0 { stat.st_mode & libc::S_IFMT } else { 0 }
            };
            let restore = if kind == libc::S_IFIFO || kind == libc::S_IFSOCK { make_nonblocking(fd) } else { None };
            let pipe =
                (restore.is_some() && kind == libc::S_IFIFO).then(|| Pipe { capacity: pipe_capacity(fd), known: 0 });
            Output { file, restore, pipe }
        }
        #[cfg(not(unix))]
        {
            Output { file }
        }
    }
}

/// Switches `fd` to non-blocking mode; returns its flags before, to give
/// back, or `None` if it stays blocking.
#[cfg(unix)]
fn make_nonblocking(fd: std::os::fd::RawFd) -> Option<libc::c_int> {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return None;
        }
        Some(flags)
    }
}

/// A pipe's capacity in bytes (Linux's `F_GETPIPE_SZ`; 64 KiB elsewhere,
/// the smallest in common use, so the room is never overstated).
#[cfg(unix)]
fn pipe_capacity(fd: std::os::fd::RawFd) -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: F_GETPIPE_SZ takes no argument and only reads.
        let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
        if let Ok(size) = usize::try_from(size) {
            return size;
        }
    }
    let _ = fd;
    64 * 1024
}

impl Drop for Output {
    fn drop(&mut self) {
        self.release();
    }
}

impl Stream for Output {
    fn room(&mut self, wanted: usize) -> Option<Room> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let pipe = self.pipe.as_mut()?;
            let most = pipe.capacity.saturating_sub(PAGE);
            if pipe.known >= wanted {
                return Some(Room { now: pipe.known, most });
            }
            let mut unread: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int, ours.
            if unsafe { libc::ioctl(self.file.as_raw_fd(), libc::FIONREAD, &mut unread) } != 0 {
                return None;
            }
            // A partly read page still takes a whole page, as may the last,
            // partly filled one: count both as full.
            let used = (usize::try_from(unread).unwrap_or(0)).div_ceil(PAGE) * PAGE + PAGE;
            pipe.known = pipe.capacity.saturating_sub(used);
            Some(Room { now: pipe.known, most })
        }
        #[cfg(not(unix))]
        {
            let _ = wanted;
            None
        }
    }

    fn write_now(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        loop {
            let written = if bufs.len() == 1 { self.file.write(&bufs[0]) } else { self.file.write_vectored(bufs) };
            match written {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Ok(0) if bufs.iter().any(|b| !b.is_empty()) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    #[cfg(unix)]
                    if let Some(pipe) = &mut self.pipe {
                        pipe.known = pipe.known.saturating_sub(n);
                    }
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn wait_writable(&mut self, limit: Duration) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let mut fd = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            let ms = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: one pollfd of ours.
            if unsafe { libc::poll(&mut fd, 1, ms) } < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            // POLLERR/POLLHUP (the host closed its end) show on the next write.
            Ok(())
        }
        #[cfg(not(unix))]
        {
            let _ = limit;
            Ok(())
        }
    }

    fn release(&mut self) {
        #[cfg(unix)]
        if let Some(flags) = self.restore.take() {
            use std::os::fd::AsRawFd;
            self.pipe = None;
            // SAFETY: restores the flags this fd had when it was taken.
            unsafe {
                libc::fcntl(self.file.as_raw_fd(), libc::F_SETFL, flags);
            }
        }
    }
}
