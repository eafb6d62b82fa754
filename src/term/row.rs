//! A row of the screen: its cells, and the rare extras (combining marks,
//! hyperlinks, underline colours) kept beside them so a plain row stays a
//! flat cell array. Invariant: a wide cell is followed by its spacer in the
//! same row (writers that split a pair blank both halves).

use serde::{Deserialize, Serialize};

use super::cell::{Cell, Extra, Style};

/// Combining marks kept per cell at most, so a stream of marks cannot grow a
/// row without bound.
const MAX_MARKS_PER_CELL: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "RowRepr")]
pub struct Row {
    /// Boxed, not a `Vec`: a row's width changes only on a resize, and the
    /// capacity word was 8 of the 64 bytes every row of every pane cost,
    /// written or not (see `Marks`).
    pub cells: Box<[Cell]>,
    /// The line continued onto the next row by autowrap.
    pub wrapped: bool,
    /// The last cell is not part of the line: a wide character that did
    /// not fit there wrapped early. Reflow and joined captures skip it.
    pub wrap_gap: bool,
    /// Side table of combining marks: column and the marks drawn over it.
    /// Almost always empty, so it costs one null pointer per row.
    pub marks: Marks,
    /// Side table of underline colours and hyperlinks; `None` for rows
    /// without any, which is nearly all of them.
    pub extras: Option<Box<RowExtras>>,
}

/// A row's combining marks (column, marks), allocated only for a row that
/// has some: an empty `Vec` was 24 bytes of every row, and a 200x50 pane's
/// row headers (50 of them, written or not) were 3.2 KB of an idle pane
/// before these went to 40 bytes each.
// The box is the point: one thin pointer per row, where a `Vec` (or a boxed
// slice, a fat pointer) would be three words (or two) on every row.
#[allow(clippy::box_collection)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks(pub(super) Option<Box<Vec<(u16, String)>>>);

impl Marks {
    fn from_vec(v: Vec<(u16, String)>) -> Marks {
        Marks((!v.is_empty()).then(|| Box::new(v)))
    }

    pub fn push(&mut self, mark: (u16, String)) {
        self.0.get_or_insert_with(Default::default).push(mark);
    }

    pub fn clear(&mut self) {
        self.0 = None;
    }

