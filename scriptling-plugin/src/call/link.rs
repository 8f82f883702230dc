//! [`Link`]: what the calls of one session may reach: its object table,
//! the classes it can instantiate, the runtime, and (on stdio) the host.
//!
//! This is the narrow handle a call's context holds instead of the whole
//! session: a call can send a request to the host, resolve or create an
//! object, and nothing else.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::runtime::Handle;

use crate::call::lent::{self, Held};
use crate::call::logstream::LogHealth;
use crate::call::objects::{ClassInfo, ObjectTable};
use crate::call::outgoing::{Outgoing, OutgoingError, Pending, Reply};
use crate::rpc;

/// Where the plugin's own request frames go (the stdio session's writer).
pub(crate) trait FrameSink: Send + Sync {
    /// Queues one frame (without its newline) for the host.
    fn send_frame(&self, frame: Vec<u8>);
}

/// The way back to the host: the pending map for the plugin's own
/// requests, and the sink their frames go to.
pub(crate) struct HostChannel {
    pub(crate) outgoing: Arc<Outgoing>,
    pub(crate) sink: Arc<dyn FrameSink>,
}

/// How long the plugin waits on the host.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waits {
    /// For the answer to a `callback.call`.
    pub(crate) callback: Duration,
    /// For a call's log records to be acknowledged before its answer.
    pub(crate) log_ack: Duration,
    /// For an object held by a call that waits on the host.
    pub(crate) busy_object: Duration,
}

impl Default for Waits {
    /// `Plugin`'s defaults (its setters document them).
    fn default() -> Self {
        Waits {
            callback: Duration::from_secs(60),
            log_ack: Duration::from_secs(5),
            busy_object: Duration::from_secs(5),
        }
    }
}

/// What the calls of one session may reach.
pub(crate) struct Link {
    /// The library name, as put in remote references.
    pub(crate) library: Arc<str>,
    pub(crate) objects: ObjectTable,
    classes: HashMap<TypeId, Arc<ClassInfo>>,
    /// `None` where the transport cannot carry the plugin's own requests (HTTP).
    host: Option<HostChannel>,
    /// Runs async handlers and times the bounds on log acknowledgements
    /// (`None` only in unit tests).
    runtime: Option<Handle>,
    pub(crate) waits: Waits,
    /// Whether the host acknowledges log records (see `call/logstream.rs`).
    pub(crate) log_health: LogHealth,
    /// The peer speaks the Scriptling protocol: the stdio host from the
    /// start, a network client once it sent `scriptling.handshake`. Others
    /// (a Supex-style client calling tools) are never sent a request they
    /// cannot answer: their calls' log records go to stderr.
    speaks_scriptling: AtomicBool,
    /// Who is at the other end, for those stderr lines (`None`: the host).
    peer: Option<Arc<str>>,
}

impl Link {
    pub(crate) fn new(
        library: Arc<str>,
        objects: ObjectTable,
        classes: impl IntoIterator<Item = Arc<ClassInfo>>,
        host: Option<HostChannel>,
        runtime: Option<Handle>,
        waits: Waits,
    ) -> Self {
        let classes = classes.into_iter().map(|c| (c.type_id, c)).collect();
        Self {
            library,
            objects,
            classes,
            host,
            runtime,
            waits,
            log_health: LogHealth::default(),
            speaks_scriptling: AtomicBool::new(true),
            peer: None,
        }
    }

    /// The link of a network connection to `peer`, which speaks the
    /// Scriptling protocol only once it sends `scriptling.handshake`.
    pub(crate) fn for_connection(mut self, peer: Arc<str>) -> Self {
        self.speaks_scriptling = AtomicBool::new(false);
        self.peer = Some(peer);
        self
    }

    /// The peer sent `scriptling.handshake`: it speaks the protocol.
    pub(crate) fn heard_handshake(&self) {
        self.speaks_scriptling.store(true, Ordering::Release);
    }

    /// Whether log records go to the host as `host.log` (else to stderr).
    pub(crate) fn logs_to_host(&self) -> bool {
        self.host.is_some() && self.speaks_scriptling.load(Ordering::Acquire)
    }

    /// Who is at the other end, for messages on stderr (`None`: the host).
    pub(crate) fn peer(&self) -> Option<&str> {
        self.peer.as_deref()
    }

    /// A link to nothing, for unit tests: no host, no classes, the current
    /// runtime if there is one.
    #[cfg(all(test, not(scriptling_loom)))]
    pub(crate) fn detached() -> Self {
        Self::new("lib".into(), ObjectTable::sequential(), [], None, Handle::try_current().ok(), Waits::default())
    }

