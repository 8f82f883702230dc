//! Unix: `poll` (or `select`), a stop pipe, `dup2`, `sigaction`, glibc's
//! allocator settings, `setrlimit`. The interface is described in `mod.rs`.

use std::fs::File;
use std::io::{self, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::time::Duration;

use super::{Signal, Stop};

// ---------------------------------------------------------------------------
// Reads another thread can stop.

/// Something a session reads: any readable descriptor (stdin, a pipe, a
/// socket).
pub(crate) trait Readable: Read + AsFd + Send {}

impl<T: Read + AsFd + Send> Readable for T {}

/// Wakes a waiting reader through a pipe its wait watches.
pub(super) struct Waker {
    read: PipeReader,
    write: PipeWriter,
}

impl Waker {
    pub(super) fn new() -> io::Result<Waker> {
        let (read, write) = std::io::pipe()?;
        Ok(Waker { read, write })
    }

    pub(super) fn wake(&self) {
        // One byte, once: the pipe never fills.
        let _ = (&self.write).write(&[0]);
    }
}

/// Waits until `source` has bytes (or its end), for at most `timeout`;
/// `false` when the time ran out, a signal came, or the stop woke it.
pub(super) fn wait<R: Readable + ?Sized>(source: &R, stop: &Stop, timeout: Option<Duration>) -> io::Result<bool> {
    Ok(wait_fds(&[source.as_fd().as_raw_fd(), stop.waker.read.as_raw_fd()], timeout)? & 1 != 0)
}

/// Every wait here keeps its deadline.
pub(super) fn keeps_deadlines<R: Readable + ?Sized>(_source: &R) -> bool {
    true
}

/// Reads `source`, which has bytes.
pub(super) fn read<R: Readable + ?Sized>(source: &mut R, _stop: &Stop, buf: &mut [u8]) -> io::Result<usize> {
    source.read(buf)
}

/// Whether `source` has bytes (or its end) to read now.
pub(crate) fn ready_now<R: Readable + ?Sized>(source: &R) -> bool {
    wait_fds(&[source.as_fd().as_raw_fd()], Some(Duration::ZERO)).is_ok_and(|ready| ready & 1 != 0)
}

/// Waits until `listener` has a connection to accept, or `stop` is told to.
pub(crate) fn wait_to_accept(listener: &impl AsFd, stop: &Stop) -> io::Result<()> {
    while !stop.is_stopped() {
        if wait_fds(&[listener.as_fd().as_raw_fd(), stop.waker.read.as_raw_fd()], None)? & 1 != 0 {
            break;
        }
    }
    Ok(())
}

/// Waits until one of `fds` is readable or at its end, or `timeout` has
/// passed (`None`: no limit). Returns a bit per descriptor, bit i for
/// `fds[i]`; 0 when the time ran out or a signal came.
fn wait_fds(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<u32> {
    // macOS's poll refuses terminals and other devices (POLLNVAL): a plugin
    // started by hand from a terminal could not be read. Its select serves
    // them, for descriptors below FD_SETSIZE.
    #[cfg(target_vendor = "apple")]
    if fds.iter().all(|&fd| usize::try_from(fd).is_ok_and(|fd| fd < libc::FD_SETSIZE)) {
        return select(fds, timeout);
    }
    poll(fds, timeout)
}

fn poll(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<u32> {
    let mut polled = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 2];
    let polled = &mut polled[..fds.len()];
    for (slot, &fd) in polled.iter_mut().zip(fds) {
        *slot = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    }
    let ms = timeout.map_or(-1, |t| {
        // Rounded up: waking before the moment would only ask again.
        let ms = t.as_nanos().div_ceil(1_000_000);
        libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
    });
    // SAFETY: `polled` is an array of initialised pollfds of the length given.
    let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    let mut ready = 0;
    for (i, slot) in polled.iter().enumerate() {
        if slot.revents & libc::POLLNVAL != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the input cannot be waited on"));
        }
        if slot.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            ready |= 1 << i;
        }
    }
    Ok(ready)
}

