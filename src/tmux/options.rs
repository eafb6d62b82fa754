//! tmux options (`set-option`, `show-options`), kept by the front for the
//! tools that set and read them back. The options tmux has are known by
//! name and scope with tmux's defaults; user options (`@name`) are free.
//! Values live in one file in the namespace's runtime directory (0600, in
//! the 0700 directory), so they last as long as tmux's own would, until
//! the machine restarts. `remain-on-exit` is the one ptyd acts on: a pane
//! the front created that exited without it is removed, as tmux closes it.

use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Server,
    Session,
    Window,
    Pane,
}

/// tmux 3.3's options that tools set, with their scope and default.
const KNOWN: &[(&str, Scope, &str)] = &[
    ("buffer-limit", Scope::Server, "50"),
    ("default-terminal", Scope::Server, "tmux-256color"),
    ("escape-time", Scope::Server, "500"),
    ("exit-empty", Scope::Server, "on"),
    ("exit-unattached", Scope::Server, "off"),
    ("extended-keys", Scope::Server, "off"),
    ("focus-events", Scope::Server, "off"),
    ("history-file", Scope::Server, ""),
    ("message-limit", Scope::Server, "1000"),
    ("set-clipboard", Scope::Server, "external"),
    ("terminal-features", Scope::Server, ""),
    ("terminal-overrides", Scope::Server, ""),
    ("user-keys", Scope::Server, ""),
    ("activity-action", Scope::Session, "other"),
    ("assume-paste-time", Scope::Session, "1"),
    ("base-index", Scope::Session, "0"),
    ("bell-action", Scope::Session, "any"),
    ("default-command", Scope::Session, ""),
    ("default-shell", Scope::Session, "/bin/sh"),
    ("default-size", Scope::Session, "80x24"),
    ("destroy-unattached", Scope::Session, "off"),
    ("detach-on-destroy", Scope::Session, "on"),
    ("display-panes-time", Scope::Session, "1000"),
    ("display-time", Scope::Session, "750"),
    ("history-limit", Scope::Session, "2000"),
    ("key-table", Scope::Session, "root"),
    ("lock-after-time", Scope::Session, "0"),
    ("message-style", Scope::Session, "bg=yellow,fg=black"),
    ("mouse", Scope::Session, "off"),
    ("prefix", Scope::Session, "C-b"),
    ("prefix2", Scope::Session, "None"),
    ("renumber-windows", Scope::Session, "off"),
    ("repeat-time", Scope::Session, "500"),
    ("set-titles", Scope::Session, "off"),
    (
        "set-titles-string",
        Scope::Session,
        "#S:#I:#W - \"#T\" #{session_alerts}",
    ),
    ("silence-action", Scope::Session, "other"),
    ("status", Scope::Session, "on"),
    ("status-interval", Scope::Session, "15"),
    ("status-justify", Scope::Session, "left"),
    ("status-keys", Scope::Session, "emacs"),
    ("status-left", Scope::Session, "[#{session_name}] "),
    ("status-left-length", Scope::Session, "10"),
    ("status-position", Scope::Session, "bottom"),
    (
        "status-right",
        Scope::Session,
        "#{?window_bigger,[#{window_offset_x}#,#{window_offset_y}] ,}\"#{=21:pane_title}\" %H:%M %d-%b-%y",
    ),
    ("status-right-length", Scope::Session, "40"),
    ("status-style", Scope::Session, "bg=green,fg=black"),
    (
        "update-environment",
        Scope::Session,
        "DISPLAY KRB5CCNAME SSH_ASKPASS SSH_AUTH_SOCK SSH_AGENT_PID SSH_CONNECTION WINDOWID XAUTHORITY",
    ),
    ("visual-activity", Scope::Session, "off"),
    ("visual-bell", Scope::Session, "off"),
    ("word-separators", Scope::Session, " "),
    ("aggressive-resize", Scope::Window, "off"),
    ("allow-passthrough", Scope::Pane, "off"),
    ("allow-rename", Scope::Pane, "off"),
    ("alternate-screen", Scope::Pane, "on"),
    ("automatic-rename", Scope::Window, "on"),
    (
        "automatic-rename-format",
        Scope::Window,
        "#{?pane_in_mode,[tmux],#{pane_current_command}}#{?pane_dead,[dead],}",
    ),
    ("clock-mode-style", Scope::Window, "24"),
    ("main-pane-height", Scope::Window, "24"),
    ("main-pane-width", Scope::Window, "80"),
    ("mode-keys", Scope::Window, "emacs"),
    ("monitor-activity", Scope::Window, "off"),
    ("monitor-bell", Scope::Window, "on"),
    ("monitor-silence", Scope::Window, "0"),
    ("other-pane-height", Scope::Window, "0"),
    ("other-pane-width", Scope::Window, "0"),
    ("pane-base-index", Scope::Window, "0"),
    (
        "pane-border-format",
        Scope::Window,
        "#{?pane_active,#[reverse],}#{pane_index}#[default] \"#{pane_title}\"",
    ),
    ("pane-border-status", Scope::Window, "off"),
    ("remain-on-exit", Scope::Pane, "off"),
    ("synchronize-panes", Scope::Pane, "off"),
    ("window-size", Scope::Window, "latest"),
    (
        "window-status-format",
        Scope::Window,
        "#I:#W#{?window_flags,#{window_flags}, }",
    ),
    (
        "window-status-current-format",
        Scope::Window,
        "#I:#W#{?window_flags,#{window_flags}, }",
    ),
    ("wrap-search", Scope::Window, "on"),
];

