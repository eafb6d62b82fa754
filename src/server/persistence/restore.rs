//! Start-up restore: rebuild what the last snapshot described.
//!
//! Order: validate and repair the records (`persist::tree::repair`: broken
//! parts are dropped with a diagnostic, never the whole restore), rebuild
//! identities and the tree,
//! choose a plan per pane, inject each pane's history, start processes one
//! by one (a failure holds that pane, the others go on), then focus as saved.

use crate::model::{CommandSpec, PaneId, RestorePolicy};
use crate::persist::snapshot::{PaneRecord, Snapshot};
use crate::persist::tree::Repaired;
use crate::persist::{self, Loaded};
use crate::protocol::events::Event;
use crate::protocol::methods::ExitStatus;
use crate::server::Server;
use crate::server::panes::pane::{ExitReason, Pane, PaneSetup};
use crate::server::panes::spawn::existing_cwd;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// The panes' fds a keeper handed a model-less server, by pane id (the
/// keeper link's numbering).
pub(in crate::server) type Adoptable =
    HashMap<u64, crate::server::continuity::keeper_link::AdoptedPane>;

/// Most of a history file read at restore: what a save writes (1 MiB)
/// plus a margin for a file written under another bound. A larger file
/// (or one that is not a regular file) costs no more than this.
const HISTORY_READ_LIMIT: u64 = super::HISTORY_MAX_BYTES as u64 + (64 << 10);

/// What a pane does after the restore.
#[derive(Debug)]
pub(in crate::server) enum Plan {
    Run(CommandSpec),
    Hold(String),
    /// The pane had exited: it stays so, with its status.
    Exited(ExitStatus, ExitReason),
}

/// Why a restored pane runs what it runs (or is held), for the report.
#[derive(Clone, Copy)]
pub(in crate::server) enum Outcome {
    Resumed,
    Rerun,
    Shell,
    Held,
    Exited,
    /// Its running process adopted from the keeper (a crash loop's
    /// model-less fallback).
    Adopted,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Resumed => "resumed",
            Outcome::Rerun => "rerun",
            Outcome::Shell => "shell",
            Outcome::Held => "held",
            Outcome::Exited => "exited",
            Outcome::Adopted => "adopted",
        }
    }
}

/// Per-pane outcomes listed in the restore report (a snapshot of 100,000
/// panes made a report, and with it every `server.status`, of megabytes);
/// `outcome_counts` counts them all.
const MAX_OUTCOMES_KEPT: usize = 100;
/// A held pane's reason in the report is cut to this, as a repair is.
const MAX_REPAIR_BYTES: usize = persist::tree::MAX_REPAIR_BYTES;

impl Server {
    /// Loads the namespace's snapshot, if any, and rebuilds from it.
    /// With `hold_reruns` (a server a client started, see
    /// `ServerOptions::hold_reruns`) panes whose policy is `rerun` are held.
    pub(in crate::server) fn restore_from_disk(&mut self, hold_reruns: bool) {
        self.restore_with(hold_reruns, &mut HashMap::new());
    }

    /// As `restore_from_disk`, a crash loop's model-less fallback: a pane
    /// whose record names the process one of `held` runs adopts it rather
    /// than start anything (the others are restored by their policies).
    /// Returns the adopted panes; what is left in `held` matched no record.
    #[cfg(unix)]
    pub(in crate::server) fn restore_adopting(
        &mut self,
        hold_reruns: bool,
        held: &mut Adoptable,
    ) -> Vec<u64> {
        let adopted = self.restore_with(hold_reruns, held);
        adopted.into_iter().map(PaneId::get).collect()
    }