#[cfg(target_vendor = "apple")]
fn select(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<u32> {
    // SAFETY: an all-zero fd_set is an empty one; FD_SET and FD_ISSET are
    // given descriptors below FD_SETSIZE (checked by the caller).
    unsafe {
        let mut set: libc::fd_set = std::mem::zeroed();
        for &fd in fds {
            libc::FD_SET(fd, &mut set);
        }
        let mut limit = timeout.map(|t| libc::timeval {
            tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_usec: t.subsec_micros() as libc::suseconds_t,
        });
        let limit_ptr = limit.as_mut().map_or(std::ptr::null_mut(), |l| l as *mut libc::timeval);
        let highest = fds.iter().copied().max().unwrap_or(0);
        let n = libc::select(highest + 1, &mut set, std::ptr::null_mut(), std::ptr::null_mut(), limit_ptr);
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
        }
        let mut ready = 0;
        for (i, &fd) in fds.iter().enumerate() {
            if libc::FD_ISSET(fd, &set) {
                ready |= 1 << i;
            }
        }
        Ok(ready)
    }
}

// ---------------------------------------------------------------------------
// The stdout guard.

/// Points fd 1 back at the original stdout when dropped.
pub(crate) struct StdoutTaken {
    /// A duplicate of the original stdout, to put back on fd 1.
    original: OwnedFd,
}

/// Returns a private duplicate of stdout for the protocol, and points fd 1
/// at stderr until the guard drops.
pub(crate) fn take_stdout() -> io::Result<(File, StdoutTaken)> {
    // Anything already buffered by Rust's stdout belongs on the old stream.
    io::stdout().flush()?;
    let stdout = io::stdout();
    let private = stdout.as_fd().try_clone_to_owned()?;
    let original = stdout.as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 onto fd 1 from fd 2, both open for the life of the process.
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((File::from(private), StdoutTaken { original }))
}

impl Drop for StdoutTaken {
    fn drop(&mut self) {
        // What was printed while serving belongs on stderr, where it went.
        let _ = io::stdout().flush();
        // SAFETY: dup2 onto fd 1 from a duplicate we own; fd 1 then refers
        // to the original stdout again (and `original` closes on drop).
        unsafe {
            libc::dup2(self.original.as_raw_fd(), libc::STDOUT_FILENO);
        }
    }
}

// ---------------------------------------------------------------------------
// SIGINT and SIGTERM.
//
// The handler writes the signal's number to a socket pair that a watcher
// reads, then calls the handler installed before it, if any. The pair is
// made once and never closed, so the handler can never write to a
// descriptor that was closed and reused. The previous dispositions go in a
// record made anew at each install and never freed, so a handler still
// running after its serve ended never reads one being rewritten.

const CAUGHT: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// The pair the handler writes to and the watcher reads.
struct Channel {
    read: UnixStream,
    write: UnixStream,
}

/// Made once, on first install; `None` if it could not be.
static CHANNEL: OnceLock<Option<Channel>> = OnceLock::new();
/// The channel's write end, for the handler; -1 while nothing listens.
static WRITE: AtomicI32 = AtomicI32::new(-1);
/// Set while one set of handlers is installed (or orphaned, see `Drop`).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set when the watcher is to stop waiting.
static QUIT: AtomicBool = AtomicBool::new(false);
/// The dispositions the handler replaced, by [`CAUGHT`] index.
static PREVIOUS: AtomicPtr<[libc::sigaction; 2]> = AtomicPtr::new(std::ptr::null_mut());

impl Channel {
    fn new() -> Option<Channel> {
        let (read, write) = UnixStream::pair().ok()?;
        // The handler must never block; the watcher's reads may.
        write.set_nonblocking(true).ok()?;
        Some(Channel { read, write })
    }

    /// Drops what an earlier serve left unread.
    fn drain(&self) {
        if self.read.set_nonblocking(true).is_ok() {
            let mut buf = [0u8; 64];
            while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
        }
        let _ = self.read.set_nonblocking(false);
    }
}

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

fn handler_address() -> libc::sighandler_t {
    caught as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as libc::sighandler_t
}

extern "C" fn caught(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // The interrupted code may be about to read errno: a failed write here
    // must not change it.
    let slot = errno();
    // SAFETY: this thread's errno slot, read here and written back below.
    let saved = slot.map(|slot| unsafe { *slot });
    let fd = WRITE.load(Ordering::Acquire);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a local and
        // the descriptor is never closed. It does not block: a full pair
        // (a storm of signals) has news enough for the watcher already.
        unsafe {
            libc::write(fd, (&raw const byte).cast(), 1);
        }
    }
    if let (Some(slot), Some(saved)) = (slot, saved) {
        // SAFETY: as above.
        unsafe { *slot = saved };
    }
    let (Some(i), record) = (index(signal), PREVIOUS.load(Ordering::Acquire)) else { return };
    if record.is_null() {
        return;
    }
    // SAFETY: a record is written in full before it is published and never
    // written or freed after.
    let previous = unsafe { &(*record)[i] };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        return;
    }
    // SAFETY: a disposition that is neither default nor ignore is a handler
    // function, of the shape its flags say.
    unsafe {
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(handler);
            f(signal, info, context);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(signal);
        }
    }
}

