//! Destroying what is left when a session (or an HTTP client) ends, within
//! a deadline: a `#[del]` hook or `Drop` that blocks must not hold up the
//! answer to `plugin.shutdown` or the exit.

use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use crate::call::link::Link;
use crate::call::objects::Entry;
use crate::runtime::invoke;
use crate::support::lock;

/// Destroys `entries` on a thread of their own, their hooks inside a call
/// scope named `label` (so their log records reach the host), and waits
/// until they are done or `deadline` passes (`None`: no deadline). `Err`
/// names what was still running then; it is left to finish on its own.
pub(crate) fn release_within(
    link: &Arc<Link>,
    entries: Vec<Entry>,
    label: &str,
    deadline: Option<Instant>,
) -> Result<(), String> {
    let (done_tx, done) = mpsc::channel();
    let now = Arc::new(Mutex::new(None));
    let (link, label, releasing) = (Arc::clone(link), label.to_owned(), Arc::clone(&now));
    let spawned = std::thread::Builder::new().name("plugin-release".into()).spawn(move || {
        invoke::release(&link, entries, &label, None, None, &releasing, move || {
            let _ = done_tx.send(());
        });
    });
    if let Err(e) = spawned {
        return Err(format!("cannot start a thread to destroy the objects: {e}"));
    }
    let finished = match deadline {
        Some(deadline) => done.recv_timeout(deadline.saturating_duration_since(Instant::now())).is_ok(),
        None => done.recv().is_ok(),
    };
    if finished {
        return Ok(());
    }
    Err(match lock(&now).as_ref() {
        Some(object) => format!("the #[del] hook or Drop of {object} did not finish within the shutdown grace"),
        None => "the host did not acknowledge the log records of the objects' hooks within the shutdown grace".into(),
    })
}
