//! Where calls run: a call the host sends alone runs on the thread that
//! read it (no thread is woken for it); calls sent behind one another run
//! there too while the calls run there end quickly, and side by side on the
//! pool otherwise; a call on the reading thread never holds up the
//! reading: not while it waits on the host, and not beyond the pool's
//! stall time while it blocks or computes, and neither does it hold up the
//! answers of quick calls read before it. In process, with the testing host
//! (which serves callbacks concurrently, as the real one does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use scriptling_plugin::testing::Host;
use scriptling_plugin::{CallError, Callback, Plugin, Value, plugin_fn};
use serde_json::json;

/// The thread a session's reading runs on (`Setup::stdio`'s name).
const READING_THREAD: &str = "plugin-stdin";
/// The pool's threads.
const POOL_THREAD: &str = "plugin-sync";

/// Well beyond the stall time (1 ms) on a loaded machine; well short of
/// the calls that hold their thread.
const PROMPT: Duration = Duration::from_millis(700);
const HOLD: Duration = Duration::from_secs(3);

fn this_thread() -> String {
    std::thread::current().name().unwrap_or("unnamed").to_owned()
}

#[plugin_fn]
fn where_am_i() -> String {
    this_thread()
}

/// Sleeps (a handler that blocks); answers where it ran.
#[plugin_fn]
fn sleep_ms(ms: i64) -> String {
    std::thread::sleep(Duration::from_millis(ms.unsigned_abs()));
    this_thread()
}

/// Computes for `ms` of wall time; answers where it ran.
#[plugin_fn]
fn spin_ms(ms: i64) -> String {
    let until = Instant::now() + Duration::from_millis(ms.unsigned_abs());
    while Instant::now() < until {
        std::hint::spin_loop();
    }
    this_thread()
}

/// Calls back; answers where it ran and what the callback said.
#[plugin_fn]
fn ask(cb: Callback) -> Result<Vec<String>, CallError> {
    let said = cb.call(())?.extract::<String>()?;
    Ok(vec![this_thread(), said])
}

fn plugin() -> Plugin {
    Plugin::new("reading", "1.0.0", "")
        .function::<where_am_i>()
        .function::<sleep_ms>()
        .function::<spin_ms>()
        .function::<ask>()
}

/// The plugin, with calls of up to 500 µs taken as quick: a debug build's
/// `where_am_i` takes tens of microseconds on a busy machine.
fn quick_plugin() -> Plugin {
    plugin().quick_calls(Duration::from_micros(500))
}

fn cb(id: &str) -> Value {
    Value::Callback(scriptling_plugin::CallbackRef::new(id))
}

fn text(value: Value) -> String {
    value.as_str().expect("a string").to_owned()
}

#[test]
fn a_call_sent_alone_runs_on_the_thread_that_read_it() {
    let host = Host::in_process(plugin()).unwrap();
    host.handshake().unwrap();
    for _ in 0..3 {
        assert_eq!(text(host.call("where_am_i", []).unwrap()), READING_THREAD);
    }
}

/// A `function.call` line with `id`, calling `name` with `args`.
fn call_line(id: u64, name: &str, args: serde_json::Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "function.call", "params": {"name": name, "args": args}}).to_string()
}

/// Sends `lines` in one write; returns the answers' results by id, and
/// when each came after the write.
fn send_together(host: &Host, lines: &[String]) -> std::collections::BTreeMap<u64, (String, Duration)> {
    let sent = Instant::now();
    // Every line whole in one write: `send_raw` writes its newline
    // separately, so it ends a blank line (skipped) here.
    host.send_raw(lines.join("\n") + "\n").unwrap();
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < lines.len() {
        let frame = host.next_frame(Duration::from_secs(10)).expect("every call answered");
        let result = frame["result"]["value"].as_str().expect("a string result").to_owned();
        answers.insert(frame["id"].as_u64().unwrap(), (result, sent.elapsed()));
    }
    answers
}

