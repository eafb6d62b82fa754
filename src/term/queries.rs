//! Answers to the terminal queries the server handles itself.
//!
//! Why the server answers: several clients may be attached to one pane (or
//! none). If queries were forwarded, every attached terminal would answer and
//! the program would read two replies, or none while detached. So the model
//! answers DA1, DA2, DSR 5/6, DECRQM (ANSI and private), kitty `CSI ? u`,
//! XTVERSION `CSI > q`, `CSI ? 4 m` (modifyOtherKeys), `CSI 18 t` here and
//! the DEC reports and colour queries in `dec.rs`, and `Terminal::feed`
//! removes exactly these sequences from the bytes forwarded to clients.
//! No query is forwarded: pixel sizes while the client's cell size is
//! unknown go unanswered, capabilities XTGETTCAP does not know are
//! answered as unknown.

use super::cell::push_num;
use super::screen::Screen;

/// Primary DA at conformance `level` (DECSCL): the level's class (62 for
/// VT220 .. 65 for VT500; VT100 with advanced video at level 1) and what
/// ptyd implements of the features DA1 lists: selective erase (6),
/// horizontal scrolling (21), ANSI colour (22), rectangular editing (28;
/// from VT400). Not the printer port, ReGIS, sixel, national character
/// sets, user windows or the text locator a VT500 or xterm may list.
pub fn da1(level: u8) -> Vec<u8> {
    match level {
        1 => b"\x1b[?1;2c".to_vec(),
        2 | 3 => format!("\x1b[?6{level};6;22c").into_bytes(),
        _ => format!("\x1b[?6{level};6;21;22;28c").into_bytes(),
    }
}

/// Secondary DA at conformance `level`: the terminal type xterm gives for
/// it (1 VT220, 24 VT320, 41 VT420, 64 VT520), firmware version 10, ROM 0.
pub fn da2(level: u8) -> Vec<u8> {
    let kind = match level {
        1 | 2 => 1,
        3 => 24,
        4 => 41,
        _ => 64,
    };
    format!("\x1b[>{kind};10;0c").into_bytes()
}

pub fn xtversion() -> Vec<u8> {
    format!("\x1bP>|ptyd({})\x1b\\", env!("CARGO_PKG_VERSION")).into_bytes()
}

/// Recognises XTVERSION (`CSI > q` or `CSI > 0 q`), which vte does not
/// decode, in one complete sequence.
pub fn is_xtversion(seq: &[u8]) -> bool {
    matches!(seq, b"\x1b[>q" | b"\x1b[>0q")
}

/// REP (`CSI Pn b`) as vte would dispatch it: no intermediates or private
/// markers, at most 32 parameters; returns the count (0 means 1). Bytes
/// vte ignores inside a CSI (C0 controls, DEL, 8-bit) are skipped.
pub fn parse_rep(seq: &[u8]) -> Option<u16> {
    let body = seq.strip_prefix(b"\x1b[")?.strip_suffix(b"b")?;
    let mut params = 1usize;
    let mut first: Option<u16> = None;
    let mut value: u16 = 0;
    for &b in body {
        match b {
            b'0'..=b'9' => value = value.saturating_mul(10).saturating_add(u16::from(b - b'0')),
            b';' | b':' => {
                first.get_or_insert(value);
                params += 1;
            }
            0x20..=0x2F | 0x3C..=0x3F => return None,
            _ => {}
        }
    }
    if params > 32 {
        return None;
    }
    let n = first.unwrap_or(value);
    Some(n.max(1))
}

pub fn cursor_position_report(s: &Screen) -> Vec<u8> {
    let row = if s.modes.origin {
        s.cursor.row.saturating_sub(s.scroll_top)
    } else {
        s.cursor.row
    };
    let mut out = b"\x1b[".to_vec();
    push_num(&mut out, (row + 1) as u32);
    out.push(b';');
    push_num(&mut out, (s.cursor.col + 1) as u32);
    out.push(b'R');
    out
}

/// DECRPM: 1 set, 2 reset, 4 permanently reset, 0 not recognised.
pub fn decrpm(private: bool, mode: u16, state: u8) -> Vec<u8> {
    let mut out = if private {
        b"\x1b[?".to_vec()
    } else {
        b"\x1b[".to_vec()
    };
    push_num(&mut out, u32::from(mode));
    out.push(b';');
    out.push(b'0' + state.min(4));
    out.extend_from_slice(b"$y");
    out
}

pub fn kitty_flags(flags: u8) -> Vec<u8> {
    let mut out = b"\x1b[?".to_vec();
    push_num(&mut out, u32::from(flags));
    out.push(b'u');
    out
}

pub fn modify_other_keys(level: u8) -> Vec<u8> {
    let mut out = b"\x1b[>4;".to_vec();
    push_num(&mut out, u32::from(level));
    out.push(b'm');
    out
}

pub fn text_area_chars(rows: usize, cols: usize) -> Vec<u8> {
    let mut out = b"\x1b[8;".to_vec();
    push_num(&mut out, rows as u32);
    out.push(b';');
    push_num(&mut out, cols as u32);
    out.push(b't');
    out
}

/// `OSC prefix ; rgb:rrrr/gggg/bbbb terminator`, the xterm reply format.
pub fn color_report(prefix: &str, (r, g, b): (u8, u8, u8), terminator: &str) -> Vec<u8> {
    format!("\x1b]{prefix};rgb:{r:02x}{r:02x}/{g:02x}{g:02x}/{b:02x}{b:02x}{terminator}")
        .into_bytes()
}

/// xterm's default 256-colour palette.
pub fn palette(i: u8) -> (u8, u8, u8) {
    const BASE: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    match i {
        0..=15 => BASE[usize::from(i)],
        16..=231 => {
            let i = i - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            (level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        _ => {
            let v = 8 + (i - 232) * 10;
            (v, v, v)
        }
    }
}
