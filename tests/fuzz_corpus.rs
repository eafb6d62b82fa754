//! Replays the fuzz corpus on the stable toolchain: every file in
//! `fuzz/corpus/<target>/` through the entry point its target fuzzes
//! (`ptyd::fuzzing`). The corpus holds the seeds and every input a fuzzer
//! run found to crash, so CI (which runs no fuzzer) checks on each
//! `cargo test` that none of them crashes again. A failure names the file;
//! `cd fuzz && cargo +nightly fuzz run <target> corpus/<target>/<file>`
//! reproduces it under the fuzzer.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_replays_through_its_target() {
    let mut failures = Vec::new();
    for (target, entry) in ptyd::fuzzing::TARGETS {
        let files = corpus(target);
        assert!(!files.is_empty(), "fuzz/corpus/{target}/ has no seeds");
        for file in files {
            let data = std::fs::read(&file).expect("reading a corpus file");
            if let Err(panic) = std::panic::catch_unwind(|| entry(&data)) {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{target} on {}: {why}", file.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "fuzz targets panicked:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_fuzzer_binary_and_a_corpus_and_nothing_else() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let mut dirs: Vec<String> = std::fs::read_dir(fuzz_dir().join("corpus"))
        .expect("fuzz/corpus")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    dirs.sort();
    let mut names: Vec<String> = ptyd::fuzzing::TARGETS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    names.sort();
    assert_eq!(dirs, names, "one corpus directory per target");
    for name in &names {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        let source = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source).expect("a fuzz target source");
        assert!(
            text.contains(&format!("ptyd::fuzzing::{name}(data)")),
            "{} does not call ptyd::fuzzing::{name}",
            source.display()
        );
    }
}
