//! Deadlines for the loop. The nearest one becomes the poll timeout. Entries
//! are never removed early: a fired timer checks whether it still applies
//! (the pane may be gone, the wait answered), which keeps cancelling free.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// What a deadline is for. Ids refer to panes or parked waits, which may no
/// longer exist when the timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKind {
    /// A pane's wall-clock `timeout_ms` watchdog, for one run of the pane
    /// (pane id, run number: a respawn starts a new run).
    PaneTimeout(u64, u64),
    /// Re-check a pane's `idle_timeout_ms` watchdog (pane id, run).
    PaneIdle(u64, u64),
    /// Escalate a pane kill from its first signal to SIGKILL (pane id, run).
    KillEscalate(u64, u64),
    /// The middle step of a kill's default ladder: SIGTERM after the
    /// SIGHUP (pane id, run).
    KillTerm(u64, u64),
    /// Save the snapshot if it is dirty and its debounce has passed.
    Save,
    /// Write history files of panes with new output.
    HistoryTick,
    /// A parked `pane.wait` reaches its timeout.
    WaitTimeout(u64),
    /// Re-check an idle condition of a parked `pane.wait`.
    WaitIdle(u64),
    /// A connection being closed runs out of time to take its last output.
    ConnClose(usize),
    /// The live upgrade's deadline or probation end (`upgrade/` knows
    /// which from its phase).
    Upgrade,
    /// Re-check the clients holding a paused pane (see `STALL_LIMIT`).
    PaneStall(u64),
    /// A crash checkpoint may be due, or a pane's lines cache idle
    /// (`keeper_link/`).
    Checkpoint,
    /// Try accepting again after running out of fds (`fd_budget.rs`).
    AcceptRetry,
    /// Check that the pane an attached client's input is held for still
    /// reads its input (connection id; `attach.rs`).
    InputStall(usize),
    /// A tab view's frame waits for its interval, or its message for its
    /// end (`tab_view.rs`): wakes the loop, which draws stale views.
    ViewFrame,
    /// Check that the socket and lock are still at their paths
    /// (`rebind.rs`).
    NamespaceCheck,
    /// A command of a tab view's `:` prompt may have run too long
    /// (`tab_prompt.rs`).
    PromptDeadline,
}

#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(Instant, TimerKind)>>,
}

impl Timers {
    pub fn add(&mut self, at: Instant, kind: TimerKind) {
        self.heap.push(Reverse((at, kind)));
    }

    /// How long poll may sleep: until the nearest deadline, or forever.
    pub fn poll_timeout(&self, now: Instant) -> Option<Duration> {
        self.heap
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(now))
    }

    /// Removes and returns every timer due at `now`.
    pub fn expired(&mut self, now: Instant) -> Vec<TimerKind> {
        let mut due = Vec::new();
        while let Some(Reverse((at, kind))) = self.heap.peek() {
            if *at > now {
                break;
            }
            due.push(*kind);
            self.heap.pop();
        }
        due
    }
}
