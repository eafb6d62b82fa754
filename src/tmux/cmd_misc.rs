//! display-message, the option commands, list-commands,
//! start-server.

use super::args::Args;
use super::commands::COMMANDS;
use super::options::{self, Scope, Store};
use super::view::At;
use super::{CmdResult, Ctx, Failure, vars};

pub fn display(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('F') && !a.positional.is_empty() {
        return Err(Failure::new("only one of -F or argument must be given"));
    }
    // As in tmux, a missing target is no error: the format sees what
    // there is (the server's variables when there is no session).
    let at = match ctx.find_pane(a.value('t')) {
        Ok(at) => at,
        Err(_) if a.value('t').is_none() => At::NOWHERE,
        Err(e) => return Err(e),
    };
    if let Some(client) = a.value('c') {
        super::cmd_client::find_client(ctx, Some(client))?;
    }
    if a.has('a') {
        let every: Vec<String> = vars::NAMES
            .iter()
            .map(|n| format!("{n}=#{{{n}}}"))
            .collect();
        let lines = vars::expand(ctx, at, &every.join("\n"))?;
        out!("{lines}");
        return Ok(());
    }
    let format = a
        .value('F')
        .map(str::to_string)
        .or_else(|| a.positional.first().cloned())
        .unwrap_or_default();
    let line = vars::expand(ctx, at, &format)?;
    // Without -p tmux shows it on a client's status line; with no client,
    // nothing is shown.
    if a.has('p') {
        out!("{line}");
    }
    Ok(())
}

pub fn start_server(ctx: &mut Ctx, _a: &Args) -> CmdResult {
    ctx.client(true).map(|_| ())
}

pub fn list_commands(_ctx: &mut Ctx, a: &Args) -> CmdResult {
    for c in COMMANDS.iter().filter(|c| c.run.is_some()) {
        if a.positional.first().is_some_and(|want| want != c.name) {
            continue;
        }
        let alias = if c.alias.is_empty() {
            String::new()
        } else {
            format!(" ({})", c.alias)
        };
        out!("{}{alias} {}", c.name, c.usage);
    }
    Ok(())
}

/// Which option table a command works on, and the owner of the values.
fn owner(ctx: &mut Ctx, a: &Args, scope: Scope) -> Result<String, Failure> {
    if a.has('g') || scope == Scope::Server {
        return Ok(match scope {
            Scope::Server => "server",
            Scope::Session => "session",
            Scope::Window | Scope::Pane => "window",
        }
        .to_string());
    }
    let t = a.value('t');
    Ok(match scope {
        Scope::Server => unreachable!("handled above"),
        Scope::Session => {
            let at = ctx.find_session(t)?;
            format!("${}", ctx.view()?.session(at).num)
        }
        Scope::Window => {
            let at = ctx.find_window(t)?;
            format!("@{}", ctx.view()?.window(at).num)
        }
        Scope::Pane => {
            let at = ctx.find_pane(t)?;
            format!("%{}", ctx.view()?.pane(at).num)
        }
    })
}

/// The scope the flags name, else the option's own.
fn scope_of(a: &Args, name: &str, window_command: bool) -> Result<Scope, Failure> {
    let flagged = if a.has('s') {
        Some(Scope::Server)
    } else if a.has('w') || window_command {
        Some(Scope::Window)
    } else if a.has('p') {
        Some(Scope::Pane)
    } else {
        None
    };
    if name.starts_with('@') {
        return Ok(flagged.unwrap_or(Scope::Session));
    }
    match options::known(name) {
        Some((own, _)) => Ok(match (flagged, own) {
            (Some(Scope::Window), Scope::Pane) => Scope::Window,
            _ => own,
        }),
        None => Err(Failure::new(format!("invalid option: {name}"))),
    }
}

fn set(ctx: &mut Ctx, a: &Args, window_command: bool) -> CmdResult {
    let Some(given) = a.positional.first() else {
        return Err(Failure::new("no option given"));
    };
    let name = &match options::resolve(given) {
        Ok(n) => n,
        Err(_) if a.has('q') => return Ok(()),
        Err(e) => return Err(Failure::new(e)),
    };
    let scope = match scope_of(a, name, window_command) {
        Ok(s) => s,
        Err(_) if a.has('q') => return Ok(()),
        Err(e) => return Err(e),
    };
    let owner = owner(ctx, a, scope)?;
    let mut store = Store::load(&ctx.paths.runtime_dir);
    let old = store.get(&owner, name).map(str::to_string);
    if a.has('o') && old.is_some() {
        return Err(Failure::new(format!("already set: {name}")));
    }
    let value = if a.has('u') || a.has('U') {
        None
    } else {
        let given = a.positional.get(1).cloned();
        let default = options::known(name).map(|(_, d)| d.to_string());
        let current = old.clone().or(default);
        Some(match given {
            Some(v) if a.has('a') => format!("{}{v}", current.unwrap_or_default()),
            Some(v) => v,
            // A flag option without a value toggles.
            None => match current.as_deref() {
                Some("on") => "off".into(),
                Some("off") => "on".into(),
                _ => return Err(Failure::new(format!("not enough arguments: {name}"))),
            },
        })
    };
    if let Some(v) = &value {
        options::validate(name, v).map_err(Failure::new)?;
    }
    store.set(&owner, name, value);
    store.save().map_err(Failure::new)?;
    Ok(())
}

pub fn set_option(ctx: &mut Ctx, a: &Args) -> CmdResult {
    set(ctx, a, false)
}

pub fn set_window_option(ctx: &mut Ctx, a: &Args) -> CmdResult {
    set(ctx, a, true)
}

