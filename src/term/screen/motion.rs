//! Cursor motion: absolute and relative moves, carriage return, backspace
//! and tab stops, each kept inside the margins the modes set.

use super::{Screen, work};

impl Screen {
    /// Absolute move; `row` is relative to the scroll region in origin mode.
    pub fn goto(&mut self, row: i64, col: i64) {
        let (min, max) = if self.modes.origin {
            (self.scroll_top, self.scroll_bottom)
        } else {
            (0, self.rows - 1)
        };
        let row = (min as i64).saturating_add(row.max(0));
        self.cursor.row = (row.min(max as i64)) as usize;
        self.goto_col(col);
    }

    /// Absolute column; relative to the left margin in origin mode.
    pub fn goto_col(&mut self, col: i64) {
        let (min, max) = if self.modes.origin {
            (self.left(), self.right())
        } else {
            (0, self.cols - 1)
        };
        let col = (min as i64).saturating_add(col.max(0));
        self.cursor.col = col.min(max as i64) as usize;
        self.cursor.pending_wrap = false;
    }

    pub fn goto_row(&mut self, row: i64) {
        let col = self.cursor.col as i64;
        self.goto(row, col);
    }

    /// Relative vertical move that stops at the scroll region's edge when it
    /// starts inside the region.
    pub fn move_up(&mut self, n: usize) {
        let floor = if self.cursor.row >= self.scroll_top {
            self.scroll_top
        } else {
            0
        };
        self.cursor.row = self.cursor.row.saturating_sub(n).max(floor);
        self.cursor.pending_wrap = false;
    }

    pub fn move_down(&mut self, n: usize) {
        let ceil = if self.cursor.row <= self.scroll_bottom {
            self.scroll_bottom
        } else {
            self.rows - 1
        };
        self.cursor.row = self.cursor.row.saturating_add(n).min(ceil);
        self.cursor.pending_wrap = false;
    }

    /// The column a rightward move stops at: the right margin from inside
    /// the margins, else the last column.
    fn right_stop(&self) -> usize {
        if self.cursor.col <= self.right() {
            self.right()
        } else {
            self.cols - 1
        }
    }

    /// The column a leftward move stops at: the left margin from inside
    /// the margins, else the first column.
    fn left_stop(&self) -> usize {
        if self.cursor.col >= self.left() {
            self.left()
        } else {
            0
        }
    }

    pub fn move_forward(&mut self, n: usize) {
        self.cursor.col = self.cursor.col.saturating_add(n).min(self.right_stop());
        self.cursor.pending_wrap = false;
    }

    /// CUB. With reverse wraparound (45, 1045) and autowrap it moves as
    /// `n` backspaces do, up through the rows above: at most a screenful
    /// of steps, beyond which it would only go round again.
    pub fn move_backward(&mut self, n: usize) {
        if self.modes.autowrap && (self.modes.reverse_wrap || self.modes.reverse_wrap_ext) {
            for _ in 0..n.min(self.rows * self.cols + 1) {
                work(1);
                let before = (self.cursor.row, self.cursor.col, self.cursor.pending_wrap);
                self.backspace();
                if before == (self.cursor.row, self.cursor.col, self.cursor.pending_wrap) {
                    break;
                }
            }
            return;
        }
        self.cursor.col = self.cursor.col.saturating_sub(n).max(self.left_stop());
        self.cursor.pending_wrap = false;
    }

    /// To the left margin (in origin mode, or from inside the margins),
    /// else to the first column.
    pub fn carriage_return(&mut self) {
        self.cursor.col = if self.modes.origin {
            self.left()
        } else {
            self.left_stop()
        };
        self.cursor.pending_wrap = false;
    }

    /// Like xterm and alacritty: a pending wrap is cancelled and the cursor
    /// still moves left from the last column. With reverse wraparound (45,
    /// 1045) and autowrap, a pending wrap is only cancelled, and at the
    /// left edge the cursor goes to the right margin of the row above: for
    /// 45 only if that row wrapped onto this one, for 1045 from any row and
    /// from the top margin to the bottom one (xterm since patch 383).
    pub fn backspace(&mut self) {
        let reverse =
            self.modes.autowrap && (self.modes.reverse_wrap || self.modes.reverse_wrap_ext);
        if std::mem::take(&mut self.cursor.pending_wrap) && reverse {
            return;
        }
        let left = self.left_stop();
        if self.cursor.col > left {
            self.cursor.col -= 1;
            return;
        }
        if !reverse {
            return;
        }
        let row = self.cursor.row;
        let (top, bottom) = if (self.scroll_top..=self.scroll_bottom).contains(&row) {
            (self.scroll_top, self.scroll_bottom)
        } else {
            (0, self.rows - 1)
        };
        let extended = self.modes.reverse_wrap_ext;
        let above = if row > top {
            row - 1
        } else if extended {
            bottom
        } else {
            return;
        };
        if !extended && !self.grid().row(above).wrapped {
            return;
        }
        self.cursor.row = above;
        self.cursor.col = self.right();
    }

    /// CHT / HT: to the next tab stop, stopping at the right margin (or
    /// the last column from outside the margins).
    pub fn tab_forward(&mut self, n: usize) {
        let stop = self.right_stop();
        for _ in 0..n.min(self.cols) {
            if self.cursor.col >= stop {
                break;
            }
            let mut c = self.cursor.col + 1;
            while c < stop && !self.tabs[c] {
                work(1);
                c += 1;
            }
            self.cursor.col = c.min(stop);
        }
        self.cursor.pending_wrap = false;
    }

    /// CBT: to the previous tab stop, or the first column: the left
    /// margin does not stop it (xterm).
    pub fn tab_backward(&mut self, n: usize) {
        let stop = 0;
        for _ in 0..n.min(self.cols) {
            if self.cursor.col <= stop {
                break;
            }
            let mut c = self.cursor.col - 1;
            while c > stop && !self.tabs[c] {
                work(1);
                c -= 1;
            }
            self.cursor.col = c;
        }
        self.cursor.pending_wrap = false;
    }
}
