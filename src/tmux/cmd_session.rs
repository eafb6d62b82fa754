//! Session commands: new-session, has-session, kill-session, kill-server,
//! list-sessions, rename-session, attach-session, switch-client.

use super::args::Args;
use super::cmd_pane::{self, Spawn};
use super::view::{At, ptyd_name};
use super::{CmdResult, Ctx, Failure, vars};
use serde_json::json;

const LIST_FORMAT: &str = "#{session_name}: #{session_windows} windows (created #{t:session_created})#{?session_attached, (attached),}";

pub fn new(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('t') {
        return Err(Failure::new(
            "new-session -t: grouped sessions are not supported by ptyd's tmux front",
        ));
    }
    let attach = !a.has('d');
    if attach && ctx.control.is_none() {
        require_terminal()?;
    }
    ctx.client(true)?;
    if let Some(name) = a.value('s') {
        if name.is_empty() || name.contains(':') || name.contains('.') {
            return Err(Failure::new(format!("invalid session: {name}")));
        }
        if let Ok(at) = super::target::session(ctx.view()?, Some(&format!("={name}")), None) {
            if a.has('A') {
                return if attach { attach_pane(ctx, at) } else { Ok(()) };
            }
            return Err(Failure::new(format!("duplicate session: {name}")));
        }
    }
    let name = match a.value('s') {
        Some(n) => n.to_string(),
        None => next_default_name(ctx)?,
    };
    let workspace = workspace_for(ctx, &name)?;
    let pairs: Vec<String> = a.values('e').iter().map(|s| s.to_string()).collect();
    super::cmd_env::set_pairs(ctx, &workspace, &pairs)?;
    let cwd = match a.value('c') {
        Some(dir) if !dir.contains('#') => cmd_pane::start_directory(
            ctx,
            At {
                session: 0,
                window: 0,
                pane: 0,
            },
            dir,
        )?,
        _ => None,
    }
    .or_else(|| {
        std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string())
    });
    let size = |flag: char, default: u16| -> Result<u16, Failure> {
        match a.value(flag) {
            None | Some("-") => Ok(default),
            Some(v) => v.parse::<u16>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Failure::new(format!(
                    "invalid {} {v}",
                    if flag == 'x' { "width" } else { "height" }
                ))
            }),
        }
    };
    let spawn = Spawn {
        workspace: Some(workspace),
        tab_name: a.value('n').map(str::to_string),
        split: None,
        cwd,
        env: a.values('e').iter().map(|s| s.to_string()).collect(),
        command: a.positional.clone(),
        cols: size('x', 80)?,
        rows: size('y', 24)?,
    };
    let pane = cmd_pane::create(ctx, spawn)?;
    cmd_pane::print_created(ctx, a, pane, "#{session_name}:")?;
    if attach {
        let at = ctx
            .view()?
            .find_pane_num(pane)
            .ok_or_else(|| Failure::new(format!("the new pane %{pane} is gone already")))?;
        return attach_pane(ctx, at);
    }
    Ok(())
}

/// The workspace id for a new session named `name`: an empty workspace of
/// that name is taken over (tmux has no empty sessions, so the front shows
/// none), else a new one is made.
fn workspace_for(ctx: &mut Ctx, name: &str) -> Result<String, Failure> {
    let stored = ptyd_name(name);
    let tree = ctx.call("tree", json!({}))?;
    let empty = tree["workspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| {
            w["name"] == stored.as_str() && w["tabs"].as_array().is_none_or(|t| t.is_empty())
        });
    if let Some(w) = empty {
        return Ok(w["id"].as_str().unwrap_or_default().to_string());
    }
    let created = ctx.call("workspace.create", json!({"name": stored}))?;
    ctx.changed();
    Ok(created["id"].as_str().unwrap_or_default().to_string())
}

/// tmux names unnamed sessions by number: the first unused from 0.
fn next_default_name(ctx: &mut Ctx) -> Result<String, Failure> {
    let view = ctx.view()?;
    let taken: Vec<&str> = view.sessions.iter().map(|s| s.name.as_str()).collect();
    Ok((0u64..)
        .map(|n| n.to_string())
        .find(|n| !taken.contains(&n.as_str()))
        .expect("numbers do not run out"))
}

pub fn has(ctx: &mut Ctx, a: &Args) -> CmdResult {
    ctx.find_session(a.value('t')).map(|_| ())
}

