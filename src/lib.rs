//! ptyd: a per-user daemon that keeps terminals alive.
//!
//! The binary (`src/main.rs`) only parses the command line and dispatches;
//! everything else lives here so integration tests and benchmarks can reach it.
pub mod term;
