//! The user's configuration file, `$XDG_CONFIG_HOME/ptyd/config.toml` (else
//! `~/.config/ptyd/config.toml`), documented key by key in docs/config.md.
//! Every key is optional:
//!
//! ```toml
//! scrollback_lines = 10000
//! scrollback_bytes = 16777216
//! autostart = true
//! shell_integration = true
//!
//! [[resume_rules]]
//! program = "myagent"
//! resume = "myagent --continue"
//! ```
//!
//! Each key stands alone: an unknown key, a value of the wrong type or out
//! of range, a broken resume rule, even a syntax error, is reported with
//! the file, line and key, and only that key falls back to its default
//! (the parser recovers past syntax errors, so the rest still applies). The
//! server always starts; problems go to its log, `ptyd status`, and
//! `ptyd config check` finds them before any server reads the file.
//!
//! It is read when a server starts, so an edit takes effect for panes
//! created after `ptyd upgrade` (or a restart); existing panes keep the
//! limits they were created with (they travel with their screens).
//!
//! `config.json`, the earlier format, is still read when no config.toml
//! exists, with a deprecation notice among the problems: nothing is
//! migrated behind the user's back.

use super::resume_rules::{ResumeRules, Rule};
use crate::persist::files::{self, FileError};
use crate::term::TermConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeValue, ValueDeserializer};

/// Most scrollback lines a pane may keep.
pub const MAX_SCROLLBACK_LINES: usize = 1_000_000;
/// Most scrollback bytes a pane may keep.
pub const MAX_SCROLLBACK_BYTES: usize = 1 << 30;

/// The keys the file may hold.
pub const KEYS: &[&str] = &[
    "scrollback_lines",
    "scrollback_bytes",
    "resume_rules",
    "autostart",
    "shell_integration",
];

/// What the server (and, for `autostart`, the client) uses from the file.
#[derive(Debug, Clone)]
pub struct UserConfig {
    pub resume_rules: ResumeRules,
    /// For new panes' terminal models.
    pub term: TermConfig,
    /// Client commands start a background server when none runs.
    pub autostart: bool,
    /// Inject shell integration into the shells panes start (`crate::shell`).
    pub shell_integration: bool,
}

impl Default for UserConfig {
    fn default() -> UserConfig {
        UserConfig {
            resume_rules: ResumeRules::default(),
            term: TermConfig::default(),
            autostart: true,
            shell_integration: true,
        }
    }
}

fn config_dir() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if Path::new(&dir).is_absolute() => Some(PathBuf::from(dir).join("ptyd")),
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/ptyd")),
    }
}

/// Where the configuration file is looked for.
pub fn path() -> Option<PathBuf> {
    config_dir().map(|d| d.join("config.toml"))
}

/// The deprecated JSON file, read only when there is no config.toml.
fn json_path() -> Option<PathBuf> {
    config_dir().map(|d| d.join("config.json"))
}

/// Largest config file read: a real one is a few hundred bytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Loads the user's file; the strings say what was ignored and why. A file
/// (or config directory) we may not trust is not read at all: it can hold
/// resume rules, which are commands.
pub fn load() -> (UserConfig, Vec<String>) {
    if let Some(dir) = config_dir()
        && let Err(FileError::Refused(why)) = files::check_dir(&dir)
    {
        return (
            UserConfig::default(),
            vec![format!("{why}; using defaults")],
        );
    }
    for path in [path(), json_path()].into_iter().flatten() {
        match read_text(&path) {
            Ok(text) => return parse(&path, &text),
            Err(FileError::Missing) => continue,
            Err(e) => {
                return (UserConfig::default(), vec![format!("{e}; using defaults")]);
            }
        }
    }
    (UserConfig::default(), Vec::new())
}

/// Reads and parses `path` (`ptyd config check`), with the same checks the
/// server makes.
pub fn check(path: &Path) -> Result<(UserConfig, Vec<String>), String> {
    let text = read_text(path).map_err(|e| match e {
        FileError::Missing => format!("reading {}: no such file", path.display()),
        FileError::Refused(why) => why,
    })?;
    Ok(parse(path, &text))
}

