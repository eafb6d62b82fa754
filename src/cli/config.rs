//! `ptyd config check [FILE]`: the configuration file's problems, found
//! before any server reads it (`server::config` parses it the same way).

use super::commands::help_requested;
use super::{CliError, help};
use crate::server::config;
use lexopt::prelude::*;
use std::path::PathBuf;

pub fn config_cmd(p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let action = match p.next()? {
        Some(Value(v)) => v.string()?,
        Some(arg) if help_requested(&arg, help::CONFIG) => return Ok(0),
        Some(arg) => return Err(arg.unexpected().into()),
        None => return Err(CliError::usage("config needs an action: check")),
    };
    if action != "check" {
        return Err(CliError::usage(format!(
            "unknown config action {action:?}: use check"
        )));
    }
    let mut file: Option<PathBuf> = None;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::CONFIG) {
            return Ok(0);
        }
        match arg {
            Value(v) if file.is_none() => file = Some(PathBuf::from(v)),
            _ => return Err(arg.unexpected().into()),
        }
    }
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
    Err(CliError::failure(format!(
        "{} problem{} in {} (each falls back to its default; docs/config.md)",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        path.display()
    )))
}
