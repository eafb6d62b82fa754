//! Reading the file's text, key by key: each key checked for its type and
//! range on its own, a problem naming the file, line and key, and only
//! that key left at its default.

use super::*;

/// The config a file's text sets and every problem found, unbounded
/// ([`parse`] keeps the first [`MAX_PROBLEMS`]).
pub(super) fn parse_all(path: &Path, text: &str) -> (UserConfig, Vec<String>) {
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
    // Where each line starts, found once: counting the newlines before
    // each key made a file of many keys quadratic to read.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let at = |span: std::ops::Range<usize>| {
        let line = line_starts.partition_point(|&start| start <= span.start.min(text.len()));
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
        let mut read = KeyRead {
            config: &mut config,
            problems: &mut problems,
            at: &at,
            place: &place,
        };
        // Each kind of key takes its own and hands the others back.
        let Some(value) = read.number(&name, value) else {
            continue;
        };
        let Some(value) = read.choice(&name, value) else {
            continue;
        };
        if read.text(&name, value).is_some() {
            problems.push(format!(
                "{place}: unknown key {:?} ignored; known keys: {}",
                crate::validate::excerpt(&name, 128),
                KEYS.join(", ")
            ));
        }
    }
    (config, problems)
}

/// One key of the file being read into the config: where it stands, and
/// where its problems go.
struct KeyRead<'r> {
    config: &'r mut UserConfig,
    problems: &'r mut Vec<String>,
    at: &'r dyn Fn(std::ops::Range<usize>) -> String,
    place: &'r str,
}

/// A key's value as the parser left it, with where it stands.
type TomlValue<'t> = Spanned<DeValue<'t>>;

