//! Undoing an upgrade, and letting go after one: the rollback edges before
//! the commit point ([R1], [R2]), the take-back in probation ([T]), the
//! resume both share, and the release once probation is over.

use super::Upgrade;
use crate::protocol::events::Event;
use crate::protocol::{ErrorCode, RpcError};
use crate::server::clients::connection::ConnId;
use crate::server::{LISTENER, Server, Source};
use mio::Interest;
use mio::unix::SourceFd;
use std::os::fd::AsRawFd;
use std::time::Instant;

impl Server {
    /// Before the commit point: kill the new process, undo everything and
    /// serve on, answer the caller with the cause.
    pub(super) fn rollback(&mut self, reason: String, phase: &'static str) {
        let Upgrade::Active(a) = std::mem::replace(&mut self.upgrade, Upgrade::Idle) else {
            return;
        };
        let mut a = *a;
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
        // Never waited for: the loop reaps it on SIGCHLD (a process that
        // takes long to die must not stall the loop).
        a.child.kill();
        drop(a.memfd.take());
        drop(std::mem::take(&mut a.opened_pidfds));
        self.drop_attempt_lineage();
        self.release_upgrade_holds();
        let was_paused = self.resume();
        let msg = format!(
            "upgrade from ptyd {} ({}) to {} failed: {reason}; this server (pid {}) keeps serving{}",
            a.from.version,
            a.from.binary.display(),
            a.binary.display(),
            a.from.pid,
            if was_paused {
                ", everything resumed, nothing lost"
            } else {
                ", nothing was touched"
            }
        );
        self.log.log("upgrade_failed", &msg);
        crate::service::notify::ready(&format!("upgrade failed: {reason}"));
        self.emit(Event::ServerUpgradeFailed {
            reason: reason.to_string(),
            phase: phase.to_string(),
        });
        if let Some((conn, rpc_id)) = a.caller {
            self.respond(
                conn,
                &rpc_id,
                Err(RpcError::new(ErrorCode::UpgradeFailed, msg)),
            );
        }
    }

    /// After the commit point, the new server died in probation: serve again
    /// with our paused copies. `answer_caller` unless the new server already
    /// answered it (then it got its answer; a second would be a lie).
    pub(super) fn take_back(&mut self, msg: String, answer_caller: bool) {
        let Upgrade::Active(a) = std::mem::replace(&mut self.upgrade, Upgrade::Idle) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
        self.drop_attempt_lineage();
        self.release_upgrade_holds();
        // What the new server read from the panes before it died is in
        // their output rings (the same memfds): into our screens first,
        // before we read on, so nothing it took is missing. A ring we saw
        // without a header (its pane had printed nothing) may have one
        // now: told so, it looks again.
        crate::server::continuity::output_ring::others_may_have_written();
        let mut caught_up = 0usize;
        let mut inexact = Vec::new();
        for pane in self.panes.values_mut() {
            if let Some((n, complete)) = pane.catch_up_ring() {
                caught_up += n;
                if !complete {
                    inexact.push(pane.public_id().to_string());
                }
            }
        }
        self.resume();
        // The dead server was our generation + 1: we go on past it, so no
        // number ever names two servers (snapshots, `status`, the keeper).
        self.generation += 2;
        // Current again: the keeper forwards signals to us, not the dead,
        // and holds our panes as we know them (the new server may have
        // added or removed some meanwhile).
        self.keeper_serving(false, true);
        self.keeper_resync();
        let logged = format!(
            "{msg}; took in {caught_up} bytes of output it had read{}",
            if inexact.is_empty() {
                String::new()
            } else {
                format!(" (some lost where the ring went round: {inexact:?})")
            }
        );
        self.log.log("upgrade_taken_back", &logged);
        // Every connection's stream was the new server's to read and write
        // since the commit: it may have consumed requests, answered them,
        // or died in the middle of a frame, none of which our paused copy
        // knows. Resuming them would answer twice, tear frames and repeat
        // output, so they are closed instead (no EXIT frame: the stream
        // may stand mid-frame); attached clients reconnect by themselves
        // and get a redraw. Only the caller, to whom the new server had
        // written nothing, gets its answer first.
        let caller = a.caller.as_ref().map(|(conn, _)| *conn);
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in conns {
            if Some(id) != caller {
                self.close_conn(id);
            }
        }
        self.emit(Event::ServerUpgradeFailed {
            reason: msg.to_string(),
            phase: "probation".to_string(),
        });
        // The new server died before answering the caller: we owe the
        // answer, or it waits forever.
        if let Some((conn, rpc_id)) = a.caller.filter(|_| answer_caller) {
            let msg = format!(
                "upgrade from ptyd {} ({}) to {} failed: {msg} (this server, pid {})",
                a.from.version,
                a.from.binary.display(),
                a.binary.display(),
                a.from.pid,
            );
            self.respond(
                conn,
                &rpc_id,
                Err(RpcError::new(ErrorCode::UpgradeFailed, msg)),
            );
        }
        if let Some(conn) = caller {
            self.close_after_flush(conn);
        }
    }

