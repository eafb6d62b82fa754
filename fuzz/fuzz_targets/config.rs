//! Fuzz target `config`: the bytes go through `ptyd::fuzzing::config`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/config/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run config corpus/config`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::config(data));
