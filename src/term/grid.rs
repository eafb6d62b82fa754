//! The visible screen: a ring buffer of rows, so a full-screen scroll is one
//! modular add instead of moving every row.
//!
//! ```text
//!   rows (storage)          view
//!   +-----------+
//!   | row 2     |  <- top + 2 (mod len) ... view row 2
//!   | row 0     |  <- top  ............... view row 0
//!   | row 1     |  <- top + 1 ............ view row 1
//!   +-----------+
//! ```
//!
//! All public methods take view coordinates (0 = first visible row);
//! storage indices never leave this file. Invariants: every row holds exactly
//! `cols` cells; `top < rows.len()`; a wide cell is followed by its spacer in
//! the same row (writers that split a pair blank both halves).

use serde::{Deserialize, Serialize};

use super::cell::Style;
pub use super::row::Row;

/// Rows that were never written are `None` slots and read as `blank`, a
/// shared row of default blanks: a fresh 200x50 grid would otherwise be
/// 117 KiB of cells, and a shell pane writes a few rows of it. `row_mut`
/// gives a row its cells on first write; once written a row keeps them
/// (scrolling and erasing reuse them in place).
#[derive(Clone, Debug, Deserialize)]
pub struct Grid {
    rows: Vec<Slot>,
    top: usize,
    cols: u16,
    /// `cols` default blanks: what an unwritten row reads as, shared by
    /// every grid of that width (`blank_row`). Set by `repair` after
    /// deserializing.
    #[serde(skip, default = "no_blank_row")]
    blank: &'static Row,
}

/// A row of a grid: `None` until first written. Boxed, so an unwritten
/// row is one null word: a `Row` inline is 40 bytes, and the 50 of a new
/// 200x50 pane's grid were 2 KB, the largest part of an idle pane's heap.
/// A written row costs the box's word and allocation more, beside its
/// 2.4 KB of cells.
type Slot = Option<Box<Row>>;

/// A grid's `blank` before `repair` sets it.
fn no_blank_row() -> &'static Row {
    blank_row(0)
}

/// The row of `cols` default blanks, one per width for the whole process:
/// it was 2.4 KB of every 200-column pane. Each width's row is made once
/// and kept (widths are at most `u16::MAX`, and in practice a few: the
/// panes' and their clients' sizes).
fn blank_row(cols: u16) -> &'static Row {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ROWS: OnceLock<Mutex<HashMap<u16, &'static Row>>> = OnceLock::new();
    let mut rows = ROWS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    rows.entry(cols)
        .or_insert_with(|| Box::leak(Box::new(Row::new(cols, Style::DEFAULT))))
}

impl Serialize for Grid {
    /// The derived form of `rows`, `top`, `cols`, with the rows in view
    /// order (`top` 0) up to the last one that is not blank: every reader
    /// pads a grid back to its screen's height with blank rows (`repair`,
    /// in every build since snapshots were repaired, long before handoff
    /// version 5), as it pads rows to its width, and 100 blank rows were
    /// 900 bytes of an idle 200x50 pane's 3 KB encoding (main and
    /// alternate screen), in every crash checkpoint, pre-copy and
    /// snapshot. The full form, which older builds wrote, reads the same.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Rows<'a>(&'a Grid);
        impl Serialize for Rows<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let g = self.0;
                let shown = (0..g.lines())
                    .rposition(|r| !g.row(r).is_blank())
                    .map_or(0, |r| r + 1);
                s.collect_seq((0..shown).map(|r| g.row(r)))
            }
        }
        let mut s = serializer.serialize_struct("Grid", 3)?;
        s.serialize_field("rows", &Rows(self))?;
        s.serialize_field("top", &0usize)?;
        s.serialize_field("cols", &self.cols)?;
        s.end()
    }
}

impl PartialEq for Grid {
    /// Two grids are equal when they show the same rows, wherever the ring
    /// happens to start.
    fn eq(&self, other: &Grid) -> bool {
        self.cols == other.cols
            && self.rows.len() == other.rows.len()
            && (0..self.rows.len()).all(|r| self.row(r) == other.row(r))
    }
}

impl Eq for Grid {}