/// Array options tmux gives no elements by default.
const EMPTY_ARRAYS: &[&str] = &["terminal-overrides", "user-keys", "pane-colours"];

/// The elements of array option `base` set on `owner` (and, for a
/// global owner, tmux's defaults beneath them), by index.
fn array_items(store: &Store, owner: &str, base: &str, global: bool) -> Vec<(String, String)> {
    let index_of = |key: &str| -> Option<u32> {
        key.strip_prefix(base)?
            .strip_prefix('[')?
            .strip_suffix(']')?
            .parse()
            .ok()
    };
    let mut items = std::collections::BTreeMap::new();
    if global {
        for (key, _, default) in super::option_table::OPTIONS {
            if let Some(i) = index_of(key) {
                items.insert(i, default.to_string());
            }
        }
    }
    for (key, value) in store.owned(owner) {
        if let Some(i) = index_of(key) {
            items.insert(i, value.to_string());
        }
    }
    items
        .into_iter()
        .map(|(i, v)| (format!("{base}[{i}]"), v))
        .collect()
}

fn show(ctx: &mut Ctx, a: &Args, window_command: bool) -> CmdResult {
    let print = |name: &str, value: &str| {
        if a.has('v') {
            out!("{value}");
        } else {
            out!("{name} {}", super::parse::quote(value));
        }
    };
    if let Some(given) = a.positional.first() {
        let name = &match options::resolve(given) {
            Ok(n) => n,
            Err(_) if a.has('q') => return Ok(()),
            Err(e) => return Err(Failure::new(e)),
        };
        let scope = match scope_of(a, name, window_command) {
            Ok(s) => s,
            Err(_) if a.has('q') => return Ok(()),
            Err(e) => return Err(e),
        };
        let owner = owner(ctx, a, scope)?;
        let store = Store::load(&ctx.paths.runtime_dir);
        let global = matches!(owner.as_str(), "server" | "session" | "window");
        if !name.contains('[') && !name.starts_with('@') {
            // An array option by its base name: every element, as tmux
            // shows them (`name[0] value`, ...).
            let items = array_items(&store, &owner, name, global);
            if !items.is_empty() {
                for (key, value) in items {
                    print(&key, &value);
                }
                return Ok(());
            }
        }
        let value = store.get(&owner, name).map(str::to_string).or_else(|| {
            global
                .then(|| options::known(name).map(|(_, d)| d.to_string()))
                .flatten()
        });
        match value {
            // An array with no elements (terminal-overrides) is its name.
            Some(v) if v.is_empty() && EMPTY_ARRAYS.contains(&name.as_str()) && !a.has('v') => {
                out!("{name}");
            }
            Some(v) if v.is_empty() && EMPTY_ARRAYS.contains(&name.as_str()) => {}
            Some(v) => print(name, &v),
            None => {}
        }
        return Ok(());
    }
    let scope = if a.has('s') {
        Scope::Server
    } else if a.has('w') || window_command {
        Scope::Window
    } else if a.has('p') {
        Scope::Pane
    } else {
        Scope::Session
    };
    let owner = owner(ctx, a, scope)?;
    let store = Store::load(&ctx.paths.runtime_dir);
    if matches!(owner.as_str(), "server" | "session" | "window") {
        for (name, default) in options::all_of(scope) {
            let v = store.get(&owner, name).unwrap_or(default);
            print(name, v);
        }
        for (name, v) in store.owned(&owner).filter(|(n, _)| n.starts_with('@')) {
            print(name, v);
        }
    } else {
        for (name, v) in store.owned(&owner) {
            print(name, v);
        }
    }
    Ok(())
}

pub fn show_options(ctx: &mut Ctx, a: &Args) -> CmdResult {
    show(ctx, a, false)
}

pub fn show_window_options(ctx: &mut Ctx, a: &Args) -> CmdResult {
    show(ctx, a, true)
}

/// run-shell: the command by the shell, its output printed; `-C` runs it
/// as a tmux command instead.
pub fn run_shell(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let Some(command) = a.positional.first() else {
        return Err(Failure::new("no command specified"));
    };
    if a.has('C') {
        return run_tmux_string(ctx, command);
    }
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Failure::new(format!("{command}: {e}")))?;
    if !super::quiet() {
        use std::io::Write;
        let _ = std::io::stdout().write_all(&out.stdout);
    }
    match out.status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(Failure::new(format!("'{command}' returned {code}"))),
        None => Err(Failure::new(format!("'{command}' was killed"))),
    }
}

/// Runs a tmux command string (`a ; b`), as `if-shell` and hooks do.
pub fn run_tmux_string(ctx: &mut Ctx, text: &str) -> CmdResult {
    for words in super::parse::commands(text).map_err(Failure::new)? {
        let (name, rest) = words.split_first().expect("parse drops empty commands");
        super::commands::run(ctx, name, rest)?;
    }
    Ok(())
}

/// if-shell: the first command string if the shell command succeeds (with
/// `-F`, if the format is true), else the second, if given.
pub fn if_shell(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let [condition, then, rest @ ..] = a.positional.as_slice() else {
        return Err(Failure::new(
            "usage: if-shell [-bF] [-t target-pane] shell-command command [command]",
        ));
    };
    let holds = if a.has('F') {
        let at = ctx.find_pane(a.value('t'))?;
        let v = vars::expand(ctx, at, condition)?;
        !v.is_empty() && v != "0"
    } else {
        std::process::Command::new("/bin/sh")
            .args(["-c", condition])
            .stdin(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    match (holds, rest.first()) {
        (true, _) => run_tmux_string(ctx, then),
        (false, Some(otherwise)) => run_tmux_string(ctx, otherwise),
        (false, None) => Ok(()),
    }
}
