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
//! It is read when a server starts (so at every `ptyd upgrade`) and again
//! at `ptyd config reload` (`server.config.reload`); [`changes`] says, key
//! by key, when a reloaded value takes effect. Existing panes keep the
//! scrollback limits, shell, `TERM` and restore policy they were created
//! with (the limits travel with their screens).
//!
//! `config.json`, the earlier format, is still read when no config.toml
//! exists, with a deprecation notice among the problems: nothing is
//! migrated behind the user's back.

mod parse;

use super::persistence::resume_rules::{ResumeRules, Rule};
use crate::model::RestorePolicy;
use crate::persist::files::{self, FileError};
use crate::term::TermConfig;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;
use toml::de::{DeValue, ValueDeserializer};

/// Most scrollback lines a pane may keep.
pub const MAX_SCROLLBACK_LINES: usize = 1_000_000;
/// Most scrollback bytes a pane may keep.
pub const MAX_SCROLLBACK_BYTES: usize = 1 << 30;

/// `scrollback_total_bytes`: what all panes' histories may hold together
/// (compressed blocks and the uncompressed newest lines, as
/// `Terminal::history_stored_bytes` counts them). Past it the server drops
/// the oldest compressed blocks of the panes holding most
/// (`Server::enforce_history_budget`). The default is an eighth of the
/// machine's memory, at most 2 GiB (1 GiB where the memory is unknown);
/// the floor keeps a typo from leaving no history at all.
pub const SCROLLBACK_TOTAL_BYTES: (usize, usize) = (1 << 20, 1 << 40);

fn default_scrollback_total_bytes() -> usize {
    let ram = crate::sys::physical_memory().unwrap_or(8 << 30);
    (ram / 8).clamp(SCROLLBACK_TOTAL_BYTES.0, 2 << 30)
}

/// The keys the file may hold, in the order `ptyd config reload` lists them.
pub const KEYS: &[&str] = &[
    "scrollback_lines",
    "scrollback_bytes",
    "scrollback_total_bytes",
    "shell",
    "term",
    "restore",
    "shell_integration",
    "resume_rules",
    "autostart",
    "save_debounce_ms",
    "save_max_delay_ms",
    "upgrade_timeout_ms",
    "upgrade_probation_ms",
    "window_size",
    "wait_timeout_ms",
    "detach_key",
    "attach_alt_screen",
    "attach_history",
    "attach_lossless",
    "attach_direct",
    "status",
    "pane_titles",
    "keys",
    "mouse",
    "update_environment",
];

/// The variables `update_environment` names by default: tmux's list, and
/// `WAYLAND_DISPLAY`. Each says where this login's agent, display or
/// ticket is, so a pane started after a new `ssh` or desktop login wants
/// the new value, not the one of the client that created the server.
pub const DEFAULT_UPDATE_ENVIRONMENT: &[&str] = &[
    "DISPLAY",
    "KRB5CCNAME",
    "MSYSTEM",
    "SSH_ASKPASS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "SSH_CONNECTION",
    "WAYLAND_DISPLAY",
    "WINDOWID",
    "XAUTHORITY",
];

/// Most lines `attach_history` may print into a terminal at attach.
pub const MAX_ATTACH_HISTORY: usize = 100_000;

/// Allowed ranges of the millisecond keys: a debounce of 0 saves at once;
/// the floors keep a typo from making saves constant or an upgrade unable
/// to finish, the ceilings keep a change from waiting unsaved for long.
const SAVE_DEBOUNCE_MS: (usize, usize) = (0, 60_000);
const SAVE_MAX_DELAY_MS: (usize, usize) = (100, 600_000);
const UPGRADE_TIMEOUT_MS: (usize, usize) = (1_000, 600_000);
const UPGRADE_PROBATION_MS: (usize, usize) = (100, 60_000);
/// CLI waits: 0 is "no limit"; a day is longer than any wait worth a default.
const WAIT_TIMEOUT_MS: (usize, usize) = (0, 86_400_000);

/// The default timeout of CLI waits (`ptyd wait`, `send --wait`,
/// `send --wait-for`) when `--timeout` is not given.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Which attached clients set a pane's size (tmux's `window-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSize {
    /// The client that attached, typed or resized last.
    #[default]
    Latest,
    /// The smallest columns and rows of the clients that may resize.
    Smallest,
    /// The largest columns and rows of the clients that may resize.
    Largest,
}