    pub fn retain(&mut self, f: impl FnMut(&(u16, String)) -> bool) {
        if let Some(v) = &mut self.0 {
            v.retain(f);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }

    pub fn retain_mut(&mut self, f: impl FnMut(&mut (u16, String)) -> bool) {
        if let Some(v) = &mut self.0 {
            v.retain_mut(f);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }
}

impl std::ops::Deref for Marks {
    type Target = [(u16, String)];
    fn deref(&self) -> &[(u16, String)] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl std::ops::DerefMut for Marks {
    fn deref_mut(&mut self) -> &mut [(u16, String)] {
        self.0.as_deref_mut().map_or(&mut [], Vec::as_mut_slice)
    }
}

impl<'a> IntoIterator for &'a Marks {
    type Item = &'a (u16, String);
    type IntoIter = std::slice::Iter<'a, (u16, String)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Per-cell `Extra`s of one row: `ids` runs parallel to the row's cells (0 =
/// none, n = `table[n - 1]`), so every cell operation mirrors onto it with
/// the same index arithmetic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowExtras {
    ids: Vec<u16>,
    table: Vec<Extra>,
}

impl RowExtras {
    fn get(&self, col: usize) -> Option<&Extra> {
        let id = usize::from(*self.ids.get(col)?);
        id.checked_sub(1).and_then(|i| self.table.get(i))
    }

    /// Index + 1 of `extra` in the table, adding it if new; 0 if the table
    /// is full even after dropping unused entries.
    fn intern(&mut self, extra: &Extra) -> u16 {
        if let Some(i) = self.table.iter().position(|e| e == extra) {
            return (i + 1) as u16;
        }
        // Entries whose cells were overwritten stay until the table has
        // more than one per cell; then unused ones are dropped, so a row
        // holds at most about `2 * cols` entries whatever is written.
        if self.table.len() >= (2 * self.ids.len()).max(16) {
            self.compact();
        }
        if self.table.len() >= usize::from(u16::MAX) - 1 {
            return 0;
        }
        self.table.push(extra.clone());
        self.table.len() as u16
    }

    fn compact(&mut self) {
        let mut map = vec![0u16; self.table.len() + 1];
        let mut kept = Vec::new();
        for id in &mut self.ids {
            let old = usize::from(*id);
            if old == 0 || old > self.table.len() {
                *id = 0;
                continue;
            }
            if map[old] == 0 {
                kept.push(self.table[old - 1].clone());
                map[old] = kept.len() as u16;
            }
            *id = map[old];
        }
        self.table = kept;
    }

    /// Restores the invariants after deserialization.
    fn repair(&mut self, cols: usize) {
        self.ids.resize(cols, 0);
        let n = self.table.len();
        for id in &mut self.ids {
            if usize::from(*id) > n {
                *id = 0;
            }
        }
    }

    fn is_unused(&self) -> bool {
        self.ids.iter().all(|&id| id == 0)
    }
}

/// Serialized form of a row: one char per cell up to the last cell that is
/// not a default blank, style runs over those cells (omitted when all
/// default), so a plain 80x24 screen is about 2 KB of JSON instead of 70 KB
/// of per-cell objects, and a blank row is `{"t":""}`. Lossless: a row
/// shorter than its grid is padded with default blanks when read (older
/// encodings, which wrote every cell, read the same).
#[derive(Deserialize)]
struct RowRepr {
    t: String,
    #[serde(default)]
    r: Vec<(u32, u32, u32)>,
    #[serde(default)]
    w: bool,
    #[serde(default)]
    g: bool,
    #[serde(default)]
    m: Vec<(u16, String)>,
    #[serde(default)]
    x: Option<Box<RowExtras>>,
}

/// `RowRepr` as written: the same JSON, encoded from a borrowed row (a live
/// upgrade encodes every row of every pane inside its blackout; cloning
/// each row first, as `into = "RowRepr"` would, is most of that cost).
#[derive(Serialize)]
struct RowReprRef<'a> {
    t: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    r: Vec<(u32, u32, u32)>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    w: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    g: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    m: &'a [(u16, String)],
    #[serde(skip_serializing_if = "Option::is_none")]
    x: Option<&'a RowExtras>,
}

impl Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RowReprRef::from(self).serialize(serializer)
    }
}

impl<'a> From<&'a Row> for RowReprRef<'a> {
    fn from(row: &'a Row) -> RowReprRef<'a> {
        // Trailing default blanks are left out: reading pads every row
        // back to the grid's width with them (`Grid::repair`), and they
        // were most of an idle pane's encoding (a blank 200-column row was
        // 200 spaces, so a new 200x50 pane's two screens took 21 KB of the
        // 24 KB the crash checkpoint and its cache hold per pane). A blank
        // carrying a hyperlink, an underline colour or marks is content
        // (`content_end`): the extras' column table is cut to the cells
        // read back, so a link on trailing spaces was lost in every
        // snapshot, hand-over and checkpoint.
        let end = row.content_end();
        let cells = &row.cells[..end];
        let t = cells.iter().map(|c| c.ch).collect();
        let mut r: Vec<(u32, u32, u32)> = Vec::new();
        for c in cells {
            match r.last_mut() {
                Some((n, fg, bg)) if *fg == c.style.fg && *bg == c.style.bg => *n += 1,
                _ => r.push((1, c.style.fg, c.style.bg)),
            }
        }
        if r.len() == 1 && r[0].1 == 0 && r[0].2 == 0 {
            r.clear();
        }
        RowReprRef {
            t,
            r,
            w: row.wrapped,
            g: row.wrap_gap,
            m: &row.marks,
            x: row.extras.as_deref(),
        }
    }
}

impl From<RowRepr> for Row {
    fn from(repr: RowRepr) -> Row {
        let mut styles = repr
            .r
            .iter()
            .flat_map(|&(n, fg, bg)| std::iter::repeat_n(Style { fg, bg }, n as usize));
        let cells = repr
            .t
            .chars()
            .map(|ch| Cell {
                ch,
                style: styles.next().unwrap_or_default(),
            })
            .collect();
        let mut row = Row {
            cells,
            wrapped: repr.w,
            wrap_gap: repr.g,
            marks: Marks::from_vec(repr.m),
            extras: repr.x,
        };
        let cols = row.cells.len();
        if let Some(x) = &mut row.extras {
            x.repair(cols);
        }
        row
    }
}

impl Row {
    /// The row wrapped early at a wide character and its last cell is
    /// still the unused gap. `wrap_gap` alone can be stale: output that
    /// later moved the cursor back and printed into that last cell (a
    /// wide character's spacer or any other character) does not clear it,
    /// and a reflow or joined capture that skipped such a cell split a
    /// wide character from its spacer or dropped a character.
    pub fn has_gap(&self) -> bool {
        self.wrap_gap
            && self
                .cells
                .last()
                .is_some_and(|c| c.ch == ' ' && !c.is_spacer())
    }

