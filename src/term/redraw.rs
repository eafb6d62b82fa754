//! Bytes that rebuild the model's state on a fresh terminal: what the server
//! sends a client when it attaches.
//!
//! Order matters and is fixed: reset the client to a baseline, draw the main
//! screen, switch to the alternate screen and draw it if active, then the
//! saved cursor, scroll region, tab stops, charsets, input modes, title,
//! and last the pen, cursor position and visibility (drawing and the other
//! steps move the cursor and change the SGR state).

use super::cell::{Cell, PenWriter, push_num, write_sgr_ul};
use super::grid::Grid;
use super::screen::{Charset, Screen};

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
        let cells = &row.cells[..cols.min(row.cells.len())];
        let end = row.content_end().min(cells.len());
        if end == 0 {
            continue;
        }
        cup(out, r, 0);
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
    pen.finish(out);
}

fn sanitize(title: &str) -> String {
    title.chars().filter(|c| !c.is_control()).collect()
}

pub fn redraw(s: &Screen, cols: u16, rows: u16) -> Vec<u8> {
    let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
    let mut out = Vec::with_capacity(s.cols * s.rows + 256);
    // Baseline: SGR reset, full scroll region, no origin mode, autowrap on,
    // replace mode, ASCII charsets, cursor home, screen cleared.
    out.extend_from_slice(
        b"\x1b[0m\x1b[r\x1b[?6l\x1b[?7h\x1b[4l\x1b[20l\x1b(B\x1b)B\x0f\x1b[H\x1b[2J",
    );
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
    let saved = if s.modes.alt_screen {
        &s.saved_alt
    } else {
        &s.saved_main
    };
    if let Some(saved) = saved {
        cup(
            &mut out,
            saved.cursor.row.min(rows - 1),
            saved.cursor.col.min(cols - 1),
        );
        write_sgr_ul(&mut out, saved.pen, saved.pen_extra.ul);
        out.extend_from_slice(b"\x1b7\x1b[0m");
    }
    if s.scroll_top != 0 || s.scroll_bottom + 1 != s.rows {
        out.extend_from_slice(b"\x1b[");
        push_num(&mut out, (s.scroll_top + 1) as u32);
        out.push(b';');
        push_num(&mut out, (s.scroll_bottom + 1) as u32);
        out.push(b'r');
    }
    let default_tabs = s
        .tabs
        .iter()
        .enumerate()
        .all(|(i, &t)| t == (i != 0 && i % 8 == 0));
    if !default_tabs {
        out.extend_from_slice(b"\x1b[3g");
        for (c, _) in s.tabs.iter().enumerate().filter(|(c, t)| **t && *c < cols) {
            cup(&mut out, 0, c);
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
    let m = &s.modes;
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
    if m.insert {
        out.extend_from_slice(b"\x1b[4h");
    }
    if m.newline {
        out.extend_from_slice(b"\x1b[20h");
    }
    if !m.autowrap {
        private(&mut out, 7, false);
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
    for t in &s.title_stack {
        out.extend_from_slice(b"\x1b]2;");
        out.extend_from_slice(sanitize(t).as_bytes());
        out.extend_from_slice(b"\x1b\\\x1b[22t");
    }
    if !s.title.is_empty() || !s.title_stack.is_empty() {
        out.extend_from_slice(b"\x1b]2;");
        out.extend_from_slice(sanitize(&s.title).as_bytes());
        out.extend_from_slice(b"\x1b\\");
    }
    // Cursor: in origin mode CUP is relative to the region, and setting the
    // mode homes the cursor, so set it first.
    let (row, col) = (s.cursor.row.min(rows - 1), s.cursor.col.min(cols - 1));
    if m.origin {
        private(&mut out, 6, true);
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
        cup(&mut out, cup_row, at);
        let mut pen = PenWriter::new();
        pen.pen(&mut out, cell.style.pen_part(), row.extra_at(at));
        push_char(&mut out, cell.ch);
        if let Some(m) = row.marks_at(at) {
            out.extend_from_slice(m.as_bytes());
        }
        pen.finish(&mut out);
    } else {
        cup(&mut out, cup_row, col);
    }
    // The program's pen, hyperlink included, so what it prints next looks
    // as it would have on the terminal it started on.
    PenWriter::new().pen(&mut out, s.pen, s.pen_extra.non_empty());
    if !m.cursor_visible {
        private(&mut out, 25, false);
    }
    if m.synchronized_output {
        private(&mut out, 2026, true);
    }
    out
}
