//! Commands that put a pane in one of tmux's modes (copy-mode,
//! clock-mode, the choosers, customize-mode, find-window), the prompt's
//! history, send-prefix, source-file and server-access.
//!
//! A mode is drawn by a tmux client over the pane; the front has no such
//! client screen (a `ptyd attach` terminal shows the pane's own output),
//! so these check their target and leave the pane as it is: keys sent
//! afterwards reach the program in the pane, and `pane_in_mode` stays 0.
//! docs/tmux.md says so.

use super::args::Args;
use super::{CmdResult, Ctx, Failure};
use serde_json::json;

/// copy-mode, clock-mode, choose-*, customize-mode, find-window: the
/// target pane (and `-s`'s) must exist; nothing is drawn.
pub fn mode(ctx: &mut Ctx, a: &Args) -> CmdResult {
    ctx.find_pane(a.value('t'))?;
    if let Some(source) = a.value('s') {
        ctx.find_pane(Some(source))?;
    }
    Ok(())
}

/// find-window needs its match string, as tmux's usage says.
pub fn find_window(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.positional.len() != 1 {
        return Err(Failure::new(
            "usage: find-window [-CiNrTZ] [-t target-pane] match-string",
        ));
    }
    mode(ctx, a)
}

/// The prompt's history types, in tmux's order.
const PROMPT_TYPES: &[&str] = &["command", "search", "target", "window-target"];

fn prompt_types(a: &Args) -> Result<Vec<&'static str>, Failure> {
    match a.value('T') {
        None => Ok(PROMPT_TYPES.to_vec()),
        Some(t) => PROMPT_TYPES
            .iter()
            .find(|p| **p == t)
            .map(|p| vec![*p])
            .ok_or_else(|| Failure::new(format!("invalid type: {t}"))),
    }
}

/// show-prompt-history: the front has no command prompt, so every
/// history is empty; printed as tmux prints an empty one.
pub fn show_prompt_history(_ctx: &mut Ctx, a: &Args) -> CmdResult {
    for t in prompt_types(a)? {
        out!("History for {t}:\n");
    }
    Ok(())
}

pub fn clear_prompt_history(_ctx: &mut Ctx, a: &Args) -> CmdResult {
    prompt_types(a).map(|_| ())
}

/// send-prefix: the session's `prefix` (`-2`: `prefix2`) key, typed into
/// the pane, as tmux's send-prefix types it.
pub fn send_prefix(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_pane(a.value('t'))?;
    let (session, pane) = {
        let view = ctx.view()?;
        (view.session(at).num, view.pane(at).id())
    };
    let name = if a.has('2') { "prefix2" } else { "prefix" };
    let store = super::options::Store::load(&ctx.paths.runtime_dir);
    let key = store
        .get(&format!("${session}"), name)
        .or_else(|| store.get("session", name))
        .map(str::to_string)
        .or_else(|| super::options::known(name).map(|(_, d)| d.to_string()))
        .unwrap_or_default();
    if key == "None" || key.is_empty() {
        return Ok(());
    }
    crate::keys::parse(&key).map_err(|e| Failure::new(format!("{name} {key}: {e}")))?;
    ctx.call("pane.input", json!({"target": pane, "keys": [key]}))?;
    Ok(())
}

/// Largest file source-file reads: a config, not a data set.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// How deep source-file may nest (a file that sources itself stops
/// here), as tmux bounds it.
const MAX_SOURCE_DEPTH: usize = 50;

thread_local! {
    // Already const: clippy 1.96 (the Windows CI's toolchain) reports it
    // anyway for the Windows target's expansion of the macro.
    #[allow(clippy::missing_const_for_thread_local)]
    static SOURCE_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// source-file: each file's commands, run in order as tmux runs a
/// config file's (`\` at a line's end continues it). `-q`: a missing
/// file is no error; `-n`: parsed, not run; `-v`: each command printed
/// before it runs; `-F`: the paths are formats.
pub fn source_file(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.positional.is_empty() {
        return Err(Failure::new(
            "usage: source-file [-Fnqv] [-t target-pane] path ...",
        ));
    }
    let depth = SOURCE_DEPTH.with(|d| d.get());
    if depth >= MAX_SOURCE_DEPTH {
        return Err(Failure::new("too many nested files"));
    }
    for given in &a.positional {
        let path = if a.has('F') {
            let at = ctx.find_pane(a.value('t'))?;
            super::vars::expand(ctx, at, given)?
        } else {
            given.clone()
        };
        let text = match read_bounded(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && a.has('q') => continue,
            Err(e) => return Err(Failure::new(format!("{path}: {e}"))),
        };
        let joined = text.replace("\\\n", "");
        let commands =
            super::parse::commands(&joined).map_err(|e| Failure::new(format!("{path}: {e}")))?;
        if a.has('n') {
            continue;
        }
        SOURCE_DEPTH.with(|d| d.set(depth + 1));
        let result = commands.iter().try_for_each(|words| {
            let (name, rest) = words.split_first().expect("parse drops empty commands");
            if a.has('v') {
                let line: Vec<String> = words.iter().map(|w| super::parse::quote(w)).collect();
                out!("{path}: {}", line.join(" "));
            }
            super::commands::run(ctx, name, rest)
        });
        SOURCE_DEPTH.with(|d| d.set(depth));
        result?;
    }
    Ok(())
}

/// Runs a config file's commands when a server starts (`-f`'s, else
/// tmux's own files): a missing file is skipped, and, as in tmux, a
/// command that fails does not stop the others nor the command that
/// started the server; tmux shows such errors to an attached client
/// only, so they are not printed here.
pub fn source_config(ctx: &mut Ctx, path: &str) {
    let Ok(text) = read_bounded(path) else {
        return;
    };
    let Ok(commands) = super::parse::commands(&text.replace("\\\n", "")) else {
        return;
    };
    SOURCE_DEPTH.with(|d| d.set(d.get() + 1));
    for words in commands {
        let (name, rest) = words.split_first().expect("parse drops empty commands");
        let _ = super::commands::run(ctx, name, rest);
    }
    SOURCE_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
}

fn read_bounded(path: &str) -> std::io::Result<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} KiB; source-file reads config files",
            MAX_SOURCE_BYTES / 1024
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// server-access: only the server's own user reaches it (its runtime
/// directory is 0700), so `-l` lists that user with write access, and
/// granting or denying another user is refused with the reason.
pub fn server_access(_ctx: &mut Ctx, a: &Args) -> CmdResult {
    let (_, me) = super::cmd_client::user();
    if a.has('l') {
        out!("{me} (W)");
        return Ok(());
    }
    let Some(user) = a.positional.first() else {
        return Err(Failure::new("missing user argument"));
    };
    if *user == me {
        return Ok(());
    }
    Err(Failure::new(format!(
        "server-access: ptyd serves only its own user ({me}); other users cannot reach its socket, whose directory is 0700"
    )))
}
