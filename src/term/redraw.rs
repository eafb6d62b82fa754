//! Bytes that rebuild the model's state on a fresh terminal: what the server
//! sends a client when it attaches.
//!
//! Order matters and is fixed: reset the client to a baseline, draw the main
//! screen, switch to the alternate screen and draw it if active, then the
//! saved cursor, scroll region, tab stops, charsets, input modes, title,
//! and last the pen, cursor position and visibility (drawing and the other
//! steps move the cursor and change the SGR state).

use super::cell::{Cell, PenWriter, push_num, write_sgr_ul};
use super::grid::{Grid, Row};
use super::modes::Modes;
use super::screen::{Charset, Screen};
use std::hash::{DefaultHasher, Hash, Hasher};

fn cup(out: &mut Vec<u8>, row: usize, col: usize) {
    out.extend_from_slice(b"\x1b[");
    push_num(out, (row + 1) as u32);
    out.push(b';');
    push_num(out, (col + 1) as u32);
    out.push(b'H');
}

fn private(out: &mut Vec<u8>, mode: u16, on: bool) {
    out.extend_from_slice(b"\x1b[?");
    push_num(out, u32::from(mode));
    out.push(if on { b'h' } else { b'l' });
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut b = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
}

/// Draws `grid` clipped to `cols` x `rows`, leaving the SGR state reset.
fn draw_grid(out: &mut Vec<u8>, grid: &Grid, cols: usize, rows: usize) {
    let mut pen = PenWriter::new();
    for r in 0..rows.min(grid.lines()) {
        let row = grid.row(r);
        if row.content_end().min(cols) == 0 {
            continue;
        }
        cup(out, r, 0);
        draw_row(out, row, cols, &mut pen);
    }
    pen.finish(out);
}

/// The cells of `row` up to its content's end, clipped to `cols` (a wide
/// character cut by the edge drawn as a blank), from the cursor on.
fn draw_row(out: &mut Vec<u8>, row: &Row, cols: usize, pen: &mut PenWriter) {
    let cells = &row.cells[..cols.min(row.cells.len())];
    let end = row.content_end().min(cells.len());
    for (c, cell) in cells[..end].iter().enumerate() {
        if cell.is_spacer() {
            continue;
        }
        let (ch, style) = if cell.is_wide() && c + 1 >= cols {
            (' ', cell.style.pen_part())
        } else {
            (cell.ch, cell.style.pen_part())
        };
        pen.pen(out, style, row.extra_at(c));
        push_char(out, ch);
        if let Some(m) = row.marks_at(c) {
            out.extend_from_slice(m.as_bytes());
        }
    }
}

fn sanitize(title: &str) -> String {
    title.chars().filter(|c| !c.is_control()).collect()
}

/// The input modes, cursor shape and keyboard protocols `state` may switch
/// on, off.
pub(super) const MODES_OFF: &[u8] = b"\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?9l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?1007l\x1b[?12l\x1b[0 q\x1b[<99u\x1b[=0;1u\x1b[>4m\x1b[?25h\x1b[?2026l\x1b[?45l\x1b[?1045l\x1b[?5l";

pub fn redraw(s: &Screen, cols: u16, rows: u16) -> Vec<u8> {
    redraw_with(s, cols, rows, true)
}

/// `redraw`; with `switch_screens` false the client is shown only the
/// active screen, drawn on whichever screen it is on (no 1049): for an
/// attach client that keeps its own terminal on the alternate screen, and
/// for views drawn from the model.
pub fn redraw_with(s: &Screen, cols: u16, rows: u16, switch_screens: bool) -> Vec<u8> {
    let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
    let mut out = Vec::with_capacity(s.cols * s.rows + 256);
    // Baseline: SGR reset, full scroll region, no origin mode, autowrap on,
    // replace mode, ASCII charsets, cursor home, screen cleared; every
    // input mode the state below may set switched off, since the client
    // may be one drawn before (a view, a redraw it asked for).
    out.extend_from_slice(
        b"\x1b[0m\x1b[r\x1b[?69l\x1b[?6l\x1b[?7h\x1b[4l\x1b[20l\x1b(B\x1b)B\x0f\x1b[H\x1b[2J",
    );
    out.extend_from_slice(MODES_OFF);
    if !switch_screens {
        draw_grid(&mut out, s.grid(), cols, rows);
    } else {
        draw_grid(&mut out, &s.main, cols, rows);
        if s.modes.alt_screen {
            // 1049 on the client saves this cursor and pen; on exit it will
            // restore what DECSC saved on our main screen.
            if let Some(saved) = &s.saved_main {
                cup(
                    &mut out,
                    saved.cursor.row.min(rows - 1),
                    saved.cursor.col.min(cols - 1),
                );
                write_sgr_ul(&mut out, saved.pen, saved.pen_extra.ul);
            }
            private(&mut out, 1049, true);
            out.extend_from_slice(b"\x1b[0m");
            draw_grid(&mut out, s.grid(), cols, rows);
        }
    }
    state(s, cols, rows, &mut out);
    out
}

