//! [`Core`]: a validated plugin, immutable while it is served, and the
//! [`Options`] that tune its serving.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::call::link::Waits;
use crate::exports::class::ClassEntry;
use crate::exports::function::Function;
use crate::exports::schema;
use crate::support::NameMap;

/// Tunables of serving; each has a `Plugin` setter documenting it.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) max_frame_bytes: usize,
    pub(crate) max_batch_len: usize,
    pub(crate) shutdown_grace: Duration,
    /// `log_ack_timeout`, `callback_timeout`, `busy_object_timeout`.
    pub(crate) waits: Waits,
    pub(crate) max_sync_threads: usize,
    /// `Plugin::async_worker_threads`: `None` runs async handlers on one
    /// thread (tokio's current-thread scheduler), `Some(0)` on one worker
    /// per core.
    #[cfg(feature = "multi-thread")]
    pub(crate) async_workers: Option<usize>,
    pub(crate) input_spin: Duration,
    pub(crate) quick_calls: Duration,
    pub(crate) panic_backtraces: bool,
    /// `run` leaves unknown arguments to the plugin.
    pub(crate) own_args: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_frame_bytes: 64 * 1024 * 1024,
            max_batch_len: 100_000,
            shutdown_grace: Duration::from_secs(5),
            waits: Waits::default(),
            max_sync_threads: 512,
            #[cfg(feature = "multi-thread")]
            async_workers: None,
            input_spin: Duration::from_micros(50),
            quick_calls: Duration::from_micros(50),
            panic_backtraces: false,
            own_args: false,
        }
    }
}

/// A validated plugin, shared by every session that serves it.
pub(crate) struct Core {
    /// The library name, as put in remote references.
    pub(crate) library: Arc<str>,
    pub(crate) functions: NameMap<Function>,
    /// Sorted names for "unknown function" errors.
    pub(crate) function_list: String,
    pub(crate) classes: NameMap<Arc<ClassEntry>>,
    /// The same classes, at their `ClassInfo::index`.
    pub(crate) class_order: Vec<Arc<ClassEntry>>,
    /// Sorted names for "unknown class" errors.
    pub(crate) class_list: String,
    /// The serialised handshake result.
    pub(crate) handshake: Vec<u8>,
    /// The library version, for the bridge's answers.
    pub(crate) version: String,
    /// The exported functions' names, in registration order (that of
    /// `tools/list`).
    pub(crate) exported: Vec<String>,
    /// The Supex bridge's fixed answers, made when first asked for: a
    /// plugin a Scriptling host starts never is, and making them cost its
    /// start-up about a quarter of `Plugin::build`'s work.
    pub(crate) bridge: OnceLock<BridgeAnswers>,
    pub(crate) options: Options,
}

/// The serialised answers to the Supex bridge's fixed requests.
pub(crate) struct BridgeAnswers {
    /// To `hello`.
    pub(crate) hello: Vec<u8>,
    /// To `tools/list`.
    pub(crate) tools: Vec<u8>,
    /// To the built-in `ping` tool.
    pub(crate) ping_tool: Vec<u8>,
}

impl Core {
    /// The bridge's fixed answers (made on first use).
    pub(crate) fn bridge(&self) -> &BridgeAnswers {
        self.bridge.get_or_init(|| {
            let exported: Vec<&Function> = self.exported.iter().filter_map(|name| self.functions.get(name)).collect();
            BridgeAnswers {
                hello: schema::hello(&self.library, &self.version),
                tools: schema::tools(&exported),
                ping_tool: schema::ping_tool(&self.library, &self.version),
            }
        })
    }
}
