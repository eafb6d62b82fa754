//! ptyd: a per-user daemon that keeps terminals alive.
//!
//! The binary (`src/main.rs`) only parses the command line and dispatches;
//! everything else lives here so integration tests and benchmarks can reach it.
//!
//! Raw system calls live behind two boundaries, `sys` and `pty`; every
//! `unsafe` block anywhere carries a `// SAFETY:` comment saying why it holds.
//!
//! Windows: everything builds there but the keeper and the
//! fuzzing harness (Unix only, gated below). The OS differences live in
//! `sys`, `pty` and `transport`, and in the server's few per-OS modules
//! (`server/mod.rs` lists them); docs/design/windows.md says what
//! works there and what degrades.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

// The portable core: every OS.
pub mod clock;
pub mod environment;
pub mod keys;
pub mod model;
pub mod paths;
pub mod persist;
pub mod protocol;
pub mod pty;
pub(crate) mod sys;
pub mod term;
pub mod transport;
pub mod validate;
pub mod view;
pub mod workspace;

// The daemon and its clients.
pub mod cli;
pub mod client;
// Drives the Unix server's handoff and frame decoding (`cargo fuzz`).
#[cfg(unix)]
#[doc(hidden)]
pub mod fuzzing;
pub mod handoff;
pub mod server;
pub mod service;
pub mod shell;
pub mod tmux;

/// A seeded xorshift64 stream: the random tests' inputs, reproducible.
#[cfg(test)]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