/// What a view drawn from the model last sent its client: the size, the
/// state that only a full redraw sets (modes, title, charsets...) and a
/// hash per row, so the next update sends only the rows that changed.
#[derive(Debug, Default)]
pub struct ViewCache {
    size: (u16, u16),
    key: u64,
    rows: Vec<u64>,
    valid: bool,
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Everything a client keeps once set, which an update cannot set back
/// (it only switches modes on): a change calls for a full redraw.
fn state_key(s: &Screen) -> u64 {
    let mut h = DefaultHasher::new();
    format!(
        "{:?}{:?}{}{:?}{}{}{}{:?}{:?}{:?}{:?}{:?}{:?}",
        s.modes,
        s.charsets,
        s.active_charset,
        s.title_stack,
        s.title,
        s.scroll_top,
        s.scroll_bottom,
        s.icon,
        s.icon_stack,
        s.lr,
        s.colors,
        s.fg_override,
        s.bg_override
    )
    .hash(&mut h);
    s.tabs.hash(&mut h);
    h.finish()
}

/// Brings a client showing the model at `cols` x `rows` (clipped or padded
/// with blanks, whatever the pane's own size) up to date: a full redraw of
/// the active screen the first time, after a size change or a change of
/// modes; otherwise only the rows that changed, then the cursor and modes.
pub fn view_update(s: &Screen, cols: u16, rows: u16, cache: &mut ViewCache) -> Vec<u8> {
    let (c, r) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
    let key = state_key(s);
    let grid = s.grid();
    let mut scratch = Vec::new();
    let row_hash = |out: &mut Vec<u8>, i: usize| {
        out.clear();
        if i < grid.lines() {
            let mut pen = PenWriter::new();
            draw_row(out, grid.row(i), c, &mut pen);
            pen.finish(out);
        }
        hash_of(out)
    };
    if !cache.valid || cache.size != (cols, rows) || cache.key != key {
        cache.rows = (0..r).map(|i| row_hash(&mut scratch, i)).collect();
        cache.size = (cols, rows);
        cache.key = key;
        cache.valid = true;
        return redraw_with(s, cols, rows, false);
    }
    // Undo what the last update left on that a row drawing would obey.
    let mut out = b"\x1b[0m\x1b[?69l\x1b[?6l\x1b[4l\x1b(B\x1b)B\x0f".to_vec();
    for i in 0..r {
        let h = row_hash(&mut scratch, i);
        if cache.rows[i] != h {
            cache.rows[i] = h;
            cup(&mut out, i, 0);
            out.extend_from_slice(b"\x1b[2K");
            out.extend_from_slice(&scratch);
        }
    }
    state(s, c, r, &mut out);
    out
}

/// The state after the grids: saved cursor, scroll region, tab stops,
/// charsets, input modes, title, then the cursor and pen.
fn state(s: &Screen, cols: usize, rows: usize, out: &mut Vec<u8>) {
    saved_cursor_and_margins(s, cols, rows, out);
    palette(s, out);
    tab_stops_and_charsets(s, cols, out);
    input_modes(&s.modes, out);
    titles(s, out);
    cursor_and_pen(s, cols, rows, out);
}

/// The saved cursor (of the screen shown), the scroll region and the left
/// and right margins.
fn saved_cursor_and_margins(s: &Screen, cols: usize, rows: usize, out: &mut Vec<u8>) {
    let saved = if s.modes.alt_screen {
        &s.saved_alt
    } else {
        &s.saved_main
    };
    if let Some(saved) = saved {
        cup(
            out,
            saved.cursor.row.min(rows - 1),
            saved.cursor.col.min(cols - 1),
        );
        write_sgr_ul(out, saved.pen, saved.pen_extra.ul);
        out.extend_from_slice(b"\x1b7\x1b[0m");
    }
    if s.scroll_top != 0 || s.scroll_bottom + 1 != s.rows {
        out.extend_from_slice(b"\x1b[");
        push_num(out, (s.scroll_top + 1) as u32);
        out.push(b';');
        push_num(out, (s.scroll_bottom + 1) as u32);
        out.push(b'r');
    }
    if s.modes.lr_margins {
        private(out, 69, true);
        if let Some((left, right)) = s.lr {
            out.extend_from_slice(b"\x1b[");
            push_num(out, (left + 1) as u32);
            out.push(b';');
            push_num(out, (right + 1) as u32);
            out.push(b's');
        }
    }
}

/// The palette entries and default colours the program set.
fn palette(s: &Screen, out: &mut Vec<u8>) {
    for &(key, (r, g, b)) in &s.colors {
        if key < 256 {
            out.extend_from_slice(
                format!("\x1b]4;{key};rgb:{r:02x}/{g:02x}/{b:02x}\x1b\\").as_bytes(),
            );
        }
    }
    for (n, rgb) in [(10, s.fg_override), (11, s.bg_override)] {
        if let Some((r, g, b)) = rgb {
            out.extend_from_slice(format!("\x1b]{n};rgb:{r:02x}/{g:02x}/{b:02x}\x1b\\").as_bytes());
        }
    }
}

/// Tab stops other than every eighth column, and the charsets designated
/// and shifted in.
fn tab_stops_and_charsets(s: &Screen, cols: usize, out: &mut Vec<u8>) {
    let default_tabs = s
        .tabs
        .iter()
        .enumerate()
        .all(|(i, &t)| t == (i != 0 && i % 8 == 0));
    if !default_tabs {
        out.extend_from_slice(b"\x1b[3g");
        for (c, _) in s.tabs.iter().enumerate().filter(|(c, t)| **t && *c < cols) {
            cup(out, 0, c);
            out.extend_from_slice(b"\x1bH");
        }
    }
    for (i, cs) in s.charsets.iter().enumerate() {
        if *cs == Charset::DecSpecial {
            out.push(0x1b);
            out.push([b'(', b')', b'*', b'+'][i]);
            out.push(b'0');
        }
    }
    if s.active_charset == 1 {
        out.push(0x0e);
    }
}

/// The modes that change what keys, the mouse and printing do.
fn input_modes(m: &Modes, out: &mut Vec<u8>) {
    if m.app_cursor_keys {
        private(out, 1, true);
    }
    if m.app_keypad {
        out.extend_from_slice(b"\x1b=");
    }
    if m.bracketed_paste {
        private(out, 2004, true);
    }
    if let Some(raw) = m.mouse.raw() {
        private(out, raw, true);
    }
    if let Some(raw) = m.mouse_encoding.raw() {
        private(out, raw, true);
    }
    for (on, mode) in [(m.reverse_wrap, 45), (m.reverse_wrap_ext, 1045)] {
        if on {
            private(out, mode, true);
        }
    }
    // Not DECCOLM (3) and its permission (40): they would clear the
    // client's screen or change its width.
    for &mode in m.other.iter().filter(|&&m| m != 3 && m != 40) {
        private(out, mode, true);
    }
    if m.focus_reporting {
        private(out, 1004, true);
    }
    if m.alternate_scroll {
        private(out, 1007, true);
    }
    if m.insert {
        out.extend_from_slice(b"\x1b[4h");
    }
    if m.newline {
        out.extend_from_slice(b"\x1b[20h");
    }
    if !m.autowrap {
        private(out, 7, false);
    }
    if m.cursor_blink {
        private(out, 12, true);
    }
    if m.cursor_style != 0 {
        out.extend_from_slice(b"\x1b[");
        push_num(out, u32::from(m.cursor_style));
        out.extend_from_slice(b" q");
    }
    if m.kitty_base != 0 {
        out.extend_from_slice(b"\x1b[=");
        push_num(out, u32::from(m.kitty_base));
        out.extend_from_slice(b";1u");
    }
    for flags in &m.kitty_stack {
        out.extend_from_slice(b"\x1b[>");
        push_num(out, u32::from(*flags));
        out.push(b'u');
    }
    if m.modify_other_keys != 0 {
        out.extend_from_slice(b"\x1b[>4;");
        push_num(out, u32::from(m.modify_other_keys));
        out.push(b'm');
    }
}

/// The title stacks, then the window and icon titles.
fn titles(s: &Screen, out: &mut Vec<u8>) {
    for (icon, window) in s.icon_stack.iter().zip(&s.title_stack) {
        out.extend_from_slice(b"\x1b]1;");
        out.extend_from_slice(sanitize(icon).as_bytes());
        out.extend_from_slice(b"\x1b\\\x1b]2;");
        out.extend_from_slice(sanitize(window).as_bytes());
        out.extend_from_slice(b"\x1b\\\x1b[22t");
    }
    if !s.title.is_empty() || !s.title_stack.is_empty() {
        out.extend_from_slice(b"\x1b]2;");
        out.extend_from_slice(sanitize(&s.title).as_bytes());
        out.extend_from_slice(b"\x1b\\");
    }
    // The icon title: its own, or (after the stacks left another) the
    // window title it follows.
    let icon = s
        .icon
        .as_ref()
        .or((!s.icon_stack.is_empty()).then_some(&s.title));
    if let Some(icon) = icon {
        out.extend_from_slice(b"\x1b]1;");
        out.extend_from_slice(sanitize(icon).as_bytes());
        out.extend_from_slice(b"\x1b\\");
    }
}

/// The cursor where the model has it (pending wrap included), then the
/// program's pen, cursor visibility and synchronized output.
fn cursor_and_pen(s: &Screen, cols: usize, rows: usize, out: &mut Vec<u8>) {
    let m = &s.modes;
    // Cursor: in origin mode CUP is relative to the region, and setting the
    // mode homes the cursor, so set it first.
    let (row, col) = (s.cursor.row.min(rows - 1), s.cursor.col.min(cols - 1));
    if m.origin {
        private(out, 6, true);
    }
    let cup_row = if m.origin {
        row.saturating_sub(s.scroll_top)
    } else {
        row
    };
    if s.cursor.pending_wrap && m.autowrap && col + 1 == cols && col + 1 == s.cols {
        // Re-print the last cell so the client is in the same pending-wrap
        // state as the model.
        // Its combining marks too: printing a cell clears them.
        let row = s.grid().row(s.cursor.row);
        let cells = &row.cells;
        let (at, cell) = match cells.get(col) {
            Some(c) if c.is_spacer() && col > 0 => (col - 1, cells[col - 1]),
            Some(c) => (col, *c),
            None => (col, Cell::BLANK),
        };
        cup(out, cup_row, at);
        let mut pen = PenWriter::new();
        pen.pen(out, cell.style.pen_part(), row.extra_at(at));
        push_char(out, cell.ch);
        if let Some(m) = row.marks_at(at) {
            out.extend_from_slice(m.as_bytes());
        }
        pen.finish(out);
    } else {
        cup(out, cup_row, col);
    }
    // The program's pen, hyperlink included, so what it prints next looks
    // as it would have on the terminal it started on.
    PenWriter::new().pen(out, s.pen, s.pen_extra.non_empty());
    if !m.cursor_visible {
        private(out, 25, false);
    }
    if m.synchronized_output {
        private(out, 2026, true);
    }
}

/// The modes of `s` that belong to whoever has the keyboard, for a
/// terminal that shows several screens and follows the focused one: key
/// encodings (cursor keys, keypad, kitty flags, modifyOtherKeys), bracketed
/// paste, mouse and focus reporting, the cursor's shape. Sent after
/// [`MODES_OFF`] when the focus or these modes change.
pub fn focus_modes(s: &Screen) -> Vec<u8> {
    let m = &s.modes;
    let mut out = Vec::new();
    if m.app_cursor_keys {
        private(&mut out, 1, true);
    }
    if m.app_keypad {
        out.extend_from_slice(b"\x1b=");
    }
    if m.bracketed_paste {
        private(&mut out, 2004, true);
    }
    if let Some(raw) = m.mouse.raw() {
        private(&mut out, raw, true);
    }
    if let Some(raw) = m.mouse_encoding.raw() {
        private(&mut out, raw, true);
    }
    if m.focus_reporting {
        private(&mut out, 1004, true);
    }
    if m.alternate_scroll {
        private(&mut out, 1007, true);
    }
    if m.cursor_blink {
        private(&mut out, 12, true);
    }
    if m.cursor_style != 0 {
        out.extend_from_slice(b"\x1b[");
        push_num(&mut out, u32::from(m.cursor_style));
        out.extend_from_slice(b" q");
    }
    if m.kitty_base != 0 {
        out.extend_from_slice(b"\x1b[=");
        push_num(&mut out, u32::from(m.kitty_base));
        out.extend_from_slice(b";1u");
    }
    for flags in &m.kitty_stack {
        out.extend_from_slice(b"\x1b[>");
        push_num(&mut out, u32::from(*flags));
        out.push(b'u');
    }
    if m.modify_other_keys != 0 {
        out.extend_from_slice(b"\x1b[>4;");
        push_num(&mut out, u32::from(m.modify_other_keys));
        out.push(b'm');
    }
    out
}
