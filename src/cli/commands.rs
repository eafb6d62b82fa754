//! From a command's name to its handler: each command's arguments are
//! parsed from its entry in the table of `help/`, then its handler (in
//! the `cmd_*` file of its group) runs. Also what every handler shares:
//! connecting and printing JSON.

use super::args::{self, Outcome, Parsed};
use super::{CliError, Global, help};
use crate::client::{Client, ErrorKind};
use crate::protocol::methods::{NoParams, Request};
use crate::protocol::replies::PaneList;
use serde_json::Value;

/// What runs a command, once its arguments are parsed.
type Handler = fn(&Global, &Parsed) -> Result<i32, CliError>;

/// Every command's handler, by its name in the table.
const HANDLERS: &[(&str, Handler)] = &[
    ("server", super::cmd_server::server),
    ("new", super::cmd_pane::new),
    ("ls", super::cmd_show::ls),
    ("attach", super::cmd_attach::attach),
    ("clients", super::cmd_attach::clients),
    ("detach", super::cmd_attach::detach),
    ("send", super::scripting::send),
    ("capture", super::cmd_show::capture),
    ("run", super::cmd_pane::run),
    ("wait", super::scripting::wait),
    ("kill", super::cmd_pane::kill),
    ("rm", super::cmd_pane::rm),
    ("resize", super::cmd_pane::resize),
    ("events", super::cmd_raw::events),
    ("status", super::cmd_server::status),
    ("stop", super::cmd_server::stop),
    ("save", super::cmd_server::save),
    ("respawn", super::cmd_pane::respawn),
    ("focus", super::cmd_pane::focus),
    ("resume", super::cmd_pane::resume),
    ("rename", super::cmd_pane::rename),
    ("workspace", super::cmd_tree::workspace),
    ("tab", super::cmd_tree::tab),
    ("split", super::cmd_layout::split),
    ("select-layout", super::cmd_layout::select_layout),
    ("swap", super::cmd_layout::swap),
    ("resize-split", super::cmd_layout::resize_split),
    ("zoom", super::cmd_layout::zoom),
    ("upgrade", super::upgrade::upgrade),
    ("version", super::cmd_server::version),
    ("api", super::cmd_raw::api),
    ("shell-init", super::scripting::shell_init),
    ("service", super::service::service),
    ("config", super::config::config_cmd),
    ("completions", super::completions::completions),
    ("manpage", manpage),
    ("help", help_cmd),
    ("demo", demo),
];

pub fn dispatch(g: &Global, command: &str, p: lexopt::Parser) -> Result<i32, CliError> {
    run_command(g, command, p).map_err(|mut e| {
        // A mistyped option: name the closest one the command has.
        if e.code == 2
            && let Some(hinted) = super::suggest::option_hint(command, &e.message)
        {
            e.message = hinted;
        }
        // A mistyped pane: name the closest pane there is.
        if e.kind == "not_found"
            && let Some(typed) = e
                .message
                .strip_prefix("no pane \"")
                .and_then(|rest| rest.split('"').next())
            && let Some(name) = closest_pane(g, typed)
        {
            e.message = format!("{}; did you mean {name:?}?", e.message);
        }
        e
    })
}

/// The pane name of the running server closest to `typed`, if one is
/// close enough to be a typo (never starts a server). Not ids: `p9` for a
/// removed pane is no typo of `p8`.
fn closest_pane(g: &Global, typed: &str) -> Option<String> {
    let mut client = Client::connect(&g.paths, false).ok()?;
    let panes: PaneList = client.request_as(&Request::PaneList(NoParams {})).ok()?;
    pane_hint(&panes, typed)
}

/// What `closest_pane` suggests from a pane list. A typed id in the wrong
/// case (`P1`) means that id, if the pane exists; anything else shaped
/// like an id gets no name: in a two-character word the one edit a typo
/// may have is the letter that makes it an id (`P1` is no typo of `x1`).
fn pane_hint(panes: &PaneList, typed: &str) -> Option<String> {
    let lower = typed.to_ascii_lowercase();
    if crate::validate::looks_like_id(&lower) {
        let id = lower.parse::<crate::model::PaneId>().ok()?;
        return (lower != typed && panes.panes.iter().any(|p| p.id == id)).then(|| id.to_string());
    }
    let names: Vec<String> = panes.panes.iter().filter_map(|p| p.name.clone()).collect();
    super::suggest::closest(typed, names.iter().map(String::as_str)).map(str::to_string)
}

/// Parses a command's arguments by its table entry, then runs it.
fn run_command(g: &Global, command: &str, mut p: lexopt::Parser) -> Result<i32, CliError> {
    let Some(entry) = help::command(command) else {
        return Err(CliError::usage(format!(
            "unknown command {command:?}{}",
            super::suggest::command_hint(command)
        )));
    };
    let Some((_, run)) = HANDLERS.iter().find(|(name, _)| *name == entry.name) else {
        return Err(CliError::failure(format!(
            "`ptyd {}` has help but no handler",
            entry.name
        )));
    };
    match args::parse(entry, &mut p)? {
        Outcome::Args(a) => run(g, &a),
        Outcome::Help => Ok(0),
    }
}

/// `ptyd help [COMMAND]`: the overview, or a command's help.
fn help_cmd(_: &Global, a: &Parsed) -> Result<i32, CliError> {
    match a.operands()?.first() {
        None => print!("{}", help::MAIN),
        Some(name) => match help::command(name) {
            Some(c) => print!("{}", help::render_command(c)),
            None => {
                return Err(CliError::usage(format!(
                    "no command {name:?}{}",
                    super::suggest::command_hint(name)
                )));
            }
        },
    }
    Ok(0)
}

fn manpage(_: &Global, _: &Parsed) -> Result<i32, CliError> {
    print!("{}", super::manpage::render());
    Ok(0)
}

fn demo(_: &Global, _: &Parsed) -> Result<i32, CliError> {
    super::demo::run()
}

/// Connects for a command about panes, tabs, workspaces or events: when
/// no server runs, one is started in the background, unless the config
/// says `autostart = false` (then the error says how to start one).
pub(super) fn connect(g: &Global) -> Result<Client, CliError> {
    let autostart = crate::server::config::load().0.autostart;
    Client::connect(&g.paths, autostart).map_err(|e| {
        if autostart || e.kind != ErrorKind::NoServer {
            return e.into();
        }
        let ns = &g.paths.namespace;
        let flag = if ns == crate::paths::DEFAULT_NAMESPACE {
            String::new()
        } else {
            format!(" -L {ns}")
        };
        CliError {
            message: format!(
                "no ptyd server runs in namespace {ns:?}, and `autostart = false` in {} keeps \
                 client commands from starting one: start it with `ptyd{flag} server` (or \
                 `ptyd{flag} service install --enable` for systemd)",
                crate::server::config::path()
                    .map_or("the config file".to_string(), |p| p.display().to_string())
            ),
            code: 1,
            kind: "no_server".into(),
        }
    })
}

/// Connects without starting a server: for the commands about the server
/// itself (status, save, stop, upgrade), which have nothing to do on a
/// fresh one.
pub(super) fn connect_existing(g: &Global) -> Result<Client, CliError> {
    Ok(Client::connect(&g.paths, false)?)
}

pub(super) fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_one_handler() {
        for c in help::COMMANDS {
            let n = HANDLERS.iter().filter(|(name, _)| *name == c.name).count();
            assert_eq!(n, 1, "ptyd {}", c.name);
        }
        assert_eq!(HANDLERS.len(), help::COMMANDS.len());
    }
}
