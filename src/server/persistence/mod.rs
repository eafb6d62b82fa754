//! When and what the server saves. Structural changes bump a revision and
//! mark the state dirty; a save starts after a short debounce but never later
//! than a maximum delay under constant churn. The loop serializes the
//! snapshot (small) and hands it to the disk thread (`persist::writer`);
//! dirty is cleared only if no newer revision arrived meanwhile. A failed save
//! never stops the server: it is logged, reported as an event and in
//! `server.status`, and retried.
//!
//! Here too: what a start-up restores from the snapshot (`restore`), and
//! how a known agent's pane resumes after a reboot (`resume_rules`).

pub(super) mod restore;
pub(super) mod resume_rules;

use super::Server;
use super::clients::connection::ConnId;
use super::panes::pane::{Pane, PaneState};
use super::timers::TimerKind;
use crate::persist::snapshot::{self, Counters, PaneRecord, Snapshot};
use crate::persist::writer::{SaveJob, Writer};
use crate::protocol::events::Event;
use crate::protocol::replies::Saved;
use crate::protocol::{ErrorCode, RpcError};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Quiet time after a change before saving.
pub const SAVE_DEBOUNCE: Duration = Duration::from_millis(500);
/// Longest a change waits for a save under constant churn.
pub const SAVE_MAX_DELAY: Duration = Duration::from_secs(5);
/// Wait before retrying a failed save.
pub const SAVE_RETRY: Duration = Duration::from_secs(1);
/// How often panes with new output get their history files rewritten (and
/// their live working directories re-read).
pub const HISTORY_INTERVAL: Duration = Duration::from_secs(30);
/// Bytes of history kept per pane on disk.
pub const HISTORY_MAX_BYTES: usize = 1 << 20;
/// Loop time a periodic save may spend rendering history files (about half
/// a millisecond per full pane); panes past it wait for a follow-up save
/// moments later, so a server with hundreds of busy panes never stalls its
/// loop for the whole set. `server.save`, shutdown and upgrades render all.
const HISTORY_RENDER_BUDGET: Duration = Duration::from_millis(10);

pub struct Persistence {
    writer: Option<Writer>,
    /// Why saving is off, if it is (a snapshot we could not read or move).
    pub disabled: Option<String>,
    /// Write per-pane history files.
    pub history: bool,
    /// Bumped by every structural change.
    pub revision: u64,
    pub saved_revision: u64,
    in_flight: Option<u64>,
    first_dirty: Option<Instant>,
    last_change: Instant,
    /// After a failed save: no automatic save before this.
    retry_at: Option<Instant>,
    /// History files to write with the next save: set by the history tick.
    history_due: bool,
    /// Where a budgeted save stopped rendering (a pane id): the next one
    /// starts after it, so busy panes early in the order cannot starve the
    /// rest.
    history_resume: u64,
    pub last_error: Option<String>,
    /// Quiet time after a change, and the longest wait under churn: the
    /// config's `save_debounce_ms` and `save_max_delay_ms`.
    pub debounce: Duration,
    pub max_delay: Duration,
    pub last_save_unix_ms: Option<u64>,
    pub last_save_ms: Option<u64>,
    /// `server.save` requests answered when a save of their revision lands.
    waiting: Vec<(ConnId, Value, u64)>,
    /// What start-up found and did, for `server.status`.
    pub restore_report: Value,
}

impl Persistence {
    pub fn new(writer: Option<Writer>, history: bool) -> Persistence {
        Persistence {
            writer,
            disabled: None,
            history,
            revision: 0,
            saved_revision: 0,
            in_flight: None,
            first_dirty: None,
            last_change: Instant::now(),
            retry_at: None,
            history_due: false,
            history_resume: 0,
            last_error: None,
            debounce: SAVE_DEBOUNCE,
            max_delay: SAVE_MAX_DELAY,
            last_save_unix_ms: None,
            last_save_ms: None,
            waiting: Vec::new(),
            restore_report: Value::Null,
        }
    }

    pub fn in_flight_revision(&self) -> Option<u64> {
        self.in_flight
    }

    fn due_at(&self) -> Option<Instant> {
        let first = self.first_dirty?;
        let due = (self.last_change + self.debounce).min(first + self.max_delay);
        Some(self.retry_at.map_or(due, |retry| due.max(retry)))
    }

