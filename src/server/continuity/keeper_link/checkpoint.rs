//! Checkpoints: encoding each pane's line a slice of a loop turn at a time,
//! the terminals each checkpoint encodes again only when they changed, and
//! the pre-copy and manifest written into memfds for the keeper.

use super::*;

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
pub(super) struct Round {
    /// Panes whose line is not encoded yet.
    todo: VecDeque<PaneId>,
    entries: std::collections::HashMap<PaneId, Entry>,
    /// The turns' time spent on it so far, and how many.
    spent: Duration,
    turns: u32,
}

impl Round {
    /// A round that encodes the lines of the panes `todo`.
    pub(super) fn of(todo: VecDeque<PaneId>) -> Round {
        Round {
            todo,
            ..Round::default()
        }
    }
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

/// A terminal's encoding as of its change count, and whether it holds its
/// history lines (`true`: they could not go to the log).
type ScreenVersion = (u64, bool);

/// Where a checkpoint wrote a pane's terminal: the pane, the version
/// written, and its offset and length in the pre-copy.
type SavedScreen = (PaneId, ScreenVersion, u64, usize);

/// A checkpoint's pane lines in id order, the fds they name and the ring
/// positions they cover.
type CheckpointLines = (Vec<FdName>, Vec<(PaneId, u64)>, Vec<(PaneId, Entry)>);

/// A pane's terminal encoding for checkpoints (`KeeperLink::screens`).
pub(super) struct CachedScreen {
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
        let id = PaneId::new(id);
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
        id: PaneId,
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

    /// The terminals are in the last checkpoint's pre-copy now (`saved`
    /// says where): their heap copies go (all are encoded again if we
    /// could not keep the file to read from).
    fn screens_saved(&mut self, saved: Vec<SavedScreen>) {
        if self.reached.is_none() {
            self.forget_saved_screens();
            return;
        }
        for (id, version, at, len) in saved {
            if let Some(c) = self.screens.get_mut(&id)
                && c.version == version
            {
                if let ScreenJson::Heap(raw) = &c.json {
                    self.screens_dropped += raw.get().len();
                }
                c.json = ScreenJson::Saved { at, len };
            }
        }
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
        history: Option<(
            &HistoryRef,
            &crate::server::continuity::history_log::LogCounts,
        )>,
    ) {
        let id = PaneId::new(id);
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
}

impl Server {
    /// This turn's share of the checkpoint under way (`checkpoint_turn`);
    /// until it is written, the loop turns again at once (a timer now).
    pub(super) fn continue_checkpoint(&mut self) {
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
    fn checkpoint_entry(&mut self, id: PaneId, now: Instant) -> Result<Option<Entry>, String> {
        let history_limit = self.persist.history;
        let Some(p) = self.panes.get(&id.get()) else {
            return Ok(None);
        };
        let changes = p.screen().changes();
        let (screen, history) = self
            .keeper
            .screen_version(id, p.screen())
            .map_err(|e| format!("encoding a checkpoint: {e}"))?;
        self.keep_history_once(id);
        let Some(p) = self.panes.get(&id.get()) else {
            return Ok(None);
        };
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

    /// Pane `id`'s history blocks that the log holds as records (as its
    /// sync just left them) let their bytes go from the heap: the history
    /// reads them from the log, so they are held once. A block the log no
    /// longer names for the pane (it forgot the pane: lines without
    /// numbers) comes back into the heap while its record is still there.
    fn keep_history_once(&mut self, id: PaneId) {
        let (Some(log), Some(p)) = (&self.keeper.log, self.panes.get_mut(&id.get())) else {
            return;
        };
        let source = log.source();
        // Given back to the system with the checkpoint's other garbage.
        self.keeper.screens_dropped +=
            p.keep_history_in_records(&source, |k, block| log.record_of(id, k, block));
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
        entries: &mut std::collections::HashMap<PaneId, Entry>,
        now: Instant,
    ) -> Result<(), String> {
        let (ids, rings, lines) = self.checkpoint_lines(entries, now)?;
        let (pre_fd, precopy_bytes, saved) = self.write_precopy(lines)?;
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
            rings: rings.iter().map(|&(id, at)| (id.get(), at)).collect(),
            checkpoint_unix_ms: crate::clock::unix_ms(),
        });
        let manifest_bytes =
            serde_json::to_vec(&m).map_err(|e| format!("encoding a checkpoint: {e}"))?;
        drop(m);
        let man_fd = crate::sys::anonymous_file(c"ptyd-checkpoint-manifest", &manifest_bytes)
            .map_err(|e| format!("writing a checkpoint: {e}"))?;
        self.keeper.reached = pre_fd.try_clone().ok().map(std::fs::File::from);
        self.keeper.screens_saved(saved);
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
            if let Some(p) = self.panes.get_mut(&id.get()) {
                p.ring_saved_at(at);
            }
        }
        self.keeper.written += 1;
        self.keeper.last_bytes = precopy_bytes + manifest_bytes.len() as u64;
        Ok(())
    }

