//! [`Setup`]: what distinguishes one session from another besides its
//! streams: the stdio host's (trusted, alone, with a pool of its own) or a
//! network connection's (a token to present, idle and size limits, a pool
//! shared with the other connections).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use crate::call::objects::ObjectTable;
use crate::exports::core::Core;
use crate::runtime::dispatch::Dispatcher;
use crate::runtime::pool::Pool;
use crate::transport::session::input::{Quiet, QuietHook};

/// What a session is given besides its streams.
pub(crate) struct Setup {
    pub(crate) core: Arc<Core>,
    /// Runs async handlers and the pool's timer.
    pub(crate) runtime: Handle,
    pub(crate) pool: Pooling,
    /// The session's objects (each connection has its own).
    pub(crate) objects: ObjectTable,
    /// The token `hello` must present before anything but `hello` and
    /// `ping` is served (`None`: nothing to present).
    pub(crate) gate: Option<Arc<Gate>>,
    /// How long the session may sit with nothing read and nothing in
    /// flight before it ends (`None`: for ever).
    pub(crate) idle: Option<Duration>,
    /// Who is at the other end, for messages on stderr (`None`: the one
    /// host of a stdio plugin, which needs no naming).
    pub(crate) peer: Option<Arc<str>>,
    /// Bytes of answers unwritten above which the session stops reading
    /// requests (the host reads slowly). A host that then reads none of
    /// them for the idle limit is closed.
    pub(crate) queue_limit: usize,
    /// How long a line may take once begun (`None`: for ever).
    pub(crate) line_timeout: Option<Duration>,
    /// The most sync calls that may block waiting for this host to answer
    /// (`None`: no limit but the pool's).
    pub(crate) max_waiting_calls: Option<usize>,
    pub(crate) threads: ThreadNames,
}

/// The names of a session's reading and writing threads (at most 15 bytes
/// each: Linux keeps no more).
#[derive(Clone, Copy)]
pub(crate) struct ThreadNames {
    pub(crate) reader: &'static str,
    pub(crate) writer: &'static str,
}

/// What a stdio session lets queue for a slow host before it stops reading.
const STDIO_QUEUE_LIMIT: usize = 64 << 20;

/// Whose sync pool a session's calls run on.
pub(crate) enum Pooling {
    /// One of its own, closed when the session ends (stdio).
    Own,
    /// One shared with other sessions, which its maker closes (a server's).
    Shared(Pool),
}

impl Setup {
    /// The stdio host's session: no token, no limits on quiet, objects
    /// numbered from 1, a pool of its own.
    pub(crate) fn stdio(core: Arc<Core>, runtime: Handle) -> Setup {
        Setup {
            core,
            runtime,
            pool: Pooling::Own,
            objects: ObjectTable::sequential(),
            gate: None,
            idle: None,
            peer: None,
            queue_limit: STDIO_QUEUE_LIMIT,
            line_timeout: None,
            max_waiting_calls: None,
            threads: ThreadNames { reader: "plugin-stdin", writer: "plugin-stdout" },
        }
    }

    /// The pool the session's calls run on, and whether the session closes it.
    pub(crate) fn take_pool(&mut self) -> (Pool, bool) {
        match std::mem::replace(&mut self.pool, Pooling::Own) {
            Pooling::Shared(pool) => (pool, false),
            Pooling::Own => (Pool::for_options(self.runtime.clone(), &self.core.options), true),
        }
    }
}

/// A token a connection must present in `hello` before it is served.
pub(crate) struct Gate {
    token: Arc<str>,
    /// How long a connection has to present it.
    within: Duration,
    open: AtomicBool,
}

impl Gate {
    pub(crate) fn new(token: Arc<str>, within: Duration) -> Gate {
        Gate { token, within, open: AtomicBool::new(false) }
    }

    /// Whether the token was presented.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Opens the gate if `given` is the token (compared in constant time).
    pub(crate) fn present(&self, given: Option<&str>) -> bool {
        let right = crate::support::constant_time_eq(given.unwrap_or_default().as_bytes(), self.token.as_bytes());
        if right {
            self.open.store(true, Ordering::Release);
        }
        right
    }
}

/// The limits on a quiet input: the gate's deadline for `hello`, and the
/// idle limit, which counts from the later of the last bytes read and the
/// last call finished, and not at all while a call is in flight.
pub(crate) fn quiet_limits(
    gate: Option<Arc<Gate>>,
    idle: Option<Duration>,
    dispatcher: Arc<Dispatcher>,
    started: Instant,
) -> Option<QuietHook> {
    if gate.is_none() && idle.is_none() {
        return None;
    }
    if idle.is_some() {
        dispatcher.time_finishes();
    }
    Some(Box::new(move |last_read: Instant| {
        let now = Instant::now();
        let mut until: Option<Instant> = None;
        if let Some(gate) = gate.as_ref().filter(|g| !g.is_open()) {
            let deadline = started.checked_add(gate.within);
            if deadline.is_some_and(|d| now >= d) {
                return Quiet::End(format!("no hello with the token within {:?}", gate.within));
            }
            until = deadline;
        }
        if let Some(idle) = idle {
            // While a call runs the connection is not idle: look again later.
            let since = match dispatcher.in_flight() {
                0 => dispatcher.last_finished().map_or(last_read, |finished| finished.max(last_read)),
                _ => now,
            };
            let deadline = since.checked_add(idle);
            if deadline.is_some_and(|d| now >= d) {
                return Quiet::End(format!("idle for {idle:?}"));
            }
            until = until.into_iter().chain(deadline).min();
        }
        Quiet::Until(until)
    }))
}
