//! Stop events while a plugin serves (SIGINT and SIGTERM on Unix; Ctrl-C,
//! Ctrl-Break and the console closing on Windows): the first asks for a
//! graceful shutdown, a second exits at once; when serving ends, whatever
//! handled them before has them back alone.
//!
//! How each OS catches them, chains to what handled them before and gives
//! them back is `sys`'s business ([`StopEvents`]); this module is the
//! watcher thread that acts on them.
//!
//! Why not `signal-hook`: its registry chains handlers as ours does, but
//! cannot give a signal back its default disposition (unregistering the
//! last action leaves the signal ignored), and restoring the state is the
//! point.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::sys::{Signal, StopEvents};

/// Stop events caught since [`Signals::install`], waiting to be
/// [watched](Signals::watch).
pub(crate) struct Signals {
    events: StopEvents,
}

/// A watcher thread delivering stop events; dropping it ends the thread
/// and restores the previous handling.
pub(crate) struct SignalWatch {
    events: Arc<StopEvents>,
    thread: Option<JoinHandle<()>>,
}

impl Signals {
    /// Catches stop events from now on (one that comes before
    /// [`watch`](Self::watch) waits for it). `None` if they are caught
    /// already (a second plugin served in the same process) or cannot be.
    pub(crate) fn install() -> Option<Signals> {
        StopEvents::install().map(|events| Signals { events })
    }

    /// Hands the first event to `first` (on a thread of its own); a second
    /// one ends the process at once, with status 128 + its number.
    pub(crate) fn watch(self, first: impl FnOnce(Signal) + Send + 'static) -> std::io::Result<SignalWatch> {
        let events = Arc::new(self.events);
        let watched = Arc::clone(&events);
        let thread = std::thread::Builder::new().name("plugin-signals".into()).spawn(move || {
            let Some(signal) = watched.next() else { return };
            first(signal);
            let Some(again) = watched.next() else { return };
            eprintln!("scriptling-plugin: {again} received again, exiting at once");
            std::process::exit(128 + again.number());
        })?;
        Ok(SignalWatch { events, thread: Some(thread) })
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.events.stop_waiting();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // The last reference: the previous handling is put back here.
    }
}
