//! "Did you mean": the closest command or option name to a mistyped one,
//! from the help table, so a typo costs one glance instead of a trip to
//! `--help`.

use super::help;

/// Edit distance (insertions, deletions, substitutions; a swap of two
/// neighbours counts once, as typos go).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

/// The candidate closest to `typed`, if it is close enough to be a typo
/// (or `typed` is a prefix of exactly one candidate).
pub fn closest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let mut prefixed = candidates
        .iter()
        .filter(|c| typed.len() >= 2 && c.starts_with(typed));
    if let (Some(only), None) = (prefixed.next(), prefixed.next()) {
        return Some(only);
    }
    let limit = match typed.chars().count() {
        0..=2 => 1,
        3..=5 => 2,
        _ => 3,
    };
    candidates
        .into_iter()
        .map(|c| (distance(typed, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// tmux's command names (and the short ones it accepts) with what ptyd
/// calls the same thing: a tmux user's first guess should land.
const TMUX_NAMES: &[(&str, &str)] = &[
    ("new-session", "`ptyd new`"),
    ("new-window", "`ptyd tab new`"),
    ("neww", "`ptyd tab new`"),
    ("splitw", "`ptyd split` (add -v to stack)"),
    ("send-keys", "`ptyd send` (`--keys C-c` for key names)"),
    ("capture-pane", "`ptyd capture`"),
    ("capturep", "`ptyd capture`"),
    ("list-panes", "`ptyd ls`"),
    ("lsp", "`ptyd ls`"),
    ("list-windows", "`ptyd ls`"),
    ("lsw", "`ptyd ls`"),
    ("list-sessions", "`ptyd ls`"),
    (
        "kill-server",
        "`ptyd stop` (`--forget` to end the session for good)",
    ),
    ("kill-session", "`ptyd stop`, or `ptyd workspace rm`"),
    ("kill-window", "`ptyd tab rm`"),
    ("killw", "`ptyd tab rm`"),
    ("kill-pane", "`ptyd kill`, then `ptyd rm`"),
    ("killp", "`ptyd kill`, then `ptyd rm`"),
    ("attach-session", "`ptyd attach`"),
    ("at", "`ptyd attach`"),
    ("detach-client", "`ptyd detach`"),
    ("list-clients", "`ptyd clients`"),
    ("lsc", "`ptyd clients`"),
    ("select-pane", "`ptyd focus`"),
    ("selectp", "`ptyd focus`"),
    ("select-window", "`ptyd tab select`"),
    ("selectw", "`ptyd tab select`"),
    ("rename-window", "`ptyd tab rename`"),
    ("renamew", "`ptyd tab rename`"),
    ("rename-session", "`ptyd workspace rename`"),
    ("resize-pane", "`ptyd resize`, or `ptyd resize-split`"),
    ("resizep", "`ptyd resize`, or `ptyd resize-split`"),
    ("respawn-pane", "`ptyd respawn`"),
    ("respawnp", "`ptyd respawn`"),
    ("swap-pane", "`ptyd swap`"),
    ("swapp", "`ptyd swap`"),
    ("source-file", "`ptyd config reload`"),
    ("source", "`ptyd config reload`"),
];

/// "; did you mean `ptyd attach`?" for an unknown command, "; tmux's
/// send-keys is `ptyd send`" for a tmux command's name, or "".
pub fn command_hint(typed: &str) -> String {
    if let Some((name, ours)) = TMUX_NAMES.iter().find(|(name, _)| *name == typed) {
        return format!("; tmux's {name} is {ours} here");
    }
    let names = help::COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()));
    match closest(typed, names) {
        Some(name) => format!("; did you mean `ptyd {name}`?"),
        None => String::new(),
    }
}

/// For a usage error about an unknown option of `command` (lexopt's
/// "invalid option '--foo'"): the same message with the closest option of
/// the command named, or the message unchanged.
pub fn option_hint(command: &str, message: &str) -> Option<String> {
    let typed = message
        .strip_prefix("invalid option '")?
        .strip_suffix('\'')?;
    let entry = help::command(command)?;
    let known = entry.options.iter().map(|o| o.long);
    let suggestion = match typed.strip_prefix("--") {
        Some(long) => {
            closest(long.split('=').next().unwrap_or(long), known).map(|l| format!("--{l}"))
        }
        None => {
            // A short option: the long one it might have meant.
            let c = typed.strip_prefix('-')?.chars().next()?;
            entry
                .options
                .iter()
                .find(|o| {
                    o.short == Some(c.to_ascii_lowercase())
                        || o.short == Some(c.to_ascii_uppercase())
                })
                .map(|o| help::option_label(o).trim().to_string())
        }
    }?;
    Some(format!(
        "{message} for `ptyd {}`; did you mean {suggestion}? (`ptyd {} --help` lists its options)",
        entry.name, entry.name
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tmux_names_lead_to_commands_ptyd_has() {
        for (name, ours) in super::TMUX_NAMES {
            assert!(
                super::help::command(name).is_none(),
                "{name} is a ptyd command"
            );
            let command = ours
                .strip_prefix("`ptyd ")
                .and_then(|r| r.split([' ', '`']).next())
                .unwrap_or_else(|| panic!("{name}: {ours}"));
            assert!(
                super::help::command(command).is_some(),
                "{name}: no ptyd {command}"
            );
        }
    }

    use super::*;

    #[test]
    fn typos_find_their_word() {
        assert_eq!(distance("attach", "atach"), 1);
        assert_eq!(distance("capture", "catpure"), 1);
        assert_eq!(closest("atach", ["attach", "ls", "new"]), Some("attach"));
        assert_eq!(closest("stauts", ["status", "stop"]), Some("status"));
        assert_eq!(
            closest("resp", ["respawn", "resize", "resume"]),
            Some("respawn")
        );
        assert_eq!(closest("zzzzzz", ["attach", "ls"]), None);
        assert!(command_hint("lst").contains("`ptyd ls`"));
        assert_eq!(command_hint("frobnicate"), "");
    }

    #[test]
    fn unknown_options_name_the_closest() {
        let hint = option_hint("send", "invalid option '--entr'").unwrap();
        assert!(hint.contains("did you mean --enter?"), "{hint}");
        assert!(option_hint("send", "invalid option '--qqqqqqqq'").is_none());
        assert!(option_hint("send", "missing TARGET").is_none());
    }
}
