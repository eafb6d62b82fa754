//! Continuity: what keeps panes alive across processes.
//!
//! A pane outlives the process serving it in two ways:
//! - a **live upgrade** (`upgrade/`): the serving process hands every
//!   pane's terminal, its state and the listener to a new binary, then
//!   stays in probation, able to take everything back, until the new one
//!   proves it serves; `serving` is where the server stands in that
//!   sequence (owned, paused, handed over, released);
//! - a **crash** of the serving process: the keeper (`keeper`), the
//!   process `ptyd server` starts as, holds a duplicate of each pane's
//!   master, pidfd and output ring (`output_ring`), the listener and the
//!   server's latest checkpoint (with `history_log`, the panes' scrollback
//!   since the checkpoint), and starts a replacement that takes over as an
//!   upgrade would. `keeper_link` is the serving process's side of that
//!   channel.
//!
//! Invariants:
//! - exactly one process serves a namespace's sources at a time: the
//!   others hold them paused, or only hold them;
//! - whatever a replacement needs is with the keeper before the server
//!   could lose it (a pane's fds before its first output is read, a
//!   checkpoint before the state it describes is acknowledged);
//! - a pane removed by the server hangs up then: the keeper closes its
//!   copies when the server says so.
//!
//! Why a folder of `server` and not of the crate: the server's sides of
//! the upgrade and the keeper link are `impl Server` blocks that read and
//! change the server's private state, which Rust lets only `server` and
//! its descendants do. The keeper itself (a separate process) shares the
//! link's messages and the handoff's formats and is kept beside them.
//!
//! Per OS: Windows has no keeper and no live upgrade: a pseudo console
//! belongs to the conhost the server started and cannot be handed to
//! another process. Its stand-ins are swapped whole: `keeperless.rs` for
//! `keeper_link/` (the same methods, doing nothing; the channel and ring
//! types have no values, so code reading a ring is unreachable) and
//! `upgrade_windows.rs` for `upgrade/` (restore-mode upgrades only).
//! `serving` and `succession` are built on both: on Windows a server
//! stays `Owned` and no upgrade ever starts one.

#[cfg(unix)]
pub(super) mod history_log;
#[cfg(unix)]
pub(crate) mod keeper;
#[cfg_attr(windows, path = "keeperless.rs")]
pub(super) mod keeper_link;
#[cfg(unix)]
pub(super) mod output_ring;
// No keeper, no rings: the uninhabited ring type lives with the stand-in.
#[cfg(windows)]
pub(super) use keeper_link as output_ring;
pub(super) mod serving;
pub(super) mod succession;
#[cfg_attr(windows, path = "upgrade_windows.rs")]
pub(super) mod upgrade;
