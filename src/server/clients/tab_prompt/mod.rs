//! The tab view's `:` prompt and `w` chooser, server side.
//!
//! A line entered at the `:` prompt is run as `ptyd` itself would run it
//! typed in a shell inside the view's focused pane: this binary, with the
//! line's words (a leading `ptyd` may be typed or not), `PTYD_PANE_ID` and
//! `PTYD_SOCKET` naming that pane and this server, in the pane's working
//! directory. So the prompt takes exactly what the command line takes, by
//! the command line's own parser and requests, and a command without a
//! TARGET acts on the focused pane (or its tab) as it does inside a pane.
//! The command connects back to this server like any client; the loop
//! never waits for it. When it ends, what it printed is shown: an error
//! (exit status not 0) or one line on the message line, several lines over
//! the panes until the next key. A tab or workspace the command made
//! current (`tab new`, `tab select`, `focus` of a pane elsewhere) is shown
//! to this client.
//!
//! A command still running after [`RUN_LIMIT`] is stopped. How its end is
//! seen is the one per-OS part (`unix.rs`: reaped with every other child at
//! SIGCHLD, the limit a timer of the loop's; `windows.rs`: a thread waits,
//! keeps the limit and wakes the loop). Commands that need a terminal
//! or never end by themselves (`attach`, `run`, `events`, `server`,
//! `demo`) are refused. A command still running at a live upgrade finishes
//! on its own, its output unseen.
//!
//! The chooser's lines are made here from the Tree and the panes; picking
//! one shows that workspace's active tab, that tab, or that pane's tab
//! focused on it.

use super::connection::ConnId;
use crate::model::{CommandSpec, PaneId, TabId};
use crate::server::Server;
use crate::view::bindings::Mode;
use crate::view::chooser::{Chooser, Entry, Target};
use crate::view::prompt::{self, Line, Purpose};
use std::collections::HashMap;
use std::io::{Read, Seek};
use std::time::{Duration, Instant};

#[cfg_attr(unix, path = "unix.rs")]
#[cfg_attr(windows, path = "windows.rs")]
mod os;

/// How long a command of the prompt may run; then it is stopped.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);
/// Most of a command's output that is read back.
const OUTPUT_LIMIT: u64 = 64 * 1024;
/// Commands the prompt refuses, and why.
const REFUSED: &[(&str, &str)] = &[
    (
        "attach",
        "needs a terminal of its own; this view is one already",
    ),
    ("a", "needs a terminal of its own; this view is one already"),
    (
        "run",
        "needs a terminal of its own: use `new -d` or `split`",
    ),
    ("events", "never ends by itself: run it in a pane"),
    ("server", "the server runs already"),
    ("demo", "needs a terminal of its own: run it in a pane"),
];

/// The prompt's commands that are still running, by process id.
pub struct Runs {
    running: HashMap<u32, Run>,
    watcher: os::Watcher,
}

/// What a watcher saw of a command, by process id, where the loop's own
/// reaping and timers do not see it.
#[cfg_attr(
    unix,
    expect(
        dead_code,
        reason = "only windows.rs makes them: on Unix the loop's reaping and timers see it all"
    )
)]
pub enum Note {
    /// Past [`RUN_LIMIT`]: being stopped.
    Late(u32),
    /// Ended, with its exit code if it had one.
    Ended(u32, Option<i32>),
}

struct Run {
    conn: ConnId,
    line: String,
    /// The command's name, for its errors.
    command: String,
    /// Its stdout and stderr.
    output: std::fs::File,
    /// Where the output file is still named, to remove once read.
    output_path: Option<std::path::PathBuf>,
    /// The current tab when it started.
    before: Option<TabId>,
    watched: os::Watched,
}

impl Runs {
    pub fn new(waker: std::sync::Arc<mio::Waker>) -> Runs {
        Runs {
            running: HashMap::new(),
            watcher: os::Watcher::new(waker),
        }
    }
}

