//! Panics in plugin code: caught around every call (an error response, and
//! the plugin keeps serving), and reported on stderr in one line.
//!
//! A host started with `RUST_BACKTRACE=1` passes it on to every plugin; with
//! Rust's default hook each panic would then print ~45 lines and spend
//! milliseconds resolving a backtrace under a process-wide lock, holding up
//! every other call that panics. The SDK's hook prints one line instead,
//! `scriptling-plugin: greet() panicked at src/main.rs:7:5: kaboom`, for
//! panics inside calls; panics elsewhere, and every panic when the plugin
//! opts into backtraces (`Plugin::panic_backtraces`, or
//! `SCRIPTLING_PLUGIN_BACKTRACE=1`), go to the hook that was installed
//! before.

use std::future::Future;
use std::panic::{AssertUnwindSafe, PanicHookInfo, catch_unwind};
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

use crate::call::context;
use crate::support::panic_message;

/// Installs the one-line hook for panics in calls, once per process,
/// unless full reports were asked for.
pub(crate) fn install_hook(full_reports: bool) {
    static INSTALL: Once = Once::new();
    let asked = std::env::var("SCRIPTLING_PLUGIN_BACKTRACE").is_ok_and(|v| !v.is_empty() && v != "0");
    if full_reports || asked {
        return;
    }
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match context::current_label() {
            Some(call) => eprintln!("{}", one_line(call.name(), info)),
            None => previous(info),
        }));
    });
}

fn one_line(call: &str, info: &PanicHookInfo<'_>) -> String {
    let location =
        info.location().map_or_else(String::new, |l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()));
    format!("scriptling-plugin: {call}() panicked{location}: {}", panic_message(info.payload()))
}

/// A future that reports a panic while polling `F` as `Err(message)`.
///
/// The plugin keeps serving: the panicking call gets an error response and
/// every other call is unaffected. (Plugins built with `panic = "abort"`
/// cannot recover, by Rust's design.)
pub(crate) struct CatchUnwind<F>(pub(crate) F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(panic_message(&*payload).to_owned())),
        }
    }
}
