//! Every supported function shape compiles and registers.

use std::collections::{BTreeMap, HashMap};

use scriptling_plugin::{CallError, Json, Plugin, Value, plugin_fn};

#[plugin_fn]
fn no_args() {}

/// Docs become help text.
#[plugin_fn(name = "renamed")]
fn with_defaults(
    name: String,
    #[arg(default = "Hello")] greeting: String,
    #[arg(default = 3)] times: u64,
    #[arg(default = 0.5)] ratio: f32,
    #[arg(default = true)] loud: bool,
    #[arg(default = None)] suffix: Option<String>,
    #[arg(default = Vec::new())] extra: Vec<i64>,
) -> String {
    format!("{greeting} {name} {times} {ratio} {loud} {suffix:?} {extra:?}")
}

#[plugin_fn]
fn containers(
    list: Vec<Option<i64>>,
    map: HashMap<String, Vec<String>>,
    tree: BTreeMap<String, f64>,
    pair: (String, bool),
    any: Value,
) -> (usize, usize, usize, bool, Value) {
    (list.len(), map.len(), tree.len(), pair.1, any)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Config {
    name: String,
}

#[plugin_fn]
fn serde_types(config: Json<Config>) -> Json<Vec<Config>> {
    Json(vec![config.0])
}

#[plugin_fn]
fn fallible(n: i64) -> Result<i64, String> {
    if n < 0 { Err("negative".into()) } else { Ok(n) }
}

#[plugin_fn]
fn fallible_call_error(n: i64) -> Result<i64, CallError> {
    Ok(n)
}

#[plugin_fn]
async fn asynchronous(n: i64, #[arg(default = 1)] step: i64) -> Result<i64, std::io::Error> {
    Ok(n + step)
}

#[plugin_fn]
fn r#match(r#type: String, mut counter: i64) -> String {
    counter += 1;
    format!("{type}{counter}", type = r#type)
}

pub mod nested {
    use scriptling_plugin::plugin_fn;

    #[plugin_fn]
    pub fn in_module() -> &'static str {
        "ok"
    }
}

fn main() {
    let _ = Plugin::new("p", "1", "")
        .function::<no_args>()
        .function::<with_defaults>()
        .function::<containers>()
        .function::<serde_types>()
        .function::<fallible>()
        .function::<fallible_call_error>()
        .function::<asynchronous>()
        .function::<r#match>()
        .function::<nested::in_module>();
    // The functions stay ordinary Rust functions.
    assert_eq!(r#match("x".into(), 1), "x2");
    assert_eq!(nested::in_module(), "ok");
}