#[test]
fn at_first_calls_sent_behind_one_another_go_to_the_pool() {
    let host = Host::in_process(plugin()).unwrap();
    host.handshake().unwrap();
    let line = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "function.call", "params": {"name": "where_am_i"}}).to_string()
    };
    // One write: the first call is read with the second behind it.
    host.send_raw(format!("{}\n{}\n", line(1001), line(1002))).unwrap();
    let mut ran = std::collections::BTreeMap::new();
    while ran.len() < 2 {
        let frame = host.next_frame(Duration::from_secs(5)).expect("both answered");
        ran.insert(frame["id"].as_u64().unwrap(), frame["result"]["value"].as_str().unwrap().to_owned());
    }
    assert_eq!(ran[&1001], POOL_THREAD, "a call with another read behind it runs on the pool");
}

#[test]
fn once_a_call_ran_quickly_where_it_was_read_calls_sent_behind_it_run_there_too() {
    let host = Host::in_process(quick_plugin()).unwrap();
    host.handshake().unwrap();
    // A machine busy elsewhere can make a quick call look slow; then the
    // next ones rightly go to the pool. So: in one round of twenty.
    let batch: Vec<String> = (0..10).map(|i| call_line(100 + i, "where_am_i", json!([]))).collect();
    let ran_where_read = (0..20).any(|_| {
        // A call sent alone may find the pool's places taken by the last
        // round's calls still leaving (one core): then it runs there.
        if text(host.call("where_am_i", []).unwrap()) != READING_THREAD {
            return false;
        }
        let answers = send_together(&host, &batch);
        // The last had nothing behind it: it runs where it is read anyway.
        answers.range(100..109).all(|(_, (thread, _))| thread == READING_THREAD)
    });
    assert!(ran_where_read, "quick calls read behind one another never all ran where they were read");
}

#[test]
fn a_quick_calls_answer_does_not_wait_for_a_long_call_read_behind_it() {
    let host = Host::in_process(quick_plugin()).unwrap();
    host.handshake().unwrap();
    // Longer than PROMPT: an answer that waited for it would be late.
    let long = json!([{"type": "int", "value": 1000}]);
    let batch = [call_line(1, "where_am_i", json!([])), call_line(2, "sleep_ms", long)];
    // The quick call's answer is held for the calls behind it only when it
    // ran where it was read (see the test above): the first such round.
    for _ in 0..10 {
        if text(host.call("where_am_i", []).unwrap()) != READING_THREAD {
            continue;
        }
        let answers = send_together(&host, &batch);
        let (ran, after) = &answers[&1];
        if ran == READING_THREAD {
            assert!(*after < PROMPT, "the quick call's answer came after {after:?}, behind a call of 1 s");
            assert!(answers[&2].1 >= Duration::from_secs(1), "{:?}", answers[&2].1);
            return;
        }
    }
    panic!("in ten rounds, no quick call read behind another ran where it was read");
}

#[test]
fn calls_that_block_sent_behind_one_another_still_run_side_by_side() {
    let host = Host::in_process(quick_plugin()).unwrap();
    host.handshake().unwrap();
    assert_eq!(text(host.call("where_am_i", []).unwrap()), READING_THREAD);
    // Each would hold the reading thread 400 ms: 2.4 s one after another.
    let sleep = json!([{"type": "int", "value": 400}]);
    let batch: Vec<String> = (0..6).map(|i| call_line(200 + i, "sleep_ms", sleep.clone())).collect();
    let answers = send_together(&host, &batch);
    let took = answers.values().map(|(_, after)| *after).max().unwrap();
    assert!(took < Duration::from_millis(1600), "six calls of 400 ms sent together took {took:?}");
    // The first ran where it was read; the thread that took the reading
    // over judged the calls behind it not quick, and sent them to the pool.
    for id in 201..=204 {
        assert_eq!(answers[&id].0, POOL_THREAD, "call {id}: {answers:?}");
    }
}

