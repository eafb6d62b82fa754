//! The serving process's side of the keeper channel (`keeper`):
//! it sends each pane's fds as the pane starts, says when a pane is
//! removed, and writes crash checkpoints; a replacement server started
//! after a crash replays each pane's output ring since the checkpoint.
//!
//! Nothing here blocks the loop: the channel is non-blocking, and what
//! does not fit waits in a bounded queue flushed every turn.
//!
//! Checkpoints are the live upgrade's own formats, so the keeper can play
//! the old side of a handoff from them: a `Precopy` holding every pane
//! (record, runtime state, terminal model without its history lines, which
//! are in the history log: `history_log.rs`) and the event ring, and a
//! `Manifest` naming every pane unchanged, with no connections (clients
//! reconnect by themselves) and a `recovery` section carrying each pane's
//! ring position at the checkpoint. A checkpoint is written when
//! something changed, at most every `CHECKPOINT_INTERVAL`, in the same loop
//! turn as a pane is added or removed (whatever the last one cost), and as soon as a pane has written half its
//! ring since the last one (a pane is not read while a whole ring's worth
//! is unsaved; the PTY holds the rest, so a crash loses nothing). It is
//! encoded a slice of a loop turn at a time (`CHECKPOINT_SLICE`), each
//! pane's line with the ring position it was encoded at, so each pane is
//! recovered exactly from its own moment.

mod checkpoint;
mod recovery;

use super::history_log::HistoryLog;
use super::output_ring::{self, OutputRing};
use super::upgrade::convert;
use crate::handoff::fd_name::FdName;
use crate::handoff::manifest::{HistoryRef, Recovery};
use crate::model::PaneId;
use crate::server::Server;
use crate::server::continuity::keeper::{HeldKind, ToKeeper};
use crate::server::panes::pane::PaneState;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use checkpoint::{CachedScreen, Round};
pub(in crate::server) use recovery::{AdoptedPane, receive_adopted};

/// The servers' end of the keeper channel (and of an upgrade's
/// predecessor channel): a socket.
pub type Channel = OwnedFd;

/// A server that handed everything over (after probation) lets go of it
/// and exits, or, a first generation that had no keeper (its fork
/// failed), becomes the keeper of the new server.
pub(in crate::server) fn after_release(mut server: Server, new_pid: u32) -> Result<(), String> {
    let reader = server.lineage_reader.take();
    let namespace = server.paths.namespace.clone();
    server.release();
    drop(server);
    match reader {
        Some(reader) => {
            // A server that started without a keeper (its fork
            // failed) becomes one now, holding only its children.
            // Everything the server held is freed by now (the panes'
            // models, the connections' queues); the keeper lives on
            // for as long as the service does and needs almost none of
            // it, so the memory goes back rather than stay resident.
            crate::sys::release_free_memory();
            let keeper = crate::server::continuity::keeper::Keeper::new(
                reader,
                new_pid as i32,
                namespace,
                None,
                None,
            );
            std::process::exit(keeper.run())
        }
        None => Ok(()),
    }
}

/// The fds the keeper holds per pane: its PTY master, pidfd and ring.
const KEEPER_FDS_PER_PANE: u64 = 3;

/// A checkpoint whose pane lines (and the terminal encodings it wrote,
/// which leave the heap then) took at least this much heap gives it back
/// (`sys::release_free_memory`) a moment after it is written: the lines
/// are freed at once, but glibc keeps small freed chunks, and 1000 idle
/// 200x50 panes then kept ~6 MiB of freed lines resident for good.
const TRIM_AFTER_BYTES: usize = 1 << 20;
/// The moment: a burst of checkpoints (panes created one by one, each
/// one's) is trimmed once, after its last.
const TRIM_DELAY: Duration = Duration::from_secs(1);