    fn restore_with(&mut self, hold_reruns: bool, held: &mut Adoptable) -> Vec<PaneId> {
        let started = Instant::now();
        let mut adopted = Vec::new();
        match persist::load(&self.paths.state_dir) {
            Loaded::Nothing => {
                self.persist.restore_report = json!({ "found": false });
            }
            Loaded::SetAside { reason, backup } => {
                let msg = format!(
                    "{reason}; moved it to {} and started empty",
                    backup.display()
                );
                self.log.log("snapshot_set_aside", &msg);
                self.emit(Event::ServerSnapshotSetAside {
                    reason: reason.clone(),
                    backup: backup.display().to_string(),
                });
                self.persist.restore_report =
                    json!({ "found": true, "set_aside": backup, "reason": reason });
            }
            Loaded::Unusable { reason } => {
                let msg = format!("{reason}; not saving so the file is not overwritten");
                self.log.log("snapshot_unusable", &msg);
                self.persist.disabled = Some(reason.clone());
                self.persist.restore_report = json!({ "found": true, "unusable": reason });
            }
            Loaded::Snapshot(snapshot) => {
                // The revision only grows, also across restarts.
                let revision = snapshot.revision;
                let (fixes, planned) = self.rebuild(snapshot, hold_reruns, held);
                adopted = planned
                    .iter()
                    .filter(|(_, o)| matches!(o, Outcome::Adopted))
                    .map(|(id, _)| *id)
                    .collect();
                let (fixes, repairs_total) = persist::tree::bound_repairs(fixes);
                self.persist.revision = self.persist.revision.max(revision);
                self.persist.saved_revision = self.persist.revision;
                for fix in &fixes {
                    self.log.log("restore_repair", fix);
                }
                let took = started.elapsed().as_millis() as u64;
                let msg = format!(
                    "restored {} panes in {took} ms ({repairs_total} repairs)",
                    self.panes.len(),
                );
                self.log.log("restored", &msg);
                let (outcomes, outcome_counts) = self.restore_outcomes(&planned);
                self.persist.restore_report = json!({
                    "found": true,
                    "file": persist::session_path(&self.paths.state_dir),
                    "unix_ms": crate::clock::unix_ms(),
                    "panes": self.panes.len(),
                    "outcomes": outcomes,
                    "outcome_counts": outcome_counts,
                    "repairs": fixes,
                    "repairs_total": repairs_total,
                    "took_ms": took,
                });
                if let Value::Object(report) = self.persist.restore_report.clone() {
                    self.emit(Event::ServerRestored { report });
                }
            }
        }
        adopted
    }

    /// Rebuilds tree and panes; returns the repairs made and what each
    /// pane was planned to do.
    fn rebuild(
        &mut self,
        snap: Snapshot,
        hold_reruns: bool,
        held: &mut Adoptable,
    ) -> (Vec<String>, Vec<(PaneId, Outcome)>) {
        // A restart is a new generation of the same session: the fence
        // keeps growing.
        self.generation = snap.generation + 1;
        self.events.continue_after(snap.counters.event);
        // Identities, the tree and the counters, repaired where broken.
        let Repaired {
            tree,
            panes: records,
            next_pane_id,
            mut fixes,
        } = persist::tree::repair(snap);
        self.tree = tree;
        self.panes.advance_next_id(next_pane_id.get());
        // Per pane: plan and start; then history. Processes start
        // while the screens are still empty (on systems where a start forks,
        // each fork copies the page tables of every screen filled so far);
        // no output is read before the loop runs, so the history still
        // comes first on each screen.
        let rules = self.config.resume_rules.clone();
        for problem in &self.config_problems {
            fixes.push(format!("config: {problem}"));
        }
        let mut fills = Vec::new();
        let mut planned = Vec::new();
        for (id, rec) in records {
            let (fill, outcome) = self.restore_pane(id, rec, &rules, hold_reruns, held, &mut fixes);
            fills.push(fill);
            planned.push((id, outcome));
        }
        // The history directory itself must be a real, private directory:
        // through a symlink we would read (and later write) elsewhere.
        let history_dir = persist::history_dir(&self.paths.state_dir);
        let histories_ok = match persist::files::check_dir(&history_dir) {
            Err(persist::files::FileError::Refused(why)) => {
                fixes.push(format!("history not restored: {why}"));
                false
            }
            _ => true,
        };
        for (id, history, notice) in fills {
            let Some(pane) = self.panes.get_mut(&id.get()) else {
                continue;
            };
            if let Some(path) = history.filter(|_| histories_ok) {
                match persist::files::read_tail(&path, HISTORY_READ_LIMIT) {
                    Ok(tail) => {
                        if tail.skipped > 0 {
                            fixes.push(format!(
                                "pane {id}: history file {} is over the {HISTORY_READ_LIMIT} byte bound; \
                                 read only its last part ({} bytes skipped)",
                                path.display(),
                                tail.skipped
                            ));
                        }
                        pane.print_history(&String::from_utf8_lossy(&tail.bytes));
                    }
                    Err(persist::files::FileError::Missing) => {}
                    Err(persist::files::FileError::Refused(why)) => {
                        fixes.push(format!("pane {id}: history not restored: {why}"));
                    }
                }
            }
            pane.print_history(&notice);
        }
        (fixes, planned)
    }