/// Runs `hold` (a call that keeps its thread for [`HOLD`]) on the reading
/// thread, and meanwhile a quick call, which must be answered promptly.
fn reading_goes_on_while(hold: &'static str) {
    let host = Arc::new(Host::in_process(plugin()).unwrap());
    host.handshake().unwrap();
    let holder = {
        let host = Arc::clone(&host);
        std::thread::spawn(move || host.call(hold, [Value::Int(HOLD.as_millis() as i64)]))
    };
    // The holding call is read and under way.
    std::thread::sleep(Duration::from_millis(100));
    let asked = Instant::now();
    let quick = text(host.call("where_am_i", []).unwrap());
    let waited = asked.elapsed();
    // Read by another reading thread; run there, or on the pool when the
    // holder takes the pool's one place (one core).
    assert!([READING_THREAD, POOL_THREAD].contains(&quick.as_str()), "{quick}");
    let held = holder.join().unwrap().unwrap();
    assert_eq!(text(held), READING_THREAD, "{hold} ran on the thread that read it");
    assert!(waited < PROMPT, "a quick call waited {waited:?} behind {hold} on the reading thread");
}

#[test]
fn a_handler_that_blocks_holds_up_the_reading_at_most_the_stall_time() {
    reading_goes_on_while("sleep_ms");
}

#[test]
fn a_handler_that_computes_holds_up_the_reading_at_most_the_stall_time() {
    reading_goes_on_while("spin_ms");
}

/// A host whose callbacks call the plugin's `where_am_i` while the call
/// that made them waits, and answer where it ran.
fn calling_in_from_callbacks() -> Arc<Host> {
    let host = Arc::new(Host::in_process(plugin()).unwrap());
    host.handshake().unwrap();
    let weak = Arc::downgrade(&host);
    host.on_callback(move |_, _, _| {
        let host = weak.upgrade().ok_or("host gone")?;
        host.call("where_am_i", []).map_err(|e| e.to_string())
    });
    host
}

#[test]
fn a_call_on_the_reading_thread_gets_its_callbacks_answered_and_the_host_may_call_in_meanwhile() {
    let host = calling_in_from_callbacks();
    for round in 0..20 {
        let answer = host.call("ask", [cb("cb-1")]).unwrap();
        let ran: Vec<String> = answer.as_list().unwrap().iter().map(|v| text(v.clone())).collect();
        // The first runs where it was read. A later one may find the
        // previous call's thread still counted busy in the pool (it leaves
        // after writing its answer): on one core it then goes to the pool.
        if round == 0 {
            assert_eq!(ran[0], READING_THREAD, "the call ran where it was read");
        } else {
            assert!([READING_THREAD, POOL_THREAD].contains(&ran[0].as_str()), "{}", ran[0]);
        }
        // Read while the reading thread's call waits: run by another
        // reading thread, or on the pool.
        assert!([READING_THREAD, POOL_THREAD].contains(&ran[1].as_str()), "{}", ran[1]);
    }
}

// Not on Windows: a pipe's read there cannot wait with a deadline, so a
// call waiting on a callback leaves the reading to another thread (the test
// host's pipes are such pipes).
#[cfg(unix)]
#[test]
fn a_call_on_the_reading_thread_reads_its_callbacks_answer_itself() {
    let host = calling_in_from_callbacks();
    // While `ask` waits for its callback's answer, the thread that runs it
    // reads: the call the host makes meanwhile is read there and handed to
    // the pool (the thread is busy). Were another reading thread woken to
    // read, it would run that call itself, read alone. A round may still go
    // that way when the stall check wants the reading before `ask` calls
    // back (a loaded machine): so at least one round of ten, not all.
    let mut read_by_the_waiting_call = 0;
    for _ in 0..10 {
        let answer = host.call("ask", [cb("cb-1")]).unwrap();
        let ran: Vec<String> = answer.as_list().unwrap().iter().map(|v| text(v.clone())).collect();
        if ran[0] == READING_THREAD && ran[1] == POOL_THREAD {
            read_by_the_waiting_call += 1;
        }
    }
    assert!(read_by_the_waiting_call > 0, "no callback's answer was read by the call waiting for it");
}
