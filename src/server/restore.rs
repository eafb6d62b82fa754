//! Start-up restore: rebuild what the last snapshot described.
//!
//! Order: validate and repair the records (broken parts are dropped with a
//! diagnostic, never the whole restore), rebuild identities and the tree,
//! choose a plan per pane, inject each pane's history, start processes one
//! by one (a failure holds that pane, the others go on), then focus as saved.

use super::Server;
use super::pane::{Pane, PaneSetup};
use super::spawn::existing_cwd;
use crate::persist::snapshot::{LayoutRecord, PaneRecord, RestorePolicy, Snapshot, parse_id};
use crate::persist::{self, Loaded};
use crate::protocol::methods::CommandSpec;
use crate::workspace::layout::Layout;
use crate::workspace::{Tab, Tree, Workspace};
use serde_json::json;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

/// Most of a history file read at restore: what a save writes (1 MiB)
/// plus a margin for a file written under another bound. A larger file
/// (or one that is not a regular file) costs no more than this.
const HISTORY_READ_LIMIT: u64 = super::persistence::HISTORY_MAX_BYTES as u64 + (64 << 10);

/// What a pane does after the restore.
enum Plan {
    Run(CommandSpec),
    Hold(String),
}

impl Server {
    /// Loads the namespace's snapshot, if any, and rebuilds from it.
    /// With `hold_reruns` (a server a client started, see
    /// `ServerOptions::hold_reruns`) panes whose policy is `rerun` are held.
    pub(super) fn restore_from_disk(&mut self, hold_reruns: bool) {
        let started = Instant::now();
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
                self.emit(
                    "server.snapshot_set_aside",
                    json!({ "reason": reason, "backup": backup }),
                );
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
                let fixes = self.rebuild(snapshot, hold_reruns);
                self.persist.revision = self.persist.revision.max(revision);
                self.persist.saved_revision = self.persist.revision;
                for fix in &fixes {
                    self.log.log("restore_repair", fix);
                }
                let took = started.elapsed().as_millis() as u64;
                let msg = format!(
                    "restored {} panes in {took} ms ({} repairs)",
                    self.panes.len(),
                    fixes.len()
                );
                self.log.log("restored", &msg);
                self.persist.restore_report = json!({ "found": true, "panes": self.panes.len(), "repairs": fixes, "took_ms": took });
                self.emit("server.restored", self.persist.restore_report.clone());
            }
        }
    }

    /// Rebuilds tree and panes; returns the repairs made.
    fn rebuild(&mut self, snap: Snapshot, hold_reruns: bool) -> Vec<String> {
        let mut fixes = Vec::new();
        // A restart is a new generation of the same session: the fence
        // keeps growing.
        self.generation = snap.generation + 1;
        // 1. Pane identities, each id once.
        let mut records: BTreeMap<u64, PaneRecord> = BTreeMap::new();
        for rec in snap.panes {
            match parse_id('p', &rec.id) {
                Some(id) if !records.contains_key(&id) => {
                    records.insert(id, rec);
                }
                Some(_) => fixes.push(format!("dropped duplicate pane {}", rec.id)),
                None => fixes.push(format!("dropped pane with bad id {:?}", rec.id)),
            }
        }
        let mut names = HashSet::new();
        for rec in records.values_mut() {
            if let Some(name) = &rec.name
                && !names.insert(name.clone())
            {
                fixes.push(format!(
                    "pane {} lost its name {name:?}, already used by another pane",
                    rec.id
                ));
                rec.name = None;
            }
        }
        // 2. The tree: workspaces, then tabs whose layouts keep only panes
        // that exist and appear nowhere else.
        let mut tree = Tree::new();
        for ws in &snap.workspaces {
            let Some(id) = parse_id('w', &ws.id) else {
                fixes.push(format!("dropped workspace with bad id {:?}", ws.id));
                continue;
            };
            if tree.workspaces.contains_key(&id) {
                fixes.push(format!("dropped duplicate workspace {}", ws.id));
                continue;
            }
            tree.workspaces.insert(
                id,
                Workspace {
                    id,
                    name: checked_name(
                        &ws.name,
                        crate::validate::name,
                        "workspace",
                        id,
                        &mut fixes,
                    ),
                    tabs: Vec::new(),
                    active_tab: None,
                },
            );
        }
        let mut placed = HashSet::new();
        for tab in &snap.tabs {
            let (Some(id), Some(ws)) = (parse_id('t', &tab.id), parse_id('w', &tab.workspace))
            else {
                fixes.push(format!(
                    "dropped tab {:?} with a bad id or workspace",
                    tab.id
                ));
                continue;
            };
            if !tree.workspaces.contains_key(&ws) || tree.tabs.contains_key(&id) {
                fixes.push(format!(
                    "dropped tab {} (unknown workspace or duplicate id)",
                    tab.id
                ));
                continue;
            }
            let Some(layout) = layout_from_record(&tab.layout, &mut fixes) else {
                continue;
            };
            let mut keep = |p: u64| records.contains_key(&p) && placed.insert(p);
            let Some(layout) = layout.repaired(&mut keep, &mut fixes) else {
                fixes.push(format!("dropped tab {} whose panes are all gone", tab.id));
                continue;
            };
            let panes = layout.panes();
            let focus = parse_id('p', &tab.focus)
                .filter(|f| panes.contains(f))
                .unwrap_or_else(|| {
                    fixes.push(format!(
                        "tab {}: focus {} is not one of its panes; focusing p{}",
                        tab.id, tab.focus, panes[0]
                    ));
                    panes[0]
                });
            let zoom = tab
                .zoom
                .as_deref()
                .and_then(|z| parse_id('p', z))
                .filter(|z| panes.contains(z));
            if let (Some(saved), None) = (&tab.zoom, zoom) {
                fixes.push(format!(
                    "tab {}: zoom {saved} is not one of its panes; unzoomed",
                    tab.id
                ));
            }
            tree.tabs.insert(
                id,
                Tab {
                    id,
                    name: checked_name(&tab.name, crate::validate::label, "tab", id, &mut fixes),
                    workspace: ws,
                    layout,
                    focus,
                    zoom,
                },
            );
        }
        // Tab order and active tab come from the workspace records (the
        // first record of each id: duplicates were dropped above).
        let mut ordered = HashSet::new();
        for ws in &snap.workspaces {
            let Some(wid) = parse_id('w', &ws.id).filter(|w| ordered.insert(*w)) else {
                continue;
            };
            let mut listed = HashSet::new();
            let tabs: Vec<u64> = ws
                .tabs
                .iter()
                .filter_map(|t| parse_id('t', t))
                .filter(|t| tree.tabs.get(t).is_some_and(|tab| tab.workspace == wid))
                .filter(|t| {
                    let first = listed.insert(*t);
                    if !first {
                        fixes.push(format!("workspace {} listed tab t{t} twice", ws.id));
                    }
                    first
                })
                .collect();
            let active = ws
                .active_tab
                .as_deref()
                .and_then(|t| parse_id('t', t))
                .filter(|t| tabs.contains(t));
            if let Some(w) = tree.workspaces.get_mut(&wid) {
                w.active_tab = active.or(tabs.first().copied());
                w.tabs = tabs;
            }
        }
        let orphan_tabs: Vec<u64> = tree
            .tabs
            .values()
            .filter(|t| {
                !tree
                    .workspaces
                    .get(&t.workspace)
                    .is_some_and(|w| w.tabs.contains(&t.id))
            })
            .map(|t| t.id)
            .collect();
        for t in orphan_tabs {
            let ws = tree.tabs[&t].workspace;
            if let Some(w) = tree.workspaces.get_mut(&ws) {
                w.tabs.push(t);
            }
        }
        // 3. Counters never behind the ids in use.
        let max_ws = tree.workspaces.keys().max().copied().unwrap_or(0);
        let max_tab = tree.tabs.keys().max().copied().unwrap_or(0);
        let max_pane = records.keys().max().copied().unwrap_or(0);
        tree.next_workspace_id = snap.counters.workspace.max(max_ws + 1);
        tree.next_tab_id = snap.counters.tab.max(max_tab + 1);
        self.next_pane_id = snap.counters.pane.max(max_pane + 1).max(self.next_pane_id);
        for (what, saved, now) in [
            ("workspace", snap.counters.workspace, tree.next_workspace_id),
            ("tab", snap.counters.tab, tree.next_tab_id),
            ("pane", snap.counters.pane, self.next_pane_id),
        ] {
            if saved != now {
                fixes.push(format!(
                    "{what} counter {saved} was behind the ids in use; raised to {now}"
                ));
            }
        }
        tree.active_workspace = snap
            .active_workspace
            .as_deref()
            .and_then(|w| parse_id('w', w))
            .filter(|w| tree.workspaces.contains_key(w))
            .or(tree.workspaces.keys().next().copied());
        self.tree = tree;
        // Panes that were in no tab still get one, rather than vanish.
        for id in records.keys() {
            if !placed.contains(id) {
                fixes.push(format!("pane p{id} was in no tab; opened it in a new tab"));
                let ws = self.tree.default_workspace();
                self.tree.add_tab(ws, format!("p{id}"), *id);
            }
        }
        // 4-6. Per pane: plan and start; then history. Processes start
        // while the screens are still empty (on systems where a start forks,
        // each fork copies the page tables of every screen filled so far);
        // no output is read before the loop runs, so the history still
        // comes first on each screen.
        let rules = self.config.resume_rules.clone();
        for problem in &self.config_problems {
            fixes.push(format!("config: {problem}"));
        }
        let mut fills = Vec::new();
        for (id, rec) in records {
            fills.push(self.restore_pane(id, rec, &rules, hold_reruns, &mut fixes));
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
            let Some(pane) = self.panes.get_mut(&id) else {
                continue;
            };
            if let Some(path) = history.filter(|_| histories_ok) {
                match persist::files::read_tail(&path, HISTORY_READ_LIMIT) {
                    Ok(tail) => {
                        if tail.skipped > 0 {
                            fixes.push(format!(
                                "pane p{id}: history file {} is over the {HISTORY_READ_LIMIT} byte bound; \
                                 read only its last part ({} bytes skipped)",
                                path.display(),
                                tail.skipped
                            ));
                        }
                        pane.inject_history(&String::from_utf8_lossy(&tail.bytes));
                    }
                    Err(persist::files::FileError::Missing) => {}
                    Err(persist::files::FileError::Refused(why)) => {
                        fixes.push(format!("pane p{id}: history not restored: {why}"));
                    }
                }
            }
            pane.inject_history(&notice);
        }
        fixes
    }

    /// Creates and starts (or holds) one pane; returns what its screen gets
    /// afterwards: its history file, if any, and the restore notice.
    fn restore_pane(
        &mut self,
        id: u64,
        rec: PaneRecord,
        rules: &super::resume_rules::ResumeRules,
        hold_reruns: bool,
        fixes: &mut Vec<String>,
    ) -> (u64, Option<PathBuf>, String) {
        let mut rec = rec;
        repair_record(id, &mut rec, fixes);
        let saved_cwd = PathBuf::from(&rec.cwd);
        let cwd = if saved_cwd.is_absolute() && saved_cwd.is_dir() {
            saved_cwd.clone()
        } else {
            existing_cwd(&saved_cwd)
        };
        let (cols, rows) = crate::pty::clamp_size(u32::from(rec.cols), u32::from(rec.rows));
        let by_rule = rec
            .resume
            .is_none()
            .then(|| rules.resume_for(&rec.command))
            .flatten();
        let plan = match (&rec.resume, &rec.command, rec.restore) {
            (Some(resume), _, _) => Plan::Run(CommandSpec::Shell(resume.clone())),
            (None, _, _) if by_rule.is_some() => {
                Plan::Run(CommandSpec::Shell(by_rule.clone().unwrap_or_default()))
            }
            (None, cmd, _) if is_plain_shell(cmd) => Plan::Run(cmd.clone()),
            (None, cmd, RestorePolicy::Rerun) if !hold_reruns => Plan::Run(cmd.clone()),
            // Listing panes must not run commands as a side effect.
            (None, _, RestorePolicy::Rerun) => Plan::Hold(format!(
                "restored by a server a client command started, which re-runs nothing; \
                 `ptyd respawn p{id}` runs it again"
            )),
            (None, _, RestorePolicy::Shell) => Plan::Run(CommandSpec::LoginShell),
            (None, _, RestorePolicy::Hold) => Plan::Hold(format!(
                "restored with policy hold; `ptyd respawn p{id}` starts it again"
            )),
        };
        // A plan to run a command the API would refuse (an empty argv, say)
        // holds the pane instead: it waits for the user, it never panics.
        let plan = match plan {
            Plan::Run(cmd) => match crate::validate::command(&cmd) {
                Ok(()) => Plan::Run(cmd),
                Err(why) => Plan::Hold(format!(
                    "its saved command cannot be started ({why}); remove it and create a new pane"
                )),
            },
            hold => hold,
        };
        let token = self.alloc_token(super::Source::Pane(id));
        let setup = PaneSetup {
            id,
            name: rec.name,
            command: rec.command,
            cwd: cwd.clone(),
            env: rec.env,
            cols,
            rows,
            timeout: None,
            idle_timeout: None,
            restore: rec.restore,
            resume: rec.resume,
            term: self.config.term.clone(),
        };
        let pane = Pane::new(setup, token, String::new());
        let history = rec
            .history
            .filter(|_| self.persist.history)
            .map(|file| persist::history_dir(&self.paths.state_dir).join(file));
        let mut notice = format!("--- ptyd: restored {} ---", restored_when());
        if cwd != saved_cwd {
            notice.push_str(&format!(
                "\r\n--- ptyd: {} no longer exists; starting in {} ---",
                saved_cwd.display(),
                cwd.display()
            ));
            fixes.push(format!(
                "pane p{id}: cwd {} is gone, using {}",
                saved_cwd.display(),
                cwd.display()
            ));
        }
        self.panes.insert(id, pane);
        match plan {
            Plan::Hold(reason) => {
                if let Some(p) = self.panes.get_mut(&id) {
                    p.hold(reason);
                }
            }
            Plan::Run(command) => {
                if let Err(e) = self.start_pane(id, &command) {
                    fixes.push(format!("pane p{id} failed to start: {e}"));
                    if let Some(p) = self.panes.get_mut(&id) {
                        p.hold(format!("failed to start after restore: {}", e.0.message));
                    }
                }
            }
        }
        (id, history, notice)
    }
}

