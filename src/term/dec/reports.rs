//! The reports that read the model back: device status (DSR, DECXCPR),
//! cursor and tab-stop information (DECRQPSR), window operations
//! (XTWINOPS) and the DCS requests (DECRQSS, XTGETTCAP).

use super::Csi;
use crate::term::cell::push_num;
use crate::term::screen::{Charset, Screen};

/// `CSI marker p1;p2;... fin`.
pub(super) fn csi_reply(marker: &[u8], params: &[u16], fin: &[u8]) -> Vec<u8> {
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
pub(super) fn dec_dsr(s: &mut Screen, c: &Csi<'_>) {
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

pub(super) fn winops(s: &mut Screen, c: &Csi<'_>) -> bool {
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
pub(super) fn cursor_information(s: &Screen) -> Vec<u8> {
    let (row, col) = s.origin_position();
    let pen = s.pen;
    let mut rend = 0x40u8;
    if pen.fg & crate::term::cell::BOLD != 0 {
        rend |= 1;
    }
    if pen.underline() != 0 {
        rend |= 2;
    }
    if pen.fg & crate::term::cell::BLINK != 0 {
        rend |= 4;
    }
    if pen.fg & crate::term::cell::INVERSE != 0 {
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
pub(super) fn tab_stops(s: &Screen) -> Vec<u8> {
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
pub(super) fn dcs_dispatch(s: &mut Screen, seq: &[u8]) -> bool {
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
