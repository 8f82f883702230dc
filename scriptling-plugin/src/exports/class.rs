//! Plugin classes: the [`PluginClassMethods`] trait (what `#[plugin_class]`
//! implements on an impl block), the [`Class`] / [`Property`] builder it
//! produces, and the validated [`ClassEntry`] dispatch uses.

use std::any::{Any, TypeId};
use std::collections::HashMap;

use crate::support::{NameMap, sorted_names};
use std::sync::Arc;

use crate::call::error::CallError;
use crate::call::objects::{ClassInfo, PluginClass};
use crate::exports::error::{DefinitionError, ExportKind};
use crate::exports::function::{Args, Function};
use crate::exports::schema::{ClassSchema, FunctionSchema, PropertySchema};
use crate::exports::script;

/// The impl side of a plugin class: its constructor, methods and properties.
///
/// `#[plugin_class]` on the class's impl block implements it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no complete `#[plugin_class]` impl block",
    label = "`{Self}` does not implement `PluginClassMethods`",
    note = "a class needs one `#[plugin_class] impl {Self}` block that holds its `#[constructor]`"
)]
pub trait PluginClassMethods: PluginClass {
    /// The class's descriptor.
    fn class() -> Class;
}

/// A property: a getter, and a setter if Scriptling may assign it.
///
/// Scriptling reads a property with `object.call_method(name)` and no
/// arguments, and sets it with exactly one.
pub struct Property {
    name: String,
    description: String,
    pub(crate) getter: Function,
    pub(crate) setter: Option<Function>,
}

impl Property {
    /// A read-only property.
    pub fn new(name: impl Into<String>, getter: Function) -> Self {
        Self { name: name.into(), description: String::new(), getter, setter: None }
    }

    /// Makes the property settable; the setter takes one argument.
    pub fn setter(mut self, setter: Function) -> Self {
        self.setter = Some(setter);
        self
    }

    /// Sets the property's help text.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// The property's name.
    pub fn get_name(&self) -> &str {
        &self.name
    }

    /// The help text (set by [`description`](Property::description)).
    pub fn get_description(&self) -> &str {
        &self.description
    }
}

/// A class descriptor, built by `#[plugin_class]` or by hand, registered
/// with [`Plugin::class`](crate::Plugin::class) or
/// [`Plugin::add_class`](crate::Plugin::add_class).
///
/// The struct and its impl block meet only through traits
/// ([`PluginClass`](crate::PluginClass) for the struct,
/// [`PluginClassMethods`] for the impl block), so each attribute expands on
/// its own. By hand, a class is:
///
/// ```
/// use scriptling_plugin::{
///     Args, Class, Function, IntoValue, IntoValueError, Plugin, PluginClass, PluginClassMethods,
///     Property, Value,
/// };
///
/// struct Counter { value: i64 }
///
/// impl PluginClass for Counter {
///     const NAME: &'static str = "Counter";
///     const DESCRIPTION: &'static str = "Counts things.";
/// }
///
/// impl IntoValue for Counter {
///     fn into_value(self) -> Result<Value, IntoValueError> {
///         scriptling_plugin::into_object(self)
///     }
/// }
///
/// impl PluginClassMethods for Counter {
///     fn class() -> Class {
///         Class::new::<Counter>()
///             .constructor(
///                 Function::new("Counter", |args: &mut Args| Ok(Counter { value: args.take(0)? }))
///                     .param("start"),
///             )
///             .method(
///                 Function::new("inc", |args: &mut Args| {
///                     let this = args.receiver::<Counter>()?;
///                     let amount: i64 = args.take(0)?;
///                     let mut counter = this.write()?;
///                     counter.value += amount;
///                     Ok(counter.value)
///                 })
///                 .param("amount"),
///             )
///             .property(Property::new(
///                 "value",
///                 Function::new("value", |args: &mut Args| Ok(args.receiver::<Counter>()?.read()?.value)),
///             ))
///     }
/// }
///
/// let plugin = Plugin::new("demo", "1.0.0", "").class::<Counter>();
/// # let _ = plugin;
/// ```
pub struct Class {
    name: String,
    description: String,
    source: Option<String>,
    type_id: TypeId,
    constructor: Option<Function>,
    methods: Vec<Function>,
    properties: Vec<Property>,
    on_destroy: Option<(TypeId, Box<dyn Any + Send + Sync>)>,
}