impl KeyRead<'_> {
    /// The keys holding a number in a range; any other is handed back.
    fn number<'t>(&mut self, name: &str, value: TomlValue<'t>) -> Option<TomlValue<'t>> {
        let (problems, place, config) = (&mut *self.problems, self.place, &mut *self.config);
        match name {
            "scrollback_lines" => limit(
                problems,
                place,
                "scrollback_lines",
                value,
                (0, MAX_SCROLLBACK_LINES),
                &mut config.term.scrollback_lines,
            ),
            "scrollback_bytes" => limit(
                problems,
                place,
                "scrollback_bytes",
                value,
                (0, MAX_SCROLLBACK_BYTES),
                &mut config.term.scrollback_bytes,
            ),
            "scrollback_total_bytes" => limit(
                problems,
                place,
                "scrollback_total_bytes",
                value,
                SCROLLBACK_TOTAL_BYTES,
                &mut config.scrollback_total_bytes,
            ),
            "attach_history" => limit(
                problems,
                place,
                "attach_history",
                value,
                (0, MAX_ATTACH_HISTORY),
                &mut config.attach_history,
            ),
            "save_debounce_ms" => millis(
                problems,
                place,
                "save_debounce_ms",
                value,
                SAVE_DEBOUNCE_MS,
                &mut config.save_debounce,
            ),
            "save_max_delay_ms" => millis(
                problems,
                place,
                "save_max_delay_ms",
                value,
                SAVE_MAX_DELAY_MS,
                &mut config.save_max_delay,
            ),
            "upgrade_timeout_ms" => millis(
                problems,
                place,
                "upgrade_timeout_ms",
                value,
                UPGRADE_TIMEOUT_MS,
                &mut config.upgrade_timeout,
            ),
            "upgrade_probation_ms" => millis(
                problems,
                place,
                "upgrade_probation_ms",
                value,
                UPGRADE_PROBATION_MS,
                &mut config.upgrade_probation,
            ),
            "wait_timeout_ms" => millis(
                problems,
                place,
                "wait_timeout_ms",
                value,
                WAIT_TIMEOUT_MS,
                &mut config.wait_timeout,
            ),
            _ => return Some(value),
        }
        None
    }

    /// The keys holding one of a few values (a flag, a policy, a
    /// position); any other is handed back.
    fn choice<'t>(&mut self, name: &str, value: TomlValue<'t>) -> Option<TomlValue<'t>> {
        const FLAG: &str = "true or false";
        let (problems, place, config) = (&mut *self.problems, self.place, &mut *self.config);
        match name {
            "autostart" => one_of(
                problems,
                place,
                "autostart",
                value,
                &mut config.autostart,
                FLAG,
                "true",
            ),
            "shell_integration" => one_of(
                problems,
                place,
                "shell_integration",
                value,
                &mut config.shell_integration,
                FLAG,
                "true",
            ),
            "attach_alt_screen" => one_of(
                problems,
                place,
                "attach_alt_screen",
                value,
                &mut config.attach_alt_screen,
                FLAG,
                "true",
            ),
            "attach_lossless" => one_of(
                problems,
                place,
                "attach_lossless",
                value,
                &mut config.attach_lossless,
                FLAG,
                "false",
            ),
            "attach_direct" => one_of(
                problems,
                place,
                "attach_direct",
                value,
                &mut config.attach_direct,
                FLAG,
                "true",
            ),
            "mouse" => one_of(
                problems,
                place,
                "mouse",
                value,
                &mut config.mouse,
                FLAG,
                "true",
            ),
            _ => return self.policy(name, value),
        }
        None
    }

    /// The keys naming one of a few words; any other is handed back.
    fn policy<'t>(&mut self, name: &str, value: TomlValue<'t>) -> Option<TomlValue<'t>> {
        let (problems, place, config) = (&mut *self.problems, self.place, &mut *self.config);
        match name {
            "restore" => one_of(
                problems,
                place,
                "restore",
                value,
                &mut config.restore,
                "\"hold\", \"rerun\" or \"shell\"",
                "\"hold\"",
            ),
            // tmux spells it `window-size`; both mean the same here.
            "window_size" | "window-size" => one_of(
                problems,
                place,
                "window_size",
                value,
                &mut config.window_size,
                "\"latest\", \"smallest\" or \"largest\"",
                "\"latest\"",
            ),
            "status" => one_of(
                problems,
                place,
                "status",
                value,
                &mut config.status,
                "\"bottom\", \"top\" or \"off\"",
                "\"bottom\"",
            ),
            "pane_titles" => one_of(
                problems,
                place,
                "pane_titles",
                value,
                &mut config.pane_titles,
                "\"off\", \"top\" or \"bottom\"",
                "\"off\"",
            ),
            _ => return Some(value),
        }
        None
    }

    /// The keys holding text, lists and tables checked beyond their type;
    /// any other is handed back.
    fn text<'t>(&mut self, name: &str, value: TomlValue<'t>) -> Option<TomlValue<'t>> {
        let (problems, place, config) = (&mut *self.problems, self.place, &mut *self.config);
        match name {
            "shell" => match String::deserialize(ValueDeserializer::from(value)) {
                Ok(v) if is_executable(Path::new(&v)) => config.shell = Some(PathBuf::from(v)),
                Ok(v) => problems.push(format!(
                    "{place}: shell = {v:?} is not an absolute path to an executable file; \
                     using the default ($SHELL, else your login shell)"
                )),
                Err(e) => problems.push(format!(
                    "{place}: shell must be a string, an absolute path ({}); using the default \
                     ($SHELL, else your login shell)",
                    e.message().trim()
                )),
            },
            "term" => match String::deserialize(ValueDeserializer::from(value)) {
                Ok(v) if is_term_name(&v) => config.term_name = v,
                Ok(v) => problems.push(format!(
                    "{place}: term = {v:?} is not a terminal type name (1-64 letters, digits, \
                     '-', '_', '.', '+'); using the default {:?}",
                    config.term_name
                )),
                Err(e) => problems.push(format!(
                    "{place}: term must be a string ({}); using the default {:?}",
                    e.message().trim(),
                    config.term_name
                )),
            },
            "resume_rules" => {
                let rules = resume_rules(problems, self.at, place, value);
                config.resume_rules = ResumeRules::new(rules);
            }
            // `prefix` is what the tab view calls it; the same key.
            "detach_key" | "prefix" => match String::deserialize(ValueDeserializer::from(value)) {
                Ok(v) => match crate::keys::parse_detach_key(&v) {
                    Ok(byte) => config.detach_key = (v, byte),
                    Err(e) => problems.push(format!("{place}: {e}; using the default C-\\")),
                },
                Err(e) => problems.push(format!(
                    "{place}: detach_key must be a string like \"C-a\" ({}); using the default C-\\",
                    e.message().trim()
                )),
            },
            "keys" => self.keys(value),
            // tmux spells it `update-environment`.
            "update_environment" | "update-environment" => self.update_environment(value),
            _ => return Some(value),
        }
        None
    }

    /// `[keys]`: the bindings, if every one of them is good; else the
    /// defaults and a problem for each bad one.
    fn keys(&mut self, value: TomlValue<'_>) {
        let place = self.place;
        match std::collections::BTreeMap::<String, String>::deserialize(ValueDeserializer::from(
            value,
        )) {
            Ok(keys) => match crate::view::bindings::Bindings::with(&keys) {
                Ok(b) => {
                    self.config.bindings = b;
                    self.config.keys = keys;
                }
                Err(bad) => {
                    for why in bad {
                        self.problems
                            .push(format!("{place}: {why}; the default bindings apply"));
                    }
                }
            },
            Err(e) => self.problems.push(format!(
                "{place}: [keys] must map key names to action names, as `\"|\" = \"split-right\"` \
                 ({}); the default bindings apply",
                e.message().trim()
            )),
        }
    }

    /// `update_environment`: the names, if every one is a variable name;
    /// else the default list.
    fn update_environment(&mut self, value: TomlValue<'_>) {
        let place = self.place;
        match Vec::<String>::deserialize(ValueDeserializer::from(value)) {
            Ok(names) => match names
                .iter()
                .find(|n| crate::validate::env_entry(n, "").is_err())
            {
                Some(bad) => self.problems.push(format!(
                    "{place}: update_environment: {:?} is not a variable name; using \
                     the default list",
                    crate::validate::excerpt(bad, 128)
                )),
                None => self.config.update_environment = names,
            },
            Err(e) => self.problems.push(format!(
                "{place}: update_environment must be a list of variable names like \
                 [\"SSH_AUTH_SOCK\", \"DISPLAY\"] ({}); using the default list",
                e.message().trim()
            )),
        }
    }
}