    pub fn status(&self) -> Value {
        json!({
            "enabled": self.disabled.is_none(),
            "disabled_reason": self.disabled,
            "history": self.history,
            "revision": self.revision,
            "saved_revision": self.saved_revision,
            "dirty": self.first_dirty.is_some(),
            "last_error": self.last_error,
            "last_save_unix_ms": self.last_save_unix_ms,
            "last_save_ms": self.last_save_ms,
            "restore": self.restore_report,
        })
    }
}

impl Server {
    /// Records a structural change and schedules a save.
    pub(super) fn mark_dirty(&mut self) {
        // What a snapshot covers, a crash checkpoint covers too.
        self.keeper.mark_dirty();
        let now = Instant::now();
        let p = &mut self.persist;
        p.revision += 1;
        p.last_change = now;
        if p.first_dirty.is_none() {
            p.first_dirty = Some(now);
        }
        if let Some(due) = p.due_at() {
            self.timers.add(due, TimerKind::Save);
        }
    }

    /// The Save timer: saves when the debounce has passed, else re-arms.
    pub(super) fn on_save_timer(&mut self, now: Instant) {
        if self.persist.in_flight.is_some() {
            return; // the result handler re-arms
        }
        match self.persist.due_at() {
            Some(due) if due <= now => self.start_save_within(Some(HISTORY_RENDER_BUDGET)),
            Some(due) => self.timers.add(due, TimerKind::Save),
            None if self.persist.history_due => self.start_save_within(Some(HISTORY_RENDER_BUDGET)),
            None => {}
        }
    }

    /// The periodic history tick: refresh live working directories and,
    /// if any pane printed something, save with its history.
    pub(super) fn on_history_tick(&mut self) {
        self.timers
            .add(Instant::now() + HISTORY_INTERVAL, TimerKind::HistoryTick);
        let mut moved = false;
        for pane in self.panes.values_mut() {
            if let Some(cwd) = live_cwd(pane)
                && pane.move_to(cwd)
            {
                moved = true;
            }
        }
        if moved {
            self.mark_dirty();
        }
        if self.persist.history && self.panes.values().any(|p| p.history_dirty()) {
            self.persist.history_due = true;
            self.on_save_timer(Instant::now());
        }
    }

    /// Serializes the state and hands it to the disk thread.
    pub(super) fn start_save(&mut self) {
        self.start_save_within(None);
    }

    /// A live upgrade's save: history files as a periodic save renders
    /// them (`HISTORY_RENDER_BUDGET`), and no follow-up save for the rest
    /// while the upgrade runs (its slices would land between the
    /// upgrade's steps, the pause among them). Rendering them all in one
    /// turn cost 60-70 ms of CPU with 200 busy panes, 100-200 ms on a
    /// machine they keep busy, which every client connecting meanwhile
    /// waited for. The panes left dirty keep the flag, which travels with
    /// each pane (`PaneRuntime::history_dirty`): whichever server serves
    /// next renders them in its periodic saves.
    pub(super) fn start_upgrade_save(&mut self) {
        self.start_save_within(Some(HISTORY_RENDER_BUDGET));
        self.persist.history_due = false;
    }

    /// `start_save`, rendering history files for at most `budget` of loop
    /// time (all of them with `None`).
    fn start_save_within(&mut self, budget: Option<Duration>) {
        // Paused for an upgrade, the state may already be the new server's:
        // only the current owner writes snapshots.
        if self.persist.disabled.is_some()
            || self.persist.in_flight.is_some()
            || self.serving.is_paused()
        {
            return;
        }
        let Some(job) = self.build_save_job(budget) else {
            return;
        };
        let revision = job.revision;
        let submitted = self.persist.writer.as_ref().is_some_and(|w| w.submit(job));
        if submitted {
            self.persist.in_flight = Some(revision);
        } else {
            self.persist.last_error = Some("the disk writer thread is gone".into());
        }
    }