/// How often a changing server writes a checkpoint, at most.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);
/// A checkpoint waits this many times its predecessor's cost after it:
/// the loop spends at most 1/20 (5 %) of its time on checkpoints.
const CHECKPOINT_COST_SHARE: u32 = 20;
/// The same for an urgent checkpoint (a pane's ring half full): at most
/// 1/4 of the loop's time while output outruns the ring. At 1/20 a
/// flooding pane filled its ring long before the paced checkpoint came
/// and was held meanwhile: `cat` of 100 MB of coloured text ran at a
/// quarter of its speed without a keeper (the checkpoints' CPU was not
/// the cost; the waiting was).
const URGENT_COST_SHARE: u32 = 4;
/// A checkpoint is encoded a slice of a loop turn at a time, this long
/// (at least one pane's line a turn): 200 panes flooding output cost
/// 15-20 ms to encode (much of it waiting for a CPU shared with them),
/// which, in one turn, a connecting client waited for on top of the
/// turn's output. Each pane's line is its state at the moment it was
/// encoded, with its ring position then; recovery replays each ring from
/// its own line's position (`write_checkpoint`).
const CHECKPOINT_SLICE: Duration = Duration::from_millis(2);
/// Test knob: at most this many panes' lines a turn (rounds of many
/// turns with few panes).
const SLICE_PANES_ENV: &str = "PTYD_CHECKPOINT_PANES";

fn slice_panes() -> usize {
    static PANES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PANES.get_or_init(|| {
        std::env::var(SLICE_PANES_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(usize::MAX)
    })
}
/// A ring's pages behind the last sent checkpoint are given back this long
/// after it, unless its pane printed `RING_BUSY` bytes meanwhile (a flood,
/// whose pages would only be faulted in again on the ring's next round).
const RING_RELEASE_AFTER: Duration = Duration::from_millis(250);
const RING_BUSY: u64 = 1 << 20;
/// Messages waiting for room on the channel, at most; past this the
/// oldest checkpoints are dropped first (a newer one supersedes them).
const QUEUE_LIMIT: usize = 4096;

/// A message waiting for room on the channel.
struct Queued {
    data: Vec<u8>,
    fds: Vec<OwnedFd>,
    checkpoint: bool,
    /// History log ranges this checkpoint no longer refers to: free once
    /// it is sent (the keeper then drops the checkpoint that did).
    freed: Vec<(u64, u64)>,
    /// Each pane's ring position this checkpoint covers: what is before
    /// it can go once it is sent.
    rings: Vec<(PaneId, u64)>,
}

/// How soon a checkpoint is due, in increasing urgency.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// Nothing a checkpoint covers changed since the last one began.
    #[default]
    Clean,
    /// Something changed: checkpoint at the interval, within the cost
    /// share.
    Dirty,
    /// A ring is half full (or a recovery happened): checkpoint now
    /// rather than at the interval, within the urgent cost share.
    Urgent,
}

/// Where the server stands with the history log it took over: the log is
/// swept (`HistoryLog::sweep`: whatever no checkpoint of ours refers to
/// is given back) once per server, when the keeper's checkpoint refers to
/// our chunks alone.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Settling {
    /// The last `serving` said not settled (a new server in probation: the
    /// old one may take back a model that refers to log ranges we free),
    /// or none was said yet.
    #[default]
    Unsettled,
    /// Settled; no checkpoint of ours has reached the keeper since.
    AwaitingCheckpoint,
    /// Settled, and a checkpoint of ours reached the keeper: sweep once
    /// nothing we freed is pending.
    SweepDue,
    /// Settled and swept.
    Swept,
}

