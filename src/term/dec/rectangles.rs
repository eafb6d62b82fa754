//! What changes the screen by area: rectangular operations (DECRQCRA,
//! DECFRA, DECERA, DECSERA, DECCRA, DECCARA, DECRARA), column operations
//! (DECIC, DECDC, SL, SR, DECBI, DECFI), selective erase, and the resets
//! that go with the conformance level (DECSTR, DECSCL). Every count is
//! clipped to the screen or the margins before a loop runs.

use super::Csi;
use crate::term::cell::{Cell, Extra, Style, push_num};
use crate::term::screen::{Charset, Screen, work};

/// The rectangle sequences; false, having done nothing, for any other.
pub(super) fn dispatch(s: &mut Screen, c: &Csi<'_>) -> bool {
    match (c.marker, c.inter, c.fin) {
        (None, b"*", b'y') => {
            let id = c.raw(0);
            let sum = s.checksum(rect(s, c, 2));
            let mut out = b"\x1bP".to_vec();
            push_num(&mut out, u32::from(id));
            out.extend_from_slice(format!("!~{sum:04X}\x1b\\").as_bytes());
            s.reply(&out);
        }
        (None, b"$", b'x') => {
            let ch = char::from_u32(u32::from(c.raw(0))).unwrap_or(' ');
            // Only printable characters fill (VT420): 32..126, 160..255.
            if matches!(c.raw(0), 32..=126 | 160..=255) {
                let r = rect(s, c, 1);
                s.fill_rect(r, ch);
            }
        }
        (None, b"$", b'z') => {
            let r = rect(s, c, 0);
            s.erase_rect(r, false);
        }
        (None, b"$", b'{') => {
            let r = rect(s, c, 0);
            s.erase_rect(r, true);
        }
        (None, b"$", b'v') => {
            let src = rect(s, c, 0);
            let top = usize::from(c.get(5, 1));
            let left = usize::from(c.get(6, 1));
            let (row, col) = s.to_screen(top, left);
            s.copy_rect(src, row, col);
        }
        (None, b"$", b'r') | (None, b"$", b't') => {
            let r = rect(s, c, 0);
            let attrs: Vec<u16> = if c.len > 4 {
                c.params[4..c.len].to_vec()
            } else {
                vec![0]
            };
            s.change_rect_attrs(r, &attrs, c.fin == b't');
        }
        _ => return false,
    }
    true
}

/// A rectangle of screen cells, inclusive, already clipped to the screen
/// (rows `top..=bottom`, columns `left..=right`); empty when `top > bottom`
/// or `left > right`.
#[derive(Clone, Copy, Debug)]
pub struct Rect {
    pub top: usize,
    pub left: usize,
    pub bottom: usize,
    pub right: usize,
}

impl Rect {
    fn is_empty(&self) -> bool {
        self.top > self.bottom || self.left > self.right
    }
}

/// The rectangle in parameters `at..at + 4` (top, left, bottom, right,
/// 1-based, relative to the origin in origin mode, defaults the whole
/// page), clipped to the screen (the margins in origin mode).
fn rect(s: &Screen, c: &Csi<'_>, at: usize) -> Rect {
    let top = usize::from(c.get(at, 1));
    let left = usize::from(c.get(at + 1, 1));
    let bottom = usize::from(c.get(at + 2, u16::MAX));
    let right = usize::from(c.get(at + 3, u16::MAX));
    let (t, l) = s.to_screen(top, left);
    let (b, r) = s.to_screen(bottom, right);
    Rect {
        top: t,
        left: l,
        bottom: b,
        right: r,
    }
}

impl Screen {
    /// The cursor's position as reports give it: 1-based, relative to the
    /// margins in origin mode.
    pub fn origin_position(&self) -> (u16, u16) {
        let (mut row, mut col) = (self.cursor.row, self.cursor.col);
        if self.modes.origin {
            row = row.saturating_sub(self.scroll_top);
            col = col.saturating_sub(self.left());
        }
        (row as u16 + 1, col as u16 + 1)
    }

