//! The panes: what runs in each PTY and everything the server keeps of it.
//!
//! A pane ([`pane::Pane`]) is one PTY, the process tree in it, its screen,
//! the input waiting to be written to it and its recent output as text
//! (`output_log`). Its fds (`fds`) are the only way into the loop's poll
//! for it; a pane is created and its process (re)started in `spawn`, its
//! output read and its input written in `io`, and its end (kills, the
//! exit, the reaping) handled in `exit`.
//!
//! Invariants:
//! - a pane id is never reused within a server's life;
//! - a pane's fds leave the poll before they close ([`fds::PaneFds`]
//!   checks it), and every process start goes through
//!   `Server::start_pane`, where the fd is registered;
//! - a pane's exit is reported once, whether the SIGCHLD handler reaped it
//!   (our child) or a pidfd told (a process an earlier server started).
//!
//! Per OS: `fds.rs` (Unix: the master, the hung-up master, a pidfd, each
//! polled) and `fds_windows.rs` (a pseudo console whose pipes cannot be
//! polled: the pane's threads wake the loop through `pty::PaneWakes`)
//! are swapped whole and keep the same methods, so the pane code above
//! them is the same on both OSes.

pub(super) mod exit;
#[cfg_attr(windows, path = "fds_windows.rs")]
pub(super) mod fds;
pub(super) mod io;
pub(super) mod output_log;
pub(super) mod pane;
pub(super) mod spawn;
