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
mod plugin_class;
mod plugin_fn;
mod shim;

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
/// | `wrapper = "..."` | Scriptling source the host runs instead of its generated proxy (switches the library to script mode) |
/// | `hidden` | callable over RPC but left out of the schema, for wrappers to call |
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

/// Exports a struct and its impl block to Scriptling as a class.
///
/// Put it on the struct (identity: name and description) **and** on one
/// inherent impl block (constructor, methods, properties); the two meet
/// through traits, and `Plugin::class::<Counter>()` registers the class.
///
/// On the struct:
///
/// | option | meaning |
/// |---|---|
/// | `name = "..."` | the class name Scriptling sees (default: the Rust name) |
/// | `wrapper = "..."` | Scriptling source defining the class, run by the host instead of its generated class |
///
/// In the impl block:
///
/// | attribute | on | meaning |
/// |---|---|---|
/// | `#[constructor]` | `fn new(..) -> Self` or `-> Result<Self, E>` | exactly one; Scriptling's `Counter(...)` |
/// | (none) | `fn m(&self, ..)` / `fn m(&mut self, ..)`, sync or `async` | a method; `&self` calls may share the object, `&mut self` calls get it alone |
/// | `#[plugin_fn(name = "...")]` | a method | renames it |
/// | `#[property]` | `fn p(&self) -> T` | a read-only property |
/// | `#[property(settable)]` | `fn p(&self) -> T` | a property assigned through `fn set_p(&mut self, value: T)`, which is not exported as a method |
/// | `#[property(name = "...")]` | a getter | renames the property |
/// | `#[del]` | `fn close(&mut self)` | runs when the object is destroyed, before `Drop` |
///
/// Doc comments become the help text of the class, constructor, methods and
/// properties. Parameters follow the same rules as [`macro@plugin_fn`].
///
/// ```ignore
/// /// Counts things.
/// #[plugin_class]
/// struct Counter { value: i64 }
///
/// #[plugin_class]
/// impl Counter {
///     #[constructor]
///     fn new(#[arg(default = 0)] start: i64) -> Self { Counter { value: start } }
///
///     /// Adds `amount` and returns the new value.
///     fn inc(&mut self, #[arg(default = 1)] amount: i64) -> i64 { self.value += amount; self.value }
///
///     #[property(settable)]
///     fn value(&self) -> i64 { self.value }
///     fn set_value(&mut self, value: i64) { self.value = value }
/// }
/// ```
#[proc_macro_attribute]
pub fn plugin_class(attr: TokenStream, item: TokenStream) -> TokenStream {
    plugin_class::expand(attr.into(), item.into()).into()
}