    /// A 1-based position from a sequence (relative to the margins in
    /// origin mode) as a screen cell, clamped to the screen (to the
    /// margins in origin mode).
    pub(super) fn to_screen(&self, row: usize, col: usize) -> (usize, usize) {
        let (row, col) = (row.max(1) - 1, col.max(1) - 1);
        if self.modes.origin {
            (
                (self.scroll_top + row).min(self.scroll_bottom),
                (self.left() + col).min(self.right()),
            )
        } else {
            (row.min(self.rows - 1), col.min(self.cols - 1))
        }
    }

    /// The conformance level DECSCL set (1..=5).
    pub fn conformance(&self) -> u8 {
        if self.level == 0 { 5 } else { self.level }
    }

    /// DECSCL: level 61..65 (VT100..VT500); a soft reset, as on a VT.
    pub(super) fn set_conformance(&mut self, level: u16) {
        if !(61..=65).contains(&level) {
            return;
        }
        self.soft_reset();
        self.level = if level == 65 { 0 } else { (level - 60) as u8 };
    }

    /// DECSTR, the soft reset: modes, margins, pen, charsets, protection
    /// and the saved cursor back to their defaults; the screen's content,
    /// the cursor's position and the tab stops stay.
    pub fn soft_reset(&mut self) {
        let m = &mut self.modes;
        m.cursor_visible = true;
        m.insert = false;
        m.origin = false;
        m.app_keypad = false;
        m.app_cursor_keys = false;
        m.lr_margins = false;
        m.reverse_wrap = false;
        m.reverse_wrap_ext = false;
        m.set_other(true, 2, false);
        self.lr = None;
        self.scroll_top = 0;
        self.scroll_bottom = self.rows - 1;
        self.pen = Style::DEFAULT;
        self.pen_extra = Extra::default();
        self.charsets = [Charset::Ascii; 4];
        self.active_charset = 0;
        self.rect_extent = 0;
        self.protect_iso = false;
        self.saved_main = None;
        self.saved_alt = None;
        self.cursor.pending_wrap = false;
    }

    /// DECBI: left one column; at the left margin the text inside the
    /// margins shifts right instead.
    pub fn back_index(&mut self) {
        self.cursor.pending_wrap = false;
        let left = self.left();
        if self.cursor.col == left {
            if self.in_margins() {
                self.insert_columns_at(left, 1);
            }
        } else if self.cursor.col > 0 {
            self.cursor.col -= 1;
        }
    }

    /// DECFI: right one column; at the right margin the text inside the
    /// margins shifts left instead.
    pub fn forward_index(&mut self) {
        self.cursor.pending_wrap = false;
        let right = self.right();
        if self.cursor.col == right {
            if self.in_margins() {
                self.delete_columns_at(self.left(), 1);
            }
        } else if self.cursor.col + 1 < self.cols {
            self.cursor.col += 1;
        }
    }

    /// DECIC: inserts `n` blank columns at the cursor inside the margins.
    pub(super) fn insert_columns(&mut self, n: usize) {
        if self.in_margins() {
            self.insert_columns_at(self.cursor.col, n);
        }
    }

    /// DECDC: deletes `n` columns at the cursor inside the margins.
    pub(super) fn delete_columns(&mut self, n: usize) {
        if self.in_margins() {
            self.delete_columns_at(self.cursor.col, n);
        }
    }

    /// SL: the text inside the margins shifts left `n` columns.
    pub(super) fn shift_left(&mut self, n: usize) {
        self.delete_columns_at(self.left(), n);
    }

    /// SR: the text inside the margins shifts right `n` columns.
    pub(super) fn shift_right(&mut self, n: usize) {
        self.insert_columns_at(self.left(), n);
    }

    fn insert_columns_at(&mut self, col: usize, n: usize) {
        let (top, bottom, end) = (self.scroll_top, self.scroll_bottom, self.right() + 1);
        let fill = self.pen.erase_part();
        let g = self.grid_mut();
        for r in top..=bottom {
            work(end.saturating_sub(col));
            g.row_mut(r).insert_blanks(col, n, end, fill);
        }
    }

    fn delete_columns_at(&mut self, col: usize, n: usize) {
        let (top, bottom, end) = (self.scroll_top, self.scroll_bottom, self.right() + 1);
        let fill = self.pen.erase_part();
        let g = self.grid_mut();
        for r in top..=bottom {
            work(end.saturating_sub(col));
            g.row_mut(r).delete_chars(col, n, end, fill);
        }
    }

