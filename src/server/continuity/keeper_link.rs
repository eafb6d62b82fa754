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

use super::history_log::HistoryLog;
use super::output_ring::{self, OutputRing};
use super::upgrade::convert;
use crate::handoff::fd_name::FdName;
use crate::handoff::manifest::{HistoryRef, Recovery};
use crate::server::Server;
use crate::server::continuity::keeper::{HeldKind, ToKeeper};
use crate::server::panes::pane::PaneState;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

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
    rings: Vec<(u64, u64)>,
}

/// One pane's line of a checkpoint's pre-copy, encoded in some turn of
/// its round, and what it is consistent with: the pane's ring position,
/// its fds (by name) and its history log reference (`HistoryLog::stamp`)
/// at that moment.
struct Entry {
    /// The line without its terminal, which goes at `slot` (from
    /// `KeeperLink::screens`, as encoded at `screen`).
    line: Vec<u8>,
    slot: usize,
    screen: ScreenVersion,
    ring: Option<u64>,
    fds: Vec<FdName>,
    logged: Option<u64>,
}

/// A checkpoint being encoded across loop turns, `CHECKPOINT_SLICE` of
/// each.
#[derive(Default)]
struct Round {
    /// Panes whose line is not encoded yet.
    todo: VecDeque<u64>,
    entries: std::collections::HashMap<u64, Entry>,
    /// The turns' time spent on it so far, and how many.
    spent: Duration,
    turns: u32,
}

