//! What a pane runs and what a reboot does with it: the same words in a
//! `pane.create` request, in a pane's info and in its snapshot record.

use serde::{Deserialize, Serialize};

/// The program a pane runs. `argv` is exec'd exactly as given; `shell` is one
/// string run by `$SHELL -c` (else `/bin/sh -c`). Never both; neither means
/// the user's login shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandSpec {
    Argv(Vec<String>),
    Shell(String),
    LoginShell,
}

/// What to do with a command pane after a reboot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RestorePolicy {
    /// Run the same command again.
    Rerun,
    /// Start the user's shell in its place.
    Shell,
    /// Show it stopped, with its old command, until `ptyd respawn`.
    #[default]
    Hold,
}
