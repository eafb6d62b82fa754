//! Capture of screen and history lines, like `tmux capture-pane -p [-e]
//! -S start -E end`: line 0 is the first visible row, negative lines are
//! scrollback (-1 the newest). Read-only; clamps any range to what exists.

use serde::{Deserialize, Serialize};

use super::ModeSummary;
use super::cell::PenWriter;
use super::grid::Row;
use super::screen::Screen;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureOptions {
    /// First line; `None` = 0 (top of the screen). Negative = scrollback.
    pub start: Option<i64>,
    /// Last line, inclusive; `None` = the last visible row.
    pub end: Option<i64>,
    /// Include SGR sequences (`-e`).
    pub escapes: bool,
    /// Join each line that autowrap continued with the next one, keeping
    /// the blanks at the joint (`tmux capture-pane -J`).
    #[serde(default)]
    pub join: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorInfo {
    pub row: u16,
    pub col: u16,
    pub visible: bool,
    /// DECSCUSR value, 0 = terminal default.
    pub style: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    pub cols: u16,
    pub rows: u16,
    /// Line number of `lines[0]` (after clamping).
    pub first_line: i64,
    pub lines: Vec<String>,
    /// Per entry of `lines`: it was continued by autowrap, so joining it with
    /// the next one gives the logical line. All false with `join`.
    pub wrapped: Vec<bool>,
    pub cursor: CursorInfo,
    pub modes: ModeSummary,
    pub title: String,
    pub cwd: Option<String>,
}

/// A visible row with SGR sequences, trailing default blanks trimmed.
pub fn row_with_sgr(row: &Row) -> String {
    let cells = &row.cells;
    let end = row.content_end();
    let mut out = Vec::with_capacity(end);
    let mut pen = PenWriter::new();
    for (c, cell) in cells[..end].iter().enumerate() {
        if cell.is_spacer() {
            continue;
        }
        pen.pen(&mut out, cell.style.pen_part(), row.extra_at(c));
        let mut b = [0u8; 4];
        out.extend_from_slice(cell.ch.encode_utf8(&mut b).as_bytes());
        if let Some(m) = row.marks_at(c) {
            out.extend_from_slice(m.as_bytes());
        }
    }
    pen.finish(&mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Display width of a captured line, SGR and OSC sequences skipped.
fn plain_width(text: &str) -> usize {
    use unicode_width::UnicodeWidthChar;
    visible_chars(text).map(|c| c.width().unwrap_or(0)).sum()
}

/// The characters of a captured line, SGR and OSC 8 sequences skipped.
fn visible_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    let mut chars = text.chars();
    std::iter::from_fn(move || {
        loop {
            let c = chars.next()?;
            if c != '\x1b' {
                return Some(c);
            }
            skip_escape(&mut chars);
        }
    })
}

/// Skips one escape sequence after its ESC: `ESC [ ... m` or `ESC ] 8 ; ...
/// ESC \\`, the two kinds `PenWriter` writes.
fn skip_escape(chars: &mut std::str::Chars<'_>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    chars.next();
                    break;
                }
            }
        }
        _ => {}
    }
}

pub fn capture(s: &Screen, opts: &CaptureOptions, modes: ModeSummary) -> Capture {
    let history = s.scrollback.len() as i64;
    let rows = s.rows as i64;
    let start = opts.start.unwrap_or(0).clamp(-history, rows - 1);
    let end = opts.end.unwrap_or(rows - 1).clamp(-history, rows - 1);
    let mut lines: Vec<String> = Vec::new();
    let mut wrapped: Vec<bool> = Vec::new();
    // Display width of the previous row, for padding it when joining.
    let mut prev_width = 0;
    let mut prev_gap = false;
    let mut n = start;
    while n <= end {
        let (text, wraps, gap) = if n < 0 {
            match s.scrollback.get((history + n) as usize) {
                Some(line) => {
                    let line = line.view();
                    let text = if opts.escapes {
                        let mut out = Vec::new();
                        line.write_sgr(&mut out);
                        String::from_utf8(out).unwrap_or_default()
                    } else {
                        line.text().trim_end_matches(' ').to_owned()
                    };
                    (text, line.wrapped(), line.wrap_gap())
                }
                None => (String::new(), false, false),
            }
        } else {
            let row = s.grid().row(n as usize);
            let text = if opts.escapes {
                row_with_sgr(row)
            } else {
                row.text()
            };
            (text, row.wrapped, row.has_gap())
        };
        let width = if opts.join { plain_width(&text) } else { 0 };
        match (opts.join, wrapped.last()) {
            (true, Some(true)) => {
                if let Some(last) = lines.last_mut() {
                    // A wrapped line filled the screen's width: blanks
                    // trimmed from its end were text (scrollback trims them
                    // when storing), except the last column left blank when
                    // a wide character wrapped early.
                    let pad = s.cols.saturating_sub(prev_width + usize::from(prev_gap));
                    last.extend(std::iter::repeat_n(' ', pad));
                    last.push_str(&text);
                }
                if let Some(w) = wrapped.last_mut() {
                    *w = wraps;
                }
            }
            _ => {
                lines.push(text);
                wrapped.push(wraps);
            }
        }
        prev_width = width;
        prev_gap = gap;
        n += 1;
    }
    if opts.join {
        // The last line may still say "wrapped" when the range ended inside
        // a logical line; joined output promises whole lines only.
        wrapped.iter_mut().for_each(|w| *w = false);
    }
    Capture {
        cols: s.cols as u16,
        rows: s.rows as u16,
        first_line: start,
        lines,
        wrapped,
        cursor: CursorInfo {
            row: s.cursor.row as u16,
            col: s.cursor.col as u16,
            visible: s.modes.cursor_visible,
            style: s.modes.cursor_style,
        },
        modes,
        title: s.title.clone(),
        cwd: s.cwd.clone(),
    }
}