/// The fds (by name) a checkpoint names for pane `p`: its terminal (or
/// the hung-up one), its process while it runs, its ring.
fn checkpoint_fds(p: &crate::server::panes::pane::Pane) -> Vec<FdName> {
    let id = p.id();
    let mut ids = Vec::with_capacity(3);
    if p.fds().master().is_some() {
        ids.push(FdName::Pty(id));
    } else if p.fds().hung_up_master().is_some() {
        ids.push(FdName::PtyHangup(id));
    }
    if matches!(p.state(), PaneState::Running { .. }) {
        ids.push(FdName::Pidfd(id));
    }
    if p.ring().is_some() {
        ids.push(FdName::Ring(id));
    }
    ids
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
    screens: std::collections::HashMap<u64, CachedScreen>,
    /// Bytes of `screens` checkpoints moved out of the heap since the
    /// heap was last given back (`TRIM_AFTER_BYTES`).
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
    sent_rings: std::collections::HashMap<u64, u64>,
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

/// A terminal's encoding as of its change count, and whether it holds its
/// history lines (`true`: they could not go to the log).
type ScreenVersion = (u64, bool);

/// A pane's terminal encoding for checkpoints (`KeeperLink::screens`).
struct CachedScreen {
    version: ScreenVersion,
    json: ScreenJson,
}

enum ScreenJson {
    /// Encoded since the last checkpoint (or handed over by an upgrade).
    Heap(Box<serde_json::value::RawValue>),
    /// Written by the last checkpoint: `len` bytes at `at` of its pre-copy
    /// memfd (`KeeperLink::reached`), which the keeper holds anyway. A
    /// heap copy of every idle pane's screen was 3 KB a pane (200x50), a
    /// seventh of all an idle pane cost, for a copy at each checkpoint
    /// that `pread` makes as well.
    Saved { at: u64, len: usize },
}

/// What a pane's line of a checkpoint holds where its terminal goes while
/// it waits to be written: valid JSON with a raw tab, which `serde_json`
/// never writes (it writes no whitespace between tokens, and a tab in a
/// string as `\t`), so whatever a client put in the pane's name, command
/// or environment, its one occurrence is the slot.
const SCREEN_SLOT: &str = "[\t0]";

/// Where the pre-copy of a checkpoint keeps its `events_reached`: right
/// after this prefix, 20 bytes (a u64's digits, then spaces, which JSON
/// allows before the comma).
const REACHED_PREFIX: &[u8] = b"{\"events_reached\":";

fn reached_field(seq: u64) -> [u8; 20] {
    let mut field = [b' '; 20];
    let digits = seq.to_string();
    field[..digits.len()].copy_from_slice(digits.as_bytes());
    field
}

impl KeeperLink {
    /// Pane `id`'s terminal as JSON without its history lines, from the
    /// cache while its change count is the one cached, else encoded and
    /// cached, and where its lines are in the history log (written there
    /// as far as they were not): checkpoints and the upgrade's pre-copy
    /// share both. `None` for the reference: the lines could not be put in
    /// the log (a history whose lines have no numbers), so the encoding
    /// holds them.
    pub(in crate::server) fn screen_json(
        &mut self,
        id: u64,
        terminal: &crate::term::Terminal,
    ) -> Result<(&serde_json::value::RawValue, Option<HistoryRef>), String> {
        let (_, history) = self.screen_version(id, terminal)?;
        let saved = match self.screens.get(&id).map(|c| &c.json) {
            Some(ScreenJson::Saved { at, len }) => Some((*at, *len)),
            _ => None,
        };
        if let Some((at, len)) = saved {
            // Read back (an upgrade's pre-copy, once); encoded again if
            // that fails: the terminal has not changed since.
            let raw = self
                .read_saved(at, len)
                .and_then(|text| serde_json::value::RawValue::from_string(text).ok());
            let raw = match raw {
                Some(raw) => raw,
                None => encode_screen(id, terminal, history.is_none())?,
            };
            if let Some(c) = self.screens.get_mut(&id) {
                c.json = ScreenJson::Heap(raw);
            }
        }
        match self.screens.get(&id).map(|c| &c.json) {
            Some(ScreenJson::Heap(raw)) => Ok((raw.as_ref(), history)),
            _ => Err(format!("pane {id}'s terminal encoding is missing")),
        }
    }

    /// Makes the cache hold pane `id`'s terminal as it is now (encoded
    /// again only if it changed): its version, and where its history lines
    /// are in the log.
    fn screen_version(
        &mut self,
        id: u64,
        terminal: &crate::term::Terminal,
    ) -> Result<(ScreenVersion, Option<HistoryRef>), String> {
        if self.log.is_none() {
            self.log = Some(HistoryLog::create()?);
        }
        let history = match &mut self.log {
            Some(log) => log.sync(id, terminal)?,
            None => None,
        };
        let version = (terminal.changes(), history.is_none());
        if self.screens.get(&id).is_none_or(|c| c.version != version) {
            // The old encoding goes first, so the allocator can give its
            // memory (same size, already mapped) to the new one.
            self.screens.remove(&id);
            let raw = encode_screen(id, terminal, version.1)?;
            self.screens.insert(
                id,
                CachedScreen {
                    version,
                    json: ScreenJson::Heap(raw),
                },
            );
        }
        Ok((version, history))
    }

    /// Drops the encodings only the last checkpoint's pre-copy holds,
    /// when it cannot be read: they are encoded again.
    fn forget_saved_screens(&mut self) {
        self.screens
            .retain(|_, c| matches!(c.json, ScreenJson::Heap(_)));
    }

    /// `len` bytes at `at` of the last checkpoint's pre-copy.
    fn read_saved(&self, at: u64, len: usize) -> Option<String> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; len];
        self.reached.as_ref()?.read_exact_at(&mut buf, at).ok()?;
        String::from_utf8(buf).ok()
    }

    /// Pane `id`'s terminal as the upgrade's pre-copy carried it (the old
    /// server's encoding, which decoded to this terminal, now at
    /// `changes`), and where its history lines are in the history log the
    /// old server handed over: a new server's first checkpoint then
    /// encodes only what changed since, not every terminal.
    pub(in crate::server) fn seed_screen(
        &mut self,
        id: u64,
        terminal: &crate::term::Terminal,
        raw: Box<serde_json::value::RawValue>,
        history: Option<(&HistoryRef, &[u32])>,
    ) {
        if let (Some(log), Some((reference, counts))) = (&mut self.log, history) {
            log.adopt_pane(id, terminal, reference, counts);
        }
        let version = (terminal.changes(), history.is_none());
        self.screens.insert(
            id,
            CachedScreen {
                version,
                json: ScreenJson::Heap(raw),
            },
        );
    }

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
        rings: Vec<(u64, u64)>,
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
                    .retain(|id, at| match panes.get_mut(id) {
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
                self.keeper.round = Some(Round {
                    todo: self.panes.keys().copied().collect(),
                    ..Round::default()
                });
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

    /// This turn's share of the checkpoint under way (`checkpoint_turn`);
    /// until it is written, the loop turns again at once (a timer now).
    fn continue_checkpoint(&mut self) {
        let all = self.keeper.panes_changed;
        match self.checkpoint_turn(all) {
            Ok(false) => {
                self.timers
                    .add(Instant::now(), crate::server::timers::TimerKind::Checkpoint);
                return;
            }
            Ok(true) => {}
            Err(e) => {
                self.log.log("checkpoint_failed", &e);
                self.keeper.round = None;
            }
        }
        if all {
            self.keeper.panes_changed = false;
        }
        self.keeper.last = Some(Instant::now());
    }

    /// Encodes pane `id`'s line of a checkpoint's pre-copy now: its
    /// record and runtime state, its terminal without its history lines
    /// (encoded again only when it changed: `screen_json`) and where those
    /// lines are in the history log, with the ring position and fds it is
    /// consistent with.
    fn checkpoint_entry(&mut self, id: u64, now: Instant) -> Result<Option<Entry>, String> {
        let history_limit = self.persist.history;
        let Some(p) = self.panes.get(&id) else {
            return Ok(None);
        };
        let changes = p.screen().changes();
        let (screen, history) = self
            .keeper
            .screen_version(id, p.screen())
            .map_err(|e| format!("encoding a checkpoint: {e}"))?;
        let slot: &serde_json::value::RawValue =
            serde_json::from_str(SCREEN_SLOT).map_err(|e| format!("encoding a checkpoint: {e}"))?;
        let mut rt = convert::pane_runtime(p, now, Some(changes)).with_screen(Some(slot));
        rt.history = history;
        let record = crate::server::persistence::pane_record(p, history_limit);
        let mut line =
            serde_json::to_vec(&(record, rt)).map_err(|e| format!("encoding a checkpoint: {e}"))?;
        line.push(b'\n');
        let slot = line
            .windows(SCREEN_SLOT.len())
            .position(|w| w == SCREEN_SLOT.as_bytes())
            .ok_or_else(|| format!("encoding a checkpoint: pane {id}'s line has no terminal"))?;
        line.drain(slot..slot + SCREEN_SLOT.len());
        Ok(Some(Entry {
            line,
            slot,
            screen,
            ring: p.ring().map(OutputRing::written),
            fds: checkpoint_fds(p),
            logged: self.keeper.log.as_ref().and_then(|l| l.stamp(id)),
        }))
    }

    /// One turn's share of the checkpoint under way: pane lines for
    /// `CHECKPOINT_SLICE` (at least one), then, once every pane has its
    /// line (or `all`: a pane was added or removed), the checkpoint is
    /// written and queued. Whether it was.
    fn checkpoint_turn(&mut self, all: bool) -> Result<bool, String> {
        let started = Instant::now();
        let now = started;
        let Some(mut round) = self.keeper.round.take() else {
            return Ok(false);
        };
        round.turns += 1;
        let mut done = 0;
        while let Some(&id) = round.todo.front() {
            if !all && done >= slice_panes() {
                break;
            }
            if !all && done > 0 && started.elapsed() >= CHECKPOINT_SLICE {
                break;
            }
            round.todo.pop_front();
            match self.checkpoint_entry(id, now) {
                Ok(Some(entry)) => {
                    round.entries.insert(id, entry);
                }
                Ok(None) => {}
                Err(e) => {
                    round.spent += started.elapsed();
                    self.keeper.round = Some(round);
                    return Err(e);
                }
            }
            done += 1;
        }
        if !round.todo.is_empty() {
            round.spent += started.elapsed();
            self.keeper.round = Some(round);
            return Ok(false);
        }
        // Before the write, which takes the lines out.
        let line_bytes: usize = round.entries.values().map(|e| e.line.capacity()).sum();
        let result = self.write_checkpoint(&mut round.entries, now);
        // The terminals checkpoints wrote left the heap too, a few at a
        // time (a checkpoint follows each new pane): 1000 new 200x50 panes
        // freed 3 MB of them, 2 MB of which glibc kept for good.
        if line_bytes + self.keeper.screens_dropped >= TRIM_AFTER_BYTES {
            self.keeper.screens_dropped = 0;
            let at = now + TRIM_DELAY;
            self.keeper.trim_at = Some(at);
            self.timers
                .add(at, crate::server::timers::TimerKind::Checkpoint);
        }
        round.spent += started.elapsed();
        self.keeper.last_cost_us = round.spent.as_micros() as u64;
        self.keeper.last_turns = round.turns;
        result.map(|()| true)
    }

    /// Writes the checkpoint (pre-copy and manifest) into two memfds and
    /// queues them for the keeper: each pane's line as `entries` holds it
    /// if it is still what the pane's fds and history log reference say
    /// (it was encoded in an earlier turn of the round: its pane's state at
    /// that moment, with its ring position then, which recovery replays
    /// from), else encoded now.
    fn write_checkpoint(
        &mut self,
        entries: &mut std::collections::HashMap<u64, Entry>,
        now: Instant,
    ) -> Result<(), String> {
        let mut ids = Vec::new();
        let mut rings = Vec::new();
        let mut lines = Vec::with_capacity(self.panes.len());
        let panes: Vec<u64> = self.panes.keys().copied().collect();
        for id in panes {
            let fresh = entries.remove(&id).filter(|e| {
                self.panes
                    .get(&id)
                    .is_some_and(|p| checkpoint_fds(p) == e.fds)
                    && self.keeper.log.as_ref().and_then(|l| l.stamp(id)) == e.logged
                    && self
                        .keeper
                        .screens
                        .get(&id)
                        .is_some_and(|c| c.version == e.screen)
            });
            let entry = match fresh {
                Some(entry) => entry,
                None => match self.checkpoint_entry(id, now)? {
                    Some(entry) => entry,
                    None => continue,
                },
            };
            ids.extend_from_slice(&entry.fds);
            if let Some(at) = entry.ring {
                rings.push((id, at));
            }
            lines.push((id, entry));
        }
        // A pre-copy as the upgrade sends it (JSON lines), written
        // straight into its memfd: the head, with `events_reached` first at
        // a fixed width (rewritten in place as events are logged after the
        // checkpoint) and the event ring (what `server.events` replays
        // from), each event as the ring holds its text; then a pane a line.
        self.keeper
            .screens
            .retain(|id, _| self.panes.contains_key(id));
        let panes = &self.panes;
        if let Some(log) = &mut self.keeper.log {
            log.retain(|id| panes.contains_key(&id));
        }
        let pre_fd = crate::sys::anonymous_file(c"ptyd-checkpoint", b"")
            .map_err(|e| format!("writing a checkpoint: {e}"))?;
        let mut out = Counted {
            out: std::io::BufWriter::with_capacity(256 << 10, std::fs::File::from(pre_fd)),
            n: 0,
        };
        let io = |e: std::io::Error| format!("writing a checkpoint: {e}");
        use std::io::Write;
        out.write_all(REACHED_PREFIX).map_err(io)?;
        out.write_all(&reached_field(self.events.last_seq()))
            .map_err(io)?;
        write!(out, ",\"event_last_seq\":{}", self.events.last_seq()).map_err(io)?;
        // Each event straight from the event ring, which holds its text:
        // a cached copy here doubled the ring (up to 8 MiB).
        out.write_all(b",\"event_ring\":[").map_err(io)?;
        let mut first = true;
        for seq in self.events.oldest_seq()..=self.events.last_seq() {
            if let Some(event) = self.events.get(seq) {
                if !first {
                    out.write_all(b",").map_err(io)?;
                }
                first = false;
                out.write_all(event.get().as_bytes()).map_err(io)?;
            }
        }
        writeln!(out, "],\"panes\":{}}}", lines.len()).map_err(io)?;
        // Each line with its terminal at its slot: from the heap if it
        // was encoded since the last checkpoint, else from that
        // checkpoint's pre-copy. Where each went, to read it back from.
        let mut saved = Vec::with_capacity(lines.len());
        let mut scratch = Vec::new();
        for (id, entry) in &lines {
            let (head, tail) = entry.line.split_at(entry.slot);
            out.write_all(head).map_err(io)?;
            let at = out.n;
            let text: &[u8] = match self.keeper.screens.get(id).map(|c| &c.json) {
                Some(ScreenJson::Heap(raw)) => raw.get().as_bytes(),
                Some(ScreenJson::Saved { at, len }) => {
                    use std::os::unix::fs::FileExt;
                    scratch.resize(*len, 0);
                    let read = self
                        .keeper
                        .reached
                        .as_ref()
                        .ok_or_else(|| std::io::Error::other("no pre-copy to read"))
                        .and_then(|f| f.read_exact_at(&mut scratch, *at));
                    if let Err(e) = read {
                        // Every saved one is encoded again next time.
                        self.keeper.forget_saved_screens();
                        return Err(format!(
                            "writing a checkpoint: reading pane {id}'s terminal back: {e}"
                        ));
                    }
                    &scratch
                }
                None => return Err(format!("writing a checkpoint: pane {id} has no terminal")),
            };
            out.write_all(text).map_err(io)?;
            saved.push((*id, entry.screen, at, text.len()));
            out.write_all(tail).map_err(io)?;
        }
        drop(lines);
        drop(scratch);
        let pre_file = out
            .out
            .into_inner()
            .map_err(|e| format!("writing a checkpoint: {}", e.error()))?;
        let precopy_bytes = pre_file.metadata().map_err(io)?.len();
        let pre_fd = OwnedFd::from(pre_file);
        let capture = convert::Capture {
            records: Vec::new(),
            runtimes: Vec::new(),
            unchanged_panes: self.panes.keys().copied().collect(),
            conns: Vec::new(),
            event_ring: Vec::new(),
            events_after: Some(self.events.last_seq()),
            binary: &self.exe_path,
            caller: None,
            fd_ids: vec![FdName::Lineage],
        };
        let mut m = self.capture_manifest(capture, now);
        // A replacement continues this generation's numbering: it is not
        // an upgrade.
        m.generation = self.generation;
        m.recovery = Some(Recovery {
            rings: rings.clone(),
            checkpoint_unix_ms: crate::clock::unix_ms(),
        });
        let manifest_bytes =
            serde_json::to_vec(&m).map_err(|e| format!("encoding a checkpoint: {e}"))?;
        drop(m);
        let man_fd = crate::sys::anonymous_file(c"ptyd-checkpoint-manifest", &manifest_bytes)
            .map_err(|e| format!("writing a checkpoint: {e}"))?;
        self.keeper.reached = pre_fd.try_clone().ok().map(std::fs::File::from);
        // The terminals are in that file now: their heap copies go (all
        // are encoded again if we could not keep the file to read from).
        if self.keeper.reached.is_none() {
            self.keeper.forget_saved_screens();
        } else {
            for (id, version, at, len) in saved {
                if let Some(c) = self.keeper.screens.get_mut(&id)
                    && c.version == version
                {
                    if let ScreenJson::Heap(raw) = &c.json {
                        self.keeper.screens_dropped += raw.get().len();
                    }
                    c.json = ScreenJson::Saved { at, len };
                }
            }
        }
        let mut fds = vec![pre_fd, man_fd];
        let mut freed = Vec::new();
        if let Some(log) = &mut self.keeper.log {
            freed = log.take_freed();
            let fd = log
                .file()
                .try_clone()
                .map_err(|e| format!("passing the history log: {e}"))?;
            fds.push(OwnedFd::from(fd));
        }
        let msg = ToKeeper::Checkpoint {
            precopy_bytes,
            manifest_bytes: manifest_bytes.len() as u64,
            ids,
            handoff: crate::handoff::manifest::HANDOFF_VERSION,
        };
        self.keeper_send_freeing(&msg, fds, freed, rings.clone());
        for (id, at) in rings {
            if let Some(p) = self.panes.get_mut(&id) {
                p.ring_saved_at(at);
            }
        }
        self.keeper.written += 1;
        self.keeper.last_bytes = precopy_bytes + manifest_bytes.len() as u64;
        Ok(())
    }

    /// An event was logged: a checkpoint is due (it carries the event
    /// ring), and until then the last one says how far the numbering got.
    pub(in crate::server) fn keeper_event_logged(&mut self) {
        if self.lineage.is_none() {
            return;
        }
        self.keeper.mark_dirty();
        if let Some(file) = &self.keeper.reached {
            use std::os::unix::fs::FileExt;
            let field = reached_field(self.events.last_seq());
            let _ = file.write_at(&field, REACHED_PREFIX.len() as u64);
        }
    }

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

/// Pane `id`'s terminal as a checkpoint holds it: without its history
/// lines (they are in the log) unless `whole`.
fn encode_screen(
    id: u64,
    terminal: &crate::term::Terminal,
    whole: bool,
) -> Result<Box<serde_json::value::RawValue>, String> {
    if whole {
        serde_json::value::to_raw_value(terminal)
    } else {
        terminal.to_json_without_history()
    }
    .map_err(|e| format!("encoding pane {id}'s terminal: {e}"))
}

/// A writer that counts what went through it: where each terminal starts
/// in a checkpoint's pre-copy.
struct Counted<W> {
    out: W,
    n: u64,
}

impl<W: std::io::Write> std::io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
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
