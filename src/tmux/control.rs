//! Control mode (`tmux -C`, and `-CC` which wraps the stream in
//! `ESC P 1000 p` ... `ESC \`): the client that terminal emulators and
//! libraries drive over a pipe. The commands of the command line run
//! first, then one command line per line of stdin; each command's output
//! is framed as tmux frames it, `%begin TIME NUMBER FLAGS` ... `%end` (or
//! `%error`) with the same three values, FLAGS 1 for the commands read
//! from stdin. Between blocks come notifications: `%output %PANE DATA`
//! for the output of each pane of the attached session (bytes below a
//! space and `\` as octal `\ooo`), `%session-changed`,
//! `%sessions-changed`, `%session-renamed`, `%window-add`,
//! `%window-close`, `%window-renamed` (and their `%unlinked-` forms for
//! other sessions' windows), `%session-window-changed`,
//! `%window-pane-changed`, and `%exit` when the client ends: an empty
//! line or the end of stdin, `detach-client`, its session killed, the
//! server gone (`%exit server exited`).
//!
//! Three kinds of threads share stdout, each writing whole lines under
//! its lock (a command's block holds it from `%begin` to `%end`, so no
//! notification lands inside one): the main thread runs the commands; a
//! watcher per pane of the session is a read-only attachment that never
//! makes the pane wait (`when_behind: redraw`) and turns its output into
//! `%output` lines; and the notifier reads the tree after each command
//! and each event of the server's and prints what changed. The
//! attachments are also what makes the client a client of the server
//! (`list-clients`, `detach-client`: cmd_client.rs).

use super::cmd_client::{self, ControlRecord};
use super::view::View;
use super::{CmdResult, Ctx, Failure};
use crate::client::{Client, ServerFrame};
use crate::paths::NamespacePaths;
use crate::protocol::methods::{Attach, WhenBehind};
use crate::transport::ClientStream;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::mpsc;

/// The control client's own state, which commands change
/// (`attach-session`, `switch-client`, `detach-client`, `refresh-client`).
#[derive(Debug)]
pub struct State {
    /// The attached session's number (`$N`).
    pub session: Option<u64>,
    /// `detach-client` ran on this client: it ends after the command.
    pub detached: bool,
    /// The size `refresh-client -C` gave (tmux's default 80x24).
    pub size: (u16, u16),
    /// Numbers for `%begin`, from 1.
    number: u64,
    created_unix: u64,
}

impl State {
    fn new() -> State {
        State {
            session: None,
            detached: false,
            size: (80, 24),
            number: 0,
            created_unix: crate::clock::unix_ms() / 1000,
        }
    }
}

/// Bytes of a pane's output as `%output` carries them: those below a
/// space and the backslash as three octal digits.
pub fn escape_output(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if b < b' ' || b == b'\\' {
            let _ = write!(out, "\\{b:03o}");
        } else {
            out.push(b);
        }
    }
}

/// Whether the stream is framed for a terminal (`-CC`): ended with `ESC \`.
static WRAPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Taken by whichever thread ends the client, so `%exit` is printed once.
static ENDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Prints `%exit` (with a reason, if any) and ends the process.
fn end(runtime_dir: &std::path::Path, reason: Option<&str>) -> ! {
    let _once = ENDING.lock().unwrap_or_else(|e| e.into_inner());
    cmd_client::remove_record(runtime_dir);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = match reason {
        Some(r) => writeln!(out, "%exit {r}"),
        None => writeln!(out, "%exit"),
    };
    if WRAPPED.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = out.write_all(b"\x1b\\");
    }
    let _ = out.flush();
    std::process::exit(0)
}

/// Runs the control client: `startup` (the command line's commands, or
/// `new-session`), then stdin's lines until the client ends.
pub fn run(ctx: &mut Ctx, startup: Vec<Vec<String>>, wrapped: bool) -> CmdResult {
    ctx.control = Some(State::new());
    if wrapped {
        WRAPPED.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"\x1bP1000p");
        let _ = out.flush();
    }
    let runtime_dir = ctx.paths.runtime_dir.clone();
    let startup = if startup.is_empty() {
        vec![vec!["new-session".to_string()]]
    } else {
        startup
    };
    let mut failed = false;
    for words in &startup {
        if !block(ctx, words, 0) {
            failed = true;
            break;
        }
    }
    if ctx.control.as_ref().is_none_or(|s| s.session.is_none()) {
        // Not attached to a session: tmux's client ends after its
        // commands, as a client that is not in control mode does.
        let _once = ENDING.lock().unwrap_or_else(|e| e.into_inner());
        out!("%exit");
        if wrapped {
            out_raw!("\x1b\\");
        }
        return if failed {
            Err(Failure::new(String::new()))
        } else {
            Ok(())
        };
    }
    cmd_client::remove_stale_records(&runtime_dir);
    let notifier = Notifier::start(ctx.paths.clone())?;
    notifier.sync(ctx);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => end(&runtime_dir, None),
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        // An empty line detaches the client, as in tmux.
        if line.is_empty() {
            end(&runtime_dir, None);
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        // Other clients change the tree between lines: each line sees it
        // as it is now.
        ctx.changed();
        run_line(ctx, &text);
        notifier.sync(ctx);
        if ctx.control.as_ref().is_some_and(|s| s.detached) {
            end(&runtime_dir, None);
        }
    }
}

