//! Classes and remote objects, in process: schema, object.new /
//! call_method / destroy, properties, object references as arguments and
//! results, lifecycle hooks, and per-object concurrency.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use scriptling_plugin::testing::Host;
use scriptling_plugin::{CallError, Object, Plugin, Value, plugin_class, plugin_fn};
use serde_json::json;

/// Lifecycle events of `Tracked` objects, tagged per test, and a signal
/// for each one recorded.
static EVENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static RECORDED: Condvar = Condvar::new();

fn record(event: String) {
    EVENTS.lock().unwrap().push(event);
    RECORDED.notify_all();
}

fn events(tag: &str) -> Vec<String> {
    EVENTS.lock().unwrap().iter().filter(|e| e.ends_with(&format!(":{tag}"))).cloned().collect()
}

/// Waits until `tag` has `count` events, and returns them.
fn wait_events(tag: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all = EVENTS.lock().unwrap();
    loop {
        let mine: Vec<String> = all.iter().filter(|e| e.ends_with(&format!(":{tag}"))).cloned().collect();
        if mine.len() >= count {
            return mine;
        }
        let left = deadline.checked_duration_since(Instant::now()).expect("the events arrive in time");
        all = RECORDED.wait_timeout(all, left).unwrap().0;
    }
}

/// An object that records its destroy hook and its Drop.
#[plugin_class]
struct Tracked {
    tag: String,
    value: i64,
}

#[plugin_class]
impl Tracked {
    /// Creates a tracked object.
    #[constructor]
    fn new(tag: String, #[arg(default = 0)] value: i64) -> Result<Self, String> {
        if tag.is_empty() {
            return Err("Tracked needs a non-empty tag".into());
        }
        Ok(Tracked { tag, value })
    }

    /// Adds and returns the new value.
    fn add(&mut self, #[arg(default = 1)] amount: i64) -> i64 {
        self.value += amount;
        self.value
    }

    /// Sleeps holding the object shared, then returns the value.
    fn peek_slowly(&self, ms: u64) -> i64 {
        record(format!("peek:{}", self.tag));
        std::thread::sleep(Duration::from_millis(ms));
        self.value
    }

    /// Sleeps holding the object exclusively, then increments.
    fn bump_slowly(&mut self, ms: u64) -> i64 {
        let before = self.value;
        std::thread::sleep(Duration::from_millis(ms));
        self.value = before + 1;
        self.value
    }

    /// An async method that needs exclusive access.
    async fn add_later(&mut self, amount: i64) -> i64 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.value += amount;
        self.value
    }

    /// An async read.
    async fn read_later(&self) -> i64 {
        tokio::task::yield_now().await;
        self.value
    }

    /// The value, settable.
    #[property(settable)]
    fn value(&self) -> i64 {
        self.value
    }

    fn set_value(&mut self, value: i64) {
        self.value = value;
    }

    /// A read-only label.
    #[property]
    fn label(&self) -> String {
        format!("tracked:{}", self.value)
    }

    /// Exported under another name.
    #[plugin_fn(name = "twice")]
    fn double_value(&self) -> i64 {
        self.value * 2
    }

    /// Adds `other`'s value to this one's (`c.merge(c)` reaches its own object).
    fn merge(&mut self, other: Object<Tracked>) -> Result<i64, CallError> {
        let more = other.read()?.value;
        self.value += more;
        Ok(self.value)
    }

    /// The async form of `merge`.
    async fn merge_later(&mut self, other: Object<Tracked>) -> Result<i64, CallError> {
        let more = other.read_async().await?.value;
        self.value += more;
        Ok(self.value)
    }

    /// Reads `other` while reading this one (shared twice is fine).
    fn sum_with(&self, other: Object<Tracked>) -> Result<i64, CallError> {
        Ok(self.value + other.read()?.value)
    }

    /// Returns a new object.
    fn spawn_child(&self) -> Tracked {
        Tracked { tag: format!("{}-child", self.tag), value: self.value }
    }

    #[del]
    fn close(&mut self) {
        record(format!("del:{}", self.tag));
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        record(format!("drop:{}", self.tag));
    }
}