    /// A default blank row with nothing else set.
    pub(super) fn is_blank(&self) -> bool {
        !self.wrapped
            && !self.wrap_gap
            && self.marks.is_empty()
            && self.extras.is_none()
            && self.cells.iter().all(|c| *c == Cell::BLANK)
    }

    pub fn new(cols: u16, style: Style) -> Row {
        Row {
            cells: vec![Cell::blank(style); usize::from(cols)].into_boxed_slice(),
            wrapped: false,
            wrap_gap: false,
            marks: Marks::default(),
            extras: None,
        }
    }

    #[inline]
    pub fn reset(&mut self, style: Style) {
        self.cells.fill(Cell::blank(style));
        self.wrapped = false;
        self.wrap_gap = false;
        self.marks.clear();
        self.extras = None;
    }

    #[inline]
    pub fn extra_at(&self, col: usize) -> Option<&Extra> {
        self.extras.as_ref()?.get(col)
    }

    /// Stamps `extra` (or nothing) on cells `[from, to)`: every writer of
    /// cells calls this for the cells it wrote. Costs one check when neither
    /// the pen nor the row has extras.
    #[inline]
    pub fn set_extra(&mut self, from: usize, to: usize, extra: Option<&Extra>) {
        if extra.is_none() && self.extras.is_none() {
            return;
        }
        self.set_extra_slow(from, to, extra);
    }

    fn set_extra_slow(&mut self, from: usize, to: usize, extra: Option<&Extra>) {
        let cols = self.cells.len();
        let to = to.min(cols);
        if from >= to {
            return;
        }
        let x = self.extras.get_or_insert_with(|| {
            Box::new(RowExtras {
                ids: vec![0; cols],
                table: Vec::new(),
            })
        });
        let id = extra.map_or(0, |e| x.intern(e));
        x.ids[from..to].fill(id);
        if id == 0 && x.is_unused() {
            self.extras = None;
        }
    }

    pub fn marks_at(&self, col: usize) -> Option<&str> {
        if self.marks.is_empty() {
            return None;
        }
        self.marks
            .iter()
            .find(|(c, _)| usize::from(*c) == col)
            .map(|(_, m)| m.as_str())
    }

    pub fn add_mark(&mut self, col: usize, mark: char) {
        let Ok(col16) = u16::try_from(col) else {
            return;
        };
        if let Some((_, m)) = self.marks.iter_mut().find(|(c, _)| *c == col16) {
            if m.chars().count() < MAX_MARKS_PER_CELL {
                m.push(mark);
            }
        } else {
            self.marks.push((col16, mark.to_string()));
        }
    }

    #[inline]
    fn drop_marks(&mut self, from: usize, to: usize) {
        if !self.marks.is_empty() {
            self.marks
                .retain(|(c, _)| usize::from(*c) < from || usize::from(*c) >= to);
        }
    }

    /// Writes the printable ASCII at the start of `input` with `pen` (and
    /// `extra`) into the cells from `col` to the row's end, keeping the
    /// row's invariants: a wide character half overwritten is blanked, marks
    /// and extras of written cells replaced. Returns the cells written. The
    /// one place text is drawn in bulk, inlined into each caller's loop.
    #[inline(always)]
    pub fn write_ascii(
        &mut self,
        col: usize,
        input: &[u8],
        pen: Style,
        extra: Option<&Extra>,
    ) -> usize {
        let Some(cells) = self.cells.get_mut(col..) else {
            return 0;
        };
        // Checked before the write that would hide it.
        let left_spacer = cells.first().is_some_and(Cell::is_spacer);
        let mut n = 0;
        for (cell, &b) in cells.iter_mut().zip(input) {
            if !(0x20..0x7F).contains(&b) {
                break;
            }
            *cell = Cell {
                ch: char::from(b),
                style: pen,
            };
            n += 1;
        }
        if n > 0 {
            self.finish_write(col, n, left_spacer, [pen, pen], extra);
        }
        n
    }