/// The channel's state on the server side.
#[derive(Default)]
pub struct KeeperLink {
    queue: VecDeque<Queued>,
    /// How soon the next checkpoint is due; back to `Clean` as one starts.
    due: Due,
    /// A pane was added or removed: checkpoint this turn, whatever the
    /// last one cost, since a crash before it would lose the new pane (or
    /// bring back a removed one). Pane churn is user-driven and rare next
    /// to output, which the cost share is for. Unlike `due`, it lasts
    /// until a checkpoint of every pane is written, not until one starts:
    /// the round under way covers all panes from the turn it is set.
    panes_changed: bool,
    last: Option<Instant>,
    /// How many checkpoints were written, and the last one's cost, for
    /// `server.status`.
    pub written: u64,
    pub last_cost_us: u64,
    pub last_bytes: u64,
    /// The loop turns the last checkpoint was encoded over.
    last_turns: u32,
    /// When to give back the heap a large checkpoint freed (`TRIM_DELAY`).
    trim_at: Option<Instant>,
    /// The checkpoint being encoded, if one is under way.
    round: Option<Round>,

    warned: bool,
    /// The `Checkpoint` timer pending, so each turn does not add another.
    timer_at: Option<Instant>,
    /// What the keeper said about itself (pid, version, binary, a failed
    /// re-exec).
    pub info: serde_json::Value,
    /// Each pane's terminal without its history lines as last encoded,
    /// with its change count: only terminals that changed are encoded
    /// again. A screenful each (the lines are in `log`), kept in the heap
    /// only until a checkpoint has written it: from then on it is read
    /// back from that checkpoint's pre-copy (`reached`), which holds it
    /// anyway (see `CachedScreen`).
    screens: std::collections::HashMap<PaneId, CachedScreen>,
    /// Bytes of `screens`, and of history blocks now read from the log,
    /// checkpoints moved out of the heap since the heap was last given
    /// back (`TRIM_AFTER_BYTES`).
    screens_dropped: usize,
    /// Every pane's history lines, encoded once each (`history_log.rs`);
    /// made at the first checkpoint.
    log: Option<HistoryLog>,
    /// History log ranges that sent checkpoints no longer refer to, not
    /// yet given back (see `may_release`).
    sent_freed: Vec<(u64, u64)>,
    /// Ring positions the last sent checkpoint covers, not yet given
    /// back, by pane: a pane's ring is given back up to there unless it
    /// floods, looked at `RING_RELEASE_AFTER` after the checkpoint went
    /// (`keeper_tick`), and again while it floods (`rings_due`). A
    /// flooding pane keeps its
    /// pages: given back, each would be faulted in again on the ring's
    /// next round (2-3 % of the loop's time on `cat`).
    sent_rings: std::collections::HashMap<PaneId, u64>,
    /// When `sent_rings` is looked at next (a timer wakes the loop then).
    rings_due: Option<Instant>,
    /// Whether no old server in its probation may take back a model that
    /// refers to log ranges we free, and how far the sweep of the history
    /// log has come since.
    settling: Settling,
    /// The last checkpoint's pre-copy memfd (the keeper holds the same
    /// file): each event logged after it rewrites its `events_reached` in
    /// place, so a replacement numbers on after every event a client may
    /// have seen.
    reached: Option<std::fs::File>,
}

impl KeeperLink {
    /// The history log another server wrote (a live upgrade's old one, or
    /// the checkpoint's after a crash): this server's checkpoints go on
    /// appending to it.
    pub(in crate::server) fn adopt_log(&mut self, file: std::fs::File) {
        self.log = Some(HistoryLog::adopt(file));
    }

    /// The history log's fd, to hand over in an upgrade.
    pub(in crate::server) fn log_fd(&self) -> Option<RawFd> {
        self.log.as_ref().map(|l| l.file().as_raw_fd())
    }

    /// A copy of the history log's fd, to read lines from.
    pub(in crate::server) fn log_file(&self) -> Option<std::fs::File> {
        self.log.as_ref().and_then(|l| l.file().try_clone().ok())
    }

    /// No keeper to checkpoint for: the seeded encodings and the log are
    /// only memory.
    pub(in crate::server) fn drop_screens(&mut self) {
        self.screens = Default::default();
        self.log = None;
    }

    pub fn mark_dirty(&mut self) {
        self.due = self.due.max(Due::Dirty);
    }

    pub fn mark_urgent(&mut self) {
        self.due = Due::Urgent;
    }