    fn build_save_job(&mut self, budget: Option<Duration>) -> Option<SaveJob> {
        let started = Instant::now();
        let state_dir = &self.paths.state_dir;
        let history_dir = crate::persist::history_dir(state_dir);
        let history = self.persist.history;
        let mut histories = Vec::new();
        let mut keep = Vec::new();
        let mut deferred = false;
        // Deferred panes that have no history file yet: not named.
        let mut unwritten = std::collections::HashSet::new();
        // Panes after the last save's stopping point first.
        let resume = self.persist.history_resume;
        let (before, after): (Vec<_>, Vec<_>) =
            self.panes.iter_mut().partition(|(id, _)| **id <= resume);
        for (&id, pane) in after.into_iter().chain(before) {
            // The shell may have moved since the last tick: save where it is.
            if let Some(cwd) = live_cwd(pane) {
                pane.move_to(cwd);
            }
            if !history {
                continue;
            }
            let name = format!("{}.txt", pane.public_id());
            if pane.history_dirty() {
                if budget.is_some_and(|b| started.elapsed() >= b) {
                    // Left dirty: a follow-up save renders it. Its file
                    // keeps the previous contents meanwhile; the session
                    // names it only if there is one (no file is written
                    // for it this time).
                    deferred = true;
                    if history_dir.join(&name).exists() {
                        keep.push(name);
                    } else {
                        unwritten.insert(id);
                    }
                    continue;
                } else {
                    histories.push((name.clone(), history_bytes(pane)));
                    pane.history_saved();
                    self.persist.history_resume = id;
                }
            }
            keep.push(name);
        }
        self.persist.history_due = deferred;
        let panes = self
            .panes
            .values()
            .map(|p| pane_record(p, history && !unwritten.contains(&p.id())))
            .collect();
        let snapshot = self.build_snapshot_with(panes);
        Some(SaveJob {
            revision: self.persist.revision,
            session_path: crate::persist::session_path(state_dir),
            session: snapshot::encode(&snapshot),
            history_dir,
            histories,
            keep_histories: keep,
        })
    }

    /// The snapshot with these pane records (a live upgrade leaves out
    /// those the new server already has).
    pub(super) fn build_snapshot_with(&self, panes: Vec<PaneRecord>) -> Snapshot {
        let tree = crate::persist::tree::to_records(&self.tree);
        Snapshot {
            version: snapshot::SNAPSHOT_VERSION,
            server_version: crate::protocol::SERVER_VERSION.to_string(),
            written_unix_ms: crate::clock::unix_ms(),
            revision: self.persist.revision,
            generation: self.generation,
            counters: Counters {
                workspace: self.tree.next_workspace_id.get(),
                tab: self.tree.next_tab_id.get(),
                pane: self.panes.next_id(),
                event: self.events.last_seq(),
            },
            active_workspace: tree.active_workspace,
            workspaces: tree.workspaces,
            tabs: tree.tabs,
            panes,
        }
    }

    /// Handles finished saves reported by the disk thread.
    pub(super) fn on_save_results(&mut self) {
        let results = self
            .persist
            .writer
            .as_ref()
            .map(Writer::results)
            .unwrap_or_default();
        for result in results {
            self.persist.in_flight = None;
            for e in &result.history_errors {
                self.log.log(
                    "history_write_failed",
                    &format!("{e}; saved the session without it"),
                );
            }
            match result.outcome {
                Ok(took) => {
                    let p = &mut self.persist;
                    p.saved_revision = p.saved_revision.max(result.revision);
                    p.last_error = None;
                    p.retry_at = None;
                    p.last_save_unix_ms = Some(crate::clock::unix_ms());
                    p.last_save_ms = Some(took.as_millis() as u64);
                    if p.saved_revision >= p.revision {
                        p.first_dirty = None;
                    }
                    self.answer_save_waiters(result.revision, Ok(()));
                }
                Err(e) => {
                    self.log.log(
                        "save_failed",
                        &format!("{e}; keeping the previous snapshot and retrying"),
                    );
                    self.persist.last_error = Some(e.clone());
                    self.persist.retry_at = Some(Instant::now() + SAVE_RETRY);
                    for pane in self.panes.values_mut() {
                        pane.mark_history_dirty();
                    }
                    self.emit(Event::ServerSaveFailed { error: e.clone() });
                    self.answer_save_waiters(result.revision, Err(e));
                    self.timers
                        .add(Instant::now() + SAVE_RETRY, TimerKind::Save);
                    if self.persist.first_dirty.is_none() {
                        self.persist.first_dirty = Some(Instant::now());
                    }
                }
            }
        }
        self.upgrade_after_save();
        if self.persist.in_flight.is_none() && !self.persist.waiting.is_empty() {
            self.start_save();
        } else if let Some(due) = self.persist.due_at()
            && self.persist.in_flight.is_none()
        {
            self.timers.add(due.max(Instant::now()), TimerKind::Save);
        } else if self.persist.history_due && self.persist.in_flight.is_none() {
            // History files a budgeted save left for later.
            self.timers.add(Instant::now(), TimerKind::Save);
        }
    }

