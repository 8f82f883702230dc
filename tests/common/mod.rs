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
