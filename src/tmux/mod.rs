//! The tmux front: ptyd run as `tmux` (a symlink named `tmux`, or `ptyd
//! tmux ARGS...`) takes tmux's command line and runs it on ptyd's model,
//! so the tools that drive tmux (agent managers, libtmux, tmuxp, scripts)
//! run unchanged and their panes survive upgrades and crashes.
//!
//! A session is a workspace, a window a tab, a pane a pane (`view.rs` says
//! how ids, indexes and names map). `-L NAME` is ptyd's namespace `NAME`
//! (tmux's default socket is ptyd's `default` namespace); `-S PATH` names
//! the namespace after the socket file's name. Each command is a client of
//! the namespace's server: it reads the tree, resolves its targets
//! (`target.rs`), sends ptyd requests and prints what tmux would
//! (`format.rs` for `-F`). docs/tmux.md lists every command and flag:
//! supported, accepted and ignored, or refused with the message given.
//!
//! Like tmux, only `new-session` and `start-server` start a server; any
//! other command without one says "no server running on PATH" and exits
//! 1. Errors are tmux's words on stderr with exit status 1.

/// A line on stdout. A reader that went away (`tmux ls | head -1`) is no
/// error worth a panic: the rest is dropped, as tmux drops it.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if !$crate::tmux::quiet() {
            let _ = writeln!(std::io::stdout().lock(), $($arg)*);
        }
    }};
}

/// Text on stdout as it is, without a line end added.
macro_rules! out_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if !$crate::tmux::quiet() {
            let _ = write!(std::io::stdout().lock(), $($arg)*);
        }
    }};
}

thread_local! {
    // Already const: clippy 1.96 (the Windows CI's toolchain) reports it
    // anyway for the Windows target's expansion of the macro.
    #[allow(clippy::missing_const_for_thread_local)]
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether output is held back: while a started server reads its config,
/// whose commands' output tmux shows no command-line client (the command
/// that started the server prints only its own, `-P` say).
pub(crate) fn quiet() -> bool {
    QUIET.with(|q| q.get())
}

fn set_quiet(on: bool) -> bool {
    QUIET.with(|q| q.replace(on))
}

mod args;
mod cmd_buffers;
mod cmd_client;
mod cmd_env;
mod cmd_hooks;
mod cmd_keys;
mod cmd_layout;
mod cmd_misc;
mod cmd_modes;
mod cmd_pane;
mod cmd_session;
mod cmd_wait;
mod cmd_window;
mod commands;
mod control;
mod format;
mod option_table;
mod options;
mod parse;
mod target;
mod vars;
mod view;

use crate::client::{Client, ClientError};
use crate::paths::NamespacePaths;
use args::Args;
use serde_json::{Value, json};
use view::{At, View};

/// The tmux whose command language the front speaks (`tmux -V`); tools
/// gate what they send on it.
pub const TMUX_VERSION: &str = "3.3a";

/// Whether this process was started under the name `tmux`.
pub fn invoked_as_tmux() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_os_string()))
        .is_some_and(|n| n == "tmux")
}

/// Runs a tmux command line (without the program name); the exit status.
pub fn main(argv: Vec<String>) -> i32 {
    match run(argv) {
        Ok(()) => 0,
        Err(Failure { message, code }) => {
            if !message.is_empty() {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr().lock(), "{message}");
            }
            code
        }
    }
}

/// A command's failure: tmux's message and exit status.
#[derive(Debug)]
pub struct Failure {
    message: String,
    code: i32,
}

impl Failure {
    fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::new(message)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure::new(e.message)
    }
}

type CmdResult = Result<(), Failure>;

/// The largest base-index honoured: window numbers stay far from
/// overflowing.
const MAX_BASE_INDEX: usize = 1 << 20;