/// A saved workspace or tab name if it passes `rule` (the API's), else a
/// plain replacement with a repair note.
fn checked_name(
    name: &str,
    rule: fn(&str) -> Result<(), String>,
    kind: &str,
    id: u64,
    fixes: &mut Vec<String>,
) -> String {
    match rule(name) {
        Ok(()) => name.to_string(),
        Err(e) => {
            let replacement = format!("{kind}-{id}");
            fixes.push(format!(
                "{kind} {}{id}: renamed {replacement:?}: {e}",
                &kind[..1]
            ));
            replacement
        }
    }
}

/// Checks a pane record with the rules the API applies (`validate`): what
/// breaks them is dropped with a repair note (a name, environment entries,
/// a resume command, a history file name that leaves `history/`). A command
/// that cannot be started is kept (it is what the pane ran) and noted: the
/// restore holds the pane rather than run it.
fn repair_record(id: u64, rec: &mut PaneRecord, fixes: &mut Vec<String>) {
    if let Some(name) = &rec.name
        && let Err(e) = crate::validate::name(name)
    {
        fixes.push(format!("pane p{id}: dropped its {e}"));
        rec.name = None;
    }
    let before = rec.env.len();
    rec.env
        .retain(|k, v| crate::validate::env_entry(k, v).is_ok());
    if rec.env.len() < before {
        fixes.push(format!(
            "pane p{id}: dropped {} environment entries with an empty name, '=' or NUL",
            before - rec.env.len()
        ));
    }
    if let Some(resume) = &rec.resume
        && let Err(e) = crate::validate::resume(resume)
    {
        fixes.push(format!("pane p{id}: dropped its resume command: {e}"));
        rec.resume = None;
    }
    if let Some(file) = &rec.history
        && (file.is_empty() || file.contains('/') || file.contains('\0') || file.starts_with('.'))
    {
        fixes.push(format!(
            "pane p{id}: ignored history file name {file:?}: it must be a plain file name in history/"
        ));
        rec.history = None;
    }
    if let Err(e) = crate::validate::command(&rec.command) {
        fixes.push(format!("pane p{id}: its command cannot be started: {e}"));
    }
}

fn layout_from_record(rec: &LayoutRecord, fixes: &mut Vec<String>) -> Option<Layout> {
    match rec {
        LayoutRecord::Pane(id) => match parse_id('p', id) {
            Some(id) => Some(Layout::Pane(id)),
            None => {
                fixes.push(format!("dropped layout leaf with bad pane id {id:?}"));
                None
            }
        },
        LayoutRecord::Split {
            direction,
            ratio,
            first,
            second,
        } => {
            let first = layout_from_record(first, fixes);
            Layout::join(*direction, *ratio, first, layout_from_record(second, fixes))
        }
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

/// "2026-11-30 01:02:03 UTC", without a date crate.
fn restored_when() -> String {
    let secs = super::pane::unix_ms() / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm), valid for any date after 1970.
    let z = days as i64 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