impl Grid {
    /// Restores the invariants (at least one row, `lines` rows of `cols`
    /// cells, `top` in range) after deserialization.
    pub fn repair(&mut self, cols: u16, lines: u16) {
        let lines = usize::from(lines.max(1));
        if self.rows.is_empty() {
            self.rows.push(None);
        }
        self.top %= self.rows.len();
        self.rows.rotate_left(self.top);
        self.top = 0;
        self.rows.truncate(lines);
        self.rows.resize_with(lines, || None);
        for slot in &mut self.rows {
            // Blank rows read back from a snapshot give their cells up
            // again, so a restored idle pane is as small as a new one.
            match slot {
                Some(row) if row.is_blank() => *slot = None,
                Some(row) if row.cells.len() != usize::from(cols) => {
                    row.resize(cols, Style::DEFAULT);
                }
                _ => {}
            }
        }
        self.cols = cols;
        self.blank = blank_row(cols);
    }

    pub fn new(cols: u16, rows: u16) -> Grid {
        let rows = usize::from(rows.max(1));
        Grid {
            rows: (0..rows).map(|_| None).collect(),
            top: 0,
            cols,
            blank: blank_row(cols),
        }
    }

    pub fn lines(&self) -> usize {
        self.rows.len()
    }

    /// Every cell a default blank, no row wrapped, no marks or extras: what
    /// `Grid::new` makes.
    pub fn is_blank(&self) -> bool {
        self.rows.iter().flatten().all(|r| r.is_blank())
    }

    /// `slot`'s row, or the blank row it stands for if it was never
    /// written.
    #[inline]
    fn or_blank<'a>(&'a self, slot: &'a Slot) -> &'a Row {
        slot.as_deref().unwrap_or(self.blank)
    }

    /// Resets storage row `i` to blanks of `fill`; an unwritten row stays
    /// so when the fill is the default.
    #[inline]
    fn reset_stored(&mut self, i: usize, fill: Style) {
        let blank = self.blank;
        match &mut self.rows[i] {
            // A copy of the shared blank row: `memcpy` of the row's bytes
            // took two thirds of the instructions of filling it a cell at
            // a time, and every line `cat` prints resets a row.
            Some(row) if fill == Style::DEFAULT && row.cells.len() == blank.cells.len() => {
                row.cells.copy_from_slice(&blank.cells);
                row.wrapped = false;
                row.wrap_gap = false;
                row.marks.clear();
                row.extras = None;
            }
            Some(row) => row.reset(fill),
            None if fill != Style::DEFAULT => {
                self.rows[i] = Some(Box::new(Row::new(self.cols, fill)));
            }
            None => {}
        }
    }

    #[inline]
    fn idx(&self, r: usize) -> usize {
        let i = self.top + r;
        if i >= self.rows.len() {
            i - self.rows.len()
        } else {
            i
        }
    }

    /// Row `r` of the view; `r` must be `< lines()` (callers clamp the cursor).
    #[inline]
    pub fn row(&self, r: usize) -> &Row {
        self.or_blank(&self.rows[self.idx(r.min(self.rows.len() - 1))])
    }

    /// Row `r` of the view for writing: an unwritten row gets its cells.
    #[inline]
    pub fn row_mut(&mut self, r: usize) -> &mut Row {
        let i = self.idx(r.min(self.rows.len() - 1));
        let blank = self.blank;
        self.rows[i].get_or_insert_with(|| Box::new(blank.clone()))
    }

    /// Scrolls rows `[top, bottom]` up by `n`, filling the bottom with blanks.
    /// Rows leaving a region that starts at the first screen row are handed to
    /// `evicted` first (for scrollback).
    pub fn scroll_up(
        &mut self,
        top: usize,
        bottom: usize,
        n: usize,
        fill: Style,
        mut evicted: Option<&mut dyn FnMut(&Row)>,
    ) {
        let lines = self.rows.len();
        if top > bottom || bottom >= lines {
            return;
        }
        let n = n.min(bottom - top + 1);
        if top == 0 && bottom == lines - 1 {
            for _ in 0..n {
                let i = self.idx(0);
                if let Some(cb) = evicted.as_mut() {
                    cb(self.or_blank(&self.rows[i]));
                }
                self.reset_stored(i, fill);
                self.top = self.idx(1);
            }
            return;
        }
        for _ in 0..n {
            if top == 0 {
                if let Some(cb) = evicted.as_mut() {
                    cb(self.row(0));
                }
            }
            for r in top..bottom {
                let (a, b) = (self.idx(r), self.idx(r + 1));
                self.rows.swap(a, b);
            }
            let i = self.idx(bottom);
            self.reset_stored(i, fill);
        }
    }

