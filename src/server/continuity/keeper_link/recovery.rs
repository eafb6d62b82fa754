//! After a crash: what a replacement server takes over from the keeper, a
//! checkpoint's rings replayed into the panes' models, or (a crash loop's
//! fallback, no model) the panes' bare fds to adopt their processes.

use super::*;

impl Server {
    /// After a crash: events the dead server logged after its checkpoint
    /// are lost, but clients may have seen their numbers: the numbering
    /// goes on after them, each lost number a `gap` event saying so.
    pub(in crate::server) fn number_on_after(&mut self, reached: Option<u64>) {
        let Some(reached) = reached else {
            return;
        };
        let from = self.events.last_seq() + 1;
        let lost = reached.saturating_sub(self.events.last_seq());
        for _ in 0..lost.min(crate::server::events::EVENT_RING_CAPACITY as u64) {
            self.events.push(&crate::protocol::events::Event::Gap {
                from: Some(from),
                to: Some(reached),
                message: "events lost in a server crash (logged after its last checkpoint)".into(),
            });
        }
    }

    /// After a crash: each pane's output since the checkpoint, from its
    /// ring into its model. Where the ring went round since (more was
    /// printed than it holds), what is missing is marked in the
    /// scrollback; nothing is marked where the recovery is exact.
    pub(in crate::server) fn replay_rings(&mut self, recovery: &Recovery, why: &str) {
        let mut replayed = 0usize;
        let mut inexact = Vec::new();
        let mut resized = Vec::new();
        for &(id, at) in &recovery.rings {
            let Some(pane) = self.panes.get_mut(&id) else {
                continue;
            };
            // A read the dead server made but never committed.
            pane.take_ring_pending();
            let Some((bytes, complete)) = pane.ring().map(|r| r.since(at)) else {
                continue;
            };
            if !complete {
                let line = format!(
                    "\r\n\x1b[0m--- ptyd: recovered after a server crash at {} ---\r\n",
                    crate::clock::hh_mm_ss_utc(crate::clock::unix_ms())
                );
                pane.replay_output(line.as_bytes());
                inexact.push(pane.public_id().to_string());
            }
            replayed += bytes.len();
            pane.replay_output(&bytes);
            if let Some(w) = pane.ring().map(OutputRing::written) {
                pane.ring_saved_at(w);
            }
            pane.ring_fed_to_end();
            // Resized after the checkpoint: the kernel holds the size its
            // programs draw for.
            if let Some(size) = pane.fds().master().and_then(|m| m.size())
                && size != (pane.cols(), pane.rows())
            {
                resized.push((id, size));
            }
        }
        for &(id, (cols, rows)) in &resized {
            self.resize_pane(id, cols, rows);
        }
        let msg = format!(
            "{why}; took over {} panes from the keeper, replayed {replayed} bytes of output since the checkpoint{}{}",
            self.panes.len(),
            if resized.is_empty() {
                String::new()
            } else {
                format!(", resized {} to their terminal's size", resized.len())
            },
            if inexact.is_empty() {
                String::new()
            } else {
                format!(" (output lost where the ring went round: {inexact:?})")
            }
        );
        self.log.log("recovered", &msg);
        self.last_recovery = serde_json::json!({
            "reason": why,
            "at_unix_ms": crate::clock::unix_ms(),
            "checkpoint_unix_ms": recovery.checkpoint_unix_ms,
            "replayed_bytes": replayed,
            "inexact_panes": inexact,
        });
        self.keeper.mark_urgent();
    }
}

/// A pane's fds as the keeper held them, for a model-less server (a crash
/// loop's fallback) to adopt its running process: no model, no
/// checkpoint, only what the kernel keeps.
pub(in crate::server) struct AdoptedPane {
    master: OwnedFd,
    pidfd: OwnedFd,
    ring: Option<OwnedFd>,
}

impl AdoptedPane {
    /// The process's pid and start token, while it exists.
    fn process(&self) -> Option<(i32, Option<u64>)> {
        let pid = crate::sys::pidfd_pid(&self.pidfd)?;
        Some((pid, crate::sys::process_start_token(pid)))
    }

    /// Whether this is the process a snapshot record was saved with: same
    /// pid and start token (a reused pid is another process).
    pub(in crate::server) fn is_process(&self, pid: Option<i32>, start_token: Option<u64>) -> bool {
        self.process()
            .is_some_and(|(p, token)| Some(p) == pid && token == start_token)
    }

    /// The size the kernel holds for its terminal: what its program draws for.
    pub(in crate::server) fn size(&self) -> Option<(u16, u16)> {
        crate::sys::terminal_size(&self.master)
    }
}

