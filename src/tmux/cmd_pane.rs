//! Pane commands: split-window, kill-pane, list-panes, capture-pane,
//! send-keys, select-pane, resize-pane, respawn-pane; and the one way the
//! front creates a pane (`create`), for new-session and new-window too.

use super::args::Args;
use super::cmd_session::print_rows;
use super::view::{At, View};
use super::{CmdResult, Ctx, Failure, vars};
use serde_json::{Value, json};

const LIST_FORMAT: &str = "#{pane_index}: [#{pane_width}x#{pane_height}] [history #{history_size}/#{history_limit}, #{history_bytes} bytes] #{pane_id}#{?pane_active, (active),}#{?pane_dead, (dead),}";

/// What a new pane is: where it goes, and what it runs.
pub struct Spawn {
    /// A new tab in this workspace (`wN`)...
    pub workspace: Option<String>,
    pub tab_name: Option<String>,
    /// ...or a split of this pane: (`pN`, side by side, share kept).
    pub split: Option<(String, bool, f32)>,
    pub cwd: Option<String>,
    /// `-e NAME=VALUE`, as given.
    pub env: Vec<String>,
    /// tmux's command: one word is a shell command, several an argv.
    pub command: Vec<String>,
    pub cols: u16,
    pub rows: u16,
}

/// Creates the pane; its number. The pane's environment is this command's
/// (as tmux's `new-session` gives a session its client's), with `TMUX`, so
/// that `tmux` run inside it reaches this server (and the server adds
/// `TMUX_PANE`), the session's variables (`set-environment`) and the `-e`
/// ones.
pub fn create(ctx: &mut Ctx, spawn: Spawn) -> Result<u64, Failure> {
    let workspace = match (&spawn.workspace, &spawn.split) {
        (Some(w), _) => Some(w.clone()),
        (None, Some((pane, _, _))) => {
            let num = pane.strip_prefix('p').and_then(|n| n.parse().ok());
            let view = ctx.view()?;
            num.and_then(|n| view.find_pane_num(n))
                .map(|at| view.session(at).id())
        }
        (None, None) => None,
    };
    let mut env = super::cmd_env::for_new_pane(ctx, workspace.as_deref())?;
    for pair in &spawn.env {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(Failure::new(format!("invalid environment: {pair}")));
        };
        env.insert(k.to_string(), Value::String(v.to_string()));
    }
    let pid = ctx.server_pid()?;
    let session_num = spawn
        .workspace
        .as_deref()
        .and_then(|w| w.strip_prefix('w'))
        .unwrap_or("0")
        .to_string();
    env.insert(
        "TMUX".into(),
        Value::String(format!("{},{pid},{session_num}", ctx.socket_path())),
    );
    let mut params = json!({
        "cols": spawn.cols.clamp(2, 1000),
        "rows": spawn.rows.clamp(1, 500),
        "env": env,
        "client_env": crate::environment::of_this_process().map_err(Failure::new)?,
    });
    match spawn.command.as_slice() {
        [] => {}
        [one] => params["shell"] = json!(one),
        argv => params["argv"] = json!(argv),
    }
    if let Some(cwd) = spawn.cwd {
        params["cwd"] = json!(cwd);
    }
    if let Some(w) = spawn.workspace {
        params["workspace"] = json!(w);
    }
    if let Some(name) = spawn.tab_name {
        params["tab_name"] = json!(name);
    }
    if let Some((target, side_by_side, kept)) = spawn.split {
        params["split"] = json!(target);
        params["direction"] = json!(if side_by_side {
            "horizontal"
        } else {
            "vertical"
        });
        params["ratio"] = json!(kept);
    }
    let info = ctx
        .call("pane.create", params)
        .map_err(|e| Failure::new(format!("create pane failed: {}", e.message)))?;
    ctx.changed();
    info["id"]
        .as_str()
        .and_then(|id| id.strip_prefix('p')?.parse().ok())
        .ok_or_else(|| Failure::new("the server named no new pane"))
}

