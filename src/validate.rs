//! The rules every name, label, environment and command must meet, wherever
//! it comes from: a request on the socket or a record in a snapshot. One
//! set of rules, so a snapshot cannot bring back what the API refuses (a
//! name carrying escape sequences into `ptyd ls`, a pane named like an id,
//! an argv that cannot be exec'd). Each returns a message naming what is
//! wrong; the API answers it as `invalid_params`, a restore turns it into a
//! repair.

use crate::model::CommandSpec;
use std::collections::BTreeMap;

/// Longest name or label, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Longest `resume` command, in bytes.
pub const MAX_RESUME_BYTES: usize = 4096;

/// A pane or workspace name: a label (below) that does not look like an id,
/// so a target always means one thing.
pub fn name(name: &str) -> Result<(), String> {
    label(name).map_err(|e| format!("name {e}"))?;
    if looks_like_id(name) {
        return Err(format!(
            "name {name:?} looks like an id; pick a name that is not p<number>, w<number>, t<number> or a number"
        ));
    }
    Ok(())
}

/// Whether a target `text` would be read as an id: one `p`, `w` or `t`
/// then decimal digits (what the id parsers take), or a bare number (the
/// typing convenience `resolve_target` accepts). Only one letter: `pp1` or
/// `tt2` is no id, so it is a fine name.
pub fn looks_like_id(text: &str) -> bool {
    let digits = text.strip_prefix(['p', 'w', 't']).unwrap_or(text);
    let is_id = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    is_id || text.parse::<u64>().is_ok()
}

/// A tab name (or the text part of any name): 1-128 bytes of printable
/// characters (no control characters, so no escape sequences, no NUL).
pub fn label(label: &str) -> Result<(), String> {
    if label.is_empty() || label.len() > MAX_NAME_BYTES || label.chars().any(char::is_control) {
        let shown: String = label.chars().take(40).collect();
        let more = if shown.len() < label.len() { "..." } else { "" };
        return Err(format!(
            "{shown:?}{more} ({} bytes) must be 1-{MAX_NAME_BYTES} bytes of printable characters",
            label.len()
        ));
    }
    Ok(())
}

/// `text` as a message may quote it: whole if at most `max` bytes, else
/// its first `max` bytes (to a character boundary) and its length, so a
/// hostile value (a 6 MB cwd in a planted snapshot) cannot make a log line
/// or a reply huge.
pub fn excerpt(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}... ({} bytes)", &text[..end], text.len()))
}

/// Environment variables a pane gets: names non-empty without `=` or NUL,
/// values without NUL (exec could not pass them).
pub fn env(env: &BTreeMap<String, String>) -> Result<(), String> {
    for (key, value) in env {
        env_entry(key, value)?;
    }
    Ok(())
}

/// One environment variable (see [`env`]).
pub fn env_entry(key: &str, value: &str) -> Result<(), String> {
    if key.is_empty() || key.contains('=') || key.contains('\0') {
        return Err(format!(
            "env name {key:?} is not valid (empty, or contains '=' or NUL)"
        ));
    }
    if value.contains('\0') {
        return Err(format!("env value of {key} contains NUL"));
    }
    Ok(())
}

/// A `resume` command: a non-empty shell command without NUL.
pub fn resume(resume: &str) -> Result<(), String> {
    if resume.trim().is_empty() || resume.contains('\0') || resume.len() > MAX_RESUME_BYTES {
        return Err(format!(
            "resume must be a non-empty shell command of at most {MAX_RESUME_BYTES} bytes without NUL"
        ));
    }
    Ok(())
}

/// A command that can be exec'd: an argv with a program, no word holding
/// NUL; a shell command without NUL.
pub fn command(command: &CommandSpec) -> Result<(), String> {
    match command {
        CommandSpec::Argv(argv) => {
            match argv.first() {
                None => return Err("argv is empty; give at least the program".into()),
                Some(program) if program.is_empty() => {
                    return Err("argv[0] is empty; give the program".into());
                }
                Some(_) => {}
            }
            if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
                return Err(format!(
                    "argv[{i}] contains NUL, which no program can receive"
                ));
            }
        }
        CommandSpec::Shell(script) if script.contains('\0') => {
            return Err("shell contains NUL, which no shell can receive".into());
        }
        CommandSpec::Shell(_) | CommandSpec::LoginShell => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_labels_and_commands() {
        assert!(name("work").is_ok());
        for bad in [
            "",
            "p1",
            "w2",
            "t3",
            "42",
            "a\u{1b}[31mred",
            "nul\0",
            &"n".repeat(129),
        ] {
            assert!(name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["pp1", "tt2", "ww3", "pw1", "p", "p1x", "P1", "p+1", "x1"] {
            assert!(name(good).is_ok(), "{good:?} refused: {:?}", name(good));
        }
        assert!(
            name("p007").is_err() && name("+3").is_err(),
            "ids the targets take"
        );
        assert!(label("p1").is_ok(), "a tab may be called p1");
        assert!(label("").is_err() && label("a\0b").is_err());
        let long = name(&"x".repeat(100_000)).unwrap_err();
        assert!(long.len() < 200, "the message repeats the name: {long}");
        assert!(command(&CommandSpec::Argv(vec![])).is_err());
        assert!(command(&CommandSpec::Argv(vec![String::new()])).is_err());
        let nul = command(&CommandSpec::Argv(vec!["echo".into(), "a\0b".into()])).unwrap_err();
        assert!(nul.contains("argv[1]"), "{nul}");
        assert!(command(&CommandSpec::Argv(vec!["echo".into()])).is_ok());
        let mut e = BTreeMap::new();
        e.insert("A=B".to_string(), "x".to_string());
        assert!(env(&e).is_err());
    }
}