fn next_number(ctx: &mut Ctx) -> u64 {
    let state = ctx.control.as_mut().expect("control mode");
    state.number += 1;
    state.number
}

/// One line from stdin: every command of it in its own block, stopping at
/// the first that fails; a line that does not parse is one `%error` block
/// saying why, as tmux says it.
fn run_line(ctx: &mut Ctx, text: &str) {
    let parsed = super::parse::commands(text).and_then(|commands| {
        for words in &commands {
            if let Some(name) = words.first() {
                super::commands::find(name).map_err(|f| f.message)?;
            }
        }
        Ok(commands)
    });
    match parsed {
        Ok(commands) => {
            for words in commands {
                if !block(ctx, &words, 1) {
                    break;
                }
            }
        }
        Err(message) => {
            let number = next_number(ctx);
            let time = crate::clock::unix_ms() / 1000;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "%begin {time} {number} 1");
            let _ = writeln!(out, "parse error: {message}");
            let _ = writeln!(out, "%error {time} {number} 1");
            let _ = out.flush();
        }
    }
}

/// Runs one command inside `%begin`/`%end`; whether it succeeded.
fn block(ctx: &mut Ctx, words: &[String], flags: u8) -> bool {
    let Some((name, rest)) = words.split_first() else {
        return true;
    };
    let number = next_number(ctx);
    let time = crate::clock::unix_ms() / 1000;
    // Held through the command (stdout's lock is reentrant, so the
    // command's own lines go through): no notification lands inside.
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(out, "%begin {time} {number} {flags}");
    let result = super::commands::run(ctx, name, rest);
    let ok = match result {
        Ok(()) => {
            let _ = writeln!(out, "%end {time} {number} {flags}");
            true
        }
        Err(failure) => {
            if !failure.message.is_empty() {
                let _ = writeln!(out, "{}", failure.message);
            }
            let _ = writeln!(out, "%error {time} {number} {flags}");
            false
        }
    };
    let _ = out.flush();
    ok
}

/// What the notifier is told.
enum Note {
    /// The server logged an event that may have changed the tree.
    Event,
    /// A command line ran: the client's session and size now, and who
    /// waits for the notifications to be out.
    Sync {
        session: Option<u64>,
        size: (u16, u16),
        created_unix: u64,
        done: mpsc::Sender<()>,
    },
    /// A pane's watcher ended (the pane exited or went).
    Unwatched(u64),
}

struct Notifier {
    tx: mpsc::Sender<Note>,
}

impl Notifier {
    fn start(paths: NamespacePaths) -> Result<Notifier, Failure> {
        let (tx, rx) = mpsc::channel();
        let client = connect(&paths)?;
        let events = connect(&paths)?;
        let events_tx = tx.clone();
        let events_paths = paths.clone();
        std::thread::spawn(move || follow_events(events, events_paths, events_tx));
        let watcher_tx = tx.clone();
        std::thread::spawn(move || {
            let mut state = Notified {
                paths,
                client,
                last: None,
                session: None,
                record: None,
                watched: BTreeMap::new(),
                tx: watcher_tx,
            };
            state.serve(rx);
        });
        Ok(Notifier { tx })
    }

    /// Tells the notifier a command line ran, and waits until what it
    /// changed is printed (tmux prints a command's notifications after
    /// its block, before the next command's).
    fn sync(&self, ctx: &Ctx) {
        let Some(state) = ctx.control.as_ref() else {
            return;
        };
        let (done, wait) = mpsc::channel();
        let note = Note::Sync {
            session: state.session,
            size: state.size,
            created_unix: state.created_unix,
            done,
        };
        if self.tx.send(note).is_ok() {
            let _ = wait.recv();
        }
    }
}

fn connect(paths: &NamespacePaths) -> Result<Client, Failure> {
    Client::connect(paths, false).map_err(|e| {
        Failure::new(format!(
            "no server running on {} ({})",
            crate::transport::address(paths).display(),
            e.message
        ))
    })
}