    /// Scrolls rows `[top, bottom]` down by `n`, filling the top with blanks.
    pub fn scroll_down(&mut self, top: usize, bottom: usize, n: usize, fill: Style) {
        let lines = self.rows.len();
        if top > bottom || bottom >= lines {
            return;
        }
        let n = n.min(bottom - top + 1);
        if top == 0 && bottom == lines - 1 {
            for _ in 0..n {
                self.top = self.idx(lines - 1);
                let i = self.idx(0);
                self.reset_stored(i, fill);
            }
            return;
        }
        for _ in 0..n {
            for r in (top..bottom).rev() {
                let (a, b) = (self.idx(r), self.idx(r + 1));
                self.rows.swap(a, b);
            }
            let i = self.idx(top);
            self.reset_stored(i, fill);
        }
    }

    pub fn clear(&mut self, style: Style) {
        for i in 0..self.rows.len() {
            self.reset_stored(i, style);
        }
    }

    /// The rows in view order, every one with its cells, leaving the grid
    /// empty until `set_rows`.
    pub fn take_rows(&mut self) -> Vec<Row> {
        let mut rows = std::mem::take(&mut self.rows);
        let len = rows.len();
        rows.rotate_left(self.top % len.max(1));
        self.top = 0;
        rows.into_iter()
            .map(|slot| slot.map_or_else(|| self.blank.clone(), |row| *row))
            .collect()
    }

    /// Replaces the rows (view order, each `cols` cells, at least one).
    /// Blank ones give their cells up, so a reflow (a width change, as
    /// attaching from another terminal does) leaves an idle pane small.
    pub fn set_rows(&mut self, rows: Vec<Row>, cols: u16) {
        self.rows = rows
            .into_iter()
            .map(|row| (!row.is_blank()).then(|| Box::new(row)))
            .collect();
        self.top = 0;
        self.cols = cols;
        if self.rows.is_empty() {
            self.rows.push(None);
        }
        if self.blank.cells.len() != usize::from(cols) {
            self.blank = blank_row(cols);
        }
    }

    /// Changes the column count of every row (truncating or padding) and the
    /// row count: rows removed from the top go to `evicted` first, rows added
    /// appear at the bottom.
    pub fn resize(
        &mut self,
        cols: u16,
        lines: u16,
        remove_from_top: usize,
        evicted: &mut dyn FnMut(&Row),
    ) {
        let lines = usize::from(lines.max(1));
        let mut ordered: Vec<Slot> = Vec::with_capacity(self.rows.len());
        let top = self.top;
        let len = self.rows.len();
        let mut old = std::mem::take(&mut self.rows);
        old.rotate_left(top % len.max(1));
        let remove_from_top = remove_from_top.min(old.len());
        for (i, mut slot) in old.into_iter().enumerate() {
            if i < remove_from_top {
                evicted(self.or_blank(&slot));
                continue;
            }
            if let Some(row) = &mut slot {
                row.resize(cols, Style::DEFAULT);
            }
            ordered.push(slot);
        }
        ordered.truncate(lines);
        ordered.resize_with(lines, || None);
        if self.blank.cells.len() != usize::from(cols) {
            self.blank = blank_row(cols);
        }
        self.rows = ordered;
        self.top = 0;
        self.cols = cols;
    }
}

/// The alternate screen's grid, allocated on first use: most panes run a
/// shell and never switch screens, and a second grid of cells is most of an
/// idle pane's memory (200x50 cells of 12 bytes = 117 KiB). Unallocated it
/// stands for a blank grid of `cols` x `lines`, and serializes and compares
/// as one, so the wire form and `PartialEq` are those of `Grid`.
#[derive(Clone, Debug)]
pub struct LazyGrid {
    grid: Option<Box<Grid>>,
    cols: u16,
    lines: u16,
}

impl LazyGrid {
    /// A blank grid that allocates nothing until written.
    pub fn new(cols: u16, lines: u16) -> LazyGrid {
        LazyGrid {
            grid: None,
            cols,
            lines: lines.max(1),
        }
    }

    pub fn get(&self) -> Option<&Grid> {
        self.grid.as_deref()
    }

    /// The grid, allocated (blank) if it was not.
    pub fn get_mut(&mut self) -> &mut Grid {
        let (cols, lines) = (self.cols, self.lines);
        self.grid
            .get_or_insert_with(|| Box::new(Grid::new(cols, lines)))
    }

    #[cfg(test)]
    pub fn is_allocated(&self) -> bool {
        self.grid.is_some()
    }

    /// Back to unallocated, which reads as blank.
    pub fn free(&mut self) {
        self.grid = None;
    }

