//! Fuzz target `handoff`: the bytes go through `ptyd::fuzzing::handoff`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/handoff/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run handoff corpus/handoff`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::handoff(data));
