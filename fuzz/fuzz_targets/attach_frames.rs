//! Fuzz target `attach_frames`: the bytes go through `ptyd::fuzzing::attach_frames`, which
//! documents what it feeds them to and what it checks. Seeds and findings
//! are in `fuzz/corpus/attach_frames/`, replayed on stable by `tests/fuzz_corpus.rs`.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run attach_frames corpus/attach_frames`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ptyd::fuzzing::attach_frames(data));