    fn answer_save_waiters(&mut self, revision: u64, outcome: Result<(), String>) {
        let (done, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.persist.waiting)
            .into_iter()
            .partition(|w| w.2 <= revision);
        self.persist.waiting = rest;
        let path = crate::persist::session_path(&self.paths.state_dir);
        for (conn, rpc_id, _) in done {
            let reply = match &outcome {
                Ok(()) => Ok(serde_json::to_value(Saved {
                    path: path.clone(),
                    revision,
                })
                .unwrap_or(Value::Null)),
                Err(e) => Err(RpcError::new(
                    ErrorCode::Internal,
                    format!("saving failed: {e}"),
                )),
            };
            self.respond(conn, &rpc_id, reply);
        }
    }

    /// `server.save`: saves now and answers once it is on disk.
    pub(super) fn save_now(
        &mut self,
        conn: ConnId,
        rpc_id: &Value,
    ) -> Result<Option<Value>, RpcError> {
        if let Some(why) = &self.persist.disabled {
            return Err(RpcError::new(
                ErrorCode::Internal,
                format!("saving is disabled: {why}"),
            ));
        }
        self.mark_dirty();
        self.persist.history_due = true;
        for pane in self.panes.values_mut() {
            pane.mark_history_dirty();
        }
        self.persist
            .waiting
            .push((conn, rpc_id.clone(), self.persist.revision));
        self.start_save();
        Ok(None)
    }

    /// Saves synchronously at shutdown (or after a crash of the loop),
    /// waiting for the disk thread to finish.
    /// The last save before the server stops; the first error, if it
    /// failed.
    pub(super) fn final_save(&mut self) -> Option<String> {
        if self.persist.disabled.is_some() {
            return None;
        }
        let mut failed = None;
        for pane in self.panes.values_mut() {
            pane.mark_history_dirty();
        }
        self.persist.in_flight = None;
        if let Some(job) = self.build_save_job(None)
            && let Some(writer) = self.persist.writer.as_mut()
        {
            writer.submit(job);
            for result in writer.finish() {
                for e in &result.history_errors {
                    self.log
                        .log("history_write_failed", &format!("final save: {e}"));
                }
                if let Err(e) = result.outcome {
                    self.log.log("save_failed", &format!("final save: {e}"));
                    failed.get_or_insert(e.to_string());
                }
            }
        }
        failed
    }
}

/// The current directory of the pane's shell, if the OS tells us.
fn live_cwd(pane: &Pane) -> Option<std::path::PathBuf> {
    let PaneState::Running { child, .. } = pane.state() else {
        return None;
    };
    crate::sys::process_cwd(child.pid)
}

/// The last [`HISTORY_MAX_BYTES`] of the pane's text, whole lines only.
fn history_bytes(pane: &Pane) -> Vec<u8> {
    let mut text = pane.history_text(HISTORY_MAX_BYTES);
    if text.len() > HISTORY_MAX_BYTES {
        let mut cut = text.len() - HISTORY_MAX_BYTES;
        // The byte count may land inside a multi-byte character.
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        let start = text[cut..].find('\n').map_or(cut, |i| cut + i + 1);
        text.drain(..start);
    }
    text.into_bytes()
}

/// A pane's snapshot record; `with_history`: its history file exists.
pub(super) fn pane_record(p: &super::panes::pane::Pane, with_history: bool) -> PaneRecord {
    PaneRecord {
        id: p.public_id().to_string(),
        name: p.name().map(str::to_string),
        cwd: p.cwd().to_string_lossy().into_owned(),
        command: p.command().clone(),
        env: p.env().clone(),
        cols: p.cols(),
        rows: p.rows(),
        restore: p.restore(),
        resume: p.resume().map(str::to_string),
        history: with_history.then(|| format!("{}.txt", p.public_id())),
        pid: p.child().map(|c| c.pid),
        start_token: p.child().and_then(|c| c.start_token),
        no_shell_integration: !p.shell_integration(),
        exit: p.exit_state().map(|(status, reason)| snapshot::SavedExit {
            status,
            reason: reason.as_str().to_string(),
        }),
    }
}