    /// `Grid::clear`. An unallocated grid is already clear to the default
    /// style; an allocated one is cleared in place and kept, as a program
    /// that switched screens once (`less`, `vim`) usually does again.
    pub fn clear(&mut self, style: Style) {
        match &mut self.grid {
            Some(g) => g.clear(style),
            None if style == Style::DEFAULT => {}
            None => self.get_mut().clear(style),
        }
    }

    /// `Grid::resize`; an unallocated grid only takes the new size.
    pub fn resize(
        &mut self,
        cols: u16,
        lines: u16,
        remove_from_top: usize,
        evicted: &mut dyn FnMut(&Row),
    ) {
        self.cols = cols;
        self.lines = lines.max(1);
        if let Some(g) = &mut self.grid {
            g.resize(cols, lines, remove_from_top, evicted);
        }
    }

    /// `Grid::repair`; a deserialized grid that is blank is dropped unless
    /// `keep` (the alternate screen is showing).
    pub fn repair(&mut self, cols: u16, lines: u16, keep: bool) {
        self.cols = cols;
        self.lines = lines.max(1);
        match &mut self.grid {
            Some(g) => {
                g.repair(cols, lines);
                if !keep && g.is_blank() {
                    self.grid = None;
                }
            }
            None if keep => {
                self.get_mut();
            }
            None => {}
        }
    }
}

impl PartialEq for LazyGrid {
    fn eq(&self, other: &LazyGrid) -> bool {
        match (&self.grid, &other.grid) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self.cols == other.cols && self.lines == other.lines,
            (Some(g), None) | (None, Some(g)) => {
                let blank = if self.grid.is_none() { self } else { other };
                g.cols == blank.cols && g.lines() == usize::from(blank.lines) && g.is_blank()
            }
        }
    }
}

impl Eq for LazyGrid {}

