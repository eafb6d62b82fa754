//! bind-key, unbind-key, list-keys. The key tables are kept as tmux keeps
//! them (tmux 3.3a's default bindings, `default_keys.txt` as its
//! `list-keys` prints them, and what was bound or unbound since) and shown
//! as tmux shows them, so the tools that bind keys read back what they
//! bound. No key runs them: ptyd's own clients have their own keys
//! (docs/config.md), as hooks are kept and never run (`cmd_hooks`).

use super::args::Args;
use super::options::Store;
use super::{CmdResult, Ctx, Failure, parse};

const DEFAULTS: &str = include_str!("default_keys.txt");

/// A binding: table, key, repeat flag, the command as printed.
#[derive(Debug, Clone, PartialEq)]
struct Binding {
    table: String,
    key: String,
    repeat: bool,
    command: String,
}

fn defaults() -> Vec<Binding> {
    DEFAULTS.lines().filter_map(parse_line).collect()
}

/// One `list-keys` line: `bind-key [-r] -T TABLE KEY COMMAND`.
fn parse_line(line: &str) -> Option<Binding> {
    let rest = line.strip_prefix("bind-key")?.trim_start();
    let (repeat, rest) = match rest.strip_prefix("-r") {
        Some(r) => (true, r.trim_start()),
        None => (false, rest),
    };
    let rest = rest.strip_prefix("-T")?.trim_start();
    let (table, rest) = rest.split_once(' ')?;
    let rest = rest.trim_start();
    let (key, command) = rest.split_once(' ').unwrap_or((rest, ""));
    Some(Binding {
        table: table.to_string(),
        key: key.to_string(),
        repeat,
        command: command.trim_start().to_string(),
    })
}

/// The store's changes: `TABLE KEY` → `-r COMMAND` or ` COMMAND` (bound),
/// empty (unbound).
const OWNER: &str = "keys";

fn tables(store: &Store) -> Vec<Binding> {
    let mut all = defaults();
    for (name, value) in store.owned(OWNER) {
        let Some((table, key)) = name.split_once(' ') else {
            continue;
        };
        let place = all.iter().position(|b| b.table == table && b.key == key);
        if value.is_empty() {
            if let Some(i) = place {
                all.remove(i);
            }
            continue;
        }
        let (repeat, command) = match value.strip_prefix("-r ") {
            Some(c) => (true, c),
            None => (false, value.strip_prefix(' ').unwrap_or(value)),
        };
        let binding = Binding {
            table: table.to_string(),
            key: key.to_string(),
            repeat,
            command: command.to_string(),
        };
        match place {
            Some(i) => all[i] = binding,
            None => {
                // After the table's last binding, tables in name order.
                let at = all
                    .iter()
                    .rposition(|b| b.table.as_str() <= table)
                    .map_or(0, |i| i + 1);
                all.insert(at, binding);
            }
        }
    }
    all
}

fn table_of(a: &Args) -> String {
    if a.has('n') {
        return "root".into();
    }
    a.value('T').unwrap_or("prefix").to_string()
}

fn check_key(key: &str) -> Result<(), Failure> {
    // tmux's key names, plus the mouse and other names its tables use.
    let known = crate::keys::parse(key).is_ok()
        || defaults().iter().any(|b| b.key == key)
        || key.chars().count() == 1;
    if known {
        Ok(())
    } else {
        Err(Failure::new(format!("unknown key: {key}")))
    }
}

pub fn bind(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let Some((key, words)) = a.positional.split_first() else {
        return Err(Failure::new(
            "usage: bind-key [-nr] [-T key-table] [-N note] key [command [argument ...]]",
        ));
    };
    check_key(key)?;
    // One argument is a command string, as tmux reads it; several are
    // the command's words.
    let command = match words {
        [] => String::new(),
        [one] => super::cmd_hooks::canonical(one)?,
        many => {
            let text: Vec<String> = many.iter().map(|w| parse::quote(w)).collect();
            super::cmd_hooks::canonical(&text.join(" "))?
        }
    };
    let mut store = Store::load(&ctx.paths.runtime_dir);
    let flag = if a.has('r') { "-r " } else { " " };
    store.set(
        OWNER,
        &format!("{} {key}", table_of(a)),
        Some(format!("{flag}{command}")),
    );
    store.save().map_err(Failure::new)
}

pub fn unbind(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let table = table_of(a);
    let mut store = Store::load(&ctx.paths.runtime_dir);
    let bound = tables(&store);
    if a.has('a') {
        for b in bound.iter().filter(|b| b.table == table) {
            store.set(OWNER, &format!("{table} {}", b.key), Some(String::new()));
        }
        return store.save().map_err(Failure::new);
    }
    let Some(key) = a.positional.first() else {
        return Err(Failure::new("missing key"));
    };
    if let Err(e) = check_key(key) {
        return if a.has('q') { Ok(()) } else { Err(e) };
    }
    store.set(OWNER, &format!("{table} {key}"), Some(String::new()));
    store.save().map_err(Failure::new)
}

pub fn list(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let store = Store::load(&ctx.paths.runtime_dir);
    let all = tables(&store);
    if let Some(table) = a.value('T') {
        if !all.iter().any(|b| b.table == table) {
            return Err(Failure::new(format!("table {table} doesn't exist")));
        }
    }
    if a.has('N') {
        // tmux lists the bindings' notes; none is kept here.
        return Ok(());
    }
    let shown: Vec<&Binding> = all
        .iter()
        .filter(|b| a.value('T').is_none_or(|t| b.table == t))
        .filter(|b| a.positional.first().is_none_or(|k| b.key == *k))
        .collect();
    let table_width = shown.iter().map(|b| b.table.len()).max().unwrap_or(0);
    let key_width = shown.iter().map(|b| b.key.len()).max().unwrap_or(0);
    let any_repeat = shown.iter().any(|b| b.repeat);
    for b in shown {
        let repeat = match (b.repeat, any_repeat) {
            (true, _) => "-r ",
            (false, true) => "   ",
            (false, false) => "",
        };
        out!(
            "bind-key {repeat}-T {:table_width$} {:key_width$} {}",
            b.table,
            b.key,
            b.command
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_tables_parse() {
        let all = defaults();
        assert_eq!(all.len(), DEFAULTS.lines().count());
        let prefix_c = all
            .iter()
            .find(|b| b.table == "prefix" && b.key == "c")
            .expect("prefix c");
        assert_eq!(prefix_c.command, "new-window");
        assert!(all.iter().any(|b| b.repeat && b.key == "Up"));
    }
}
