//! tmux's argument syntax for one command: getopt-style flags described by
//! a template (`"dc:F:t:"`: `d` a flag, `c`, `F` and `t` take a value),
//! clustered flags (`-dP`), values joined or apart (`-sname`, `-s name`),
//! `--` ending the flags, and positional arguments after the first word
//! that is not a flag. Repeated value flags (`-e A=1 -e B=2`) keep every
//! value, as tmux does.

use std::collections::BTreeMap;

/// One command's parsed arguments.
#[derive(Debug, Default, Clone)]
pub struct Args {
    flags: BTreeMap<char, Vec<Option<String>>>,
    pub positional: Vec<String>,
}

impl Args {
    /// Parses `words` by `template`; the error is tmux's message.
    pub fn parse(template: &str, words: &[String]) -> Result<Args, String> {
        let mut args = Args::default();
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            if word == "--" {
                i += 1;
                break;
            }
            if !word.starts_with('-') || word == "-" {
                break;
            }
            let letters = word[1..].char_indices();
            for (at, letter) in letters {
                let Some(spec) = template.find(letter) else {
                    return Err(format!("unknown flag -{letter}"));
                };
                let takes_value = template[spec + letter.len_utf8()..].starts_with(':');
                if !takes_value {
                    args.flags.entry(letter).or_default().push(None);
                    continue;
                }
                let rest = &word[1 + at + letter.len_utf8()..];
                let value = if !rest.is_empty() {
                    rest.to_string()
                } else {
                    i += 1;
                    match words.get(i) {
                        Some(v) => v.clone(),
                        None => return Err(format!("-{letter} expects an argument")),
                    }
                };
                args.flags.entry(letter).or_default().push(Some(value));
                break;
            }
            i += 1;
        }
        args.positional = words[i..].to_vec();
        Ok(args)
    }

    /// How many times `flag` was given (`-CC` is 2).
    pub fn count(&self, flag: char) -> usize {
        self.flags.get(&flag).map_or(0, Vec::len)
    }

    pub fn has(&self, flag: char) -> bool {
        self.flags.contains_key(&flag)
    }

    /// The last value given for `flag` (tmux keeps the last).
    pub fn value(&self, flag: char) -> Option<&str> {
        self.flags
            .get(&flag)?
            .iter()
            .rev()
            .find_map(|v| v.as_deref())
    }

    /// Every value given for a repeatable flag, in order.
    pub fn values(&self, flag: char) -> Vec<&str> {
        self.flags
            .get(&flag)
            .map(|vs| vs.iter().filter_map(|v| v.as_deref()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tmux::words;

    #[test]
    fn flags_cluster_and_values_join_or_follow() {
        let a = Args::parse(
            "dPs:n:e:",
            &words(&["-dP", "-swork", "-n", "w", "cmd", "-x"]),
        )
        .unwrap();
        assert!(a.has('d') && a.has('P'));
        assert_eq!(a.value('s'), Some("work"));
        assert_eq!(a.value('n'), Some("w"));
        assert_eq!(a.positional, words(&["cmd", "-x"]));
    }

    #[test]
    fn repeated_values_are_kept_and_double_dash_ends_flags() {
        let a = Args::parse("e:", &words(&["-e", "A=1", "-eB=2", "--", "-e"])).unwrap();
        assert_eq!(a.values('e'), vec!["A=1", "B=2"]);
        assert_eq!(a.positional, words(&["-e"]));
    }

    #[test]
    fn unknown_flags_and_missing_values_are_tmux_errors() {
        assert_eq!(
            Args::parse("d", &words(&["-q"])).unwrap_err(),
            "unknown flag -q"
        );
        assert_eq!(
            Args::parse("t:", &words(&["-t"])).unwrap_err(),
            "-t expects an argument"
        );
    }
}
