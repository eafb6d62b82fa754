//! Editing the screen in place: inserting and deleting lines and
//! characters, erasing, the margins and the scrolling region.

use super::{Screen, work};

impl Screen {
    /// IL: only inside the margins, which bound the rows it moves.
    pub fn insert_lines(&mut self, n: usize) {
        if !self.in_margins() {
            return;
        }
        let (row, b) = (self.cursor.row, self.scroll_bottom);
        if let Some((left, right)) = self.lr {
            self.scroll_rect(row, b, left, right, n, false);
        } else {
            let fill = self.pen.erase_part();
            self.grid_mut().scroll_down(row, b, n, fill);
        }
        // The column is kept without left/right margins, as alacritty and
        // vt100 do; inside them it goes to the left margin, as in xterm.
        if self.lr.is_some() {
            self.cursor.col = self.left();
        }
        self.cursor.pending_wrap = false;
    }

    pub fn delete_lines(&mut self, n: usize) {
        if !self.in_margins() {
            return;
        }
        let (row, b) = (self.cursor.row, self.scroll_bottom);
        if let Some((left, right)) = self.lr {
            self.scroll_rect(row, b, left, right, n, true);
            self.cursor.col = self.left();
        } else {
            let fill = self.pen.erase_part();
            self.grid_mut().scroll_up(row, b, n, fill, None);
        }
        self.cursor.pending_wrap = false;
    }

    /// Scrolls the rectangle of rows `top..=bottom`, columns
    /// `left..=right` up (or down) by `n`, blanking what it leaves; rows
    /// outside it and cells beside it stay. Nothing goes to scrollback.
    pub fn scroll_rect(
        &mut self,
        top: usize,
        bottom: usize,
        left: usize,
        right: usize,
        n: usize,
        up: bool,
    ) {
        if top > bottom || left > right || bottom >= self.rows || right >= self.cols {
            return;
        }
        let n = n.min(bottom - top + 1);
        let fill = self.pen.erase_part();
        let g = self.grid_mut();
        let moved = bottom - top + 1 - n;
        for i in 0..moved {
            let (to, from) = if up {
                (top + i, top + i + n)
            } else {
                (bottom - i, bottom - i - n)
            };
            work(right - left + 1);
            let cells: Vec<crate::term::cell::Cell> = {
                let src = g.row_mut(from);
                src.split_wide_left(left, fill);
                src.split_wide_right(right + 1, fill);
                src.cells[left..=right].to_vec()
            };
            let dst = g.row_mut(to);
            dst.erase(left, right + 1, fill);
            dst.cells[left..=right].copy_from_slice(&cells);
        }
        for i in 0..n {
            let r = if up { bottom - i } else { top + i };
            work(right - left + 1);
            g.row_mut(r).erase(left, right + 1, fill);
        }
    }

    pub fn erase_in_line(&mut self, from: usize, to: usize) {
        self.erase_in_row(from, to);
        self.cursor.pending_wrap = false;
    }

    /// Erase in line (EL) mode 0, 1 or 2, as xterm does it: only mode 0
    /// (the right part, cursor included) cancels a pending wrap; after
    /// modes 1 and 2 a cursor parked past the last column still wraps
    /// before the next character.
    pub fn erase_line_mode(&mut self, mode: u16) {
        if self.protect_iso {
            // Guarded areas (SPA ... EPA) survive EL, as in xterm.
            return self.selective_erase_line(mode);
        }
        let col = self.cursor.col;
        match mode {
            0 => self.erase_in_line(col, usize::MAX),
            1 => self.erase_in_row(0, col + 1),
            2 => self.erase_in_row(0, usize::MAX),
            _ => {}
        }
    }

    /// Erases columns `from..to` of the cursor's row; the cursor and its
    /// pending wrap are left alone.
    fn erase_in_row(&mut self, from: usize, to: usize) {
        let (row, fill) = (self.cursor.row, self.pen.erase_part());
        let r = self.grid_mut().row_mut(row);
        r.erase(from, to, fill);
        if to >= r.cells.len() {
            r.wrapped = false;
            r.wrap_gap = false;
        }
    }

    /// DECCOLM (`CSI ? 3 h/l`): the width stays (no 132-column switching),
    /// but as on VT100-family terminals (and tmux) the screen is cleared,
    /// the margins reset and the cursor homed.
    pub fn deccolm(&mut self) {
        self.erase_rows(0, usize::MAX);
        self.scroll_top = 0;
        self.scroll_bottom = self.rows - 1;
        self.lr = None;
        self.goto(0, 0);
    }

    pub fn erase_rows(&mut self, from: usize, to: usize) {
        let fill = self.pen.erase_part();
        let g = self.grid_mut();
        for r in from..to.min(g.lines()) {
            g.row_mut(r).reset(fill);
        }
    }

    /// ICH: within the line up to the right margin; nothing outside the
    /// left/right margins.
    pub fn insert_blanks(&mut self, n: usize) {
        let (row, col, fill) = (self.cursor.row, self.cursor.col, self.pen.erase_part());
        if self.in_lr(col) {
            let end = self.right() + 1;
            work(end - col);
            self.grid_mut()
                .row_mut(row)
                .insert_blanks(col, n, end, fill);
        }
        self.cursor.pending_wrap = false;
    }

    /// DCH: as ICH.
    pub fn delete_chars(&mut self, n: usize) {
        let (row, col, fill) = (self.cursor.row, self.cursor.col, self.pen.erase_part());
        if self.in_lr(col) {
            let end = self.right() + 1;
            work(end - col);
            self.grid_mut().row_mut(row).delete_chars(col, n, end, fill);
        }
        self.cursor.pending_wrap = false;
    }

    pub fn erase_chars(&mut self, n: usize) {
        let col = self.cursor.col;
        self.erase_in_line(col, col.saturating_add(n.max(1)));
    }

    /// DECSLRM: left and right margins (1-based, 0 or missing for the
    /// screen's edges), honoured only while DECLRMM is set; homes the
    /// cursor.
    pub fn set_lr_margins(&mut self, left: usize, right: Option<usize>) {
        if !self.modes.lr_margins {
            return;
        }
        let left = left.max(1) - 1;
        let right = right.filter(|&r| r > 0).unwrap_or(self.cols).min(self.cols) - 1;
        if left >= right {
            return;
        }
        self.lr = (left > 0 || right < self.cols - 1).then_some((left, right));
        self.goto(0, 0);
    }

    pub fn set_scroll_region(&mut self, top: usize, bottom: Option<usize>) {
        let top = top.max(1) - 1;
        let bottom = bottom.unwrap_or(self.rows).min(self.rows).max(1) - 1;
        if top >= bottom {
            return;
        }
        self.scroll_top = top;
        self.scroll_bottom = bottom;
        self.goto(0, 0);
    }
}
