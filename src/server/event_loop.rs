//! The loop, top to bottom: poll with the nearest deadline as timeout,
//! dispatch each ready token to its handler (pane I/O in `panes::io`,
//! connection I/O in `clients::io`), revisit the backlog, fire due timers, then
//! flush clients and close finished connections. Pane reading stops early
//! when a client connects or sends something (`arrivals`). Nothing here
//! blocks: every fd is non-blocking, every read has a per-wakeup budget,
//! every queue a bound.

use super::panes::pane::ExitReason;
use super::timers::TimerKind;
use super::{LISTENER, PREDECESSOR, SIGNALS, Server, Source, UPGRADE, WAKE};
use crate::sys::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use mio::{Events, Token};
use std::io;
use std::time::{Duration, Instant};

/// The time slice the loop's thread asks the scheduler for
/// (`sys::request_short_slices`): the shortest Linux grants, so that when a
/// key or its echo wakes the loop it preempts whatever hog holds the CPU
/// instead of waiting out that hog's default slice (0.7-3 ms). The loop
/// rarely runs that long between polls, except when feeding a flood, which
/// is then cut into more turns when others want the CPU; its share of the
/// CPU is unchanged. Measured beside a flood on 2 loaded cores,
/// interleaved against the same binary without it: echo p50 and p99 about
/// 0.8 of it over 7 runs each.
const LOOP_SLICE: Duration = Duration::from_micros(100);

