//! Fuzz target `snapshot`: the bytes go through `ptyd::fuzzing::snapshot`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/snapshot/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run snapshot corpus/snapshot`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::snapshot(data));
