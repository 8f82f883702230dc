//! Windows: `WSAPoll` and a loopback waker for sockets,
//! `CancelSynchronousIo` and `PeekNamedPipe` for pipes and consoles,
//! `SetStdHandle`, `SetConsoleCtrlHandler`. The interface is described in
//! `mod.rs`.

use std::fs::File;
use std::io::{self, PipeReader, Read, Stdin, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::windows::io::{
    AsRawHandle, AsRawSocket, BorrowedHandle, FromRawHandle, OwnedHandle, RawHandle, RawSocket,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, mpsc};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{
    DUPLICATE_SAME_ACCESS, DuplicateHandle, ERROR_NOT_FOUND, FILETIME, GetLastError, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Networking::WinSock::{
    POLLERR, POLLHUP, POLLNVAL, POLLRDNORM, SOCKET_ERROR, WSAGetLastError, WSAPOLLFD, WSAPoll,
};
use windows_sys::Win32::Storage::FileSystem::{FILE_TYPE_PIPE, GetFileType};
use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, CTRL_C_EVENT, CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT, GetStdHandle,
    STD_ERROR_HANDLE, STD_OUTPUT_HANDLE, SetConsoleCtrlHandler, SetStdHandle,
};
use windows_sys::Win32::System::IO::CancelSynchronousIo;
use windows_sys::Win32::System::Pipes::PeekNamedPipe;
use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetCurrentThread, GetThreadTimes};
use windows_sys::Win32::System::WindowsProgramming::QueryThreadCycleTime;
use windows_sys::core::BOOL;

use super::{Signal, Stop, stopped};

/// Locks `mutex`, ignoring poison (nothing here leaves state half-made).
/// (`sys` is the lowest layer: `support::lock` is above it.)
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------
// Reads another thread can stop.

/// Something a session reads. A socket is waited on (`WSAPoll`) before it
/// is read; anything else (a pipe, a console, a file) is read blocking and
/// the read cancelled when the session stops.
pub(crate) trait Readable: Read + Send {
    /// What the source is, for waiting on it or asking it.
    fn waitable(&self) -> Waitable;
}

/// A socket, or a handle to a pipe, console or file.
pub(crate) enum Waitable {
    Socket(RawSocket),
    Handle(RawHandle),
}

impl Readable for Stdin {
    fn waitable(&self) -> Waitable {
        Waitable::Handle(self.as_raw_handle())
    }
}

impl Readable for PipeReader {
    fn waitable(&self) -> Waitable {
        Waitable::Handle(self.as_raw_handle())
    }
}

impl Readable for TcpStream {
    fn waitable(&self) -> Waitable {
        Waitable::Socket(self.as_raw_socket())
    }
}

/// Wakes a reader: a datagram to a loopback socket a socket's wait
/// watches, or `CancelSynchronousIo` on the thread blocked in a read.
pub(super) struct Waker {
    state: Mutex<Reading>,
}

#[derive(Default)]
struct Reading {
    /// Made on the first wait on a socket.
    socket: Option<UdpSocket>,
    /// The thread that reads, to cancel its read.
    thread: Option<(ThreadId, OwnedHandle)>,
    /// That thread is in a blocking read.
    in_read: bool,
}

/// How long a stop keeps trying to cancel a read the reader has not yet
/// begun in the kernel (a cancel then finds nothing to cancel).
const CANCEL_FOR: Duration = Duration::from_secs(1);

impl Waker {
    pub(super) fn new() -> io::Result<Waker> {
        Ok(Waker { state: Mutex::new(Reading::default()) })
    }

    /// Wakes the reader. A read that cannot be cancelled (some consoles, a
    /// pipe under Wine made by a Unix program) goes on until its input
    /// delivers or closes.
    pub(super) fn wake(&self) {
        let mut state = lock(&self.state);
        if let Some(socket) = &state.socket {
            let _ = socket.send(&[0]);
        }
        let deadline = Instant::now() + CANCEL_FOR;
        while state.in_read {
            let Some((_, thread)) = &state.thread else { break };
            // SAFETY: a handle to a live thread (it is inside its read).
            if unsafe { CancelSynchronousIo(raw(thread)) } != 0 {
                break;
            }
            // SAFETY: reads this thread's last error.
            let error = unsafe { GetLastError() };
            if error != ERROR_NOT_FOUND || Instant::now() >= deadline {
                break;
            }
            // The reader is between saying it reads and reading.
            drop(state);
            std::thread::sleep(Duration::from_millis(1));
            state = lock(&self.state);
        }
    }

