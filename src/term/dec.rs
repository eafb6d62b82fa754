//! The DEC and xterm sequences vte's `ansi` layer does not decode, or
//! decodes without what the model needs (a private marker, a second
//! parameter, the cursor's page): reports that read the model back
//! (DECRQCRA, DECXCPR and the other DSRs, DECRQM, DECRQSS, DECRQPSR, DA3,
//! XTWINOPS), left/right margins (DECSLRM), rectangular operations (DECFRA,
//! DECERA, DECSERA, DECCRA, DECCARA, DECRARA), selective erase (DECSCA,
//! DECSED, DECSEL), column operations (DECIC, DECDC, SL, SR), DECBI/DECFI,
//! DECSTR and DECSCL. `Terminal::feed` offers every sequence to `dispatch`
//! before vte; what it takes, vte never sees.
//!
//! Every count is bounded by the screen before any loop runs: a rectangle
//! is clipped to the screen, a column or line count to the margins, so one
//! sequence costs at most a screenful of cells whatever its parameters.

use super::boundary::Kind;
use super::cell::{Cell, Extra, Style, push_num};
use super::screen::{Charset, Screen, work};

/// Parameters kept at most; the rest are ignored (vte keeps 32).
const MAX_PARAMS: usize = 16;

/// One CSI (or DCS header) taken apart: private marker, parameters (0 for
/// an empty one, saturating at `u16::MAX`), intermediates, final byte.
struct Csi<'a> {
    marker: Option<u8>,
    params: [u16; MAX_PARAMS],
    len: usize,
    inter: &'a [u8],
    fin: u8,
}

impl Csi<'_> {
    /// Parameter `i`, `default` when missing or 0.
    fn get(&self, i: usize, default: u16) -> u16 {
        match self.params[..self.len].get(i) {
            Some(&v) if v != 0 => v,
            _ => default,
        }
    }

    /// Parameter `i` as given (0 when missing).
    fn raw(&self, i: usize) -> u16 {
        self.params[..self.len].get(i).copied().unwrap_or(0)
    }
}

/// Parses the body of a CSI (after `ESC [`, final byte included). `None`
/// for what vte would ignore (colons, a marker after parameters) and for
/// bytes vte skips inside a CSI (C0 controls): those go to vte.
fn parse(body: &[u8]) -> Option<Csi<'_>> {
    let (&fin, mut rest) = body.split_last()?;
    let mut marker = None;
    if let Some((&m, r)) = rest.split_first()
        && (0x3C..=0x3F).contains(&m)
    {
        marker = Some(m);
        rest = r;
    }
    let mut params = [0u16; MAX_PARAMS];
    let mut len = 0;
    let mut cur: Option<u16> = None;
    let mut i = 0;
    while let Some(&b) = rest.get(i) {
        match b {
            b'0'..=b'9' => {
                let v = cur.unwrap_or(0);
                cur = Some(v.saturating_mul(10).saturating_add(u16::from(b - b'0')));
            }
            b';' => {
                if len < MAX_PARAMS {
                    params[len] = cur.unwrap_or(0);
                    len += 1;
                }
                cur = None;
            }
            0x20..=0x2F => break,
            _ => return None,
        }
        i += 1;
    }
    if (cur.is_some() || len > 0) && len < MAX_PARAMS {
        params[len] = cur.unwrap_or(0);
        len += 1;
    }
    let inter = &rest[i..];
    if !inter.iter().all(|b| (0x20..=0x2F).contains(b)) || !(0x40..=0x7E).contains(&fin) {
        return None;
    }
    Some(Csi {
        marker,
        params,
        len,
        inter,
        fin,
    })
}

/// Handles `seq` if it is one of this module's; false, having done
/// nothing, otherwise.
pub fn dispatch(s: &mut Screen, seq: &[u8], kind: Kind) -> bool {
    match kind {
        Kind::Csi => {
            let Some(body) = seq.strip_prefix(b"\x1b[") else {
                return false;
            };
            match parse(body) {
                Some(csi) => csi_dispatch(s, &csi),
                None => false,
            }
        }
        Kind::Esc => match seq {
            b"\x1b6" => {
                s.back_index();
                true
            }
            b"\x1b9" => {
                s.forward_index();
                true
            }
            // SPA, EPA: start and end a guarded area (ISO protection).
            b"\x1bV" => {
                s.pen_extra.protected = true;
                s.protect_iso = true;
                true
            }
            b"\x1bW" => {
                s.pen_extra.protected = false;
                true
            }
            _ => false,
        },
        Kind::Dcs => dcs_dispatch(s, seq),
        Kind::Osc => osc_colors(s, seq) || osc_titles(s, seq),
        _ => false,
    }
}

