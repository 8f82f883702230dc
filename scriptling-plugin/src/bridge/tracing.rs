//! `tracing` events to the host's logger (feature `tracing`).
//!
//! Install [`HostLayer`] (or call [`init`]) once in `main`, and every
//! `tracing` event (in plugin code or any dependency) becomes a `host.log`
//! record with its fields as key/value pairs, sent like a [`Logger`] record:
//! through the host while the SDK is serving a call on that thread, to
//! stderr otherwise. Span fields are not included.
//!
//! ```no_run
//! use scriptling_plugin::{plugin_fn, Plugin};
//!
//! #[plugin_fn]
//! fn work(name: String) -> String {
//!     tracing::info!(%name, attempt = 1, "plugin work started");
//!     format!("logged:{name}")
//! }
//!
//! fn main() -> Result<(), scriptling_plugin::ServeError> {
//!     scriptling_plugin::tracing::init()?;
//!     Plugin::new("logger", "1.0.0", "").function::<work>().run()
//! }
//! ```

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

use crate::call::logger::{Level, Logger};
use crate::value::Value;

/// A `tracing-subscriber` layer that sends events to the host's logger.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostLayer;

impl<S: Subscriber> Layer<S> for HostLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = match *event.metadata().level() {
            tracing::Level::TRACE => Level::Trace,
            tracing::Level::DEBUG => Level::Debug,
            tracing::Level::INFO => Level::Info,
            tracing::Level::WARN => Level::Warn,
            tracing::Level::ERROR => Level::Error,
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        Logger::current().log_fields(level, &fields.message, &fields.pairs);
    }
}

/// Installs a global subscriber made of [`HostLayer`] alone. Fails if the
/// process already has a global subscriber; compose [`HostLayer`] with
/// your own layers instead in that case.
pub fn init() -> Result<(), tracing_subscriber::util::TryInitError> {
    use tracing_subscriber::util::SubscriberInitExt;
    tracing_subscriber::registry().with(HostLayer).try_init()
}

#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<Value>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
        } else {
            self.pairs.push(Value::String(field.name().to_owned()));
            self.pairs.push(value);
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let v = i64::try_from(value).map_or_else(|_| Value::String(value.to_string()), Value::Int);
        self.push(field, v);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        let v = if value.is_finite() { Value::Float(value) } else { Value::String(value.to_string()) };
        self.push(field, v);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, Value::String(format!("{value:?}")));
    }
}
