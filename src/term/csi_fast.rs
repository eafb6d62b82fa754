//! The few CSI sequences that dominate real output (SGR, CUP, EL), decoded
//! here instead of by vte. Everything else, and any variant this code does
//! not recognise, goes to vte.
//!
//! Why: a coloured `ls` or a TUI redraw is mostly these three; decoding them
//! directly roughly doubles throughput. Each mirrors vte 0.15's `ansi`
//! dispatch exactly (parameter grouping with `:` subparameters, saturating
//! values, defaults, the 32-value limit, and SGR's consumption of colour
//! arguments), which `tests.rs` checks against vte on random sequences.

use super::cell::{BLINK, BOLD, Color, DIM, HIDDEN, INVERSE, ITALIC, STRIKE, Style};
use super::screen::Screen;

const MAX_VALUES: usize = 32;

/// Parameter values with group boundaries, as vte's `Params` holds them.
/// Small (70 bytes) and filled in place: this is on the hottest path.
struct Params {
    values: [u16; MAX_VALUES],
    /// Bit `i` set: value `i` is the last of its group (followed by `;` or
    /// the end).
    ends: u32,
    len: usize,
}

impl Params {
    /// Parses the bytes between `CSI` and the final byte; false if they hold
    /// anything but digits, `;` and `:`, or too many values for vte.
    fn parse(&mut self, body: &[u8]) -> bool {
        let mut cur: u16 = 0;
        let mut len = 0;
        let mut ends = 0u32;
        for &b in body {
            match b {
                b'0'..=b'9' => cur = cur.saturating_mul(10).saturating_add(u16::from(b - b'0')),
                b';' | b':' => {
                    if len == MAX_VALUES {
                        return false;
                    }
                    self.values[len] = cur;
                    ends |= u32::from(b == b';') << len;
                    len += 1;
                    cur = 0;
                }
                _ => return false,
            }
        }
        if len == MAX_VALUES {
            return false;
        }
        self.values[len] = cur;
        ends |= 1 << len;
        self.len = len + 1;
        self.ends = ends;
        true
    }

    /// The groups, each a slice of values (a parameter and its subparameters).
    fn groups(&self) -> Groups<'_> {
        Groups { p: self, at: 0 }
    }
}

struct Groups<'a> {
    p: &'a Params,
    at: usize,
}

impl<'a> Iterator for Groups<'a> {
    type Item = &'a [u16];
    #[inline]
    fn next(&mut self) -> Option<&'a [u16]> {
        let start = self.at;
        if start >= self.p.len {
            return None;
        }
        // Distance to the next group end at or after `start`.
        let n = (self.p.ends >> start).trailing_zeros() as usize + 1;
        let end = (start + n).min(self.p.len);
        self.at = end;
        Some(&self.p.values[start..end])
    }
}

/// Handles `seq` (a whole `CSI ... final`) if it is one of the fast ones.
/// Returns false, having done nothing, otherwise.
pub fn try_dispatch(s: &mut Screen, seq: &[u8]) -> bool {
    let Some(body) = seq.strip_prefix(b"\x1b[") else {
        return false;
    };
    let Some((&fin, body)) = body.split_last() else {
        return false;
    };
    // The common SGRs (`CSI m`, `CSI 1;31 m`, `CSI 0 m`) are plain values
    // without subparameters or colour arguments: apply them one by one as
    // they are parsed, without building Params. Anything else (`:`, an
    // extended colour 38/48/58, a private marker, more than 32 values, which
    // vte ignores) restores the pen and takes the general path.
    if fin == b'm' {
        let saved = s.pen;
        let mut v: u16 = 0;
        let mut values = 0;
        let mut simple = true;
        for &b in body.iter().chain(std::iter::once(&b';')) {
            match b {
                b'0'..=b'9' => v = v.saturating_mul(10).saturating_add(u16::from(b - b'0')),
                b';' => {
                    values += 1;
                    if values > MAX_VALUES || !sgr_simple(&mut s.pen, v) {
                        simple = false;
                        break;
                    }
                    v = 0;
                }
                _ => {
                    simple = false;
                    break;
                }
            }
        }
        if simple {
            // SGR 0 also resets the underline colour, which lives beside
            // the pen (in `pen_extra`), so `sgr_simple` cannot reach it.
            if s.pen_extra.ul != 0 && has_reset(body) {
                s.pen_extra.ul = 0;
            }
            return true;
        }
        s.pen = saved;
    }
    if !matches!(fin, b'm' | b'H' | b'f' | b'K') {
        return false;
    }
    let mut params = Params {
        values: [0; MAX_VALUES],
        ends: 0,
        len: 0,
    };
    if !params.parse(body) {
        return false;
    }
    let mut groups = params.groups();
    // vte's `next_param_or`: the group's first value unless it is 0.
    let mut next_or = |default: u16| match groups.next() {
        Some(&[v, ..]) if v != 0 => v,
        _ => default,
    };
    match fin {
        b'H' | b'f' => {
            let row = next_or(1);
            let col = next_or(1);
            s.goto(i64::from(row) - 1, i64::from(col) - 1);
        }
        b'K' => {
            let col = s.cursor.col;
            match next_or(0) {
                0 => s.erase_in_line(col, usize::MAX),
                1 => s.erase_in_line(0, col + 1),
                2 => s.erase_in_line(0, usize::MAX),
                _ => {}
            }
        }
        _ => sgr(s, &params),
    }
    true
}

