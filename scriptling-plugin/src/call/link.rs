//! [`Link`]: what the calls of one session may reach: its object table,
//! the classes it can instantiate, and (on stdio) the host itself.
//!
//! This is the narrow handle a call's context holds instead of the whole
//! session: a call can send a request to the host, resolve or create an
//! object, and nothing else.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use tokio::runtime::Handle;

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

/// What the calls of one session may reach.
pub(crate) struct Link {
    /// The library name, as put in remote references.
    pub(crate) library: Arc<str>,
    pub(crate) objects: ObjectTable,
    classes: HashMap<TypeId, Arc<ClassInfo>>,
    /// `None` where the transport cannot carry the plugin's own requests (HTTP).
    host: Option<HostChannel>,
    /// The runtime that times the session's bounds (log acknowledgements),
    /// set once it is built (stdio starts reading before that).
    runtime: Arc<OnceLock<Handle>>,
}

impl Link {
    pub(crate) fn new(
        library: Arc<str>,
        objects: ObjectTable,
        classes: impl IntoIterator<Item = Arc<ClassInfo>>,
        host: Option<HostChannel>,
        runtime: Arc<OnceLock<Handle>>,
    ) -> Self {
        let classes = classes.into_iter().map(|c| (c.type_id, c)).collect();
        Self { library, objects, classes, host, runtime }
    }

    /// The session's runtime (waiting the moment it takes to build it).
    pub(crate) fn runtime(&self) -> &Handle {
        self.runtime.wait()
    }

    /// The registered class for the Rust type `type_id`.
    pub(crate) fn class_for(&self, type_id: TypeId) -> Option<&Arc<ClassInfo>> {
        self.classes.get(&type_id)
    }

    /// The channel to the host, or why there is none.
    fn host(&self, method: &str) -> Result<&HostChannel, OutgoingError> {
        self.host.as_ref().ok_or_else(|| {
            let what = if method == "callback.call" { "callbacks" } else { "calling the host" };
            OutgoingError::Unsupported(format!("{what} need the stdio transport"))
        })
    }

    /// Whether the plugin can send requests to the host.
    pub(crate) fn can_reach_host(&self) -> bool {
        self.host.is_some()
    }

    /// Sends one of the plugin's own requests and returns the waiter for
    /// its answer.
    pub(crate) fn request<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Pending, OutgoingError> {
        let host = self.host(method)?;
        let pending = host.outgoing.register()?;
        host.sink.send_frame(encode_request(pending.id(), method, params)?);
        Ok(pending)
    }

    /// Sends a request whose answer is handed to `on_reply` (on the thread
    /// that reads the host's answers, so it must be quick).
    pub(crate) fn request_then<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        on_reply: impl FnOnce(Reply) + Send + 'static,
    ) -> Result<(), OutgoingError> {
        let host = self.host(method)?;
        let id = host.outgoing.register_then(on_reply)?;
        match encode_request(id, method, params) {
            Ok(frame) => {
                host.sink.send_frame(frame);
                Ok(())
            }
            Err(e) => {
                host.outgoing.forget(id);
                Err(e)
            }
        }
    }
}

fn encode_request<P: Serialize + ?Sized>(id: u64, method: &str, params: &P) -> Result<Vec<u8>, OutgoingError> {
    let mut frame = Vec::new();
    rpc::write_request(&mut frame, id, method, params)
        .map_err(|e| OutgoingError::Unsendable(format!("the request cannot be encoded: {e}")))?;
    Ok(frame)
}
