//! Procedural macros for [`scriptling-plugin`](https://docs.rs/scriptling-plugin).
//!
//! Use them through the runtime crate (`scriptling_plugin::plugin_fn`); the
//! generated code refers to it by that name. Every attribute expands to
//! calls of the runtime's public builder, so nothing here is impossible to
//! write by hand.

use proc_macro::TokenStream;

mod attrs;
mod derive;
mod docs;
mod errors;
mod params;
mod plugin_class;
mod plugin_fn;
mod plugin_module;
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
/// | `hidden` (or `hidden = true`) | callable over RPC but left out of the schema, for wrappers to call |
///
/// Every attribute of this crate reads options the same way: strings as
/// `key = "..."`, flags as `key` or `key = true`; a key given twice or
/// unknown is an error that lists the valid ones.
///
/// Parameters are matched positionally or by keyword using their Rust
/// names. `#[arg(default = <expr>)]` on a parameter makes it optional; the
/// expression has the parameter's type (a string literal also works for a
/// `String` parameter). Help text shows the default as a Scriptling literal
/// worked out from its value when the plugin is built (`limit=10`,
/// `options={"limit": 10}`), or as the Rust expression when its type does
/// not convert back to a value. `#[arg(name = "...")]` sets the keyword;
/// a parameter written as a pattern (`Json(opts): Json<Opts>`) needs one.
/// `Option<T>` accepts `None` but is still required unless it has a default:
///
/// ```ignore
/// /// Greets someone.
/// #[plugin_fn]
/// fn greet(name: String, #[arg(default = "Hello")] greeting: String) -> String {
///     format!("{greeting}, {name}")
/// }
/// ```
///
/// Parameters are owned (`String`, `Vec<T>`): each argument is converted
/// into a fresh value the function owns, so borrowing would only add a copy.
/// The attribute allows clippy's pedantic `needless_pass_by_value` on the
/// function for that reason.
///
/// The doc comment becomes the function's `help()` text. The function may
/// return any `IntoValue` type or `Result<T, E>` with `E: Display`; the
/// error's message, after the function's name (`greet(): ...`), becomes the
/// Scriptling error. A panic becomes an error
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
/// A class has exactly one `#[plugin_class]` impl block, the one holding its
/// `#[constructor]`: the attribute sees one block at a time and the class is
/// built from it, so methods in a second block could only be lost. Other
/// inherent impl blocks without the attribute are fine, for Rust-only code.
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
/// | `#[property(settable)]` (or `settable = true`) | `fn p(&self) -> T` | a property assigned through `fn set_p(&mut self, value: T)`, which is not exported as a method |
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

/// Exports everything marked inside an inline module, so nothing marked can
/// be left unregistered.
///
/// The attribute adds `pub fn exports(plugin: Plugin) -> Plugin` to the
/// module, registering each `#[plugin_fn]` function, `#[plugin_class]`
/// struct and `#[constant] const` item in it; pass it to `Plugin::exports`.
/// Items elsewhere still register through the builder
/// (`Plugin::function::<f>()`), which is also the way for exports chosen at
/// run time. `#[cfg]` on an item applies to its registration too.
///
/// ```ignore
/// #[plugin_module]
/// mod textkit {
///     use scriptling_plugin::{plugin_fn, plugin_class};
///
///     /// How many words the text has.
///     #[plugin_fn]
///     fn count(text: String) -> usize { text.split_whitespace().count() }
///
///     /// The module's version of the word list.
///     #[constant]
///     const WORDLIST_VERSION: i64 = 3;
/// }
///
/// Plugin::new("textkit", "1.0.0", "Text tools").exports(textkit::exports).run()
/// ```
#[proc_macro_attribute]
pub fn plugin_module(attr: TokenStream, item: TokenStream) -> TokenStream {
    plugin_module::expand(attr.into(), item.into()).into()
}

/// Derives `FromValue`: builds the type from the Scriptling value of the
/// form below, with errors that name where inside the value the problem is
/// (`argument 'options'['limit'] must be an int, got string`).
///
/// | Rust | Scriptling value |
/// |---|---|
/// | `struct S { a: A, b: B }` | a dict `{"a": .., "b": ..}`; a key it does not know is refused, naming the known ones |
/// | `struct S(A)` | what `A` accepts |
/// | `struct S(A, B)` | a list of exactly two items |
/// | `struct S;` | `None` |
/// | `enum E { Red, Green }` | a string: `"Red"` |
/// | `enum E { Circle(f64), Rect(f64, f64), Label { text: String } }` | a dict with one key, the variant's name: `{"Circle": 1.0}`, `{"Rect": [2.0, 3.0]}`, `{"Label": {"text": ".."}}` (variants without data stay strings) |
///
/// Options, in `#[scriptling(...)]`:
///
/// | on | option | meaning |
/// |---|---|---|
/// | the type | `rename_all = "camelCase"` | renames every field (struct) or variant (enum): `lowercase`, `UPPERCASE`, `PascalCase`, `camelCase`, `snake_case`, `SCREAMING_SNAKE_CASE`, `kebab-case`, `SCREAMING-KEBAB-CASE` |
/// | a named field | `rename = "..."` | its key |
/// | a named field | `default` / `default = <expr>` | used when the key is missing (`Default::default()` or the expression) |
/// | a named field | `skip` | not read: takes its default; not written by `IntoValue` |
/// | a variant | `rename = "..."` | its name |
///
/// An `Option<T>` field may be left out (it reads as `None`). Fields are
/// converted with their own `FromValue`, so ints and floats stay exact.
/// Type parameters need the bound written out (`T: FromValue`).
#[proc_macro_derive(FromValue, attributes(scriptling))]
pub fn derive_from_value(input: TokenStream) -> TokenStream {
    derive::expand(input.into(), derive::Trait::FromValue).into()
}

/// Derives `IntoValue`: writes the type as the Scriptling value of the form
/// shown on [`macro@FromValue`], with the same options (skipped fields are left
/// out). Type parameters need the bound written out (`T: IntoValue`).
#[proc_macro_derive(IntoValue, attributes(scriptling))]
pub fn derive_into_value(input: TokenStream) -> TokenStream {
    derive::expand(input.into(), derive::Trait::IntoValue).into()
}