fn csi_dispatch(s: &mut Screen, c: &Csi<'_>) -> bool {
    match (c.marker, c.inter, c.fin) {
        // DECSLRM is a VT400 feature; below that `CSI s` is SCOSC.
        (None, b"", b's') if s.modes.lr_margins && s.conformance() >= 4 => {
            let right = (c.len > 1 && c.raw(1) != 0).then(|| usize::from(c.raw(1)));
            s.set_lr_margins(usize::from(c.raw(0)), right);
        }
        (None, b"", b'n') => match c.raw(0) {
            5 => s.reply(b"\x1b[0n"),
            6 => {
                let (row, col) = s.origin_position();
                s.reply(&csi_reply(b"", &[row, col], b"R"));
            }
            _ => s.swallow = true,
        },
        (Some(b'?'), b"", b'n') => dec_dsr(s, c),
        (Some(b'='), b"", b'c') if c.raw(0) == 0 => s.reply(b"\x1bP!|00000000\x1b\\"),
        (None, b"", b'c') if c.raw(0) == 0 => {
            let da1 = super::queries::da1(s.conformance());
            s.reply(&da1);
        }
        (Some(b'>'), b"", b'c') if c.raw(0) == 0 => {
            let da2 = super::queries::da2(s.conformance());
            s.reply(&da2);
        }
        (None, b"!", b'p') => s.soft_reset(),
        (None, b"\"", b'p') => s.set_conformance(c.raw(0)),
        (None, b"\"", b'q') => {
            s.pen_extra.protected = c.raw(0) == 1;
            s.protect_iso = false;
        }
        // Below VT300 level there is no DECRQM (nor an answer).
        (_, b"$", b'p') if s.conformance() < 3 => s.swallow = true,
        (None, b"$", b'p') => {
            let mode = c.raw(0);
            let state = s.modes.ansi_state(mode);
            s.reply(&csi_reply(b"", &[mode, u16::from(state)], b"$y"));
        }
        (Some(b'?'), b"$", b'p') => {
            let mode = c.raw(0);
            let state = s.modes.private_state(mode);
            s.reply(&csi_reply(b"?", &[mode, u16::from(state)], b"$y"));
        }
        (None, b"", b'b') => {
            s.repeat(c.get(0, 1));
        }
        (None, b"", b't') => return winops(s, c),
        (None, b"$", b'w') => match c.raw(0) {
            1 => {
                let r = cursor_information(s);
                s.reply(&r);
            }
            2 => {
                let r = tab_stops(s);
                s.reply(&r);
            }
            _ => s.swallow = true,
        },
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
        (Some(b'?'), b"", b's') => {
            for &mode in &c.params[..c.len] {
                let state = s.modes.private_state(mode);
                if state == 0 {
                    continue;
                }
                let on = state == 1;
                match s.saved_modes.iter().position(|(m, _)| *m == mode) {
                    Some(i) => s.saved_modes[i].1 = on,
                    None if s.saved_modes.len() < 256 => s.saved_modes.push((mode, on)),
                    None => {}
                }
            }
        }
        (Some(b'?'), b"", b'r') => {
            for &mode in &c.params[..c.len] {
                if let Some(&(_, on)) = s.saved_modes.iter().find(|(m, _)| *m == mode) {
                    s.set_private(mode, on);
                }
            }
        }
        (Some(b'?'), b"", b'J') => s.selective_erase_display(c.raw(0)),
        (Some(b'?'), b"", b'K') => s.selective_erase_line(c.raw(0)),
        (None, b"'", b'}') => s.insert_columns(usize::from(c.get(0, 1))),
        (None, b"'", b'~') => s.delete_columns(usize::from(c.get(0, 1))),
        (None, b" ", b'@') => s.shift_left(usize::from(c.get(0, 1))),
        (None, b" ", b'A') => s.shift_right(usize::from(c.get(0, 1))),
        (None, b"*", b'x') => s.rect_extent = c.raw(0).min(2) as u8,
        (None, b"*", b'|') | (None, b"$", b'|') => {
            // DECSNLS, DECSCPP: the pane's size is its client's to set.
        }
        _ => return false,
    }
    true
}