    /// Per pane, what the restore did with it (`outcomes` of the restore
    /// report, `server.status` and the `server.restored` event): `resumed`
    /// (its resume command, or a resume rule's), `rerun`, `shell` (back as
    /// a fresh shell) or `held` (with the reason, which names the failure
    /// of a start that did not work). The report stays in `server.status`
    /// for the server's whole life, so only the first
    /// [`MAX_OUTCOMES_KEPT`] are listed, reasons cut; the counts per
    /// outcome cover every pane.
    fn restore_outcomes(&self, planned: &[(PaneId, Outcome)]) -> (Vec<Value>, Value) {
        let mut listed = Vec::new();
        let mut counts = serde_json::Map::new();
        for (id, outcome) in planned {
            let Some(pane) = self.panes.get(&id.get()) else {
                continue;
            };
            let name = match pane.held_reason() {
                Some(_) => "held",
                None => outcome.name(),
            };
            let count = counts.entry(name).or_insert(json!(0));
            *count = json!(count.as_u64().unwrap_or(0) + 1);
            if listed.len() >= MAX_OUTCOMES_KEPT {
                continue;
            }
            let mut entry = json!({
                "pane": pane.public_id(),
                "name": pane.name(),
                "policy": pane.restore(),
                "outcome": name,
            });
            if let Some(why) = pane.held_reason() {
                entry["held_reason"] = json!(crate::validate::excerpt(why, MAX_REPAIR_BYTES));
            }
            listed.push(entry);
        }
        (listed, Value::Object(counts))
    }

    /// Creates and starts (or holds) one pane; returns what its screen gets
    /// afterwards: its history file, if any, and the restore notice.
    fn restore_pane(
        &mut self,
        id: PaneId,
        rec: PaneRecord,
        rules: &super::resume_rules::ResumeRules,
        hold_reruns: bool,
        held: &mut Adoptable,
        fixes: &mut Vec<String>,
    ) -> ((PaneId, Option<PathBuf>, String), Outcome) {
        // Only the very process the record was saved with: a pane
        // respawned since the save runs another (that one is let go).
        let adopt = held
            .remove(&id.get())
            .filter(|h| rec.exit.is_none() && h.is_process(rec.pid, rec.start_token));
        let saved_cwd = PathBuf::from(&rec.cwd);
        let cwd = if saved_cwd.is_absolute() && saved_cwd.is_dir() {
            saved_cwd.clone()
        } else {
            existing_cwd(&saved_cwd)
        };
        let (cols, rows) = adopt
            .as_ref()
            .and_then(|h| h.size())
            .unwrap_or((rec.cols, rec.rows));
        let (cols, rows) = crate::pty::clamp_size(u32::from(cols), u32::from(rows));
        let (plan, outcome) = plan(id, &rec, rules, hold_reruns);
        let token = self.alloc_token(crate::server::Source::Pane(id.get()));
        let setup = PaneSetup {
            id: id.get(),
            name: rec.name,
            command: rec.command,
            cwd: cwd.clone(),
            env: rec.env,
            // A snapshot has no client environment: see docs/design/environment.md.
            client_env: None,
            cols,
            rows,
            timeout: None,
            idle_timeout: None,
            restore: rec.restore,
            resume: rec.resume,
            term: self.config.term.clone(),
            shell_integration: !rec.no_shell_integration,
        };
        let pane = Pane::new(setup, token, String::new());
        let history = rec
            .history
            .filter(|_| self.persist.history)
            .map(|file| persist::history_dir(&self.paths.state_dir).join(file));
        let mut notice = format!("--- ptyd: restored {} ---", restored_when());
        if cwd != saved_cwd {
            let saved = saved_cwd.to_string_lossy();
            let saved = crate::validate::excerpt(&saved, 256);
            notice.push_str(&format!(
                "\r\n--- ptyd: {saved} no longer exists; starting in {} ---",
                cwd.display()
            ));
            fixes.push(format!(
                "pane {id}: cwd {saved} is gone, using {}",
                cwd.display()
            ));
        }
        self.panes.insert(id.get(), Box::new(pane));
        if let Some(h) = adopt {
            match self.adopt_pane(id.get(), h) {
                Ok(()) => {
                    let notice =
                        "--- ptyd: the screen was lost in a crash loop; the program runs on ---";
                    return ((id, history, notice.to_string()), Outcome::Adopted);
                }
                // Restored by its policy instead, as a pane without one.
                Err(e) => fixes.push(format!("pane {id}: its process could not be adopted: {e}")),
            }
        }
        match plan {
            Plan::Hold(reason) => {
                if let Some(p) = self.panes.get_mut(&id.get()) {
                    p.hold(reason);
                }
            }
            Plan::Exited(status, reason) => {
                let pid = rec.pid.unwrap_or(0);
                let child = crate::pty::ChildProcess {
                    pid,
                    sid: pid,
                    start_token: rec.start_token,
                };
                if let Some(p) = self.panes.get_mut(&id.get()) {
                    p.restore_exited(child, status, reason);
                }
            }
            Plan::Run(command) => {
                if let Err(e) = self.start_pane(id.get(), &command, true) {
                    fixes.push(format!("pane {id} failed to start: {e}"));
                    if let Some(p) = self.panes.get_mut(&id.get()) {
                        p.hold(format!("failed to start after restore: {}", e.0.message));
                    }
                }
            }
        }
        ((id, history, notice), outcome)
    }
}