impl Server {
    pub(super) fn run_loop(&mut self) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        match crate::sys::request_short_slices(LOOP_SLICE) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => self.log.log(
                "scheduler",
                &format!("asking for {LOOP_SLICE:?} time slices: {e}; keeping the default"),
            ),
        }
        // Histories put back uncompressed wait (`compress_histories`).
        let mut compressing = false;
        while !self.stopping {
            let now = Instant::now();
            let timeout = match self.pane_turn.echo_deadline(now) {
                // Waiting for an echo: the backlog waits too (below).
                Some(until) => Some(
                    self.timers
                        .poll_timeout(now)
                        .map_or(until - now, |t| t.min(until - now)),
                ),
                None if self.backlog.is_empty() && !compressing => self.timers.poll_timeout(now),
                None => Some(Duration::ZERO),
            };
            self.arrivals
                .watch_new(&self.listener, &self.conns, self.next_token);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll failed: {e}"));
            }
            let polled = Instant::now();
            self.pane_turn.begin(polled);
            for event in events.iter() {
                // An earlier event of this batch may have paused us for an
                // upgrade: from then on the listener, the panes and the
                // connections may already be the new server's, and a byte
                // read here would be lost to it (the manifest is written).
                // Only the upgrade's own sources are still ours.
                if self.serving.is_paused()
                    && !matches!(event.token(), SIGNALS | WAKE | UPGRADE | PREDECESSOR)
                {
                    continue;
                }
                self.on_ready(event);
            }
            // What the event pass read (the echo of a key, a prompt) goes
            // out now, not after the busy panes' slices below.
            self.flush_queued_output();
            // A full PTY raises no new edge: the backlog gets a pass of its
            // own. A client that arrived meanwhile keeps the turn spent: the
            // next poll serves it first.
            self.pane_turn.begin_backlog_pass(Instant::now());
            if !self.pane_turn.awaits_echo() {
                self.revisit_backlog();
            }
            compressing = self.compress_histories();
            self.enforce_history_budget();
            self.fire_timers();
            self.keeper_tick(Instant::now());
            self.flush_conns();
        }
        Ok(())
    }

    /// One ready token to its handler.
    fn on_ready(&mut self, event: &mio::event::Event) {
        match event.token() {
            LISTENER => self.accept_all(),
            SIGNALS => self.on_signals(),
            // Whoever woke us: saves, panes and console events (both
            // Windows only; Unix signals come under `SIGNALS`).
            WAKE => {
                self.on_save_results();
                self.on_panes_woken();
                self.on_prompt_notes();
                let signals = self.signals.pending_on_wake();
                self.handle_signals(signals);
            }
            UPGRADE => self.on_upgrade_readable(),
            PREDECESSOR => self.on_predecessor_readable(),
            token => match self.sources.get(&token).copied() {
                Some(Source::Pane(id)) => self.on_pane_ready(id, event),
                Some(Source::Conn(id)) => self.on_conn_ready(id, event),
                Some(Source::Pidfd(id)) => self.on_pidfd(id),
                Some(Source::Tty(id)) => self.on_tty_ready(id, event),
                None => {}
            },
        }
    }

    /// Sources that stopped at their per-wakeup budget with data left:
    /// edge-triggered polling will not report them again.
    fn revisit_backlog(&mut self) {
        let mut backlog = std::mem::take(&mut self.backlog);
        // Dropped while paused; a rollback puts every pane and connection
        // back on the backlog.
        let paused = self.serving.is_paused();
        while let Some(source) = backlog.pop_front() {
            if !paused && matches!(source, Source::Pane(_)) && self.pane_turn_spent() {
                // The turn's time for output is used up: the rest goes
                // first next turn, ahead of what this turn read.
                backlog.push_front(source);
                backlog.append(&mut self.backlog);
                self.backlog = backlog;
                return;
            }
            if let Source::Pane(id) = source
                && let Some(pane) = self.panes.get_mut(&id)
            {
                pane.leave_backlog();
            }
            if paused {
                continue;
            }
            match source {
                Source::Pane(id) => self.read_pane_paced(id),
                Source::Conn(id) => self.read_conn(id, false),
                Source::Pidfd(id) => self.on_pidfd(id),
                // Only keys left unread (a read budget, room again in
                // the pane's input) put a terminal on the backlog.
                Source::Tty(id) => self.read_tty_keys(id),
            }
        }
    }

    pub(super) fn alloc_token(&mut self, source: Source) -> Token {
        let token = Token(self.next_token);
        self.next_token += 1;
        self.sources.insert(token, source);
        token
    }

    fn on_signals(&mut self) {
        let pending = self.signals.pending();
        self.handle_signals(pending);
    }

    fn handle_signals(&mut self, pending: Vec<i32>) {
        for signal in pending {
            match signal {
                SIGCHLD => self.reap_children(),
                SIGTERM | SIGINT => {
                    self.log.log(
                        "stopping",
                        &format!("received {}", super::panes::pane::signal_name(signal)),
                    );
                    self.stop_during_upgrade();
                    self.stopping = true;
                }
                // `systemctl reload` (or the keeper forwarding it): upgrade
                // to the binary at our own path.
                // A SIGHUP is also what a user tries on a server found
                // unreachable: a removed socket is made again first, and
                // the upgrade hands on the new one.
                SIGHUP => {
                    self.check_namespace("SIGHUP");
                    self.upgrade_on_sighup()
                }
                _ => {}
            }
        }
    }

    /// Reaps every exited child; SIGCHLD coalesces, so one signal may stand
    /// for many exits.
    pub(super) fn reap_children(&mut self) {
        while let Some((pid, exit)) = crate::sys::reap_any_child() {
            let status = super::panes::exit::exit_status(exit);
            if self.upgrade.child_pid() == Some(pid) {
                self.on_upgrade_child_exit(status);
                continue;
            }
            if self.prompt_command_exited(pid, exit) {
                continue;
            }
            // While paused the manifest already describes this pane as
            // running; the new server learns the exit from the pidfd, or,
            // where the kernel cannot tell (before 6.15), from the keeper,
            // to which it goes now (our copy ends with us after probation).
            // Kept for a rollback.
            if !self.serving.is_owned() {
                self.keeper_forward_exit(pid, exit);
            }
            if let Some((pid, status)) = self.serving.defer_exit(pid, status) {
                self.on_child_exit(pid, status);
            }
        }
        // The keeper wakes us with a SIGCHLD for the exits it reaped.
        self.keeper_drain();
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        for timer in self.timers.expired(now) {
            let timer = match timer {
                TimerKind::Upgrade => timer,
                other => match self.serving.defer_timer(other) {
                    Some(timer) => timer,
                    None => continue,
                },
            };
            match timer {
                TimerKind::Upgrade => self.on_upgrade_timer(now),
                TimerKind::PaneTimeout(id, run)
                    if self.panes.get(&id).is_some_and(|p| p.run() == run) =>
                {
                    self.kill_pane(
                        id,
                        crate::sys::SIGTERM,
                        super::defaults::KILL_GRACE,
                        ExitReason::Timeout,
                    );
                }
                TimerKind::PaneIdle(id, run)
                    if self.panes.get(&id).is_some_and(|p| p.run() == run) =>
                {
                    self.check_idle_watchdog(id, now)
                }
                TimerKind::KillEscalate(id, run) => self.escalate_kill(id, run),
                TimerKind::KillTerm(id, run) => self.kill_ladder_term(id, run),
                TimerKind::PaneTimeout(..) | TimerKind::PaneIdle(..) => {}
                TimerKind::WaitTimeout(wait) => self.on_wait_timeout(wait),
                TimerKind::WaitIdle(wait) => self.check_idle_wait(wait, now),
                TimerKind::Save => self.on_save_timer(now),
                TimerKind::HistoryTick => self.on_history_tick(),
                // `keeper_tick` runs every turn; the timer only wakes us.
                TimerKind::Checkpoint => {}
                TimerKind::PaneStall(id) => self.check_stalled_clients(id, now),
                TimerKind::ConnClose(id) => self.on_close_deadline(id, now),
                TimerKind::AcceptRetry => self.on_accept_retry(),
                TimerKind::InputStall(conn) => self.check_input_stall(conn, now),
                TimerKind::ViewFrame => self.wake_views(),
                TimerKind::NamespaceCheck => self.on_namespace_check_timer(),
                TimerKind::PromptDeadline => self.on_prompt_deadline(now),
            }
        }
    }
}
