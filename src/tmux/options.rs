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
}
