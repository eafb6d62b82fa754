//! tmux's command strings (the argument of `set-hook`, `if-shell`,
//! `run-shell`'s commands): words split by blanks, `'single'` quotes taken
//! as they are, `"double"` quotes and bare words with backslash escapes,
//! `;` between commands, `#` to the end of a line a comment. And the way
//! tmux prints a parsed command back: the command's full name, and each
//! argument quoted where it needs it.

/// Splits `text` into commands of words; tmux's message on a bad quote.
pub fn commands(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut out = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err("syntax error: unterminated quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch) => word.push(ch),
                            None => return Err("syntax error: unterminated quote".into()),
                        },
                        Some(ch) => word.push(ch),
                        None => return Err("syntax error: unterminated quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(ch) = chars.next() {
                    word.push(ch);
                }
            }
            '#' if !in_word => {
                for ch in chars.by_ref() {
                    if ch == '\n' {
                        break;
                    }
                }
                out.push(Vec::new());
            }
            ';' | '\n' => {
                if in_word {
                    out.last_mut()
                        .expect("never empty")
                        .push(std::mem::take(&mut word));
                    in_word = false;
                }
                out.push(Vec::new());
            }
            ' ' | '\t' | '\r' => {
                if in_word {
                    out.last_mut()
                        .expect("never empty")
                        .push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            ch => {
                in_word = true;
                word.push(ch);
            }
        }
    }
    if in_word {
        out.last_mut().expect("never empty").push(word);
    }
    out.retain(|c| !c.is_empty());
    Ok(out)
}

/// One argument or value as tmux prints it: bare when it can be, `''`
/// when empty, else in double quotes with `"` and `\` escaped.
pub fn quote(arg: &str) -> String {
    if arg.is_empty() {
        return "''".into();
    }
    let plain = arg
        .chars()
        .all(|c| !c.is_whitespace() && !"\"'\\$;{}#~".contains(c));
    if plain {
        return arg.to_string();
    }
    let mut out = String::from("\"");
    for c in arg.chars() {
        if "\"\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tmux::words;

    #[test]
    fn words_quotes_and_separators() {
        assert_eq!(
            commands("set -g status-left 'a b' ; run \"echo \\\"x\\\"\"").unwrap(),
            vec![
                words(&["set", "-g", "status-left", "a b"]),
                words(&["run", "echo \"x\""])
            ]
        );
        assert_eq!(
            commands("a\\ b c # comment\nd").unwrap(),
            vec![words(&["a b", "c"]), words(&["d"])]
        );
        assert!(commands("display 'open").is_err());
    }

    #[test]
    fn arguments_are_quoted_only_where_needed() {
        assert_eq!(quote("bg=red"), "bg=red");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("say \"$x\""), "\"say \\\"$x\\\"\"");
        assert_eq!(quote(""), "''");
    }
}