    fn mark_panes_changed(&mut self) {
        self.mark_urgent();
        self.panes_changed = true;
    }
}

fn dup(fd: RawFd) -> Option<OwnedFd> {
    crate::sys::dup_raw(fd).ok()
}

impl Server {
    /// Queues one message for the keeper (if there is one) and tries to
    /// send what is queued.
    fn keeper_send(&mut self, msg: &ToKeeper, fds: Vec<OwnedFd>) {
        self.keeper_send_freeing(msg, fds, Vec::new(), Vec::new());
    }

    /// `keeper_send` of a checkpoint that no longer refers to the history
    /// log ranges `freed` and covers the rings up to `rings`.
    fn keeper_send_freeing(
        &mut self,
        msg: &ToKeeper,
        fds: Vec<OwnedFd>,
        mut freed: Vec<(u64, u64)>,
        rings: Vec<(PaneId, u64)>,
    ) {
        if self.lineage.is_none() {
            return;
        }
        let checkpoint = matches!(msg, ToKeeper::Checkpoint { .. });
        if self.keeper.queue.len() >= QUEUE_LIMIT {
            if let Some(i) = self.keeper.queue.iter().position(|q| q.checkpoint) {
                // Superseded: what it freed, the newer one frees too.
                if let Some(dropped) = self.keeper.queue.remove(i) {
                    freed.extend(dropped.freed);
                }
            } else if !self.keeper.warned {
                self.keeper.warned = true;
                self.log.log(
                    "keeper_queue_full",
                    "the keeper is not reading; panes started now may not survive a crash",
                );
                return;
            } else {
                return;
            }
        }
        self.keeper.queue.push_back(Queued {
            data: crate::server::continuity::keeper::encode(msg),
            fds,
            checkpoint,
            freed,
            rings,
        });
        self.keeper_flush();
    }

