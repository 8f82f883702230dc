//! The stdout guard: the protocol gets a private duplicate of fd 1, and fd 1
//! itself is pointed at stderr.
//!
//! After this, `println!` (in plugin code, a dependency, or a C library)
//! lands on stderr, which the host passes through to its own stderr, and can
//! never corrupt the protocol stream. The host treats any stray byte on
//! stdout as fatal to the connection (HOST-NOTES D.3).

use std::fs::File;
use std::io::{self, Write};

/// Takes stdout for the protocol. Call once, before serving.
#[cfg(unix)]
pub(crate) fn take_stdout() -> io::Result<File> {
    use std::os::fd::FromRawFd;
    // Anything already buffered by Rust's stdout belongs on the old stream.
    io::stdout().flush()?;
    // SAFETY: fcntl/dup2 on fds 1 and 2, which exist for the life of the
    // process; the duplicate is a new fd that the returned File owns alone.
    unsafe {
        let private = libc::fcntl(libc::STDOUT_FILENO, libc::F_DUPFD_CLOEXEC, 3);
        if private < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) < 0 {
            let err = io::Error::last_os_error();
            libc::close(private);
            return Err(err);
        }
        Ok(File::from_raw_fd(private))
    }
}

/// Takes stdout for the protocol. Without Unix fd duplication the stream
/// is used as is, and plugin code must not print to stdout.
#[cfg(not(unix))]
pub(crate) fn take_stdout() -> io::Result<Box<dyn Write + Send>> {
    Ok(Box::new(io::stdout()))
}