/// SIGINT and SIGTERM, caught from [`install`](StopEvents::install) until
/// dropped, when their previous dispositions are put back exactly.
pub(crate) struct StopEvents {
    channel: &'static Channel,
}

impl StopEvents {
    /// Catches SIGINT and SIGTERM from now on; `None` if they are caught
    /// already (a second serve in the process) or cannot be.
    pub(crate) fn install() -> Option<StopEvents> {
        if ACTIVE.swap(true, Ordering::AcqRel) {
            return None;
        }
        // Only an earlier serve's channel can hold bytes (its drain is three
        // system calls at every plugin's start, before its handshake
        // answer). `ACTIVE` keeps another serve from making it meanwhile.
        let earlier = CHANNEL.get().is_some();
        let Some(channel) = CHANNEL.get_or_init(Channel::new).as_ref() else {
            ACTIVE.store(false, Ordering::Release);
            return None;
        };
        if earlier {
            channel.drain();
        }
        QUIT.store(false, Ordering::Release);
        // A fresh record, leaked: a handler of an earlier serve may still be
        // reading the last one (a few hundred bytes per serve, never more).
        // SAFETY: an all-zero sigaction is a valid (default) disposition.
        let record: &'static mut [libc::sigaction; 2] = Box::leak(Box::new(unsafe { std::mem::zeroed() }));
        for (i, signal) in CAUGHT.into_iter().enumerate() {
            // SAFETY: reads the current disposition into our record.
            unsafe { libc::sigaction(signal, std::ptr::null(), &mut record[i]) };
        }
        PREVIOUS.store(record, Ordering::Release);
        WRITE.store(channel.write.as_raw_fd(), Ordering::Release);
        for signal in CAUGHT {
            // SAFETY: the action is zeroed and then filled in full; the
            // handler reads only what was published above.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler_address();
                action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        Some(StopEvents { channel })
    }

    /// Waits for the next signal; `None` once [`stop_waiting`](Self::stop_waiting)
    /// was called (or the channel failed).
    pub(crate) fn next(&self) -> Option<Signal> {
        let mut byte = [0u8; 1];
        loop {
            let read = (&self.channel.read).read(&mut byte);
            if QUIT.load(Ordering::Acquire) {
                return None;
            }
            match read {
                Ok(1) if libc::c_int::from(byte[0]) == libc::SIGINT => return Some(Signal::Interrupt),
                Ok(1) if libc::c_int::from(byte[0]) == libc::SIGTERM => return Some(Signal::Terminate),
                Ok(1) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => return None,
            }
        }
    }

    /// Makes [`next`](Self::next) return `None`, now or when next called.
    pub(crate) fn stop_waiting(&self) {
        QUIT.store(true, Ordering::Release);
        let _ = (&self.channel.write).write(&[0]);
    }
}

impl Drop for StopEvents {
    /// Puts back each signal's previous disposition, unless something
    /// installed its own over ours meanwhile. Then ours stays in that
    /// handler's chain, inert (it writes nothing) but still passing signals
    /// on, for good: `ACTIVE` stays set, so no later serve installs over it.
    fn drop(&mut self) {
        WRITE.store(-1, Ordering::Release);
        let record = PREVIOUS.load(Ordering::Acquire);
        let mut orphaned = false;
        for (i, signal) in CAUGHT.into_iter().enumerate() {
            // SAFETY: reads the current disposition into a local, and writes
            // back the one saved at install (published, never rewritten).
            unsafe {
                let mut current: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut current);
                if current.sa_sigaction == handler_address() {
                    libc::sigaction(signal, &(*record)[i], std::ptr::null_mut());
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

// ---------------------------------------------------------------------------
// A thread's CPU clock.

/// How much CPU time a thread has used, readable from any thread while it
/// lives.
pub(crate) struct ThreadClock {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    clock: libc::clockid_t,
    #[cfg(target_vendor = "apple")]
    thread: libc::mach_port_t,
}

impl ThreadClock {
    /// The calling thread's clock; `None` where the system offers none that
    /// another thread can read.
    pub(crate) fn of_this_thread() -> Option<ThreadClock> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let mut clock: libc::clockid_t = 0;
            // SAFETY: asks for this thread's CPU clock id, into a local.
            let found = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0;
            found.then_some(ThreadClock { clock })
        }
        #[cfg(target_vendor = "apple")]
        {
            // SAFETY: this thread's Mach port, valid while the thread lives.
            Some(ThreadClock { thread: unsafe { libc::pthread_mach_thread_np(libc::pthread_self()) } })
        }
        #[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
        None
    }

    /// How finely [`used`](Self::used) moves (macOS counts microseconds).
    pub(crate) fn resolution(&self) -> Duration {
        Duration::from_micros(1)
    }

    /// The CPU time the thread has used so far (`None` once it has ended).
    pub(crate) fn used(&self) -> Option<Duration> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: reads the clock into a local timespec.
            if unsafe { libc::clock_gettime(self.clock, &mut now) } != 0 {
                return None;
            }
            Some(Duration::new(u64::try_from(now.tv_sec).ok()?, u32::try_from(now.tv_nsec).ok()?))
        }
        #[cfg(target_vendor = "apple")]
        {
            // SAFETY: an all-zero thread_basic_info is valid; thread_info
            // fills at most `count` integers of it.
            unsafe {
                let mut info: libc::thread_basic_info = std::mem::zeroed();
                let mut count = libc::THREAD_BASIC_INFO_COUNT;
                let got = libc::thread_info(
                    self.thread,
                    libc::THREAD_BASIC_INFO as libc::thread_flavor_t,
                    (&raw mut info).cast(),
                    &mut count,
                );
                if got != libc::KERN_SUCCESS {
                    return None;
                }
                let micros = |t: libc::time_value_t| {
                    u64::try_from(t.seconds).unwrap_or(0) * 1_000_000 + u64::try_from(t.microseconds).unwrap_or(0)
                };
                Some(Duration::from_micros(micros(info.user_time) + micros(info.system_time)))
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
        None
    }
}

// ---------------------------------------------------------------------------
// The process.

/// Whether stdin is a pipe or a socket: another program talks to the
/// plugin over it, as a Scriptling host does (a person's terminal, or a
/// service manager's /dev/null, is neither).
pub(crate) fn stdin_is_pipe() -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Ok(stdin) = io::stdin().as_fd().try_clone_to_owned() else { return false };
    File::from(stdin).metadata().is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

/// Makes glibc serve allocations of 2 MiB and more with their own mappings,
/// and keep up to 4 MiB free at the top of its heaps (why, and what it
/// measured: the comment at the end of `transport/mod.rs`).
pub(crate) fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; it is safe to call at
    // any time, and this runs before the plugin starts its threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

/// Hands memory freed inside glibc's arenas back to the system (other
/// allocators ignore it).
pub(crate) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether `error` says the process (or the system) has no file
/// descriptor left to give.
pub(crate) fn out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Raises the soft limit on open files towards `files` (plus room for
/// everything else), within the hard limit, as Go's runtime does at start.
pub(crate) fn raise_file_limit(files: usize) {
    // SAFETY: getrlimit/setrlimit read and write a plain struct we own.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        let wanted = (files as libc::rlim_t).saturating_add(256).min(limit.rlim_max);
        if wanted > limit.rlim_cur {
            limit.rlim_cur = wanted;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use crate::sys::{read, stopped};
    use std::time::Instant;

    #[test]
    fn a_blocked_read_returns_when_stopped_and_reads_what_arrives_otherwise() {
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        let stop = std::sync::Arc::new(Stop::new().unwrap());
        writer.write_all(b"hi").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(read(&mut reader, &stop, &mut buf, None, false).unwrap(), Some(2));
        let until = Instant::now() + Duration::from_millis(30);
        assert_eq!(read(&mut reader, &stop, &mut buf, Some(until), false).unwrap(), None, "nothing by the deadline");
        let stopper = std::sync::Arc::clone(&stop);
        let blocked =
            std::thread::spawn(move || read(&mut reader, &stopper, &mut buf, None, false).map_err(|e| e.to_string()));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!blocked.is_finished(), "waits for input");
        stop.stop();
        assert_eq!(blocked.join().unwrap(), Err(stopped().to_string()));
        drop(writer);
    }

    #[test]
    fn once_stopped_what_was_sent_already_is_read_once() {
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        let stop = Stop::new().unwrap();
        writer.write_all(b"sent before the end").unwrap();
        stop.stop();
        let mut buf = [0u8; 64];
        assert_eq!(read(&mut reader, &stop, &mut buf, None, false).unwrap(), Some(19));
        writer.write_all(b"after").unwrap();
        assert_eq!(read(&mut reader, &stop, &mut buf, None, false).unwrap_err().to_string(), stopped().to_string());
    }
}