    /// `write_ascii` for text broken up by sequences that only change the
    /// pen, as coloured output is (a word, an SGR, a word...): at each ESC
    /// after written text, `pen_change` may consume a sequence, returning
    /// the new pen and the sequence's length. Stops at the row's end, at a
    /// byte that is neither, or at a sequence `pen_change` declines.
    /// Returns the cells written, the bytes used and the pen after them.
    ///
    /// Why: the runs are a word long, and the row's invariants need fixing
    /// only at the ends of everything written (the cells in between are
    /// all fresh narrow characters), so this does once what `write_ascii`
    /// would do per run.
    #[inline(always)]
    pub fn write_ascii_styled(
        &mut self,
        col: usize,
        input: &[u8],
        pen: Style,
        mut pen_change: impl FnMut(Style, &[u8]) -> Option<(Style, usize)>,
    ) -> (usize, usize, Style) {
        let Some(cells) = self.cells.get_mut(col..) else {
            return (0, 0, pen);
        };
        let left_spacer = cells.first().is_some_and(Cell::is_spacer);
        let mut cur = pen;
        let mut written = pen;
        let mut n = 0;
        let mut i = 0;
        loop {
            let start = n;
            while let (Some(cell), Some(&b)) = (cells.get_mut(n), input.get(i)) {
                if !(0x20..0x7F).contains(&b) {
                    break;
                }
                *cell = Cell {
                    ch: char::from(b),
                    style: cur,
                };
                n += 1;
                i += 1;
            }
            if n == start {
                break;
            }
            written = cur;
            if n == cells.len() || input.get(i) != Some(&0x1b) {
                break;
            }
            match pen_change(cur, &input[i..]) {
                Some((next, len)) => {
                    cur = next;
                    i += len;
                }
                None => break,
            }
        }
        if n > 0 {
            self.finish_write(col, n, left_spacer, [pen, written], None);
        }
        (n, i, cur)
    }

    /// The fixups after `n` narrow characters were written from `col`:
    /// the other half of a wide character cut at either end blanked (in the
    /// erase style of the first and the last pen written with), marks of
    /// the written cells dropped, their extras set.
    #[inline(always)]
    fn finish_write(
        &mut self,
        col: usize,
        n: usize,
        left_spacer: bool,
        [first_pen, last_pen]: [Style; 2],
        extra: Option<&Extra>,
    ) {
        if left_spacer && col > 0 {
            self.cells[col - 1] = Cell::blank(first_pen.erase_part());
            self.set_extra(col - 1, col, None);
        }
        self.split_wide_right(col + n, last_pen.erase_part());
        self.drop_marks(col, col + n);
        self.set_extra(col, col + n, extra);
    }

    /// Blanks the other half of a wide character that straddles `col`'s left
    /// edge, so a write or erase starting at `col` never leaves half a glyph.
    pub fn split_wide_left(&mut self, col: usize, style: Style) {
        if col > 0 && col < self.cells.len() && self.cells[col].is_spacer() {
            self.cells[col - 1] = Cell::blank(style);
            self.set_extra(col - 1, col, None);
        }
    }

    /// Same for the right edge: an operation ending before `end` must not
    /// leave a spacer at `end` without its wide cell.
    pub fn split_wide_right(&mut self, end: usize, style: Style) {
        if end < self.cells.len() && self.cells[end].is_spacer() {
            self.cells[end] = Cell::blank(style);
            self.set_extra(end, end + 1, None);
        }
    }

    /// Erases `[from, to)` with `style`'s background.
    pub fn erase(&mut self, from: usize, to: usize, style: Style) {
        let to = to.min(self.cells.len());
        if from >= to {
            return;
        }
        self.split_wide_left(from, style);
        self.split_wide_right(to, style);
        self.cells[from..to].fill(Cell::blank(style));
        self.drop_marks(from, to);
        self.set_extra(from, to, None);
    }

    /// Inserts `n` blanks at `col`, shifting the cells up to `end` (the
    /// row's length or a right margin) right; cells pushed past `end` are
    /// lost, cells from `end` on stay.
    pub fn insert_blanks(&mut self, col: usize, n: usize, end: usize, style: Style) {
        let len = end.min(self.cells.len());
        self.split_wide_right(len, style);
        // Inserting on the right half of a wide character inserts after it,
        // keeping the glyph whole (as vt100 does).
        let col = if col < len && self.cells[col].is_spacer() {
            col + 1
        } else {
            col
        };
        if col >= len {
            return;
        }
        let n = n.min(len - col);
        self.cells[col..len].rotate_right(n);
        self.cells[col..col + n].fill(Cell::blank(style));
        if let Some(x) = &mut self.extras {
            x.ids[col..len].rotate_right(n);
            x.ids[col..col + n].fill(0);
        }
        // A wide cell pushed to the last column lost its spacer.
        if let Some(last) = self.cells[..len].last_mut() {
            if last.is_wide() {
                *last = Cell::blank(style);
                self.set_extra(len - 1, len, None);
            }
        }
        if !self.marks.is_empty() {
            self.marks.retain_mut(|(c, _)| {
                let c0 = usize::from(*c);
                if c0 < col {
                    return true;
                }
                if c0 >= len {
                    return true;
                }
                let moved = c0 + n;
                if moved >= len {
                    return false;
                }
                *c = moved as u16;
                true
            });
        }
    }