#[plugin_class(name = "Other")]
struct OtherThing;

#[plugin_class]
impl OtherThing {
    #[constructor]
    fn make() -> Self {
        OtherThing
    }

    fn ping(&self) -> &'static str {
        "pong"
    }
}

/// Adds one object's value to another's.
#[plugin_fn]
fn transfer(from: Object<Tracked>, to: Object<Tracked>, amount: i64) -> Result<i64, CallError> {
    from.write()?.value -= amount;
    let mut to = to.write()?;
    to.value += amount;
    Ok(to.value)
}

#[plugin_fn]
fn make_tracked(tag: String) -> Tracked {
    Tracked { tag, value: 100 }
}

#[plugin_fn]
fn maybe_value(obj: Option<Object<Tracked>>) -> Result<Option<i64>, CallError> {
    obj.map(|o| o.read().map(|t| t.value)).transpose()
}

/// A shape whose setters validate and take differently named parameters.
#[plugin_class]
struct Polygon {
    name: String,
    points: Vec<f64>,
}

#[plugin_class]
impl Polygon {
    #[constructor]
    fn new() -> Self {
        Polygon { name: "shape".into(), points: Vec::new() }
    }

    /// The name; never empty.
    #[property(settable)]
    fn name(&self) -> String {
        self.name.clone()
    }

    fn set_name(&mut self, new_name: String) -> Result<(), String> {
        if new_name.is_empty() {
            return Err("a polygon needs a name".into());
        }
        self.name = new_name;
        Ok(())
    }

    /// The coordinates.
    #[property(settable)]
    fn points(&self) -> Vec<f64> {
        self.points.clone()
    }

    fn set_points(&mut self, coordinates: Vec<f64>) {
        self.points = coordinates;
    }

    /// The area (read-only).
    #[property]
    fn area(&self) -> f64 {
        0.0
    }
}

/// What the script sees when an assignment fails: the property and its
/// class, never the setter's Rust parameter (issue 29, item 10).
#[test]
fn failed_assignments_name_the_property_and_class() {
    let host = Host::in_process(Plugin::new("geo", "1.0.0", "").class::<Polygon>()).unwrap();
    let p = host.new_object("Polygon", []).unwrap();
    let set = |property: &str, value: Value| host.call_method(&p.id, property, [value]).unwrap_err().to_string();
    assert_eq!(
        set("name", Value::Int(42)),
        "can't set attribute 'name' of Polygon: the value must be a string, got int (-32000)"
    );
    assert_eq!(set("name", s("")), "can't set attribute 'name' of Polygon: a polygon needs a name (-32000)");
    assert_eq!(
        set("points", Value::List(vec![Value::Float(1.0), s("x")])),
        "can't set attribute 'points' of Polygon: the value[1] must be a float, got string (-32000)"
    );
    assert_eq!(set("area", Value::Int(5)), "can't set attribute 'area' of Polygon: property is read-only (-32000)");
    // Set properly, they hold.
    host.call_method(&p.id, "name", [s("square")]).unwrap();
    assert_eq!(host.call_method(&p.id, "name", []).unwrap(), s("square"));
}

fn plugin() -> Plugin {
    Plugin::new("classes", "1.0.0", "Class tests")
        .function::<transfer>()
        .function::<make_tracked>()
        .function::<maybe_value>()
        .class::<Tracked>()
        .class::<OtherThing>()
}

fn host() -> Host {
    Host::in_process(plugin()).unwrap()
}

fn s(text: &str) -> Value {
    Value::from(text)
}

fn remote(id: &str) -> Value {
    Value::Object(scriptling_plugin::ObjectRef::new("plugin.classes", "Tracked", id))
}