pub fn kill(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_session(a.value('t'))?;
    let view = ctx.view()?;
    let keep = view.session(at).num;
    let doomed: Vec<String> = if a.has('a') {
        view.sessions
            .iter()
            .filter(|s| s.num != keep)
            .map(|s| s.id())
            .collect()
    } else {
        vec![view.session(at).id()]
    };
    cmd_pane::remove_each(ctx, "workspace.remove", doomed)
}

/// tmux's kill-server ends every session and the server: here every
/// workspace is removed (so a later start restores nothing) and the server
/// stops.
pub fn kill_server(ctx: &mut Ctx, _a: &Args) -> CmdResult {
    let tree = ctx.call("tree", json!({}))?;
    for w in tree["workspaces"].as_array().into_iter().flatten() {
        if let Some(id) = w["id"].as_str() {
            ctx.call("workspace.remove", json!({"target": id, "force": true}))?;
        }
    }
    ctx.call("server.stop", json!({}))?;
    // A new server starts from tmux's defaults, as tmux's does: the
    // options, hooks and key tables set on this one go with it.
    super::options::Store::forget(&ctx.paths.runtime_dir);
    // tmux's kill-server returns once the server is gone: a command right
    // after it finds none.
    let socket = crate::transport::address(&ctx.paths);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while socket.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(())
}

pub fn list(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let format = a.value('F').unwrap_or(LIST_FORMAT).to_string();
    let sessions: Vec<At> = {
        let view = ctx.view()?;
        (0..view.sessions.len())
            .map(|s| view.session_at(s))
            .collect()
    };
    print_rows(ctx, &sessions, &format, a.value('f'))
}

/// Prints one expanded `format` per place, keeping those `filter` (a
/// format) makes true.
pub fn print_rows(ctx: &mut Ctx, rows: &[At], format: &str, filter: Option<&str>) -> CmdResult {
    for &at in rows {
        if let Some(f) = filter {
            let v = vars::expand(ctx, at, f)?;
            if v.is_empty() || v == "0" {
                continue;
            }
        }
        let line = vars::expand(ctx, at, format)?;
        out!("{line}");
    }
    Ok(())
}

pub fn rename(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let [new_name] = a.positional.as_slice() else {
        return Err(Failure::new(
            "usage: rename-session [-t target-session] new-name",
        ));
    };
    let at = ctx.find_session(a.value('t'))?;
    if ctx.view()?.sessions.iter().any(|s| &s.name == new_name) {
        return Err(Failure::new(format!("duplicate session: {new_name}")));
    }
    let id = ctx.view()?.session(at).id();
    ctx.call(
        "workspace.rename",
        json!({"target": id, "name": ptyd_name(new_name)}),
    )?;
    ctx.changed();
    Ok(())
}

pub fn attach(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if ctx.control.is_none() {
        require_terminal()?;
    }
    let at = ctx.find_session(a.value('t'))?;
    attach_pane(ctx, at)
}

/// switch-client: only a control client is a client a command can switch
/// (a terminal attached with `ptyd attach` follows a pane).
pub fn switch_client(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if ctx.control.is_none() {
        return Err(Failure::new("no current client"));
    }
    let at = ctx.find_session(a.value('t'))?;
    attach_pane(ctx, at)
}

fn require_terminal() -> CmdResult {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        Ok(())
    } else {
        Err(Failure::new("open terminal failed: not a terminal"))
    }
}

/// Attaches this terminal to the pane with `ptyd attach` (this same
/// binary); a control client attaches to the pane's session instead.
fn attach_pane(ctx: &mut Ctx, at: At) -> CmdResult {
    if ctx.control.is_some() {
        let num = ctx.view()?.session(at).num;
        if let Some(state) = ctx.control.as_mut() {
            state.session = Some(num);
        }
        return Ok(());
    }
    let pane = ctx.view()?.pane(at).id();
    let exe = std::env::current_exe()
        .map_err(|e| Failure::new(format!("finding ptyd's own binary: {e}")))?;
    let status = std::process::Command::new(exe)
        .args(["-L", &ctx.paths.namespace, "attach", &pane])
        .env_remove("TMUX")
        .status()
        .map_err(|e| Failure::new(format!("starting ptyd attach: {e}")))?;
    match status.code() {
        Some(0) => Ok(()),
        code => Err(Failure {
            message: String::new(),
            code: code.unwrap_or(1),
        }),
    }
}
