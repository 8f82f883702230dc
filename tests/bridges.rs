//! The `tracing` and `log` bridges: events in a handler become `host.log`
//! records with their fields. (Own test binary: both install globals.)

use scriptling_plugin::testing::{Host, LogRecord};
use scriptling_plugin::{Plugin, Value, plugin_fn};

#[plugin_fn]
fn traced(name: String) -> String {
    tracing::info!(user = %name, attempt = 3_u64, ok = true, ratio = 0.5, "tracing says hi");
    tracing::warn!("plain warning");
    log::error!(target: "my_target", "log says {name}");
    "done".into()
}

#[test]
fn tracing_and_log_events_reach_the_host_logger() {
    scriptling_plugin::tracing::init().unwrap();
    scriptling_plugin::log::init(log::LevelFilter::Trace).unwrap();
    let host = Host::in_process(Plugin::new("bridges", "1.0.0", "").function::<traced>()).unwrap();
    assert_eq!(host.call("traced", [Value::from("ada")]).unwrap(), Value::from("done"));
    assert_eq!(
        host.logs(),
        [
            LogRecord {
                level: "info".into(),
                message: "tracing says hi".into(),
                args: vec![
                    "user".into(),
                    "ada".into(),
                    "attempt".into(),
                    Value::Int(3),
                    "ok".into(),
                    Value::Bool(true),
                    "ratio".into(),
                    Value::Float(0.5)
                ],
            },
            LogRecord { level: "warn".into(), message: "plain warning".into(), args: vec![] },
            LogRecord {
                level: "error".into(),
                message: "log says ada".into(),
                args: vec!["target".into(), "my_target".into()]
            },
        ]
    );
}

#[test]
fn events_outside_a_call_go_to_stderr_not_the_host() {
    let host = Host::spawn(std::process::Command::new(env!("CARGO_BIN_EXE_fixture-plugin"))).unwrap();
    assert_eq!(host.call("trace_outside", []).unwrap(), Value::from("ok"));
    // The record is on stderr, so it was never sent to the host.
    let stderr = host.wait_for_stderr("[info] traced outside a call", std::time::Duration::from_secs(10));
    assert!(stderr.as_deref().is_ok_and(|e| e.contains(r#"where_from="a spawned thread""#)), "{stderr:?}");
    assert!(host.logs().is_empty());
}
