//! Bridges from the `tracing` and `log` ecosystems to the host's logger
//! (features `tracing` and `log`). Entry points: nothing imports them.

#[cfg(feature = "log")]
pub mod log;
#[cfg(feature = "tracing")]
pub mod tracing;
