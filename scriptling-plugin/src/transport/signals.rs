//! SIGINT and SIGTERM for the methods that serve a whole process: the
//! first asks for a graceful shutdown, a second exits at once.
//!
//! The handlers are installed before the plugin reads its first request,
//! so there is no moment when a signal would still kill the process without
//! a shutdown (tokio's signal streams exist only once the runtime runs). A
//! handler only writes the signal's number to a pipe; a thread reads the
//! pipe and acts.

use std::fmt;

/// A stop signal the process received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    /// The signal's number (what an exit status reports as 128 + n).
    pub(crate) fn number(self) -> i32 {
        match self {
            Signal::Interrupt => 2,
            Signal::Terminate => 15,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        })
    }
}

/// Signals caught since [`Signals::install`], waiting to be delivered.
pub(crate) struct Signals {
    #[cfg(unix)]
    read: std::fs::File,
}

impl Signals {
    /// Catches SIGINT and SIGTERM from now on. `None` if they are already
    /// caught (a second plugin served in the same process) or cannot be.
    pub(crate) fn install() -> Option<Signals> {
        #[cfg(unix)]
        {
            unix::install()
        }
        #[cfg(not(unix))]
        {
            Some(Signals {})
        }
    }

    /// Hands the first signal to `first` (on a thread of its own); a second
    /// one ends the process at once, with status 128 + its number.
    pub(crate) fn deliver(self, first: impl FnOnce(Signal) + Send + 'static) {
        let spawned = std::thread::Builder::new().name("plugin-signals".into()).spawn(move || {
            let Some(signal) = self.next() else { return };
            first(signal);
            let Some(again) = self.next() else { return };
            eprintln!("scriptling-plugin: {again} received again, exiting at once");
            std::process::exit(128 + again.number());
        });
        if let Err(e) = spawned {
            eprintln!("scriptling-plugin: cannot watch for signals: {e}");
        }
    }

    /// Blocks until the next signal.
    fn next(&self) -> Option<Signal> {
        #[cfg(unix)]
        {
            use std::io::Read;
            let mut byte = [0u8; 1];
            loop {
                match (&self.read).read(&mut byte) {
                    Ok(1) => {
                        return Some(if i32::from(byte[0]) == libc::SIGINT {
                            Signal::Interrupt
                        } else {
                            Signal::Terminate
                        });
                    }
                    Ok(_) => return None,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return None,
                }
            }
        }
        #[cfg(not(unix))]
        {
            // Ctrl-C only, through tokio, on a runtime of its own.
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(tokio::signal::ctrl_c()).ok().map(|()| Signal::Interrupt)
        }
    }
}

#[cfg(unix)]
mod unix {
    use std::os::fd::FromRawFd;
    use std::sync::atomic::{AtomicI32, Ordering};

    use super::Signals;

    /// The pipe's write end, for the handler; -1 until installed.
    static WRITE: AtomicI32 = AtomicI32::new(-1);

    extern "C" fn caught(signal: libc::c_int) {
        let fd = WRITE.load(Ordering::Relaxed);
        if fd >= 0 {
            let byte = signal as u8;
            // SAFETY: write(2) is async-signal-safe; the buffer is a local.
            unsafe {
                libc::write(fd, (&raw const byte).cast(), 1);
            }
        }
    }

    pub(super) fn install() -> Option<Signals> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two-element array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        if WRITE.compare_exchange(-1, fds[1], Ordering::AcqRel, Ordering::Acquire).is_err() {
            // SAFETY: closing the two fds just created, owned by nobody else.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return None;
        }
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: installs a handler that only calls write(2); the
            // sigaction struct is zeroed and then filled in full.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = caught as extern "C" fn(libc::c_int) as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        // SAFETY: the read end is ours alone from here on.
        Some(Signals { read: unsafe { std::fs::File::from_raw_fd(fds[0]) } })
    }
}
