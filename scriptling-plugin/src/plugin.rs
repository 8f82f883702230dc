//! [`Plugin`]: the builder a plugin's `main` fills in and serves, and the
//! validated, immutable [`Core`] it becomes.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::class::{Class, ClassEntry, ClassSchemaOwned, PluginClassMethods};
use crate::objects::ObjectTable;

use crate::convert::{IntoValue, IntoValueError};
use crate::error::ServeError;
use crate::function::Function;
use crate::schema::{self, ClassSchema, ConstantSchema, FunctionSchema, Handshake, Library, Schema};
use crate::script;
use crate::value::Value;

/// A function that `#[plugin_fn]` has described, registered with
/// [`Plugin::function`].
///
/// The attribute implements this trait on a hidden type that shares the
/// function's name, so `.function::<greet>()` registers `fn greet`. It can
/// also be implemented by hand:
///
/// ```
/// use scriptling_plugin::{Args, CallError, Function, Plugin, PluginFunction};
///
/// enum Shout {}
///
/// impl PluginFunction for Shout {
///     fn function() -> Function {
///         Function::sync("shout", |args: &mut Args| {
///             let text: String = args.take(0)?;
///             Ok::<_, CallError>(text.to_uppercase())
///         })
///         .param("text")
///     }
/// }
///
/// let plugin = Plugin::new("demo", "1.0.0", "A demo").function::<Shout>();
/// # let _ = plugin;
/// ```
pub trait PluginFunction {
    /// The function's descriptor.
    fn function() -> Function;
}

/// A Scriptling plugin: its library identity and everything it exports.
///
/// Registration is explicit and ordered: the handshake schema lists
/// functions, classes and constants in the order they were added, so two
/// runs always describe the plugin identically.
///
/// ```no_run
/// use scriptling_plugin::{plugin_fn, Plugin};
///
/// /// Returns a friendly greeting.
/// #[plugin_fn]
/// fn greet(name: String) -> String {
///     format!("Hello, {name}")
/// }
///
/// fn main() -> Result<(), scriptling_plugin::ServeError> {
///     Plugin::new("hello", "1.0.0", "Greets people")
///         .function::<greet>()
///         .constant("default_name", "World")
///         .run()
/// }
/// ```
///
/// Registration problems (duplicate or invalid names, constants that cannot
/// be sent) are all reported together when the plugin is served:
///
/// ```
/// use scriptling_plugin::{Args, CallError, Function, Plugin, ServeError};
///
/// let noop = || Function::sync("ping", |_: &mut Args| Ok::<_, CallError>(()));
/// let plugin = Plugin::new("demo", "1.0.0", "").add_function(noop()).add_function(noop());
/// assert_eq!(plugin.name(), "demo");
/// # #[cfg(feature = "testing")]
/// # {
/// let err = scriptling_plugin::testing::Host::in_process(plugin).err().unwrap();
/// assert_eq!(err.to_string(), "invalid plugin definition: function name \"ping\" is already used by a function");
/// # }
/// ```
pub struct Plugin {
    name: String,
    version: String,
    description: String,
    functions: Vec<Function>,
    classes: Vec<ClassDecl>,
    constants: Vec<(String, Result<Value, IntoValueError>)>,
    options: Options,
}

/// Tunables of the serving loop.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) max_frame_bytes: usize,
    pub(crate) shutdown_grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self { max_frame_bytes: 64 * 1024 * 1024, shutdown_grace: Duration::from_secs(5) }
    }
}

