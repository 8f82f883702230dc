//! JSON-RPC lines: classification never panics; params spans are exact.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| scriptling_plugin::fuzz::frame(data));
