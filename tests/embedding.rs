//! A plugin served with `serve_stdio` inside a program that goes on after
//! it returns: the program's own signal handling works throughout and is
//! the only one left afterwards, and stdin is the program's again.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

mod common;

use common::Raw;

const WAIT: Duration = Duration::from_secs(15);

fn embedded() -> Command {
    Command::new(env!("CARGO_BIN_EXE_embedded-plugin"))
}

fn interrupt(raw: &Raw) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(raw.child.id() as i32, libc::SIGINT) };
}

#[test]
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
fn after_serving_a_signal_does_what_it_did_before() {
    use std::os::unix::process::ExitStatusExt;
    let mut raw = Raw::spawn(&mut embedded());
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"plugin.shutdown"}"#);
    assert_eq!(raw.recv().unwrap()["id"], 2);
    raw.wait_for_stderr("app: served Ok(())", WAIT);
    // The program installed no handler: SIGINT ends it, as by default.
    interrupt(&raw);
    let status = raw.wait(WAIT);
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {}", raw.stderr());
}