/// How long an adopting server waits for each message of the keeper's.
const ADOPT_STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// Receives the panes' fds the keeper sends a model-less server
/// (`keeper::ADOPT_FD_ENV`), by pane. What arrived before an error is
/// kept, and the error returned beside it: a pane missing here is restored
/// by its policy.
pub(in crate::server) fn receive_adopted(
    sock: &OwnedFd,
) -> (std::collections::HashMap<u64, AdoptedPane>, Option<String>) {
    use crate::handoff::fdpass;
    let mut fds: std::collections::HashMap<FdName, OwnedFd> = std::collections::HashMap::new();
    let mut received = || -> Result<(), String> {
        if !fdpass::wait_readable(sock, ADOPT_STEP_TIMEOUT) {
            return Err(format!(
                "no word from the keeper in {} s",
                ADOPT_STEP_TIMEOUT.as_secs()
            ));
        }
        let (data, _) = fdpass::recv_message(sock).map_err(|e| e.to_string())?;
        let header: crate::server::continuity::keeper::AdoptHeader =
            serde_json::from_slice(&data).map_err(|e| format!("a bad adoption header: {e}"))?;
        for seq in 0..header.batches {
            let batch = fdpass::recv_batch_timeout::<FdName>(sock, ADOPT_STEP_TIMEOUT)
                .map_err(|e| format!("receiving fd batch {seq}: {e}"))?;
            if batch.seq != seq {
                return Err(format!("fd batch {} arrived, expected {seq}", batch.seq));
            }
            fds.extend(batch.fds);
        }
        Ok(())
    };
    let error = received().err();
    let mut panes = std::collections::HashMap::new();
    let masters: Vec<u64> = fds
        .keys()
        .filter_map(|id| match id {
            FdName::Pty(p) => Some(*p),
            _ => None,
        })
        .collect();
    for id in masters {
        let (Some(master), Some(pidfd)) =
            (fds.remove(&FdName::Pty(id)), fds.remove(&FdName::Pidfd(id)))
        else {
            continue;
        };
        let ring = fds.remove(&FdName::Ring(id));
        panes.insert(
            id,
            AdoptedPane {
                master,
                pidfd,
                ring,
            },
        );
    }
    (panes, error)
}

impl Server {
    /// Makes restored pane `id` (fresh, not started) the one running
    /// `held`'s process: its master registered as if spawned, the pidfd
    /// watched, the ring kept, the keeper told. No process is started.
    pub(in crate::server) fn adopt_pane(
        &mut self,
        id: u64,
        held: AdoptedPane,
    ) -> Result<(), String> {
        let (pid, start_token) = held
            .process()
            .ok_or_else(|| "its process is gone".to_string())?;
        let sid =
            nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))).map_or(pid, |s| s.as_raw());
        let token = self.alloc_token(crate::server::Source::Pidfd(id));
        let pane = self
            .panes
            .get_mut(&id)
            .ok_or_else(|| format!("no pane {}", crate::model::PaneId::new(id)))?;
        let master = crate::pty::PtyMaster::from_fd(held.master);
        pane.fds_mut()
            .adopt(Some(master), None, Some((held.pidfd, token)));
        if let Err(e) = pane.fds_mut().register(self.poll.registry()) {
            pane.close_fds(self.poll.registry());
            self.sources.remove(&token);
            return Err(format!("registering its terminal: {e}"));
        }
        // A ring that cannot be mapped is replaced when the keeper is told.
        if let Some(ring) = held.ring.and_then(|fd| OutputRing::adopt(fd).ok()) {
            pane.set_ring(ring);
        }
        let child = crate::pty::ChildProcess {
            pid,
            sid,
            start_token,
        };
        pane.adopt_running(child, Instant::now());
        let msg = format!(
            "pane {} pid {pid}: adopted, its screen lost",
            pane.public_id()
        );
        self.log.log("pane_adopted", &msg);
        self.keeper_track_pane(id);
        Ok(())
    }

    /// A crash loop's model-less fallback: restores the snapshot on disk,
    /// adopting the processes of `held` into the panes whose records name
    /// them, and says so (log, `server.status`). `error`: why the keeper's
    /// fds did not all arrive, if they did not.
    pub(in crate::server) fn adopt_held(
        &mut self,
        why: &str,
        hold_reruns: bool,
        held: &mut crate::server::persistence::restore::Adoptable,
        error: Option<String>,
    ) {
        let offered = held.len();
        let adopted = self.restore_adopting(hold_reruns, held);
        let mut let_go: Vec<u64> = held.keys().copied().collect();
        let_go.sort_unstable();
        // Closed now; the keeper closes its copies at our `panes`.
        held.clear();
        self.nudge_adopted(&adopted);
        let name = |id: &u64| crate::model::PaneId::new(*id).to_string();
        let restored = self.panes.len() - adopted.len();
        let msg = format!(
            "{why}; the keeper's crash loop gave up on its checkpoint: started from the snapshot on disk without any model state, \
             adopted {} of {offered} running panes (their screens lost, their programs run on), restored {restored} by their policies, \
             let go of {} the snapshot does not name as running{}",
            adopted.len(),
            let_go.len(),
            error.as_ref().map_or(String::new(), |e| format!(
                " (the keeper's fds did not all arrive: {e})"
            )),
        );
        self.log.log("recovered", &msg);
        self.last_recovery = serde_json::json!({
            "reason": why,
            "from": "adopted",
            "at_unix_ms": crate::clock::unix_ms(),
            "adopted": adopted.iter().map(name).collect::<Vec<_>>(),
            "restored": restored,
            "let_go": let_go.iter().map(name).collect::<Vec<_>>(),
            "error": error,
        });
    }

    /// After a model-less restore: the adopted panes' programs are told
    /// their size changed (one row less, then back: two SIGWINCHs), so
    /// that full-screen ones redraw the screen the crash loop lost.
    pub(in crate::server) fn nudge_adopted(&mut self, ids: &[u64]) {
        for &id in ids {
            let Some((cols, rows)) = self.panes.get(&id).map(|p| (p.cols(), p.rows())) else {
                continue;
            };
            let other = if rows > 1 { rows - 1 } else { rows + 1 };
            self.resize_pane(id, cols, other);
            self.resize_pane(id, cols, rows);
        }
    }
}