impl Class {
    /// A class for the Rust type `T`, named and described by its
    /// [`PluginClass`] implementation.
    pub fn new<T: PluginClass>() -> Self {
        Self {
            name: T::NAME.to_owned(),
            description: T::DESCRIPTION.to_owned(),
            source: T::SOURCE.map(str::to_owned),
            type_id: TypeId::of::<T>(),
            constructor: None,
            methods: Vec::new(),
            properties: Vec::new(),
            on_destroy: None,
        }
    }

    /// Sets the constructor: a function returning a new instance.
    pub fn constructor(mut self, constructor: Function) -> Self {
        self.constructor = Some(constructor);
        self
    }

    /// Adds a method; its handler reaches the object with
    /// [`Args::receiver`](crate::Args::receiver).
    pub fn method(mut self, method: Function) -> Self {
        self.methods.push(method);
        self
    }

    /// Adds a property.
    pub fn property(mut self, property: Property) -> Self {
        self.properties.push(property);
        self
    }

    /// Runs `hook` on an object when it is destroyed (`object.destroy`, or
    /// shutdown), just before its `Drop`: Scriptling's `__del__`.
    pub fn on_destroy<T: PluginClass>(mut self, hook: fn(&mut T)) -> Self {
        self.on_destroy = Some((TypeId::of::<T>(), Box::new(hook)));
        self
    }

    /// Attaches Scriptling `source` that the host runs in place of the
    /// class it would generate. It must define the class; to reach the
    /// plugin it uses `scriptling.plugin._new_object` and `call_method`.
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The class name.
    pub fn get_name(&self) -> &str {
        &self.name
    }

    /// The help text (from the `PluginClass` description).
    pub fn get_description(&self) -> &str {
        &self.description
    }

    /// The attached Scriptling source, if any (set by [`source`](Class::source)).
    pub fn get_source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// Validates the class and turns it into its runtime entry, the
    /// `index`-th class of its plugin.
    pub(crate) fn into_entry(self, index: usize, problems: &mut Vec<DefinitionError>) -> ClassEntry {
        let class = &self.name;
        let constructor = match self.constructor {
            Some(c) => c.qualify(class.clone()),
            None => {
                problems.push(DefinitionError::NoConstructor { class: class.clone() });
                Function::new(class.clone(), |_: &mut Args| {
                    Err::<(), _>(CallError::new("this class has no constructor"))
                })
            }
        };
        if let Some((hook_type, _)) = &self.on_destroy {
            if *hook_type != self.type_id {
                problems.push(DefinitionError::DestroyHookType { class: class.clone() });
            }
        }
        let mut members: HashMap<String, ExportKind> = HashMap::new();
        let mut claim = |name: &str, kind: ExportKind, problems: &mut Vec<DefinitionError>| {
            let qualified = || format!("{class}.{name}");
            if let Some(reason) = script::identifier_problem(name) {
                problems.push(DefinitionError::Name { kind, name: qualified(), reason });
            } else if name.starts_with("__") && name.ends_with("__") {
                let reason = "is a lifecycle name (use a #[constructor] or an on_destroy hook)";
                problems.push(DefinitionError::Name { kind, name: qualified(), reason });
            }
            if let Some(previous) = members.insert(name.to_owned(), kind) {
                problems.push(DefinitionError::Duplicate { kind, name: qualified(), previous });
            }
        };
        for m in &self.methods {
            claim(m.get_name(), ExportKind::Method, problems);
        }
        for p in &self.properties {
            claim(&p.name, ExportKind::Property, problems);
        }
        let member_list = sorted_names(members.keys().map(String::as_str));

        let constructor_signature = script::signature(class, constructor.get_params());
        let schema = ClassSchemaOwned {
            name: self.name.clone(),
            help: script::help(&constructor_signature, &self.description),
            constructor: (
                constructor.get_name().to_owned(),
                script::help(&constructor_signature, constructor.get_description()),
            ),
            methods: self
                .methods
                .iter()
                .map(|m| {
                    let signature = script::signature(m.get_name(), m.get_params());
                    (m.get_name().to_owned(), script::help(&signature, m.get_description()))
                })
                .collect(),
            properties: self
                .properties
                .iter()
                .map(|p| (p.name.clone(), script::help(&p.name, &p.description), p.setter.is_some()))
                .collect(),
            source: self.source.clone(),
        };
        let methods = self
            .methods
            .into_iter()
            .map(|m| {
                let qualified = format!("{class}.{}", m.get_name());
                (m.get_name().to_owned(), m.qualify(qualified))
            })
            .collect();
        let properties = self
            .properties
            .into_iter()
            .map(|p| {
                let qualified = format!("{class}.{}", p.name);
                let entry = PropertyEntry {
                    getter: p.getter.qualify(qualified.clone()),
                    setter: p.setter.map(|s| s.qualify_setter(qualified)),
                };
                (p.name, entry)
            })
            .collect();
        let info = ClassInfo {
            name: self.name,
            type_id: self.type_id,
            on_destroy: self.on_destroy.map(|(_, hook)| hook),
            index,
        };
        ClassEntry { info: Arc::new(info), constructor, methods, properties, member_list, schema }
    }
}