/// What the server (and, for `autostart`, the client) uses from the file.
#[derive(Debug, Clone)]
pub struct UserConfig {
    pub resume_rules: ResumeRules,
    /// For new panes' terminal models.
    pub term: TermConfig,
    /// Client commands start a background server when none runs.
    pub autostart: bool,
    /// The shell of new panes (login shell and `--shell` strings); `None`:
    /// `$SHELL`, else the passwd entry's.
    pub shell: Option<PathBuf>,
    /// `TERM` of new panes' processes (a request's env still wins).
    pub term_name: String,
    /// Restore policy of new panes created without one.
    pub restore: RestorePolicy,
    pub save_debounce: Duration,
    pub save_max_delay: Duration,
    /// Deadline for an upgrade before its commit point, unless the request
    /// gives one.
    pub upgrade_timeout: Duration,
    /// How long the old server stays ready to take back after the commit.
    pub upgrade_probation: Duration,
    /// Inject shell integration into the shells panes start (`crate::shell`).
    pub shell_integration: bool,
    /// Which attached clients set a pane's size.
    pub window_size: WindowSize,
    /// The default timeout of CLI waits (read by the client; zero: none).
    pub wait_timeout: Duration,
    /// The attach client's detach (prefix) key, as typed (`C-\\`) and as
    /// its byte.
    pub detach_key: (String, u8),
    /// The attach client keeps the terminal on its alternate screen while
    /// attached, so detaching gives the screen back as it was.
    pub attach_alt_screen: bool,
    /// Lines of history an attach prints into the terminal's scrollback
    /// (when not on the alternate screen).
    pub attach_history: usize,
    /// All panes' history bytes together ([`SCROLLBACK_TOTAL_BYTES`]).
    pub scrollback_total_bytes: usize,
    /// The attach client asks for every byte of output (`when_behind:
    /// pause`: the pane waits for a terminal that falls behind) instead of
    /// a redraw once it has caught up.
    pub attach_lossless: bool,
    /// The attach client passes its terminal to the server, which writes
    /// the pane's output to it directly (Unix; `--no-direct` per attach).
    pub attach_direct: bool,
    /// Where the tab view's status line goes.
    pub status: super::clients::tab_view::StatusPosition,
    /// Where the tab view draws each pane's title (`view/titles.rs`).
    pub pane_titles: crate::view::titles::PaneTitles,
    /// The tab view's keys after the prefix: the defaults with `[keys]`
    /// applied; and `[keys]` as written, for `values`.
    pub bindings: crate::view::bindings::Bindings,
    pub keys: std::collections::BTreeMap<String, String>,
    /// Variables whose values each attaching client refreshes, for the
    /// panes started afterwards without a fresher environment of their own
    /// (`panes/environment.rs`).
    pub update_environment: Vec<String>,
    /// The tab view reports the mouse: a click focuses a pane, reports
    /// reach a program that asked for them.
    pub mouse: bool,
}

impl Default for UserConfig {
    fn default() -> UserConfig {
        UserConfig {
            resume_rules: ResumeRules::default(),
            term: TermConfig::default(),
            autostart: true,
            shell: None,
            term_name: super::defaults::TERM.to_string(),
            restore: RestorePolicy::default(),
            save_debounce: super::persistence::SAVE_DEBOUNCE,
            save_max_delay: super::persistence::SAVE_MAX_DELAY,
            upgrade_timeout: super::continuity::upgrade::DEFAULT_TIMEOUT,
            upgrade_probation: super::continuity::upgrade::PROBATION,
            shell_integration: true,
            window_size: WindowSize::Latest,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            detach_key: ("C-\\".to_string(), 0x1c),
            attach_alt_screen: true,
            attach_history: 3000,
            scrollback_total_bytes: default_scrollback_total_bytes(),
            attach_lossless: false,
            attach_direct: true,
            status: Default::default(),
            pane_titles: Default::default(),
            bindings: Default::default(),
            keys: Default::default(),
            update_environment: DEFAULT_UPDATE_ENVIRONMENT
                .iter()
                .map(|s| s.to_string())
                .collect(),
            mouse: true,
        }
    }
}