/// `CSI marker p1;p2;... fin`.
fn csi_reply(marker: &[u8], params: &[u16], fin: &[u8]) -> Vec<u8> {
    let mut out = b"\x1b[".to_vec();
    out.extend_from_slice(marker);
    for (i, &p) in params.iter().enumerate() {
        if i > 0 {
            out.push(b';');
        }
        push_num(&mut out, u32::from(p));
    }
    out.extend_from_slice(fin);
    out
}

/// DSR with `?` (DEC-specific status reports), answered as xterm does.
fn dec_dsr(s: &mut Screen, c: &Csi<'_>) {
    let reply: Vec<u8> = match c.raw(0) {
        6 => {
            let (row, col) = s.origin_position();
            if s.conformance() >= 4 {
                csi_reply(b"?", &[row, col, 1], b"R")
            } else {
                csi_reply(b"?", &[row, col], b"R")
            }
        }
        // No printer.
        15 => b"\x1b[?13n".to_vec(),
        // User-defined keys unlocked.
        25 => b"\x1b[?20n".to_vec(),
        // North American keyboard, ready, LK201.
        26 => b"\x1b[?27;1;0;0n".to_vec(),
        // No locator.
        53 | 55 => b"\x1b[?50n".to_vec(),
        56 => b"\x1b[?57;0n".to_vec(),
        // No macro space.
        62 => b"\x1b[0*{".to_vec(),
        // Memory checksum, as xterm: always 0.
        63 => {
            let mut out = b"\x1bP".to_vec();
            push_num(&mut out, u32::from(c.raw(1)));
            out.extend_from_slice(b"!~0000\x1b\\");
            out
        }
        // No errors on the link.
        75 => b"\x1b[?70n".to_vec(),
        // Not configured for multiple sessions.
        85 => b"\x1b[?83n".to_vec(),
        _ => {
            s.swallow = true;
            return;
        }
    };
    s.reply(&reply);
}

/// XTWINOPS: the reports that make sense for a pane (its size, a window
/// that is never iconified, at the origin); the window manipulations are
/// the client's terminal's business and pass on to it. Pixel sizes are
/// answered only when the pane knows its client's cell size
/// (`Screen::cell_pixels`); otherwise they go unanswered, as xterm leaves
/// them when window reports are off: never passed on, since the client's
/// terminal would answer for its whole window, not the pane.
/// A query the pane cannot answer: dropped, neither answered nor passed on.
fn unanswered(s: &mut Screen) -> bool {
    s.swallow = true;
    true
}

fn winops(s: &mut Screen, c: &Csi<'_>) -> bool {
    let (rows, cols) = (s.rows as u16, s.cols as u16);
    let reply = match c.raw(0) {
        11 => b"\x1b[1t".to_vec(),
        13 => csi_reply(b"", &[3, 0, 0], b"t"),
        14 => match s.cell_pixels {
            Some((w, h)) => csi_reply(
                b"",
                &[4, rows.saturating_mul(h), cols.saturating_mul(w)],
                b"t",
            ),
            None => return unanswered(s),
        },
        16 => match s.cell_pixels {
            Some((w, h)) => csi_reply(b"", &[6, h, w], b"t"),
            None => return unanswered(s),
        },
        // The screen's size in pixels: the client's monitor, not the pane's.
        15 => return unanswered(s),
        18 => csi_reply(b"", &[8, rows, cols], b"t"),
        19 => csi_reply(b"", &[9, rows, cols], b"t"),
        20 | 21 => {
            let text = if c.raw(0) == 20 {
                s.icon.as_ref().unwrap_or(&s.title)
            } else {
                &s.title
            };
            let text: String = text.chars().filter(|c| !c.is_control()).collect();
            let kind = if c.raw(0) == 20 { "L" } else { "l" };
            format!("\x1b]{kind}{text}\x1b\\").into_bytes()
        }
        22 => {
            s.push_titles(c.raw(1));
            return true;
        }
        23 => {
            s.pop_titles(c.raw(1));
            return true;
        }
        _ => return false,
    };
    s.reply(&reply);
    true
}

