//! The tokio runtime the SDK starts for async handlers where it owns the
//! process (`Plugin::run`, the network servers) and in the in-process test
//! host: [`build`] makes it, [`AsyncRuntime`] runs it in the background.
//!
//! By default it is tokio's current-thread scheduler: every async handler
//! runs on one thread (`plugin-tokio`). Async handlers are for waiting;
//! work that computes belongs in sync handlers, which the SDK's pool runs on
//! up to one thread per core whatever the runtime. Tokio's multi-thread
//! scheduler, which `Plugin::async_worker_threads` chooses (with the
//! `multi-thread` feature), would cost every plugin `libm`, which its
//! scheduler calls for `pow`: ~0.1 ms of start and 0.3-0.5 MiB resident
//! (ARCHITECTURE.md, "Speed tricks"). HTTP serving, a server's workload
//! whose connections are tasks, runs on it always (the `http` feature
//! turns `multi-thread` on): one worker per core unless
//! `async_worker_threads` says otherwise.

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::exports::core::Options;

/// The runtime `options` ask for, with its I/O and time drivers (for the
/// user's handlers: the SDK's own deadlines keep to its timer thread). A
/// current-thread runtime runs its tasks only inside `block_on`: run it
/// with [`AsyncRuntime::start`] unless this thread drives it.
pub(crate) fn build(options: &Options) -> std::io::Result<Runtime> {
    #[cfg(feature = "multi-thread")]
    if let Some(threads) = options.async_workers {
        return multi_thread(threads);
    }
    let _ = options;
    // (The name is its blocking pool's threads'.)
    tokio::runtime::Builder::new_current_thread().enable_all().thread_name("plugin-tokio").build()
}

/// Tokio's multi-thread scheduler with `threads` workers (0: one per core),
/// with its I/O and time drivers.
#[cfg(feature = "multi-thread")]
pub(crate) fn multi_thread(threads: usize) -> std::io::Result<Runtime> {
    let threads = if threads == 0 { crate::runtime::dispatch::parallelism() } else { threads };
    tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().thread_name("plugin-tokio").build()
}

/// A runtime running in the background; dropping it ends it without
/// waiting for its tasks (a handler still running past the shutdown grace
/// is abandoned), which are dropped.
pub(crate) struct AsyncRuntime {
    handle: Handle,
    end: End,
}

enum End {
    /// The thread driving a current-thread runtime leaves its `block_on`
    /// when this is dropped.
    Driven { _stop: tokio::sync::oneshot::Sender<()> },
    /// A multi-thread runtime's workers drive it (`Some` until dropped).
    Workers(Option<Runtime>),
}

impl AsyncRuntime {
    /// Starts the runtime `options` ask for: tasks spawned on its handle
    /// run from now on.
    pub(crate) fn start(options: &Options) -> std::io::Result<Self> {
        let runtime = build(options)?;
        let handle = runtime.handle().clone();
        if handle.runtime_flavor() != RuntimeFlavor::CurrentThread {
            return Ok(Self { handle, end: End::Workers(Some(runtime)) });
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new().name("plugin-tokio".into()).spawn(move || {
            let _ = runtime.block_on(stopped);
            runtime.shutdown_background();
        })?;
        Ok(Self { handle, end: End::Driven { _stop: stop } })
    }

    /// Where tasks are spawned.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for AsyncRuntime {
    fn drop(&mut self) {
        if let End::Workers(runtime) = &mut self.end {
            if let Some(runtime) = runtime.take() {
                runtime.shutdown_background();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Sends when dropped.
    struct Dropped(mpsc::Sender<()>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    fn runs_tasks_and_drops_them_when_dropped(options: &Options) {
        let runtime = AsyncRuntime::start(options).unwrap();
        // A task spawned from another thread (as the reading thread spawns
        // async handlers) runs, on the runtime's thread, and its timers fire.
        let handle = runtime.handle().clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            handle.spawn(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                tx.send(std::thread::current().name().map(str::to_owned)).unwrap();
            });
        });
        let ran_on = rx.recv_timeout(Duration::from_secs(5)).expect("the task ran");
        assert_eq!(ran_on.as_deref(), Some("plugin-tokio"));
        // Dropped, it ends: a task still waiting is dropped, not left running.
        let (tx, rx) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        runtime.handle().spawn(async move {
            let _guard = Dropped(tx);
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
        started.recv_timeout(Duration::from_secs(5)).expect("the task started");
        drop(runtime);
        rx.recv_timeout(Duration::from_secs(5)).expect("the waiting task was dropped with the runtime");
    }

    #[test]
    fn by_default_one_thread_runs_every_task_and_ends_with_the_runtime() {
        let options = Options::default();
        assert_eq!(build(&options).unwrap().handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
        runs_tasks_and_drops_them_when_dropped(&options);
    }

    #[cfg(feature = "multi-thread")]
    #[test]
    fn async_worker_threads_gives_the_multi_thread_scheduler() {
        let options = Options { async_workers: Some(2), ..Options::default() };
        let runtime = build(&options).unwrap();
        assert_eq!(runtime.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(runtime.metrics().num_workers(), 2);
        let per_core = build(&Options { async_workers: Some(0), ..Options::default() }).unwrap();
        assert_eq!(per_core.metrics().num_workers(), crate::runtime::dispatch::parallelism());
        runs_tasks_and_drops_them_when_dropped(&options);
    }
}