/// What a restored pane does: run its `resume` (or a rule's), a plain
/// shell again, its command if its policy re-runs it, a fresh login shell,
/// or hold. A plan to run a command the API would refuse (an empty argv,
/// say) holds the pane instead: it waits for the user, it never panics.
/// Pure, so the snapshot fuzz target plans exactly as a restore does.
pub(in crate::server) fn plan(
    id: PaneId,
    rec: &PaneRecord,
    rules: &super::resume_rules::ResumeRules,
    hold_reruns: bool,
) -> (Plan, Outcome) {
    let by_rule = rec
        .resume
        .is_none()
        .then(|| rules.resume_for(&rec.command))
        .flatten();
    // Its work was done: running it again (or a resume) is for `respawn`.
    if let Some(exit) = &rec.exit {
        let reason = ExitReason::parse(&exit.reason).unwrap_or(ExitReason::Exited);
        return (Plan::Exited(exit.status, reason), Outcome::Exited);
    }
    let (plan, outcome) = match (&rec.resume, &rec.command, rec.restore) {
        (Some(resume), _, _) => (
            Plan::Run(CommandSpec::Shell(resume.clone())),
            Outcome::Resumed,
        ),
        (None, _, _) if by_rule.is_some() => (
            Plan::Run(CommandSpec::Shell(by_rule.clone().unwrap_or_default())),
            Outcome::Resumed,
        ),
        (None, cmd, _) if is_plain_shell(cmd) => (Plan::Run(cmd.clone()), Outcome::Shell),
        (None, cmd, RestorePolicy::Rerun) if !hold_reruns => {
            (Plan::Run(cmd.clone()), Outcome::Rerun)
        }
        // Listing panes must not run commands as a side effect.
        (None, _, RestorePolicy::Rerun) => (
            Plan::Hold(format!(
                "restored by a server a client command started, which re-runs nothing; \
                 `ptyd respawn {id}` runs it again"
            )),
            Outcome::Held,
        ),
        (None, _, RestorePolicy::Shell) => (Plan::Run(CommandSpec::LoginShell), Outcome::Shell),
        (None, _, RestorePolicy::Hold) => (
            Plan::Hold(format!(
                "restored with policy hold; `ptyd respawn {id}` starts it again"
            )),
            Outcome::Held,
        ),
    };
    // A plan to run a command the API would refuse (an empty argv, say)
    // holds the pane instead: it waits for the user, it never panics.
    match plan {
        Plan::Run(cmd) => match crate::validate::command(&cmd) {
            Ok(()) => (Plan::Run(cmd), outcome),
            Err(why) => (
                Plan::Hold(format!(
                    "its saved command cannot be started ({why}); remove it and create a new pane"
                )),
                Outcome::Held,
            ),
        },
        hold => (hold, outcome),
    }
}

/// A pane that runs just an interactive shell: restored as a fresh shell
/// whatever its policy, since re-running it is exactly that.
fn is_plain_shell(command: &CommandSpec) -> bool {
    const SHELLS: &[&str] = &[
        "sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "tcsh", "csh", "nu", "elvish", "xonsh",
    ];
    match command {
        CommandSpec::LoginShell => true,
        CommandSpec::Argv(argv)
            if argv.len() == 1 || argv.get(1).is_some_and(|a| a == "-l" || a == "-i") =>
        {
            let name = std::path::Path::new(&argv[0])
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            argv.len() <= 2 && SHELLS.contains(&name.trim_start_matches('-'))
        }
        _ => false,
    }
}

/// "2026-11-30 01:02:03 UTC": now, for the restore notice.
fn restored_when() -> String {
    crate::clock::utc(crate::clock::unix_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_shells_are_recognised() {
        let argv = |a: &[&str]| CommandSpec::Argv(a.iter().map(|s| s.to_string()).collect());
        assert!(is_plain_shell(&argv(&["/bin/bash"])));
        assert!(is_plain_shell(&argv(&["zsh", "-l"])));
        assert!(is_plain_shell(&CommandSpec::LoginShell));
        assert!(!is_plain_shell(&argv(&["bash", "script.sh"])));
        assert!(!is_plain_shell(&argv(&["vim"])));
        assert!(!is_plain_shell(&CommandSpec::Shell("bash".into())));
    }
}