    /// Sends what the queue holds until the channel is full.
    pub(in crate::server) fn keeper_flush(&mut self) {
        let Some(channel) = &self.lineage else {
            self.keeper.queue.clear();
            return;
        };
        while let Some(q) = self.keeper.queue.front() {
            let raw: Vec<RawFd> = q.fds.iter().map(AsRawFd::as_raw_fd).collect();
            match crate::sys::send_with_fds(channel, &q.data, &raw) {
                Ok(_) => {
                    if let Some(q) = self.keeper.queue.pop_front() {
                        if q.checkpoint && self.keeper.settling == Settling::AwaitingCheckpoint {
                            self.keeper.settling = Settling::SweepDue;
                        }
                        self.keeper.sent_freed.extend(q.freed);
                        if !q.rings.is_empty() && self.keeper.rings_due.is_none() {
                            let at = Instant::now() + RING_RELEASE_AFTER;
                            self.keeper.rings_due = Some(at);
                            self.timers
                                .add(at, crate::server::timers::TimerKind::Checkpoint);
                        }
                        self.keeper.sent_rings.extend(q.rings);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if !self.stopping && std::env::var_os("NOTIFY_SOCKET").is_some() => {
                    // Under a service manager the keeper's death restarts
                    // the unit, whose next keeper takes the panes over from
                    // the fd store and replays each ring from the
                    // checkpoint: what we read since is in the rings now,
                    // and would be lost if we read on (a later generation
                    // has no parent-death signal to end it with the keeper,
                    // as the first has). Without a store, the manager ends
                    // the unit's processes anyway.
                    self.log.log(
                        "keeper_gone",
                        &format!(
                            "the keeper channel: {e}; exiting, for the service's restart to take the panes over"
                        ),
                    );
                    std::process::exit(1);
                }
                Err(e) => {
                    // The keeper is gone (or refuses): nothing to keep,
                    // and no checkpoint will free the rings again, so they
                    // go too (a pane is never held back for them).
                    self.log
                        .log("keeper_gone", &format!("the keeper channel: {e}"));
                    self.keeper.queue.clear();
                    self.lineage = None;
                    for pane in self.panes.values_mut() {
                        pane.drop_ring();
                        // No release will come for the log again: the
                        // blocks go back into the heap, and the log with
                        // everything else it held.
                        pane.keep_history_in_heap();
                    }
                    self.keeper.drop_screens();
                    self.keeper.sent_freed.clear();
                    self.keeper.sent_rings.clear();
                    break;
                }
            }
        }
        if !self.keeper.sent_freed.is_empty() && self.may_release() {
            let freed = std::mem::take(&mut self.keeper.sent_freed);
            if let Some(log) = &mut self.keeper.log {
                log.release(freed);
            }
        }
        // Our checkpoint is the keeper's and nothing we freed is pending:
        // whatever else is in the log is no one's.
        if self.keeper.settling == Settling::SweepDue
            && self.keeper.sent_freed.is_empty()
            && !self.keeper.queue.iter().any(|q| q.checkpoint)
            && self.may_release()
            && let Some(log) = &mut self.keeper.log
            && !log.has_freed()
        {
            log.sweep();
            self.keeper.settling = Settling::Swept;
        }
    }

    /// Whether history log ranges our checkpoints no longer refer to, and
    /// ring bytes they cover, may be given back: not while an upgrade is
    /// under way (the new server reads the ranges the pre-copy named),
    /// nor while another server may take everything back (a new one in
    /// probation: its model refers to those ranges, and its take-back
    /// reads the rings from the pause on), nor while not serving.
    fn may_release(&self) -> bool {
        self.keeper.settling != Settling::Unsettled
            && self.serving.is_owned()
            && matches!(self.upgrade, super::upgrade::Upgrade::Idle)
    }

    /// "I am current": with the listener and the lock, so a keeper that
    /// replaces a crashed server can hand them on.
    ///
    /// `namespace_fds`: only when the keeper does not hold these very
    /// files already (a server that bound them anew: a restore-mode exec,
    /// a crash loop's fresh start); the forked keeper and every live
    /// upgrade share them, so sending them again would only put copies in
    /// flight.
    ///
    /// `settled`: false from a new server in its probation (see
    /// `ToKeeper::Serving`); it says so again once the old one let go.
    pub(in crate::server) fn keeper_serving(&mut self, namespace_fds: bool, settled: bool) {
        let fds: Vec<OwnedFd> = if namespace_fds {
            [self.listener.as_raw_fd(), self.lock.raw_fd()]
                .into_iter()
                .filter_map(dup)
                .collect()
        } else {
            Vec::new()
        };
        if !settled {
            self.keeper.settling = Settling::Unsettled;
        } else if self.keeper.settling == Settling::Unsettled {
            self.keeper.settling = Settling::AwaitingCheckpoint;
        }
        let msg = ToKeeper::Serving {
            pid: std::process::id(),
            exe: self.exe_path.to_string_lossy().into_owned(),
            version: crate::protocol::SERVER_VERSION.to_string(),
            settled,
            generation: self.generation,
        };
        self.keeper_send(&msg, fds);
        self.keeper_drain();
        // Panes that came without a ring (from an older server) get one
        // (only those that can print: see `keeper_track_pane`).
        let without: Vec<u64> = self
            .panes
            .values()
            .filter(|p| p.ring().is_none() && p.can_print())
            .map(|p| p.id())
            .collect();
        for id in without {
            self.keeper_track_pane(id);
        }
        self.keeper.mark_urgent();
    }

    /// The listener or lock was made again (`rebind.rs`): the keeper's
    /// copies, which a crash recovery would hand on, are replaced by a
    /// `serving` as the one at start-up, settled as we are.
    pub(in crate::server) fn keeper_resend_namespace(&mut self) {
        let settled = self.keeper.settling != Settling::Unsettled;
        self.keeper_serving(true, settled);
    }

    /// A pane started (or started again): give it a ring if it has none,
    /// and send the keeper its master, a pidfd of its process and its
    /// ring.
    pub(in crate::server) fn keeper_track_pane(&mut self, id: u64) {
        if self.lineage.is_none() {
            return;
        }
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        // A held or exited pane has no master: no output to keep, and it
        // gets its ring when it starts again (the spawn tracks it). Every
        // held pane restored from a snapshot got one at each upgrade, two
        // fds each (ours and the keeper's copy) for nothing.
        if pane.ring().is_none() && pane.can_print() {
            match OutputRing::create(output_ring::capacity()) {
                Ok(ring) => pane.set_ring(ring),
                Err(e) => {
                    let msg = format!("pane {}: {e}", pane.public_id());
                    self.log.log("ring_failed", &msg);
                }
            }
        }
        let pane = &self.panes[&id];
        let mut kinds = Vec::new();
        let mut fds = Vec::new();
        let master = pane
            .fds()
            .master()
            .or(pane.fds().hung_up_master())
            .map(|m| m.raw_fd());
        if let Some(fd) = master.and_then(dup) {
            kinds.push(HeldKind::Master);
            fds.push(fd);
        }
        let pidfd = match (pane.fds().pidfd(), pane.state()) {
            (Some(fd), _) => dup(fd.as_raw_fd()),
            (None, PaneState::Running { child, .. }) => crate::sys::pidfd_open(child.pid).ok(),
            _ => None,
        };
        if let Some(fd) = pidfd {
            kinds.push(HeldKind::Pidfd);
            fds.push(fd);
        }
        if let Some(fd) = pane.ring().and_then(|r| dup(r.fd().as_raw_fd())) {
            kinds.push(HeldKind::Ring);
            fds.push(fd);
        }
        self.keeper_send(&ToKeeper::Pane { pane: id, kinds }, fds);
        self.keeper.mark_panes_changed();
    }

    /// After a take-back: the keeper may hold panes a dead successor
    /// added (which must hang up) and miss panes it removed (which we
    /// still serve): every pane's fds again, and the list to keep.
    pub(in crate::server) fn keeper_resync(&mut self) {
        if self.lineage.is_none() {
            return;
        }
        let ids: Vec<u64> = self.panes.keys().copied().collect();
        self.keeper_send(&ToKeeper::Panes { panes: ids.clone() }, Vec::new());
        for id in ids {
            self.keeper_track_pane(id);
        }
    }

    /// The pane is gone: the keeper closes its copies now, so the pane
    /// hangs up exactly as it would without a keeper.
    pub(in crate::server) fn keeper_forget_pane(&mut self, id: u64) {
        self.keeper_send(&ToKeeper::PaneGone { pane: id }, Vec::new());
        self.keeper.mark_panes_changed();
    }

    /// Exits the keeper reaped (pane processes re-parented to it), each
    /// reported as the pane's own; read when a SIGCHLD wakes us, and when
    /// we become current (what came meanwhile waited in the socket).
    pub(in crate::server) fn keeper_drain(&mut self) {
        if !self.serving.is_owned() {
            return;
        }
        let Some(channel) = &self.lineage else {
            return;
        };
        let mut exits = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            match crate::sys::recv_with_fds(channel, &mut buf, 0) {
                Ok(r) if r.len > 0 => {
                    match crate::server::continuity::keeper::decode_to_server(&buf[..r.len]) {
                        Some(crate::server::continuity::keeper::ToServer::Exited {
                            pid,
                            code,
                            signal,
                        }) => {
                            let exit = match (code, signal) {
                                (_, Some(s)) => crate::sys::ProcessExit::Signal(s),
                                (c, None) => crate::sys::ProcessExit::Code(c.unwrap_or(0)),
                            };
                            exits.push((pid, exit));
                        }
                        Some(crate::server::continuity::keeper::ToServer::Keeper {
                            pid,
                            version,
                            exe,
                            reexec_error,
                            fd_limit,
                        }) => {
                            if let Some(e) = &reexec_error {
                                self.log.log(
                                    "keeper_reexec_failed",
                                    &format!("the keeper (pid {pid}) runs ptyd {version} on: {e}"),
                                );
                            }
                            self.keeper.info = serde_json::json!({
                                "pid": pid,
                                "version": version,
                                "binary": exe,
                                "reexec_error": reexec_error,
                                "fd_limit": fd_limit,
                            });
                        }
                        None => {}
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        for (pid, exit) in exits {
            let pane = self
                .panes
                .values()
                .find(|p| p.is_running() && p.child().is_some_and(|c| c.pid == pid))
                .map(|p| p.id());
            let Some(id) = pane else {
                continue;
            };
            if let Some(pane) = self.panes.get_mut(&id)
                && let Some(token) = pane.fds_mut().close_pidfd(self.poll.registry())
            {
                self.sources.remove(&token);
            }
            self.on_pane_exit(id, crate::server::panes::exit::exit_status(exit));
        }
    }

    /// For `server.status`.
    pub(in crate::server) fn keeper_status(&self) -> serde_json::Value {
        let Some(channel) = &self.lineage else {
            return serde_json::Value::Null;
        };
        // The keeper made the socketpair, so it is the peer of record.
        let pid = crate::sys::peer_cred(channel).ok().and_then(|c| c.pid);
        let info = &self.keeper.info;
        serde_json::json!({
            "pid": pid,
            "version": info["version"],
            "binary": info["binary"],
            "reexec_error": info["reexec_error"],
            "fd_limit": self.keeper_fd_limit(),
            "protocol": crate::server::continuity::keeper::PROTOCOL,
            "checkpoints": self.keeper.written,
            "last_checkpoint_ms": self.keeper.last_cost_us as f64 / 1000.0,
            "last_checkpoint_bytes": self.keeper.last_bytes,
            "last_checkpoint_turns": self.keeper.last_turns,
            "history_log_panes": self.keeper.log.as_ref().map_or(0, HistoryLog::panes),
            "history_log_bytes": self.keeper.log.as_ref().map_or(0, HistoryLog::allocated_bytes),
            "last_recovery": self.last_recovery,
        })
    }

    /// The keeper's soft fd limit: as it said, else (a keeper before it
    /// raised its limit, or one not heard from yet) the limit this server
    /// started with, which it inherited too.
    fn keeper_fd_limit(&self) -> u64 {
        self.keeper.info["fd_limit"]
            .as_u64()
            .or_else(crate::sys::starting_fd_limit)
            .unwrap_or(self.fds.limit)
    }

    /// Whether the keeper could hold one more pane's fds (its PTY master,
    /// pidfd and ring) with [`FD_RESERVE`](crate::server::fd_budget::FD_RESERVE)
    /// left for its own: a pane it cannot hold would die with a crash of
    /// the serving process, and a keeper out of fds cannot start a
    /// replacement at all.
    pub(in crate::server) fn check_keeper_fds_for_pane(
        &self,
    ) -> Result<(), crate::protocol::RpcError> {
        if self.lineage.is_none() {
            return Ok(());
        }
        let limit = self.keeper_fd_limit();
        let panes = self.panes.len() as u64 + 1;
        let need = KEEPER_FDS_PER_PANE * panes + crate::server::fd_budget::FD_RESERVE;
        if need <= limit {
            return Ok(());
        }
        Err(crate::protocol::RpcError::new(
            crate::protocol::ErrorCode::SpawnFailed,
            format!(
                "cannot afford another pane: the keeper, which holds a copy of every pane's \
                 fds so the panes survive a crash of the serving process, would need {need} file \
                 descriptors for {panes} panes ({KEEPER_FDS_PER_PANE} each, and \
                 {reserve} of its own) and its limit (RLIMIT_NOFILE) is {limit}. Remove panes, or \
                 raise the limit: LimitNOFILE= in the service unit, or `ulimit -Hn` before the \
                 server starts",
                reserve = crate::server::fd_budget::FD_RESERVE
            ),
        ))
    }

    /// A child of ours exited while we do not serve (paused, or in
    /// probation after an upgrade): for the server that does (see
    /// `ToKeeper::Exited`).
    pub(in crate::server) fn keeper_forward_exit(
        &mut self,
        pid: i32,
        exit: crate::sys::ProcessExit,
    ) {
        let (code, signal) = match exit {
            crate::sys::ProcessExit::Code(c) => (Some(c), None),
            crate::sys::ProcessExit::Signal(s) => (None, Some(s)),
        };
        self.keeper_send(&ToKeeper::Exited { pid, code, signal }, Vec::new());
    }

    /// A clean stop: the EOF that follows is no crash.
    pub(in crate::server) fn keeper_stopping(&mut self) {
        self.keeper_send(&ToKeeper::Stopping, Vec::new());
    }

    /// Once a loop turn: a pane whose ring is half full since the last
    /// checkpoint makes the next one urgent; a due checkpoint is written.
    pub(in crate::server) fn keeper_tick(&mut self, now: Instant) {
        if self.keeper.trim_at.is_some_and(|at| at <= now) {
            self.keeper.trim_at = None;
            crate::sys::release_free_memory();
        }
        if self.keeper.rings_due.is_some_and(|at| at <= now) {
            self.keeper.rings_due = None;
            if self.may_release() {
                let panes = &mut self.panes;
                self.keeper
                    .sent_rings
                    .retain(|id, at| match panes.get_mut(&id.get()) {
                        Some(p) if p.ring().is_some_and(|r| r.written() - *at < RING_BUSY) => {
                            p.release_ring_before(*at);
                            false
                        }
                        Some(p) => p.ring().is_some(),
                        None => false,
                    });
            }
            if !self.keeper.sent_rings.is_empty() {
                let at = now + RING_RELEASE_AFTER;
                self.keeper.rings_due = Some(at);
                self.timers
                    .add(at, crate::server::timers::TimerKind::Checkpoint);
            }
        }
        if self.lineage.is_none() || !self.serving.is_owned() {
            // Paused for an upgrade: what the round encoded may no longer
            // be ours to send; a rollback starts again.
            self.keeper.round = None;
            return;
        }
        if self.keeper.due < Due::Urgent
            && self
                .panes
                .values()
                .any(|p| p.ring_unsaved().is_some_and(|(u, cap)| u * 2 >= cap))
        {
            self.keeper.due = Due::Urgent;
        }
        if self.keeper.round.is_some() {
            self.continue_checkpoint();
            self.keeper_flush();
            return;
        }
        if self.keeper.due == Due::Clean {
            self.keeper_flush();
            return;
        }
        // A checkpoint costs the loop its encoding (the changed terminals):
        // at most 1/CHECKPOINT_COST_SHARE of the time goes to it, or
        // 1/URGENT_COST_SHARE when a ring is half full (a ring that fills
        // before it holds its pane back, losing nothing), and an ordinary
        // one waits CHECKPOINT_INTERVAL too.
        let cost = Duration::from_micros(self.keeper.last_cost_us);
        let wait = if self.keeper.panes_changed {
            Duration::ZERO
        } else if self.keeper.due == Due::Urgent {
            cost * URGENT_COST_SHARE
        } else {
            (cost * CHECKPOINT_COST_SHARE).max(CHECKPOINT_INTERVAL)
        };
        match self.keeper.last.map(|t| t + wait).filter(|at| *at > now) {
            None => {
                // What changes from now on (a pane whose line is already
                // encoded) marks the next one due.
                self.keeper.due = Due::Clean;
                self.keeper.round = Some(Round::of(
                    self.panes.keys().copied().map(PaneId::new).collect(),
                ));
                self.continue_checkpoint();
            }
            Some(at) => {
                if self.keeper.timer_at.is_none_or(|pending| pending < now) {
                    self.keeper.timer_at = Some(at);
                    self.timers
                        .add(at, crate::server::timers::TimerKind::Checkpoint);
                }
            }
        }
        self.keeper_flush();
    }
}
