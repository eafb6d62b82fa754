//! A new size for the screen: rows pulled from and pushed to history,
//! lines reflowed into rows.

use super::{Screen, default_tabs};
use crate::term::cell::{Cell, SPACER, Style, WIDE};
use crate::term::grid::Row;
use crate::term::scrollback::LineRef;
use unicode_width::UnicodeWidthChar;

impl Screen {
    /// Resize. A width change on the main screen re-wraps it and its
    /// history first (`reflow.rs`); the alternate screen's rows are
    /// truncated or padded (cut wide characters blanked). Then shrinking
    /// rows removes blank rows below the cursor and pushes top rows into
    /// scrollback (main screen) so the cursor row stays visible; growing
    /// rows pulls lines back from scrollback on the main screen, like xterm.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let cols = cols.max(1);
        let rows = rows.max(1);
        let (new_cols, new_rows) = (usize::from(cols), usize::from(rows));
        if new_cols == self.cols && new_rows == self.rows {
            return;
        }
        let reflow = new_cols != self.cols && !self.modes.alt_screen;
        if reflow {
            crate::term::reflow::reflow_main(self, new_cols);
        }
        let keep_wrap = reflow && self.cursor.pending_wrap;
        // Rows to drop from the top of each grid: enough to keep the cursor.
        let shrink = self.rows.saturating_sub(new_rows);
        let cursor_excess = (self.cursor.row + 1).saturating_sub(new_rows);
        let drop_top = cursor_excess.min(shrink);
        let alt = self.modes.alt_screen;
        {
            let Screen {
                main, scrollback, ..
            } = self;
            let main_drop = if alt { 0 } else { drop_top };
            main.resize(cols, rows, main_drop, &mut |row: &Row| {
                scrollback.push_row(row)
            });
        }
        let alt_drop = if alt { drop_top } else { 0 };
        self.alt.resize(cols, rows, alt_drop, &mut |_| {});
        self.cursor.row -= drop_top;
        // Growing on the main screen: bring back history lines above.
        if new_rows > self.rows && !alt {
            let mut pulled = 0;
            while pulled < new_rows - self.rows && self.main_bottom_blank(new_rows, pulled) {
                let Some(line) = self.scrollback.pop_newest() else {
                    break;
                };
                self.main.scroll_down(0, new_rows - 1, 1, Style::DEFAULT);
                line_into_row(line.view(), self.main.row_mut(0));
                pulled += 1;
            }
            self.cursor.row += pulled;
        }
        self.cols = new_cols;
        self.rows = new_rows;
        self.cursor.row = self.cursor.row.min(new_rows - 1);
        self.cursor.col = self.cursor.col.min(new_cols - 1);
        self.cursor.pending_wrap = keep_wrap && self.cursor.col == new_cols - 1;
        self.scroll_top = 0;
        self.scroll_bottom = new_rows - 1;
        self.lr = None;
        let old_tabs = std::mem::take(&mut self.tabs);
        self.tabs = default_tabs(new_cols);
        for (i, t) in old_tabs.into_iter().enumerate().take(new_cols) {
            self.tabs[i] = t;
        }
        for saved in [&mut self.saved_main, &mut self.saved_alt]
            .into_iter()
            .flatten()
        {
            saved.cursor.row = saved.cursor.row.min(new_rows - 1);
            saved.cursor.col = saved.cursor.col.min(new_cols - 1);
        }
    }

    fn main_bottom_blank(&self, rows: usize, pulled: usize) -> bool {
        // Only pull history while the bottom row is empty, so no content
        // gets pushed off the screen by the pull.
        let _ = pulled;
        self.main
            .row(rows - 1)
            .cells
            .iter()
            .all(|c| *c == Cell::BLANK)
    }
}

/// Writes a scrollback line back into a screen row (resize pulls history).
pub fn line_into_row(line: LineRef, row: &mut Row) {
    row.reset(Style::DEFAULT);
    row.wrapped = line.wrapped();
    row.wrap_gap = line.wrap_gap();
    let mut runs = line.runs();
    let mut run = runs.next();
    let mut left = run.map_or(u32::MAX, |r| r.chars);
    let extras = line.extras();
    let mut col = 0;
    for (i, ch) in line.text().chars().enumerate() {
        let style = run.map_or(Style::DEFAULT, |r| r.style);
        let w = ch.width().unwrap_or(0);
        if w > 0 && col + w <= row.cells.len() && !extras.is_empty() {
            let i = i as u32;
            let extra = extras
                .iter()
                .find(|(start, n, _)| i >= *start && i - *start < *n)
                .map(|(_, _, e)| e);
            row.set_extra(col, col + w, extra);
        }
        if w == 0 {
            if col > 0 {
                let target = if col >= 2 && row.cells[col - 1].is_spacer() {
                    col - 2
                } else {
                    col - 1
                };
                row.add_mark(target, ch);
            }
        } else if col + w <= row.cells.len() {
            if w == 2 {
                row.cells[col] = Cell {
                    ch,
                    style: Style {
                        fg: style.fg,
                        bg: style.bg | WIDE,
                    },
                };
                row.cells[col + 1] = Cell {
                    ch: ' ',
                    style: Style {
                        fg: style.fg,
                        bg: style.bg | SPACER,
                    },
                };
            } else {
                row.cells[col] = Cell { ch, style };
            }
            col += w;
        }
        left = left.saturating_sub(1);
        if left == 0 {
            run = runs.next();
            left = run.map_or(u32::MAX, |r| r.chars);
        }
    }
}