#[test]
fn schema_lists_classes_in_declaration_order() {
    let hs = host().handshake().unwrap();
    let class = &hs["schema"]["classes"][0];
    assert_eq!(class["name"], "Tracked");
    // Help text: the Scriptling signature, then the doc comment.
    assert_eq!(class["description"], "Tracked(tag, value=0)\n\nAn object that records its destroy hook and its Drop.");
    assert_eq!(
        class["constructor"],
        json!({"name": "Tracked", "description": "Tracked(tag, value=0)\n\nCreates a tracked object."})
    );
    assert_eq!(class["methods"][0]["description"], "add(amount=1)\n\nAdds and returns the new value.");
    let methods: Vec<&str> = class["methods"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        [
            "add",
            "peek_slowly",
            "bump_slowly",
            "add_later",
            "read_later",
            "twice",
            "merge",
            "merge_later",
            "sum_with",
            "spawn_child"
        ]
    );
    assert_eq!(
        class["properties"],
        json!([
            {"name": "value", "description": "value\n\nThe value, settable.", "settable": true},
            {"name": "label", "description": "label\n\nA read-only label.", "settable": false}
        ])
    );
    assert_eq!(hs["schema"]["classes"][1]["name"], "Other");
}

#[test]
fn objects_are_created_called_and_destroyed() {
    let host = host();
    let a = host.new_object("Tracked", [s("life")]).unwrap();
    assert_eq!((a.library.as_str(), a.class.as_str()), ("classes", "Tracked"));
    assert!(a.id.parse::<u64>().is_ok(), "string id: {}", a.id);
    // The result is the bare reference, not a tagged value.
    let raw =
        host.request("object.new", json!({"class": "Tracked", "args": [{"type": "string", "value": "raw"}]})).unwrap();
    assert_eq!(raw.as_object().unwrap().keys().collect::<Vec<_>>(), ["class", "id", "library"]);

    assert_eq!(host.call_method(&a.id, "add", [Value::Int(5)]).unwrap(), Value::Int(5));
    assert_eq!(host.call_method(&a.id, "add", []).unwrap(), Value::Int(6));
    let kw = BTreeMap::from([("amount".to_string(), Value::Int(4))]);
    assert_eq!(host.call_method_kw(&a.id, "add", [], kw).unwrap(), Value::Int(10));
    assert_eq!(host.call_method(&a.id, "twice", []).unwrap(), Value::Int(20));
    assert_eq!(host.call_method(&a.id, "add_later", [Value::Int(1)]).unwrap(), Value::Int(11));
    assert_eq!(host.call_method(&a.id, "read_later", []).unwrap(), Value::Int(11));

    host.destroy(&a.id).unwrap();
    assert_eq!(events("life"), ["del:life", "drop:life"], "the hook runs first, then Drop, once");
    host.destroy(&a.id).unwrap();
    host.destroy("999999").unwrap();
    host.destroy("not-a-number").unwrap();
    assert_eq!(events("life"), ["del:life", "drop:life"], "destroy is idempotent");
    let err = host.call_method(&a.id, "add", []).unwrap_err();
    let alive = host.live_objects().unwrap();
    let plural = if alive == 1 { "" } else { "s" };
    assert_eq!(
        err.message(),
        format!("unknown object {} (it does not exist or has been destroyed; {alive} object{plural} alive)", a.id)
    );
}