/// A registered class, as dispatch uses it.
pub(crate) struct ClassEntry {
    /// What the object table needs to know of it.
    pub(crate) info: Arc<ClassInfo>,
    pub(crate) constructor: Function,
    pub(crate) methods: NameMap<Function>,
    pub(crate) properties: NameMap<PropertyEntry>,
    /// Sorted method and property names, for "unknown method" errors.
    pub(crate) member_list: String,
    pub(crate) schema: ClassSchemaOwned,
}

impl ClassEntry {
    pub(crate) fn name(&self) -> &str {
        &self.info.name
    }
}

pub(crate) struct PropertyEntry {
    pub(crate) getter: Function,
    pub(crate) setter: Option<Function>,
}

/// The class's schema data, in declaration order, with help text.
pub(crate) struct ClassSchemaOwned {
    name: String,
    help: String,
    constructor: (String, String),
    methods: Vec<(String, String)>,
    properties: Vec<(String, String, bool)>,
    pub(crate) source: Option<String>,
}

impl ClassSchemaOwned {
    /// A schema-only class written in Scriptling.
    pub(crate) fn script_only(name: &str, source: &str) -> Self {
        Self {
            name: name.to_owned(),
            help: String::new(),
            constructor: (name.to_owned(), String::new()),
            methods: Vec::new(),
            properties: Vec::new(),
            source: Some(source.to_owned()),
        }
    }

    pub(crate) fn schema(&self) -> ClassSchema<'_> {
        fn function((name, description): &(String, String)) -> FunctionSchema<'_> {
            FunctionSchema { name, description, source: None }
        }
        ClassSchema {
            name: &self.name,
            description: &self.help,
            constructor: function(&self.constructor),
            methods: self.methods.iter().map(function).collect(),
            properties: self
                .properties
                .iter()
                .map(|(name, description, settable)| PropertySchema { name, description, settable: *settable })
                .collect(),
            source: self.source.as_deref(),
        }
    }

    /// The wrapper the SDK supplies in script mode.
    pub(crate) fn generated_source(&self, library: &str) -> String {
        fn member((name, help): &(String, String)) -> script::MemberHelp<'_> {
            script::MemberHelp { name, help, settable: false }
        }
        let methods: Vec<_> = self.methods.iter().map(member).collect();
        let properties: Vec<_> = self
            .properties
            .iter()
            .map(|(name, help, settable)| script::MemberHelp { name, help, settable: *settable })
            .collect();
        script::class_wrapper(library, &self.name, &self.help, &methods, &properties)
    }
}
