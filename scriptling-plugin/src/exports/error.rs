//! [`ServeError`]: why a plugin could not be served, and
//! [`DefinitionError`]: what is wrong with its registrations.

use std::fmt;

/// Why a plugin could not be served.
///
/// Its `Debug` form is its message, so `fn main() -> Result<(), ServeError>`
/// reports a readable error when the plugin cannot start.
#[non_exhaustive]
pub enum ServeError {
    /// The registrations are inconsistent (duplicate or invalid names,
    /// constants that cannot be encoded). Every problem is listed, grouped
    /// by kind (the library, then exports, then class members, then script
    /// sources), in registration order within each.
    Invalid(Vec<DefinitionError>),
    /// The transport was configured wrongly (`--listen`, `SCRIPTLING_PLUGIN_*`).
    Config(String),
    /// Setting up the transport failed.
    Io(std::io::Error),
    /// The binary was started with arguments it does not take (see
    /// [`Plugin::run`](crate::Plugin::run)): the problem, then the usage.
    Usage(String),
    /// Answers owed to the host could not be delivered: it stopped reading
    /// the plugin's output at the end of the session.
    Undelivered {
        /// How many answers were lost.
        answers: usize,
        /// Why (what the host did).
        reason: String,
    },
    /// The `log` or `tracing` bridge could not be installed: the process
    /// already has a global logger or subscriber.
    Logging(String),
}

impl fmt::Debug for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Invalid(problems) => {
                f.write_str("invalid plugin definition: ")?;
                for (i, problem) in problems.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{problem}")?;
                }
                Ok(())
            }
            ServeError::Config(problem) => write!(f, "invalid transport configuration: {problem}"),
            ServeError::Io(e) => write!(f, "plugin transport failed: {e}"),
            ServeError::Usage(text) => f.write_str(text),
            ServeError::Logging(why) => write!(f, "cannot send logs to the host: {why}"),
            ServeError::Undelivered { answers, reason } => {
                let plural = if *answers == 1 { "" } else { "s" };
                write!(f, "{answers} answer{plural} to the host could not be delivered: {reason}")
            }
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Io(e) => Some(e),
            ServeError::Invalid(_)
            | ServeError::Config(_)
            | ServeError::Usage(_)
            | ServeError::Undelivered { .. }
            | ServeError::Logging(_) => None,
        }
    }
}

/// One problem with a plugin's registrations, found before anything is
/// served. [`ServeError::Invalid`] lists them all; `Display` gives the
/// sentence the plugin prints.
///
/// ```
/// use scriptling_plugin::{DefinitionError, ExportKind, Plugin, ServeError};
///
/// # #[cfg(feature = "testing")]
/// # {
/// let plugin = Plugin::new("demo", "1.0.0", "").constant("if", 1);
/// let Err(ServeError::Invalid(problems)) = scriptling_plugin::testing::Host::in_process(plugin) else {
///     unreachable!()
/// };
/// let keyword = DefinitionError::Name { kind: ExportKind::Constant, name: "if".into(), reason: "is a Scriptling keyword" };
/// assert_eq!(problems, [keyword]);
/// assert_eq!(problems[0].to_string(), r#"constant name "if" is a Scriptling keyword"#);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefinitionError {
    /// A name Scriptling cannot use: not an identifier, a keyword, a
    /// lifecycle name such as `__init__` for a member, or an empty library
    /// name. A class member is named `Class.member`.
    Name {
        /// What the name is for.
        kind: ExportKind,
        /// The name as registered.
        name: String,
        /// Why it cannot be used (`"is a Scriptling keyword"`).
        reason: &'static str,
    },
    /// Two exports (or two members of one class) share a name.
    Duplicate {
        /// The later registration.
        kind: ExportKind,
        /// The shared name (`Class.member` for members).
        name: String,
        /// What the name was first used for.
        previous: ExportKind,
    },
    /// A class has no `#[constructor]` (or [`Class::constructor`](crate::Class::constructor)).
    NoConstructor {
        /// The class.
        class: String,
    },
    /// A class's destroy hook was written for another Rust type.
    DestroyHookType {
        /// The class.
        class: String,
    },
    /// The same Rust type is registered as two classes.
    SameTypeTwice {
        /// The second class name.
        class: String,
    },
    /// A constant's value cannot be sent to the host.
    Constant {
        /// The constant.
        name: String,
        /// Why (the conversion's message).
        reason: String,
        /// `true` when the value can be sent but not written as Scriptling
        /// source, which a plugin with script exports needs.
        in_script: bool,
    },
    /// The handshake cannot be encoded.
    Handshake(String),
}

/// What a registered name belongs to, in [`DefinitionError`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExportKind {
    /// The library itself.
    Library,
    /// A free function.
    Function,
    /// A class.
    Class,
    /// A constant.
    Constant,
    /// A class's method.
    Method,
    /// A class's property.
    Property,
}

impl fmt::Display for ExportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExportKind::Library => "library",
            ExportKind::Function => "function",
            ExportKind::Class => "class",
            ExportKind::Constant => "constant",
            ExportKind::Method => "method",
            ExportKind::Property => "property",
        })
    }
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefinitionError::Name { kind, name, reason } => write!(f, "{kind} name {name:?} {reason}"),
            DefinitionError::Duplicate { kind, name, previous } => {
                write!(f, "{kind} name {name:?} is already used by a {previous}")
            }
            DefinitionError::NoConstructor { class } => write!(f, "class {class} has no constructor"),
            DefinitionError::DestroyHookType { class } => {
                write!(f, "the destroy hook of class {class} is for a different type")
            }
            DefinitionError::SameTypeTwice { class } => {
                write!(f, "class {class} is registered twice for the same Rust type")
            }
            DefinitionError::Constant { name, reason, in_script: false } => {
                write!(f, "constant {name:?} cannot be sent: {reason}")
            }
            DefinitionError::Constant { name, reason, in_script: true } => {
                write!(f, "constant {name:?} cannot be kept in script mode: {reason}")
            }
            DefinitionError::Handshake(why) => write!(f, "the handshake cannot be encoded: {why}"),
        }
    }
}

impl std::error::Error for DefinitionError {}

impl From<std::io::Error> for ServeError {
    fn from(e: std::io::Error) -> Self {
        ServeError::Io(e)
    }
}

/// So `scriptling_plugin::tracing::init()?` works in a `main` that returns
/// `Result<(), ServeError>`.
#[cfg(feature = "tracing")]
impl From<tracing_subscriber::util::TryInitError> for ServeError {
    fn from(e: tracing_subscriber::util::TryInitError) -> Self {
        ServeError::Logging(format!("{e} (compose scriptling_plugin::tracing::HostLayer with your own layers instead)"))
    }
}

/// So `scriptling_plugin::log::init(..)?` works in a `main` that returns
/// `Result<(), ServeError>`.
#[cfg(feature = "log")]
impl From<log::SetLoggerError> for ServeError {
    fn from(e: log::SetLoggerError) -> Self {
        ServeError::Logging(e.to_string())
    }
}
