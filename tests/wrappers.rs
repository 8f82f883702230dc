//! Script wrappers: custom `source`, hidden RPC functions, source-only
//! exports, and the host's script mode, in which the SDK supplies every
//! other wrapper (with help as docstrings) and keeps constants as
//! assignments.

use std::process::Command;

use scriptling_plugin::testing::Host;
use scriptling_plugin::{Plugin, Value, plugin_class, plugin_fn};
use serde_json::{Value as J, json};

/// Assembles the library source exactly as the host's `buildLibrarySource`
/// does (HOST-NOTES A.6): the header, then every function's source in
/// schema order, then every class's, each followed by a blank line.
fn host_library_source(schema: &J) -> String {
    let mut out = String::from("import scriptling.plugin\n\n");
    for item in schema["functions"].as_array().unwrap().iter().chain(schema["classes"].as_array().unwrap()) {
        let source = item["source"].as_str().expect("script mode: every export has source");
        out.push_str(source);
        if !source.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// Scriptling's syntax is Python's for everything the SDK writes: check
/// the assembled module compiles (Scriptling's grammar is Python's; the
/// check needs python3, which CI has).
fn assert_compiles(source: &str) {
    let Ok(out) = Command::new("python3")
        .args(["-c", "import sys; compile(sys.stdin.read(), 'lib', 'exec')"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(source.as_bytes())?;
            child.wait_with_output()
        })
    else {
        // CI's Linux run has python3; the Windows run under Wine has none.
        if cfg!(windows) {
            eprintln!("skipped the syntax check: python3 cannot be started");
            return;
        }
        panic!(
            "python3 is needed to check the generated Scriptling syntax (Scriptling is a Python dialect); install it"
        );
    };
    assert!(
        out.status.success(),
        "the generated library does not compile:\n{source}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn mixed_wrapper_example_supplies_every_wrapper_and_keeps_constants() {
    let host = Host::spawn_example("mixed_wrapper").unwrap();
    let hs = host.handshake().unwrap();
    let schema = &hs["schema"];
    let names: Vec<&str> =
        schema["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["generated", "decorate"], "_decorate is hidden");
    let generated = schema["functions"][0]["source"].as_str().unwrap();
    // The constant leads the first source, so it survives script mode.
    assert!(generated.starts_with("greeting = \"hi\"\n\ndef generated(*args, **kwargs):\n"), "{generated}");
    assert!(generated.contains("\"generated(name)\\n\\nReturns `\\\"generated:<name>\\\"`.\""), "{generated}");
    assert!(
        generated.contains("return scriptling.plugin.call_function(\"plugin.mixed\", \"generated\", *args, **kwargs)")
    );
    assert!(schema["functions"][1]["source"].as_str().unwrap().contains("def decorate(name):"));
    let config = schema["classes"][0]["source"].as_str().unwrap();
    assert!(config.contains("class Config:\n"), "{config}");
    assert!(config.contains("scriptling.plugin._new_object(\"plugin.mixed\", \"Config\", *args, **kwargs)"));
    assert!(
        config.contains(
            "    def get(self, *args, **kwargs):\n        \"get(key)\\n\\nThe value stored under `key`, or None.\"\n"
        ),
        "{config}"
    );
    assert!(config.contains("    def __del__(self):\n        scriptling.plugin.release(self._plugin_remote)\n"));
    assert_compiles(&host_library_source(schema));

    // The RPC side still works, hidden function included.
    assert_eq!(host.call("generated", [Value::from("Ada")]).unwrap(), Value::from("generated:Ada"));
    assert_eq!(host.call("_decorate", [Value::from("Ada")]).unwrap(), Value::from("wrapped:Ada"));
    let err = host.call("decorate", [Value::from("Ada")]).unwrap_err();
    assert_eq!(err.message(), "decorate is written in Scriptling: call it from a script, not over RPC");
    let values: Value = [("k", Value::Int(1))].into_iter().collect();
    let config = host.new_object("Config", [values]).unwrap();
    assert_eq!(host.call_method(&config.id, "get", [Value::from("k")]).unwrap(), Value::Int(1));
}

/// Greets.
#[plugin_fn(wrapper = "def hello(name):\n    return \"hi \" + name\n")]
fn hello(name: String) -> String {
    name
}

#[plugin_fn]
fn plain(x: i64, #[arg(default = 2)] y: i64) -> i64 {
    x * y
}

/// A thing with properties.
#[plugin_class(wrapper = "class Custom:\n    pass\n")]
struct Custom;

#[plugin_class]
impl Custom {
    #[constructor]
    fn new() -> Self {
        Custom
    }
}

/// Generated.
#[plugin_class]
struct Gen {
    v: i64,
}

#[plugin_class]
impl Gen {
    #[constructor]
    fn new(v: i64) -> Self {
        Gen { v }
    }

    /// The value.
    #[property(settable)]
    fn v(&self) -> i64 {
        self.v
    }

    fn set_v(&mut self, v: i64) {
        self.v = v;
    }
}

#[test]
fn script_mode_from_attributes_covers_classes_properties_and_all_constant_kinds() {
    let plugin = Plugin::new("wrap", "1.0.0", "")
        .function::<hello>()
        .function::<plain>()
        .class::<Custom>()
        .class::<Gen>()
        .script_class("Pure", "class Pure:\n    def twice(self, x):\n        return x * 2\n")
        .constant(
            "limits",
            json_value(json!({"max": 3, "ratio": 0.5, "names": ["a", "b\"c"], "none": null, "on": true})),
        );
    let host = Host::in_process(plugin).unwrap();
    let schema = host.handshake().unwrap()["schema"].clone();
    let hello = schema["functions"][0]["source"].as_str().unwrap();
    assert_eq!(
        hello,
        "limits = {\"max\": 3, \"names\": [\"a\", \"b\\\"c\"], \"none\": None, \"on\": True, \"ratio\": 0.5}\n\ndef hello(name):\n    return \"hi \" + name\n"
    );
    assert!(
        schema["functions"][1]["source"]
            .as_str()
            .unwrap()
            .starts_with("def plain(*args, **kwargs):\n    \"plain(x, y=2)\"\n")
    );
    assert_eq!(schema["classes"][0]["source"], "class Custom:\n    pass\n");
    let generated_class = schema["classes"][1]["source"].as_str().unwrap();
    assert!(generated_class.contains("    @v.setter\n    def v(self, value):\n"), "{generated_class}");
    assert_eq!(schema["classes"][2]["name"], "Pure");
    // The constant is still in the schema for hosts that read it.
    assert_eq!(schema["constants"][0]["name"], "limits");
    assert_compiles(&host_library_source(&schema));
    // Source-only classes cannot be constructed over RPC.
    assert_eq!(host.new_object("Pure", []).unwrap_err().message(), "unknown class Pure (available: Custom, Gen)");
}

fn json_value(j: J) -> Value {
    scriptling_plugin::IntoValue::into_value(scriptling_plugin::Json(j)).unwrap()
}

#[test]
fn names_must_be_scriptling_identifiers_and_not_keywords() {
    let err =
        Host::in_process(Plugin::new("k", "1", "").script_function("class", "def x(): pass").constant("my-const", 1))
            .err()
            .expect("invalid");
    assert_eq!(
        err.to_string(),
        "invalid plugin definition: function name \"class\" is a Scriptling keyword; constant name \"my-const\" is not a valid Scriptling identifier"
    );
}

#[test]
fn callbacks_cannot_be_kept_as_script_constants() {
    let plugin = Plugin::new("c", "1", "")
        .script_function("f", "def f(): pass")
        .constant("cb", Value::Callback(scriptling_plugin::CallbackRef::new("cb-1")));
    let err = Host::in_process(plugin).err().expect("invalid");
    assert!(
        err.to_string().contains(
            "constant \"cb\" cannot be kept in script mode: a function cannot be written as Scriptling source"
        ),
        "{err}"
    );
}

/// A hand-built class whose name and members are all wrong: each problem is
/// reported once, typed, with the member named `Class.member`.
#[test]
fn class_definition_problems_are_typed_and_reported_once() {
    use scriptling_plugin::{Args, Class, DefinitionError, ExportKind, Function, PluginClass, ServeError};

    struct Bad;
    impl PluginClass for Bad {
        const NAME: &'static str = "not-a-name";
    }
    let class = Class::new::<Bad>()
        .method(Function::new("__init__", |_: &mut Args| Ok(())))
        .method(Function::new("go", |_: &mut Args| Ok(())))
        .method(Function::new("go", |_: &mut Args| Ok(())));
    let Err(ServeError::Invalid(problems)) = Host::in_process(Plugin::new("c", "1", "").add_class(class)) else {
        panic!("invalid")
    };
    assert_eq!(
        problems,
        [
            DefinitionError::Name {
                kind: ExportKind::Class,
                name: "not-a-name".into(),
                reason: "is not a valid Scriptling identifier"
            },
            DefinitionError::NoConstructor { class: "not-a-name".into() },
            DefinitionError::Name {
                kind: ExportKind::Method,
                name: "not-a-name.__init__".into(),
                reason: "is a lifecycle name (use a #[constructor] or an on_destroy hook)"
            },
            DefinitionError::Duplicate {
                kind: ExportKind::Method,
                name: "not-a-name.go".into(),
                previous: ExportKind::Method
            },
        ]
    );
}
