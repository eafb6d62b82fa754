//! The user's configuration file, `$XDG_CONFIG_HOME/ptyd/config.json` (else
//! `~/.config/ptyd/config.json`). Every key is optional:
//!
//! ```json
//! {
//!   "scrollback_lines": 10000,
//!   "scrollback_bytes": 16777216,
//!   "shell_integration": true,
//!   "resume_rules": [ { "program": "myagent", "resume": "myagent --continue" } ]
//! }
//! ```
//!
//! It is read when a server starts, so an edit takes effect for panes
//! created after `ptyd upgrade` (or a restart); existing panes keep the
//! limits they were created with (they travel with their screens). A file
//! that cannot be read or parsed, or a value out of range, is reported (in
//! the diagnostics log and `ptyd status --json`) and that part falls back
//! to the default: the server always starts.

use super::resume_rules::{ResumeRules, Rule};
use crate::term::TermConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Most scrollback lines a pane may keep.
pub const MAX_SCROLLBACK_LINES: usize = 1_000_000;
/// Most scrollback bytes a pane may keep.
pub const MAX_SCROLLBACK_BYTES: usize = 1 << 30;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    resume_rules: Vec<Rule>,
    scrollback_lines: Option<usize>,
    scrollback_bytes: Option<usize>,
    shell_integration: Option<bool>,
}

/// What the server uses from the file.
#[derive(Debug, Clone)]
pub struct UserConfig {
    pub resume_rules: ResumeRules,
    /// For new panes' terminal models.
    pub term: TermConfig,
    /// Inject shell integration into the shells panes start (default on).
    pub shell_integration: bool,
}

impl Default for UserConfig {
    fn default() -> UserConfig {
        UserConfig {
            resume_rules: ResumeRules::default(),
            term: TermConfig::default(),
            shell_integration: true,
        }
    }
}

pub fn path() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if Path::new(&dir).is_absolute() => {
            Some(PathBuf::from(dir).join("ptyd/config.json"))
        }
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/ptyd/config.json")),
    }
}

/// Loads the file; the strings say what was ignored and why.
pub fn load() -> (UserConfig, Vec<String>) {
    let Some(path) = path() else {
        return (UserConfig::default(), Vec::new());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (UserConfig::default(), Vec::new());
        }
        Err(e) => {
            return (
                UserConfig::default(),
                vec![format!("reading {}: {e}; using defaults", path.display())],
            );
        }
    };
    match serde_json::from_str::<File>(&text) {
        Ok(file) => from_file(file, &path),
        Err(e) => (
            UserConfig::default(),
            vec![format!(
                "{} ignored ({e}); using defaults. Known keys: scrollback_lines, scrollback_bytes, resume_rules, shell_integration",
                path.display()
            )],
        ),
    }
}

fn from_file(file: File, path: &Path) -> (UserConfig, Vec<String>) {
    let mut problems = Vec::new();
    let mut term = TermConfig::default();
    let mut limit = |key: &str, value: Option<usize>, max: usize, slot: &mut usize| match value {
        Some(v) if v <= max => *slot = v,
        Some(v) => problems.push(format!(
            "{}: {key} {v} is more than the maximum {max}; using {}",
            path.display(),
            *slot
        )),
        None => {}
    };
    limit(
        "scrollback_lines",
        file.scrollback_lines,
        MAX_SCROLLBACK_LINES,
        &mut term.scrollback_lines,
    );
    limit(
        "scrollback_bytes",
        file.scrollback_bytes,
        MAX_SCROLLBACK_BYTES,
        &mut term.scrollback_bytes,
    );
    (
        UserConfig {
            resume_rules: ResumeRules::new(file.resume_rules),
            term,
            shell_integration: file.shell_integration.unwrap_or(true),
        },
        problems,
    )
}
