//! PTYs and the processes that run in them.
//!
//! Contract of the per-OS backend (`unix.rs` today; a ConPTY one would sit
//! beside it): `spawn` opens a PTY pair and starts a process as the session
//! leader of the slave, returning the master (non-blocking, close-on-exec) and
//! a [`ChildProcess`] record; `PtyMaster` reads, writes and resizes.
//!
//! Everything else the OS provides (fd flags, pidfds, /proc) is in
//! `crate::sys`; `unix.rs` uses `libc` directly, as the other boundary.
//!
//! Ownership: a `PtyMaster` owns its fd and closing it hangs up the pane, so it
//! is closed only on purpose (pane removed, or output ended). A `ChildProcess`
//! is only a record: dropping it never signals or reaps anything.

mod unix;

pub use unix::{PtyMaster, spawn};

use std::ffi::OsString;
use std::path::PathBuf;

/// What to start in a new PTY.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment of the child (not added to ours).
    pub env: Vec<(OsString, OsString)>,
    pub cols: u16,
    pub rows: u16,
}

/// Identity of a started process. `start_token` (the kernel's start time)
/// distinguishes it from a later process that reuses the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildProcess {
    pub pid: i32,
    /// The child called setsid(), so its session id is its pid. Kept apart
    /// because signalling "the pane" means signalling this session.
    pub sid: i32,
    pub start_token: Option<u64>,
}

/// Clamps a requested size to what a pane accepts: 2..=1000 columns and
/// 1..=500 rows (a zero-column PTY breaks many programs, a huge one is a
/// memory attack on the screen model).
pub fn clamp_size(cols: u32, rows: u32) -> (u16, u16) {
    (cols.clamp(2, 1000) as u16, rows.clamp(1, 500) as u16)
}
