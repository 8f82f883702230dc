//! `#[derive(FromValue, IntoValue)]` on user types, driven through real
//! calls: every value form, the options, errors with their path, and help
//! text that shows defaults as Scriptling literals.

use scriptling_plugin::testing::Host;
use scriptling_plugin::{FromValue, IntoValue, Json, Plugin, PluginFunction, Value, plugin_fn};

/// How `find_words` searches.
#[derive(Clone, Debug, PartialEq, FromValue, IntoValue)]
#[scriptling(rename_all = "camelCase")]
struct FindOptions {
    #[scriptling(default = 10)]
    max_hits: i64,
    case_sensitive: Option<bool>,
    #[scriptling(rename = "sep")]
    separator: String,
    #[scriptling(skip)]
    calls: u32,
}

impl Default for FindOptions {
    fn default() -> Self {
        FindOptions { max_hits: 10, case_sensitive: None, separator: " ".into(), calls: 0 }
    }
}

#[derive(Debug, PartialEq, FromValue, IntoValue)]
struct Meters(f64);

#[derive(Debug, PartialEq, FromValue, IntoValue)]
struct Span(i64, i64);

#[derive(Debug, PartialEq, FromValue, IntoValue)]
struct Nothing;

#[derive(Debug, PartialEq, FromValue, IntoValue)]
#[scriptling(rename_all = "lowercase")]
enum Color {
    Red,
    #[scriptling(rename = "verde")]
    Green,
}

#[derive(Debug, PartialEq, FromValue, IntoValue)]
enum Shape {
    Point,
    Circle(f64),
    Rect(f64, f64),
    Label {
        text: String,
        #[scriptling(default)]
        size: i64,
    },
}

/// Raw identifiers lose their `r#` in keys, variants as fields.
#[derive(Debug, PartialEq, FromValue, IntoValue)]
#[allow(non_camel_case_types)]
enum Token {
    r#type,
    r#match { r#in: i64 },
}

/// A bound that implies the traits through a supertrait is enough.
trait Item: FromValue + IntoValue {}
impl Item for i64 {}

#[derive(Debug, PartialEq, FromValue, IntoValue)]
struct Wrapped<T: Item> {
    item: T,
}

#[derive(Debug, PartialEq, FromValue, IntoValue)]
struct Page<T: FromValue + IntoValue> {
    items: Vec<T>,
    next: Option<String>,
}

/// Finds words.
#[plugin_fn]
fn find_words(text: String, #[arg(default = FindOptions::default())] options: FindOptions) -> Vec<String> {
    let words = text.split(options.separator.as_str()).map(str::to_owned);
    words.take(usize::try_from(options.max_hits).unwrap_or(0)).collect()
}

/// Echoes the options back, as the plugin read them.
#[plugin_fn]
fn echo_options(options: FindOptions) -> FindOptions {
    options
}

#[plugin_fn]
fn echo_shape(shape: Shape) -> Shape {
    shape
}

#[plugin_fn]
fn echo_color(color: Color) -> Color {
    color
}

#[plugin_fn]
fn echo_forms(m: Meters, s: Span, n: Nothing) -> (Meters, Span, Nothing) {
    (m, s, n)
}

#[plugin_fn]
fn first_page(page: Page<i64>) -> Page<i64> {
    page
}

#[plugin_fn]
fn echo_token(token: Token, wrapped: Wrapped<i64>) -> (Token, Wrapped<i64>) {
    (token, wrapped)
}

/// Destructures its argument; the keyword comes from `#[arg(name)]`.
#[plugin_fn]
fn limit_of(
    #[arg(name = "options", default = Json(serde_json::json!({"limit": 10})))] Json(opts): Json<serde_json::Value>,
) -> i64 {
    opts["limit"].as_i64().unwrap_or(-1)
}

/// Shows defaults of every kind.
#[plugin_fn]
fn defaults(
    #[arg(default = Some(3))] b: Option<i64>,
    #[arg(default = -1)] c: i64,
    #[arg(default = vec![1, 2])] d: Vec<i64>,
    #[arg(default = "x")] e: String,
    #[arg(default = None)] f: Option<String>,
    #[arg(default = Color::Green)] g: Color,
) -> String {
    format!("{b:?} {c} {d:?} {e} {f:?} {g:?}")
}

fn host() -> Host {
    let plugin = Plugin::new("derives", "1.0.0", "")
        .function::<find_words>()
        .function::<echo_options>()
        .function::<echo_shape>()
        .function::<echo_color>()
        .function::<echo_forms>()
        .function::<first_page>()
        .function::<echo_token>()
        .function::<limit_of>()
        .function::<defaults>();
    Host::in_process(plugin).unwrap()
}

