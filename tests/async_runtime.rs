//! Where async handlers run: by default on one thread of their own (tokio's
//! current-thread scheduler), so one that blocks holds up the others (sync
//! handlers are not held up), and the blocking forms that could wait on
//! another async handler are refused; with `Plugin::async_worker_threads`,
//! on tokio's multi-thread scheduler, side by side.

use std::time::{Duration, Instant};

use scriptling_plugin::testing::Host;
use scriptling_plugin::{CallError, Object, Plugin, Value, plugin_class, plugin_fn};

/// Blocks the thread it runs on for `ms` (a misuse in async code), then
/// returns `ms`.
#[plugin_fn]
async fn block_thread_ms(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

/// The name of the thread it runs on.
#[plugin_fn]
async fn async_thread_name() -> String {
    tokio::task::yield_now().await;
    std::thread::current().name().unwrap_or_default().to_owned()
}

/// The scheduler it runs on.
#[plugin_fn]
async fn async_runtime_flavor() -> String {
    format!("{:?}", tokio::runtime::Handle::current().runtime_flavor())
}

/// A counter, to be read from async code.
#[plugin_class]
struct Tally {
    value: i64,
}

#[plugin_class]
impl Tally {
    #[constructor]
    fn new(value: i64) -> Self {
        Tally { value }
    }
}

/// Reads `tally` with the blocking form, which async code must not use.
#[plugin_fn]
async fn read_blocking(tally: Object<Tally>) -> Result<i64, CallError> {
    Ok(tally.read()?.value)
}

/// Writes `tally` with the blocking form, which async code must not use.
#[plugin_fn]
async fn write_blocking(tally: Object<Tally>) -> Result<i64, CallError> {
    Ok(tally.write()?.value)
}

/// Reads `tally` as async code does.
#[plugin_fn]
async fn read_awaiting(tally: Object<Tally>) -> Result<i64, CallError> {
    Ok(tally.read_async().await?.value)
}

/// Returns `n` (sync).
#[plugin_fn]
fn echo(n: i64) -> i64 {
    n
}

fn plugin() -> Plugin {
    Plugin::new("runtime", "1.0.0", "")
        .function::<block_thread_ms>()
        .function::<async_thread_name>()
        .function::<async_runtime_flavor>()
        .function::<echo>()
        .class::<Tally>()
        .function::<read_blocking>()
        .function::<write_blocking>()
        .function::<read_awaiting>()
}

/// How long the calls made by `during` take while `block_thread_ms`
/// blocks a runtime thread for `block`.
fn while_a_handler_blocks(host: &Host, block: Duration, during: impl FnOnce() -> Duration) -> Duration {
    std::thread::scope(|scope| {
        let blocked = scope.spawn(|| host.call("block_thread_ms", [Value::Int(block.as_millis() as i64)]));
        // Let the blocking call start first.
        std::thread::sleep(Duration::from_millis(100));
        let took = during();
        assert_eq!(blocked.join().unwrap().unwrap(), Value::Int(block.as_millis() as i64));
        took
    })
}

fn timed(call: impl FnOnce() -> Value, expected: Value) -> Duration {
    let started = Instant::now();
    assert_eq!(call(), expected);
    started.elapsed()
}

#[test]
fn async_handlers_share_one_thread_by_default_and_sync_ones_are_not_held_up() {
    let host = Host::in_process(plugin()).unwrap();
    assert_eq!(host.call("async_runtime_flavor", []).unwrap(), Value::from("CurrentThread"));
    assert_eq!(host.call("async_thread_name", []).unwrap(), Value::from("plugin-tokio"));
    let block = Duration::from_millis(1500);
    let took = while_a_handler_blocks(&host, block, || {
        let sync = timed(|| host.call("echo", [Value::Int(7)]).unwrap(), Value::Int(7));
        assert!(sync < Duration::from_millis(1000), "a sync call waited {sync:?} for a blocked async handler");
        timed(|| host.call("async_thread_name", []).unwrap(), Value::from("plugin-tokio"))
    });
    // The async call could run only once the blocked thread was free.
    assert!(took >= Duration::from_millis(1000), "an async call ran beside a blocked one on one thread ({took:?})");
}

#[test]
fn async_worker_threads_runs_async_handlers_side_by_side() {
    let host = Host::in_process(plugin().async_worker_threads(2)).unwrap();
    assert_eq!(host.call("async_runtime_flavor", []).unwrap(), Value::from("MultiThread"));
    let block = Duration::from_millis(3000);
    let took = while_a_handler_blocks(&host, block, || {
        timed(|| host.call("async_thread_name", []).unwrap(), Value::from("plugin-tokio"))
    });
    assert!(took < Duration::from_millis(2000), "an async call waited {took:?} for a blocked one");
}

#[test]
fn async_handlers_are_refused_the_blocking_object_forms() {
    // On one thread, a blocking borrow behind an async holder (which can
    // run again only on that thread) would wait for ever.
    let host = Host::in_process(plugin()).unwrap();
    let tally = host.new_object("Tally", [Value::Int(5)]).unwrap();
    let arg = || [Value::Object(tally.clone())];
    for (function, asked) in [("read_blocking", "read_async().await"), ("write_blocking", "write_async().await")] {
        let err = host.call(function, arg()).unwrap_err();
        assert!(err.message().contains(&format!("use `{asked}` in async code")), "{function}: {err}");
    }
    assert_eq!(host.call("read_awaiting", arg()).unwrap(), Value::Int(5));
}