pub fn known(name: &str) -> Option<(Scope, &'static str)> {
    let base = name.split('[').next().unwrap_or(name);
    KNOWN
        .iter()
        .find(|(n, _, _)| *n == base)
        .map(|&(_, s, d)| (s, d))
}

/// Every known option of `scope` (window options include pane ones, as
/// tmux shows them).
pub fn all_of(scope: Scope) -> impl Iterator<Item = (&'static str, &'static str)> {
    KNOWN
        .iter()
        .filter(move |(_, s, _)| *s == scope || (scope == Scope::Window && *s == Scope::Pane))
        .map(|&(n, _, d)| (n, d))
}

/// Values set, by owner: `server`, `session` / `window` (the global
/// ones), `$N`, `@N`, `%N`.
#[derive(Debug, Default)]
pub struct Store {
    path: PathBuf,
    values: BTreeMap<String, BTreeMap<String, String>>,
}

/// Largest options file read: a bound on what a planted file can cost.
const MAX_FILE_BYTES: u64 = 1 << 20;

impl Store {
    pub fn load(runtime_dir: &std::path::Path) -> Store {
        let path = runtime_dir.join("tmux-options.json");
        let values = crate::persist::files::read_trusted(&path, MAX_FILE_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Store { path, values }
    }

    pub fn get(&self, owner: &str, name: &str) -> Option<&str> {
        self.values.get(owner)?.get(name).map(String::as_str)
    }

    pub fn owned(&self, owner: &str) -> impl Iterator<Item = (&str, &str)> {
        self.values
            .get(owner)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn set(&mut self, owner: &str, name: &str, value: Option<String>) {
        match value {
            Some(v) => {
                self.values
                    .entry(owner.to_string())
                    .or_default()
                    .insert(name.to_string(), v);
            }
            None => {
                if let Some(map) = self.values.get_mut(owner) {
                    map.remove(name);
                }
            }
        }
    }

    pub fn save(&self) -> Result<(), String> {
        let bytes = serde_json::to_vec(&self.values).map_err(|e| e.to_string())?;
        crate::persist::atomic::write_atomic(&self.path, &bytes, false)
            .map_err(|e| format!("saving {}: {e}", self.path.display()))
    }
}
