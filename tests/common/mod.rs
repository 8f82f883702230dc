//! Helpers shared by the integration tests that run built plugins.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};

use scriptling_plugin::testing::example_path;

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
}

#[allow(dead_code)]
impl Raw {
    /// Spawns `command` with all three streams piped; stderr is collected.
    pub(crate) fn spawn(command: &mut Command) -> Raw {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = Some(std::io::BufReader::new(child.stdout.take().unwrap()));
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = std::sync::Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Raw { child, stdin, stdout, stderr }
    }

    /// Writes one line to the plugin.
    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
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

    /// Waits for the plugin to exit, for up to `limit`.
    pub(crate) fn wait(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
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

/// Runs the child process on CPU 0 only, as a small container would.
#[allow(dead_code)]
pub(crate) fn on_one_cpu(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: sched_setaffinity on the child between fork and exec, with a
    // set of our own.
    unsafe {
        command.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        })
    }
}
