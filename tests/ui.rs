//! Compile-time behaviour of the attributes: misuse fails with a message at
//! the offending tokens (`tests/ui/fail`, one concern per file), and every
//! supported shape compiles (`tests/ui/pass`).
//!
//! The `.stderr` snapshots depend on the compiler version. They were
//! blessed with rustc 1.95.0 (59807616e 2026-04-14); after a toolchain
//! change, review and re-bless them with
//! `TRYBUILD=overwrite cargo test --test ui`.

#[test]
fn ui() {
    // trybuild builds each case with the cargo that runs the tests. A test
    // binary run under an emulator (the Windows build under Wine, from
    // Linux) cannot start it: say so and leave the cases to the native run.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    if !std::process::Command::new(&cargo).arg("--version").output().is_ok_and(|out| out.status.success()) {
        eprintln!("skipped: cannot run {cargo:?} from this test binary to build the UI cases");
        return;
    }
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
