//! [`Plugin`]: the builder a plugin's `main` fills in, validated into a
//! [`Core`] when it is served (the serving methods live with the
//! transports, in `transport/mod.rs`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::exports::class::{Class, ClassEntry, ClassSchemaOwned, PluginClassMethods};
use crate::exports::core::{Core, Options};
use crate::exports::error::{DefinitionError, ExportKind, ServeError};
use crate::exports::function::Function;
use crate::exports::schema::{self, ClassSchema, ConstantSchema, FunctionSchema, Handshake, Library, Schema};
use crate::exports::script;
use crate::support::sorted_names;
use crate::value::Value;
use crate::value::convert::{IntoValue, IntoValueError};

/// A function that `#[plugin_fn]` has described, registered with
/// [`Plugin::function`].
///
/// The attribute implements this trait on a hidden type that shares the
/// function's name, so `.function::<greet>()` registers `fn greet`. It can
/// also be implemented by hand:
///
/// ```
/// use scriptling_plugin::{Args, Function, Plugin, PluginFunction};
///
/// enum Shout {}
///
/// impl PluginFunction for Shout {
///     fn function() -> Function {
///         Function::new("shout", |args: &mut Args| {
///             let text: String = args.take(0)?;
///             Ok(text.to_uppercase())
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
/// use scriptling_plugin::{Args, Function, Plugin};
///
/// let noop = || Function::new("ping", |_: &mut Args| Ok(()));
/// let plugin = Plugin::new("demo", "1.0.0", "").add_function(noop()).add_function(noop());
/// assert_eq!(plugin.get_name(), "demo");
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

    /// Registers everything a [`#[plugin_module]`](crate::plugin_module)
    /// module exports: `.exports(textkit::exports)`.
    ///
    /// The way to register attribute-marked items: the module lists them, so
    /// none can be forgotten. The one-at-a-time methods below are for items
    /// outside such a module and exports chosen at run time.
    pub fn exports(self, exports: impl FnOnce(Plugin) -> Plugin) -> Self {
        exports(self)
    }

    /// Registers one `#[plugin_fn]` function: `.function::<greet>()`.
    ///
    /// Typed by the attribute's descriptor, so registering something that is
    /// not an exported function is a compile error;
    /// [`add_function`](Plugin::add_function) takes a [`Function`] built by
    /// hand instead.
    pub fn function<F: PluginFunction>(self) -> Self {
        self.add_function(F::function())
    }

    /// Registers a hand-built [`Function`] (see [`Function::new`]).
    pub fn add_function(mut self, function: Function) -> Self {
        self.functions.push(function);
        self
    }

    /// Registers one `#[plugin_class]` class: `.class::<Counter>()`; the
    /// typed form of [`add_class`](Plugin::add_class), as for functions.
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

    /// The most requests one batch may hold (default 100 000). A longer
    /// batch is refused whole with a `-32600` error naming the limit, before
    /// any of it runs, so a batch costs at most a small multiple of its size.
    pub fn max_batch_len(mut self, len: usize) -> Self {
        self.options.max_batch_len = len.max(1);
        self
    }

    /// How long shutdown (or the host closing stdin, or the first stop event:
    /// SIGINT or SIGTERM, on Windows Ctrl-C, Ctrl-Break or the console
    /// closing) may take to finish in-flight calls and destroy the objects
    /// before answering and exiting anyway (default 5 s; the host itself
    /// waits 10 s for the answer to `plugin.shutdown`, and kills a plugin
    /// 5 s after closing its stdin). Afterwards the plugin writes what it
    /// still owes for as long as the host keeps reading, giving up after
    /// this long without progress.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.options.shutdown_grace = grace;
        self
    }

    /// How long a call's response may wait for the host to acknowledge the
    /// call's log records (default 5 s; see [`Logger`](crate::Logger)). Past
    /// it, the remaining records are sent without waiting and the response
    /// follows; and as the host evidently does not acknowledge records,
    /// later calls stop waiting for it too (until it acknowledges one again).
    pub fn log_ack_timeout(mut self, bound: Duration) -> Self {
        self.options.waits.log_ack = bound;
        self
    }

    /// How long a [`Callback`](crate::Callback) call waits for the host's
    /// answer (default 60 s). Past it the call fails with an error that
    /// says so, and the handler goes on: a host that lost the callback, or
    /// a script stuck in it, cannot hold a plugin call (or an object it
    /// holds) for ever. Raise it for callbacks that legitimately run long.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scriptling_plugin::Plugin;
    ///
    /// let plugin = Plugin::new("batch", "1.0.0", "").callback_timeout(Duration::from_secs(600));
    /// # drop(plugin);
    /// ```
    pub fn callback_timeout(mut self, limit: Duration) -> Self {
        self.options.waits.callback = limit;
        self
    }

    /// How long a call waits for an object held by another call that is
    /// waiting on a callback (default 5 s).
    ///
    /// Calls share an object for reading and take it alone for writing, in
    /// the order they asked. While the holder waits for the host to answer
    /// a callback, a call that needs the object waits its turn, but only
    /// this long: the wire cannot tell a call from another script thread
    /// (which the holder's return will serve) from a call the callback
    /// itself made (which would wait for ever on the call it came from).
    /// Past the bound the call fails, with a message that names both.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scriptling_plugin::Plugin;
    ///
    /// let plugin = Plugin::new("shared", "1.0.0", "").busy_object_timeout(Duration::from_secs(30));
    /// # drop(plugin);
    /// ```
    pub fn busy_object_timeout(mut self, limit: Duration) -> Self {
        self.options.waits.busy_object = limit;
        self
    }

    /// Runs async handlers on tokio's multi-thread scheduler, with
    /// `threads` workers (0: one per core), instead of on one thread.
    ///
    /// By default the runtime that [`run`](Plugin::run) and the network
    /// servers start runs every async handler on one thread of its own
    /// (`plugin-tokio`, tokio's current-thread scheduler): async handlers
    /// are for waiting (on I/O, timers, the host's callbacks), and sync
    /// handlers, which run on the SDK's pool of up to one thread per core
    /// whatever this says, are for computing. On one thread, an async
    /// handler that computes or blocks without awaiting holds up every
    /// other async handler meanwhile; on the multi-thread scheduler the
    /// others go on, and `tokio::task::block_in_place` works (the
    /// current-thread scheduler refuses it). The default keeps tokio's
    /// multi-thread scheduler out of the program: it links `libm`, which on
    /// a 2-core VM cost a plugin ~0.1 ms of its start and 0.3-0.5 MiB resident
    /// (the host starts a plugin for every script run that loads it).
    /// [`serve_stdio`](Plugin::serve_stdio) runs async handlers on the
    /// runtime it is awaited in, whatever this says. HTTP serving runs on
    /// the multi-thread scheduler always, one worker per core unless this
    /// says how many.
    ///
    /// Needs the `multi-thread` feature (which `http` turns on).
    ///
    /// ```
    /// use scriptling_plugin::Plugin;
    ///
    /// // Async handlers that compute: one worker per core.
    /// let plugin = Plugin::new("crunch", "1.0.0", "").async_worker_threads(0);
    /// # drop(plugin);
    /// ```
    #[cfg(feature = "multi-thread")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multi-thread")))]
    pub fn async_worker_threads(mut self, threads: usize) -> Self {
        self.options.async_workers = Some(threads);
        self
    }

    /// The most threads sync handlers may occupy at once (default 512).
    ///
    /// A sync handler waiting on a host callback keeps its thread but not
    /// its share of the pool: another thread starts for the calls queued
    /// behind it. When every one of these threads is waiting on the host,
    /// a new sync call cannot be served without risking a deadlock (the
    /// host may be waiting for it), so it fails at once with an error
    /// saying so, rather than waiting. Async handlers do not count. The
    /// threads are named `plugin-sync`.
    pub fn max_sync_threads(mut self, threads: usize) -> Self {
        self.options.max_sync_threads = threads.max(1);
        self
    }

    /// How long the thread reading stdin polls for the host's next message
    /// before it sleeps, when one is due (default 50 µs; zero sleeps at
    /// once), and an idle thread of the sync pool for queued work.
    ///
    /// A message is due while the plugin awaits the host's answer (a
    /// callback's result; for a call that reads its callback's answer on
    /// its own thread, only while the host's last such answer came within
    /// this time: a Scriptling callback, which the real host runs in
    /// ~100 µs, is not polled for), and after answering a call when the
    /// host sent that call within this time of the answer before it (a
    /// client calling in a tight loop; a Scriptling script, which runs
    /// between calls, is not polled for). A thread asleep takes from ~3 µs (bare metal) to
    /// ~25 µs (a virtual machine's idle core) to wake; polling saves that:
    /// sequential round trips measured 11.5 µs with it and 40 µs without,
    /// on a 2-core VM, and a callback's round trip 16 µs against 62 µs. The
    /// price is up to this much CPU time after a call no message follows
    /// at once. Set it to zero for plugins that run many at a time on few
    /// cores. It is off on a single core, where polling could only delay
    /// the thread that answers the host.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scriptling_plugin::Plugin;
    ///
    /// let plugin = Plugin::new("quiet", "1.0.0", "Sleeps between calls").input_spin(Duration::ZERO);
    /// # drop(plugin);
    /// ```
    pub fn input_spin(mut self, spin: Duration) -> Self {
        self.options.input_spin = spin;
        self
    }

    /// How quickly a call must end for the calls the host sends behind it
    /// to run one after another on the thread that reads them (default
    /// 50 µs; zero: never).
    ///
    /// A call the host sends alone runs on the thread that read it. Calls
    /// sent behind one another (script threads calling at once) run there
    /// too, in turn, while the last call run there ended within this time
    /// (the call itself, not the write of its answer): for such calls,
    /// handing each to the sync pool costs the reading more than running
    /// it. Their answers are written together: an answer waits for the
    /// quick calls read with it, up to 4 KiB of answers. A longer call
    /// sends the calls read after it to the pool, to run side by side; a
    /// call that blocks or computes past the pool's stall time (1 ms)
    /// hands the reading to another thread, which sends them to the pool
    /// too (so values of 1 ms or more act as 1 ms). Measured with 64
    /// calls of `greet` in flight on two cores: 16 % more calls a second
    /// and 36 % less CPU a call (see ARCHITECTURE.md). The default is
    /// well above a simple handler's few microseconds, so that a call
    /// that was preempted does not send the next ones to the pool; on a
    /// machine with many cores whose host sends many calls of tens of
    /// microseconds at once, lower it (or set it to zero) to run them side
    /// by side.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scriptling_plugin::Plugin;
    ///
    /// let plugin = Plugin::new("parallel", "1.0.0", "Short calls side by side").quick_calls(Duration::ZERO);
    /// # drop(plugin);
    /// ```
    pub fn quick_calls(mut self, within: Duration) -> Self {
        self.options.quick_calls = within;
        self
    }

    /// Prints panics of plugin calls in full, through the process's panic
    /// hook (with a backtrace if `RUST_BACKTRACE` asks for one), instead of
    /// the SDK's single line. Also enabled by setting
    /// `SCRIPTLING_PLUGIN_BACKTRACE=1` in the plugin's environment.
    ///
    /// By default a panicking call costs one stderr line, its message and
    /// location; the call still fails with `<name>(): panicked: <message>`.
    /// A host that runs with `RUST_BACKTRACE=1` would otherwise pass that
    /// setting on, and every panic would print ~45 lines and take
    /// milliseconds while holding a process-wide lock.
    pub fn panic_backtraces(mut self, full: bool) -> Self {
        self.options.panic_backtraces = full;
        self
    }

    /// Lets the binary take arguments of its own (what a script passes with
    /// `scriptling.plugin.load(..., args=[...])`): [`run`](Plugin::run) then
    /// leaves arguments it does not know to the plugin, which reads them with
    /// `std::env::args()`, instead of refusing them with its usage line.
    /// The SDK's flags (`--describe`, `--schema`, `--version`, `--help`,
    /// `--listen`, `--path`) keep their meaning.
    ///
    /// ```
    /// # use scriptling_plugin::Plugin;
    /// let plugin = Plugin::new("db", "1.0.0", "").own_args();
    /// # let _ = plugin;
    /// ```
    pub fn own_args(mut self) -> Self {
        self.options.own_args = true;
        self
    }

    /// The library name.
    pub fn get_name(&self) -> &str {
        &self.name
    }

    /// Validates the registrations and freezes them into a [`Core`].
    pub(crate) fn build(self) -> Result<Core, ServeError> {
        let mut problems = Vec::new();
        let mut seen: HashMap<String, ExportKind> = HashMap::new();
        let mut claim = |name: &str, kind: ExportKind, problems: &mut Vec<DefinitionError>| {
            if let Some(reason) = script::identifier_problem(name) {
                problems.push(DefinitionError::Name { kind, name: name.to_owned(), reason });
            }
            if let Some(previous) = seen.insert(name.to_owned(), kind) {
                problems.push(DefinitionError::Duplicate { kind, name: name.to_owned(), previous });
            }
        };
        if self.name.is_empty() {
            problems.push(DefinitionError::Name { kind: ExportKind::Library, name: String::new(), reason: "is empty" });
        }
        for f in &self.functions {
            claim(f.get_name(), ExportKind::Function, &mut problems);
        }
        for c in &self.classes {
            claim(c.name(), ExportKind::Class, &mut problems);
        }
        for (name, value) in &self.constants {
            claim(name, ExportKind::Constant, &mut problems);
            if let Err(e) = value {
                problems.push(DefinitionError::Constant {
                    name: name.clone(),
                    reason: e.to_string(),
                    in_script: false,
                });
            }
        }
        let mut rust_classes = 0;
        let classes: Vec<SchemaClass> = self
            .classes
            .into_iter()
            .map(|c| match c {
                ClassDecl::Rust(class) => {
                    rust_classes += 1;
                    SchemaClass::Rust(Arc::new((*class).into_entry(rust_classes - 1, &mut problems)))
                }
                ClassDecl::Script { name, source } => {
                    SchemaClass::Script(ClassSchemaOwned::script_only(&name, &source))
                }
            })
            .collect();
        let entries: Vec<&Arc<ClassEntry>> = classes.iter().filter_map(SchemaClass::entry).collect();
        let mut types = HashMap::new();
        for class in &entries {
            if types.insert(class.info.type_id, ()).is_some() {
                problems.push(DefinitionError::SameTypeTwice { class: class.name().to_owned() });
            }
        }
        let constants: Vec<(String, Value)> =
            self.constants.into_iter().map(|(n, v)| (n, v.unwrap_or_default())).collect();

        // Help text: the Scriptling signature, then the doc comment.
        let exported: Vec<&Function> = self.functions.iter().filter(|f| !f.is_hidden()).collect();
        let helps: Vec<String> = exported.iter().map(|f| f.help_text()).collect();
        let mut function_sources: Vec<Option<String>> =
            exported.iter().map(|f| f.get_source().map(str::to_owned)).collect();
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
                        name: f.get_name(),
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
            .map_err(|e| ServeError::Invalid(vec![DefinitionError::Handshake(e.to_string())]))?;
        let exported_names = exported.iter().map(|f| f.get_name().to_owned()).collect();
        let function_list = sorted_names(exported.iter().map(|f| f.get_name()));
        let class_list = sorted_names(entries.iter().map(|c| c.name()));
        Ok(Core {
            library: Arc::from(self.name.as_str()),
            function_list,
            classes: entries.iter().map(|c| (c.name().to_owned(), Arc::clone(c))).collect(),
            class_order: entries.iter().map(|c| Arc::clone(c)).collect(),
            class_list,
            functions: self.functions.into_iter().map(|f| (f.get_name().to_owned(), f)).collect(),
            handshake,
            version: self.version,
            exported: exported_names,
            bridge: OnceLock::new(),
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
    ///
    /// Shorthand for `.add_function(Function::script_only(name, source))`,
    /// the form to use when the function also needs a
    /// [`description`](Function::description).
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
    problems: &mut Vec<DefinitionError>,
) {
    for ((f, help), source) in functions.iter().zip(helps).zip(function_sources.iter_mut()) {
        source.get_or_insert_with(|| script::function_wrapper(library, f.get_name(), help));
    }
    for (c, source) in classes.iter().zip(class_sources.iter_mut()) {
        source.get_or_insert_with(|| c.schema().generated_source(library));
    }
    let mut prelude = String::new();
    for (name, value) in constants {
        match script::literal(value) {
            Ok(literal) => prelude.push_str(&format!("{name} = {literal}\n")),
            Err(e) => {
                problems.push(DefinitionError::Constant { name: name.clone(), reason: e.to_string(), in_script: true })
            }
        }
    }
    if !prelude.is_empty() {
        let first = function_sources.iter_mut().chain(class_sources.iter_mut()).flatten().next();
        if let Some(first) = first {
            *first = format!("{prelude}\n{first}");
        }
    }
}

/// A registered class: Rust-backed, or Scriptling source only.
enum ClassDecl {
    Rust(Box<Class>),
    Script { name: String, source: String },
}

impl ClassDecl {
    fn name(&self) -> &str {
        match self {
            ClassDecl::Rust(c) => c.get_name(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::function::Args;

    fn noop(name: &str) -> Function {
        Function::new(name, |_: &mut Args| Ok(()))
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
            problems[0],
            DefinitionError::Duplicate {
                kind: ExportKind::Function,
                name: "greet".into(),
                previous: ExportKind::Function
            }
        );
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
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
    fn the_bridges_answers_are_made_when_first_asked_for_in_registration_order() {
        let core = Plugin::new("hello", "1.2.3", "")
            .add_function(noop("zeta").description("Last letter."))
            .add_function(noop("alpha"))
            .build()
            .ok()
            .unwrap();
        assert!(core.bridge.get().is_none(), "a stdio plugin never makes them");
        let bridge = core.bridge();
        let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
        assert_eq!(
            text(&bridge.tools),
            r#"{"tools":[{"name":"zeta","description":"Last letter.","parameters":[]},{"name":"alpha","description":"","parameters":[]}]}"#
        );
        assert_eq!(
            text(&bridge.hello),
            r#"{"success":true,"message":"Client identified","server":{"name":"hello","version":"1.2.3"}}"#
        );
        assert!(text(&bridge.ping_tool).contains(r#""message":"hello 1.2.3 is serving this connection""#));
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
