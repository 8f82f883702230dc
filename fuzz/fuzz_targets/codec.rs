//! Transport values: decoding never panics and round-trips exactly.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| scriptling_plugin::fuzz::value_round_trip(data));
