//! Fuzz target `term_state`: the bytes go through `ptyd::fuzzing::term_state`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/term_state/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run term_state corpus/term_state`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::term_state(data));
