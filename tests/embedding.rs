//! A plugin served with `serve_stdio` inside a program that goes on after
//! it returns: stdin and stdout are the program's again, and (Unix) the
//! program's own signal handling works throughout and is the only one left
//! afterwards. (On Windows the console's events are the plugin's alone
//! while it serves: there is nothing of the application's to keep working.)

use std::process::Command;
use std::time::Duration;

use serde_json::json;

mod common;

use common::Raw;

const WAIT: Duration = Duration::from_secs(15);

fn embedded() -> Command {
    Command::new(env!("CARGO_BIN_EXE_embedded-plugin"))
}

#[cfg(unix)]
fn interrupt(raw: &Raw) {
    assert!(raw.stop(common::Stop::Interrupt));
}

/// The reader of stdin is stopped when serving ends (on Windows its read is
/// cancelled), so the next line is the application's; stdout, where the
/// protocol went, takes the application's output again.
#[test]
fn stdin_and_stdout_are_the_applications_again_after_serving() {
    let mut raw = Raw::spawn(&mut embedded());
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"function.call","params":{"name":"echo","args":[{"type":"string","value":"hi"}]}}"#);
    assert_eq!(raw.recv().unwrap()["result"], json!({"type": "string", "value": "hi"}));
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"plugin.shutdown"}"#);
    assert_eq!(raw.recv().unwrap()["id"], 3);
    raw.wait_for_stderr("app: served Ok(())", WAIT);
    assert_eq!(raw.recv().unwrap()["app"], "after serving", "{}", raw.stderr());
    raw.send("a line for the application");
    raw.wait_for_stderr("app: read a line for the application", WAIT);
    assert!(!raw.stderr().contains("could not be stopped"), "{}", raw.stderr());
    raw.close_input();
    raw.wait_for_stderr("app: stdin ended", WAIT);
}

/// A runtime built without timers serves too: the sync pool's stall rule
/// and the bound on a log record's acknowledgement keep their deadlines on
/// the SDK's own timer thread.
#[test]
fn serve_stdio_serves_on_a_runtime_built_without_timers() {
    let mut raw = Raw::spawn(embedded().env("EMBEDDED_NO_TIMERS", "1"));
    raw.handshake();
    // Two naps more than cores: the stall rule brings in threads for them.
    let calls = std::thread::available_parallelism().map_or(2, usize::from) + 2;
    let started = std::time::Instant::now();
    for id in 0..calls {
        raw.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"function.call","params":{{"name":"nap","args":[{{"type":"int","value":500}}]}}}}"#,
            10 + id
        ));
    }
    for _ in 0..calls {
        assert_eq!(raw.recv().unwrap()["result"]["value"], 500, "{}", raw.stderr());
    }
    // Without the stall rule the last two would start only after 500 ms.
    assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
    // A call that logs: its answer waits for the record's acknowledgement.
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"function.call","params":{"name":"noted","args":[{"type":"string","value":"hi"}]}}"#);
    let log = raw.recv().unwrap();
    assert_eq!(log["method"], "host.log", "{log}");
    raw.send(&format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"type":"null"}}}}"#, log["id"]));
    assert_eq!(raw.recv().unwrap()["result"]["value"], "hi");
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"plugin.shutdown"}"#);
    assert_eq!(raw.recv().unwrap()["id"], 3);
    raw.wait_for_stderr("app: served Ok(())", WAIT);
    assert!(!raw.stderr().contains("panicked"), "{}", raw.stderr());
}

#[test]
#[cfg(unix)] // the application's signal handlers: Windows gives the plugin the console's events alone
fn the_applications_own_signal_handler_keeps_working_and_stdin_is_its_own_afterwards() {
    let mut raw = Raw::spawn(embedded().env("EMBEDDED_OWN_HANDLER", "1"));
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"function.call","params":{"name":"echo","args":[{"type":"string","value":"hi"}]}}"#);
    assert_eq!(raw.recv().unwrap()["result"], json!({"type": "string", "value": "hi"}));
    // The first SIGINT reaches the application and ends the session.
    interrupt(&raw);
    raw.wait_for_stderr("app: SIGINT", WAIT);
    raw.wait_for_stderr("app: served Ok(())", WAIT);
    // No thread of the SDK reads stdin any more: the application does.
    raw.send("a line for the application");
    raw.wait_for_stderr("app: read a line for the application", WAIT);
    // And its handler alone takes the next SIGINT.
    interrupt(&raw);
    let status = raw.wait(WAIT);
    assert_eq!(status.code(), Some(0), "{}", raw.stderr());
    assert_eq!(raw.stderr().matches("app: SIGINT").count(), 2, "{}", raw.stderr());
}