/// `slot` from `value`, else the problem: `key` must be `must`, and
/// `default` stays.
fn one_of<T: serde::de::DeserializeOwned>(
    problems: &mut Vec<String>,
    place: &str,
    key: &str,
    value: Spanned<DeValue<'_>>,
    slot: &mut T,
    must: &str,
    default: &str,
) {
    match T::deserialize(ValueDeserializer::from(value)) {
        Ok(v) => *slot = v,
        Err(e) => problems.push(format!(
            "{place}: {key} must be {must} ({}); using the default {default}",
            e.message().trim()
        )),
    }
}

/// Takes a whole number within `range` into `slot`, else reports (naming
/// the allowed range) and leaves the default there.
fn limit(
    problems: &mut Vec<String>,
    place: &str,
    key: &str,
    value: Spanned<DeValue<'_>>,
    (min, max): (usize, usize),
    slot: &mut usize,
) {
    match usize::deserialize(ValueDeserializer::from(value)) {
        Ok(v) if (min..=max).contains(&v) => *slot = v,
        Ok(v) => problems.push(format!(
            "{place}: {key} = {v} is {} (allowed: {min} to {max}); using the default {slot}",
            if v > max {
                format!("more than the maximum {max}")
            } else {
                format!("less than the minimum {min}")
            }
        )),
        Err(e) => problems.push(format!(
            "{place}: {key} must be a whole number from {min} to {max} ({}); using the default {slot}",
            e.message().trim()
        )),
    }
}

/// [`limit`] for a duration given in milliseconds.
fn millis(
    problems: &mut Vec<String>,
    place: &str,
    key: &str,
    value: Spanned<DeValue<'_>>,
    range: (usize, usize),
    slot: &mut Duration,
) {
    let mut ms = slot.as_millis() as usize;
    limit(problems, place, key, value, range, &mut ms);
    *slot = Duration::from_millis(ms as u64);
}

/// An absolute path to a file someone may execute (a shell must be run).
fn is_executable(path: &Path) -> bool {
    path.is_absolute()
        && std::fs::metadata(path).is_ok_and(|m| m.is_file() && crate::sys::is_executable(&m))
}

/// What terminfo accepts as a name and is safe in an environment variable.
fn is_term_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b))
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
        let rule = Rule::deserialize(ValueDeserializer::from(item))
            .map_err(|e| e.message().trim().to_string())
            .and_then(checked_rule);
        match rule {
            Ok(rule) => rules.push(rule),
            Err(e) => problems.push(format!(
                "{item_place}: resume rule ignored ({e}); a rule has program = \"NAME\" and \
                 resume = \"COMMAND\""
            )),
        }
    }
    rules
}

/// A rule's `resume` is a command a restore runs: it must pass the rules
/// the API applies to a pane's `resume` (`validate::resume`: not empty, no
/// NUL, bounded), like every command read from disk.
fn checked_rule(rule: Rule) -> Result<Rule, String> {
    if rule.program.is_empty() {
        return Err("program is empty".into());
    }
    crate::validate::resume(&rule.resume)?;
    Ok(rule)
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
            "resume_rules" => match serde_json::from_value::<Vec<Rule>>(value)
                .map_err(|e| e.to_string())
                .and_then(|rules| rules.into_iter().map(checked_rule).collect())
            {
                Ok(rules) => config.resume_rules = ResumeRules::new(rules),
                Err(e) => problems.push(format!("{place}: resume_rules ignored ({e})")),
            },
            other => problems.push(format!("{place}: unknown key {other:?} ignored")),
        }
    }
    (config, problems)
}
