//! Every default a pane or client gets when a request does not say, in one
//! place so the documentation and the code cannot drift apart one by one.

use std::time::Duration;

/// Between the first signal of a kill and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(3);
/// Size of a pane created without one.
pub const COLS: u16 = 80;
pub const ROWS: u16 = 24;
/// `TERM` of a pane's processes unless the request's env sets it.
pub const TERM: &str = "xterm-256color";