/// A `-c` start directory as tmux takes it: formats expanded for the
/// target (`#{pane_current_path}`), `~` for the home directory, relative
/// to this command's directory; one that is no directory is ignored, as
/// tmux ignores it, and the pane starts where it would without `-c`.
pub fn start_directory(ctx: &mut Ctx, at: At, dir: &str) -> Result<Option<String>, Failure> {
    let expanded = if dir.contains('#') && ctx.view()?.has_pane(at) {
        vars::expand(ctx, at, dir)?
    } else {
        dir.to_string()
    };
    let path = match expanded.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = std::env::var_os("HOME").unwrap_or_default();
            std::path::PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => std::path::PathBuf::from(&expanded),
    };
    let path = if path.is_absolute() {
        path
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => return Ok(None),
        }
    };
    Ok(path.is_dir().then(|| path.display().to_string()))
}

/// Puts the focus back where `before` had it, in the window at `at` and
/// in its session, after ptyd moved it to a new pane.
pub fn keep_focus(ctx: &mut Ctx, before: &View, at: At) -> CmdResult {
    let window = before.window(at);
    let session = before.session(at);
    let mut back = Vec::new();
    back.extend(window.active_pane().map(|p| p.id()));
    let active = session.windows.iter().find(|w| w.active);
    back.extend(
        active
            .filter(|w| w.num != window.num)
            .and_then(|w| w.active_pane())
            .map(|p| p.id()),
    );
    for id in back {
        ctx.call("pane.focus", json!({"target": id}))?;
    }
    ctx.changed();
    Ok(())
}

/// A size as tmux's `-l`: cells, or a percentage of `total` with `%`.
fn size_arg(value: &str, total: u64) -> Result<u64, Failure> {
    let bad = || Failure::new(format!("invalid size: {value}"));
    match value.strip_suffix('%') {
        Some(p) => {
            let p: u64 = p.parse().map_err(|_| bad())?;
            if p > 100 {
                return Err(bad());
            }
            Ok(total * p / 100)
        }
        None => value.parse().map_err(|_| bad()),
    }
}

pub fn split(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_pane(a.value('t'))?;
    let target = ctx.view()?.pane(at).clone();
    // ptyd focuses a new pane; tmux does only without -d.
    let before = ctx.view()?.clone();
    let side_by_side = a.has('h');
    let total = if side_by_side {
        target.cols()
    } else {
        target.rows()
    };
    // tmux gives the new pane half of what is left after the border,
    // rounded down, unless told.
    let wanted = match (a.value('l'), a.value('p')) {
        (Some(l), _) => size_arg(l, total)?,
        (None, Some(p)) => size_arg(&format!("{p}%"), total)?,
        (None, None) => total.saturating_sub(1) / 2,
    };
    let minimum = if side_by_side { 2 } else { 1 };
    if total < 2 * minimum + 1 || wanted < minimum || wanted + minimum + 1 > total {
        return Err(Failure::new("create pane failed: pane too small"));
    }
    let kept_cells = total - wanted - 1;
    let kept = (kept_cells as f32 / total as f32).clamp(0.05, 0.95);
    let (cols, rows) = if side_by_side {
        (wanted, target.rows())
    } else {
        (target.cols(), wanted)
    };
    let cwd = match a.value('c') {
        Some(dir) => start_directory(ctx, at, dir)?,
        None => None,
    }
    .or_else(|| target.info["cwd"].as_str().map(str::to_string));
    let pane = create(
        ctx,
        Spawn {
            workspace: None,
            tab_name: None,
            split: Some((target.id(), side_by_side, kept)),
            cwd,
            env: a.values('e').iter().map(|s| s.to_string()).collect(),
            command: a.positional.clone(),
            cols: cols as u16,
            rows: rows as u16,
        },
    )?;
    // The split pane keeps the rest of the cells, as tmux's layout does.
    let (kc, kr) = if side_by_side {
        (kept_cells, target.rows())
    } else {
        (target.cols(), kept_cells)
    };
    ctx.call(
        "pane.resize",
        json!({"target": target.id(), "cols": kc, "rows": kr}),
    )?;
    if !a.has('d') {
        ctx.focus_from(pane, &before)?;
    } else {
        keep_focus(ctx, &before, at)?;
    }
    ctx.changed();
    print_created(
        ctx,
        a,
        pane,
        "#{session_name}:#{window_index}.#{pane_index}",
    )
}