impl Plugin {
    /// A plugin named `name` (the host imports it as `plugin.<name>`), with
    /// the version and description shown by Scriptling's plugin listing.
    pub fn new(name: impl Into<String>, version: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            description: description.into(),
            functions: Vec::new(),
            classes: Vec::new(),
            constants: Vec::new(),
            options: Options::default(),
        }
    }

    /// Registers a `#[plugin_fn]` function: `.function::<greet>()`.
    pub fn function<F: PluginFunction>(self) -> Self {
        self.add_function(F::function())
    }

    /// Registers a hand-built [`Function`].
    pub fn add_function(mut self, function: Function) -> Self {
        self.functions.push(function);
        self
    }

    /// Registers a `#[plugin_class]` class: `.class::<Counter>()`.
    pub fn class<C: PluginClassMethods>(self) -> Self {
        self.add_class(C::class())
    }

    /// Registers a hand-built [`Class`].
    pub fn add_class(mut self, class: Class) -> Self {
        self.classes.push(ClassDecl::Rust(Box::new(class)));
        self
    }

    /// Registers a constant, readable in Scriptling as `plugin.<lib>.<name>`.
    ///
    /// A value that cannot be converted (such as `u64::MAX`) is reported when
    /// the plugin is served, with every other registration problem.
    pub fn constant(mut self, name: impl Into<String>, value: impl IntoValue) -> Self {
        self.constants.push((name.into(), value.into_value()));
        self
    }

    /// The largest request line accepted, in bytes (default 64 MiB). A longer
    /// line is discarded without being buffered and answered with a `-32600`
    /// error; serving continues.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.options.max_frame_bytes = bytes;
        self
    }

    /// How long shutdown (or the host closing stdin) waits for in-flight
    /// calls before exiting anyway (default 5 s; the host itself waits 10 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.options.shutdown_grace = grace;
        self
    }

    /// The library name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Serves the plugin over stdio until the host shuts it down or closes
    /// stdin, on a tokio runtime of its own.
    ///
    /// Before anything else, the process's stdout is taken for the protocol
    /// and file descriptor 1 is pointed at stderr, so `println!` anywhere in
    /// the process cannot corrupt the stream.
    ///
    /// It also sets glibc's allocator to return buffers of 1 MiB and more
    /// to the system when freed (large payloads otherwise stay resident in
    /// per-thread arenas); [`serve_stdio`](Plugin::serve_stdio) leaves the
    /// allocator alone.
    ///
    /// Returns `Ok(())` once served (the process should then exit with
    /// status 0, which returning from `main` does), or the registration
    /// problems if the plugin is inconsistent.
    ///
    /// The same binary can serve HTTP instead, with no code change: pass
    /// `--listen ADDR` (and optionally `--path /json-rpc`), or set
    /// `SCRIPTLING_PLUGIN_LISTEN` (with `SCRIPTLING_PLUGIN_PATH`,
    /// `SCRIPTLING_PLUGIN_TOKEN`, `SCRIPTLING_PLUGIN_TIMEOUT`); arguments
    /// win over the environment. This needs the `http` feature. Set the
    /// variables only for the plugin's own process: a Scriptling host passes
    /// its environment to every plugin it spawns.
    pub fn run(self) -> Result<(), ServeError> {
        let core = self.build()?;
        #[cfg(feature = "http")]
        if let Some(config) = crate::transport::http::HttpConfig::from_env_and_args()? {
            return crate::transport::http::run(core, config);
        }
        #[cfg(not(feature = "http"))]
        if std::env::args().any(|a| a == "--listen" || a.starts_with("--listen="))
            || std::env::var("SCRIPTLING_PLUGIN_LISTEN").is_ok_and(|v| !v.is_empty())
        {
            return Err(ServeError::Config(
                "HTTP serving was requested, but this plugin was built without the `http` feature of scriptling-plugin"
                    .to_owned(),
            ));
        }
        crate::transport::stdio::run(core)
    }

    /// Serves the plugin over HTTP at `addr` (`"127.0.0.1:8081"`, or a port
    /// alone for loopback) until SIGINT or SIGTERM. See
    /// [`serve_http_with`](Plugin::serve_http_with) for the options.
    #[cfg(feature = "http")]
    pub fn serve_http(self, addr: &str) -> Result<(), ServeError> {
        let config = crate::transport::http::HttpConfig::new(
            crate::transport::http::parse_addr(addr).map_err(ServeError::Config)?,
        );
        self.serve_http_with(config)
    }

    /// Serves the plugin over HTTP with `config`, on a runtime of its own,
    /// until SIGINT or SIGTERM; then in-flight requests finish and every
    /// object is dropped.
    #[cfg(feature = "http")]
    pub fn serve_http_with(self, config: crate::HttpConfig) -> Result<(), ServeError> {
        let core = self.build()?;
        crate::transport::http::run(core, config)
    }

    /// Like [`run`](Plugin::run), on the caller's tokio runtime. Async
    /// handlers run on it (use a multi-threaded runtime); sync handlers run
    /// on the SDK's own worker threads.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let core = self.build()?;
        crate::transport::stdio::serve_stdio(core).await
    }

    /// Validates the registrations and freezes them into a [`Core`].
    pub(crate) fn build(self) -> Result<Core, ServeError> {
        let mut problems = Vec::new();
        let mut seen: HashMap<String, &'static str> = HashMap::new();
        let mut claim = |name: &str, kind: &'static str, problems: &mut Vec<String>| {
            if let Some(problem) = script::identifier_problem(name) {
                problems.push(format!("{kind} name {name:?} {problem}"));
            }
            if let Some(prev) = seen.insert(name.to_owned(), kind) {
                problems.push(format!("{kind} name {name:?} is already used by a {prev}"));
            }
        };
        if self.name.is_empty() {
            problems.push("the library name is empty".to_owned());
        }
        for f in &self.functions {
            claim(f.name(), "function", &mut problems);
        }
        for c in &self.classes {
            claim(c.name(), "class", &mut problems);
        }
        for (name, value) in &self.constants {
            claim(name, "constant", &mut problems);
            if let Err(e) = value {
                problems.push(format!("constant {name:?} cannot be sent: {e}"));
            }
        }
        let classes: Vec<SchemaClass> = self
            .classes
            .into_iter()
            .map(|c| match c {
                ClassDecl::Rust(class) => SchemaClass::Rust(Arc::new((*class).into_entry(&mut problems))),
                ClassDecl::Script { name, source } => {
                    SchemaClass::Script(ClassSchemaOwned::script_only(&name, &source))
                }
            })
            .collect();
        let entries: Vec<&Arc<ClassEntry>> = classes.iter().filter_map(SchemaClass::entry).collect();
        let mut by_type = HashMap::new();
        for class in &entries {
            if by_type.insert(class.type_id, Arc::clone(class)).is_some() {
                problems.push(format!("class {} is registered twice for the same Rust type", class.name));
            }
        }
        let constants: Vec<(String, Value)> =
            self.constants.into_iter().map(|(n, v)| (n, v.unwrap_or_default())).collect();

        // Help text: the Scriptling signature, then the doc comment.
        let exported: Vec<&Function> = self.functions.iter().filter(|f| !f.is_hidden()).collect();
        let helps: Vec<String> = exported.iter().map(|f| f.help_text()).collect();
        let mut function_sources: Vec<Option<String>> =
            exported.iter().map(|f| f.script_source().map(str::to_owned)).collect();
        let mut class_sources: Vec<Option<String>> = classes.iter().map(|c| c.schema().source.clone()).collect();
        let script_mode = function_sources.iter().chain(&class_sources).any(Option::is_some);
        if script_mode {
            write_script_sources(
                &script::host_library(&self.name),
                (&exported, &helps, &mut function_sources),
                (&classes, &mut class_sources),
                &constants,
                &mut problems,
            );
        }
        if !problems.is_empty() {
            return Err(ServeError::Invalid(problems));
        }
        let handshake = Handshake {
            protocol: schema::PROTOCOL_VERSION,
            transport: "json",
            library: Library { name: &self.name, version: &self.version, description: &self.description },
            capabilities: &["remote_objects"],
            schema: Schema {
                functions: exported
                    .iter()
                    .zip(&helps)
                    .zip(&function_sources)
                    .map(|((f, help), source)| FunctionSchema {
                        name: f.name(),
                        description: help,
                        source: source.as_deref(),
                    })
                    .collect(),
                classes: classes
                    .iter()
                    .zip(&class_sources)
                    .map(|(c, source)| ClassSchema { source: source.as_deref(), ..c.schema().schema() })
                    .collect(),
                constants: constants.iter().map(|(name, value)| ConstantSchema { name, value }).collect(),
            },
        };
        let handshake = serde_json::to_vec(&handshake)
            .map_err(|e| ServeError::Invalid(vec![format!("the handshake cannot be encoded: {e}")]))?;
        let function_list = sorted_list(exported.iter().map(|f| f.name()));
        let class_list = sorted_list(entries.iter().map(|c| c.name.as_str()));
        Ok(Core {
            library: Arc::from(self.name.as_str()),
            function_list,
            classes: entries.iter().map(|c| (c.name.clone(), Arc::clone(c))).collect(),
            classes_by_type: by_type,
            class_list,
            functions: self.functions.into_iter().map(|f| (f.name().to_owned(), f)).collect(),
            objects: ObjectTable::default(),
            handshake,
            options: self.options,
        })
    }

    /// Registers a function written only in Scriptling `source` (it must
    /// define `def <name>(...)`). It switches the library to the host's
    /// script mode, in which the SDK supplies source for every other export
    /// too, so constants and help text keep working.
    ///
    /// ```
    /// use scriptling_plugin::{plugin_fn, Plugin};
    ///
    /// #[plugin_fn(hidden)]
    /// fn _decorate(name: String) -> String {
    ///     format!("wrapped:{name}")
    /// }
    ///
    /// let plugin = Plugin::new("mixed", "1.0.0", "")
    ///     .function::<_decorate>()
    ///     .script_function("decorate", r#"
    /// def decorate(name):
    ///     return scriptling.plugin.call_function("plugin.mixed", "_decorate", name) + "!"
    /// "#);
    /// # let _ = plugin;
    /// ```
    pub fn script_function(self, name: impl Into<String>, source: impl Into<String>) -> Self {
        self.add_function(Function::script_only(name, source))
    }

    /// Registers a class written only in Scriptling `source` (it must define
    /// `class <name>:`). See [`script_function`](Plugin::script_function).
    pub fn script_class(mut self, name: impl Into<String>, source: impl Into<String>) -> Self {
        self.classes.push(ClassDecl::Script { name: name.into(), source: source.into() });
        self
    }
}

