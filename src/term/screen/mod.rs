//! The emulated terminal's state and the primitive operations on it (print,
//! move, scroll, erase). `handler.rs` maps vte's callbacks onto these;
//! `redraw.rs` and `capture.rs` read the state back out.
//!
//! Invariants kept by every method: `cursor.row < rows`, `cursor.col < cols`;
//! `scroll_top < scroll_bottom < rows`; `tabs.len() == cols`; the grids have
//! exactly `rows` x `cols` cells. Everything here is serializable and
//! compared by `PartialEq` for the round-trip tests.

use serde::{Deserialize, Serialize};
use unicode_width::UnicodeWidthChar;

use super::cell::{Cell, Extra, SPACER, Style, WIDE};
use super::grid::{Grid, LazyGrid, Row};
use super::modes::Modes;
use super::scrollback::Scrollback;
use super::{TermConfig, TermEvent};

mod editing;
mod motion;
mod resize;

pub use resize::line_into_row;

/// Events kept for `take_events` at most; older ones are dropped if the
/// server does not collect them.
pub const MAX_EVENTS: usize = 1024;
/// Reply bytes kept for `take_replies` at most.
pub const MAX_REPLIES: usize = 64 * 1024;
/// Titles longer than this are cut (in chars).
pub const MAX_TITLE: usize = 4096;
/// xterm keeps 10 titles on its stack; so do we.
pub const MAX_TITLE_STACK: usize = 10;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub row: usize,
    pub col: usize,
    /// The last column was just written: the next printable wraps first.
    pub pending_wrap: bool,
}

impl Cursor {
    /// Moves right to column `to` after drawing up to it: past the row's
    /// end the cursor stays on the last column with a wrap pending.
    /// Returns whether it did.
    pub fn advance_to(&mut self, to: usize, cols: usize) -> bool {
        let wrap = to >= cols;
        self.col = if wrap { cols - 1 } else { to };
        self.pending_wrap = wrap;
        wrap
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Charset {
    #[default]
    Ascii,
    DecSpecial,
}

/// What DECSC saves and DECRC restores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedCursor {
    pub cursor: Cursor,
    pub pen: Style,
    /// Underline colour and hyperlink, saved with the pen as alacritty does.
    #[serde(default)]
    pub pen_extra: Extra,
    pub origin: bool,
    pub charsets: [Charset; 4],
    pub active_charset: usize,
}

/// Fields at their default are left out of the encoding (handoff version 6
/// on) and read back as the default: a new pane's modes, charsets, empty
/// title and stacks were about 600 of the 1,100 bytes its encoding kept
/// after the tab stops, in every crash checkpoint and pre-copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Screen {
    pub config: TermConfig,
    pub cols: usize,
    pub rows: usize,
    pub main: Grid,
    /// Allocated on first switch to it (see `LazyGrid`); always allocated
    /// while `modes.alt_screen`.
    pub alt: LazyGrid,
    pub scrollback: Scrollback,
    pub cursor: Cursor,
    #[serde(default, skip_serializing_if = "is_default")]
    pub pen: Style,
    /// The pen's underline colour and hyperlink, stamped into rows' side
    /// tables (see `row::RowExtras`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pen_extra: Extra,
    #[serde(default, skip_serializing_if = "is_default")]
    pub saved_main: Option<SavedCursor>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub saved_alt: Option<SavedCursor>,
    pub scroll_top: usize,
    pub scroll_bottom: usize,
    /// A stop per column. Left out of the encoding while they are the
    /// default every-8 stops (`default_tabs`), as nearly always: the
    /// array of 200 `true`/`false` was 1.2 KB of an idle 200-column
    /// pane's 2.3 KB encoding, in every crash checkpoint and pre-copy.
    /// Reading a missing array gives the default stops (`repair`); a
    /// reader before handoff version 6 needs it, hence that version.
    #[serde(default, skip_serializing_if = "tabs_are_default")]
    pub tabs: Vec<bool>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub charsets: [Charset; 4],
    #[serde(default, skip_serializing_if = "is_default")]
    pub active_charset: usize,
    #[serde(default, skip_serializing_if = "is_default")]
    pub modes: Modes,
    #[serde(default, skip_serializing_if = "is_default")]
    pub title: String,
    /// XTWINOPS 22/23's stack of window titles, newest last.
    #[serde(default, skip_serializing_if = "is_default")]
    pub title_stack: Vec<String>,
    /// The icon titles of the same entries: as long as `title_stack`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub icon_stack: Vec<String>,
    /// The icon title (OSC 1) when it differs from the window title: `None`
    /// while OSC 0 set both (the icon title is then `title`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub icon: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub cwd: Option<String>,
    /// Colours set by OSC 10/11, reported back by OSC 10/11 queries.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fg_override: Option<(u8, u8, u8)>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub bg_override: Option<(u8, u8, u8)>,
    /// Palette entries (0..=255), special colours (256..=260) and dynamic
    /// colours 12..=19 (1012..=1019) set by OSC 4, 5 and 12..19, sorted by
    /// key: reported back by their queries (`dec.rs`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub colors: Vec<(u16, (u8, u8, u8))>,
    /// Mirror of vte's private "preceding char" for REP, so a deserialized
    /// terminal can prime a fresh `Processor` with it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub last_char: Option<char>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub events: Vec<TermEvent>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub replies: Vec<u8>,
    /// Left and right margins (DECSLRM), inclusive columns, while DECLRMM
    /// is set and they are narrower than the screen; `None` otherwise.
    #[serde(default, skip_serializing_if = "is_default")]
    pub lr: Option<(usize, usize)>,
    /// DECSCL's conformance level (1 for VT100 .. 5 for VT500); 0 reads
    /// as 5, the level ptyd starts at.
    #[serde(default, skip_serializing_if = "is_default")]
    pub level: u8,
    /// DECSACE: 2 makes DECCARA/DECRARA work on the rectangle, 0 and 1 on
    /// the stream of cells from its first corner to its last.
    #[serde(default, skip_serializing_if = "is_default")]
    pub rect_extent: u8,
    /// The last protection started was SPA's (ISO), not DECSCA's: ED, EL
    /// and ECH spare protected cells too, as in xterm.
    #[serde(default, skip_serializing_if = "is_default")]
    pub protect_iso: bool,
    /// Private modes XTSAVE saved, with their values, for XTRESTORE; one
    /// entry per mode, so at most the modes the model knows.
    #[serde(default, skip_serializing_if = "is_default")]
    pub saved_modes: Vec<(u16, bool)>,
    /// The size in pixels of a character cell of the client's terminal
    /// (width, height), when the server knows it: XTWINOPS 14 and 16 are
    /// answered from it, and pass on to the client without it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub cell_pixels: Option<(u16, u16)>,
    /// Set by a query handler while a sequence is dispatched: the sequence
    /// was answered here and must not be forwarded. Transient.
    #[serde(skip)]
    pub swallow: bool,
    /// Set when the active screen changed (47, 1047, 1049); `Terminal`
    /// takes it after each `feed` into its count. Transient.
    #[serde(skip)]
    pub switched: bool,
}