/// The file's text through the trusted-file checks (owner, mode, a regular
/// file, at most [`MAX_CONFIG_BYTES`]).
fn read_text(path: &Path) -> Result<String, FileError> {
    let bytes = files::read_trusted(path, MAX_CONFIG_BYTES)?;
    String::from_utf8(bytes)
        .map_err(|e| FileError::Refused(format!("reading {}: not UTF-8 ({e})", path.display())))
}

/// Parses a file's text: TOML, or the deprecated JSON for `*.json`.
pub fn parse(path: &Path, text: &str) -> (UserConfig, Vec<String>) {
    if path.extension().is_some_and(|e| e == "json") {
        let (config, mut problems) = parse_json(path, text);
        problems.insert(
            0,
            format!(
                "{}: config.json is deprecated and read only while no config.toml exists; \
                 move its settings to {} (docs/config.md)",
                path.display(),
                path.with_extension("toml").display()
            ),
        );
        return (config, problems);
    }
    let mut problems = Vec::new();
    let at = |span: std::ops::Range<usize>| {
        let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
        format!("{}:{line}", path.display())
    };
    let (table, errors) = toml::de::DeTable::parse_recoverable(text);
    for e in &errors {
        let place = e.span().map_or_else(|| path.display().to_string(), &at);
        problems.push(format!(
            "{place}: not valid TOML ({}); what it spoils is ignored",
            e.message().trim()
        ));
    }
    let mut config = UserConfig::default();
    // In file order, so problems read top to bottom.
    let mut entries: Vec<_> = table.into_inner().into_iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    for (key, value) in entries {
        let place = at(key.span());
        let name = key.into_inner();
        match name.as_ref() {
            "scrollback_lines" => limit(
                &mut problems,
                &place,
                "scrollback_lines",
                value,
                MAX_SCROLLBACK_LINES,
                &mut config.term.scrollback_lines,
            ),
            "scrollback_bytes" => limit(
                &mut problems,
                &place,
                "scrollback_bytes",
                value,
                MAX_SCROLLBACK_BYTES,
                &mut config.term.scrollback_bytes,
            ),
            "resume_rules" => {
                let rules = resume_rules(&mut problems, &at, &place, value);
                config.resume_rules = ResumeRules::new(rules);
            }
            "autostart" => match bool::deserialize(ValueDeserializer::from(value)) {
                Ok(v) => config.autostart = v,
                Err(e) => problems.push(format!(
                    "{place}: autostart must be true or false ({}); using the default true",
                    e.message().trim()
                )),
            },
            "shell_integration" => match bool::deserialize(ValueDeserializer::from(value)) {
                Ok(v) => config.shell_integration = v,
                Err(e) => problems.push(format!(
                    "{place}: shell_integration must be true or false ({}); using the default true",
                    e.message().trim()
                )),
            },
            other => problems.push(format!(
                "{place}: unknown key {other:?} ignored; known keys: {}",
                KEYS.join(", ")
            )),
        }
    }
    (config, problems)
}

/// Takes a whole number up to `max` into `slot`, else reports and leaves
/// the default there.
fn limit(
    problems: &mut Vec<String>,
    place: &str,
    key: &str,
    value: Spanned<DeValue<'_>>,
    max: usize,
    slot: &mut usize,
) {
    match usize::deserialize(ValueDeserializer::from(value)) {
        Ok(v) if v <= max => *slot = v,
        Ok(v) => problems.push(format!(
            "{place}: {key} = {v} is more than the maximum {max}; using the default {slot}"
        )),
        Err(e) => problems.push(format!(
            "{place}: {key} must be a whole number from 0 to {max} ({}); using the default {slot}",
            e.message().trim()
        )),
    }
}

/// The rules of an array of tables; a broken rule is reported and skipped,
/// the others kept.
fn resume_rules(
    problems: &mut Vec<String>,
    at: &dyn Fn(std::ops::Range<usize>) -> String,
    place: &str,
    value: Spanned<DeValue<'_>>,
) -> Vec<Rule> {
    let DeValue::Array(items) = value.into_inner() else {
        problems.push(format!(
            "{place}: resume_rules must be an array of tables ([[resume_rules]] with program \
             and resume); using none"
        ));
        return Vec::new();
    };
    let mut rules = Vec::new();
    for item in items {
        let item_place = at(item.span());
        match Rule::deserialize(ValueDeserializer::from(item)) {
            Ok(rule) => rules.push(rule),
            Err(e) => problems.push(format!(
                "{item_place}: resume rule ignored ({}); a rule has program = \"NAME\" and \
                 resume = \"COMMAND\"",
                e.message().trim()
            )),
        }
    }
    rules
}

