//! Clients as tmux shows them: list-clients, detach-client,
//! refresh-client, and the client commands that have nothing to do on a
//! ptyd client (suspend-client, lock-client, lock-session, lock-server).
//!
//! A tmux client is a process attached to the server: here, the process
//! behind one or more attached connections (`client.list`'s `pid`). A
//! control-mode client (`tmux -C`, control.rs) attaches read-only to every
//! pane of its session to read their output, so its connections are
//! grouped back into one client by pid; it also leaves a small file in
//! the namespace's runtime directory saying which session it is attached
//! to and the size it was given (`refresh-client -C`), which the server
//! has no notion of. Like tmux's clients without a terminal, every client
//! is named `client-PID`.

use super::args::Args;
use super::view::At;
use super::{CmdResult, Ctx, Failure, vars};
use serde_json::json;
use std::path::{Path, PathBuf};

const LIST_FORMAT: &str = "#{client_name}: #{session_name} [#{client_width}x#{client_height} #{client_termname}]#{?client_flags, (,}#{client_flags}#{?client_flags,),}";

/// What a control client records for others to see (module doc).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ControlRecord {
    /// The session's number (`$N`).
    pub session: u64,
    pub cols: u16,
    pub rows: u16,
    pub created_unix: u64,
}

/// Largest record read: a bound on what a planted file can cost.
const MAX_RECORD_BYTES: u64 = 4096;

fn records_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("tmux-clients")
}

fn record_path(runtime_dir: &Path, pid: u32) -> PathBuf {
    records_dir(runtime_dir).join(format!("{pid}.json"))
}