    /// Deletes `n` cells at `col`, shifting the cells up to `end` (the
    /// row's length or a right margin) left and filling in blanks before
    /// `end`; cells from `end` on stay.
    pub fn delete_chars(&mut self, col: usize, n: usize, end: usize, style: Style) {
        let len = end.min(self.cells.len());
        if col >= len {
            return;
        }
        let n = n.min(len - col);
        self.split_wide_left(col, style);
        self.split_wide_right(col + n, style);
        self.split_wide_right(len, style);
        self.cells[col..len].rotate_left(n);
        self.cells[len - n..len].fill(Cell::blank(style));
        if let Some(x) = &mut self.extras {
            x.ids[col..len].rotate_left(n);
            x.ids[len - n..len].fill(0);
        }
        if !self.marks.is_empty() {
            self.marks.retain_mut(|(c, _)| {
                let c0 = usize::from(*c);
                if c0 < col || c0 >= len {
                    true
                } else if c0 < col + n {
                    false
                } else {
                    *c = (c0 - n) as u16;
                    true
                }
            });
        }
    }

    pub fn resize(&mut self, cols: u16, style: Style) {
        let cols = usize::from(cols);
        if cols < self.cells.len() {
            self.cells = self.cells[..cols].into();
            self.drop_marks(cols, usize::MAX);
            if let Some(x) = &mut self.extras {
                x.ids.truncate(cols);
            }
            if self.cells.last().is_some_and(Cell::is_wide) {
                if let Some(last) = self.cells.last_mut() {
                    *last = Cell::blank(style);
                }
                self.set_extra(cols - 1, cols, None);
            }
            if self.extras.as_ref().is_some_and(|x| x.is_unused()) {
                self.extras = None;
            }
        } else {
            let mut cells = std::mem::take(&mut self.cells).into_vec();
            cells.resize(cols, Cell::blank(style));
            self.cells = cells.into_boxed_slice();
            if let Some(x) = &mut self.extras {
                x.ids.resize(cols, 0);
            }
        }
    }

    /// Number of cells up to the last one that is not a default blank (a
    /// blank carrying combining marks, a hyperlink or an underline colour
    /// counts as content).
    pub fn content_end(&self) -> usize {
        // The common row, without marks or extras: only the cells decide,
        // compared without the per-cell side-table lookups.
        // Eight cells a step, each folded to the bits that differ from a
        // blank and OR-ed without an early exit (the derived `==` stops at
        // the first differing field, which keeps it from vectorizing): a
        // scrolled-off line of a 200-column pane is mostly trailing blanks.
        if self.marks.is_empty() && self.extras.is_none() {
            let cells = &*self.cells;
            let not_blank = |c: &Cell| (u32::from(c.ch) ^ u32::from(' ')) | c.style.fg | c.style.bg;
            let mut end = cells.len();
            while let Some(block) = end.checked_sub(8).and_then(|s| cells.get(s..end)) {
                if block.iter().fold(0, |any, c| any | not_blank(c)) != 0 {
                    break;
                }
                end -= 8;
            }
            return cells[..end]
                .iter()
                .rposition(|c| *c != Cell::BLANK)
                .map_or(0, |i| i + 1);
        }
        let mut end = self.cells.len();
        while end > 0
            && self.cells[end - 1] == Cell::BLANK
            && self.marks_at(end - 1).is_none()
            && self.extra_at(end - 1).is_none()
        {
            end -= 1;
        }
        end
    }

    /// Text of the row with trailing blanks trimmed.
    pub fn text(&self) -> String {
        let mut s = String::with_capacity(self.cells.len());
        for (i, cell) in self.cells.iter().enumerate() {
            if cell.is_spacer() {
                continue;
            }
            s.push(cell.ch);
            if let Some(m) = self.marks_at(i) {
                s.push_str(m);
            }
        }
        let trimmed = s.trim_end_matches(' ').len();
        s.truncate(trimmed);
        s
    }
}
