//! Fuzz target `term_feed`: the bytes go through `ptyd::fuzzing::term_feed`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/term_feed/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run term_feed corpus/term_feed`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::term_feed(data));