impl Serialize for LazyGrid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        if let Some(g) = &self.grid {
            return g.serialize(serializer);
        }
        // What `Grid` writes for a blank grid: no rows (readers pad).
        let mut s = serializer.serialize_struct("Grid", 3)?;
        s.serialize_field("rows", &[] as &[Row])?;
        s.serialize_field("top", &0usize)?;
        s.serialize_field("cols", &self.cols)?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for LazyGrid {
    /// Allocated as read; `repair` frees it if it is blank.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<LazyGrid, D::Error> {
        let g = Grid::deserialize(deserializer)?;
        Ok(LazyGrid {
            cols: g.cols,
            lines: u16::try_from(g.lines()).unwrap_or(u16::MAX).max(1),
            grid: Some(Box::new(g)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::cell::{Cell, Extra};

    fn put(g: &mut Grid, r: usize, s: &str) {
        for (i, ch) in s.chars().enumerate() {
            g.row_mut(r).cells[i].ch = ch;
        }
    }

    /// `content_end`'s block scan finds the last cell that differs from a
    /// default blank in any field, at every position and width (blocks and
    /// the cells before them).
    #[test]
    fn content_end_finds_the_last_non_blank_cell() {
        let odd = [
            Cell {
                ch: 'x',
                style: Style::DEFAULT,
            },
            Cell {
                ch: '\0',
                style: Style::DEFAULT,
            },
            Cell::blank(Style { fg: 1 << 31, bg: 0 }),
            Cell::blank(Style { fg: 0, bg: 1 }),
        ];
        for cols in [1u16, 7, 8, 9, 16, 17, 200] {
            let row = Row::new(cols, Style::DEFAULT);
            assert_eq!(row.content_end(), 0, "{cols}");
            for at in 0..usize::from(cols) {
                for cell in odd {
                    let mut row = Row::new(cols, Style::DEFAULT);
                    row.cells[at] = cell;
                    if at > 0 {
                        row.cells[0].ch = 'a';
                    }
                    assert_eq!(row.content_end(), at + 1, "{cols} {at} {cell:?}");
                }
            }
        }
    }

    /// The wire form is part of the handoff manifest (HANDOFF_VERSION): a
    /// reader of any version must understand it. Trailing default blanks
    /// are left out (every reader pads rows to the grid's width), and the
    /// older form that wrote them reads the same.
    #[test]
    fn row_serialized_form_is_stable() {
        let mut row = Row::new(3, Style::DEFAULT);
        row.cells[0].ch = 'a';
        row.cells[1] = Cell {
            ch: 'b',
            style: Style { fg: 7, bg: 9 },
        };
        let plain = Row::new(2, Style::DEFAULT);
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"t":""}"#);
        row.wrapped = true;
        row.marks.push((1, "\u{301}".into()));
        let want = "{\"t\":\"ab\",\"r\":[[1,0,0],[1,7,9]],\"w\":true,\"m\":[[1,\"\u{301}\"]]}";
        assert_eq!(serde_json::to_string(&row).unwrap(), want);
        let older =
            "{\"t\":\"ab \",\"r\":[[1,0,0],[1,7,9],[1,0,0]],\"w\":true,\"m\":[[1,\"\u{301}\"]]}";
        for json in [want, older] {
            let text = format!("{{\"rows\":[{json}],\"top\":0,\"cols\":3}}");
            let mut read: Grid = serde_json::from_str(&text).unwrap();
            read.repair(3, 1);
            assert_eq!(read.row(0), &row, "{json}");
        }
        // A blank row with a mark on its last cell keeps the mark's column.
        let mut marked = Row::new(3, Style::DEFAULT);
        marked.marks.push((2, "\u{301}".into()));
        let text = format!(
            "{{\"rows\":[{}],\"top\":0,\"cols\":3}}",
            serde_json::to_string(&marked).unwrap()
        );
        let mut read: Grid = serde_json::from_str(&text).unwrap();
        read.repair(3, 1);
        assert_eq!(read.row(0), &marked);
    }

    #[test]
    fn full_scroll_is_a_rotation() {
        let mut g = Grid::new(4, 3);
        put(&mut g, 0, "a");
        put(&mut g, 1, "b");
        put(&mut g, 2, "c");
        let mut gone = Vec::new();
        g.scroll_up(
            0,
            2,
            1,
            Style::DEFAULT,
            Some(&mut |r: &Row| gone.push(r.text())),
        );
        assert_eq!(gone, vec!["a"]);
        assert_eq!(
            (g.row(0).text(), g.row(1).text(), g.row(2).text()),
            ("b".into(), "c".into(), "".into())
        );
        g.scroll_down(0, 2, 1, Style::DEFAULT);
        assert_eq!((g.row(0).text(), g.row(1).text()), ("".into(), "b".into()));
    }

    fn written_rows(g: &Grid) -> usize {
        g.rows.iter().filter(|r| r.is_some()).count()
    }

    #[test]
    fn rows_get_cells_on_first_write_and_serialize_as_blanks() {
        // An unwritten row is one null word in the grid's ring.
        assert_eq!(std::mem::size_of::<Slot>(), 8);
        let mut g = Grid::new(4, 3);
        assert_eq!(written_rows(&g), 0, "a new grid holds no cells");
        assert_eq!(g.row(2), &Row::new(4, Style::DEFAULT));
        put(&mut g, 1, "ab");
        assert_eq!(written_rows(&g), 1);
        // The same grid with every row written has the same form.
        let lazy = serde_json::to_string(&g).unwrap();
        let mut full = g.clone();
        for r in 0..3 {
            full.row_mut(r);
        }
        assert_eq!(written_rows(&full), 3);
        assert_eq!(serde_json::to_string(&full).unwrap(), lazy);
        assert_eq!(full, g);
        // Read back and repaired, blank rows give their cells up again.
        let mut back: Grid = serde_json::from_str(&lazy).unwrap();
        back.repair(4, 3);
        assert_eq!(written_rows(&back), 1);
        assert_eq!(back, g);
        // Scrolling in default blanks allocates nothing; coloured ones do.
        g.scroll_up(0, 2, 1, Style::DEFAULT, None);
        assert_eq!(written_rows(&g), 1);
        g.scroll_up(0, 2, 1, Style { fg: 0, bg: 3 }, None);
        assert_eq!(g.row(2).cells[0].style.bg, 3);
        // A resize keeps unwritten rows so, at the new width.
        g.resize(6, 5, 0, &mut |_| {});
        assert_eq!(g.row(4), &Row::new(6, Style::DEFAULT));
        assert_eq!(g.row(2).cells.len(), 6);
        assert_eq!(written_rows(&g), 1);
        // So do the rows a reflow hands back blank.
        let rows = g.take_rows();
        assert_eq!(rows.len(), 5);
        g.set_rows(rows, 6);
        assert_eq!(written_rows(&g), 1);
    }

    #[test]
    fn trailing_blank_rows_are_left_out_and_read_back() {
        let mut g = Grid::new(4, 5);
        put(&mut g, 4, "x");
        // The ring's top moves: the rows go out in view order.
        g.scroll_up(0, 4, 2, Style::DEFAULT, None);
        put(&mut g, 0, "a");
        put(&mut g, 3, "b");
        let text = serde_json::to_string(&g).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["rows"].as_array().unwrap().len(), 4, "{text}");
        assert_eq!(v["top"], 0);
        let mut back: Grid = serde_json::from_str(&text).unwrap();
        back.repair(4, 5);
        assert_eq!(back, g);
        assert_eq!(back.lines(), 5);
        // A blank grid, allocated or not, is no rows at all.
        let blank = serde_json::to_string(&Grid::new(4, 5)).unwrap();
        assert_eq!(blank, r#"{"rows":[],"top":0,"cols":4}"#);
        assert_eq!(serde_json::to_string(&LazyGrid::new(4, 5)).unwrap(), blank);
        let mut back: LazyGrid = serde_json::from_str(&blank).unwrap();
        back.repair(4, 5, false);
        assert_eq!(back, LazyGrid::new(4, 5));
        let mut shown: LazyGrid = serde_json::from_str(&blank).unwrap();
        shown.repair(4, 5, true);
        assert_eq!(shown.get().map(Grid::lines), Some(5));
    }

    #[test]
    fn marks_allocate_only_while_a_row_has_some() {
        // Every row of every pane has a header, written or not: it stays
        // five words, and an unmarked row's marks are a null pointer.
        assert!(std::mem::size_of::<Row>() <= 40);
        let mut row = Row::new(4, Style::DEFAULT);
        assert!(row.marks.0.is_none());
        row.add_mark(1, '\u{301}');
        row.add_mark(1, '\u{308}');
        assert_eq!(row.marks_at(1), Some("\u{301}\u{308}"));
        let back: Row = serde_json::from_str(&serde_json::to_string(&row).unwrap()).unwrap();
        assert_eq!(back.marks_at(1), Some("\u{301}\u{308}"));
        row.delete_chars(0, 2, usize::MAX, Style::DEFAULT);
        assert_eq!(row.marks_at(1), None);
        assert!(row.marks.0.is_none(), "the last mark gone frees the table");
        let blank: Row = serde_json::from_str(r#"{"t":"ab"}"#).unwrap();
        assert!(blank.marks.0.is_none());
    }

    /// A row scrolled off and reused comes back as a default blank row
    /// whatever it held (wrap flags, marks, extras), by either reset: the
    /// copy of the shared blank row (default fill) or the fill with a
    /// colour (BCE), in a full-screen scroll and in a region.
    #[test]
    fn a_reused_row_is_blank_whatever_it_held() {
        let extra = Extra {
            ul: 5,
            ..Extra::default()
        };
        for fill in [Style::DEFAULT, Style { fg: 0, bg: 4 }] {
            for (top, bottom) in [(0, 2), (1, 2)] {
                let mut g = Grid::new(6, 3);
                for r in 0..3 {
                    put(&mut g, r, "abcdef");
                    let row = g.row_mut(r);
                    row.wrapped = true;
                    row.wrap_gap = true;
                    row.add_mark(2, '\u{301}');
                    row.set_extra(1, 3, Some(&extra));
                }
                g.scroll_up(top, bottom, 1, fill, None);
                let row = g.row(2);
                assert_eq!(row, &Row::new(6, fill), "{fill:?} {top}");
                assert!(row.marks.is_empty() && row.extras.is_none());
                assert_eq!(g.row(0).text(), "abc\u{301}def");
            }
        }
    }

    #[test]
    fn region_scroll_leaves_outside_rows() {
        let mut g = Grid::new(4, 4);
        for (r, s) in ["a", "b", "c", "d"].iter().enumerate() {
            put(&mut g, r, s);
        }
        g.scroll_up(1, 2, 5, Style::DEFAULT, None);
        let texts: Vec<String> = (0..4).map(|r| g.row(r).text()).collect();
        assert_eq!(texts, ["a", "", "", "d"]);
    }

    #[test]
    fn insert_and_delete_chars() {
        let mut r = Row::new(5, Style::DEFAULT);
        for (i, ch) in "abcde".chars().enumerate() {
            r.cells[i].ch = ch;
        }
        r.insert_blanks(1, 2, usize::MAX, Style::DEFAULT);
        assert_eq!(r.text(), "a  bc");
        r.delete_chars(0, 3, usize::MAX, Style::DEFAULT);
        assert_eq!(r.text(), "bc");
    }
}