/// DECRQPSR 1: DECCIR, the cursor information report.
fn cursor_information(s: &Screen) -> Vec<u8> {
    let (row, col) = s.origin_position();
    let pen = s.pen;
    let mut rend = 0x40u8;
    if pen.fg & super::cell::BOLD != 0 {
        rend |= 1;
    }
    if pen.underline() != 0 {
        rend |= 2;
    }
    if pen.fg & super::cell::BLINK != 0 {
        rend |= 4;
    }
    if pen.fg & super::cell::INVERSE != 0 {
        rend |= 8;
    }
    let satt = 0x40 | u8::from(s.pen_extra.protected);
    let mut flags = 0x40u8;
    if s.modes.origin {
        flags |= 1;
    }
    if s.active_charset == 2 {
        flags |= 2;
    }
    if s.active_charset == 3 {
        flags |= 4;
    }
    if s.cursor.pending_wrap {
        flags |= 8;
    }
    let gl = s.active_charset & 3;
    let sets: String = s
        .charsets
        .iter()
        .map(|c| match c {
            Charset::Ascii => 'B',
            Charset::DecSpecial => '0',
        })
        .collect();
    let mut out = b"\x1bP1$u".to_vec();
    push_num(&mut out, u32::from(row));
    out.push(b';');
    push_num(&mut out, u32::from(col));
    out.extend_from_slice(b";1;");
    out.push(rend);
    out.push(b';');
    out.push(satt);
    out.push(b';');
    out.push(flags);
    out.push(b';');
    push_num(&mut out, gl as u32);
    out.extend_from_slice(b";2;@;");
    out.extend_from_slice(sets.as_bytes());
    out.extend_from_slice(b"\x1b\\");
    out
}

/// DECRQPSR 2: DECTABSR, the tab stops as 1-based columns.
fn tab_stops(s: &Screen) -> Vec<u8> {
    let mut out = b"\x1bP2$u".to_vec();
    let mut first = true;
    for (col, _) in s.tabs.iter().enumerate().filter(|(_, t)| **t) {
        if !first {
            out.push(b'/');
        }
        first = false;
        push_num(&mut out, col as u32 + 1);
    }
    out.extend_from_slice(b"\x1b\\");
    out
}