pub fn write_record(runtime_dir: &Path, record: &ControlRecord) -> Result<(), String> {
    let dir = records_dir(runtime_dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = record_path(runtime_dir, std::process::id());
    let bytes = serde_json::to_vec(record).map_err(|e| e.to_string())?;
    crate::persist::atomic::write_atomic(&path, &bytes, false)
        .map_err(|e| format!("saving {}: {e}", path.display()))
}

pub fn remove_record(runtime_dir: &Path) {
    let _ = std::fs::remove_file(record_path(runtime_dir, std::process::id()));
}

/// Records left by control clients that were killed (SIGKILL leaves no
/// chance to remove one): removed when their process is gone.
pub fn remove_stale_records(runtime_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(records_dir(runtime_dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok());
        if pid.is_some_and(|pid| !alive(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn read_record(runtime_dir: &Path, pid: u32) -> Option<ControlRecord> {
    let bytes =
        crate::persist::files::read_trusted(&record_path(runtime_dir, pid), MAX_RECORD_BYTES)
            .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether a process runs: a client the server has not seen go yet (its
/// connections close as it exits) is not listed once its process is gone.
#[cfg(not(unix))]
fn alive(_pid: u32) -> bool {
    true
}

/// Whether a process runs (see above).
#[cfg(unix)]
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e != nix::errno::Errno::ESRCH,
    }
}

/// One tmux client (module doc).
#[derive(Debug, Clone)]
pub struct TmuxClient {
    pub name: String,
    pub pid: Option<u32>,
    /// Its connections' numbers (`client.list`'s `client`).
    pub conns: Vec<u64>,
    /// The session it is attached to (`$N`).
    pub session: u64,
    pub control: bool,
    pub cols: u64,
    pub rows: u64,
    pub read_only: bool,
    pub created_unix: u64,
    /// When it last attached, typed or resized (ms), for the "current"
    /// client of a command run outside any.
    pub active_ms: u64,
}

/// Every client, oldest first.
pub fn clients(ctx: &mut Ctx) -> Result<Vec<TmuxClient>, Failure> {
    let listed = ctx.call("client.list", json!({}))?;
    let runtime_dir = ctx.paths.runtime_dir.clone();
    let view = ctx.view()?;
    let mut out: Vec<TmuxClient> = Vec::new();
    for c in listed["clients"].as_array().into_iter().flatten() {
        let conn = c["client"].as_u64().unwrap_or(0);
        let pid = c["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
        let since = c["since_unix_ms"].as_u64().unwrap_or(0);
        if let Some(existing) = out.iter_mut().find(|t| pid.is_some() && t.pid == pid) {
            existing.conns.push(conn);
            existing.active_ms = existing.active_ms.max(since);
            continue;
        }
        if pid.is_some_and(|p| !alive(p)) {
            continue;
        }
        let pane = c["pane"]
            .as_str()
            .and_then(|p| p.strip_prefix('p')?.parse::<u64>().ok());
        let Some(at) = pane.and_then(|n| view.find_pane_num(n)) else {
            continue;
        };
        let record = pid.and_then(|p| read_record(&runtime_dir, p));
        let name = match pid {
            Some(p) => format!("client-{p}"),
            None => format!("client-c{conn}"),
        };
        out.push(match record {
            Some(r) => TmuxClient {
                name,
                pid,
                conns: vec![conn],
                session: r.session,
                control: true,
                cols: r.cols.into(),
                rows: r.rows.into(),
                read_only: false,
                created_unix: r.created_unix,
                active_ms: since,
            },
            None => TmuxClient {
                name,
                pid,
                conns: vec![conn],
                session: view.session(at).num,
                control: false,
                cols: c["cols"].as_u64().unwrap_or(80),
                rows: c["rows"].as_u64().unwrap_or(24),
                read_only: c["read_only"].as_bool().unwrap_or(false),
                created_unix: since / 1000,
                active_ms: since,
            },
        });
    }
    Ok(out)
}

/// The client a `-t`/`-c` names (its name, or its tty, which is its
/// name), else the current one: this control client, else the most
/// recently active, as tmux picks one for a command run outside any.
pub fn find_client(ctx: &mut Ctx, target: Option<&str>) -> Result<TmuxClient, Failure> {
    let all = clients(ctx)?;
    match target {
        Some(t) => {
            let t = t.strip_suffix(':').unwrap_or(t);
            all.into_iter()
                .find(|c| c.name == t)
                .ok_or_else(|| Failure::new(format!("can't find client: {t}")))
        }
        None => {
            let me = ctx
                .control
                .as_ref()
                .map(|_| format!("client-{}", std::process::id()));
            if let Some(me) = me {
                if let Some(c) = all.iter().find(|c| c.name == me) {
                    return Ok(c.clone());
                }
            }
            all.into_iter()
                .max_by_key(|c| c.active_ms)
                .ok_or_else(|| Failure::new("no current client"))
        }
    }
}

/// The client's session, window and pane: its session's active ones.
fn place(ctx: &mut Ctx, client: &TmuxClient) -> Result<Option<At>, Failure> {
    let view = ctx.view()?;
    Ok(view
        .sessions
        .iter()
        .position(|s| s.num == client.session)
        .map(|s| view.session_at(s)))
}

fn client_vars(c: &TmuxClient) -> Vec<(&'static str, String)> {
    let flags = if c.control {
        "attached,focused,control-mode,UTF-8".to_string()
    } else if c.read_only {
        "attached,focused,read-only,UTF-8".to_string()
    } else {
        "attached,focused,UTF-8".to_string()
    };
    let flag = |b: bool| if b { "1" } else { "0" }.to_string();
    vec![
        ("client_name", c.name.clone()),
        (
            "client_pid",
            c.pid.map(|p| p.to_string()).unwrap_or_default(),
        ),
        ("client_tty", String::new()),
        ("client_width", c.cols.to_string()),
        ("client_height", c.rows.to_string()),
        ("client_flags", flags),
        ("client_readonly", flag(c.read_only)),
        ("client_control_mode", flag(c.control)),
        ("client_termname", "xterm".into()),
        ("client_termtype", String::new()),
        ("client_termfeatures", String::new()),
        ("client_utf8", "1".into()),
        ("client_created", c.created_unix.to_string()),
        ("client_activity", (c.active_ms / 1000).to_string()),
        ("client_prefix", "0".into()),
        ("client_key_table", "root".into()),
        ("client_written", "0".into()),
        ("client_discarded", "0".into()),
        ("client_cell_width", String::new()),
        ("client_cell_height", String::new()),
        ("client_uid", user().0),
        ("client_user", user().1),
    ]
}

/// The user the clients run as (every client is this user's): uid, name.
pub(super) fn user() -> (String, String) {
    crate::sys::user_id_and_name()
}

pub fn list(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let only = match a.value('t') {
        Some(t) => Some(ctx.view_session_num(t)?),
        None => None,
    };
    let format = a.value('F').unwrap_or(LIST_FORMAT).to_string();
    for client in clients(ctx)? {
        if only.is_some_and(|s| s != client.session) {
            continue;
        }
        let Some(at) = place(ctx, &client)? else {
            continue;
        };
        let mut extra = client_vars(&client);
        extra.push(("client_session", ctx.view()?.session(at).name.clone()));
        if let Some(filter) = a.value('f') {
            let v = vars::expand_with(ctx, at, filter, &extra)?;
            if v.is_empty() || v == "0" {
                continue;
            }
        }
        let line = vars::expand_with(ctx, at, &format, &extra)?;
        out!("{line}");
    }
    Ok(())
}

/// Detaches every connection of `client`; this control client itself
/// stops after the command (control.rs).
fn detach(ctx: &mut Ctx, client: &TmuxClient) -> CmdResult {
    if client.pid == Some(std::process::id()) {
        if let Some(state) = ctx.control.as_mut() {
            state.detached = true;
            return Ok(());
        }
    }
    for conn in &client.conns {
        match ctx
            .client(false)?
            .call("client.detach", json!({"client": conn}))
        {
            Ok(_) => {}
            // It went meanwhile: detached all the same.
            Err(e) if e.refused("not_found") => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// detach-client: `-t` a client (the current one without), `-s` every
/// client of a session, `-a` every client but the one `-t` names.
pub fn detach_client(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if let Some(s) = a.value('s') {
        let num = ctx.view_session_num(s)?;
        for client in clients(ctx)?.into_iter().filter(|c| c.session == num) {
            detach(ctx, &client)?;
        }
        return Ok(());
    }
    let keep = find_client(ctx, a.value('t'))?;
    if a.has('a') {
        for client in clients(ctx)?.into_iter().filter(|c| c.name != keep.name) {
            detach(ctx, &client)?;
        }
        return Ok(());
    }
    detach(ctx, &keep)
}

/// refresh-client: `-C WxH` sizes a control client (as tmux, the panes
/// keep their own sizes here: ptyd sizes each pane's terminal itself);
/// everything else redraws, which a ptyd client does by itself.
pub fn refresh(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let client = find_client(ctx, a.value('t'))?;
    let Some(size) = a.value('C') else {
        return Ok(());
    };
    let parsed = size
        .split_once(['x', ','])
        .and_then(|(w, h)| Some((w.parse::<u16>().ok()?, h.parse::<u16>().ok()?)))
        .filter(|&(w, h)| (1..=10000).contains(&w) && (1..=10000).contains(&h));
    let Some((cols, rows)) = parsed else {
        return Err(Failure::new("bad size argument"));
    };
    if client.pid == Some(std::process::id()) {
        if let Some(state) = ctx.control.as_mut() {
            state.size = (cols, rows);
        }
    }
    Ok(())
}

/// suspend-client, lock-client: a control client is neither suspended nor
/// locked by tmux, and ptyd draws no lock screen; the client must exist.
pub fn client_noop(ctx: &mut Ctx, a: &Args) -> CmdResult {
    find_client(ctx, a.value('t')).map(|_| ())
}

/// lock-server, lock-session: nothing is drawn on any client (as with
/// tmux when no client has a terminal); the session must exist.
pub fn lock_noop(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.value('t').is_some() {
        ctx.find_session(a.value('t'))?;
    }
    Ok(())
}

/// display-popup: ptyd draws no popups, so the popup's command runs
/// unseen, in the pane's directory (or `-d`) with `-e`'s variables, as
/// it would in the popup; `-C` (close the open one) has nothing to close.
pub fn display_popup(ctx: &mut Ctx, a: &Args) -> CmdResult {
    find_client(ctx, a.value('c'))?;
    let at = ctx.find_pane(a.value('t'))?;
    if a.has('C') || a.positional.is_empty() {
        return Ok(());
    }
    let command = a.positional.join(" ");
    let dir = match a.value('d') {
        Some(d) => Some(d.to_string()),
        None => ctx.view()?.pane(at).info["cwd"]
            .as_str()
            .map(str::to_string),
    };
    let mut child = std::process::Command::new("/bin/sh");
    child
        .args(["-c", &command])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(dir) = dir.filter(|d| Path::new(d).is_dir()) {
        child.current_dir(dir);
    }
    for pair in a.values('e') {
        if let Some((k, v)) = pair.split_once('=') {
            child.env(k, v);
        }
    }
    let mut child = child
        .spawn()
        .map_err(|e| Failure::new(format!("{command}: {e}")))?;
    // Reaped by a thread: a control client lives on after the command.
    std::thread::spawn(move || child.wait());
    Ok(())
}

impl Ctx {
    /// The number (`$N`) of the session `target` names.
    fn view_session_num(&mut self, target: &str) -> Result<u64, Failure> {
        let at = self.find_session(Some(target))?;
        Ok(self.view()?.session(at).num)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_only_live_processes_count() {
        let dir = std::env::temp_dir().join(format!("ptyd-tmux-rec-{}", std::process::id()));
        let record = ControlRecord {
            session: 4,
            cols: 100,
            rows: 30,
            created_unix: 7,
        };
        write_record(&dir, &record).unwrap();
        let back = read_record(&dir, std::process::id()).unwrap();
        assert_eq!((back.session, back.cols, back.rows), (4, 100, 30));
        assert!(alive(std::process::id()));
        remove_stale_records(&dir);
        assert!(read_record(&dir, std::process::id()).is_some());
        remove_record(&dir);
        assert!(read_record(&dir, std::process::id()).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
