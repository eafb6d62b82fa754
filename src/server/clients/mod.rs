//! The clients: every connection to the server, from the first request
//! line to the EXIT frame that ends an attachment.
//!
//! A connection ([`connection::Connection`]) speaks JSON lines until it
//! attaches to a pane, then frames (`attach`). `io` accepts, reads at most
//! a budget per wakeup, dispatches and flushes; `line_budget` bounds the
//! unfinished request lines of all connections together; `arrivals` tells
//! the loop a client connected or sent something while it reads pane
//! output; `replay` feeds an event subscriber at the pace it reads. On
//! Unix an attached client may hand the server its terminal
//! (`direct_tty`), and then its keys (`tty_keys`).
//!
//! Invariants:
//! - the loop never blocks on a client: output goes to a bounded queue,
//!   flushed when the socket is writable; a client too slow for its pane
//!   pauses the pane's reading, never the loop;
//! - an attachment always ends with an EXIT frame saying why, so a client
//!   knows whether to reconnect;
//! - bad input of any kind gets an error and never a panic.
//!
//! Per OS: direct output and terminal keys need a terminal fd passed over
//! `SCM_RIGHTS`; on Windows `direct_tty_windows.rs` and
//! `tty_keys_windows.rs` stand in (never on: a client's output always goes
//! as OUTPUT frames and its keys come as INPUT frames), so the connection
//! code is the same for both.

#[cfg_attr(windows, path = "arrivals_windows.rs")]
pub(super) mod arrivals;
pub(super) mod attach;
pub(super) mod client_requests;
pub(super) mod connection;
#[cfg_attr(windows, path = "direct_tty_windows.rs")]
pub(super) mod direct_tty;
pub(super) mod held_input;
pub(super) mod io;
pub(super) mod line_budget;
pub(super) mod replay;
pub(super) mod tab_keys;
pub(super) mod tab_prompt;
pub(super) mod tab_scroll;
pub(super) mod tab_view;
#[cfg_attr(windows, path = "tty_keys_windows.rs")]
pub(super) mod tty_keys;