/// Forwards the server's events that may change the tree; reconnects
/// across a live upgrade or a restart of the serving process, and ends
/// the client when the server is gone for good.
fn follow_events(mut client: Client, paths: NamespacePaths, tx: mpsc::Sender<Note>) {
    loop {
        if client.call("events.subscribe", json!({})).is_ok() {
            // What happened while no subscription was open.
            if tx.send(Note::Event).is_err() {
                return;
            }
            while let Ok(msg) = client.read_message() {
                let kind = msg["event"]["type"].as_str().unwrap_or("");
                let structural = kind.starts_with("workspace.")
                    || matches!(
                        kind,
                        "pane.created"
                            | "pane.removed"
                            | "pane.exited"
                            | "pane.respawned"
                            | "pane.resized"
                            | "server.restored"
                            | "server.upgraded"
                            | "gap"
                    );
                if structural && tx.send(Note::Event).is_err() {
                    return;
                }
                if kind == "server.stopping" {
                    break;
                }
            }
        }
        client = match reconnect(&paths) {
            Some(c) => c,
            None => end(&paths.runtime_dir, Some("server exited")),
        };
    }
}

/// A new connection to a server that went away, if one comes back within
/// a few seconds (the keeper's replacement, a live upgrade's new server).
fn reconnect(paths: &NamespacePaths) -> Option<Client> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if let Ok(c) = Client::connect(paths, false) {
            return Some(c);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The notifier's state: the tree as last printed, and the watchers.
struct Notified {
    paths: NamespacePaths,
    client: Client,
    last: Option<View>,
    session: Option<u64>,
    record: Option<(u64, (u16, u16))>,
    /// Watched panes, with a handle on each watcher's connection.
    watched: BTreeMap<u64, ClientStream>,
    tx: mpsc::Sender<Note>,
}

impl Notified {
    fn serve(&mut self, rx: mpsc::Receiver<Note>) {
        while let Ok(first) = rx.recv() {
            let mut waiting = Vec::new();
            let mut note = Some(first);
            // Everything queued meanwhile is one look at the tree.
            while let Some(n) = note.take().or_else(|| rx.try_recv().ok()) {
                match n {
                    Note::Event => {}
                    Note::Unwatched(pane) => {
                        self.watched.remove(&pane);
                    }
                    Note::Sync {
                        session,
                        size,
                        created_unix,
                        done,
                    } => {
                        self.set_session(session, size, created_unix);
                        waiting.push(done);
                    }
                }
            }
            self.refresh();
            for done in waiting {
                let _ = done.send(());
            }
        }
    }

    /// Records the client's session and size for `list-clients` before
    /// its watchers make it a client of the server.
    fn set_session(&mut self, session: Option<u64>, size: (u16, u16), created_unix: u64) {
        let Some(session) = session else {
            return;
        };
        if self.record == Some((session, size)) {
            return;
        }
        let record = ControlRecord {
            session,
            cols: size.0,
            rows: size.1,
            created_unix,
        };
        if cmd_client::write_record(&self.paths.runtime_dir, &record).is_ok() {
            self.record = Some((session, size));
        }
    }

    fn read_tree(&mut self) -> Option<View> {
        match self.client.call("tree", json!({})) {
            Ok(tree) => Some(View::from_tree(&tree)),
            Err(_) => {
                self.client = reconnect(&self.paths)?;
                let tree = self.client.call("tree", json!({})).ok()?;
                Some(View::from_tree(&tree))
            }
        }
    }

    fn refresh(&mut self) {
        let Some(view) = self.read_tree() else {
            end(&self.paths.runtime_dir, Some("server exited"));
        };
        let want = self.record.map(|(s, _)| s);
        let Some(session) = want else {
            return;
        };
        let Some(s) = view.sessions.iter().position(|x| x.num == session) else {
            // Its session was killed: tmux's `detach-on-destroy` ends it.
            end(&self.paths.runtime_dir, None);
        };
        let mut lines = Vec::new();
        if self.session != Some(session) {
            lines.push(format!(
                "%session-changed ${session} {}",
                view.sessions[s].name
            ));
            self.session = Some(session);
        }
        if let Some(last) = &self.last {
            changes(last, &view, session, &mut lines);
        }
        {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            for line in &lines {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
        self.watch(&view.sessions[s]);
        self.last = Some(view);
    }

    /// Watches every pane of the session and no other.
    fn watch(&mut self, session: &super::view::Session) {
        let panes: Vec<u64> = session
            .windows
            .iter()
            .flat_map(|w| &w.panes)
            .filter(|p| p.running())
            .map(|p| p.num)
            .collect();
        let gone: Vec<u64> = self
            .watched
            .keys()
            .filter(|p| !panes.contains(p))
            .copied()
            .collect();
        for pane in gone {
            if let Some(stream) = self.watched.remove(&pane) {
                // Ends the watcher's attachment from the notifier's side
                // (a Windows watcher ends with its pane or its client).
                crate::transport::hang_up(&stream);
            }
        }
        for pane in panes {
            if self.watched.contains_key(&pane) {
                continue;
            }
            if let Some(stream) = start_watcher(&self.paths, pane, self.tx.clone()) {
                self.watched.insert(pane, stream);
            }
        }
    }
}

/// The notifications for what changed from `old` to `new`, for a client
/// attached to `session`.
fn changes(old: &View, new: &View, session: u64, lines: &mut Vec<String>) {
    let ids = |v: &View| v.sessions.iter().map(|s| s.num).collect::<Vec<_>>();
    if ids(old) != ids(new) {
        lines.push("%sessions-changed".into());
    }
    for s in &new.sessions {
        if let Some(was) = old.sessions.iter().find(|o| o.num == s.num) {
            if was.name != s.name {
                lines.push(format!("%session-renamed ${} {}", s.num, s.name));
            }
        }
    }
    let windows = |v: &View| -> Vec<(u64, u64, String)> {
        v.sessions
            .iter()
            .flat_map(|s| {
                s.windows
                    .iter()
                    .map(move |w| (s.num, w.num, w.name.clone()))
            })
            .collect()
    };
    let (before, after) = (windows(old), windows(new));
    let prefix = |s: u64| if s == session { "" } else { "unlinked-" };
    for (s, w, name) in &after {
        match before.iter().find(|(_, bw, _)| bw == w) {
            None => lines.push(format!("%{}window-add @{w}", prefix(*s))),
            Some((_, _, old_name)) if old_name != name => {
                lines.push(format!("%{}window-renamed @{w} {name}", prefix(*s)));
            }
            Some(_) => {}
        }
    }
    for (s, w, _) in &before {
        if !after.iter().any(|(_, aw, _)| aw == w) {
            lines.push(format!("%{}window-close @{w}", prefix(*s)));
        }
    }
    for s in &new.sessions {
        let active =
            |sess: &super::view::Session| sess.windows.iter().find(|w| w.active).map(|w| w.num);
        let was = old.sessions.iter().find(|o| o.num == s.num);
        if let (Some(now), Some(was)) = (active(s), was) {
            if active(was) != Some(now) {
                lines.push(format!("%session-window-changed ${} @{now}", s.num));
            }
        }
        for w in &s.windows {
            let was = was.and_then(|o| o.windows.iter().find(|x| x.num == w.num));
            let pane = w.active_pane().map(|p| p.num);
            if let (Some(was), Some(now)) = (was, pane) {
                if was.active_pane().map(|p| p.num) != Some(now) {
                    lines.push(format!("%window-pane-changed @{} %{now}", w.num));
                }
            }
        }
    }
}

/// Attaches read-only to `pane` and prints its output as `%output` from a
/// thread of its own; the connection's handle, to end it.
fn start_watcher(
    paths: &NamespacePaths,
    pane: u64,
    tx: mpsc::Sender<Note>,
) -> Option<ClientStream> {
    let client = Client::connect(paths, false).ok()?;
    let params = Attach {
        target: format!("p{pane}"),
        read_only: true,
        cols: None,
        rows: None,
        history: None,
        alt_screen: false,
        from_pane: None,
        detach_others: false,
        when_behind: WhenBehind::Redraw,
        view: None,
        client_env: None,
    };
    let (_, mut reader) = crate::client::attach(client, params).ok()?;
    let handle = reader.stream().try_clone().ok()?;
    let runtime_dir = paths.runtime_dir.clone();
    std::thread::spawn(move || {
        // The first frame redraws the screen as it is: output from before
        // the client came, which tmux does not send.
        let mut redraw = true;
        let mut line = Vec::new();
        loop {
            match reader.next_blocking() {
                Ok(Some(ServerFrame::Output(bytes))) => {
                    if std::mem::take(&mut redraw) || bytes.is_empty() {
                        continue;
                    }
                    line.clear();
                    let _ = write!(line, "%output %{pane} ");
                    escape_output(&bytes, &mut line);
                    line.push(b'\n');
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(&line);
                    let _ = out.flush();
                }
                Ok(Some(ServerFrame::Exit(payload))) => {
                    if detached(&payload) {
                        end(&runtime_dir, None);
                    }
                    break;
                }
                Ok(None) | Err(_) => break,
            }
        }
        let _ = tx.send(Note::Unwatched(pane));
    });
    Some(handle)
}

/// Whether an attachment ended because the client was detached
/// (`detach-client`, `ptyd detach`) rather than because its pane ended.
fn detached(payload: &Value) -> bool {
    payload["reason"] == "detached"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_escaped_as_tmux_escapes_it() {
        let mut out = Vec::new();
        escape_output(b"echo a\\b\r\n\x1b[0m\xc3\xa9", &mut out);
        assert_eq!(out, b"echo a\\134b\\015\\012\\033[0m\xc3\xa9");
    }
}
