//! SIGINT and SIGTERM while a plugin serves: the first asks for a graceful
//! shutdown, a second exits at once; whatever handled them before keeps
//! doing so, and gets them back alone when serving ends.
//!
//! The handler only writes the signal's number to a pipe (a watcher thread
//! reads it and acts), then calls the handler that was installed before it,
//! if any: an application's `tokio::signal::ctrl_c()` still fires while a
//! plugin is served on its runtime. When serving ends the previous
//! disposition is put back exactly, default included, so a Ctrl-C after
//! `serve_stdio` returns does what it did before it was called.
//!
//! Why not `signal-hook`: its registry chains handlers as this does, but
//! cannot give a signal back its default disposition (unregistering the
//! last action leaves the signal ignored), and restoring the state is the
//! point. If something installs its own handler over this one meanwhile,
//! this one cannot be taken out of its chain: it is left in place, inert
//! but still passing signals on, and later serves in the process leave
//! signals to the application.

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

/// SIGINT and SIGTERM caught since [`Signals::install`], waiting to be
/// [watched](Signals::watch).
pub(crate) struct Signals {
    #[cfg(unix)]
    inner: unix::Installed,
}

/// A watcher thread delivering signals; dropping it restores the previous
/// handlers and ends the thread.
pub(crate) struct SignalWatch {
    #[cfg(unix)]
    inner: Option<unix::Watching>,
}