/// When a changed setting takes effect after `ptyd config reload`.
fn applies(key: &str) -> &'static str {
    match key {
        // Carried by each pane from its creation.
        "scrollback_lines" | "scrollback_bytes" | "shell" | "term" | "restore" => "new_panes",
        // Looked at when a shell starts: new panes, and respawns.
        "shell_integration" => "new_panes",
        // Used only when a server restores a snapshot.
        "resume_rules" => "next_restore",
        // Each client takes them when it attaches, in every mode (the tab
        // view, a pane alone, direct output): one attached already keeps
        // the prefix it came with.
        "detach_key" | "attach_alt_screen" | "attach_history" | "attach_lossless"
        | "attach_direct" | "update_environment" => "next_attach",
        // Read by every client command from the file itself; the rest are
        // looked up whenever they are needed.
        _ => "now",
    }
}

impl UserConfig {
    /// Every setting's value as JSON, by key (`server.status`, reloads).
    pub fn values(&self) -> serde_json::Map<String, Value> {
        let ms = |d: Duration| json!(d.as_millis() as u64);
        let mut m = serde_json::Map::new();
        m.insert("scrollback_lines".into(), json!(self.term.scrollback_lines));
        m.insert("scrollback_bytes".into(), json!(self.term.scrollback_bytes));
        m.insert(
            "scrollback_total_bytes".into(),
            json!(self.scrollback_total_bytes),
        );
        m.insert("shell".into(), json!(self.shell));
        m.insert("term".into(), json!(self.term_name));
        m.insert("restore".into(), json!(self.restore));
        m.insert("shell_integration".into(), json!(self.shell_integration));
        m.insert("resume_rules".into(), json!(self.resume_rules.user_rules()));
        m.insert("autostart".into(), json!(self.autostart));
        m.insert("save_debounce_ms".into(), ms(self.save_debounce));
        m.insert("save_max_delay_ms".into(), ms(self.save_max_delay));
        m.insert("upgrade_timeout_ms".into(), ms(self.upgrade_timeout));
        m.insert("upgrade_probation_ms".into(), ms(self.upgrade_probation));
        m.insert("window_size".into(), json!(self.window_size));
        m.insert("wait_timeout_ms".into(), ms(self.wait_timeout));
        m.insert("detach_key".into(), json!(self.detach_key.0));
        m.insert("attach_alt_screen".into(), json!(self.attach_alt_screen));
        m.insert("attach_history".into(), json!(self.attach_history));
        m.insert("attach_lossless".into(), json!(self.attach_lossless));
        m.insert("attach_direct".into(), json!(self.attach_direct));
        m.insert("status".into(), json!(self.status));
        m.insert("pane_titles".into(), json!(self.pane_titles));
        m.insert("keys".into(), json!(self.keys));
        m.insert("update_environment".into(), json!(self.update_environment));
        m.insert("mouse".into(), json!(self.mouse));
        m
    }
}

/// Key by key, in [`KEYS`] order: the value now in force, whether a reload
/// from `old` changed it, and when it applies (`now`, `new_panes`, or
/// `next_restore`).
pub fn changes(old: &UserConfig, new: &UserConfig) -> Vec<Value> {
    let (before, after) = (old.values(), new.values());
    KEYS.iter()
        .map(|key| {
            json!({
                "key": key,
                "value": after[*key],
                "changed": before[*key] != after[*key],
                "applies": applies(key),
            })
        })
        .collect()
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
    let (config, problems) = parse::parse_all(path, text);
    (config, bound_problems(problems))
}

/// Problems kept of one read: a file of 100,000 unknown keys would
/// otherwise put as many lines in the log at every start and reload, and
/// a reply of tens of MiB in `server.status`.
pub const MAX_PROBLEMS: usize = 50;

/// The first [`MAX_PROBLEMS`], then how many more there were.
fn bound_problems(mut problems: Vec<String>) -> Vec<String> {
    let total = problems.len();
    if total > MAX_PROBLEMS {
        problems.truncate(MAX_PROBLEMS);
        problems.push(format!(
            "... and {} more problems, not listed",
            total - MAX_PROBLEMS
        ));
    }
    problems
}

impl super::Server {
    /// The `config` part of `server.status`: the file, every
    /// value in force, and the problems of the last read.
    pub(super) fn config_status(&self) -> Value {
        let mut m = self.config.values();
        m.insert("path".into(), json!(path()));
        m.insert(
            "shell_integration_dir".into(),
            json!(self.shell.as_ref().map(|s| s.dir())),
        );
        m.insert("problems".into(), json!(self.config_problems));
        Value::Object(m)
    }

