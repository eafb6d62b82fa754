//! ptyd: a per-user daemon that keeps terminals alive.
//!
//! The binary (`src/main.rs`) only parses the command line and dispatches;
//! everything else lives here so integration tests and benchmarks can reach it.
//!
//! Raw system calls live behind two boundaries, `sys` and `pty`; every
//! `unsafe` block anywhere carries a `// SAFETY:` comment saying why it holds.
//!
//! Windows (issue 15): the portable core (terminal model, workspace tree,
//! protocol types, validation), snapshots and state files (`persist`,
//! `paths`), the ConPTY backend of `pty` and the named-pipe `transport`
//! build there. The daemon, its clients and everything under them still
//! speak Unix (sockets, fd passing, signals), so they are compiled on Unix
//! only, gated here and nowhere else; ARCHITECTURE.md "Windows" says
//! what is left to bring them over.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

// The portable core: every OS.
pub mod clock;
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
pub mod workspace;

// The daemon and its clients: Unix only until the server loop runs on
// Windows (ARCHITECTURE.md "Windows", left to do).
#[cfg(unix)]
pub mod cli;
#[cfg(unix)]
pub mod client;
#[cfg(unix)]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(unix)]
pub mod handoff;
// The keeper holds panes across a crash of the serving process; it lives
// on fd passing and pidfds, so Windows has none (src/sys/mod.rs says so).
#[cfg(unix)]
pub mod keeper;
#[cfg(unix)]
pub mod server;
#[cfg(unix)]
pub mod service;
#[cfg(unix)]
pub mod shell;
