//! Reflow: when the width changes, the main screen and its history are
//! re-wrapped, so a line that autowrap split at 80 columns reads as one line
//! at 120 and splits again at 40, as in tmux and most terminal emulators.
//!
//! Rows chained by their `wrapped` flag form a logical line; each logical
//! line is joined (trailing default blanks dropped, except up to the cursor)
//! and cut again at the new width, carrying styles, combining marks and
//! extras cell by cell. A wide character that would straddle the new edge
//! moves to the next row, leaving a blank, as printing it would have; that
//! blank is dropped again on the next reflow. History is processed one
//! logical line at a time, so memory stays at one line's cells whatever the
//! history holds.
//!
//! The alternate screen is not reflowed (full-screen programs redraw on
//! SIGWINCH anyway); it is truncated or padded by `Screen::resize`.

use unicode_width::UnicodeWidthChar;

use super::cell::{Cell, Extra, Style};
use super::grid::Row;
use super::screen::{Screen, line_into_row};
use super::scrollback::{Line, LineRef, LineScratch};

/// One logical line, joined from the rows that autowrap chained.
#[derive(Default)]
struct Logical {
    cells: Vec<Cell>,
    /// Combining marks and extras by cell offset, in increasing order.
    marks: Vec<(usize, String)>,
    extras: Vec<(usize, Extra)>,
    /// Cursor offset in `cells` (it may lie past the end), and whether it
    /// was in the pending-wrap state.
    cursor: Option<(usize, bool)>,
}

impl Logical {
    /// Appends a row's cells (a wrapped row's all of them but an early-wrap
    /// gap). `cursor` is the cursor's column if it is on this row.
    fn append(&mut self, row: &Row, cursor: Option<(usize, bool)>) {
        let base = self.cells.len();
        let take = if !row.wrapped {
            row.content_end()
        } else if row.has_gap() {
            row.cells.len().saturating_sub(1)
        } else {
            row.cells.len()
        };
        if let Some((col, pending)) = cursor {
            self.cursor = Some((base + col + usize::from(pending), pending));
        }
        self.cells.extend_from_slice(&row.cells[..take]);
        for (col, m) in &row.marks {
            if usize::from(*col) < take {
                self.marks.push((base + usize::from(*col), m.clone()));
            }
        }
        if row.extras.is_some() {
            for col in 0..take {
                if let Some(x) = row.extra_at(col) {
                    self.extras.push((base + col, x.clone()));
                }
            }
        }
    }

    /// Cuts the line into rows of `cols` cells, passing each to `out` with
    /// the cursor's column if it lands there (and its pending-wrap state).
    fn split(&self, cols: usize, out: &mut impl FnMut(Row, Option<(usize, bool)>)) {
        let mut row = Row::new(cols as u16, Style::DEFAULT);
        let mut col = 0;
        let mut cursor_here = None;
        let (mut next_mark, mut next_extra) = (0, 0);
        let cursor_at = self.cursor.map(|(offset, _)| offset);
        let mut i = 0;
        while i < self.cells.len() {
            let cell = self.cells[i];
            let wide = cell.is_wide() && self.cells.get(i + 1).is_some_and(Cell::is_spacer);
            let width = if wide { 2 } else { 1 };
            if width > cols {
                // A wide character in a one-column row cannot be shown.
                i += width;
                continue;
            }
            if col + width > cols {
                row.wrapped = true;
                row.wrap_gap = col < cols;
                out(
                    std::mem::replace(&mut row, Row::new(cols as u16, Style::DEFAULT)),
                    cursor_here.take(),
                );
                col = 0;
            }
            if cursor_at == Some(i) || (wide && cursor_at == Some(i + 1)) {
                cursor_here = Some((col, false));
            }
            // A wide cell without its spacer (or a stray spacer) cannot
            // come from the writers, but a deserialized row may hold one.
            row.cells[col] = if wide {
                cell
            } else if cell.is_spacer() {
                Cell::BLANK
            } else {
                Cell {
                    ch: cell.ch,
                    style: cell.style.pen_part(),
                }
            };
            if wide {
                row.cells[col + 1] = self.cells[i + 1];
            }
            while let Some((at, m)) = self.marks.get(next_mark) {
                if *at >= i + width {
                    break;
                }
                if *at == i {
                    for c in m.chars() {
                        row.add_mark(col, c);
                    }
                }
                next_mark += 1;
            }
            while let Some((at, x)) = self.extras.get(next_extra) {
                if *at >= i + width {
                    break;
                }
                // Entries of skipped cells lie before `i`.
                if let Some(d) = at.checked_sub(i) {
                    row.set_extra(col + d, col + d + 1, Some(x));
                }
                next_extra += 1;
            }
            col += width;
            i += width;
        }
        // The cursor past the text: on the last row if it fits there, in the
        // pending-wrap state if it sat right after text that fills the row,
        // else at the edge.
        if let Some((offset, _)) = self.cursor
            && offset >= self.cells.len()
        {
            let past = offset - self.cells.len();
            cursor_here = Some(if col + past < cols {
                (col + past, false)
            } else {
                (cols - 1, col + past == cols)
            });
        }
        out(row, cursor_here);
    }
}