/// The deprecated format, key by key like TOML (without line numbers).
fn parse_json(path: &Path, text: &str) -> (UserConfig, Vec<String>) {
    let mut config = UserConfig::default();
    let mut problems = Vec::new();
    let object = match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
        Ok(o) => o,
        Err(e) => {
            problems.push(format!("{}: {e}; using defaults", path.display()));
            return (config, problems);
        }
    };
    let place = path.display().to_string();
    for (key, value) in object {
        let number = |max: usize| value.as_u64().map(|v| v as usize).filter(|v| *v <= max);
        match key.as_str() {
            "scrollback_lines" => match number(MAX_SCROLLBACK_LINES) {
                Some(v) => config.term.scrollback_lines = v,
                None => problems.push(format!("{place}: bad scrollback_lines; using the default")),
            },
            "scrollback_bytes" => match number(MAX_SCROLLBACK_BYTES) {
                Some(v) => config.term.scrollback_bytes = v,
                None => problems.push(format!("{place}: bad scrollback_bytes; using the default")),
            },
            "resume_rules" => match serde_json::from_value::<Vec<Rule>>(value) {
                Ok(rules) => config.resume_rules = ResumeRules::new(rules),
                Err(e) => problems.push(format!("{place}: resume_rules ignored ({e})")),
            },
            other => problems.push(format!("{place}: unknown key {other:?} ignored")),
        }
    }
    (config, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bad_key_leaves_the_others_in_force() {
        let text = "\
scrollback_lines = 500
scrollback_bytes = \"lots\"
colour = true

[[resume_rules]]
program = \"myagent\"
resume = \"myagent --continue\"

[[resume_rules]]
program = \"broken\"
";
        let (config, problems) = parse(Path::new("c.toml"), text);
        assert_eq!(config.term.scrollback_lines, 500);
        assert_eq!(
            config.term.scrollback_bytes,
            TermConfig::default().scrollback_bytes
        );
        let argv = crate::model::CommandSpec::Argv(vec!["myagent".into()]);
        assert_eq!(
            config.resume_rules.resume_for(&argv).as_deref(),
            Some("myagent --continue")
        );
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].starts_with("c.toml:2: scrollback_bytes must be"),
            "{problems:#?}"
        );
        assert!(
            problems[1].starts_with("c.toml:3: unknown key \"colour\""),
            "{problems:#?}"
        );
        assert!(problems[2].starts_with("c.toml:9"), "{problems:#?}");
        assert!(problems[2].contains("resume"), "{problems:#?}");
    }

    #[test]
    fn a_syntax_error_spoils_only_its_line() {
        let (config, problems) = parse(
            Path::new("c.toml"),
            "scrollback_lines = 300\nscrollback_bytes = 12,\n",
        );
        assert_eq!(config.term.scrollback_lines, 300);
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("c.toml:2: not valid TOML")),
            "{problems:#?}"
        );
    }

    #[test]
    fn out_of_range_is_reported_with_the_default() {
        let (config, problems) = parse(Path::new("c.toml"), "scrollback_lines = 2000000\n");
        assert_eq!(
            config.term.scrollback_lines,
            TermConfig::default().scrollback_lines
        );
        assert!(
            problems[0].contains("more than the maximum"),
            "{problems:#?}"
        );
    }

    #[test]
    fn json_is_read_with_a_deprecation_notice() {
        let (config, problems) = parse(
            Path::new("config.json"),
            r#"{"scrollback_lines": 700, "nope": 1}"#,
        );
        assert_eq!(config.term.scrollback_lines, 700);
        assert!(problems[0].contains("deprecated"), "{problems:#?}");
        assert!(problems[1].contains("\"nope\""), "{problems:#?}");
    }
}