#[test]
fn ids_are_never_reused() {
    let host = host();
    let mut ids = Vec::new();
    for i in 0..20 {
        let r = host.new_object("Tracked", [s(&format!("ids{i}"))]).unwrap();
        host.destroy(&r.id).unwrap();
        ids.push(r.id.parse::<u64>().unwrap());
    }
    let mut sorted = ids.clone();
    sorted.dedup();
    assert_eq!(sorted.len(), 20);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn properties_get_and_set_through_call_method() {
    let host = host();
    let a = host.new_object("Tracked", [s("props"), Value::Int(5)]).unwrap();
    assert_eq!(host.call_method(&a.id, "value", []).unwrap(), Value::Int(5));
    assert_eq!(host.call_method(&a.id, "value", [Value::Int(7)]).unwrap(), Value::Null);
    assert_eq!(host.call_method(&a.id, "label", []).unwrap(), s("tracked:7"));
    let err = host.call_method(&a.id, "label", [s("x")]).unwrap_err();
    assert_eq!(err.message(), "can't set attribute 'label' of Tracked: property is read-only");
    // An assignment names the property, not the setter's parameter.
    let err = host.call_method(&a.id, "value", [s("x")]).unwrap_err();
    assert_eq!(err.message(), "can't set attribute 'value' of Tracked: the value must be an int, got string");
    let err = host.call_method(&a.id, "value", [Value::Int(1), Value::Int(2)]).unwrap_err();
    assert_eq!(
        err.message(),
        "property 'value' of Tracked takes no arguments to get or one positional argument to set, got 2"
    );
    let kw = BTreeMap::from([("x".to_string(), Value::Int(1))]);
    let err = host.call_method_kw(&a.id, "value", [], kw).unwrap_err();
    assert_eq!(err.message(), "property 'value' of Tracked does not accept keyword arguments");
}

#[test]
fn unknown_names_list_what_is_available() {
    let host = host();
    let a = host.new_object("Tracked", [s("names")]).unwrap();
    let err = host.call_method(&a.id, "nope", []).unwrap_err();
    assert_eq!(
        err.message(),
        "unknown method nope on Tracked (available: add, add_later, bump_slowly, label, merge, merge_later, peek_slowly, read_later, spawn_child, sum_with, twice, value)"
    );
    // Lifecycle names, the Rust names of hooks, setters and renamed methods are not callable.
    for hidden in ["__init__", "__del__", "new", "close", "set_value", "double_value", "Tracked"] {
        let err = host.call_method(&a.id, hidden, []).unwrap_err();
        assert!(err.message().starts_with(&format!("unknown method {hidden} on Tracked")), "{hidden}: {err}");
    }
    let err = host.new_object("Nope", []).unwrap_err();
    assert_eq!(err.message(), "unknown class Nope (available: Other, Tracked)");
}

#[test]
fn constructor_arguments_and_errors() {
    let host = host();
    let err = host.new_object("Tracked", [Value::Int(3)]).unwrap_err();
    assert_eq!(err.message(), "Tracked(): argument 'tag' must be a string, got int");
    let err = host.new_object("Tracked", [s("")]).unwrap_err();
    assert_eq!(err.message(), "Tracked(): Tracked needs a non-empty tag");
    let err = host.new_object("Tracked", []).unwrap_err();
    assert_eq!(err.message(), "Tracked(): missing required argument 'tag'");
    // Keyword arguments reach the constructor too.
    let kw = BTreeMap::from([("value".to_string(), Value::Int(4))]);
    let a = host.new_object_kw("Tracked", [s("kw")], kw).unwrap();
    assert_eq!(host.call_method(&a.id, "value", []).unwrap(), Value::Int(4));
    let kw = BTreeMap::from([("tag".to_string(), s("by-name"))]);
    let b = host.new_object_kw("Tracked", [], kw).unwrap();
    assert_eq!(host.call_method(&b.id, "label", []).unwrap(), s("tracked:0"));
    let kw = BTreeMap::from([("nope".to_string(), Value::Int(1))]);
    let err = host.new_object_kw("Tracked", [s("x")], kw).unwrap_err();
    assert_eq!(err.message(), "Tracked(): unexpected keyword argument 'nope' (parameters: tag, value)");
    let other = host.new_object("Other", []).unwrap();
    assert_eq!(other.class, "Other");
    assert_eq!(host.call_method(&other.id, "ping", []).unwrap(), s("pong"));
}

#[test]
fn objects_pass_as_arguments_and_come_back_as_results() {
    let host = host();
    let a = host.new_object("Tracked", [s("refa"), Value::Int(10)]).unwrap();
    let b = host.new_object("Tracked", [s("refb"), Value::Int(1)]).unwrap();
    assert_eq!(host.call("transfer", [remote(&a.id), remote(&b.id), Value::Int(4)]).unwrap(), Value::Int(5));
    assert_eq!(host.call_method(&a.id, "value", []).unwrap(), Value::Int(6));
    assert_eq!(host.call("maybe_value", [Value::Null]).unwrap(), Value::Null);
    assert_eq!(host.call("maybe_value", [remote(&a.id)]).unwrap(), Value::Int(6));

    let other = host.new_object("Other", []).unwrap();
    let err = host.call("transfer", [remote(&a.id), remote(&other.id), Value::Int(1)]).unwrap_err();
    assert_eq!(err.message(), "transfer(): argument 'to' must be a Tracked object, got a Other object");
    host.destroy(&b.id).unwrap();
    let err = host.call("transfer", [remote(&a.id), remote(&b.id), Value::Int(1)]).unwrap_err();
    assert_eq!(
        err.message(),
        format!(
            "transfer(): argument 'to' must be a live Tracked object, but object {} does not exist or has been destroyed",
            b.id
        )
    );
    let err = host.call("transfer", [s("x"), remote(&a.id), Value::Int(1)]).unwrap_err();
    assert_eq!(err.message(), "transfer(): argument 'from' must be a Tracked object, got string");

    // Returned instances join the table.
    let made = host.call("make_tracked", [s("made")]).unwrap();
    let Value::Object(made) = made else { panic!("{made:?}") };
    assert_eq!((made.library.as_str(), made.class.as_str()), ("classes", "Tracked"));
    assert_eq!(host.call_method(&made.id, "value", []).unwrap(), Value::Int(100));
    let Value::Object(child) = host.call_method(&made.id, "spawn_child", []).unwrap() else { panic!() };
    assert_eq!(host.call_method(&child.id, "label", []).unwrap(), s("tracked:100"));
}

#[test]
fn shutdown_drops_every_live_object_exactly_once() {
    let host = host();
    for i in 0..5 {
        host.new_object("Tracked", [s(&format!("shut{i}"))]).unwrap();
    }
    let gone = host.new_object("Tracked", [s("shutgone")]).unwrap();
    host.destroy(&gone.id).unwrap();
    host.shutdown().unwrap();
    host.wait(Duration::from_secs(10)).unwrap();
    for i in 0..5 {
        assert_eq!(events(&format!("shut{i}")), [format!("del:shut{i}"), format!("drop:shut{i}")]);
    }
    assert_eq!(events("shutgone"), ["del:shutgone", "drop:shutgone"]);
}

#[test]
fn eof_drops_every_live_object_exactly_once() {
    let host = host();
    for i in 0..3 {
        host.new_object("Tracked", [s(&format!("eof{i}"))]).unwrap();
    }
    host.close_input();
    host.wait(Duration::from_secs(10)).unwrap();
    for i in 0..3 {
        assert_eq!(events(&format!("eof{i}")), [format!("del:eof{i}"), format!("drop:eof{i}")]);
    }
}

#[test]
fn destroy_during_a_call_defers_the_drop_until_the_call_ends() {
    let host = host();
    let a = host.new_object("Tracked", [s("busy"), Value::Int(1)]).unwrap();
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| host.call_method(&a.id, "peek_slowly", [Value::Int(300)]));
        wait_events("busy", 1);
        host.destroy(&a.id).unwrap();
        assert_eq!(events("busy"), ["peek:busy"], "not dropped while a call uses it");
        assert_eq!(slow.join().unwrap().unwrap(), Value::Int(1));
    });
    // The call's end drops the object (on the call's own thread, after its answer).
    assert_eq!(wait_events("busy", 3), ["peek:busy", "del:busy", "drop:busy"]);
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

