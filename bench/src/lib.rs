//! Support for the benchmark binaries: the measurements the driver makes,
//! and the plugin surface every benchmarked plugin provides.
//!
//! A benchmarked plugin exports `greet(name) -> "Hello, <name>"`, a class
//! `Counter(start)` with `inc(amount) -> new value`, and
//! `ping_back(cb, n) -> n` that calls `cb(i)` `n` times. Figures whose
//! function a plugin lacks are reported as unavailable.

pub mod host;
pub mod measure;