fn dict(pairs: &[(&str, Value)]) -> Value {
    Value::Dict(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
}

fn error(host: &Host, name: &str, args: Vec<Value>) -> String {
    host.call(name, args).unwrap_err().message().to_owned()
}

#[test]
fn named_structs_are_dicts_with_renames_defaults_and_skips() {
    let host = host();
    let given = dict(&[("maxHits", Value::Int(2)), ("sep", Value::from(","))]);
    assert_eq!(
        host.call("echo_options", [given]).unwrap().to_string(),
        r#"{"caseSensitive": None, "maxHits": 2, "sep": ","}"#
    );
    // A missing key with a default takes it; a missing Option is None.
    let given = dict(&[("sep", Value::from(" ")), ("caseSensitive", Value::Bool(true))]);
    assert_eq!(
        host.call("echo_options", [given]).unwrap().to_string(),
        r#"{"caseSensitive": True, "maxHits": 10, "sep": " "}"#
    );
    assert_eq!(
        host.call("find_words", [Value::from("a b c")]).unwrap(),
        Value::List(vec!["a".into(), "b".into(), "c".into()])
    );
}

#[test]
fn errors_name_the_argument_and_the_path_inside_it() {
    let host = host();
    let bad = dict(&[("maxHits", Value::from("ten")), ("sep", Value::from(","))]);
    assert_eq!(
        error(&host, "echo_options", vec![bad]),
        "echo_options(): argument 'options'['maxHits'] must be an int, got string"
    );
    let misspelt = dict(&[("maxHit", Value::Int(1)), ("sep", Value::from(","))]);
    assert_eq!(
        error(&host, "echo_options", vec![misspelt]),
        "echo_options(): argument 'options' has unknown key 'maxHit'; the keys are 'maxHits', 'caseSensitive', 'sep'"
    );
    assert_eq!(
        error(&host, "echo_options", vec![dict(&[])]),
        "echo_options(): argument 'options' is missing key 'sep'"
    );
    assert_eq!(
        error(&host, "echo_options", vec![Value::Int(1)]),
        "echo_options(): argument 'options' must be a dict, got int"
    );
    let nested = dict(&[("items", Value::List(vec![Value::Int(1), Value::from("2")]))]);
    assert_eq!(
        error(&host, "first_page", vec![nested]),
        "first_page(): argument 'page'['items'][1] must be an int, got string"
    );
}

#[test]
fn ints_and_floats_stay_exact() {
    let host = host();
    let big = dict(&[("maxHits", Value::Int(i64::MAX)), ("sep", Value::from(","))]);
    let back = host.call("echo_options", [big]).unwrap();
    let Value::Dict(entries) = back else { panic!() };
    assert_eq!(entries["maxHits"], Value::Int(i64::MAX));
    let forms =
        host.call("echo_forms", [Value::Int(2), Value::List(vec![Value::Int(1), Value::Int(2)]), Value::Null]).unwrap();
    assert_eq!(forms.to_string(), "[2.0, [1, 2], None]");
    assert_eq!(
        error(&host, "echo_forms", vec![Value::Float(1.0), Value::List(vec![Value::Int(1)]), Value::Null]),
        "echo_forms(): argument 's' must be a list of 2 items, got a list of 1"
    );
}

#[test]
fn enums_are_strings_or_one_key_dicts() {
    let host = host();
    assert_eq!(host.call("echo_color", [Value::from("verde")]).unwrap(), Value::from("verde"));
    assert_eq!(host.call("echo_color", [Value::from("red")]).unwrap(), Value::from("red"));
    assert_eq!(
        error(&host, "echo_color", vec![Value::from("blue")]),
        "echo_color(): argument 'color' names no variant: got 'blue', expected one of 'red', 'verde'"
    );
    assert_eq!(
        error(&host, "echo_color", vec![Value::Int(1)]),
        "echo_color(): argument 'color' must be one of 'red', 'verde', got int"
    );
    for shape in [
        Value::from("Point"),
        dict(&[("Circle", Value::Float(1.5))]),
        dict(&[("Rect", Value::List(vec![Value::Float(2.0), Value::Float(3.0)]))]),
        dict(&[("Label", dict(&[("text", Value::from("hi")), ("size", Value::Int(4))]))]),
    ] {
        assert_eq!(host.call("echo_shape", [shape.clone()]).unwrap(), shape);
    }
    assert_eq!(
        error(&host, "echo_shape", vec![dict(&[("Label", dict(&[("text", Value::Int(1))]))])]),
        "echo_shape(): argument 'shape'['Label']['text'] must be a string, got int"
    );
    assert_eq!(
        error(&host, "echo_shape", vec![Value::from("Circle")]),
        "echo_shape(): argument 'shape' gives variant 'Circle' without its data: write {'Circle': ...}"
    );
    assert_eq!(
        error(&host, "echo_shape", vec![dict(&[("Point", Value::Null)])]),
        "echo_shape(): argument 'shape' gives data to variant 'Point', which has none: write 'Point'"
    );
}

#[test]
fn raw_identifiers_and_supertrait_bounds() {
    let host = host();
    let wrapped = dict(&[("item", Value::Int(3))]);
    for token in [Value::from("type"), dict(&[("match", dict(&[("in", Value::Int(2))]))])] {
        let echoed = host.call("echo_token", [token.clone(), wrapped.clone()]).unwrap();
        assert_eq!(echoed, Value::List(vec![token, wrapped.clone()]));
    }
}

fn shown_defaults(function: scriptling_plugin::Function) -> Vec<(String, Option<String>)> {
    function.get_params().iter().map(|p| (p.name().to_owned(), p.default().map(str::to_owned))).collect()
}

#[test]
fn help_shows_defaults_as_scriptling_literals() {
    let shown = shown_defaults(<defaults as PluginFunction>::function());
    let expected = [("b", "3"), ("c", "-1"), ("d", "[1, 2]"), ("e", "\"x\""), ("f", "None"), ("g", "\"verde\"")];
    assert_eq!(shown, expected.map(|(n, d)| (n.to_owned(), Some(d.to_owned()))));
    assert_eq!(
        shown_defaults(<limit_of as PluginFunction>::function()),
        [("options".to_owned(), Some(r#"{"limit": 10}"#.to_owned()))]
    );
    assert_eq!(
        shown_defaults(<find_words as PluginFunction>::function())[1].1.as_deref(),
        Some(r#"{"maxHits": 10, "caseSensitive": None, "sep": " "}"#),
        "in field order, not the dict's sorted order"
    );
    // The host sees them in the help text.
    let hs = host().handshake().unwrap();
    let functions = hs["schema"]["functions"].as_array().unwrap();
    let help = |name: &str| functions.iter().find(|f| f["name"] == name).unwrap()["description"].to_string();
    assert!(
        help("defaults").contains(r#"defaults(b=3, c=-1, d=[1, 2], e=\"x\", f=None, g=\"verde\")"#),
        "{}",
        help("defaults")
    );
}

#[test]
fn a_destructured_parameter_takes_its_keyword_from_arg_name() {
    let host = host();
    let options = [("options".to_owned(), dict(&[("limit", Value::Int(4))]))].into();
    assert_eq!(host.call_kw("limit_of", [], options).unwrap(), Value::Int(4));
    assert_eq!(host.call("limit_of", []).unwrap(), Value::Int(10));
}

/// Search options, written once: missing keys come from `Default`.
#[derive(Debug, PartialEq, FromValue, IntoValue)]
#[scriptling(default)]
struct Search {
    limit: i64,
    fuzzy: bool,
    #[scriptling(default = 7)]
    own_default: i64,
    tags: Vec<String>,
}

impl Default for Search {
    fn default() -> Self {
        Search { limit: 20, fuzzy: true, own_default: 0, tags: vec!["all".into()] }
    }
}

/// Runs a search; `options` may be left out or given in part.
#[plugin_fn]
fn search(#[arg(default)] options: Search) -> String {
    format!("{options:?}")
}

#[test]
fn a_container_default_fills_missing_keys_and_arg_default_takes_default() {
    let host = Host::in_process(Plugin::new("d", "1", "").function::<search>()).unwrap();
    let out = |args: Vec<Value>| host.call("search", args).unwrap().to_string();
    assert_eq!(
        out(vec![]),
        r#""Search { limit: 20, fuzzy: true, own_default: 0, tags: [\"all\"] }""#,
        "the parameter's default is Search::default()"
    );
    let partial: Value = [("limit", Value::Int(5))].into_iter().collect();
    assert_eq!(out(vec![partial]), r#""Search { limit: 5, fuzzy: true, own_default: 7, tags: [\"all\"] }""#);
    let wrong: Value = [("fuzzy", Value::from("yes"))].into_iter().collect();
    assert_eq!(
        host.call("search", [wrong]).unwrap_err().message(),
        "search(): argument 'options'['fuzzy'] must be a bool, got string"
    );
    // Help text shows the real default, from the value, in field order.
    let help = <search as PluginFunction>::function();
    assert_eq!(
        help.get_params()[0].default(),
        Some(r#"{"limit": 20, "fuzzy": True, "own_default": 0, "tags": ["all"]}"#)
    );
}