#[test]
fn shared_calls_overlap_and_exclusive_calls_serialize() {
    let host = host();
    let a = host.new_object("Tracked", [s("conc")]).unwrap();
    let b = host.new_object("Tracked", [s("conc2")]).unwrap();
    // Four &self calls on one object run together.
    let (_, shared) = timed(|| {
        std::thread::scope(|scope| {
            let calls: Vec<_> =
                (0..4).map(|_| scope.spawn(|| host.call_method(&a.id, "peek_slowly", [Value::Int(300)]))).collect();
            calls.into_iter().for_each(|c| assert!(c.join().unwrap().is_ok()));
        });
    });
    assert!(shared < Duration::from_millis(1000), "&self calls did not overlap: {shared:?}");
    // Four &mut self calls on one object take turns, and none loses an update.
    let (_, exclusive) = timed(|| {
        std::thread::scope(|scope| {
            let calls: Vec<_> =
                (0..4).map(|_| scope.spawn(|| host.call_method(&a.id, "bump_slowly", [Value::Int(100)]))).collect();
            calls.into_iter().for_each(|c| assert!(c.join().unwrap().is_ok()));
        });
    });
    assert!(exclusive >= Duration::from_millis(400), "&mut self calls overlapped: {exclusive:?}");
    assert_eq!(host.call_method(&a.id, "value", []).unwrap(), Value::Int(4));
    // &mut self calls on different objects run together.
    let (_, different) = timed(|| {
        std::thread::scope(|scope| {
            let x = scope.spawn(|| host.call_method(&a.id, "bump_slowly", [Value::Int(300)]));
            let y = scope.spawn(|| host.call_method(&b.id, "bump_slowly", [Value::Int(300)]));
            assert!(x.join().unwrap().is_ok() && y.join().unwrap().is_ok());
        });
    });
    assert!(different < Duration::from_millis(550), "different objects serialized: {different:?}");
}

