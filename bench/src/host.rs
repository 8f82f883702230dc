//! What a script author feels: a Scriptling script calling a plugin in a
//! loop, run by the real host (`../shared/scriptling-host`, or
//! `SCRIPTLING_HOST`), timed as a whole process: wall time, and the CPU
//! time of the host and the plugin together.
//!
//! The protocol figures (`measure.rs`) time the plugin alone against a
//! driver that answers at once; through the host, each call also crosses
//! the host's Go runtime, so what a plugin's shape costs per call shows as
//! a share of ~100 µs rather than of ~15 µs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::measure::{Figures, Sizes};

/// The real host for this platform, if there is one: `SCRIPTLING_HOST`,
/// else the build under `../shared/scriptling-host` next to the workspace.
pub fn scriptling_host() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SCRIPTLING_HOST") {
        return Some(path.into());
    }
    let build = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-amd64/scriptling",
        ("windows", "x86_64") => "windows-amd64/scriptling.exe",
        _ => return None,
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/scriptling-host").join(build);
    path.exists().then_some(path)
}

/// The loop a script runs.
#[derive(Clone, Copy, Debug)]
pub enum Loop {
    /// `greet("Ada")`, `n` times.
    Plain(usize),
    /// `ping_back(cb, 4)`, `n` times: four callbacks into the script each.
    Callbacks(usize),
}

impl Loop {
    /// The calls the loop makes from the script.
    pub fn calls(self) -> usize {
        match self {
            Loop::Plain(n) | Loop::Callbacks(n) => n,
        }
    }

    fn body(self) -> String {
        match self {
            Loop::Plain(n) => format!("for i in range({n}):\n    p.greet(\"Ada\")\n"),
            Loop::Callbacks(n) => {
                format!("def cb(i):\n    return i\n\nfor i in range({n}):\n    p.ping_back(cb, 4)\n")
            }
        }
    }
}

/// The script loops through `host` (none: every figure unavailable) with
/// `plugin`: per call, the wall time and the CPU time of host and plugin.
pub fn figures(host: Option<&Path>, plugin: &Path, sizes: Sizes) -> Figures {
    let mut figures = Figures::default();
    let (plain, callbacks) = sizes.host_loops;
    for (script, wall_key, cpu_key) in [
        (Loop::Plain(plain), "host_plain_us", "host_plain_cpu_us"),
        (Loop::Callbacks(callbacks), "host_callback_us", "host_callback_cpu_us"),
    ] {
        let run = host.and_then(|host| run_loop(host, plugin, script));
        let per_call = |seconds: f64| seconds * 1e6 / script.calls() as f64;
        figures.push(wall_key, "µs/call", run.map(|(wall, _)| per_call(wall)));
        figures.push(cpu_key, "µs/call", run.and_then(|(_, cpu)| cpu).map(per_call));
    }
    figures
}

/// One run of `script` through `host` with `plugin` loaded as `p`: wall
/// seconds, and CPU seconds of the host and its plugin (Unix; `None`
/// elsewhere). `None` if the run failed.
pub fn run_loop(host: &Path, plugin: &Path, script: Loop) -> Option<(f64, Option<f64>)> {
    let source = format!(
        "import scriptling.plugin as sp\nsp.load(\"p\", {:?}, scriptling=True)\nimport plugin.p as p\n{}",
        plugin.display().to_string(),
        script.body()
    );
    let file = std::env::temp_dir().join(format!("plugin-bench-{}.py", std::process::id()));
    std::fs::write(&file, source).ok()?;
    let cpu_before = children_cpu();
    let started = Instant::now();
    let status = Command::new(host).arg(&file).stdout(Stdio::null()).stderr(Stdio::null()).status();
    let wall = started.elapsed().as_secs_f64();
    let cpu = children_cpu().zip(cpu_before).map(|(after, before)| after - before);
    let _ = std::fs::remove_file(&file);
    status.ok()?.success().then_some((wall, cpu))
}

/// CPU seconds used by every child this process has waited for, and
/// theirs (the host waits for its plugin, so both are counted).
fn children_cpu() -> Option<f64> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage fills the struct it is given.
        let usage = unsafe {
            if libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) != 0 {
                return None;
            }
            usage.assume_init()
        };
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
    }
    #[cfg(not(unix))]
    None
}