/// `-P` of the commands that make a pane: prints where the new pane is, in
/// `-F`'s format, else `default`.
pub fn print_created(ctx: &mut Ctx, a: &Args, pane: u64, default: &str) -> CmdResult {
    if !a.has('P') {
        return Ok(());
    }
    let at = ctx
        .view()?
        .find_pane_num(pane)
        .ok_or_else(|| Failure::new(format!("the new pane %{pane} is gone already")))?;
    let line = vars::expand(ctx, at, a.value('F').unwrap_or(default))?;
    out!("{line}");
    Ok(())
}

/// Removes each of `ids` with `method` (`pane.remove`, `tab.remove`,
/// `workspace.remove`), forced as tmux's kill commands are.
pub fn remove_each(ctx: &mut Ctx, method: &str, ids: Vec<String>) -> CmdResult {
    for id in ids {
        ctx.call(method, json!({"target": id, "force": true}))?;
    }
    ctx.changed();
    Ok(())
}

pub fn kill(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_pane(a.value('t'))?;
    let view = ctx.view()?;
    let doomed: Vec<String> = if a.has('a') {
        let keep = view.pane(at).num;
        view.window(at)
            .panes
            .iter()
            .filter(|p| p.num != keep)
            .map(|p| p.id())
            .collect()
    } else {
        vec![view.pane(at).id()]
    };
    remove_each(ctx, "pane.remove", doomed)
}

pub fn list(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let (rows, default): (Vec<At>, String) = if a.has('a') {
        (
            ctx.view()?.all_panes(),
            format!("#{{session_name}}:#{{window_index}}.{LIST_FORMAT}"),
        )
    } else if a.has('s') {
        let at = ctx.find_session(a.value('t'))?;
        let rows = ctx
            .view()?
            .all_panes()
            .into_iter()
            .filter(|p| p.session == at.session)
            .collect();
        (rows, format!("#{{window_index}}.{LIST_FORMAT}"))
    } else {
        let at = ctx.find_window(a.value('t'))?;
        let rows = ctx
            .view()?
            .all_panes()
            .into_iter()
            .filter(|p| p.session == at.session && p.window == at.window)
            .collect();
        (rows, LIST_FORMAT.to_string())
    };
    let format = a.value('F').map(str::to_string).unwrap_or(default);
    print_rows(ctx, &rows, &format, a.value('f'))
}

/// A `-S`/`-E` line: a number, or `-` for the start of the history (for
/// `-S`) or the end of the screen (for `-E`, given as `None`).
fn line_arg(value: Option<&str>, dash: Option<i64>) -> Result<Option<i64>, Failure> {
    match value {
        None => Ok(None),
        Some("-") => Ok(dash),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| Failure::new(format!("invalid line: {v}"))),
    }
}