/// In script mode the host builds the library from sources alone: supply
/// the source of every export that has none, with its help as a docstring,
/// and put the constants (which the host would drop) at the top.
fn write_script_sources(
    library: &str,
    (functions, helps, function_sources): (&[&Function], &[String], &mut [Option<String>]),
    (classes, class_sources): (&[SchemaClass], &mut [Option<String>]),
    constants: &[(String, Value)],
    problems: &mut Vec<String>,
) {
    for ((f, help), source) in functions.iter().zip(helps).zip(function_sources.iter_mut()) {
        source.get_or_insert_with(|| script::function_wrapper(library, f.name(), help));
    }
    for (c, source) in classes.iter().zip(class_sources.iter_mut()) {
        source.get_or_insert_with(|| c.schema().generated_source(library));
    }
    let mut prelude = String::new();
    for (name, value) in constants {
        match script::literal(value) {
            Ok(literal) => prelude.push_str(&format!("{name} = {literal}\n")),
            Err(e) => problems.push(format!("constant {name:?} cannot be kept in script mode: {e}")),
        }
    }
    if !prelude.is_empty() {
        let first = function_sources.iter_mut().chain(class_sources.iter_mut()).flatten().next();
        if let Some(first) = first {
            *first = format!("{prelude}\n{first}");
        }
    }
}

