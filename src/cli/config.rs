//! `ptyd config check [FILE]`: the configuration file's problems, found
//! before any server reads it (`server::config` parses it the same way);
//! `ptyd config reload`: the running server reads it again
//! (`server.config.reload`).

use super::args::Parsed;
use super::{CliError, Global};
use crate::protocol::methods::{NoParams, Request};
use crate::server::config;
use std::path::PathBuf;

pub fn config_cmd(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let mut operands = a.operands()?.into_iter();
    let Some(action) = operands.next() else {
        return Err(CliError::usage("config needs an action: check or reload"));
    };
    match action.as_str() {
        "check" => {
            a.only(&[])?;
            check(operands.next().map(PathBuf::from))
        }
        "reload" => {
            a.at_most(1)?;
            reload(g, a.flag("json"))
        }
        _ => Err(CliError::usage(format!(
            "unknown config action {action:?}: use check or reload"
        ))),
    }
}

/// Problems make the exit status 1 for both actions: the file needs a fix
/// even though everything else in it is in force.
fn problems_error(count: usize, path: &str, rest: &str) -> CliError {
    CliError::failure(format!(
        "{count} problem{} in {path} (each falls back to its default{rest}; docs/config.md)",
        if count == 1 { "" } else { "s" },
    ))
}

fn reload(g: &Global, as_json: bool) -> Result<i32, CliError> {
    // Never starts a server: one started now would read the file anyway.
    let report = crate::client::Client::connect(&g.paths, false)?
        .request(&Request::ServerConfigReload(NoParams {}))?;
    let path = report["path"].as_str().unwrap_or("the config file");
    let problems = report["problems"].as_array().cloned().unwrap_or_default();
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        let changed: Vec<&serde_json::Value> = report["settings"]
            .as_array()
            .map(|s| s.iter().filter(|s| s["changed"] == true).collect())
            .unwrap_or_default();
        if changed.is_empty() {
            println!("reloaded {path}: no setting changed");
        } else {
            println!("reloaded {path}:");
        }
        for s in changed {
            let when = match s["applies"].as_str() {
                Some("now") => "in force now",
                Some("new_panes") => "for panes created from now on; existing panes keep theirs",
                Some("next_attach") => {
                    "for clients that attach from now on; attached clients keep theirs"
                }
                Some("next_restore") => {
                    "at the next restore (reboot, or `ptyd upgrade --mode restore`)"
                }
                _ => "",
            };
            println!(
                "  {} = {} ({when})",
                s["key"].as_str().unwrap_or("?"),
                s["value"]
            );
        }
        for problem in &problems {
            println!("{}", problem.as_str().unwrap_or_default());
        }
    }
    if problems.is_empty() {
        Ok(0)
    } else {
        Err(problems_error(
            problems.len(),
            path,
            ", every other setting is in force",
        ))
    }
}

fn check(file: Option<PathBuf>) -> Result<i32, CliError> {
    let path = match file {
        Some(f) => f,
        None => {
            let toml = config::path().ok_or_else(|| {
                CliError::failure(
                    "neither XDG_CONFIG_HOME nor HOME is set: no config file to check",
                )
            })?;
            let json = toml.with_extension("json");
            if !toml.exists() && json.exists() {
                json
            } else if !toml.exists() {
                println!(
                    "{}: no such file; every setting has its default",
                    toml.display()
                );
                return Ok(0);
            } else {
                toml
            }
        }
    };
    let (_, problems) = config::check(&path).map_err(CliError::failure)?;
    if problems.is_empty() {
        println!("{}: ok", path.display());
        return Ok(0);
    }
    for problem in &problems {
        println!("{problem}");
    }
    Err(problems_error(
        problems.len(),
        &path.display().to_string(),
        "",
    ))
}