impl Signals {
    /// Catches SIGINT and SIGTERM from now on. `None` if they are caught
    /// already (a second plugin served in the same process) or cannot be.
    pub(crate) fn install() -> Option<Signals> {
        #[cfg(unix)]
        {
            unix::Installed::new().map(|inner| Signals { inner })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// Hands the first signal to `first` (on a thread of its own); a second
    /// one ends the process at once, with status 128 + its number.
    pub(crate) fn watch(self, first: impl FnOnce(Signal) + Send + 'static) -> std::io::Result<SignalWatch> {
        #[cfg(unix)]
        {
            Ok(SignalWatch { inner: Some(self.inner.watch(first)?) })
        }
        #[cfg(not(unix))]
        {
            let _ = first;
            Ok(SignalWatch {})
        }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        #[cfg(unix)]
        drop(self.inner.take());
    }
}

#[cfg(unix)]
mod unix {
    use std::cell::UnsafeCell;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::thread::JoinHandle;

    use super::Signal;

    const CAUGHT: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

    /// The pipe's write end, for the handler; -1 when no session listens.
    static WRITE: AtomicI32 = AtomicI32::new(-1);
    /// Set while one set of handlers is installed.
    static ACTIVE: AtomicBool = AtomicBool::new(false);

    /// The dispositions the handler replaced, by [`CAUGHT`] index: written
    /// only while no handler of ours is installed, read by the handler.
    struct Previous(UnsafeCell<[libc::sigaction; 2]>);
    // SAFETY: see the field's comment: writes and the handler's reads never
    // overlap (the handler is installed after the write and removed before
    // the next).
    unsafe impl Sync for Previous {}
    // SAFETY: an all-zero sigaction is a valid (default) disposition.
    static PREVIOUS: Previous = Previous(UnsafeCell::new(unsafe { std::mem::zeroed() }));

    fn index(signal: libc::c_int) -> Option<usize> {
        CAUGHT.iter().position(|s| *s == signal)
    }

    /// This thread's `errno` slot, where the platform says how to find it.
    fn errno() -> Option<*mut libc::c_int> {
        // SAFETY (each arm): returns this thread's errno slot; always valid.
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "emscripten"))]
        return Some(unsafe { libc::__errno_location() });
        #[cfg(any(target_vendor = "apple", target_os = "freebsd", target_os = "dragonfly"))]
        return Some(unsafe { libc::__error() });
        #[cfg(any(target_os = "netbsd", target_os = "openbsd"))]
        return Some(unsafe { libc::__errno() });
        #[allow(unreachable_code)]
        None
    }

    extern "C" fn caught(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // The interrupted code may be about to read errno: a failed write
        // here must not change it.
        let slot = errno();
        // SAFETY: this thread's errno slot, read and written back below.
        let saved = slot.map(|slot| unsafe { *slot });
        let fd = WRITE.load(Ordering::Acquire);
        if fd >= 0 {
            let byte = signal as u8;
            // SAFETY: write(2) is async-signal-safe; the buffer is a local.
            // The pipe does not block: a full one (a storm of signals) has
            // news enough for the watcher already.
            unsafe {
                libc::write(fd, (&raw const byte).cast(), 1);
            }
        }
        if let (Some(slot), Some(saved)) = (slot, saved) {
            // SAFETY: as above.
            unsafe { *slot = saved };
        }
        let Some(i) = index(signal) else { return };
        // SAFETY: read-only, and not written while this handler is installed.
        let previous = unsafe { &(*PREVIOUS.0.get())[i] };
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            return;
        }
        // SAFETY: a disposition that is neither default nor ignore is a
        // handler function, of the shape its flags say.
        unsafe {
            if previous.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                f(signal, info, context);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                f(signal);
            }
        }
    }

    /// Handlers installed, their pipe's read end kept for the watcher.
    pub(super) struct Installed {
        read: Option<OwnedFd>,
        write: OwnedFd,
    }

    impl Installed {
        pub(super) fn new() -> Option<Installed> {
            if ACTIVE.swap(true, Ordering::AcqRel) {
                return None;
            }
            let mut fds = [0; 2];
            // SAFETY: pipe2 fills the two-element array we own.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                ACTIVE.store(false, Ordering::Release);
                return None;
            }
            // SAFETY: the two fds were just created and are ours alone.
            let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            // The handler must never block; the watcher's reads may.
            // SAFETY: fcntl on a descriptor we own.
            if unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
                ACTIVE.store(false, Ordering::Release);
                return None;
            }
            WRITE.store(write.as_raw_fd(), Ordering::Release);
            for (i, signal) in CAUGHT.into_iter().enumerate() {
                // SAFETY: the previous disposition is read into our static
                // before our handler (which reads it) is installed; the new
                // action is zeroed and then filled in full.
                unsafe {
                    libc::sigaction(signal, std::ptr::null(), &mut (*PREVIOUS.0.get())[i]);
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = caught as extern "C" fn(_, _, _) as libc::sighandler_t;
                    action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
                    libc::sigemptyset(&mut action.sa_mask);
                    libc::sigaction(signal, &action, std::ptr::null_mut());
                }
            }
            Some(Installed { read: Some(read), write })
        }

        pub(super) fn watch(mut self, first: impl FnOnce(Signal) + Send + 'static) -> std::io::Result<Watching> {
            let mut read = std::fs::File::from(self.read.take().expect("watched once"));
            let thread = std::thread::Builder::new().name("plugin-signals".into()).spawn(move || {
                let Some(signal) = next(&mut read) else { return };
                first(signal);
                let Some(again) = next(&mut read) else { return };
                eprintln!("scriptling-plugin: {again} received again, exiting at once");
                std::process::exit(128 + again.number());
            })?;
            Ok(Watching { installed: Some(self), thread: Some(thread) })
        }
    }

    /// The next signal from the pipe, or `None` when told to stop (a zero
    /// byte) or the pipe fails.
    fn next(read: &mut std::fs::File) -> Option<Signal> {
        let mut byte = [0u8; 1];
        loop {
            match read.read(&mut byte) {
                Ok(1) if i32::from(byte[0]) == libc::SIGINT => return Some(Signal::Interrupt),
                Ok(1) if i32::from(byte[0]) == libc::SIGTERM => return Some(Signal::Terminate),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => return None,
            }
        }
    }

    impl Drop for Installed {
        /// Puts back each signal's previous disposition, unless something
        /// installed its own over ours meanwhile. Then ours stays in that
        /// handler's chain, inert, for good: `ACTIVE` stays set, so no later
        /// serve installs over it (that would overwrite the dispositions it
        /// still reads, and chain it to itself).
        fn drop(&mut self) {
            WRITE.store(-1, Ordering::Release);
            let mut orphaned = false;
            for (i, signal) in CAUGHT.into_iter().enumerate() {
                // SAFETY: reads the current disposition into a local, and
                // writes back the one saved in `new`.
                unsafe {
                    let mut current: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(signal, std::ptr::null(), &mut current);
                    if current.sa_sigaction == caught as extern "C" fn(_, _, _) as libc::sighandler_t {
                        libc::sigaction(signal, &(*PREVIOUS.0.get())[i], std::ptr::null_mut());
                    } else {
                        orphaned = true;
                    }
                }
            }
            if !orphaned {
                ACTIVE.store(false, Ordering::Release);
            }
        }
    }

    /// The watcher thread and the handlers it serves.
    pub(super) struct Watching {
        installed: Option<Installed>,
        thread: Option<JoinHandle<()>>,
    }

    impl Drop for Watching {
        fn drop(&mut self) {
            let Some(installed) = self.installed.take() else { return };
            let byte = 0u8;
            // SAFETY: one byte from a local, to our own pipe: tells the
            // watcher to stop.
            unsafe {
                libc::write(installed.write.as_raw_fd(), (&raw const byte).cast(), 1);
            }
            drop(installed);
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
