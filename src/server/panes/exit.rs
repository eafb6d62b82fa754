//! How a pane's process ends: kills (requests and watchdogs) with their
//! escalation to SIGKILL, and the exit itself, reaped by the SIGCHLD
//! handler (our children) or reported by a pidfd (inherited ones, see
//! `import/`).

use super::io::EXIT_DRAIN_BUDGET;
use super::pane::ExitReason;
use crate::protocol::events::Event;
use crate::protocol::{self, methods::ExitStatus};
use crate::server::Server;
use crate::server::timers::TimerKind;
use std::time::{Duration, Instant};

impl Server {
    /// A reaped child: if it is a running pane's process, the pane exited.
    pub(in crate::server) fn on_child_exit(&mut self, pid: i32, status: ExitStatus) {
        let pane = self
            .panes
            .values()
            .find(|p| p.is_running() && p.child().is_some_and(|c| c.pid == pid))
            .map(|p| p.id());
        if let Some(id) = pane {
            self.on_pane_exit(id, status);
        }
    }

    pub(in crate::server) fn on_pane_exit(&mut self, id: u64, status: ExitStatus) {
        self.read_pane(id, EXIT_DRAIN_BUDGET, None);
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let Some(unwritten) = pane.mark_exited(status) else {
            return;
        };
        let exit = pane.exit_json();
        let public_id = pane.public_id();
        for ack in unwritten {
            let err = protocol::RpcError::new(
                protocol::ErrorCode::PaneExited,
                format!("pane {public_id} exited before this input was written"),
            );
            self.respond(ack.conn, &ack.rpc_id, Err(err));
        }
        self.emit(Event::PaneExited {
            pane: public_id,
            exit: exit.clone(),
        });
        self.resolve_waits_on_exit(id);
        let payload =
            serde_json::json!({ "reason": "pane_exited", "pane": public_id, "exit": exit });
        self.end_attachments(id, &payload);
    }

    pub(in crate::server) fn check_idle_watchdog(&mut self, id: u64, now: Instant) {
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        let Some(idle) = pane.idle_timeout() else {
            return;
        };
        if !pane.is_running() {
            return;
        }
        let due = pane.last_output() + idle;
        if due <= now {
            self.kill_pane(
                id,
                crate::sys::SIGTERM,
                crate::server::defaults::KILL_GRACE,
                ExitReason::IdleTimeout,
            );
        } else {
            self.timers.add(due, TimerKind::PaneIdle(id, pane.run()));
        }
    }

    /// A kill's grace period ended: SIGKILL what is left of the session,
    /// if the pane still runs the run the kill was for (a respawned pane's
    /// new process is not the one we were asked to kill).
    pub(in crate::server) fn escalate_kill(&mut self, id: u64, run: u64) {
        if let Some(pane) = self.panes.get(&id).filter(|p| p.run() == run) {
            signal_pane(pane, crate::sys::SIGKILL);
        }
    }

    /// `pane.kill` without a signal: SIGHUP, as a terminal closing (and
    /// tmux) sends, which an interactive bash ignores no more than vim
    /// does, and which makes it save its history; SIGTERM halfway through
    /// `grace` to what ignored it; SIGKILL at its end. A live upgrade in
    /// between carries the SIGKILL deadline only.
    pub(in crate::server) fn kill_pane_ladder(&mut self, id: u64, grace: Duration) {
        let running = self.panes.get(&id).is_some_and(|p| p.is_running());
        self.kill_pane(id, crate::sys::SIGHUP, grace, ExitReason::Killed);
        if let (true, Some(pane)) = (running, self.panes.get(&id)) {
            // A grace too long for the clock has no middle step either.
            if let Some(at) = Instant::now().checked_add(grace / 2) {
                self.timers.add(at, TimerKind::KillTerm(id, pane.run()));
            }
        }
    }

    /// The ladder's SIGTERM, for the run it was started for.
    pub(in crate::server) fn kill_ladder_term(&mut self, id: u64, run: u64) {
        if let Some(pane) = self.panes.get(&id).filter(|p| p.run() == run) {
            signal_pane(pane, crate::sys::SIGTERM);
        }
    }

    /// Sends `signal` to every process in the pane's session and SIGKILL to
    /// what is left after `grace`. Killing an exited pane does nothing.
    pub(in crate::server) fn kill_pane(
        &mut self,
        id: u64,
        signal: i32,
        grace: Duration,
        reason: ExitReason,
    ) {
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let at = Instant::now() + grace;
        if pane.start_kill(reason, at).is_none() {
            return;
        }
        signal_pane(pane, signal);
        self.timers.add(at, TimerKind::KillEscalate(id, pane.run()));
    }
}

/// Signals every process of a running pane (`pty::signal_tree`).
pub(in crate::server) fn signal_pane(pane: &super::pane::Pane, signal: i32) {
    if let Some(child) = pane.child() {
        let fds = pane.fds();
        let master = fds.master().or(fds.hung_up_master());
        crate::pty::signal_tree(master, &child, signal);
    }
}

/// A process's end as the protocol reports it.
pub(in crate::server) fn exit_status(exit: crate::sys::ProcessExit) -> ExitStatus {
    match exit {
        crate::sys::ProcessExit::Code(c) => ExitStatus::Code(c),
        crate::sys::ProcessExit::Signal(s) => ExitStatus::Signal(s),
    }
}
