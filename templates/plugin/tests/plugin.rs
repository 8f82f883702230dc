//! Drives the built plugin the way Scriptling does: a real process, spoken
//! to over its stdin and stdout by the SDK's test host.

use std::process::Command;
use std::time::Duration;

use scriptling_plugin::Value;
use scriptling_plugin::testing::Host;

/// The built binary (named after the package, so renaming it needs no edit here).
fn plugin() -> Host {
    Host::spawn(Command::new(env!(concat!(
        "CARGO_BIN_EXE_",
        env!("CARGO_PKG_NAME")
    ))))
    .expect("start the plugin")
}

#[test]
fn greets_with_a_default_and_a_keyword() {
    let host = plugin();
    host.handshake().unwrap();
    assert_eq!(
        host.call("greet", [Value::from("Ada")]).unwrap(),
        Value::from("Hello, Ada")
    );
    let greeting = [("greeting".to_owned(), Value::from("Hi"))].into();
    assert_eq!(
        host.call_kw("greet", [Value::from("Ada")], greeting)
            .unwrap(),
        Value::from("Hi, Ada")
    );
    assert_eq!(
        host.call("greet", [Value::from("")]).unwrap_err().message(),
        "greet(): name must not be empty"
    );
}

#[test]
fn counts_and_sets_its_property() {
    let host = plugin();
    host.handshake().unwrap();
    let counter = host.new_object("Counter", [Value::Int(10)]).unwrap();
    assert_eq!(
        host.call_method(&counter.id, "inc", []).unwrap(),
        Value::Int(11)
    );
    host.call_method(&counter.id, "value", [Value::Int(0)])
        .unwrap();
    assert_eq!(
        host.call_method(&counter.id, "value", []).unwrap(),
        Value::Int(0)
    );
    host.shutdown().unwrap();
    assert!(
        host.wait(Duration::from_secs(10))
            .unwrap()
            .unwrap()
            .success()
    );
}