fn sorted_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// A registered class: Rust-backed, or Scriptling source only.
enum ClassDecl {
    Rust(Box<Class>),
    Script { name: String, source: String },
}

impl ClassDecl {
    fn name(&self) -> &str {
        match self {
            ClassDecl::Rust(c) => c.name(),
            ClassDecl::Script { name, .. } => name,
        }
    }
}

/// A class as the schema lists it.
enum SchemaClass {
    Rust(Arc<ClassEntry>),
    Script(ClassSchemaOwned),
}

impl SchemaClass {
    fn entry(&self) -> Option<&Arc<ClassEntry>> {
        match self {
            SchemaClass::Rust(e) => Some(e),
            SchemaClass::Script(_) => None,
        }
    }

    fn schema(&self) -> &ClassSchemaOwned {
        match self {
            SchemaClass::Rust(e) => &e.schema,
            SchemaClass::Script(s) => s,
        }
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("functions", &self.functions)
            .finish_non_exhaustive()
    }
}

/// A validated plugin, shared by every connection that serves it.
pub(crate) struct Core {
    /// The library name, as put in remote references.
    pub(crate) library: Arc<str>,
    pub(crate) functions: HashMap<String, Function>,
    /// Sorted names for "unknown function" errors.
    pub(crate) function_list: String,
    pub(crate) classes: HashMap<String, Arc<ClassEntry>>,
    classes_by_type: HashMap<TypeId, Arc<ClassEntry>>,
    /// Sorted names for "unknown class" errors.
    pub(crate) class_list: String,
    pub(crate) objects: ObjectTable,
    /// The serialised handshake result.
    pub(crate) handshake: Vec<u8>,
    pub(crate) options: Options,
}

impl Core {
    pub(crate) fn class_for(&self, type_id: TypeId) -> Option<Arc<ClassEntry>> {
        self.classes_by_type.get(&type_id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::Args;

    fn noop(name: &str) -> Function {
        Function::sync(name, |_: &mut Args| Ok(()))
    }

    #[test]
    fn every_registration_problem_is_reported_at_once() {
        let err = Plugin::new("x", "1", "")
            .add_function(noop("greet"))
            .add_function(noop("greet"))
            .add_function(noop("bad-name"))
            .constant("greet", 1)
            .constant("big", u64::MAX)
            .build()
            .err()
            .expect("invalid");
        let ServeError::Invalid(problems) = err else { panic!() };
        assert_eq!(
            problems,
            vec![
                "function name \"greet\" is already used by a function",
                "function name \"bad-name\" is not a valid Scriptling identifier",
                "constant name \"greet\" is already used by a function",
                "constant \"big\" cannot be sent: the u64 18446744073709551615 does not fit in a Scriptling int (64-bit signed)",
            ]
        );
    }

    #[test]
    fn handshake_is_deterministic_and_in_registration_order() {
        let build = || {
            Plugin::new("hello", "1.2.3", "desc")
                .add_function(noop("zeta").description("Last letter."))
                .add_function(noop("alpha"))
                .constant("answer", 42)
                .build()
                .ok()
                .unwrap()
                .handshake
        };
        let a = String::from_utf8(build()).unwrap();
        assert_eq!(a, String::from_utf8(build()).unwrap());
        assert_eq!(
            a,
            r#"{"protocol":"1.0","transport":"json","library":{"name":"hello","version":"1.2.3","description":"desc"},"capabilities":["remote_objects"],"schema":{"functions":[{"name":"zeta","description":"zeta()\n\nLast letter."},{"name":"alpha","description":"alpha()"}],"classes":[],"constants":[{"name":"answer","value":{"type":"int","value":42}}]}}"#
        );
    }
}