#[test]
#[cfg(unix)] // the application's signal handlers: Windows gives the plugin the console's events alone
fn after_serving_a_signal_does_what_it_did_before() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mut command = embedded();
    // "Before" is SIGINT's default, whatever this test inherited: a
    // background job of a non-interactive shell starts with it ignored,
    // and serving rightly gives that back.
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut raw = Raw::spawn(&mut command);
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"plugin.shutdown"}"#);
    assert_eq!(raw.recv().unwrap()["id"], 2);
    raw.wait_for_stderr("app: served Ok(())", WAIT);
    // Stdout is the program's again, where it was, and as it was.
    assert_eq!(raw.recv().unwrap()["app"], "after serving", "{}", raw.stderr());
    assert!(raw.stderr().contains("app: stdout non-blocking: false"), "{}", raw.stderr());
    // The program installed no handler: SIGINT ends it, as by default.
    interrupt(&raw);
    let status = raw.wait(WAIT);
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {}", raw.stderr());
}

/// A handler registered over the SDK's while serving (it chains to the
/// SDK's, which then cannot be taken out): the SDK's stays inert, a second
/// serve in the same process leaves signals to the application, and a
/// SIGINT reaches the application once instead of looping between the two
/// handlers until the stack overflows.
#[test]
#[cfg(unix)] // the application's signal handlers: Windows gives the plugin the console's events alone
fn a_handler_installed_over_the_sdks_keeps_working_through_a_second_serve() {
    let mut raw = Raw::spawn(embedded().env("EMBEDDED_SERVE_TWICE", "1"));
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"function.call","params":{"name":"listen","args":[]}}"#);
    assert_eq!(raw.recv().unwrap()["id"], 2, "{}", raw.stderr());
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"plugin.shutdown"}"#);
    assert_eq!(raw.recv().unwrap()["id"], 3);
    raw.wait_for_stderr("app: served Ok(())", WAIT);
    // Serving again, in the same process.
    raw.handshake();
    interrupt(&raw);
    raw.wait_for_stderr("app: SIGINT", WAIT);
    // The second session still serves: the signal was the application's.
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"function.call","params":{"name":"echo","args":[{"type":"string","value":"still"}]}}"#);
    assert_eq!(raw.recv().unwrap()["result"], json!({"type": "string", "value": "still"}), "{}", raw.stderr());
    interrupt(&raw);
    let status = raw.wait(WAIT);
    assert_eq!(status.code(), Some(0), "{status:?}: {}", raw.stderr());
    assert_eq!(raw.stderr().matches("app: SIGINT").count(), 2, "{}", raw.stderr());
}

/// A handler still running when serving ends is left behind, and still
/// holds parts of the session: stdout is given back as it was regardless
/// (on Unix: blocking, as it was found).
#[test]
fn stdout_is_given_back_blocking_even_with_a_handler_left_behind() {
    let mut raw = Raw::spawn(&mut embedded());
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"function.call","params":{"name":"hang","args":[]}}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"plugin.shutdown"}"#);
    raw.wait_for_stderr("app: served", WAIT);
    #[cfg(unix)]
    {
        raw.wait_for_stderr("app: stdout non-blocking:", WAIT);
        assert!(raw.stderr().contains("app: stdout non-blocking: false"), "{}", raw.stderr());
    }
    let mut lines = Vec::new();
    while let Some(line) = raw.recv() {
        if line.get("app").is_some() {
            break;
        }
        lines.push(line);
    }
    assert!(lines.iter().any(|l| l["id"] == 3), "the shutdown was answered: {lines:?}");
    raw.close_input();
}
