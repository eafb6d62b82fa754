//! ptyd: a per-user daemon that keeps terminals alive.
//!
//! The binary (`src/main.rs`) only parses the command line and dispatches;
//! everything else lives here so integration tests and benchmarks can reach it.
//!
//! Raw system calls live behind two boundaries, `sys` and `pty`; every
//! `unsafe` block anywhere carries a `// SAFETY:` comment saying why it holds.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod cli;
pub mod client;
pub mod clock;
#[doc(hidden)]
pub mod fuzzing;
pub mod handoff;
pub mod keeper;
pub mod keys;
pub mod model;
pub mod paths;
pub mod persist;
pub mod protocol;
pub mod pty;
pub mod server;
pub mod service;
pub mod shell;
pub(crate) mod sys;
pub mod term;
pub mod validate;
pub mod workspace;
