//! The callback plugin: streams events to a Scriptling function while the
//! call is running, like upstream's callback example.
//!
//! ```text
//! import plugin.callback
//! events = []
//! result = plugin.callback.stream(lambda e: events.append(e))
//! # events: {"token": "Hello", "index": 0}, {"token": ", ", "index": 1},
//! #         {"token": "Ada", "index": 2}, ["done", 3]
//! # result: "Hello, Ada"
//! ```

use scriptling_plugin::{CallError, Callback, Json, Plugin, ServeError, plugin_fn};

#[derive(serde::Serialize)]
struct TokenEvent {
    token: &'static str,
    index: usize,
}

/// Calls `on_event` once per token, then with `["done", count]`, and
/// returns the whole text.
#[plugin_fn]
fn stream(on_event: Callback) -> Result<String, CallError> {
    let tokens = ["Hello", ", ", "Ada"];
    for (index, token) in tokens.into_iter().enumerate() {
        on_event.call((Json(TokenEvent { token, index }),))?;
    }
    on_event.call((("done", tokens.len()),))?;
    Ok(tokens.concat())
}

fn main() -> Result<(), ServeError> {
    Plugin::new("callback", "1.0.0", "Callback streaming example").function::<stream>().run()
}