pub fn capture(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_pane(a.value('t'))?;
    let id = ctx.view()?.pane(at).id();
    let mut params = json!({"target": id, "ansi": a.has('e'), "join": a.has('J')});
    if let Some(start) = line_arg(a.value('S'), Some(-1_000_000_000))? {
        params["start"] = json!(start);
    }
    if let Some(end) = line_arg(a.value('E'), None)? {
        params["end"] = json!(end);
    }
    let capture = ctx.call("pane.capture", params)?;
    if a.has('a') && capture["modes"]["alt_screen"] != true {
        return if a.has('q') {
            Ok(())
        } else {
            Err(Failure::new("no alternate screen"))
        };
    }
    let mut out = String::new();
    for line in crate::client::capture_lines(&capture) {
        // ptyd opens a line's attributes with a reset (`ESC[0;32m`); tmux
        // writes the attribute alone (`ESC[32m`), which tools match. The
        // same reset, written apart, keeps the meaning.
        let line = if a.has('e') {
            std::borrow::Cow::Owned(line.replace("\x1b[0;", "\x1b[0m\x1b["))
        } else {
            std::borrow::Cow::Borrowed(line)
        };
        let line = line.as_ref();
        if a.has('C') {
            out.push_str(&octal_escape(line));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if !a.has('p') {
        // Without -p tmux keeps it in a paste buffer.
        return super::cmd_buffers::store(ctx, a.value('b'), out);
    }
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(())
}

/// `capture-pane -C`: non-printable characters as octal `\NNN`.
fn octal_escape(line: &str) -> String {
    let mut out = String::new();
    for b in line.bytes() {
        if b == b'\\' {
            out.push_str("\\\\");
        } else if (0x20..0x7f).contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\{b:03o}"));
        }
    }
    out
}

/// Most repeats `send-keys -N` takes: a bound on the input one command
/// can queue.
const MAX_REPEAT: u64 = 10_000;

pub fn send_keys(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('X') {
        return Err(Failure::new("not in a mode"));
    }
    let at = ctx.find_pane(a.value('t'))?;
    // With synchronize-panes on, keys go to every pane of the window that
    // has it on, as tmux sends them; none to a pane whose input is off.
    let targets: Vec<String> = {
        let store = super::options::Store::load(&ctx.paths.runtime_dir);
        let view = ctx.view()?;
        let window = view.window(at);
        let pane = view.pane(at);
        let chosen: Vec<&super::view::Pane> =
            if super::options::synchronized(&store, window.num, pane.num) {
                window
                    .panes
                    .iter()
                    .filter(|p| super::options::synchronized(&store, window.num, p.num))
                    .collect()
            } else {
                vec![pane]
            };
        chosen
            .into_iter()
            .filter(|p| !super::options::input_off(&store, p.num))
            .map(|p| p.id())
            .collect()
    };
    let repeat = match a.value('N') {
        None => 1,
        Some(n) => n
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=MAX_REPEAT).contains(n))
            .ok_or_else(|| Failure::new(format!("repeat count invalid: {n}")))?,
    };
    // Runs of text and of key names, in order: each request writes its
    // `data`, then its `keys`.
    let mut requests: Vec<(String, Vec<String>)> = Vec::new();
    for word in &a.positional {
        let piece = if a.has('H') {
            let byte = u8::from_str_radix(word, 16)
                .map_err(|_| Failure::new(format!("invalid hex: {word}")))?;
            Piece::Bytes(vec![byte])
        } else if a.has('l') || crate::keys::parse(word).is_err() {
            // tmux types what is no key name as text.
            Piece::Bytes(word.as_bytes().to_vec())
        } else {
            Piece::Key(word.clone())
        };
        let last_is_text = requests.last().is_some_and(|(_, keys)| keys.is_empty());
        match piece {
            Piece::Bytes(b) => {
                let text = utf8(b)?;
                match requests.last_mut() {
                    Some((data, _)) if last_is_text => data.push_str(&text),
                    _ => requests.push((text, Vec::new())),
                };
            }
            Piece::Key(k) => match requests.last_mut() {
                Some((_, keys)) => keys.push(k),
                None => requests.push((String::new(), vec![k])),
            },
        }
    }
    for id in &targets {
        send(ctx, id, repeat, &requests)?;
    }
    Ok(())
}

fn send(ctx: &mut Ctx, id: &str, repeat: u64, requests: &[(String, Vec<String>)]) -> CmdResult {
    for _ in 0..repeat {
        for (data, keys) in requests {
            let mut params = json!({"target": id});
            if !data.is_empty() {
                params["data"] = json!(data);
            }
            if !keys.is_empty() {
                params["keys"] = json!(keys);
            }
            ctx.call("pane.input", params)?;
        }
    }
    Ok(())
}

enum Piece {
    Bytes(Vec<u8>),
    Key(String),
}

fn utf8(bytes: Vec<u8>) -> Result<String, Failure> {
    String::from_utf8(bytes).map_err(|_| {
        Failure::new("send-keys: bytes that are not UTF-8 cannot be sent through ptyd's tmux front")
    })
}

