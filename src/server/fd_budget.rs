//! The server's file descriptors as a budget: the limit raised at start,
//! a reserve fd that lets the listener answer while the table is full, and
//! the headroom saves and live upgrades need, which panes may not take.
//!
//! Why: with the table full, `accept` fails with EMFILE and the pending
//! connection stays in the backlog. The listener is edge-triggered, so no
//! new readiness comes for it, and once the backlog is full no new
//! connection can raise one either: before this module the server never
//! accepted again. So a failed accept retries on a timer,
//! and a client still pending after [`ACCEPT_GRACE`] is accepted on the
//! reserve fd and told why it cannot be served, instead of hanging.

use super::Server;
use super::timers::TimerKind;
use crate::protocol::{ErrorCode, RpcError};
use std::fs::File;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Fds kept free for what must not fail for want of one: a save (temp
/// file, directory, a history file), a live upgrade (socketpair, memfds,
/// the version probe's pipes), accepting a client to refuse it.
pub const FD_RESERVE: u64 = 32;

/// The most fds a pane may need: its PTY master, and the pidfd a live
/// upgrade opens for its process (the successor holds both too).
pub const FDS_PER_PANE: u64 = 2;

/// How often a starved listener tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// How long a client may wait in the backlog for an fd before it is
/// refused with an explanation. Long enough that a burst of closing
/// connections lets it in; short enough that `ptyd ls` does not look hung.
pub const ACCEPT_GRACE: Duration = Duration::from_secs(3);

pub struct FdBudget {
    /// The soft `RLIMIT_NOFILE` in force, after raising it.
    pub limit: u64,
    /// `/dev/null`, held so there is an fd to give up when the table is
    /// full (see [`Server::refuse_pending`]).
    reserve: Option<File>,
    /// Since when accepting fails for want of fds; `None` while it works.
    starved_since: Option<Instant>,
    /// Whether a retry timer is pending (one at a time).
    retry_armed: bool,
}

fn open_reserve() -> Option<File> {
    File::open(if cfg!(windows) { "NUL" } else { "/dev/null" }).ok()
}

impl FdBudget {
    /// Raises the soft fd limit to the hard one and takes the reserve fd.
    /// Returns the budget and a line for the log when the limit changed or
    /// could not be read.
    pub fn new() -> (FdBudget, Option<String>) {
        let before = crate::sys::fd_limit().ok();
        let (limit, note) = match crate::sys::raise_fd_limit() {
            Ok(limit) if Some(limit) != before => (
                limit,
                Some(format!(
                    "raised the fd limit from {} to {limit} (the hard limit)",
                    before.map_or("?".into(), |b| b.to_string())
                )),
            ),
            Ok(limit) => (limit, None),
            Err(e) => (
                before.unwrap_or(1024),
                Some(format!("cannot raise the fd limit: {e}")),
            ),
        };
        let budget = FdBudget {
            limit,
            reserve: open_reserve(),
            starved_since: None,
            retry_armed: false,
        };
        (budget, note)
    }
}

impl Server {
    /// Fds open now: counted where the OS tells (`/proc/self/fd`), else
    /// estimated from what the server holds.
    fn fds_in_use(&self) -> u64 {
        crate::sys::open_fd_count().map_or_else(|| self.fds_estimate(), |n| n as u64)
    }

    /// A generous guess of the fds open: a few of the server's own, one per
    /// connection, three per pane (PTY, hung-up PTY, pidfd).
    fn fds_estimate(&self) -> u64 {
        (16 + self.conns.len() + 3 * self.panes.len()) as u64
    }

    /// Whether one more pane fits in the fd limit with [`FD_RESERVE`] left
    /// over, counting [`FDS_PER_PANE`] for it and one more fd for every
    /// pane there is (the pidfds a live upgrade opens); refused with the
    /// numbers and what to raise.
    pub(super) fn check_fds_for_pane(&self) -> Result<(), RpcError> {
        self.check_keeper_fds_for_pane()?;
        let panes = self.panes.len() as u64;
        // Far from the limit, no need to count (reading /proc/self/fd
        // costs a directory entry per fd).
        if 2 * (self.fds_estimate() + FDS_PER_PANE + panes + FD_RESERVE) < self.fds.limit {
            return Ok(());
        }
        let in_use = self.fds_in_use();
        let need = in_use + FDS_PER_PANE + panes + FD_RESERVE;
        if need <= self.fds.limit {
            return Ok(());
        }
        Err(RpcError::new(
            ErrorCode::SpawnFailed,
            format!(
                "cannot afford another pane: the server has {in_use} file descriptors open and its \
                 limit (RLIMIT_NOFILE) is {limit}; a pane needs up to {FDS_PER_PANE} (its PTY, and a \
                 pidfd during a live upgrade, which also opens one for each of the {panes} panes), \
                 and {FD_RESERVE} stay free for saves and upgrades. Remove panes, or raise the \
                 limit: LimitNOFILE= in the service unit, or `ulimit -Hn` before the server starts",
                limit = self.fds.limit
            ),
        ))
    }

    /// Accepting failed for want of fds: try again on a timer (the
    /// listener's readiness will not be reported again), and once clients
    /// have waited [`ACCEPT_GRACE`], refuse them with the reason.
    pub(super) fn on_accept_starved(&mut self, error: &std::io::Error) {
        let now = Instant::now();
        let since = match self.fds.starved_since {
            Some(since) => since,
            None => {
                self.fds.starved_since = Some(now);
                self.log.log(
                    "accept_starved",
                    &format!(
                        "cannot accept connections: {error} (fd limit {}); \
                         retrying every {} ms, refusing clients that wait over {} s",
                        self.fds.limit,
                        ACCEPT_RETRY.as_millis(),
                        ACCEPT_GRACE.as_secs()
                    ),
                );
                now
            }
        };
        // Connections being closed free their fds at the end of this turn:
        // refusing now would refuse a client an fd is about to be there for.
        let closing = self.conns.values().any(|c| c.closing.is_some());
        if now.duration_since(since) >= ACCEPT_GRACE && !closing {
            self.refuse_pending();
        }
        if !self.fds.retry_armed {
            self.fds.retry_armed = true;
            self.timers.add(now + ACCEPT_RETRY, TimerKind::AcceptRetry);
        }
    }

    /// Accepting works again.
    pub(super) fn on_accept_fed(&mut self) {
        if let Some(since) = self.fds.starved_since.take() {
            self.log.log(
                "accept_resumed",
                &format!(
                    "accepting connections again after {} ms without fds",
                    since.elapsed().as_millis()
                ),
            );
        }
        if self.fds.reserve.is_none() {
            self.fds.reserve = open_reserve();
        }
    }

    pub(super) fn on_accept_retry(&mut self) {
        self.fds.retry_armed = false;
        self.accept_all();
    }

    /// Gives up the reserve fd to accept each pending client in turn and
    /// tell it why it is not served, then takes the reserve back. A client
    /// accepted while an fd can be had again after all (connections closed
    /// meanwhile) is served instead, and accepting goes on as usual.
    fn refuse_pending(&mut self) {
        let mut refused = 0;
        while self.fds.reserve.take().is_some() {
            let Ok(mut stream) =
                crate::transport::listener::accept(&mut self.listener, self.poll.registry())
            else {
                self.fds.reserve = open_reserve();
                break;
            };
            if let Some(reserve) = open_reserve() {
                self.fds.reserve = Some(reserve);
                self.on_accept_fed();
                self.admit(stream);
                self.accept_all();
                break;
            }
            if self.peer_of(&stream).is_some() {
                let msg = format!(
                    "the ptyd server is out of file descriptors (its limit is {}); \
                     close idle clients or panes, or raise its limit (LimitNOFILE= in the \
                     service unit, or `ulimit -Hn` before the server starts)",
                    self.fds.limit
                );
                let line = crate::protocol::response_line(
                    &serde_json::Value::Null,
                    Err(RpcError::new(ErrorCode::Busy, msg)),
                );
                // What the client sent is read first: closing a socket with
                // unread data resets it, and the client might see the reset
                // before our line. One short line into an empty socket
                // buffer fits; a client that cannot take it loses only the
                // reason.
                let mut scratch = [0u8; 4096];
                for _ in 0..16 {
                    if !matches!(stream.read(&mut scratch), Ok(n) if n > 0) {
                        break;
                    }
                }
                let _ = stream.write(&line);
                refused += 1;
            }
            drop(stream);
            self.fds.reserve = open_reserve();
        }
        if refused > 0 {
            self.log.log(
                "accept_refused",
                &format!("refused {refused} clients: out of file descriptors"),
            );
        }
    }
}
