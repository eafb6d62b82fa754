//! What `new` and `run` share: the options that describe a pane (the
//! `pane_spec_options!` of the table), read into a `pane.create` request.

use super::CliError;
use super::args::Parsed;
use crate::client;
use crate::model::Direction;
use crate::protocol::methods;
use serde_json::json;
use std::collections::BTreeMap;

/// `COLSxROWS`.
pub fn parse_size(s: &str) -> Result<(u32, u32), CliError> {
    let bad = || CliError::usage(format!("size {s:?} must look like COLSxROWS, e.g. 120x40"));
    let (c, r) = s.split_once('x').ok_or_else(bad)?;
    Ok((c.parse().map_err(|_| bad())?, r.parse().map_err(|_| bad())?))
}

fn parse_env(s: &str) -> Result<(String, String), CliError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(CliError::usage(format!(
            "environment entry {s:?} must look like NAME=VALUE"
        ))),
    }
}

fn ratio(r: &str) -> Result<f32, CliError> {
    r.parse()
        .map_err(|_| CliError::usage(format!("--ratio takes a number in (0, 1), got {r:?}")))
}

fn restore_policy(r: &str) -> Result<crate::model::RestorePolicy, CliError> {
    serde_json::from_value(json!(r))
        .map_err(|_| CliError::usage(format!("--restore takes rerun, shell or hold, got {r:?}")))
}

/// The pane `new` or `run` describes, not attached; `argv` is the command
/// line after the options (empty for a shell).
pub fn params(a: &Parsed) -> Result<methods::PaneCreate, CliError> {
    let mut env = BTreeMap::new();
    for entry in a.values("env")? {
        let (k, v) = parse_env(&entry)?;
        env.insert(k, v);
    }
    let cwd = match a.value("cwd")? {
        Some(dir) => std::path::absolute(&dir)
            .map_err(|e| CliError::usage(format!("cwd {dir:?}: {e}")))?
            .to_string_lossy()
            .into_owned(),
        None => std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".to_string()),
    };
    let (cols, rows) = a
        .value_as("size", parse_size)?
        .or_else(|| client::terminal_size(&std::io::stdout()).map(|(c, r)| (c.into(), r.into())))
        .unwrap_or((80, 24));
    let (shell, argv) = match (a.value("shell")?, a.argv()) {
        (Some(_), [_, ..]) => {
            return Err(CliError::usage(
                "give either --shell STR or -- ARGV..., not both",
            ));
        }
        (Some(shell), []) => (Some(shell), None),
        (None, []) => (None, None),
        (None, argv) => (None, Some(argv.to_vec())),
    };
    // The server clamps sizes to what a terminal can be; u16 only has
    // to hold what the user typed.
    let clamp = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
    Ok(methods::PaneCreate {
        name: a.value("name")?,
        argv,
        shell,
        cwd: Some(cwd),
        env,
        client_env: Some(crate::environment::of_this_process().map_err(CliError::usage)?),
        cols: Some(clamp(cols)),
        rows: Some(clamp(rows)),
        timeout_ms: a.millis("timeout")?,
        idle_timeout_ms: a.millis("idle-timeout")?,
        attach: false,
        read_only: false,
        alt_screen: false,
        when_behind: methods::WhenBehind::Pause,
        restore: a.value_as("restore", restore_policy)?,
        resume: a.value("resume")?,
        workspace: a.value("workspace")?,
        tab_name: a.value("tab-name")?,
        split: a.value("split")?,
        direction: a.flag("vertical").then_some(Direction::Vertical),
        ratio: a.value_as("ratio", ratio)?,
        shell_integration: a.flag("no-shell-integration").then_some(false),
    })
}