pub fn select(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('l') {
        return last(ctx, a);
    }
    let mut at = ctx.find_pane(a.value('t'))?;
    let count = ctx.view()?.window(at).panes.len();
    if count > 0 {
        if a.has('L') || a.has('U') {
            at.pane = (at.pane + count - 1) % count;
        } else if a.has('R') || a.has('D') {
            at.pane = (at.pane + 1) % count;
        }
    }
    let num = ctx.view()?.pane(at).num;
    if a.has('d') || a.has('e') {
        // Kept for send-keys, which types nothing into a pane whose input
        // is off, as tmux drops keys for it.
        let mut store = super::options::Store::load(&ctx.paths.runtime_dir);
        let off = a.has('d').then(|| "1".to_string());
        store.set("input_off", &format!("%{num}"), off);
        return store.save().map_err(Failure::new);
    }
    if let Some(title) = a.value('T') {
        // ptyd has no title a client sets; the front keeps it for
        // `#{pane_title}`.
        let mut store = super::options::Store::load(&ctx.paths.runtime_dir);
        store.set("titles", &format!("%{num}"), Some(title.to_string()));
        // As tmux: -T sets the title and selects nothing.
        return store.save().map_err(Failure::new);
    }
    ctx.focus(num)
}

/// last-pane (and `select-pane -l`): back to the pane the window last
/// left through the front.
pub fn last(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_window(a.value('t'))?;
    let num = ctx.view()?.window(at).num;
    let left = ctx.last_left(&format!("@{num}"));
    let window = ctx.view()?.window(at);
    let pane = left
        .filter(|p| window.panes.iter().any(|pane| pane.num == *p))
        .ok_or_else(|| Failure::new("no last pane"))?;
    ctx.focus(pane)
}

pub fn resize(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('Z') {
        return super::cmd_layout::zoom(ctx, a);
    }
    let moves = ['L', 'R', 'U', 'D'].iter().any(|f| a.has(*f));
    if moves && !a.has('x') && !a.has('y') && super::cmd_layout::resize_split(ctx, a)? {
        return Ok(());
    }
    let at = ctx.find_pane(a.value('t'))?;
    let pane = ctx.view()?.pane(at).clone();
    let number = |v: &str| {
        v.parse::<u64>()
            .map_err(|_| Failure::new(format!("invalid size: {v}")))
    };
    let mut cols = match a.value('x') {
        Some(v) => size_arg(v, pane.cols())?,
        None => pane.cols(),
    };
    let mut rows = match a.value('y') {
        Some(v) => size_arg(v, pane.rows())?,
        None => pane.rows(),
    };
    let step = match a.positional.first() {
        Some(v) => number(v)?,
        None => 1,
    };
    if a.has('L') {
        cols = cols.saturating_sub(step);
    }
    if a.has('R') {
        cols += step;
    }
    if a.has('U') {
        rows = rows.saturating_sub(step);
    }
    if a.has('D') {
        rows += step;
    }
    // tmux stops at its smallest pane; ptyd refuses below its own.
    use crate::pty::{MIN_COLS, MIN_ROWS};
    ctx.call(
        "pane.resize",
        json!({"target": pane.id(), "cols": cols.max(MIN_COLS as _), "rows": rows.max(MIN_ROWS as _)}),
    )?;
    ctx.changed();
    Ok(())
}

pub fn respawn(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if !a.positional.is_empty() || a.has('c') || a.has('e') {
        return Err(Failure::new(
            "respawn-pane: a new command, -c or -e is not supported by ptyd's tmux front; the pane runs its own command again",
        ));
    }
    let at = ctx.find_pane(a.value('t'))?;
    let pane = ctx.view()?.pane(at).clone();
    if pane.running() {
        if !a.has('k') {
            return Err(Failure::new(format!(
                "respawn pane failed: pane %{} still active",
                pane.num
            )));
        }
        ctx.call(
            "pane.kill",
            json!({"target": pane.id(), "signal": "KILL", "grace_ms": 0}),
        )?;
        ctx.call(
            "pane.wait",
            json!({"target": pane.id(), "exit": true, "timeout_ms": 10_000}),
        )?;
    }
    ctx.call("pane.respawn", json!({"target": pane.id()}))?;
    ctx.changed();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_cells_or_percent() {
        assert_eq!(size_arg("30", 80).unwrap(), 30);
        assert_eq!(size_arg("25%", 80).unwrap(), 20);
        assert!(size_arg("101%", 80).is_err());
        assert!(size_arg("x", 80).is_err());
    }

    #[test]
    fn octal_escapes_what_is_not_printable() {
        assert_eq!(octal_escape("a\tb\\"), "a\\011b\\\\");
    }
}