    /// The loopback socket a stop wakes a socket's wait through, made if
    /// need be; `None` once stopped.
    fn socket(&self, stop: &Stop) -> io::Result<Option<RawSocket>> {
        let mut state = lock(&self.state);
        if stop.is_stopped() {
            return Ok(None);
        }
        if state.socket.is_none() {
            let socket = UdpSocket::bind(("127.0.0.1", 0))?;
            socket.connect(socket.local_addr()?)?;
            socket.set_nonblocking(true)?;
            state.socket = Some(socket);
        }
        Ok(state.socket.as_ref().map(AsRawSocket::as_raw_socket))
    }
}

fn raw(handle: &OwnedHandle) -> HANDLE {
    handle.as_raw_handle()
}

/// A handle to the calling thread that other threads can use.
fn current_thread() -> io::Result<OwnedHandle> {
    let mut handle: HANDLE = std::ptr::null_mut();
    // SAFETY: duplicates this thread's pseudo-handle into a real one we own.
    let ok = unsafe {
        DuplicateHandle(
            GetCurrentProcess(),
            GetCurrentThread(),
            GetCurrentProcess(),
            &mut handle,
            0,
            0,
            DUPLICATE_SAME_ACCESS,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, ours alone.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

/// Waits until a socket has bytes (or its end), for at most `timeout`;
/// `false` when the time ran out or the stop woke it. What is not a socket
/// cannot be waited on: it is read at once, blocking (and so keeps no
/// deadline), and the stop cancels that read.
pub(super) fn wait<R: Readable + ?Sized>(source: &R, stop: &Stop, timeout: Option<Duration>) -> io::Result<bool> {
    match source.waitable() {
        Waitable::Socket(socket) => match stop.waker.socket(stop)? {
            Some(waker) => Ok(wait_sockets(&[socket, waker], timeout)? & 1 != 0),
            None => Ok(false),
        },
        Waitable::Handle(_) => Ok(true),
    }
}

/// A socket's wait keeps its deadline; a handle is not waited for at all.
pub(super) fn keeps_deadlines<R: Readable + ?Sized>(source: &R) -> bool {
    matches!(source.waitable(), Waitable::Socket(_))
}

/// Reads `source`: a socket, which has bytes; or anything else, blocking,
/// where the stop can cancel the read.
pub(super) fn read<R: Readable + ?Sized>(source: &mut R, stop: &Stop, buf: &mut [u8]) -> io::Result<usize> {
    if let Waitable::Socket(_) = source.waitable() {
        return source.read(buf);
    }
    {
        let mut state = lock(&stop.waker.state);
        if stop.is_stopped() {
            return Err(stopped());
        }
        let me = std::thread::current().id();
        if state.thread.as_ref().is_none_or(|(id, _)| *id != me) {
            state.thread = Some((me, current_thread()?));
        }
        state.in_read = true;
    }
    // A cancelled read fails with ERROR_OPERATION_ABORTED: the stop's doing.
    let read = source.read(buf);
    lock(&stop.waker.state).in_read = false;
    read
}

/// Whether `source` has bytes to read now (a console or file cannot be
/// asked without reading: `false`).
pub(crate) fn ready_now<R: Readable + ?Sized>(source: &R) -> bool {
    match source.waitable() {
        Waitable::Socket(socket) => wait_sockets(&[socket], Some(Duration::ZERO)).is_ok_and(|ready| ready & 1 != 0),
        Waitable::Handle(handle) => {
            let mut available = 0u32;
            let null = std::ptr::null_mut();
            // SAFETY: asks the pipe how many bytes it holds, into a local;
            // fails harmlessly on what is not a pipe.
            let asked = unsafe { PeekNamedPipe(handle, null, 0, null.cast(), &mut available, null.cast()) };
            asked != 0 && available > 0
        }
    }
}

/// Waits until `listener` has a connection to accept, or `stop` is told to.
pub(crate) fn wait_to_accept(listener: &TcpListener, stop: &Stop) -> io::Result<()> {
    while let Some(waker) = stop.waker.socket(stop)? {
        if wait_sockets(&[listener.as_raw_socket(), waker], None)? & 1 != 0 {
            break;
        }
    }
    Ok(())
}

/// Waits until one of `sockets` is readable or at its end, or `timeout`
/// has passed (`None`: no limit). Returns a bit per socket; 0 when the time
/// ran out.
fn wait_sockets(sockets: &[RawSocket], timeout: Option<Duration>) -> io::Result<u32> {
    let mut polled = [WSAPOLLFD { fd: 0, events: 0, revents: 0 }; 2];
    let polled = &mut polled[..sockets.len()];
    for (slot, &socket) in polled.iter_mut().zip(sockets) {
        *slot = WSAPOLLFD { fd: socket as usize, events: POLLRDNORM, revents: 0 };
    }
    let ms = timeout.map_or(-1, |t| i32::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX));
    // SAFETY: `polled` is an array of initialised WSAPOLLFDs of the length given.
    let n = unsafe { WSAPoll(polled.as_mut_ptr(), polled.len() as u32, ms) };
    if n == SOCKET_ERROR {
        // SAFETY: reads this thread's last socket error.
        return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
    }
    let mut ready = 0;
    for (i, slot) in polled.iter().enumerate() {
        if slot.revents & POLLNVAL != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the socket cannot be waited on"));
        }
        if slot.revents & (POLLRDNORM | POLLHUP | POLLERR) != 0 {
            ready |= 1 << i;
        }
    }
    Ok(ready)
}

// ---------------------------------------------------------------------------
// The stdout guard.

/// Puts the original stdout handle back when dropped.
pub(crate) struct StdoutTaken {
    /// The original handle (the process's; never closed here), as an integer
    /// so the guard can move between threads.
    original: usize,
}

/// Returns a private duplicate of stdout for the protocol, and makes stderr
/// the process's standard output handle until the guard drops: `println!`
/// (which asks for the handle on every write) lands on stderr. C code
/// writing through the C runtime's own descriptor 1 is not redirected.
pub(crate) fn take_stdout() -> io::Result<(File, StdoutTaken)> {
    io::stdout().flush()?;
    // SAFETY: asks for the process's standard handles.
    let (original, stderr) = unsafe { (GetStdHandle(STD_OUTPUT_HANDLE), GetStdHandle(STD_ERROR_HANDLE)) };
    if original.is_null() || original == INVALID_HANDLE_VALUE {
        return Err(io::Error::new(io::ErrorKind::NotFound, "the process has no standard output to serve on"));
    }
    // SAFETY: the process's stdout handle, open while we borrow it here.
    let private = unsafe { BorrowedHandle::borrow_raw(original) }.try_clone_to_owned()?;
    // SAFETY: sets the process's standard output handle to its stderr's.
    if unsafe { SetStdHandle(STD_OUTPUT_HANDLE, stderr) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((File::from(private), StdoutTaken { original: original as usize }))
}

impl Drop for StdoutTaken {
    fn drop(&mut self) {
        let _ = io::stdout().flush();
        // SAFETY: puts back the handle that was the standard output.
        unsafe {
            SetStdHandle(STD_OUTPUT_HANDLE, self.original as HANDLE);
        }
    }
}

// ---------------------------------------------------------------------------
// Console events.
//
// Windows calls the handler on a thread of its own. It hands the event to
// the watcher over a channel and returns "handled", so the default action
// (ending the process at once) does not run. For a console closing, a log-
// off or a shutdown, Windows ends the process as soon as the handler
// returns (or a few seconds after the event, whatever it does), so the
// handler waits until serving has ended.

/// Where the handler sends events; `None` while nothing listens.
static SINK: Mutex<Option<mpsc::Sender<Option<Signal>>>> = Mutex::new(None);
/// Set while a handler is installed.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether serving has ended (a closing console's handler waits for it).
static ENDED: (Mutex<bool>, Condvar) = (Mutex::new(true), Condvar::new());
/// How long a closing console's handler waits: longer than Windows gives.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

unsafe extern "system" fn on_console_event(event: u32) -> BOOL {
    BOOL::from(console_event(event))
}

/// Handles `event`; returns whether it was ours (handled).
fn console_event(event: u32) -> bool {
    let signal = match event {
        CTRL_C_EVENT => Signal::Interrupt,
        CTRL_BREAK_EVENT => Signal::Break,
        CTRL_CLOSE_EVENT | CTRL_LOGOFF_EVENT | CTRL_SHUTDOWN_EVENT => Signal::Close,
        _ => return false,
    };
    let Some(sink) = lock(&SINK).clone() else { return false };
    if sink.send(Some(signal)).is_err() {
        return false;
    }
    if signal == Signal::Close {
        let (ended, changed) = &ENDED;
        let guard = lock(ended);
        let _ = changed.wait_timeout_while(guard, CLOSE_WAIT, |ended| !*ended);
    }
    true
}

/// Ctrl-C, Ctrl-Break and the console closing, caught from
/// [`install`](StopEvents::install) until dropped. While caught they are
/// the plugin's: handlers the application registered before are not
/// called for them (Windows gives no way to call the next one and still
/// keep the default action from ending the process); once dropped, they
/// are the application's again.
pub(crate) struct StopEvents {
    events: Mutex<mpsc::Receiver<Option<Signal>>>,
    quit: mpsc::Sender<Option<Signal>>,
}

impl StopEvents {
    /// Catches the console's events from now on; `None` if they are caught
    /// already (a second serve in the process) or cannot be.
    pub(crate) fn install() -> Option<StopEvents> {
        if ACTIVE.swap(true, Ordering::AcqRel) {
            return None;
        }
        let (tx, rx) = mpsc::channel();
        *lock(&SINK) = Some(tx.clone());
        *lock(&ENDED.0) = false;
        // SAFETY: registers a handler function that lives for the process.
        if unsafe { SetConsoleCtrlHandler(Some(on_console_event), 1) } == 0 {
            *lock(&SINK) = None;
            ACTIVE.store(false, Ordering::Release);
            return None;
        }
        Some(StopEvents { events: Mutex::new(rx), quit: tx })
    }

    /// Waits for the next event; `None` once [`stop_waiting`](Self::stop_waiting)
    /// was called.
    pub(crate) fn next(&self) -> Option<Signal> {
        lock(&self.events).recv().ok().flatten()
    }

    /// Makes [`next`](Self::next) return `None`, now or when next called.
    pub(crate) fn stop_waiting(&self) {
        let _ = self.quit.send(None);
    }
}

impl Drop for StopEvents {
    fn drop(&mut self) {
        *lock(&SINK) = None;
        // SAFETY: removes the handler registered at install.
        unsafe {
            SetConsoleCtrlHandler(Some(on_console_event), 0);
        }
        *lock(&ENDED.0) = true;
        ENDED.1.notify_all();
        ACTIVE.store(false, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------
// A thread's CPU clock.

/// How much a thread has computed, readable from any thread while it lives.
pub(crate) struct ThreadClock {
    thread: OwnedHandle,
    /// Read as processor cycles (else as the thread's CPU times).
    cycles: bool,
}

impl ThreadClock {
    /// The calling thread's clock.
    pub(crate) fn of_this_thread() -> Option<ThreadClock> {
        let thread = current_thread().ok()?;
        // A running thread has used cycles: a count of 0 is a system that
        // does not keep it (Wine's is a stub).
        let cycles = cycles(&thread).is_some_and(|n| n > 0);
        Some(ThreadClock { thread, cycles })
    }

    /// How finely [`used`](Self::used) moves: exact for cycles; a clock
    /// tick (~16 ms) for the CPU times.
    pub(crate) fn resolution(&self) -> Duration {
        if self.cycles { Duration::ZERO } else { Duration::from_millis(16) }
    }

    /// What the thread has computed so far. Preferably the processor cycles
    /// it used, counted as a nanosecond each: exact, where the CPU times
    /// move only at clock ticks (~16 ms), too coarse for the stall rule's
    /// window; a cycle overstates a nanosecond on processors faster than
    /// 1 GHz, which only makes a thread look busier.
    pub(crate) fn used(&self) -> Option<Duration> {
        if self.cycles {
            return cycles(&self.thread).map(Duration::from_nanos);
        }
        let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
        let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
        // SAFETY: reads the thread's times into locals.
        let ok = unsafe { GetThreadTimes(raw(&self.thread), &mut created, &mut exited, &mut kernel, &mut user) };
        let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
        // In units of 100 ns.
        (ok != 0).then(|| Duration::from_nanos((ticks(kernel) + ticks(user)).saturating_mul(100)))
    }
}

/// The processor cycles `thread` has used.
fn cycles(thread: &OwnedHandle) -> Option<u64> {
    let mut cycles = 0u64;
    // SAFETY: reads the thread's cycle count into a local.
    let ok = unsafe { QueryThreadCycleTime(raw(thread), &mut cycles) } != 0;
    ok.then_some(cycles)
}

// ---------------------------------------------------------------------------
// The process.

/// Whether stdin is a pipe: another program talks to the plugin over it, as
/// a Scriptling host does (a console, or the NUL device, is not).
pub(crate) fn stdin_is_pipe() -> bool {
    // SAFETY: asks the kind of the process's stdin handle.
    unsafe { GetFileType(io::stdin().as_raw_handle()) == FILE_TYPE_PIPE }
}

/// Nothing to do: the Windows heap has no such settings.
pub(crate) fn tune_allocator() {}

/// Nothing to do: the Windows heap returns what it can by itself.
pub(crate) fn return_freed_memory() {}

/// Whether `error` says no socket is left to give (`WSAEMFILE`).
pub(crate) fn out_of_descriptors(error: &io::Error) -> bool {
    error.raw_os_error() == Some(10024)
}

/// Nothing to do: Windows has no per-process limit on open sockets.
pub(crate) fn raise_file_limit(_files: usize) {}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use crate::sys::read;

    #[test]
    fn a_blocked_pipe_read_returns_when_stopped() {
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        let stop = std::sync::Arc::new(Stop::new().unwrap());
        writer.write_all(b"hi").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(read(&mut reader, &stop, &mut buf, None, false).unwrap(), Some(2));
        let stopper = std::sync::Arc::clone(&stop);
        let blocked =
            std::thread::spawn(move || read(&mut reader, &stopper, &mut buf, None, false).map_err(|e| e.to_string()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!blocked.is_finished(), "waits for input");
        stop.stop();
        assert_eq!(blocked.join().unwrap(), Err(stopped().to_string()));
        drop(writer);
    }

    #[test]
    fn once_stopped_what_was_sent_already_is_read_once_and_a_pipe_says_what_it_holds() {
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        assert!(!ready_now(&reader));
        writer.write_all(b"sent before the end").unwrap();
        assert!(ready_now(&reader));
        let stop = Stop::new().unwrap();
        stop.stop();
        let mut buf = [0u8; 64];
        assert_eq!(read(&mut reader, &stop, &mut buf, None, false).unwrap(), Some(19));
        writer.write_all(b"after").unwrap();
        assert_eq!(read(&mut reader, &stop, &mut buf, None, false).unwrap_err().to_string(), stopped().to_string());
    }

    #[test]
    fn a_socket_read_waits_for_its_deadline_and_returns_when_stopped() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        let stop = std::sync::Arc::new(Stop::new().unwrap());
        let mut buf = [0u8; 8];
        let until = Instant::now() + Duration::from_millis(30);
        assert_eq!(read(&mut served, &stop, &mut buf, Some(until), false).unwrap(), None);
        let stopper = std::sync::Arc::clone(&stop);
        let blocked =
            std::thread::spawn(move || read(&mut served, &stopper, &mut buf, None, false).map_err(|e| e.to_string()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!blocked.is_finished(), "waits for input");
        stop.stop();
        assert_eq!(blocked.join().unwrap(), Err(stopped().to_string()));
    }

    #[test]
    fn console_events_reach_the_watcher_while_installed_only() {
        let events = StopEvents::install().expect("installed");
        assert!(console_event(CTRL_BREAK_EVENT));
        assert!(console_event(CTRL_C_EVENT));
        assert_eq!(events.next(), Some(Signal::Break));
        assert_eq!(events.next(), Some(Signal::Interrupt));
        events.stop_waiting();
        assert_eq!(events.next(), None);
        drop(events);
        assert!(!console_event(CTRL_C_EVENT), "not ours once removed");
    }
}