    /// A link to `host` for unit tests of what travels to it.
    #[cfg(all(test, not(scriptling_loom)))]
    pub(crate) fn to_host(host: HostChannel, runtime: Handle, waits: Waits) -> Self {
        Self::new("lib".into(), ObjectTable::sequential(), [], Some(host), Some(runtime), waits)
    }

    /// The session's runtime.
    pub(crate) fn runtime(&self) -> Option<&Handle> {
        self.runtime.as_ref()
    }

    /// The registered class for the Rust type `type_id`.
    pub(crate) fn class_for(&self, type_id: TypeId) -> Option<&Arc<ClassInfo>> {
        self.classes.get(&type_id)
    }

    /// The channel to the host, or why there is none.
    fn host(&self, method: &str) -> Result<&HostChannel, OutgoingError> {
        self.host.as_ref().ok_or_else(|| {
            let what = if method == "callback.call" { "callbacks" } else { "calling the host" };
            OutgoingError::Unsupported(format!("{what} need a stdio or TCP connection; HTTP cannot reach the host"))
        })
    }

    /// Sends one of the plugin's own requests for a sync handler to block
    /// on; and, when this thread was lent the reading of the same session
    /// (it runs a call it read), takes it back, to read the answer itself
    /// (`call/lent.rs`). The request is then registered without wanting
    /// the reading (that would wake another thread to read it) and sent
    /// while the reading is still down, so that a send the host's full pipe
    /// blocks holds up the reading no longer than the stall time; if the
    /// reading was taken over meanwhile, its new holder reads the answer.
    pub(crate) fn request_blocking<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(Pending, Option<Box<dyn Held>>), OutgoingError> {
        let host = self.host(method)?;
        let lent = lent::lent_for(&host.outgoing);
        // Dropped (and so unregistered) if the request cannot be encoded.
        let pending = host.outgoing.register_blocking(lent.is_none())?;
        host.sink.send_frame(encode_request(pending.id(), method, params)?);
        Ok((pending, lent.and_then(|lent| lent.take_back())))
    }

    /// Sends one of the plugin's own requests for an async handler to await.
    pub(crate) fn request_async<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<Pending, OutgoingError> {
        let host = self.host(method)?;
        let pending = host.outgoing.register_async()?;
        host.sink.send_frame(encode_request(pending.id(), method, params)?);
        Ok(pending)
    }

    /// Allocates an id for a request whose answer is handed to `on_reply`
    /// (with the id, on the thread that reads the host's answers, so it
    /// must be quick); send it with [`send_request`](Self::send_request).
    pub(crate) fn register_then(
        &self,
        on_reply: impl FnOnce(u64, Reply) + Send + 'static,
    ) -> Result<u64, OutgoingError> {
        self.host("host.log")?.outgoing.register_then(on_reply)
    }

    /// Sends request `id` (see [`register_then`](Self::register_then)).
    pub(crate) fn send_request<P: Serialize + ?Sized>(
        &self,
        id: u64,
        method: &str,
        params: &P,
    ) -> Result<(), OutgoingError> {
        let host = self.host(method)?;
        host.sink.send_frame(encode_request(id, method, params)?);
        Ok(())
    }

    /// Sends a request nobody waits on (its answer is dropped as late).
    pub(crate) fn request_untracked<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(), OutgoingError> {
        let host = self.host(method)?;
        host.sink.send_frame(encode_request(host.outgoing.untracked()?, method, params)?);
        Ok(())
    }

    /// Stops waiting for the answer to request `id` (it may still come, late).
    pub(crate) fn forget(&self, id: u64) {
        if let Some(host) = &self.host {
            host.outgoing.forget(id);
        }
    }

    /// Requests to the host still waiting for an answer.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn pending_requests(&self) -> usize {
        self.host.as_ref().map_or(0, |h| h.outgoing.pending_count())
    }
}

fn encode_request<P: Serialize + ?Sized>(id: u64, method: &str, params: &P) -> Result<Vec<u8>, OutgoingError> {
    // Room for a callback's or a log record's usual request: grown from
    // nothing, the frame was reallocated five times over.
    let mut frame = Vec::with_capacity(256);
    rpc::write_request(&mut frame, id, method, params)
        .map_err(|e| OutgoingError::Unsendable(format!("the request cannot be encoded: {e}")))?;
    Ok(frame)
}
