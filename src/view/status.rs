//! The status line: the workspace, its tabs (number, name, the shown one
//! marked `*`, one with activity `#` or a bell `!` while not shown), and
//! on the right the indicators (prefix pending, read-only, scroll mode, an
//! exited pane) and the focused pane's title or command. A message (an
//! error, a confirmation, a question) takes the whole line while it lasts.

use super::compose::Slot;
use crate::term::{Color, Style};

/// A tab as the status line shows it.
pub struct TabEntry {
    pub number: usize,
    pub name: String,
    pub current: bool,
    pub activity: bool,
    pub bell: bool,
}

/// Everything the status line shows.
pub struct Status {
    pub workspace: String,
    pub tabs: Vec<TabEntry>,
    /// The focused pane's title, else its command.
    pub title: String,
    pub indicators: Vec<String>,
    pub message: Option<String>,
}

fn style(fg: u8, bg: u8) -> Style {
    let mut s = Style::DEFAULT;
    s.set_fg(Color::Indexed(fg));
    s.set_bg(Color::Indexed(bg));
    s
}

/// The bar's colours (tmux's: black on green).
pub fn bar_style() -> Style {
    style(0, 2)
}

fn message_style() -> Style {
    style(0, 3)
}

/// The text of the tab list part: `[ws] 0:name* 1:name`.
pub fn tabs_text(s: &Status) -> String {
    let mut out = format!("[{}]", s.workspace);
    for t in &s.tabs {
        let mark = if t.current {
            "*"
        } else if t.bell {
            "!"
        } else if t.activity {
            "#"
        } else {
            ""
        };
        out.push_str(&format!(" {}:{}{}", t.number, t.name, mark));
    }
    out
}

/// The line, exactly `cols` cells.
pub fn render(s: &Status, cols: u16) -> Vec<Slot> {
    let cols = usize::from(cols);
    if let Some(msg) = &s.message {
        return fill(msg, cols, message_style());
    }
    let left = tabs_text(s);
    let mut right: Vec<String> = s.indicators.iter().map(|i| format!("[{i}]")).collect();
    let title: String = s.title.chars().filter(|c| !c.is_control()).collect();
    if !title.is_empty() {
        right.push(format!("\"{title}\""));
    }
    let right = right.join(" ");
    let lw = unicode_width::UnicodeWidthStr::width(left.as_str());
    let rw = unicode_width::UnicodeWidthStr::width(right.as_str());
    let text = if lw + 1 + rw <= cols {
        format!("{left}{}{right}", " ".repeat(cols - lw - rw))
    } else {
        // The tabs first: the indicators and title give way.
        format!("{left} {right}")
    };
    fill(&text, cols, bar_style())
}

fn fill(text: &str, cols: usize, style: Style) -> Vec<Slot> {
    let mut out = Vec::with_capacity(cols);
    for ch in text.chars() {
        if ch.is_control() {
            continue;
        }
        let w = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if w == 0 {
            continue;
        }
        if out.len() + w > cols {
            break;
        }
        out.push(Slot::new(ch, style));
        if w == 2 {
            out.push(Slot::new('\0', style));
        }
    }
    out.resize(cols, Slot::new(' ', style));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(slots: &[Slot]) -> String {
        slots.iter().map(|s| s.ch).filter(|c| *c != '\0').collect()
    }

    #[test]
    fn tabs_on_the_left_indicators_and_title_on_the_right() {
        let mut s = Status {
            workspace: "main".into(),
            tabs: vec![
                TabEntry {
                    number: 0,
                    name: "sh".into(),
                    current: true,
                    activity: false,
                    bell: false,
                },
                TabEntry {
                    number: 1,
                    name: "build".into(),
                    current: false,
                    activity: true,
                    bell: false,
                },
            ],
            title: "vim\x07".into(),
            indicators: vec!["PREFIX".into()],
            message: None,
        };
        let line = text(&render(&s, 40));
        assert_eq!(line.chars().count(), 40);
        assert!(line.starts_with("[main] 0:sh* 1:build#"), "{line:?}");
        assert!(line.ends_with("[PREFIX] \"vim\""), "{line:?}");
        s.message = Some("no binding for C-\\ q".into());
        assert_eq!(text(&render(&s, 30)).trim_end(), "no binding for C-\\ q");
        // Narrow: cut, never longer than the line.
        assert_eq!(render(&s, 5).len(), 5);
    }
}