/// What a command runs with: the namespace, a connection once one is
/// needed, the tree as last read, and what the command prints.
pub struct Ctx {
    paths: NamespacePaths,
    client: Option<Client>,
    view: Option<View>,
    /// The pane this command runs in, when it runs inside one of this
    /// namespace's panes.
    inside: Option<u64>,
    /// Set in control mode (`-C`): the control client's state.
    control: Option<control::State>,
    /// `-f`: the config file a server this command starts reads.
    config: Option<String>,
}

impl Ctx {
    /// The connection; `start` starts a server when none runs.
    fn client(&mut self, start: bool) -> Result<&mut Client, Failure> {
        if self.client.is_none() {
            let no_server = || Failure::new(format!("no server running on {}", self.socket_path()));
            if !start && !crate::transport::address(&self.paths).exists() {
                return Err(no_server());
            }
            // A server this command starts reads `-f`'s config first, as
            // tmux's does.
            let fresh = start && Client::connect(&self.paths, false).is_err();
            let client = match Client::connect(&self.paths, start) {
                Ok(c) => c,
                // A server going away (refused, reset) is no server to a
                // tmux tool; only a server that answered otherwise is named.
                Err(e) if !start && !e.refused("version_mismatch") => return Err(no_server()),
                Err(e) => {
                    return Err(Failure::new(format!(
                        "error connecting to {} ({})",
                        self.socket_path(),
                        e.message
                    )));
                }
            };
            self.client = Some(client);
            if fresh {
                let files = match self.config.take() {
                    Some(file) => vec![file],
                    None => default_configs(),
                };
                let was = set_quiet(true);
                for file in files {
                    cmd_modes::source_config(self, &file);
                }
                set_quiet(was);
            }
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    fn socket_path(&self) -> String {
        crate::transport::address(&self.paths).display().to_string()
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let result = self.client(false)?.call(method, params)?;
        Ok(result)
    }

    /// The tree, read from the server once and after each change.
    fn view(&mut self) -> Result<&View, Failure> {
        if self.view.is_none() {
            let tree = self.call("tree", json!({}))?;
            let mut view = View::from_tree(&tree);
            // tmux numbers a session's windows from its base-index.
            let store = options::Store::load(&self.paths.runtime_dir);
            for session in &mut view.sessions {
                let base = store
                    .get(&format!("${}", session.num), "base-index")
                    .or_else(|| store.get("session", "base-index"))
                    .and_then(|b| b.parse::<usize>().ok())
                    .filter(|b| *b <= MAX_BASE_INDEX)
                    .unwrap_or(0);
                for window in &mut session.windows {
                    window.index += base;
                }
            }
            self.view = Some(view);
        }
        Ok(self.view.as_ref().expect("read above"))
    }

    /// Forgets the tree after a change, so the next look reads it again.
    fn changed(&mut self) {
        self.view = None;
    }

    fn current(&mut self) -> Result<Option<At>, Failure> {
        let inside = self.inside;
        let attached = self.control.as_ref().and_then(|c| c.session);
        let view = self.view()?;
        // A control client's current place is its session's, as for any
        // tmux client.
        if let Some(s) = attached.and_then(|n| view.sessions.iter().position(|s| s.num == n)) {
            return Ok(Some(view.session_at(s)));
        }
        Ok(target::current(view, inside))
    }

    fn find_session(&mut self, t: Option<&str>) -> Result<At, Failure> {
        let cur = self.current()?;
        Ok(target::session(self.view()?, t, cur)?)
    }

    fn find_window(&mut self, t: Option<&str>) -> Result<At, Failure> {
        let cur = self.current()?;
        Ok(target::window(self.view()?, t, cur)?)
    }

    fn find_pane(&mut self, t: Option<&str>) -> Result<At, Failure> {
        let cur = self.current()?;
        Ok(target::pane(self.view()?, t, cur)?)
    }

    /// Focuses pane `num` (its window, its session), first noting the
    /// window its session leaves and the pane its window leaves, which
    /// tmux's `last-window` and `last-pane` go back to. Only focus moved
    /// through the front is noted: ptyd's own clients keep no such history.
    fn focus(&mut self, num: u64) -> CmdResult {
        self.changed();
        let before = self.view()?.clone();
        self.focus_from(num, &before)
    }

    /// [`Ctx::focus`], noting what was active in `before` (the tree as it
    /// was before a command that made a pane and so moved the focus).
    fn focus_from(&mut self, num: u64, before: &View) -> CmdResult {
        self.changed();
        let view = self.view()?;
        let mut notes = Vec::new();
        for session in &view.sessions {
            for window in &session.windows {
                if !window.panes.iter().any(|p| p.num == num) {
                    continue;
                }
                let was = |w: u64| {
                    before
                        .sessions
                        .iter()
                        .flat_map(|s| &s.windows)
                        .find(|old| old.num == w)
                        .cloned()
                };
                let active_window = before
                    .sessions
                    .iter()
                    .find(|s| s.num == session.num)
                    .and_then(|s| s.windows.iter().find(|w| w.active));
                if let Some(left) = active_window.filter(|w| w.num != window.num) {
                    notes.push((format!("${}", session.num), format!("@{}", left.num)));
                }
                let old = was(window.num);
                let left = old
                    .as_ref()
                    .and_then(|w| w.active_pane())
                    .filter(|p| p.num != num);
                if let Some(left) = left {
                    notes.push((format!("@{}", window.num), format!("%{}", left.num)));
                }
            }
        }
        if !notes.is_empty() {
            let mut store = options::Store::load(&self.paths.runtime_dir);
            for (owner, left) in notes {
                store.set("last", &owner, Some(left));
            }
            store.save().map_err(Failure::new)?;
        }
        self.call("pane.focus", json!({"target": format!("p{num}")}))?;
        self.changed();
        Ok(())
    }

    /// The window (`$N` given) or pane (`@N` given) last left, as noted by
    /// [`Ctx::focus`].
    fn last_left(&self, owner: &str) -> Option<u64> {
        let store = options::Store::load(&self.paths.runtime_dir);
        store.get("last", owner)?.get(1..)?.parse().ok()
    }

    /// The server's pid, for `pid` and `TMUX`.
    fn server_pid(&mut self) -> Result<u64, Failure> {
        let status = self.call("server.status", json!({}))?;
        Ok(status["pid"].as_u64().unwrap_or(0))
    }
}

/// tmux's config files, read in this order when `-f` names none:
/// `/etc/tmux.conf`, `~/.tmux.conf`, `$XDG_CONFIG_HOME/tmux/tmux.conf`,
/// `~/.config/tmux/tmux.conf`.
fn default_configs() -> Vec<String> {
    let mut files = vec!["/etc/tmux.conf".to_string()];
    let home = std::env::var("HOME").ok().filter(|h| !h.is_empty());
    if let Some(home) = &home {
        files.push(format!("{home}/.tmux.conf"));
    }
    if let Ok(xdg) = std::env::var("XDG_CONFIG_HOME") {
        if !xdg.is_empty() {
            files.push(format!("{xdg}/tmux/tmux.conf"));
        }
    }
    if let Some(home) = &home {
        let file = format!("{home}/.config/tmux/tmux.conf");
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files
}

/// Global options before the command: `-L`, `-S`, `-f`, `-V`, `-C`, and
/// the terminal ones tmux takes (`-2`, `-u`, `-N`, `-v`), accepted.
fn run(argv: Vec<String>) -> CmdResult {
    let global = Args::parse("2CDc:f:L:lNS:T:uVv", &argv).map_err(|e| {
        Failure::new(format!(
            "{e}\nusage: tmux [-2CDlNuVv] [-c shell-command] [-f file] [-L socket-name]\n            [-S socket-path] [-T features] [command [flags]]"
        ))
    })?;
    if global.has('V') {
        out!("tmux {TMUX_VERSION}");
        return Ok(());
    }
    let namespace = namespace(&global)?;
    let paths = NamespacePaths::resolve(&namespace).map_err(Failure::new)?;
    let inside = inside_pane(&namespace);
    let mut ctx = Ctx {
        paths,
        client: None,
        view: None,
        inside,
        control: None,
        config: global.value('f').map(str::to_string),
    };
    if let Some(shell) = global.value('c') {
        // `tmux -c CMD` runs CMD with the shell, as a login shell would.
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", shell])
            .status()
            .map_err(|e| Failure::new(format!("{shell}: {e}")))?;
        return match status.code() {
            Some(0) => Ok(()),
            Some(code) => Err(Failure {
                message: String::new(),
                code,
            }),
            None => Err(Failure::new(String::new())),
        };
    }
    let commands = split_commands(&global.positional);
    if global.has('C') {
        return control::run(&mut ctx, commands, global.count('C') > 1);
    }
    if commands.is_empty() {
        // A bare `tmux` is `tmux new-session`.
        return commands::run(&mut ctx, "new-session", &[]);
    }
    for words in commands {
        let (name, rest) = words
            .split_first()
            .expect("split_commands drops empty ones");
        commands::run(&mut ctx, name, rest)?;
    }
    Ok(())
}

/// The namespace for `-L`/`-S`, else the one this runs inside, else
/// ptyd's default.
fn namespace(global: &Args) -> Result<String, Failure> {
    if let Some(name) = global.value('L') {
        return Ok(name.to_string());
    }
    if let Some(path) = global.value('S') {
        let path_of = std::path::Path::new(path);
        let file = path_of
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A ptyd socket (`TMUX` in a pane names one) is its namespace's:
        // `.../ptyd/NAMESPACE/ptyd.sock`.
        let name = if file == "ptyd.sock" {
            path_of
                .parent()
                .and_then(|d| d.file_name())
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            file.trim_end_matches(".sock").to_string()
        };
        crate::paths::validate_namespace(&name).map_err(|e| {
            Failure::new(format!(
                "-S {path}: ptyd names the server after the socket's file name, and {e}"
            ))
        })?;
        return Ok(name);
    }
    if std::env::var_os("TMUX").is_some() {
        if let Ok(ns) = std::env::var("PTYD_NAMESPACE") {
            if !ns.is_empty() {
                return Ok(ns);
            }
        }
    }
    Ok(crate::paths::DEFAULT_NAMESPACE.to_string())
}

/// The pane this runs in, when it is one of `namespace`'s.
fn inside_pane(namespace: &str) -> Option<u64> {
    let same = std::env::var("PTYD_NAMESPACE").is_ok_and(|ns| ns == namespace);
    if !same {
        return None;
    }
    let from_tmux = std::env::var("TMUX_PANE")
        .ok()
        .and_then(|p| p.strip_prefix('%')?.parse().ok());
    from_tmux.or_else(|| {
        std::env::var("PTYD_PANE_ID")
            .ok()
            .and_then(|p| p.strip_prefix('p')?.parse().ok())
    })
}

/// tmux's command sequences: `a ; b` (a lone `;`, or a word ending in an
/// unescaped `;`) runs `a` then `b`; `\;` is a literal `;`.
fn split_commands(words: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for word in words {
        if word == ";" {
            out.push(Vec::new());
        } else if let Some(stem) = word.strip_suffix("\\;") {
            out.last_mut()
                .expect("never empty")
                .push(format!("{stem};"));
        } else if let Some(stem) = word.strip_suffix(';') {
            if !stem.is_empty() {
                out.last_mut().expect("never empty").push(stem.to_string());
            }
            out.push(Vec::new());
        } else {
            out.last_mut().expect("never empty").push(word.clone());
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// Words from string literals, for the tests.
#[cfg(test)]
fn words(s: &[&str]) -> Vec<String> {
    s.iter().map(|w| w.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_sequences_split_on_semicolons() {
        assert_eq!(
            split_commands(&words(&["new", "-d", ";", "ls"])),
            vec![words(&["new", "-d"]), words(&["ls"])]
        );
        assert_eq!(
            split_commands(&words(&["send", "a\\;", "x;", "ls"])),
            vec![words(&["send", "a;", "x"]), words(&["ls"])]
        );
    }
}
