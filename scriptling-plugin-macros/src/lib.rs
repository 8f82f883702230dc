//! Procedural macros for [`scriptling-plugin`](https://docs.rs/scriptling-plugin).
//!
//! Use them through the runtime crate (`scriptling_plugin::plugin_fn`); the
//! generated code refers to it by that name. Every attribute expands to
//! calls of the runtime's public builder, so nothing here is impossible to
//! write by hand.

use proc_macro::TokenStream;

mod attrs;
mod docs;
mod errors;
mod params;
mod plugin_fn;

/// Exports a free function (sync or `async`) to Scriptling.
///
/// Register it with `Plugin::function::<name>()`: the attribute leaves the
/// function untouched (it stays callable from Rust) and adds a hidden type
/// of the same name that describes it. An annotated function that is never
/// registered is reported by the `dead_code` lint, like any unused item.
///
/// | option | meaning |
/// |---|---|
/// | `name = "..."` | the name Scriptling sees (default: the Rust name) |
///
/// Parameters are matched positionally or by keyword using their Rust
/// names. `#[arg(default = <expr>)]` on a parameter makes it optional; the
/// expression has the parameter's type (a string literal also works for a
/// `String` parameter). `Option<T>`
/// accepts `None` but is still required unless it has a default:
///
/// ```ignore
/// /// Greets someone.
/// #[plugin_fn]
/// fn greet(name: String, #[arg(default = "Hello")] greeting: String) -> String {
///     format!("{greeting}, {name}")
/// }
/// ```
///
/// The doc comment becomes the function's `help()` text. The function may
/// return any `IntoValue` type or `Result<T, E>` with `E: Display`; the
/// error's message becomes the Scriptling error. A panic becomes an error
/// response (`greet(): panicked: ...`) and the plugin keeps serving.
#[proc_macro_attribute]
pub fn plugin_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    plugin_fn::expand(attr.into(), item.into()).into()
}
