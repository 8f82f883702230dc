//! [`Output`]: the protocol stream, written without waiting, and how much
//! room it has, so the writer can send whole frames or none.
//!
//! When stdout is a pipe (as a host makes it), writes never block: the
//! pipe is switched to non-blocking mode for the session (and back after),
//! and [`room`](Stream::room) reads how many bytes the pipe can take now
//! (its capacity less what the host has not read yet, rounded down to its
//! pages). The writer writes only frames that fit, so when a host stops
//! reading, the plugin can stop at a frame's end and never leaves half a
//! frame on the pipe. Anything else (a file, a terminal) is written as it
//! is, blocking, with no room known.

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
}

/// The process's stdout (or a test's pipe).
pub(crate) struct Output {
    file: File,
    /// Set when `file` is a pipe: its capacity, and its flags to restore.
    #[cfg(unix)]
    pipe: Option<Pipe>,
}

#[cfg(unix)]
struct Pipe {
    capacity: usize,
    flags: libc::c_int,
    /// Room measured last, less what was written since: a lower bound
    /// (the host only ever makes more), so a write that fits it needs no
    /// measuring (an `ioctl` per answer, otherwise).
    known: usize,
}

/// Bytes the kernel moves in one page of a pipe.
#[cfg(unix)]
const PAGE: usize = 4096;

impl Output {
    /// Takes `file` for the protocol, switching a pipe to non-blocking mode
    /// until the `Output` is dropped.
    pub(crate) fn new(file: File) -> Output {
        #[cfg(unix)]
        {
            let pipe = Pipe::of(&file);
            Output { file, pipe }
        }
        #[cfg(not(unix))]
        {
            Output { file }
        }
    }
}

#[cfg(unix)]
impl Pipe {
    fn of(file: &File) -> Option<Pipe> {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fstat and fcntl on an fd we own, with a zeroed stat to fill.
        unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut stat) != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFIFO {
                return None;
            }
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
                return None;
            }
            let capacity = pipe_capacity(fd);
            Some(Pipe { capacity, flags, known: 0 })
        }
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

#[cfg(unix)]
impl Drop for Output {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        if let Some(pipe) = &self.pipe {
            // SAFETY: restores the flags this fd had when it was taken.
            unsafe {
                libc::fcntl(self.file.as_raw_fd(), libc::F_SETFL, pipe.flags);
            }
        }
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
}
