//! set-hook and show-hooks. Hooks are kept as tmux keeps them (arrays of
//! commands by hook name, globally or on a session, window or pane) and
//! shown as tmux shows them, so the tools that set them read back what
//! they set; ptyd never runs them by itself: only `set-hook -R` runs a
//! hook's commands, at once. docs/tmux.md says so.

use super::args::Args;
use super::options::Store;
use super::{CmdResult, Ctx, Failure, commands, parse};

/// Hooks on sessions (tmux 3.3's `show-hooks -g`).
const SESSION_HOOKS: &[&str] = &[
    "after-bind-key",
    "after-capture-pane",
    "after-copy-mode",
    "after-display-message",
    "after-display-panes",
    "after-kill-pane",
    "after-list-buffers",
    "after-list-clients",
    "after-list-keys",
    "after-list-panes",
    "after-list-sessions",
    "after-list-windows",
    "after-load-buffer",
    "after-lock-server",
    "after-new-session",
    "after-new-window",
    "after-paste-buffer",
    "after-pipe-pane",
    "after-queue",
    "after-refresh-client",
    "after-rename-session",
    "after-rename-window",
    "after-resize-pane",
    "after-resize-window",
    "after-save-buffer",
    "after-select-layout",
    "after-select-pane",
    "after-select-window",
    "after-send-keys",
    "after-set-buffer",
    "after-set-environment",
    "after-set-hook",
    "after-set-option",
    "after-show-environment",
    "after-show-messages",
    "after-show-options",
    "after-split-window",
    "after-unbind-key",
    "alert-activity",
    "alert-bell",
    "alert-silence",
    "client-active",
    "client-attached",
    "client-detached",
    "client-focus-in",
    "client-focus-out",
    "client-resized",
    "client-session-changed",
    "session-closed",
    "session-created",
    "session-renamed",
    "session-window-changed",
    "window-linked",
    "window-unlinked",
];

/// Hooks on windows and panes (`show-hooks -gw`).
const WINDOW_HOOKS: &[&str] = &[
    "pane-died",
    "pane-exited",
    "pane-focus-in",
    "pane-focus-out",
    "pane-mode-changed",
    "pane-set-clipboard",
    "pane-title-changed",
    "window-layout-changed",
    "window-pane-changed",
    "window-renamed",
    "window-resized",
];

fn is_window_hook(name: &str) -> Option<bool> {
    if SESSION_HOOKS.contains(&name) {
        Some(false)
    } else if WINDOW_HOOKS.contains(&name) {
        Some(true)
    } else {
        None
    }
}

/// `name` or `name[index]`.
fn split_index(spec: &str) -> Result<(&str, Option<u32>), Failure> {
    match spec.split_once('[') {
        None => Ok((spec, None)),
        Some((name, rest)) => {
            let index = rest
                .strip_suffix(']')
                .and_then(|i| i.parse().ok())
                .ok_or_else(|| Failure::new(format!("invalid option: {spec}")))?;
            Ok((name, Some(index)))
        }
    }
}

/// Where a hook lives: `None` for the server level, which holds none.
fn level(ctx: &mut Ctx, a: &Args, window_hook: bool) -> Result<Option<String>, Failure> {
    if a.has('s') {
        return Ok(None);
    }
    let t = a.value('t');
    Ok(Some(if a.has('g') {
        if window_hook {
            "hooks:window"
        } else {
            "hooks:session"
        }
        .to_string()
    } else if window_hook && a.has('p') {
        let at = ctx.find_pane(t)?;
        format!("hooks:%{}", ctx.view()?.pane(at).num)
    } else if window_hook {
        let at = ctx.find_window(t)?;
        format!("hooks:@{}", ctx.view()?.window(at).num)
    } else {
        let at = ctx.find_session(t)?;
        format!("hooks:${}", ctx.view()?.session(at).num)
    }))
}

fn is_global(level: &str) -> bool {
    level == "hooks:session" || level == "hooks:window"
}