    /// A first generation serving on after a failed attempt closes the
    /// lineage pipe the attempt's pause made (the next pause makes a fresh
    /// one): nothing of a failed attempt stays open. Later generations keep
    /// the write end they inherited.
    fn drop_attempt_lineage(&mut self) {
        if self.lineage_reader.take().is_some() {
            self.lineage = None;
        }
    }

    /// The panes held since the pre-copy's delta are read again (their
    /// readiness edges were consumed while held, hence the backlog).
    fn release_upgrade_holds(&mut self) {
        for pane in self.panes.values_mut() {
            if pane.release_upgrade_hold() && pane.enter_backlog() {
                self.backlog.push_back(Source::Pane(pane.id()));
            }
        }
    }

    /// Takes every source out of the poll, once the new server owns them.
    pub(super) fn deregister_all(&mut self) {
        let registry = self.poll.registry();
        let _ = registry.deregister(&mut self.listener);
        for conn in self.conns.values_mut() {
            let _ = registry.deregister(&mut conn.stream);
        }
        for pane in self.panes.values_mut() {
            pane.fds_mut().deregister(registry);
        }
    }

    /// Serves again and catches up on what happened meanwhile: sources
    /// register again if they had left the poll (after the commit), and
    /// what was deferred is done now. Returns whether we were paused.
    fn resume(&mut self) -> bool {
        let Some((deferred, reregister)) = self.serving.resume() else {
            return false;
        };
        if reregister {
            self.register_all();
        }
        // Edge-triggered: edges that came while paused were consumed by the
        // ignoring loop (or raised none), so every source is read once.
        let panes: Vec<u64> = self.panes.keys().copied().collect();
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        self.backlog
            .extend(panes.iter().map(|id| Source::Pane(*id)));
        self.backlog
            .extend(conns.iter().map(|id| Source::Conn(*id)));
        // Their writable edges were ignored too: every queue is written.
        for conn in self.conns.values_mut() {
            conn.write_ready();
        }
        for id in panes {
            self.flush_pane_input(id);
        }
        for timer in deferred.timers {
            self.timers.add(Instant::now(), timer);
        }
        for (pid, status) in deferred.exits {
            self.on_child_exit(pid, status);
        }
        self.accept_all();
        true
    }

    fn register_all(&mut self) {
        let registry = self.poll.registry();
        let _ = registry.register(&mut self.listener, LISTENER, Interest::READABLE);
        for conn in self.conns.values_mut() {
            let _ = registry.register(
                &mut conn.stream,
                conn.token,
                Interest::READABLE | Interest::WRITABLE,
            );
            conn.note_registered(true);
        }
        for pane in self.panes.values_mut() {
            let _ = pane.fds_mut().register(registry);
        }
    }

    /// After probation: let go of every fd without hanging anything up (the
    /// new server holds the same open files, so no close here is the last).
    /// Only once released: an owned or paused server keeps everything.
    pub(in crate::server) fn release(&mut self) {
        if self.serving.released_to().is_none() {
            return;
        }
        self.log.log(
            "released",
            "handed everything to the new server; letting go",
        );
        // Out of the poll since the commit (`deregister_all`), so this
        // only closes.
        let registry = self.poll.registry();
        for pane in self.panes.values_mut() {
            pane.close_fds(registry);
        }
        self.conns.clear();
        drop(self.lineage.take());
        self.upgrade = Upgrade::Idle;
    }
}