/// The words of `line` to run, or why it cannot be run.
fn command_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = prompt::words(line)?;
    if words.first().is_some_and(|w| w == "ptyd") {
        words.remove(0);
    }
    // Options before the command (`-L NAME`) are the prompt's own.
    if words.first().is_some_and(|w| w.starts_with('-')) {
        return Err(
            "type a command (`split -v`, `kill`, `help`); the namespace is this server's".into(),
        );
    }
    if let Some(first) = words.first()
        && let Some((_, why)) = REFUSED.iter().find(|(c, _)| c == first)
    {
        return Err(format!("{first}: {why}"));
    }
    Ok(words)
}

/// What a command printed, as lines for the message line or the overlay:
/// blank lines and the usage hint left out, errors without `ptyd: `.
fn output_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.strip_prefix("ptyd: ").unwrap_or(l).trim_end())
        .filter(|l| !l.trim().is_empty() && *l != "Try `ptyd --help`.")
        .map(|l| l.chars().filter(|c| !c.is_control()).collect())
        .collect()
}

impl Server {
    /// Opens the `:` prompt for client `conn`, with its history.
    pub(in crate::server) fn open_command_prompt(&mut self, conn: ConnId) {
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.keys = Mode::Prompt {
                purpose: Purpose::Command,
                line: Line::with_history(v.history.clone()),
            };
        }
        self.mark_view_stale(conn);
    }

    /// Runs `line` from client `conn`'s prompt against its view.
    pub(in crate::server) fn run_prompt_line(&mut self, conn: ConnId, line: String) {
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            prompt::remember(&mut v.history, &line);
        }
        let words = match command_words(&line) {
            Ok(w) if w.is_empty() => return self.mark_view_stale(conn),
            Ok(w) => w,
            Err(e) => return self.view_say(conn, e),
        };
        let Some(tab) = self.view_tab(conn) else {
            return;
        };
        let Some(focus) = self.tree.tabs.get(&tab).map(|t| t.focus) else {
            return;
        };
        match self.spawn_prompt_command(conn, &line, words, focus) {
            Ok(()) => {}
            Err(e) => self.view_say(conn, e),
        }
    }

    fn spawn_prompt_command(
        &mut self,
        conn: ConnId,
        line: &str,
        words: Vec<String>,
        focus: PaneId,
    ) -> Result<(), String> {
        let (output, output_path) = self.prompt_output_file()?;
        let copy = || {
            output
                .try_clone()
                .map_err(|e| format!("the command's output file: {e}"))
        };
        let cwd = self
            .panes
            .get(&focus.get())
            .and_then(|p| p.screen().cwd().and_then(super::tab_view::cwd_of_osc7))
            .map(std::path::PathBuf::from)
            .filter(|d| d.is_dir())
            .or_else(|| std::env::var_os("HOME").map(std::path::PathBuf::from))
            .filter(|d| d.is_dir())
            .unwrap_or_else(|| std::path::PathBuf::from("/"));
        let mut command = std::process::Command::new(&self.exe_path);
        command
            .arg("-L")
            .arg(&self.paths.namespace)
            .args(&words)
            .env("PTYD_PANE_ID", focus.to_string())
            .env("PTYD_SOCKET", self.paths.socket())
            .current_dir(cwd)
            .stdin(std::process::Stdio::null())
            .stdout(copy()?)
            .stderr(copy()?);
        let child = command
            .spawn()
            .map_err(|e| format!("could not run {}: {e}", self.exe_path.display()))?;
        let pid = child.id();
        let watched = self.prompt_runs.watcher.watch(child);
        if let Some(deadline) = watched.deadline() {
            (self.timers).add(deadline, crate::server::timers::TimerKind::PromptDeadline);
        }
        let run = Run {
            conn,
            line: line.to_string(),
            command: words[0].clone(),
            output,
            output_path,
            before: self.tree.current().map(|(t, _)| t),
            watched,
        };
        self.prompt_runs.running.insert(pid, run);
        Ok(())
    }

    /// A file for a command's output, and its name where it could not be
    /// unlinked at once.
    fn prompt_output_file(&self) -> Result<(std::fs::File, Option<std::path::PathBuf>), String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self
            .paths
            .runtime_dir
            .join(format!("prompt-{}-{n}.out", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("could not make {}: {e}", path.display()))?;
        Ok((file, os::unlink_open(&path)))
    }

    /// A child that ended: one of the prompt's commands? Then it is
    /// finished here (`true`). From the loop's reaping.
    pub(in crate::server) fn prompt_command_exited(
        &mut self,
        pid: i32,
        exit: crate::sys::ProcessExit,
    ) -> bool {
        let Some(run) = u32::try_from(pid)
            .ok()
            .and_then(|pid| self.prompt_runs.running.remove(&pid))
        else {
            return false;
        };
        let code = match exit {
            crate::sys::ProcessExit::Code(c) => Some(c),
            crate::sys::ProcessExit::Signal(_) => None,
        };
        self.finish_prompt_command(run, code);
        true
    }

    /// Commands past their deadline are stopped (their exit then comes as
    /// any other).
    pub(in crate::server) fn on_prompt_deadline(&mut self, now: Instant) {
        let late: Vec<u32> = (self.prompt_runs.running.iter())
            .filter(|(_, r)| r.watched.deadline().is_some_and(|d| d <= now))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in late {
            if let Some(run) = self.prompt_runs.running.get_mut(&pid) {
                run.watched.stop();
            }
            self.say_prompt_late(pid);
        }
    }

    fn say_prompt_late(&mut self, pid: u32) {
        if let Some(run) = self.prompt_runs.running.get(&pid) {
            let (conn, line) = (run.conn, run.line.clone());
            let limit = RUN_LIMIT.as_secs();
            self.view_say(
                conn,
                format!("{line}: still running after {limit}s, stopped"),
            );
        }
    }

    /// What the watcher saw outside the loop's reaping (at a wake).
    pub(in crate::server) fn on_prompt_notes(&mut self) {
        for note in self.prompt_runs.watcher.notes() {
            match note {
                Note::Late(pid) => self.say_prompt_late(pid),
                Note::Ended(pid, code) => {
                    if let Some(run) = self.prompt_runs.running.remove(&pid) {
                        self.finish_prompt_command(run, code);
                    }
                }
            }
        }
    }

    /// Shows what a command printed to the client that ran it.
    fn finish_prompt_command(&mut self, mut run: Run, code: Option<i32>) {
        let mut text = Vec::new();
        let _ = run.output.rewind();
        let _ = (&mut run.output).take(OUTPUT_LIMIT).read_to_end(&mut text);
        if let Some(path) = run.output_path.take() {
            drop(run.output);
            let _ = std::fs::remove_file(path);
        }
        let lines = output_lines(&String::from_utf8_lossy(&text));
        let conn = run.conn;
        let attached = self
            .conns
            .get(&conn)
            .is_some_and(|c| c.tab_view().is_some());
        if !attached {
            return;
        }
        if code != Some(0) {
            let why = match (lines.is_empty(), code) {
                (false, _) => lines.join("; "),
                (true, Some(c)) => format!("exited {c}"),
                (true, None) => "killed".to_string(),
            };
            let why = why
                .strip_prefix(&format!("{}: ", run.command))
                .map(str::to_string)
                .unwrap_or(why);
            return self.view_say(conn, format!("{}: {why}", run.command));
        }
        // A tab the command made current is where this client goes.
        let now = self.tree.current().map(|(t, _)| t);
        if let Some(tab) = now
            && now != run.before
            && self.view_tab(conn) != Some(tab)
        {
            self.show_tab(conn, tab);
        }
        match lines.len() {
            0 => self.mark_view_stale(conn),
            1 => self.view_say(conn, lines[0].clone()),
            _ => {
                let mut shown = vec![format!(":{} (any key closes this)", run.line)];
                shown.extend(lines);
                if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
                    v.overlay = Some(shown);
                }
                self.mark_view_stale(conn);
            }
        }
    }

    /// The tab and focused pane of the view of the attached client that
    /// typed, resized or attached last: where a request that names no pane
    /// acts (`ptyd split` from a plain shell).
    pub(in crate::server) fn latest_view(&self) -> Option<(TabId, PaneId)> {
        (self.conns.values())
            .filter_map(|c| Some((c.attachment()?.active, c.tab_view()?)))
            .max_by_key(|(active, _)| *active)
            .filter(|(_, v)| self.tree.tabs.contains_key(&v.tab))
            .map(|(_, v)| (v.tab, v.focus))
    }

    /// Opens the chooser for client `conn`.
    pub(in crate::server) fn open_chooser(&mut self, conn: ConnId) {
        let Some(tab) = self.view_tab(conn) else {
            return;
        };
        let entries = self.chooser_entries(tab);
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.keys = Mode::Choose(Box::new(Chooser::new(entries)));
        }
        self.mark_view_stale(conn);
    }

    /// Every workspace, its tabs, their panes: what the chooser lists, the
    /// ones `shown` (a client's tab) is in marked current.
    fn chooser_entries(&self, shown: TabId) -> Vec<Entry> {
        let focus = self.tree.tabs.get(&shown).map(|t| t.focus);
        let shown_ws = self.tree.tabs.get(&shown).map(|t| t.workspace);
        let mut out = Vec::new();
        for (wid, w) in &self.tree.workspaces {
            out.push(Entry {
                depth: 0,
                text: format!("{} ({wid}, {} tabs)", w.name, w.tabs.len()),
                target: Target::Workspace(*wid),
                current: Some(*wid) == shown_ws,
            });
            for (i, tid) in w.tabs.iter().enumerate() {
                let Some(t) = self.tree.tabs.get(tid) else {
                    continue;
                };
                let panes = t.layout.panes();
                out.push(Entry {
                    depth: 1,
                    text: format!("{i}: {} ({tid}, {} panes)", t.name, panes.len()),
                    target: Target::Tab(*tid),
                    current: *tid == shown,
                });
                for p in panes {
                    out.push(Entry {
                        depth: 2,
                        text: self.pane_label(p),
                        target: Target::Pane(p),
                        current: *tid == shown && Some(p) == focus,
                    });
                }
            }
        }
        out
    }

    /// `p3 name: title or command`, as the chooser and the pane titles
    /// show a pane.
    pub(in crate::server) fn pane_label(&self, pane: PaneId) -> String {
        let Some(p) = self.panes.get(&pane.get()) else {
            return pane.to_string();
        };
        let title = p.screen().title();
        let what = if title.is_empty() {
            match p.command() {
                CommandSpec::Argv(argv) => argv.join(" "),
                CommandSpec::Shell(s) => s.clone(),
                CommandSpec::LoginShell => "shell".into(),
            }
        } else {
            title.to_string()
        };
        let exited = if p.is_running() { "" } else { " (exited)" };
        match p.name() {
            Some(name) => format!("{pane} {name}: {what}{exited}"),
            None => format!("{pane} {what}{exited}"),
        }
    }

    /// A line of the chooser was picked by client `conn`.
    pub(in crate::server) fn chosen(&mut self, conn: ConnId, target: Target) {
        let tab = match target {
            Target::Workspace(w) => self
                .tree
                .workspaces
                .get(&w)
                .and_then(|w| w.active_tab.or(w.tabs.first().copied())),
            Target::Tab(t) => self.tree.tabs.contains_key(&t).then_some(t),
            Target::Pane(p) => self.tree.tab_of(p),
        };
        let Some(tab) = tab else {
            return self.view_say(conn, "that is gone meanwhile".into());
        };
        self.show_tab(conn, tab);
        // A read-only client's pick moves its own focus alone (`view_focus`).
        if let Target::Pane(p) = target {
            self.view_focus(conn, p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_a_command_line_of_ptyd() {
        assert_eq!(command_words("ptyd split -v").unwrap(), ["split", "-v"]);
        assert_eq!(command_words("rename 'a b'").unwrap(), ["rename", "a b"]);
        assert!(command_words("attach p1").unwrap_err().contains("terminal"));
        assert!(command_words("-L x ls").unwrap_err().contains("namespace"));
        assert!(command_words("").unwrap().is_empty());
    }

    #[test]
    fn output_is_shown_without_the_cli_decorations() {
        let text = "ptyd: no pane \"p9\"\nTry `ptyd --help`.\n\n";
        assert_eq!(output_lines(text), ["no pane \"p9\""]);
        assert_eq!(output_lines("p4\n"), ["p4"]);
    }
}