/// Whether a simple SGR body (digits and `;`) holds a 0 value: an empty
/// body, an empty value or one of only zeros.
fn has_reset(body: &[u8]) -> bool {
    body.split(|&b| b == b';')
        .any(|v| v.iter().all(|&b| b == b'0'))
}

fn named(i: u16) -> Color {
    Color::Indexed(i as u8)
}

/// vte's `parse_sgr_color` over an iterator of values.
fn parse_color(it: &mut dyn Iterator<Item = u16>) -> Option<Color> {
    match it.next() {
        Some(2) => {
            let r = u8::try_from(it.next()?).ok()?;
            let g = u8::try_from(it.next()?).ok()?;
            let b = u8::try_from(it.next()?).ok()?;
            Some(Color::Rgb(r, g, b))
        }
        Some(5) => Some(Color::Indexed(u8::try_from(it.next()?).ok()?)),
        _ => None,
    }
}

/// vte's `handle_colon_rgb` for `38:...`, `48:...`, `58:...`.
fn colon_color(rest: &[u16]) -> Option<Color> {
    let first = *rest.first()?;
    let start = if rest.len() > 4 { 2 } else { 1 };
    let mut it =
        std::iter::once(first).chain(rest.get(start..).unwrap_or_default().iter().copied());
    parse_color(&mut it)
}

enum Target {
    Fg,
    Bg,
    Underline,
}

/// One SGR value that takes no arguments; false for 38/48/58, which do, and
/// 59, which `sgr` handles.
#[inline]
fn sgr_simple(p: &mut Style, v: u16) -> bool {
    match v {
        0 => *p = Style::default(),
        1 => p.fg |= BOLD,
        2 => p.fg |= DIM,
        3 => p.fg |= ITALIC,
        4 => p.set_underline(1),
        5 | 6 => p.fg |= BLINK,
        7 => p.fg |= INVERSE,
        8 => p.fg |= HIDDEN,
        9 => p.bg |= STRIKE,
        21 => p.fg &= !BOLD,
        22 => p.fg &= !(BOLD | DIM),
        23 => p.fg &= !ITALIC,
        24 => p.set_underline(0),
        25 => p.fg &= !BLINK,
        27 => p.fg &= !INVERSE,
        28 => p.fg &= !HIDDEN,
        29 => p.bg &= !STRIKE,
        30..=37 => p.set_fg(named(v - 30)),
        39 => p.set_fg(Color::Default),
        40..=47 => p.set_bg(named(v - 40)),
        49 => p.set_bg(Color::Default),
        90..=97 => p.set_fg(named(v - 90 + 8)),
        100..=107 => p.set_bg(named(v - 100 + 8)),
        // 59 resets the underline colour, outside `Style`.
        38 | 48 | 58 | 59 => return false,
        _ => {}
    }
    true
}

fn sgr(s: &mut Screen, params: &Params) {
    let mut groups = params.groups();
    while let Some(g) = groups.next() {
        let p = &mut s.pen;
        let colour = |target: Target, c: Option<Color>, s: &mut Screen| match (target, c) {
            (Target::Fg, Some(c)) => s.pen.set_fg(c),
            (Target::Bg, Some(c)) => s.pen.set_bg(c),
            (Target::Underline, Some(c)) => s.pen_extra.set_underline_color(Some(c)),
            _ => {}
        };
        match g {
            [0] => {
                *p = Default::default();
                s.pen_extra.ul = 0;
            }
            [1] => p.fg |= BOLD,
            [2] => p.fg |= DIM,
            [3] => p.fg |= ITALIC,
            [4, 0] => p.set_underline(0),
            [4, 2] => p.set_underline(2),
            [4, 3] => p.set_underline(3),
            [4, 4] => p.set_underline(4),
            [4, 5] => p.set_underline(5),
            [4, ..] => p.set_underline(1),
            [5] | [6] => p.fg |= BLINK,
            [7] => p.fg |= INVERSE,
            [8] => p.fg |= HIDDEN,
            [9] => p.bg |= STRIKE,
            [21] => p.fg &= !BOLD,
            [22] => p.fg &= !(BOLD | DIM),
            [23] => p.fg &= !ITALIC,
            [24] => p.set_underline(0),
            [25] => p.fg &= !BLINK,
            [27] => p.fg &= !INVERSE,
            [28] => p.fg &= !HIDDEN,
            [29] => p.bg &= !STRIKE,
            [v @ 30..=37] => p.set_fg(named(v - 30)),
            [39] => p.set_fg(Color::Default),
            [v @ 40..=47] => p.set_bg(named(v - 40)),
            [49] => p.set_bg(Color::Default),
            [v @ 90..=97] => p.set_fg(named(v - 90 + 8)),
            [v @ 100..=107] => p.set_bg(named(v - 100 + 8)),
            [38] | [48] | [58] => {
                let target = match g[0] {
                    38 => Target::Fg,
                    48 => Target::Bg,
                    _ => Target::Underline,
                };
                // Like vte, the colour's arguments are the first values of
                // the following groups, consumed as far as parsing got.
                let mut firsts = groups.by_ref().map(|g| g[0]);
                let c = parse_color(&mut firsts);
                colour(target, c, s);
            }
            [38, rest @ ..] => colour(Target::Fg, colon_color(rest), s),
            [48, rest @ ..] => colour(Target::Bg, colon_color(rest), s),
            [58, rest @ ..] => colour(Target::Underline, colon_color(rest), s),
            [59] => s.pen_extra.set_underline_color(None),
            _ => {}
        }
    }
}