    /// DECRQCRA's checksum of `r`, as xterm computes it since patch 334
    /// (what esctest's `--xterm-checksum=334` and later expect): the sum
    /// of the characters' code points, an empty cell counting as a space,
    /// the right half of a wide character not at all, attributes not at
    /// all; 16 bits.
    pub fn checksum(&self, r: Rect) -> u16 {
        let mut sum: u32 = 0;
        if r.is_empty() {
            return 0;
        }
        let g = self.grid();
        for row in r.top..=r.bottom {
            let cells = &g.row(row).cells;
            for cell in &cells[r.left..=r.right] {
                work(1);
                if !cell.is_spacer() {
                    sum = sum.wrapping_add(cell.ch as u32);
                }
            }
        }
        sum as u16
    }

    /// Fills rows `top..=bottom`, columns `left..=right` with `ch` in the
    /// pen's style (REP's end state inside margins).
    pub(in crate::term) fn fill_region(
        &mut self,
        top: usize,
        bottom: usize,
        left: usize,
        right: usize,
        ch: char,
    ) {
        self.fill_rect(
            Rect {
                top,
                left,
                bottom,
                right,
            },
            ch,
        );
    }

    /// DECFRA: fills `r` with `ch` in the pen's style.
    pub(super) fn fill_rect(&mut self, r: Rect, ch: char) {
        if r.is_empty() {
            return;
        }
        let pen = self.pen;
        let extra = self.pen_extra.non_empty().cloned();
        let g = self.grid_mut();
        for row in r.top..=r.bottom {
            work(r.right - r.left + 1);
            let line = g.row_mut(row);
            line.erase(r.left, r.right + 1, pen.erase_part());
            line.cells[r.left..=r.right].fill(Cell { ch, style: pen });
            line.set_extra(r.left, r.right + 1, extra.as_ref());
        }
    }

    /// DECERA (or, `selective`, DECSERA: cells DECSCA protected stay,
    /// those of an SPA guarded area do not, as in xterm): blanks `r`.
    pub(super) fn erase_rect(&mut self, r: Rect, selective: bool) {
        if r.is_empty() {
            return;
        }
        let selective = selective && !self.protect_iso;
        let fill = self.pen.erase_part();
        let g = self.grid_mut();
        for row in r.top..=r.bottom {
            work(r.right - r.left + 1);
            erase_cells(g.row_mut(row), r.left, r.right + 1, fill, selective);
        }
    }

    /// DECCRA: copies `src` so that its top left corner lands at
    /// (`row`, `col`), clipped to the screen; overlapping copies read the
    /// source as it was.
    pub(super) fn copy_rect(&mut self, src: Rect, row: usize, col: usize) {
        if src.is_empty() {
            return;
        }
        let (rows, cols) = (self.rows, self.cols);
        let height = (src.bottom - src.top + 1).min(rows - row);
        let width = (src.right - src.left + 1).min(cols - col);
        let g = self.grid_mut();
        let copied: Vec<Vec<Cell>> = (0..height)
            .map(|i| {
                work(width);
                g.row(src.top + i).cells[src.left..src.left + width].to_vec()
            })
            .collect();
        for (i, cells) in copied.into_iter().enumerate() {
            let line = g.row_mut(row + i);
            line.erase(col, col + width, Style::DEFAULT);
            line.cells[col..col + width].copy_from_slice(&cells);
            // Half a wide character at either edge is blanked.
            if line.cells[col].is_spacer() {
                line.cells[col] = Cell::BLANK;
            }
            if line.cells[col + width - 1].is_wide() {
                line.cells[col + width - 1] = Cell::BLANK;
            }
        }
    }

