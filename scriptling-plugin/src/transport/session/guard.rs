//! The stdout guard: while a plugin serves, the protocol gets a private
//! duplicate of fd 1, and fd 1 itself is pointed at stderr.
//!
//! Meanwhile `println!` (in plugin code, a dependency, or a C library)
//! lands on stderr, which the host passes through to its own stderr, and can
//! never corrupt the protocol stream. The host treats any stray byte on
//! stdout as fatal to the connection (HOST-NOTES D.3). When serving ends,
//! the [`StdoutTaken`] guard points fd 1 back at the original stdout, so a
//! program that serves and goes on prints where it did before (and can
//! serve again).

use std::fs::File;
use std::io::{self, Write};

/// Puts fd 1 back when dropped (see the module docs).
pub(crate) struct StdoutTaken {
    /// Another duplicate of the original stdout, to put back on fd 1.
    #[cfg(unix)]
    original: std::os::fd::OwnedFd,
}

/// Takes stdout for the protocol: returns the protocol's stream and the
/// guard that gives fd 1 back. Drop the guard only once the protocol stream
/// is written no more.
#[cfg(unix)]
pub(crate) fn take_stdout() -> io::Result<(File, StdoutTaken)> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // Anything already buffered by Rust's stdout belongs on the old stream.
    io::stdout().flush()?;
    let duplicate = || {
        // SAFETY: fcntl on fd 1, which exists for the life of the process;
        // the duplicate is a new fd that the returned OwnedFd owns alone.
        let fd = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_DUPFD_CLOEXEC, 3) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above: just created, ours alone.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let (private, original) = (duplicate()?, duplicate()?);
    // SAFETY: dup2 onto fd 1 from fd 2, both open for the life of the process.
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((File::from(private), StdoutTaken { original }))
}

#[cfg(unix)]
impl Drop for StdoutTaken {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // What was printed while serving belongs on stderr, where it went.
        let _ = io::stdout().flush();
        // SAFETY: dup2 onto fd 1 from a duplicate we own; fd 1 then refers
        // to the original stdout again (and `original` closes on drop).
        unsafe {
            libc::dup2(self.original.as_raw_fd(), libc::STDOUT_FILENO);
        }
    }
}

/// Takes stdout for the protocol. Without Unix fd duplication the stream
/// is used as is, and plugin code must not print to stdout.
#[cfg(not(unix))]
pub(crate) fn take_stdout() -> io::Result<(Box<dyn Write + Send>, StdoutTaken)> {
    Ok((Box::new(io::stdout()), StdoutTaken {}))
}