    /// Every pane's line of the checkpoint, in id order (as `entries`
    /// holds it while still current, else encoded now), with the fds the
    /// lines name and the ring positions they cover.
    fn checkpoint_lines(
        &mut self,
        entries: &mut std::collections::HashMap<PaneId, Entry>,
        now: Instant,
    ) -> Result<CheckpointLines, String> {
        let mut ids = Vec::new();
        let mut rings = Vec::new();
        let mut lines = Vec::with_capacity(self.panes.len());
        let panes: Vec<PaneId> = self.panes.keys().copied().map(PaneId::new).collect();
        for id in panes {
            let fresh = entries.remove(&id).filter(|e| {
                self.panes
                    .get(&id.get())
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
        Ok((ids, rings, lines))
    }

    /// A pre-copy as the upgrade sends it (JSON lines), written straight
    /// into its memfd: the head, with `events_reached` first at a fixed
    /// width (rewritten in place as events are logged after the
    /// checkpoint) and the event ring (what `server.events` replays from),
    /// each event as the ring holds its text; then a pane a line. The
    /// memfd, its length, and where each terminal went in it.
    fn write_precopy(
        &mut self,
        lines: Vec<(PaneId, Entry)>,
    ) -> Result<(OwnedFd, u64, Vec<SavedScreen>), String> {
        self.keeper
            .screens
            .retain(|id, _| self.panes.contains_key(&id.get()));
        let panes = &self.panes;
        if let Some(log) = &mut self.keeper.log {
            log.retain(|id| panes.contains_key(&id.get()));
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
        let saved = self.write_precopy_lines(&mut out, &lines)?;
        drop(lines);
        let pre_file = out
            .out
            .into_inner()
            .map_err(|e| format!("writing a checkpoint: {}", e.error()))?;
        let precopy_bytes = pre_file.metadata().map_err(io)?.len();
        Ok((OwnedFd::from(pre_file), precopy_bytes, saved))
    }

    /// Each line with its terminal at its slot: from the heap if it was
    /// encoded since the last checkpoint, else from that checkpoint's
    /// pre-copy. Where each went, to read it back from.
    fn write_precopy_lines(
        &mut self,
        out: &mut Counted<impl std::io::Write>,
        lines: &[(PaneId, Entry)],
    ) -> Result<Vec<SavedScreen>, String> {
        use std::io::Write;
        let io = |e: std::io::Error| format!("writing a checkpoint: {e}");
        let mut saved = Vec::with_capacity(lines.len());
        let mut scratch = Vec::new();
        for (id, entry) in lines {
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
        Ok(saved)
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
}

/// Pane `id`'s terminal as a checkpoint holds it: without its history
/// lines (they are in the log) unless `whole`.
fn encode_screen(
    id: PaneId,
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
