//! Scripts run through the real Scriptling host (upstream's 0.20.1, built
//! for Linux and for Windows in `../shared/scriptling-host`, or the binary
//! `SCRIPTLING_HOST` names), loading this workspace's examples: what a user
//! runs. The Windows run (under Wine in CI) drives the Windows host and the
//! examples built for Windows.
//!
//! Plugins are loaded by path from the script (`scriptling.plugin.load`):
//! upstream's `--plugin-dir` loads nothing on Windows (it skips files
//! without a Unix execute bit, and Go reports none there).
//!
//! Where no host is found each test says so on stderr and passes, so the
//! suite runs anywhere.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use scriptling_plugin::testing::example_path;
use scriptling_plugin_bench::host::scriptling_host as host;

/// Runs `script` (after a line that loads each of `plugins`) through the
/// host; returns its stdout, or `None` (said on stderr) without a host.
fn run(plugins: &[&str], script: &str) -> Option<String> {
    let Some(host) = host() else {
        eprintln!("skipped: no Scriptling host for this platform (set SCRIPTLING_HOST)");
        return None;
    };
    let mut source = String::from("import scriptling.plugin as sp\n");
    for name in plugins {
        // A Rust string literal's escapes are Scriptling's for a path.
        let path = example_path(name).display().to_string();
        source.push_str(&format!("sp.load({name:?}, {path:?}, scriptling=True)\n"));
    }
    source.push_str(script);
    // Tests run in parallel: each script gets its own file.
    static SCRIPTS: AtomicUsize = AtomicUsize::new(0);
    let n = SCRIPTS.fetch_add(1, Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("scriptling-real-host-{}-{n}.py", std::process::id()));
    std::fs::write(&file, source).unwrap();
    let out = Command::new(&host).arg(&file).output().expect("run the Scriptling host");
    let _ = std::fs::remove_file(&file);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{}: {stdout}\n{stderr}", out.status);
    Some(stdout.replace("\r\n", "\n"))
}

#[test]
fn functions_classes_and_constants_through_the_real_host() {
    let script = r#"import plugin.hello as h
print(h.greet("Ada"))
print(h.greet("Ada", greeting="Hi"))
c = h.Counter(5)
c.inc(2)
print(c.inc(3))
print(h.default_name)
"#;
    let Some(out) = run(&["hello"], script) else { return };
    assert_eq!(out, "Hello, Ada\nHi, Ada\n10\nWorld\n");
}

#[test]
fn callbacks_through_the_real_host() {
    let script = r#"import plugin.callback as cb
events = []
result = cb.stream(lambda e: events.append(e))
print(result)
print(len(events))
print(events[0]["token"], events[2]["index"])
"#;
    let Some(out) = run(&["callback"], script) else { return };
    assert_eq!(out, "Hello, Ada\n4\nHello 2\n");
}

#[test]
fn a_failing_script_callback_names_the_function_and_says_what_the_host_hides() {
    let script = r#"import plugin.callback as cb
def raises(e):
    raise ValueError("nope")
def takes_nothing():
    return 1
def divides(e):
    return 1 / 0
for fn in [raises, takes_nothing, divides]:
    try:
        cb.stream(fn)
    except Exception as e:
        print(e)
"#;
    let Some(out) = run(&["callback"], script) else { return };
    assert_eq!(
        out,
        "stream(): on_event failed: it raised an exception, and the Scriptling host does not pass exceptions \
         or their messages to plugins (the host said: unsupported plugin value type EXCEPTION)\n\
         stream(): on_event failed: argument error: got 1 arguments, want 0\n\
         stream(): on_event failed: division by zero\n"
    );
}

#[test]
fn a_failed_assignment_names_the_property_through_the_real_host() {
    let script = r#"import plugin.properties as pr
c = pr.Counter(5)
try:
    c.value = "x"
except Exception as e:
    print(e)
c.value = 7
print(c.label)
"#;
    let Some(out) = run(&["properties"], script) else { return };
    assert_eq!(out, "can't set attribute 'value' of Counter: the value must be an int, got string\ncounter:7\n");
}

/// What the README says the host's `help()` prints: the SDK's help text for
/// functions and for methods reached through their class, and the host's own
/// terse lines where 0.20.1 shows none (if a later host shows more, this
/// fails, and the README's table is due an update).
#[test]
fn help_through_the_real_host_is_what_the_readme_says() {
    let script = r#"import plugin.hello as h
help(h.greet)
help(h.Counter.inc)
c = h.Counter(1)
help(c.inc)
help(h.Counter)
help(h.Counter.__init__)
"#;
    let Some(out) = run(&["hello"], script) else { return };
    // The host lists a class's methods in Go map order, which changes from
    // run to run: compare them as a set.
    let out = sort_method_list(&out);
    let expected = "Help for builtin function:\n\
        greet(name, greeting=\"Hello\")\n\nReturns a greeting for `name`.\n\
        Help for builtin function:\ninc(amount)\n\nAdds `amount` and returns the new value.\n\
        Help for FUNCTION:\n  Type: FUNCTION\n  Value: <bound method>\n\
        Help for class 'Counter':\n\nAvailable methods:\n  - __init__\n  - inc\n  - get\n\
        Help for builtin function:\n  No documentation available\n";
    assert_eq!(out, sort_method_list(expected));
    let script = "import plugin.properties as pr\nhelp(pr.Counter.value)\n";
    let Some(out) = run(&["properties"], script) else { return };
    assert_eq!(out, "Help for PROPERTY:\n  Type: PROPERTY\n  Value: <property>\n");
}

/// `help()` output with each "Available methods:" list sorted, so two runs
/// of the host compare equal whatever order its map gave.
fn sort_method_list(help: &str) -> String {
    let mut lines: Vec<&str> = help.lines().collect();
    let is_method = |line: &&str| line.starts_with("  - ");
    for run in lines.chunk_by_mut(|a, b| is_method(a) && is_method(b)) {
        run.sort_unstable();
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}
