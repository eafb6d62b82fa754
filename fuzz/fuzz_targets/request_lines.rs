//! Fuzz target `request_lines`: the bytes go through `ptyd::fuzzing::request_lines`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/request_lines/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run request_lines corpus/request_lines`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::request_lines(data));