    /// `server.config.reload`: reads the file again and puts what it says
    /// in force (only the keys in question fall back, as at start-up), then
    /// answers and announces (`server.config_reloaded`) the problems and,
    /// per key, whether it changed and when it applies.
    pub(super) fn reload_config(&mut self) -> Value {
        let (config, problems) = load();
        for problem in &problems {
            self.log.log("config_ignored", problem);
        }
        let settings = changes(&self.config, &config);
        let changed: Vec<String> = settings
            .iter()
            .filter(|s| s["changed"] == true)
            .filter_map(|s| s["key"].as_str().map(String::from))
            .collect();
        self.log.log(
            "config_reloaded",
            &format!(
                "{} changed ({}), {} problem(s)",
                changed.len(),
                changed.join(", "),
                problems.len()
            ),
        );
        self.persist.debounce = config.save_debounce;
        self.persist.max_delay = config.save_max_delay;
        self.config = config;
        self.config_problems = problems;
        let report = json!({
            "path": path(),
            "problems": self.config_problems,
            "settings": settings,
        });
        self.emit(crate::protocol::events::Event::ServerConfigReloaded {
            problems: self.config_problems.clone(),
            changed,
        });
        report
    }
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

    /// Fuzzing finding: a rule's `resume` was taken unchecked, so an empty
    /// or NUL-carrying command a pane's own `resume` is refused for ran at
    /// restore (`sh -c ""`, or a spawn failure).
    #[test]
    fn a_rule_with_a_resume_the_api_refuses_is_skipped() {
        let text = "\
[[resume_rules]]
program = \"x\"
resume = \"\"

[[resume_rules]]
program = \"y\"
resume = \"a\\u0000b\"

[[resume_rules]]
program = \"\"
resume = \"z --continue\"

[[resume_rules]]
program = \"ok\"
resume = \"ok --continue\"
";
        let (config, problems) = parse(Path::new("c.toml"), text);
        assert_eq!(config.resume_rules.user_rules().len(), 1, "{problems:#?}");
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].starts_with("c.toml:1: resume rule ignored (resume must be"));
        assert!(problems[2].contains("program is empty"), "{problems:#?}");
        let json = r#"{"resume_rules": [{"program": "x", "resume": " "}]}"#;
        let (config, problems) = parse(Path::new("c.json"), json);
        assert!(config.resume_rules.user_rules().is_empty());
        assert!(
            problems[1].contains("resume_rules ignored (resume must be"),
            "{problems:#?}"
        );
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
    fn durations_and_names_are_checked_against_their_ranges() {
        let (config, problems) = parse(
            Path::new("c.toml"),
            "save_debounce_ms = 0\nupgrade_probation_ms = 50\nterm = \"vt220\"\n\
             restore = \"shell\"\nshell = \"/nonexistent/sh\"\n",
        );
        assert_eq!(config.save_debounce, Duration::ZERO);
        assert_eq!(
            config.upgrade_probation,
            UserConfig::default().upgrade_probation
        );
        assert_eq!(config.term_name, "vt220");
        assert_eq!(config.restore, RestorePolicy::Shell);
        assert_eq!(config.shell, None);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert_eq!(
            problems[0],
            "c.toml:2: upgrade_probation_ms = 50 is less than the minimum 100 \
             (allowed: 100 to 60000); using the default 2000"
        );
        assert!(problems[1].starts_with("c.toml:5: shell"), "{problems:#?}");
    }

    #[test]
    fn changes_name_every_key_and_when_it_applies() {
        let old = UserConfig::default();
        let (new, _) = parse(
            Path::new("c.toml"),
            "scrollback_lines = 5\nautostart = false\n",
        );
        let settings = changes(&old, &new);
        assert_eq!(settings.len(), KEYS.len());
        let changed: Vec<_> = settings
            .iter()
            .filter(|s| s["changed"] == true)
            .map(|s| (s["key"].as_str().unwrap(), s["applies"].as_str().unwrap()))
            .collect();
        assert_eq!(
            changed,
            [("scrollback_lines", "new_panes"), ("autostart", "now")]
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