fn entries(store: &Store, level: &str, name: &str) -> Vec<(u32, String)> {
    let prefix = format!("{name}[");
    let mut out: Vec<(u32, String)> = store
        .owned(level)
        .filter_map(|(k, v)| {
            let index = k.strip_prefix(&prefix)?.strip_suffix(']')?.parse().ok()?;
            Some((index, v.to_string()))
        })
        .collect();
    out.sort_unstable_by_key(|(i, _)| *i);
    out
}

fn exists(store: &Store, level: &str, name: &str) -> bool {
    is_global(level) || store.get(level, name).is_some()
}

/// A command string checked and printed as tmux prints it back.
pub(super) fn canonical(text: &str) -> Result<String, Failure> {
    let parsed = parse::commands(text).map_err(Failure::new)?;
    let mut printed = Vec::new();
    for words in parsed {
        let (name, rest) = words.split_first().expect("parse drops empty commands");
        let command = commands::find(name)?;
        let mut line = command.name.to_string();
        for arg in rest {
            line.push(' ');
            line.push_str(&parse::quote(arg));
        }
        printed.push(line);
    }
    Ok(printed.join(" ; "))
}

pub fn set(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let Some(spec) = a.positional.first() else {
        return Err(Failure::new("no hook given"));
    };
    let (name, index) = split_index(spec)?;
    let window_hook =
        is_window_hook(name).ok_or_else(|| Failure::new(format!("invalid option: {name}")))?;
    let Some(level) = level(ctx, a, window_hook)? else {
        return Err(Failure::new(format!("invalid option: {name}")));
    };
    let mut store = Store::load(&ctx.paths.runtime_dir);
    if a.has('R') {
        for (_, command) in entries(&store, &level, name) {
            for words in parse::commands(&command).map_err(Failure::new)? {
                let (cmd, rest) = words.split_first().expect("parse drops empty commands");
                commands::run(ctx, cmd, rest)?;
            }
        }
        return Ok(());
    }
    if a.has('u') {
        match index {
            Some(i) => store.set(&level, &format!("{name}[{i}]"), None),
            None => {
                for (i, _) in entries(&store, &level, name) {
                    store.set(&level, &format!("{name}[{i}]"), None);
                }
                store.set(&level, name, None);
            }
        }
        return store.save().map_err(Failure::new);
    }
    let Some(text) = a.positional.get(1) else {
        return Err(Failure::new(format!("not enough arguments: {spec}")));
    };
    let command = canonical(text)?;
    let existing = entries(&store, &level, name);
    let index = match index {
        Some(i) => i,
        None if a.has('a') => existing.last().map_or(0, |(i, _)| i + 1),
        None => {
            for (i, _) in existing {
                store.set(&level, &format!("{name}[{i}]"), None);
            }
            0
        }
    };
    store.set(&level, name, Some(String::new()));
    store.set(&level, &format!("{name}[{index}]"), Some(command));
    store.save().map_err(Failure::new)
}

pub fn show(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let store = Store::load(&ctx.paths.runtime_dir);
    let print_hook = |level: &str, name: &str, only: Option<u32>| {
        let all = entries(&store, level, name);
        match only {
            Some(i) => match all.iter().find(|(n, _)| *n == i) {
                Some((_, c)) => out!("{name}[{i}] {c}"),
                None => out!("{name}[{i}] "),
            },
            None if all.is_empty() => out!("{name}"),
            None => {
                for (i, c) in all {
                    out!("{name}[{i}] {c}");
                }
            }
        }
    };
    if let Some(spec) = a.positional.first() {
        let (name, index) = split_index(spec)?;
        let window_hook =
            is_window_hook(name).ok_or_else(|| Failure::new(format!("invalid option: {name}")))?;
        if let Some(level) = level(ctx, a, window_hook)? {
            if exists(&store, &level, name) {
                print_hook(&level, name, index);
            }
        }
        return Ok(());
    }
    let window_hooks = a.has('w') || a.has('p');
    let Some(level) = level(ctx, a, window_hooks)? else {
        return Ok(());
    };
    let names = if window_hooks {
        WINDOW_HOOKS
    } else {
        SESSION_HOOKS
    };
    for name in names.iter().filter(|n| exists(&store, &level, n)) {
        print_hook(&level, name, None);
    }
    Ok(())
}
