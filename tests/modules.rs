//! The API as a user writes it first. `#[plugin_module]`: every marked item in the module is exported, so a
//! forgotten registration cannot happen (issue 21, item 2).

// Owned parameters are what the attributes expect; they allow this pedantic
// lint on exported items (CI runs clippy with -D warnings on every target).
#![deny(clippy::needless_pass_by_value)]

use scriptling_plugin::testing::Host;
use scriptling_plugin::{Plugin, Value, plugin_module};

#[plugin_module]
mod textkit {
    use scriptling_plugin::{CallError, Callback, plugin_class, plugin_fn};

    /// How many words `text` has.
    #[plugin_fn]
    fn count(text: String) -> usize {
        text.split_whitespace().count()
    }

    /// Calls `on_word` for each word; ignores what it returns.
    #[plugin_fn]
    fn each_word(text: String, on_word: Callback) -> Result<(), CallError> {
        for word in text.split_whitespace() {
            on_word.call((word,))?;
        }
        Ok(())
    }

    /// Never built (`cfg(any())` is false): its registration goes with it.
    #[cfg(any())]
    #[plugin_fn]
    fn absent() {}

    /// Words seen so far.
    #[plugin_class]
    struct Index {
        words: Vec<String>,
    }

    #[plugin_class]
    impl Index {
        #[constructor]
        fn new() -> Self {
            Index { words: Vec::new() }
        }

        /// Adds the words of `text`.
        fn add(&mut self, text: String) -> usize {
            self.words.extend(text.split_whitespace().map(str::to_owned));
            self.words.len()
        }
    }

    /// The version of the word rules.
    #[constant]
    const RULES: i64 = 3;

    /// Not marked: stays a Rust-only helper.
    pub(super) fn helper() -> &'static str {
        "rust only"
    }
}

fn plugin() -> Plugin {
    Plugin::new("textkit", "1.0.0", "Text tools").exports(textkit::exports)
}

#[test]
fn every_marked_item_is_exported_and_nothing_else() {
    let host = Host::in_process(plugin()).unwrap();
    assert_eq!(host.call("count", [Value::from("a b c")]).unwrap(), Value::Int(3));
    let index = host.new_object("Index", []).unwrap();
    assert_eq!(host.call_method(&index.id, "add", [Value::from("x y")]).unwrap(), Value::Int(2));
    let schema = &host.handshake().unwrap()["schema"];
    let names: Vec<&str> =
        schema["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["count", "each_word"]);
    assert_eq!(schema["constants"], serde_json::json!([{"name": "RULES", "value": {"type": "int", "value": 3}}]));
    assert_eq!(textkit::helper(), "rust only");
}

#[test]
fn a_callback_result_is_ignored_by_the_obvious_line() {
    let host = Host::in_process(plugin()).unwrap();
    host.on_callback(|_, args, _| Ok(Value::from(format!("seen {}", args[0]))));
    let cb = Value::Callback(scriptling_plugin::CallbackRef::new("cb-1"));
    assert_eq!(host.call("each_word", [Value::from("a b"), cb]).unwrap(), Value::Null);
}

/// Sleeps, so a short request timeout expires first.
#[scriptling_plugin::plugin_fn]
fn slow() {
    std::thread::sleep(std::time::Duration::from_millis(500));
}

#[test]
fn a_shared_host_can_change_its_timeout() {
    // `set_timeout` takes `&self`, like `set_jitter`: no `mut` binding needed.
    let host = Host::in_process(Plugin::new("slow", "1", "").function::<slow>()).unwrap();
    host.set_timeout(std::time::Duration::from_millis(50));
    let err = host.call("slow", []).unwrap_err();
    assert!(err.to_string().contains("timed out") || err.to_string().contains("within"), "{err}");
}
