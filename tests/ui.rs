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
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