// Units of work done by the model on this thread (cells written or moved,
// rows moved, loop steps): tests bound what one sequence costs. Per thread,
// since tests run side by side. (Clippy 1.96 asks for the `const` that is
// there.)
#[cfg(test)]
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)]
    pub static WORK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` units of work (`WORK`) in tests; nothing otherwise.
#[inline(always)]
pub fn work(n: usize) {
    #[cfg(test)]
    WORK.with(|w| w.set(w.get() + n as u64));
    let _ = n;
}

/// Whether `value` is its type's default: a field left out of an encoding
/// (`skip_serializing_if`) that reads back as it (`serde(default)`).
pub(super) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn default_tabs(cols: usize) -> Vec<bool> {
    (0..cols).map(is_default_stop).collect()
}

fn is_default_stop(col: usize) -> bool {
    col % 8 == 0 && col != 0
}

/// Whether `tabs` is `default_tabs` of its length (an empty array is not:
/// it reads back as the default, which only a screen of no columns has).
fn tabs_are_default(tabs: &[bool]) -> bool {
    !tabs.is_empty()
        && tabs
            .iter()
            .enumerate()
            .all(|(c, &t)| t == is_default_stop(c))
}

impl Screen {
    pub fn new(cols: u16, rows: u16, config: TermConfig) -> Screen {
        let cols = cols.max(1);
        let rows = rows.max(1);
        Screen {
            scrollback: Scrollback::new(config.scrollback_lines, config.scrollback_bytes),
            config,
            cols: usize::from(cols),
            rows: usize::from(rows),
            main: Grid::new(cols, rows),
            alt: LazyGrid::new(cols, rows),
            cursor: Cursor::default(),
            pen: Style::DEFAULT,
            pen_extra: Extra::default(),
            saved_main: None,
            saved_alt: None,
            scroll_top: 0,
            scroll_bottom: usize::from(rows) - 1,
            tabs: default_tabs(usize::from(cols)),
            charsets: [Charset::Ascii; 4],
            active_charset: 0,
            modes: Modes::default(),
            title: String::new(),
            title_stack: Vec::new(),
            icon_stack: Vec::new(),
            icon: None,
            cwd: None,
            fg_override: None,
            bg_override: None,
            colors: Vec::new(),
            last_char: None,
            events: Vec::new(),
            replies: Vec::new(),
            lr: None,
            level: 0,
            rect_extent: 0,
            protect_iso: false,
            saved_modes: Vec::new(),
            cell_pixels: None,
            swallow: false,
            switched: false,
        }
    }

    /// Restores every invariant listed in the module doc; used after
    /// deserializing, where the data may come from another build.
    pub fn repair(&mut self) {
        let cols = self.cols.clamp(1, usize::from(u16::MAX)) as u16;
        let rows = self.rows.clamp(1, usize::from(u16::MAX)) as u16;
        self.cols = usize::from(cols);
        self.rows = usize::from(rows);
        self.main.repair(cols, rows);
        self.alt.repair(cols, rows, self.modes.alt_screen);
        self.cursor.row = self.cursor.row.min(self.rows - 1);
        self.cursor.col = self.cursor.col.min(self.cols - 1);
        if self.scroll_bottom >= self.rows || self.scroll_top >= self.scroll_bottom {
            self.scroll_top = 0;
            self.scroll_bottom = self.rows - 1;
        }
        if self.tabs.is_empty() {
            // Left out as the default (handoff version 6 on).
            self.tabs = default_tabs(self.cols);
        } else {
            self.tabs.resize(self.cols, false);
        }
        self.active_charset &= 3;
        self.lr = self
            .lr
            .filter(|&(l, r)| self.modes.lr_margins && l < r && r < self.cols);
        if self.level > 5 {
            self.level = 0;
        }
        for saved in [&mut self.saved_main, &mut self.saved_alt]
            .into_iter()
            .flatten()
        {
            saved.cursor.row = saved.cursor.row.min(self.rows - 1);
            saved.cursor.col = saved.cursor.col.min(self.cols - 1);
            saved.active_charset &= 3;
        }
        self.colors.sort_unstable_by_key(|(k, _)| *k);
        self.colors.dedup_by_key(|(k, _)| *k);
        self.colors
            .retain(|(k, _)| *k < 261 || (1012..1020).contains(k));
        self.saved_modes.truncate(256);
        self.events.truncate(MAX_EVENTS);
        self.replies.truncate(MAX_REPLIES);
        self.title_stack.truncate(MAX_TITLE_STACK);
        // An encoding from before icon titles has window titles only: the
        // icon titles followed them.
        self.icon_stack.truncate(self.title_stack.len());
        let n = self.icon_stack.len();
        self.icon_stack
            .extend(self.title_stack[n..].iter().cloned());
        self.modes
            .kitty_stack
            .truncate(super::modes::KITTY_STACK_MAX);
    }

    #[inline]
    pub fn grid(&self) -> &Grid {
        match self.alt.get() {
            // `alt` is always allocated while it is showing.
            Some(alt) if self.modes.alt_screen => alt,
            _ => &self.main,
        }
    }

    #[inline]
    pub fn grid_mut(&mut self) -> &mut Grid {
        if self.modes.alt_screen {
            self.alt.get_mut()
        } else {
            &mut self.main
        }
    }

    pub fn push_event(&mut self, e: TermEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.remove(0);
        }
        self.events.push(e);
    }

    pub fn reply(&mut self, bytes: &[u8]) {
        if self.replies.len() + bytes.len() <= MAX_REPLIES {
            self.replies.extend_from_slice(bytes);
        }
        self.swallow = true;
    }

    /// Ground-state bytes: text and C0 controls, handled here rather than by
    /// vte because this is the hot path. Mirrors vte 0.15 exactly: the run is
    /// UTF-8 decoded, an invalid sequence draws U+FFFD except a lone byte in
    /// 0x80..=0x9F (a C1 control, which vte's ansi layer ignores), C1
    /// controls encoded as UTF-8 are ignored, DEL is "printed" (and
    /// dropped as zero-width by `print`).
    pub fn text(&mut self, mut bytes: &[u8]) {
        // Short runs of printable ASCII between escape sequences are the
        // common case: skip UTF-8 validation and the control scan.
        if bytes.len() <= 64 && bytes.iter().all(|b| (0x20..0x7F).contains(b)) {
            self.print_ascii(bytes);
            return;
        }
        while !bytes.is_empty() {
            match std::str::from_utf8(bytes) {
                Ok(s) => {
                    self.text_str(s);
                    return;
                }
                Err(e) => {
                    let (valid, after) = bytes.split_at(e.valid_up_to());
                    self.text_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(len) => {
                            if !(len == 1 && after[0] <= 0x9F) {
                                self.print('\u{FFFD}');
                            }
                            bytes = after.get(len..).unwrap_or_default();
                        }
                        None => {
                            self.print('\u{FFFD}');
                            return;
                        }
                    }
                }
            }
        }
    }

    fn text_str(&mut self, s: &str) {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if (0x20..0x7F).contains(&b) {
                let end = bytes[i..]
                    .iter()
                    .position(|b| !(0x20..0x7F).contains(b))
                    .map_or(bytes.len(), |n| i + n);
                self.print_ascii(&bytes[i..end]);
                i = end;
            } else if b < 0x20 {
                self.execute(b);
                i += 1;
            } else {
                // `i` is on a char boundary: every ASCII byte is one.
                let c = s[i..].chars().next().unwrap_or('\u{FFFD}');
                if !('\u{80}'..='\u{9f}').contains(&c) {
                    self.print(c);
                }
                i += c.len_utf8();
            }
        }
    }

    /// C0 controls, as vte's ansi layer maps them.
    pub fn execute(&mut self, b: u8) {
        match b {
            0x07 => self.push_event(TermEvent::Bell),
            0x08 => self.backspace(),
            0x09 => self.tab_forward(1),
            0x0A..=0x0C => self.linefeed(),
            0x0D => self.carriage_return(),
            0x0E => self.active_charset = 1,
            0x0F => self.active_charset = 0,
            _ => {}
        }
    }

    /// REP: repeats the last printed character `n` times, wrapping as
    /// printing does (as xterm does). A count beyond what can change the
    /// screen is cut: after `rows + 2` lines' worth every cell the
    /// repetition reaches holds the character and the screen repeats with
    /// the period of a line, so the rest of the count is taken modulo that
    /// (only scrollback gets fewer copies). One REP thus costs at most a
    /// screenful and a line of cells, as ED or DECALN does, however large
    /// its count: 65535 would otherwise draw (and scroll) 65535 cells for
    /// six bytes of input.
    pub fn repeat(&mut self, n: u16) {
        let Some(c) = self.last_char else {
            return;
        };
        let width = match c.width() {
            Some(0) | None => {
                // Marks on one cell: a few are as good as many.
                for _ in 0..n.min(4) {
                    self.print(c);
                }
                return;
            }
            Some(w) => w,
        };
        let per_line = ((self.right() + 1 - self.left()) / width).max(1);
        let settle = (self.rows + 2) * self.cols;
        let mut n = usize::from(n);
        if let Some((left, right)) = self.lr
            && n > settle
            && width == 1
            && self.modes.autowrap
            && !self.modes.insert
            && self.in_margins()
        {
            // Inside left/right margins each wrap scrolls the region cell by
            // cell: the end state is written directly instead. Every cell
            // of the region holds the character up to where the count
            // leaves the cursor, on the bottom row; the rest of that row was
            // scrolled in blank.
            let w = right + 1 - left;
            let before = if self.cursor.pending_wrap {
                w
            } else {
                self.cursor.col - left
            };
            let shown = if self.charsets[self.active_charset & 3] == Charset::DecSpecial {
                dec_special(c)
            } else {
                c
            };
            let (top, bottom) = (self.scroll_top, self.scroll_bottom);
            let last = (before + n) % w;
            if bottom > top {
                self.fill_region(top, bottom - 1, left, right, shown);
            }
            let fill = self.pen.erase_part();
            self.grid_mut().row_mut(bottom).erase(left, right + 1, fill);
            let written = if last == 0 { w } else { last };
            self.fill_region(bottom, bottom, left, left + written - 1, shown);
            self.cursor.row = bottom;
            self.cursor.pending_wrap = last == 0;
            self.cursor.col = if last == 0 { right } else { left + last };
            return;
        }
        if n > settle + per_line {
            n = settle + (n - settle) % per_line;
        }
        for _ in 0..n {
            work(1);
            self.print(c);
        }
    }

    /// The left margin (column), 0 without DECSLRM margins.
    #[inline]
    pub fn left(&self) -> usize {
        self.lr.map_or(0, |m| m.0)
    }

    /// The right margin (column), the last column without DECSLRM margins.
    #[inline]
    pub fn right(&self) -> usize {
        self.lr.map_or(self.cols - 1, |m| m.1)
    }

    /// Whether column `col` is inside the left and right margins.
    #[inline]
    pub fn in_lr(&self, col: usize) -> bool {
        self.lr.is_none_or(|(l, r)| col >= l && col <= r)
    }

    /// Whether the cursor is inside all four margins.
    pub(super) fn in_margins(&self) -> bool {
        (self.scroll_top..=self.scroll_bottom).contains(&self.cursor.row)
            && self.in_lr(self.cursor.col)
    }

    /// Bulk write of printable ASCII (callers pass nothing else): one row
    /// slice per screen row instead of a call per character.
    pub fn print_ascii(&mut self, run: &[u8]) {
        self.print_ascii_prefix(run);
    }

    /// Draws the printable ASCII at the start of `input` and returns how
    /// many bytes that was. The run's end is found while its cells are
    /// written, so each byte is looked at once: runs between SGRs are a few
    /// bytes long, and a separate scan plus a call per run cost more than
    /// the drawing.
    #[inline]
    pub fn print_ascii_prefix(&mut self, input: &[u8]) -> usize {
        let printable = |b: &u8| (0x20..0x7F).contains(b);
        if self.modes.insert
            || self.lr.is_some()
            || self.charsets[self.active_charset & 3] != Charset::Ascii
        {
            let n = input
                .iter()
                .position(|b| !printable(b))
                .unwrap_or(input.len());
            for &b in &input[..n] {
                self.print(char::from(b));
            }
            return n;
        }
        let cols = self.cols;
        let pen = self.pen;
        let extra = self.pen_extra.non_empty().cloned();
        let mut i = 0;
        loop {
            if self.cursor.pending_wrap {
                if !input.get(i).is_some_and(printable) {
                    break;
                }
                if self.modes.autowrap {
                    self.wrap_line();
                }
                self.cursor.pending_wrap = false;
            }
            let (row, col) = (self.cursor.row, self.cursor.col);
            let r = self.grid_mut().row_mut(row);
            let n = r.write_ascii(col, &input[i..], pen, extra.as_ref());
            if n == 0 {
                break;
            }
            i += n;
            if !self.cursor.advance_to(col + n, cols) {
                break;
            }
        }
        if let Some(&last) = i.checked_sub(1).and_then(|l| input.get(l)) {
            self.last_char = Some(char::from(last));
        }
        i
    }

    /// Writes one printable character at the cursor.
    #[inline]
    pub fn print(&mut self, c: char) {
        self.last_char = Some(c);
        let c = if self.charsets[self.active_charset & 3] == Charset::DecSpecial {
            dec_special(c)
        } else {
            c
        };
        let width = if c.is_ascii() {
            if c < ' ' || c == '\x7f' {
                return;
            }
            1
        } else {
            match c.width() {
                Some(w) => w,
                None => return,
            }
        };
        if width == 0 {
            self.add_mark(c);
            return;
        }
        work(1);
        // Inside left/right margins a line ends at the right margin.
        let cols = if self.lr.is_some() && self.cursor.col <= self.right() {
            self.right() + 1
        } else {
            self.cols
        };
        if width > self.right() + 1 - self.left() {
            return;
        }
        if self.cursor.pending_wrap {
            if self.modes.autowrap {
                self.wrap_line();
            } else {
                self.cursor.col = cols - width;
            }
            self.cursor.pending_wrap = false;
        }
        if self.cursor.col + width > cols {
            // A wide character that does not fit in the last column wraps
            // early, leaving that column as it was (as vt100 does), or is
            // pushed back into the line without autowrap.
            if self.modes.autowrap {
                self.wrap_line_with_gap(true);
            } else {
                self.cursor.col = cols - width;
            }
        }
        let (row, col, pen, insert) = (
            self.cursor.row,
            self.cursor.col,
            self.pen,
            self.modes.insert,
        );
        let extra = self.pen_extra.non_empty().cloned();
        let r = self.grid_mut().row_mut(row);
        if insert {
            r.insert_blanks(col, width, cols, pen.erase_part());
        }
        r.split_wide_left(col, pen.erase_part());
        r.split_wide_right(col + width, pen.erase_part());
        if !r.marks.is_empty() {
            r.marks.retain(|(mc, _)| usize::from(*mc) != col);
        }
        if width == 1 {
            r.cells[col] = Cell { ch: c, style: pen };
        } else {
            r.cells[col] = Cell {
                ch: c,
                style: Style {
                    fg: pen.fg,
                    bg: pen.bg | WIDE,
                },
            };
            r.cells[col + 1] = Cell {
                ch: ' ',
                style: Style {
                    fg: pen.fg,
                    bg: pen.bg | SPACER,
                },
            };
        }
        r.set_extra(col, col + width, extra.as_ref());
        self.cursor.advance_to(col + width, cols);
    }

    fn add_mark(&mut self, c: char) {
        let (row, mut col) = (self.cursor.row, self.cursor.col);
        if !self.cursor.pending_wrap {
            if col == 0 {
                return;
            }
            col -= 1;
        }
        let r = self.grid_mut().row_mut(row);
        if col > 0 && r.cells[col].is_spacer() {
            col -= 1;
        }
        r.add_mark(col, c);
    }

    fn wrap_line(&mut self) {
        self.wrap_line_with_gap(false);
    }

    /// Marks the row before moving down: `index` may scroll it into
    /// history, which copies the flags.
    fn wrap_line_with_gap(&mut self, gap: bool) {
        let row = self.cursor.row;
        let r = self.grid_mut().row_mut(row);
        r.wrapped = true;
        r.wrap_gap = gap;
        self.index();
        self.cursor.col = self.left();
    }

    /// Pushes an evicted main-screen row into scrollback.
    fn scroll_region_up(&mut self, top: usize, bottom: usize, n: usize) {
        let fill = self.pen.erase_part();
        if let Some((left, right)) = self.lr {
            self.scroll_rect(top, bottom, left, right, n, true);
        } else if !self.modes.alt_screen && top == 0 {
            let Screen {
                main, scrollback, ..
            } = self;
            main.scroll_up(
                top,
                bottom,
                n,
                fill,
                Some(&mut |row: &Row| scrollback.push_row(row)),
            );
        } else {
            self.grid_mut().scroll_up(top, bottom, n, fill, None);
        }
    }

    /// IND / LF: down one row, scrolling the region at its bottom.
    pub fn index(&mut self) {
        self.cursor.pending_wrap = false;
        if self.cursor.row == self.scroll_bottom {
            // Outside the left/right margins nothing scrolls (xterm).
            if self.in_lr(self.cursor.col) {
                self.scroll_region_up(self.scroll_top, self.scroll_bottom, 1);
            }
        } else if self.cursor.row + 1 < self.rows {
            self.cursor.row += 1;
        }
    }

    pub fn linefeed(&mut self) {
        self.index();
        if self.modes.newline {
            self.cursor.col = 0;
        }
    }

    /// RI: up one row, scrolling the region down at its top.
    pub fn reverse_index(&mut self) {
        self.cursor.pending_wrap = false;
        if self.cursor.row == self.scroll_top {
            if self.in_lr(self.cursor.col) {
                self.scroll_down(1);
            }
        } else if self.cursor.row > 0 {
            self.cursor.row -= 1;
        }
    }

    pub fn scroll_up(&mut self, n: usize) {
        self.scroll_region_up(self.scroll_top, self.scroll_bottom, n);
    }

    pub fn scroll_down(&mut self, n: usize) {
        let fill = self.pen.erase_part();
        let (t, b) = (self.scroll_top, self.scroll_bottom);
        if let Some((left, right)) = self.lr {
            self.scroll_rect(t, b, left, right, n, false);
        } else {
            self.grid_mut().scroll_down(t, b, n, fill);
        }
    }

    pub fn save_cursor(&mut self) {
        let saved = SavedCursor {
            cursor: self.cursor,
            pen: self.pen,
            pen_extra: self.pen_extra.clone(),
            origin: self.modes.origin,
            charsets: self.charsets,
            active_charset: self.active_charset,
        };
        if self.modes.alt_screen {
            self.saved_alt = Some(saved);
        } else {
            self.saved_main = Some(saved);
        }
    }

    pub fn restore_cursor(&mut self) {
        let saved = if self.modes.alt_screen {
            &self.saved_alt
        } else {
            &self.saved_main
        };
        let saved = saved.clone().unwrap_or_default();
        // The pending wrap comes back too (xterm's `wrap_flag`), unless a
        // resize since moved the cursor off the last column.
        self.cursor = saved.cursor;
        self.cursor.row = self.cursor.row.min(self.rows - 1);
        self.cursor.col = self.cursor.col.min(self.cols - 1);
        self.cursor.pending_wrap = saved.cursor.pending_wrap && saved.cursor.col == self.cols - 1;
        self.pen = saved.pen;
        self.pen_extra = saved.pen_extra;
        self.modes.origin = saved.origin;
        self.charsets = saved.charsets;
        self.active_charset = saved.active_charset & 3;
    }

    /// Switches to or from the alternate screen (47, 1047, 1049). As in
    /// xterm, 1049 saves (set) or restores (reset) the cursor even when the
    /// screen does not change; the switch and the clear only happen on a
    /// change. The cursor does not move, so its pending wrap stays (1049's
    /// reset restores the saved one).
    pub fn set_alt_screen(&mut self, on: bool, mode: u16) {
        if on && mode == 1049 {
            self.save_cursor();
        }
        if on != self.modes.alt_screen {
            self.switched = true;
            if on {
                self.modes.alt_screen = true;
                if mode != 47 {
                    let fill = self.pen.erase_part();
                    self.alt.clear(fill);
                }
                // Allocated now, while it shows; 47 shows what it held.
                self.alt.get_mut();
            } else {
                // 1047 clears on exit: nothing left to keep, so the grid is
                // freed. 47 and 1049 leave the content for a later 47 to
                // show again, as xterm does, so their grid stays.
                if mode == 1047 {
                    self.alt.free();
                }
                self.modes.alt_screen = false;
            }
        }
        if !on && mode == 1049 {
            self.restore_cursor();
        }
    }

    pub fn decaln(&mut self) {
        let g = self.grid_mut();
        for r in 0..g.lines() {
            let row = g.row_mut(r);
            row.reset(Style::DEFAULT);
            row.cells.fill(Cell {
                ch: 'E',
                style: Style::DEFAULT,
            });
        }
        self.scroll_top = 0;
        self.scroll_bottom = self.rows - 1;
        self.lr = None;
        self.goto(0, 0);
    }

    /// RIS: back to power-on state, keeping scrollback, title and config.
    pub fn reset(&mut self) {
        let fresh = Screen::new(self.cols as u16, self.rows as u16, self.config.clone());
        let scrollback = std::mem::replace(&mut self.scrollback, fresh.scrollback.clone());
        let title = std::mem::take(&mut self.title);
        let cwd = self.cwd.take();
        let events = std::mem::take(&mut self.events);
        let replies = std::mem::take(&mut self.replies);
        let last_char = self.last_char;
        let cell_pixels = self.cell_pixels;
        let swallow = self.swallow;
        let switched = self.switched || self.modes.alt_screen;
        *self = fresh;
        self.switched = switched;
        self.scrollback = scrollback;
        self.title = title;
        self.cwd = cwd;
        self.events = events;
        self.replies = replies;
        self.last_char = last_char;
        self.cell_pixels = cell_pixels;
        self.swallow = swallow;
    }
}

/// DEC special graphics (line drawing), as `ESC ( 0` selects.
fn dec_special(c: char) -> char {
    vte::ansi::StandardCharset::SpecialCharacterAndLineDrawing.map(c)
}
#[cfg(test)]
mod tests {
    use crate::term::Terminal;

    fn encode(t: &Terminal) -> serde_json::Value {
        serde_json::to_value(t).unwrap()
    }

    fn decode(v: serde_json::Value) -> Terminal {
        serde_json::from_value(v).unwrap()
    }

    /// Default tab stops are left out of the encoding and read back as the
    /// default; stops a program set travel in full; the encoding before
    /// handoff version 6, which always wrote the array, reads the same.
    #[test]
    fn tab_stops_travel_only_when_set() {
        let mut t = Terminal::new(200, 50, Default::default());
        let v = encode(&t);
        assert!(v["screen"].get("tabs").is_none(), "{v}");
        assert!(v.to_string().len() < 1300, "{}", v.to_string().len());
        let back = decode(v.clone());
        assert_eq!(back.screen.tabs, t.screen.tabs);
        assert_eq!(back, t);
        // The old form: every column's stop written out.
        let mut old = v;
        old["screen"]["tabs"] = serde_json::to_value(&t.screen.tabs).unwrap();
        assert_eq!(decode(old), t);
        // A program clears every stop and sets one at column 3; a tab then
        // goes there and to the right margin.
        let mut fwd = Vec::new();
        t.feed(b"\x1b[3g\x1b[4G\x1bH\r\ta\tb", &mut fwd);
        let v = encode(&t);
        assert_eq!(v["screen"]["tabs"].as_array().map(Vec::len), Some(200));
        let mut back = decode(v);
        assert_eq!(back, t);
        back.feed(b"\r\tc", &mut fwd);
        t.feed(b"\r\tc", &mut fwd);
        assert_eq!(back.visible_text()[0], t.visible_text()[0]);
        assert_eq!(&t.visible_text()[0][..4], "   c");
        // Stops after a resize keep their columns and the new ones are the
        // default; the encoding stays exact.
        t.resize(230, 50);
        let back = decode(encode(&t));
        assert_eq!(back.screen.tabs, t.screen.tabs);
        assert!(back.screen.tabs[224]);
        // A short old array (another width) is padded without stops, as
        // before.
        let mut short = encode(&Terminal::new(20, 5, Default::default()));
        short["screen"]["tabs"] = serde_json::json!([false, true]);
        let back = decode(short);
        assert_eq!(back.screen.tabs.len(), 20);
        assert_eq!(back.screen.tabs.iter().filter(|&&s| s).count(), 1);
    }

    /// A new pane's encoding as handoff version 5 wrote it (every field,
    /// the tab stops written out), as a live upgrade from that build or
    /// its crash checkpoint hands it over: it reads as a new terminal,
    /// and this build writes the same terminal in under a fifth of it.
    #[test]
    fn a_version_5_encoding_reads_the_same() {
        let tabs: Vec<bool> = (0..200).map(|c| c % 8 == 0 && c != 0).collect();
        let v5 = r#"{"screen":{"config":{"scrollback_lines":10000,"scrollback_bytes":16777216,"foreground":[229,229,229],"background":[0,0,0]},"cols":200,"rows":50,"main":{"rows":[],"top":0,"cols":200},"alt":{"rows":[],"top":0,"cols":200},"scrollback":{"lines":[],"bytes":0,"max_lines":10000,"max_bytes":16777216,"pushed":0},"cursor":{"row":0,"col":0,"pending_wrap":false},"pen":{"fg":0,"bg":0},"pen_extra":{},"saved_main":null,"saved_alt":null,"scroll_top":0,"scroll_bottom":49,"tabs":TABS,"charsets":["Ascii","Ascii","Ascii","Ascii"],"active_charset":0,"modes":{"app_cursor_keys":false,"app_keypad":false,"bracketed_paste":false,"focus_reporting":false,"synchronized_output":false,"mouse":"off","mouse_encoding":"default","alternate_scroll":false,"insert":false,"newline":false,"origin":false,"autowrap":true,"cursor_visible":true,"cursor_blink":false,"cursor_style":0,"alt_screen":false,"kitty_base":0,"kitty_stack":[],"modify_other_keys":0},"title":"","title_stack":[],"cwd":null,"fg_override":null,"bg_override":null,"last_char":null,"events":[],"replies":[]},"boundary":{"state":"Ground","kind":"Esc","tail":[],"dropping":false,"c0":false,"after_string":false}}"#.replace("TABS", &serde_json::to_string(&tabs).unwrap());
        let t = Terminal::new(200, 50, Default::default());
        let back: Terminal = serde_json::from_str(&v5).unwrap();
        assert_eq!(back, t);
        let now = serde_json::to_string(&t).unwrap();
        assert!(
            now.len() * 5 < v5.len(),
            "{} of {}: {now}",
            now.len(),
            v5.len()
        );
        assert_eq!(serde_json::from_str::<Terminal>(&now).unwrap(), t);
    }

    /// Fields left out at their default travel when they are not: modes,
    /// title and its stack, saved cursors, charsets, OSC colours, the
    /// REP character, a sequence cut in the middle.
    #[test]
    fn fields_off_their_default_travel() {
        let mut t = Terminal::new(80, 24, Default::default());
        let mut fwd = Vec::new();
        t.feed(
            b"\x1b[?1h\x1b[?2004h\x1b[?1000h\x1b[?25l\x1b[4h\x1b]0;hi\x07\x1b[22;0t\
              \x1b[31;44m\x1b7\x1b(0q\x1b]11;rgb:10/20/30\x07x\x1b[3b\x1b[?1049h\x1b[1;",
            &mut fwd,
        );
        let v = serde_json::to_value(&t).unwrap();
        for key in [
            "modes",
            "title",
            "saved_main",
            "charsets",
            "pen",
            "bg_override",
        ] {
            assert!(v["screen"].get(key).is_some(), "{key} left out: {v}");
        }
        assert!(v["boundary"].get("tail").is_some(), "{v}");
        let mut back: Terminal = serde_json::from_value(v).unwrap();
        assert_eq!(back, t);
        // The cut sequence ends the same on both.
        t.feed(b"5HZ", &mut fwd);
        back.feed(b"5HZ", &mut fwd);
        assert_eq!(back, t);
        assert_eq!(back.visible_text(), t.visible_text());
    }
}
