//! tmux options (`set-option`, `show-options`), kept by the front for the
//! tools that set and read them back. The options tmux has are known by
//! name and scope with tmux's defaults (`option_table.rs`); user options (`@name`) are free.
//! Values live in one file in the namespace's runtime directory (0600, in
//! the 0700 directory), so they last as long as tmux's own would, until
//! the machine restarts. `remain-on-exit` is the one ptyd acts on: a pane
//! the front created that exited without it is removed, as tmux closes it.

use super::option_table::OPTIONS;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Server,
    Session,
    Window,
    Pane,
}

pub fn known(name: &str) -> Option<(Scope, &'static str)> {
    let base = name.split('[').next().unwrap_or(name);
    OPTIONS
        .iter()
        .find(|(n, _, _)| n.split('[').next() == Some(base))
        .map(|&(_, s, d)| (s, d))
}

/// The option `name` means, as tmux finds it: a user option (`@name`)
/// or a known name as it is, else the one known option it is a prefix of;
/// tmux's words when it is a prefix of several or of none.
pub fn resolve(name: &str) -> Result<String, String> {
    if name.starts_with('@') || known(name).is_some() {
        return Ok(name.to_string());
    }
    let mut hits = OPTIONS
        .iter()
        .map(|(n, _, _)| n.split('[').next().unwrap_or(n))
        .filter(|n| n.starts_with(name))
        .collect::<Vec<_>>();
    hits.dedup();
    match hits.as_slice() {
        [one] if !name.is_empty() => Ok(one.to_string()),
        [] => Err(format!("invalid option: {name}")),
        _ => Err(format!("ambiguous option: {name}")),
    }
}

/// Every known option of `scope` (window options include pane ones, as
/// tmux shows them).
pub fn all_of(scope: Scope) -> impl Iterator<Item = (&'static str, &'static str)> {
    OPTIONS
        .iter()
        .filter(move |(_, s, _)| *s == scope || (scope == Scope::Window && *s == Scope::Pane))
        .map(|&(n, _, d)| (n, d))
}

/// Whether `synchronize-panes` is on for pane `pane` of window `window`
/// (the pane's own value, else the window's, else the global one).
pub fn synchronized(store: &Store, window: u64, pane: u64) -> bool {
    let name = "synchronize-panes";
    let value = store
        .get(&format!("%{pane}"), name)
        .or_else(|| store.get(&format!("@{window}"), name))
        .or_else(|| store.get("window", name))
        .unwrap_or("off");
    matches!(value, "on" | "yes" | "1")
}

/// Whether `select-pane -d` turned the pane's input off.
pub fn input_off(store: &Store, pane: u64) -> bool {
    store.get("input_off", &format!("%{pane}")).is_some()
}

/// Options whose default is `on` or `off` that take other words too, so
/// they are not plain flags.
const NOT_FLAGS: &[&str] = &[
    "detach-on-destroy",
    "extended-keys",
    "pane-border-status",
    "remain-on-exit",
    "set-clipboard",
    "status",
    "visual-activity",
    "visual-bell",
    "visual-silence",
];

/// Checks a value for a known option as tmux checks it, in tmux's words:
/// flags take on/off/yes/no/1/0, numbers digits, styles tmux's style
/// words (a style holding a format, `#{...}`, is taken as it is).
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let Some((_, default)) = known(name) else {
        return Ok(());
    };
    let base = name.split('[').next().unwrap_or(name);
    if (default == "on" || default == "off") && !NOT_FLAGS.contains(&base) {
        return match value {
            "on" | "off" | "yes" | "no" | "1" | "0" => Ok(()),
            _ => Err(format!("bad value: {value}")),
        };
    }
    let numeric = !default.is_empty() && default.bytes().all(|b| b.is_ascii_digit());
    // main-pane-height and the like take a percentage too; clock-mode-style
    // is a choice of 12 or 24.
    let sized = base.ends_with("-pane-height")
        || base.ends_with("-pane-width")
        || base == "clock-mode-style";
    if numeric && !sized && value.parse::<i64>().is_err() {
        return Err(format!("value is invalid: {value}"));
    }
    let style = base.ends_with("-style") && base != "clock-mode-style";
    if style && !value.contains("#{") && !is_style(value) {
        return Err(format!("invalid style: {value}"));
    }
    Ok(())
}

