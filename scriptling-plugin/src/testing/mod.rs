//! A test host: drive a plugin the way Scriptling does, from ordinary Rust
//! tests (feature `testing`).
//!
//! [`Host::in_process`] serves a [`Plugin`](crate::Plugin) inside the test process over a
//! pair of OS pipes, through exactly the event loop a real plugin uses.
//! [`Host::spawn`] starts a plugin executable and speaks the host side over
//! its stdin and stdout, capturing its stderr. Both answer the plugin's
//! `callback.call` requests with a handler you provide and record its
//! `host.log` records.
//!
//! Like the real Scriptling host, the test host serves the plugin's own
//! requests concurrently, each on its own thread and after a small random
//! delay (see [`Host::set_jitter`]), so they may be handled in any order and
//! after a response that followed them on the wire. A plugin that is right
//! here is right under the real host; one that only works when its
//! requests are handled in order, instantly, fails here too.
//!
//! ```
//! use scriptling_plugin::testing::Host;
//! use scriptling_plugin::{plugin_fn, Plugin, Value};
//!
//! /// Adds two numbers.
//! #[plugin_fn]
//! fn add(a: i64, #[arg(default = 1)] b: i64) -> i64 {
//!     a + b
//! }
//!
//! let host = Host::in_process(Plugin::new("math", "1.0.0", "").function::<add>()).unwrap();
//! let handshake = host.handshake().unwrap();
//! assert_eq!(handshake["schema"]["functions"][0]["description"], "add(a, b=1)\n\nAdds two numbers.");
//! assert_eq!(host.call("add", [Value::Int(2)]).unwrap(), Value::Int(3));
//! let err = host.call("add", [Value::from("x")]).unwrap_err();
//! assert_eq!(err.message(), "add(): argument 'a' must be an int, got string");
//! ```

mod host;
mod http;
mod wire;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use host::Host;
pub use http::{HttpClient, HttpResponse};

use crate::value::Value;

/// How long a request waits for its response before failing with
/// [`HostError::Timeout`] (change it with [`Host::set_timeout`](crate::testing::Host::set_timeout)).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request made through a [`Host`] failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// The plugin answered with a JSON-RPC error.
    Rpc {
        /// The error code.
        code: i64,
        /// The message (what a Scriptling script would see).
        message: String,
    },
    /// No response arrived in time.
    Timeout,
    /// The plugin's output ended before the response arrived.
    Closed,
    /// The response did not have the expected shape.
    Decode(String),
}

impl HostError {
    /// The error message, for any kind of failure.
    pub fn message(&self) -> &str {
        match self {
            HostError::Rpc { message, .. } | HostError::Decode(message) => message,
            HostError::Timeout => "timed out waiting for the plugin",
            HostError::Closed => "the plugin closed its output",
        }
    }

    /// The JSON-RPC error code, if the plugin answered with an error.
    pub fn code(&self) -> Option<i64> {
        match self {
            HostError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code() {
            Some(code) => write!(f, "{} ({code})", self.message()),
            None => f.write_str(self.message()),
        }
    }
}

impl std::error::Error for HostError {}

/// A `host.log` record the plugin sent.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRecord {
    /// `trace`, `debug`, `info`, `warn`, `error` (or anything the plugin sent).
    pub level: String,
    /// The message.
    pub message: String,
    /// The flat key/value list of fields.
    pub args: Vec<Value>,
}

/// The default for [`Host::set_jitter`].
pub const DEFAULT_JITTER: Duration = Duration::from_micros(300);

/// The path of an example binary of the package under test, found next to
/// the running test executable (`target/<profile>/examples/<name>`).
pub fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir: &Path = exe.parent().expect("a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("a profile directory");
    }
    dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}
