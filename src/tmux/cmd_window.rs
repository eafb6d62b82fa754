//! Window commands: new-window, kill-window, list-windows, rename-window,
//! select-window, resize-window.

use super::args::Args;
use super::cmd_pane::{self, Spawn};
use super::cmd_session::print_rows;
use super::view::At;
use super::{CmdResult, Ctx, Failure};
use serde_json::json;

const LIST_FORMAT: &str = "#{window_index}: #{window_name}#{window_flags} (#{window_panes} panes) [#{window_width}x#{window_height}]";

pub fn new(ctx: &mut Ctx, a: &Args) -> CmdResult {
    // `-t session` or `-t session:index`: the window goes into that session.
    let target = a.value('t');
    let at = match target {
        Some(t) if !t.contains(':') && !t.starts_with('@') => ctx.find_session(Some(t))?,
        t => match ctx.find_window(t) {
            Ok(at) => at,
            Err(_) => ctx.find_session(t)?,
        },
    };
    if a.has('S') {
        if let Some(name) = a.value('n') {
            let view = ctx.view()?;
            if let Some(w) = view.session(at).windows.iter().position(|w| w.name == name) {
                let id = view
                    .window(view.window_at(at.session, w))
                    .active_pane()
                    .map(|p| p.num);
                if let Some(num) = id {
                    ctx.focus(num)?;
                }
                return Ok(());
            }
        }
    }
    // ptyd makes a new tab its workspace's active one; tmux moves there
    // only without -d.
    let before = ctx.view()?.clone();
    let (session_id, cols, rows, cwd) = {
        let view = ctx.view()?;
        let session = view.session(at);
        let pane = view.has_pane(at).then(|| view.pane(at));
        (
            session.id(),
            pane.map_or(80, |p| p.cols()) as u16,
            pane.map_or(24, |p| p.rows()) as u16,
            pane.and_then(|p| p.info["cwd"].as_str().map(str::to_string)),
        )
    };
    let start = match a.value('c') {
        Some(dir) => cmd_pane::start_directory(ctx, at, dir)?,
        None => None,
    };
    let pane = cmd_pane::create(
        ctx,
        Spawn {
            workspace: Some(session_id),
            tab_name: a.value('n').map(str::to_string),
            split: None,
            cwd: start.or(cwd),
            env: a.values('e').iter().map(|s| s.to_string()).collect(),
            command: a.positional.clone(),
            cols,
            rows,
        },
    )?;
    if !a.has('d') {
        ctx.focus_from(pane, &before)?;
    } else if let Some(w) = before.session(at).windows.iter().position(|w| w.active) {
        cmd_pane::keep_focus(ctx, &before, before.window_at(at.session, w))?;
    }
    cmd_pane::print_created(ctx, a, pane, "#{session_name}:#{window_index}")
}

pub fn kill(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_window(a.value('t'))?;
    let view = ctx.view()?;
    let doomed: Vec<String> = if a.has('a') {
        let keep = view.window(at).num;
        view.session(at)
            .windows
            .iter()
            .filter(|w| w.num != keep)
            .map(|w| w.id())
            .collect()
    } else {
        vec![view.window(at).id()]
    };
    cmd_pane::remove_each(ctx, "tab.remove", doomed)
}

pub fn list(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let (rows, default): (Vec<At>, String) = if a.has('a') {
        let view = ctx.view()?;
        let rows = view
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(s, session)| (0..session.windows.len()).map(move |w| (s, w)))
            .map(|(s, w)| view.window_at(s, w))
            .collect();
        (rows, format!("#{{session_name}}:{LIST_FORMAT}"))
    } else {
        let at = ctx.find_session(a.value('t'))?;
        let view = ctx.view()?;
        let rows = (0..view.session(at).windows.len())
            .map(|w| view.window_at(at.session, w))
            .collect();
        (rows, LIST_FORMAT.to_string())
    };
    let format = a.value('F').map(str::to_string).unwrap_or(default);
    print_rows(ctx, &rows, &format, a.value('f'))
}

pub fn rename(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let [new_name] = a.positional.as_slice() else {
        return Err(Failure::new(
            "usage: rename-window [-t target-window] new-name",
        ));
    };
    let at = ctx.find_window(a.value('t'))?;
    let id = ctx.view()?.window(at).id();
    let name = super::view::vis_name(new_name);
    ctx.call("tab.rename", json!({"target": id, "name": name}))?;
    ctx.changed();
    Ok(())
}

pub fn select(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('l') {
        return last(ctx, a);
    }
    let mut at = ctx.find_window(a.value('t'))?;
    let count = ctx.view()?.session(at).windows.len();
    if a.has('n') {
        at = ctx.view()?.window_at(at.session, (at.window + 1) % count);
    } else if a.has('p') {
        at = ctx
            .view()?
            .window_at(at.session, (at.window + count - 1) % count);
    }
    let num = ctx.view()?.pane(at).num;
    ctx.focus(num)
}

/// last-window: back to the window the session last left through the
/// front.
pub fn last(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_session(a.value('t'))?;
    let num = ctx.view()?.session(at).num;
    let left = ctx.last_left(&format!("${num}"));
    let session = ctx.view()?.session(at);
    let pane = left
        .and_then(|w| session.windows.iter().find(|win| win.num == w))
        .and_then(|w| w.active_pane())
        .map(|p| p.num)
        .ok_or_else(|| Failure::new("no last window"))?;
    ctx.focus(pane)
}

/// next-window, previous-window: `select-window -n` and `-p` of a session.
pub fn next(ctx: &mut Ctx, a: &Args) -> CmdResult {
    step(ctx, a, 1)
}

pub fn previous(ctx: &mut Ctx, a: &Args) -> CmdResult {
    step(ctx, a, -1)
}

fn step(ctx: &mut Ctx, a: &Args, by: isize) -> CmdResult {
    let at = ctx.find_session(a.value('t'))?;
    let view = ctx.view()?;
    let session = view.session(at);
    let count = session.windows.len() as isize;
    let here = session.windows.iter().position(|w| w.active).unwrap_or(0) as isize;
    let to = (here + by).rem_euclid(count.max(1)) as usize;
    let pane = view
        .window(view.window_at(at.session, to))
        .active_pane()
        .map(|p| p.num)
        .ok_or_else(|| Failure::new("no next window"))?;
    ctx.focus(pane)
}

/// Every pane of the window scaled to the new size (ptyd sizes each
/// pane's terminal itself).
pub fn resize(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_window(a.value('t'))?;
    let window = ctx.view()?.window(at).clone();
    let width = window.panes.iter().map(|p| p.cols()).max().unwrap_or(80);
    let height = window.panes.iter().map(|p| p.rows()).max().unwrap_or(24);
    let parse = |v: Option<&str>, old: u64| -> Result<u64, Failure> {
        match v {
            None => Ok(old),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| Failure::new(format!("invalid size: {v}"))),
        }
    };
    let (new_w, new_h) = (parse(a.value('x'), width)?, parse(a.value('y'), height)?);
    for pane in &window.panes {
        let cols = (pane.cols() * new_w / width.max(1)).max(crate::pty::MIN_COLS.into());
        let rows = (pane.rows() * new_h / height.max(1)).max(crate::pty::MIN_ROWS.into());
        ctx.call(
            "pane.resize",
            json!({"target": pane.id(), "cols": cols, "rows": rows}),
        )?;
    }
    ctx.changed();
    Ok(())
}