/// Display width of a history line's text, so a line stored at another
/// width (before a resize, or injected) is rebuilt without being cut.
fn line_width(line: LineRef) -> usize {
    line.text().chars().map(|c| c.width().unwrap_or(0)).sum()
}

pub(super) fn line_to_row(line: LineRef, cols: usize) -> Row {
    let width = line_width(line).max(cols).min(usize::from(u16::MAX));
    let mut row = Row::new(width as u16, Style::DEFAULT);
    line_into_row(line, &mut row);
    row
}

/// Re-wraps the main screen and history of `s` to `new_cols` columns. The
/// screen keeps its row count and the cursor stays on screen; rows that no
/// longer fit above the cursor go to history. `Screen::resize` does the
/// rest (rows, tabs, scroll region) afterwards.
pub fn reflow_main(s: &mut Screen, new_cols: usize) {
    let old_cols = s.cols;
    let cols16 = new_cols as u16;
    let mut screen_rows = s.main.take_rows();
    let mut history = s.scrollback.take_lines();
    // A logical line that reaches the screen is treated as screen content,
    // history part included, so the cursor is never in a line that went to
    // history.
    let mut carried = Vec::new();
    while history.last().is_some_and(|l| l.view().wrapped()) {
        if let Some(line) = history.pop() {
            carried.push(line_to_row(line.view(), old_cols));
        }
    }
    carried.reverse();
    let cursor_row = s.cursor.row + carried.len();
    carried.append(&mut screen_rows);
    let screen_rows = carried;

    // History: one logical line at a time.
    let mut rewrapped = Vec::with_capacity(history.len());
    let mut logical = Logical::default();
    let history = history.into_iter();
    let mut scratch = LineScratch::default();
    for line in history {
        let row = line_to_row(line.view(), old_cols);
        drop(line);
        logical.append(&row, None);
        if !row.wrapped {
            logical.split(new_cols, &mut |row, _| {
                rewrapped.push(Line::from_row_with(&row, &mut scratch));
            });
            logical = Logical::default();
        }
    }
    if !logical.cells.is_empty() {
        logical.split(new_cols, &mut |row, _| {
            rewrapped.push(Line::from_row_with(&row, &mut scratch));
        });
    }
    s.scrollback.restore_lines(rewrapped);

    // Screen: rows up to the cursor or the last with content.
    let used = screen_rows
        .iter()
        .rposition(|r| r.wrapped || r.content_end() > 0)
        .map_or(0, |i| i + 1)
        .max(cursor_row + 1)
        .min(screen_rows.len());
    let mut out_rows: Vec<Row> = Vec::with_capacity(used);
    let mut cursor = (0, 0, false);
    let mut logical = Logical::default();
    for (i, row) in screen_rows.iter().enumerate().take(used) {
        let here = (i == cursor_row).then_some((s.cursor.col, s.cursor.pending_wrap));
        logical.append(row, here);
        if !row.wrapped || i + 1 == used {
            logical.split(new_cols, &mut |row, at| {
                if let Some((col, pending)) = at {
                    cursor = (out_rows.len(), col, pending);
                }
                out_rows.push(row);
            });
            logical = Logical::default();
        }
    }
    let height = s.rows;
    let start = out_rows.len().saturating_sub(height).min(cursor.0);
    for row in out_rows.drain(..start) {
        s.scrollback.push_row(&row);
    }
    out_rows.truncate(height);
    // Narrower text took fewer rows: bring history back down so the cursor
    // stays on the screen row it was on, as the rows above it were.
    let mut cursor_row = cursor.0 - start;
    while cursor_row < s.cursor.row && out_rows.len() < height {
        let Some(line) = s.scrollback.pop_newest() else {
            break;
        };
        let mut row = Row::new(cols16, Style::DEFAULT);
        line_into_row(line.view(), &mut row);
        out_rows.insert(0, row);
        cursor_row += 1;
    }
    while out_rows.len() < height {
        out_rows.push(Row::new(cols16, Style::DEFAULT));
    }
    s.main.set_rows(out_rows, cols16);
    s.cursor.row = cursor_row;
    s.cursor.col = cursor.1.min(new_cols - 1);
    s.cursor.pending_wrap = cursor.2;
}
