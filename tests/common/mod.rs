//! Helpers shared by the integration tests that run built plugins.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};

use scriptling_plugin::testing::example_path;

#[allow(dead_code)] // used by the TCP tests only
pub(crate) mod tcp;

/// Runs the example `name` on `input` (written from another thread, then
/// stdin closed) and returns its whole stdout and exit code.
#[allow(dead_code)] // not every test crate that has this module uses it
pub(crate) fn run_example(name: &str, input: Vec<u8>) -> (Vec<u8>, Option<i32>) {
    let mut child = spawn_piped(&mut Command::new(example_path(name)));
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    writer.join().unwrap();
    (out, child.wait().unwrap().code())
}

/// Spawns `command` with stdin and stdout piped to the test and stderr
/// discarded.
pub(crate) fn spawn_piped(command: &mut Command) -> Child {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn the plugin")
}

/// A plugin process driven byte by byte, for tests that need what the
/// `testing::Host` hides: its raw stdout, when its streams close, its exit.
#[allow(dead_code)]
pub(crate) struct Raw {
    pub(crate) child: std::process::Child,
    pub(crate) stdin: Option<std::process::ChildStdin>,
    pub(crate) stdout: Option<std::io::BufReader<std::process::ChildStdout>>,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Disconnected once all of stderr has been collected (at its end).
    stderr_done: std::sync::mpsc::Receiver<()>,
}

#[allow(dead_code)]
impl Raw {
    /// Spawns `command` with all three streams piped, in a process group of
    /// its own; stderr is collected.
    pub(crate) fn spawn(command: &mut Command) -> Raw {
        let command = own_group(command);
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = Some(std::io::BufReader::new(child.stdout.take().unwrap()));
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = std::sync::Arc::clone(&stderr);
        let (done, stderr_done) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let _done = done;
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Raw { child, stdin, stdout, stderr, stderr_done }
    }

    /// Writes one line to the plugin.
    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        // One write, as a host writes a whole line.
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the plugin wrote, parsed (`None` at the end).
    pub(crate) fn recv(&mut self) -> Option<serde_json::Value> {
        use std::io::BufRead;
        let mut line = String::new();
        if self.stdout.as_mut()?.read_line(&mut line).ok()? == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    /// Sends the handshake and reads its answer.
    pub(crate) fn handshake(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":"hs","method":"scriptling.handshake","params":{"protocol":"1.0"}}"#);
        assert_eq!(self.recv().expect("the handshake answer")["id"], "hs");
    }

    /// Sends `stop` to the plugin (see [`send_stop`]); `false` where it
    /// cannot be delivered.
    #[must_use]
    pub(crate) fn stop(&self, stop: Stop) -> bool {
        send_stop(self.child.id(), stop)
    }

    /// Closes the plugin's stdin.
    pub(crate) fn close_input(&mut self) {
        drop(self.stdin.take());
    }

    /// What the plugin wrote to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until stderr contains `needle`, for up to `limit`.
    pub(crate) fn wait_for_stderr(&self, needle: &str, limit: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let text = self.stderr();
            if text.contains(needle) {
                return text;
            }
            assert!(std::time::Instant::now() < deadline, "no {needle:?} on stderr within {limit:?}: {text}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Waits for the plugin to exit, for up to `limit`, and then for the
    /// rest of its stderr.
    pub(crate) fn wait(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // What it wrote last may still be in the pipe (under Wine,
                // a while): stderr() after wait() holds all of it.
                let _ = self.stderr_done.recv_timeout(std::time::Duration::from_secs(5));
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the plugin did not exit within {limit:?}: {}",
                self.stderr()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `function.call` request line.
#[allow(dead_code)]
pub(crate) fn call_line(id: u64, name: &str, args: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"function.call","params":{{"name":"{name}","args":[{args}]}}}}"#)
}

/// Runs the child process on CPU 0 only, as a small container would
/// (Linux; elsewhere, with no affinity call the tests can make before the
/// child starts, it runs as it is).
#[allow(dead_code)]
pub(crate) fn on_one_cpu(command: &mut Command) -> &mut Command {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: sched_setaffinity on the child between fork and exec, with
        // a set of our own.
        unsafe {
            command.pre_exec(|| {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            });
        }
    }
    command
}

/// A stop event an operator sends a plugin.
#[allow(dead_code)]
#[derive(Clone, Copy)]
pub(crate) enum Stop {
    /// SIGINT (Ctrl-C at a terminal).
    Interrupt,
    /// SIGTERM (a supervisor stopping it).
    Terminate,
}

/// What the plugin calls `stop` on stderr (`"SIGTERM received"`): on
/// Windows both arrive as Ctrl-Break.
#[allow(dead_code)]
pub(crate) fn stop_name(stop: Stop) -> &'static str {
    match stop {
        _ if cfg!(windows) => "Ctrl-Break",
        Stop::Interrupt => "SIGINT",
        Stop::Terminate => "SIGTERM",
    }
}

/// Makes `command`'s child a process group of its own, so that a stop
/// event can be sent to it alone (Windows: Ctrl-Break goes to a group;
/// Unix needs nothing).
#[allow(dead_code)]
pub(crate) fn own_group(command: &mut Command) -> &mut Command {
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        command.creation_flags(windows_sys::Win32::System::Threading::CREATE_NEW_PROCESS_GROUP);
    }
    command
}

/// Sends `stop` to process `pid`: the signal on Unix; on Windows, Ctrl-Break
/// to its process group (spawned with [`own_group`]; Windows sends Ctrl-C to
/// a whole console only). Returns `false` where it cannot be delivered: on
/// Windows without a console, as under Wine run by CI. A test that gets
/// `false` says so and ends (the console handler itself is tested in the
/// runtime's `sys` tests).
#[allow(dead_code)]
#[must_use]
pub(crate) fn send_stop(pid: u32, stop: Stop) -> bool {
    #[cfg(unix)]
    {
        let signal = match stop {
            Stop::Interrupt => libc::SIGINT,
            Stop::Terminate => libc::SIGTERM,
        };
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid as libc::pid_t, signal) == 0 }
    }
    #[cfg(windows)]
    {
        let _ = stop;
        use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};
        // SAFETY: asks the console to send Ctrl-Break to that group.
        let sent = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pid) } != 0;
        if !sent {
            eprintln!("skipped: no console to send Ctrl-Break through ({})", std::io::Error::last_os_error());
        }
        sent
    }
}

/// `stdout` as a file, which can be cloned (a second handle on the same
/// pipe, as a process forked by the host would hold).
#[allow(dead_code)]
pub(crate) fn into_file(stdout: std::process::ChildStdout) -> std::fs::File {
    #[cfg(unix)]
    return std::fs::File::from(std::os::fd::OwnedFd::from(stdout));
    #[cfg(windows)]
    return std::fs::File::from(std::os::windows::io::OwnedHandle::from(stdout));
}

/// CPU time of every thread of process `pid` so far, to the nanosecond
/// (Linux: each thread's `schedstat`).
#[cfg(target_os = "linux")]
#[allow(dead_code)]
pub(crate) fn cpu_time(pid: u32) -> std::time::Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let nanos = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    std::time::Duration::from_nanos(nanos)
}