    /// DECCARA (or, `reverse`, DECRARA): sets (toggles) the SGR attributes
    /// `attrs` (0 for all off, 1 bold, 4 underline, 5 blink, 7 inverse, 22,
    /// 24, 25, 27 to clear one) in `r`, or with DECSACE 1 in the stream of
    /// cells from its first to its last.
    pub(super) fn change_rect_attrs(&mut self, r: Rect, attrs: &[u16], reverse: bool) {
        use crate::term::cell::{BLINK, BOLD, INVERSE};
        if r.is_empty() {
            return;
        }
        let stream = self.rect_extent != 2;
        let cols = self.cols;
        let g = self.grid_mut();
        for row in r.top..=r.bottom {
            let (from, to) = if stream {
                (
                    if row == r.top { r.left } else { 0 },
                    if row == r.bottom { r.right } else { cols - 1 },
                )
            } else {
                (r.left, r.right)
            };
            work(to - from + 1);
            for cell in &mut g.row_mut(row).cells[from..=to] {
                let st = &mut cell.style;
                for &a in attrs {
                    let (bit_fg, ul) = match a {
                        0 if !reverse => {
                            st.fg &= !(BOLD | BLINK | INVERSE);
                            st.set_underline(0);
                            continue;
                        }
                        0 => (BOLD | BLINK | INVERSE, true),
                        1 => (BOLD, false),
                        4 => (0, true),
                        5 => (BLINK, false),
                        7 => (INVERSE, false),
                        22 | 24 | 25 | 27 if !reverse => {
                            match a {
                                22 => st.fg &= !BOLD,
                                24 => st.set_underline(0),
                                25 => st.fg &= !BLINK,
                                _ => st.fg &= !INVERSE,
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    if reverse {
                        st.fg ^= bit_fg;
                        if ul {
                            let u = if st.underline() == 0 { 1 } else { 0 };
                            st.set_underline(u);
                        }
                    } else {
                        st.fg |= bit_fg;
                        if ul {
                            st.set_underline(1);
                        }
                    }
                }
            }
        }
    }

    /// ECH within a guarded area (SPA): protected cells stay.
    pub(in crate::term) fn selective_erase_chars(&mut self, n: usize) {
        let (row, col) = (self.cursor.row, self.cursor.col);
        let to = col.saturating_add(n.max(1)).min(self.cols);
        let fill = self.pen.erase_part();
        work(to - col);
        erase_cells(self.grid_mut().row_mut(row), col, to, fill, true);
        self.cursor.pending_wrap = false;
    }

    /// DECSED: as ED, sparing protected cells (DECSCA).
    pub(in crate::term) fn selective_erase_display(&mut self, mode: u16) {
        let (row, col) = (self.cursor.row, self.cursor.col);
        let (rows, cols) = (self.rows, self.cols);
        let range = match mode {
            0 => row..rows,
            1 => 0..row + 1,
            2 => 0..rows,
            _ => return,
        };
        let fill = self.pen.erase_part();
        let g = self.grid_mut();
        for r in range {
            let (from, to) = match mode {
                0 if r == row => (col, cols),
                1 if r == row => (0, col + 1),
                _ => (0, cols),
            };
            work(to - from);
            erase_cells(g.row_mut(r), from, to, fill, true);
        }
    }

    /// DECSEL: as EL, sparing protected cells (DECSCA).
    pub(in crate::term) fn selective_erase_line(&mut self, mode: u16) {
        let (row, col, cols) = (self.cursor.row, self.cursor.col, self.cols);
        let (from, to) = match mode {
            0 => (col, cols),
            1 => (0, col + 1),
            2 => (0, cols),
            _ => return,
        };
        let fill = self.pen.erase_part();
        work(to - from);
        erase_cells(self.grid_mut().row_mut(row), from, to, fill, true);
    }
}

/// Erases cells `from..to` of `row` (all of them, or with `selective` only
/// those not protected by DECSCA).
fn erase_cells(
    row: &mut crate::term::grid::Row,
    from: usize,
    to: usize,
    fill: Style,
    selective: bool,
) {
    let to = to.min(row.cells.len());
    if from >= to {
        return;
    }
    if !selective || row.extras.is_none() {
        row.erase(from, to, fill);
        return;
    }
    let mut c = from;
    while c < to {
        let start = c;
        let protected = row.extra_at(c).is_some_and(|e| e.protected);
        while c < to && row.extra_at(c).is_some_and(|e| e.protected) == protected {
            c += 1;
        }
        if !protected {
            row.erase(start, c, fill);
        }
    }
}