#[test]
fn many_async_exclusive_calls_lose_no_update() {
    let host = host();
    let a = host.new_object("Tracked", [s("asyncmut")]).unwrap();
    std::thread::scope(|scope| {
        let calls: Vec<_> =
            (0..50).map(|_| scope.spawn(|| host.call_method(&a.id, "add_later", [Value::Int(1)]))).collect();
        calls.into_iter().for_each(|c| assert!(c.join().unwrap().is_ok()));
    });
    assert_eq!(host.call_method(&a.id, "value", []).unwrap(), Value::Int(50));
}

#[test]
fn a_call_that_reaches_its_own_object_fails_at_once_naming_the_borrow() {
    let host = Host::in_process(plugin()).unwrap();
    // Waiting on itself used to hang for ever: a timeout makes that a failure.
    host.set_timeout(Duration::from_secs(10));
    let c = host.new_object("Tracked", [Value::from("reentry"), Value::Int(3)]).unwrap();
    let expected = format!(
        "Tracked.merge(): Tracked object {} is already mutably borrowed by this call, so it cannot be read until \
         that borrow ends",
        c.id
    );
    assert_eq!(host.call_method(&c.id, "merge", [remote(&c.id)]).unwrap_err().message(), expected);
    let err = host.call_method(&c.id, "merge_later", [remote(&c.id)]).unwrap_err();
    assert_eq!(err.message(), expected.replace("merge()", "merge_later()"));
    // The object is not left held: later calls on it run.
    assert_eq!(host.call_method(&c.id, "value", []).unwrap(), Value::Int(3));
    // Shared twice by one call is fine.
    assert_eq!(host.call_method(&c.id, "sum_with", [remote(&c.id)]).unwrap(), Value::Int(6));
    // Two different objects merge as ever.
    let d = host.new_object("Tracked", [Value::from("reentry-2"), Value::Int(4)]).unwrap();
    assert_eq!(host.call_method(&c.id, "merge", [remote(&d.id)]).unwrap(), Value::Int(7));
}

#[test]
fn a_waiting_writer_is_served_while_readers_keep_arriving() {
    let host = Arc::new(Host::in_process(plugin().max_sync_threads(64)).unwrap());
    let c = host.new_object("Tracked", [Value::from("fair"), Value::Int(1)]).unwrap();
    // Sixteen callers keep the object read-held all the time, 20 ms each,
    // until the writer is through (or ten seconds pass).
    let writer_done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(10);
    let readers: Vec<_> = (0..16)
        .map(|_| {
            let (host, done, reads, id) =
                (Arc::clone(&host), Arc::clone(&writer_done), Arc::clone(&reads), c.id.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) && Instant::now() < deadline {
                    host.call_method(&id, "peek_slowly", [Value::Int(20)]).unwrap();
                    reads.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    while reads.load(Ordering::SeqCst) < 32 {
        std::thread::yield_now();
    }
    let written = host.call_method(&c.id, "bump_slowly", [Value::Int(1)]);
    let in_time = Instant::now() < deadline;
    writer_done.store(true, Ordering::SeqCst);
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(written.unwrap(), Value::Int(2));
    assert!(in_time, "the writer waited until the readers stopped");
}