/// DCS: DECRQSS (`DCS $ q Pt ST`), answered from the model: `1$r...` for
/// what it reports, `0$r` for anything else.
fn dcs_dispatch(s: &mut Screen, seq: &[u8]) -> bool {
    let Some(body) = seq.strip_prefix(b"\x1bP") else {
        return false;
    };
    let body = body
        .strip_suffix(b"\x1b\\")
        .or_else(|| body.strip_suffix(b"\x07"))
        .unwrap_or(body);
    if let Some(names) = body.strip_prefix(b"+q") {
        // XTGETTCAP: the number of colours (`Co`, `colors`) is the model's
        // palette's; any other capability is answered as unknown (`0+r`,
        // xterm's answer), never passed on: every attached terminal would
        // answer for itself, and none while detached.
        let mut out = Vec::new();
        for name in names.split(|&b| b == b';') {
            if name.eq_ignore_ascii_case(b"436f") || name.eq_ignore_ascii_case(b"636f6c6f7273") {
                out.extend_from_slice(b"\x1bP1+r");
                out.extend_from_slice(name);
                out.extend_from_slice(b"=323536\x1b\\");
            } else {
                out.extend_from_slice(b"\x1bP0+r");
                out.extend_from_slice(&name[..name.len().min(64)]);
                out.extend_from_slice(b"\x1b\\");
            }
        }
        s.reply(&out);
        return true;
    }
    let Some(pt) = body.strip_prefix(b"$q") else {
        return false;
    };
    let value: Option<Vec<u8>> = match pt {
        b"m" => {
            let mut v = Vec::new();
            s.pen.write_sgr_params(&mut v);
            v.push(b'm');
            Some(v)
        }
        b"r" => Some(format!("{};{}r", s.scroll_top + 1, s.scroll_bottom + 1).into_bytes()),
        b"s" => Some(format!("{};{}s", s.left() + 1, s.right() + 1).into_bytes()),
        b" q" => Some(format!("{} q", s.modes.cursor_style.max(1)).into_bytes()),
        b"\"q" => Some(format!("{}\"q", u8::from(s.pen_extra.protected)).into_bytes()),
        b"\"p" => {
            let level = s.conformance();
            Some(if level == 1 {
                b"61\"p".to_vec()
            } else {
                format!("6{level};1\"p").into_bytes()
            })
        }
        b"t" => Some(format!("{}t", s.rows).into_bytes()),
        b"$|" => Some(format!("{}$|", s.cols).into_bytes()),
        b"*|" => Some(format!("{}*|", s.rows).into_bytes()),
        b"*x" => Some(format!("{}*x", s.rect_extent).into_bytes()),
        // Status line: none, the main display.
        b"$~" => Some(b"0$~".to_vec()),
        b"$}" => Some(b"0$}".to_vec()),
        _ => None,
    };
    let mut out = b"\x1bP".to_vec();
    match value {
        Some(v) => {
            out.extend_from_slice(b"1$r");
            out.extend_from_slice(&v);
        }
        None => out.extend_from_slice(b"0$r"),
    }
    out.extend_from_slice(b"\x1b\\");
    s.reply(&out);
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
    fn to_screen(&self, row: usize, col: usize) -> (usize, usize) {
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
    fn set_conformance(&mut self, level: u16) {
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
    fn insert_columns(&mut self, n: usize) {
        if self.in_margins() {
            self.insert_columns_at(self.cursor.col, n);
        }
    }

    /// DECDC: deletes `n` columns at the cursor inside the margins.
    fn delete_columns(&mut self, n: usize) {
        if self.in_margins() {
            self.delete_columns_at(self.cursor.col, n);
        }
    }

    /// SL: the text inside the margins shifts left `n` columns.
    fn shift_left(&mut self, n: usize) {
        self.delete_columns_at(self.left(), n);
    }

    /// SR: the text inside the margins shifts right `n` columns.
    fn shift_right(&mut self, n: usize) {
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
    pub(super) fn fill_region(
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
    fn fill_rect(&mut self, r: Rect, ch: char) {
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
    fn erase_rect(&mut self, r: Rect, selective: bool) {
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
    fn copy_rect(&mut self, src: Rect, row: usize, col: usize) {
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
    fn change_rect_attrs(&mut self, r: Rect, attrs: &[u16], reverse: bool) {
        use super::cell::{BLINK, BOLD, INVERSE};
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
    pub(super) fn selective_erase_chars(&mut self, n: usize) {
        let (row, col) = (self.cursor.row, self.cursor.col);
        let to = col.saturating_add(n.max(1)).min(self.cols);
        let fill = self.pen.erase_part();
        work(to - col);
        erase_cells(self.grid_mut().row_mut(row), col, to, fill, true);
        self.cursor.pending_wrap = false;
    }

    /// DECSED: as ED, sparing protected cells (DECSCA).
    pub(super) fn selective_erase_display(&mut self, mode: u16) {
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
    pub(super) fn selective_erase_line(&mut self, mode: u16) {
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
fn erase_cells(row: &mut super::grid::Row, from: usize, to: usize, fill: Style, selective: bool) {
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

/// The special colours OSC 5 numbers 0..=4 (bold, underline, blink,
/// reverse, italic), which OSC 4 reaches past the 256 palette entries.
const SPECIAL_BASE: u16 = 256;
const SPECIAL_COUNT: u16 = 5;
/// `Screen::colors` keys for the dynamic colours OSC 12..=19 (10 and 11
/// are `fg_override` and `bg_override`).
const DYNAMIC_BASE: u16 = 1000;

/// OSC 4, 5, 10..=19 (set or `?` query colours), 104, 105, 110..=119
/// (reset them): the model keeps what a program set and answers queries
/// from it. A sequence with a query is answered here and not forwarded; one
/// that only sets or resets goes on to the clients, which draw the colours.
fn osc_colors(s: &mut Screen, seq: &[u8]) -> bool {
    let Some(body) = seq.strip_prefix(b"\x1b]") else {
        return false;
    };
    let (body, term): (&[u8], &[u8]) = if let Some(b) = body.strip_suffix(b"\x1b\\") {
        (b, b"\x1b\\")
    } else if let Some(b) = body.strip_suffix(b"\x07") {
        (b, b"\x07")
    } else {
        return false;
    };
    let Ok(body) = std::str::from_utf8(body) else {
        return false;
    };
    let mut parts = body.split(';');
    let Some(Ok(cmd)) = parts.next().map(str::parse::<u16>) else {
        return false;
    };
    let args: Vec<&str> = parts.collect();
    let mut replies: Vec<u8> = Vec::new();
    let answer = |replies: &mut Vec<u8>, prefix: String, rgb: (u8, u8, u8)| {
        replies.extend_from_slice(&super::queries::color_report(
            &prefix,
            rgb,
            std::str::from_utf8(term).unwrap_or("\x1b\\"),
        ));
    };
    match cmd {
        4 | 5 => {
            for pair in args.chunks(2) {
                let [c, spec] = pair else { break };
                let Ok(c) = c.parse::<u16>() else { break };
                let key = if cmd == 5 {
                    c.checked_add(SPECIAL_BASE)
                } else {
                    Some(c)
                };
                let Some(key) = key.filter(|&k| k < SPECIAL_BASE + SPECIAL_COUNT) else {
                    break;
                };
                if *spec == "?" {
                    let rgb = s.color(key);
                    answer(&mut replies, format!("{cmd};{c}"), rgb);
                } else if let Some(rgb) = parse_color(spec) {
                    s.set_color_key(key, Some(rgb));
                }
            }
        }
        10..=19 => {
            for (n, spec) in (cmd..=19).zip(args) {
                if spec == "?" {
                    let rgb = s.dynamic_color(n);
                    answer(&mut replies, format!("{n}"), rgb);
                } else if let Some(rgb) = parse_color(spec) {
                    s.set_dynamic_color(n, Some(rgb));
                }
            }
        }
        104 | 105 => {
            let base = if cmd == 104 { 0 } else { SPECIAL_BASE };
            let all = if cmd == 104 {
                0..SPECIAL_BASE
            } else {
                SPECIAL_BASE..SPECIAL_BASE + SPECIAL_COUNT
            };
            let given: Vec<u16> = args
                .iter()
                .filter(|a| !a.is_empty())
                .filter_map(|a| a.parse::<u16>().ok()?.checked_add(base))
                .collect();
            if given.is_empty() {
                s.colors.retain(|(k, _)| !all.contains(k));
            } else {
                for k in given {
                    s.set_color_key(k, None);
                }
            }
        }
        110..=119 => s.set_dynamic_color(cmd - 100, None),
        _ => return false,
    }
    if !replies.is_empty() {
        s.reply(&replies);
    }
    true
}

/// A colour as X11 parses it for xterm: `rgb:R/G/B` (1 to 4 hex digits a
/// component, scaled), `#RGB` with 1 to 4 digits a component (the high
/// bits), `rgbi:R/G/B` (intensities 0.0 to 1.0). Named colours and the CIE
/// and TekHVC spaces are not parsed: the colour is left as it was.
fn parse_color(spec: &str) -> Option<(u8, u8, u8)> {
    if let Some(rest) = spec.strip_prefix("rgb:") {
        let mut it = rest.split('/').map(|h| {
            if h.is_empty() || h.len() > 4 {
                return None;
            }
            let v = u32::from_str_radix(h, 16).ok()?;
            let max = (1u32 << (4 * h.len())) - 1;
            Some(((v * 0xffff / max) >> 8) as u8)
        });
        let rgb = (it.next()??, it.next()??, it.next()??);
        return it.next().is_none().then_some(rgb);
    }
    if let Some(rest) = spec.strip_prefix("rgbi:") {
        let mut it = rest.split('/').map(|f| {
            let v: f64 = f.parse().ok()?;
            (0.0..=1.0).contains(&v).then(|| (v * 255.0).round() as u8)
        });
        let rgb = (it.next()??, it.next()??, it.next()??);
        return it.next().is_none().then_some(rgb);
    }
    let hex = spec.strip_prefix('#')?;
    if hex.is_empty()
        || hex.len() % 3 != 0
        || hex.len() > 12
        || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let n = hex.len() / 3;
    let comp = |i: usize| {
        let v = u32::from_str_radix(&hex[i * n..(i + 1) * n], 16).ok()?;
        Some(((v << (16 - 4 * n)) >> 8) as u8)
    };
    Some((comp(0)?, comp(1)?, comp(2)?))
}

impl Screen {
    /// Palette entry or special colour `key` (see `SPECIAL_BASE`): what a
    /// program set, else xterm's default (the foreground for the special
    /// colours).
    fn color(&self, key: u16) -> (u8, u8, u8) {
        match self.colors.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => self.colors[i].1,
            Err(_) if key < SPECIAL_BASE => super::queries::palette(key as u8),
            Err(_) => self.dynamic_color(10),
        }
    }

    fn set_color_key(&mut self, key: u16, rgb: Option<(u8, u8, u8)>) {
        match (self.colors.binary_search_by_key(&key, |(k, _)| *k), rgb) {
            (Ok(i), Some(rgb)) => self.colors[i].1 = rgb,
            (Ok(i), None) => {
                self.colors.remove(i);
            }
            (Err(i), Some(rgb)) => self.colors.insert(i, (key, rgb)),
            (Err(_), None) => {}
        }
    }

    /// Dynamic colour `n` (10..=19): what a program set, else the
    /// configured foreground (text, cursor, pointer, Tektronix text and
    /// cursor, highlight text) or background (the others).
    pub fn dynamic_color(&self, n: u16) -> (u8, u8, u8) {
        let fg = self.fg_override.unwrap_or(self.config.foreground);
        let bg = self.bg_override.unwrap_or(self.config.background);
        match n {
            10 => fg,
            11 => bg,
            _ => match self
                .colors
                .binary_search_by_key(&(DYNAMIC_BASE + n), |(k, _)| *k)
            {
                Ok(i) => self.colors[i].1,
                Err(_) if matches!(n, 12 | 13 | 15 | 18 | 19) => fg,
                Err(_) => bg,
            },
        }
    }

    fn set_dynamic_color(&mut self, n: u16, rgb: Option<(u8, u8, u8)>) {
        match n {
            10 => self.fg_override = rgb,
            11 => self.bg_override = rgb,
            12..=19 => self.set_color_key(DYNAMIC_BASE + n, rgb),
            _ => {}
        }
    }
}

/// OSC 0 (icon and window title), 1 (icon title), 2 (window title). The
/// window title goes through `Handler::set_title` (its event, its limit);
/// forwarded as they are.
fn osc_titles(s: &mut Screen, seq: &[u8]) -> bool {
    use vte::ansi::Handler;
    let Some(body) = seq.strip_prefix(b"\x1b]") else {
        return false;
    };
    let body = body
        .strip_suffix(b"\x1b\\")
        .or_else(|| body.strip_suffix(b"\x07"))
        .unwrap_or(body);
    let (which, text) = match body {
        [w @ (b'0' | b'1' | b'2'), b';', text @ ..] => (*w, text),
        _ => return false,
    };
    // As vte reads a title: C0 controls dropped, invalid UTF-8 replaced,
    // surrounding blanks trimmed.
    let text: Vec<u8> = text.iter().copied().filter(|&b| b >= 0x20).collect();
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    match which {
        b'0' => {
            s.icon = None;
            s.set_title(Some(text));
        }
        b'1' => s.icon = Some(truncate_title(text)),
        _ => s.set_window_title(text),
    }
    true
}

fn truncate_title(mut t: String) -> String {
    if let Some((cut, _)) = t.char_indices().nth(super::screen::MAX_TITLE) {
        t.truncate(cut);
    }
    t
}

impl Screen {
    /// Sets the window title only: an icon title that followed it keeps
    /// the old one.
    fn set_window_title(&mut self, text: String) {
        use vte::ansi::Handler;
        if self.icon.is_none() {
            self.icon = Some(self.title.clone());
        }
        self.set_title(Some(text));
        if self.icon.as_deref() == Some(self.title.as_str()) {
            self.icon = None;
        }
    }

    /// XTWINOPS 22: pushes the icon and window titles, as one entry of
    /// the two stacks (xterm saves both whatever part the parameter
    /// names); the oldest entry goes past `MAX_TITLE_STACK`.
    fn push_titles(&mut self, which: u16) {
        if which > 2 {
            return;
        }
        if self.title_stack.len() >= super::screen::MAX_TITLE_STACK {
            self.title_stack.remove(0);
            self.icon_stack.remove(0);
        }
        let icon = self.icon.clone().unwrap_or_else(|| self.title.clone());
        self.icon_stack.push(icon);
        self.title_stack.push(self.title.clone());
    }

    /// XTWINOPS 23: pops the newest entry, restoring its icon title
    /// (`which` 1), window title (2) or both (0).
    fn pop_titles(&mut self, which: u16) {
        if which > 2 {
            return;
        }
        let (Some(window), Some(icon)) = (self.title_stack.pop(), self.icon_stack.pop()) else {
            return;
        };
        if which != 1 {
            self.set_window_title(window);
        }
        if which != 2 {
            self.icon = (icon != self.title).then_some(icon);
        }
    }
}