fn is_style(value: &str) -> bool {
    value
        .split([',', ' '])
        .filter(|t| !t.is_empty())
        .all(style_word)
}

fn style_word(word: &str) -> bool {
    const WORDS: &[&str] = &[
        "default",
        "push-default",
        "pop-default",
        "set-default",
        "nolist",
        "norange",
        "noalign",
        "ignore",
        "noignore",
        "none",
    ];
    const ATTRS: &[&str] = &[
        "acs",
        "bright",
        "bold",
        "dim",
        "underscore",
        "blink",
        "reverse",
        "hidden",
        "italics",
        "overline",
        "strikethrough",
        "double-underscore",
        "curly-underscore",
        "dotted-underscore",
        "dashed-underscore",
    ];
    if WORDS.contains(&word) || ATTRS.contains(&word.strip_prefix("no").unwrap_or(word)) {
        return true;
    }
    let Some((key, v)) = word.split_once('=') else {
        return false;
    };
    match key {
        "fg" | "bg" | "us" | "fill" => is_colour(v),
        "align" => ["left", "centre", "right", "absolute-centre"].contains(&v),
        "list" => ["on", "focus", "left-marker", "right-marker"].contains(&v),
        "range" => !v.is_empty(),
        _ => false,
    }
}

fn is_colour(v: &str) -> bool {
    const NAMES: &[&str] = &[
        "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
    ];
    let v = v.to_ascii_lowercase();
    if ["default", "terminal"].contains(&v.as_str()) {
        return true;
    }
    let base = v
        .strip_prefix("bright")
        .or_else(|| v.strip_suffix("bright"))
        .unwrap_or(&v);
    if NAMES.contains(&base) {
        return true;
    }
    let number = v
        .strip_prefix("colour")
        .or_else(|| v.strip_prefix("color"))
        .unwrap_or(&v);
    if number.parse::<u8>().is_ok() {
        return true;
    }
    v.strip_prefix('#')
        .is_some_and(|h| h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Values set, by owner: `server`, `session` / `window` (the global
/// ones), `$N`, `@N`, `%N`.
#[derive(Debug, Default)]
pub struct Store {
    path: PathBuf,
    values: BTreeMap<String, BTreeMap<String, String>>,
}

const FILE_NAME: &str = "tmux-options.json";

/// Largest options file read: a bound on what a planted file can cost.
const MAX_FILE_BYTES: u64 = 1 << 20;

impl Store {
    pub fn load(runtime_dir: &std::path::Path) -> Store {
        let path = runtime_dir.join(FILE_NAME);
        let values = crate::persist::files::read_trusted(&path, MAX_FILE_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Store { path, values }
    }

    /// Removes the file: every value set is gone.
    pub fn forget(runtime_dir: &std::path::Path) {
        let _ = std::fs::remove_file(runtime_dir.join(FILE_NAME));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_names_resolve_by_unique_prefix() {
        assert_eq!(resolve("history-lim"), Ok("history-limit".to_string()));
        assert_eq!(resolve("@mine"), Ok("@mine".to_string()));
        assert_eq!(
            resolve("default-"),
            Err("ambiguous option: default-".to_string())
        );
        assert_eq!(resolve("nosuch"), Err("invalid option: nosuch".to_string()));
    }

    #[test]
    fn values_are_checked_as_tmux_checks_them() {
        assert_eq!(validate("aggressive-resize", "on"), Ok(()));
        assert_eq!(
            validate("aggressive-resize", "invalid"),
            Err("bad value: invalid".to_string())
        );
        assert_eq!(validate("status", "2"), Ok(()));
        assert_eq!(
            validate("history-limit", "abc"),
            Err("value is invalid: abc".to_string())
        );
        assert_eq!(validate("main-pane-height", "50%"), Ok(()));
        for good in [
            "fg=red,bg=default,bold",
            "fg=colour240,bg=#525252,bold,underscore",
            "fg=#{?pane_in_mode,red,green}",
            "nobold align=centre",
            "fg=brightred",
        ] {
            assert_eq!(validate("status-style", good), Ok(()), "{good}");
        }
        assert_eq!(
            validate("status-style", "invalid-style"),
            Err("invalid style: invalid-style".to_string())
        );
        assert_eq!(validate("@mine", "anything"), Ok(()));
    }
}
