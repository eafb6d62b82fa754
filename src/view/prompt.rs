//! The one line editor of the tab view's prompts (a tab's new name, the
//! `:` command line): printable text at the cursor, Backspace, Ctrl-D,
//! Ctrl-U (to the start), Ctrl-K (to the end), Left/Right, Home/End
//! (Ctrl-A/Ctrl-E), and Up/Down through the lines entered before. Keys
//! come by the names `bindings::key_at` gives them.

/// The longest line a prompt takes, in characters: far more than a
/// command line needs, and a bound on what a client can make us hold.
const MAX_CHARS: usize = 1000;
/// Lines kept for Up/Down.
pub const HISTORY: usize = 50;

/// What a prompt is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    RenameTab,
    /// A ptyd command line run against the view (`:`).
    Command,
}

impl Purpose {
    /// What the message line shows before the text.
    pub fn label(self) -> &'static str {
        match self {
            Purpose::RenameTab => "(rename tab) ",
            Purpose::Command => ":",
        }
    }
}

/// A line being typed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Line {
    chars: Vec<char>,
    /// In characters, 0..=len.
    cursor: usize,
    /// Earlier lines, oldest first, and which one Up/Down shows (`None`:
    /// the line being typed, kept in `draft`).
    history: Vec<String>,
    recalled: Option<usize>,
    draft: Vec<char>,
}

/// What a key did to a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Changed (or the cursor moved): draw it again.
    Changed,
    /// Nothing to do for this key.
    Ignored,
    Done(String),
    Cancelled,
}

impl Line {
    /// An empty line with `history` (oldest first) for Up/Down.
    pub fn with_history(history: Vec<String>) -> Line {
        Line {
            history,
            ..Line::default()
        }
    }

    pub fn text(&self) -> String {
        self.chars.iter().collect()
    }

    /// The cursor, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    fn set(&mut self, chars: Vec<char>) {
        self.cursor = chars.len();
        self.chars = chars;
    }

    /// Applies the key named `key`.
    pub fn key(&mut self, key: &str) -> Edit {
        match key {
            "Enter" => return Edit::Done(self.text()),
            "Escape" | "C-c" | "C-g" => return Edit::Cancelled,
            "BSpace" | "C-h" if self.cursor > 0 => {
                self.cursor -= 1;
                self.chars.remove(self.cursor);
            }
            "C-d" if self.cursor < self.chars.len() => {
                self.chars.remove(self.cursor);
            }
            "C-u" => {
                self.chars.drain(..self.cursor);
                self.cursor = 0;
            }
            "C-k" => self.chars.truncate(self.cursor),
            "Left" | "C-b" if self.cursor > 0 => self.cursor -= 1,
            "Right" | "C-f" if self.cursor < self.chars.len() => self.cursor += 1,
            "Home" | "C-a" => self.cursor = 0,
            "End" | "C-e" => self.cursor = self.chars.len(),
            "Up" | "C-p" => {
                let at = match self.recalled {
                    None if self.history.is_empty() => return Edit::Ignored,
                    None => {
                        self.draft = self.chars.clone();
                        self.history.len() - 1
                    }
                    Some(0) => return Edit::Ignored,
                    Some(i) => i - 1,
                };
                self.recalled = Some(at);
                self.set(self.history[at].chars().collect());
            }
            "Down" | "C-n" => match self.recalled {
                None => return Edit::Ignored,
                Some(i) if i + 1 < self.history.len() => {
                    self.recalled = Some(i + 1);
                    self.set(self.history[i + 1].chars().collect());
                }
                Some(_) => {
                    self.recalled = None;
                    let draft = std::mem::take(&mut self.draft);
                    self.set(draft);
                }
            },
            "Space" => self.insert(' '),
            k => {
                let mut cs = k.chars();
                match (cs.next(), cs.next()) {
                    (Some(c), None) if !c.is_control() => self.insert(c),
                    _ => return Edit::Ignored,
                }
            }
        }
        Edit::Changed
    }

    fn insert(&mut self, c: char) {
        if self.chars.len() < MAX_CHARS {
            self.chars.insert(self.cursor, c);
            self.cursor += 1;
        }
    }
}

/// `history` with `line` entered last (once, the oldest dropped past
/// [`HISTORY`]); blank lines are not kept.
pub fn remember(history: &mut Vec<String>, line: &str) {
    if line.trim().is_empty() {
        return;
    }
    history.retain(|l| l != line);
    history.push(line.to_string());
    if history.len() > HISTORY {
        history.remove(0);
    }
}

/// Splits a command line into words as a POSIX shell would, without
/// expansions: blanks separate words; `'...'` keeps everything, `"..."`
/// everything but `\"`, `\\`, `\$` and `` \` ``; `\` outside quotes keeps the
/// next character. An unclosed quote is an error that says so.
pub fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut it = line.chars();
    while let Some(c) = it.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a ' is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('"') => break,
                        Some('\\') => match it.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("a \" is not closed".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("a \" is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = it.next() {
                    word.push(c);
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(line: &mut Line, keys: &[&str]) -> Vec<Edit> {
        keys.iter().map(|k| line.key(k)).collect()
    }

    #[test]
    fn editing_moves_the_cursor_and_cuts_where_it_stands() {
        let mut l = Line::default();
        typed(
            &mut l,
            &["s", "p", "l", "t", "Left", "i", "End", "Space", "-", "v"],
        );
        assert_eq!(l.text(), "split -v");
        typed(&mut l, &["Left", "Left", "C-u"]);
        assert_eq!((l.text().as_str(), l.cursor()), ("-v", 0));
        typed(&mut l, &["Right", "BSpace", "BSpace"]);
        assert_eq!((l.text().as_str(), l.cursor()), ("v", 0));
        // Keys with no meaning here leave the line alone.
        assert_eq!(l.key("F5"), Edit::Ignored);
        assert_eq!(l.key("é"), Edit::Changed);
        assert_eq!(l.key("Enter"), Edit::Done("év".into()));
        assert_eq!(l.key("C-c"), Edit::Cancelled);
    }

    #[test]
    fn up_and_down_walk_the_history_and_come_back_to_the_draft() {
        let mut h = Vec::new();
        remember(&mut h, "split -v");
        remember(&mut h, "kill");
        remember(&mut h, "split -v");
        remember(&mut h, "  ");
        assert_eq!(h, ["kill", "split -v"]);
        let mut l = Line::with_history(h);
        typed(&mut l, &["t", "a"]);
        l.key("Up");
        assert_eq!(l.text(), "split -v");
        l.key("Up");
        assert_eq!(l.text(), "kill");
        assert_eq!(l.key("Up"), Edit::Ignored);
        l.key("Down");
        l.key("Down");
        assert_eq!(l.text(), "ta");
        assert_eq!(l.key("Down"), Edit::Ignored);
    }

    #[test]
    fn words_split_as_a_shell_splits_them() {
        assert_eq!(words("  split  -v ").unwrap(), ["split", "-v"]);
        assert_eq!(
            words(r#"rename 'my pane' "a \"b\"" c\ d"#).unwrap(),
            ["rename", "my pane", "a \"b\"", "c d"]
        );
        assert_eq!(words("x ''").unwrap(), ["x", ""]);
        assert!(words("rename 'open").unwrap_err().contains("not closed"));
    }
}
