//! The few CSI sequences that dominate real output (SGR, CUP, EL), decoded
//! here instead of by vte. Everything else, and any variant this code does
//! not recognise, goes to vte. Also `ground`, the loop `Terminal::feed`
//! runs in ground state: text, C0 controls and these sequences decoded
//! straight from the input, each byte looked at once.
//!
//! Why: a coloured `ls` or a TUI redraw is mostly these three; decoding them
//! directly roughly doubles throughput. Each mirrors vte 0.15's `ansi`
//! dispatch exactly (parameter grouping with `:` subparameters, saturating
//! values, defaults, the 32-value limit, and SGR's consumption of colour
//! arguments), which `tests.rs` checks against vte on random sequences.

use super::TextLog;
use super::cell::{BLINK, BOLD, Color, DIM, HIDDEN, INVERSE, ITALIC, STRIKE, Style};
use super::screen::{Charset, Screen};

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
    fn new() -> Params {
        Params {
            values: [0; MAX_VALUES],
            ends: 0,
            len: 0,
        }
    }

    /// Parses the parameter bytes at the start of `body` (digits, `;` and
    /// `:`), stopping at the first other byte. Returns its index and whether
    /// a `:` was seen, or `None` if there are too many values for vte.
    #[inline]
    fn parse_prefix(&mut self, body: &[u8]) -> Option<(usize, bool)> {
        // u32 capped at u16::MAX after each digit: the same values as
        // vte's saturating u16 arithmetic, without its overflow branches.
        let mut cur: u32 = 0;
        let mut len = 0;
        let mut ends = 0u32;
        let mut colon = false;
        let mut i = 0;
        while let Some(&b) = body.get(i) {
            let d = b.wrapping_sub(b'0');
            if d < 10 {
                cur = (cur * 10 + u32::from(d)).min(u32::from(u16::MAX));
            } else if b == b';' || b == b':' {
                if len == MAX_VALUES {
                    return None;
                }
                self.values[len] = cur as u16;
                ends |= u32::from(b == b';') << len;
                colon |= b == b':';
                len += 1;
                cur = 0;
            } else {
                break;
            }
            i += 1;
        }
        if len == MAX_VALUES {
            return None;
        }
        self.values[len] = cur as u16;
        ends |= 1 << len;
        self.len = len + 1;
        self.ends = ends;
        Some((i, colon))
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
    let mut params = Params::new();
    match params.parse_prefix(body) {
        Some((n, colon)) if n == body.len() => dispatch(s, &params, fin, colon),
        _ => false,
    }
}

/// The CSI at the start of `input` (which starts with `ESC [`), decoded and
/// applied if it is complete and one of the fast ones: its length. `None`,
/// having done nothing, for anything else (incomplete, a private marker or
/// intermediate, another final byte), which the general path then handles.
/// Parameters are parsed once, straight from the input.
#[inline]
pub fn dispatch_at(s: &mut Screen, input: &[u8]) -> Option<usize> {
    // Not with an underline colour set: a reset clears that too, and it
    // lives in `pen_extra`, which the general path keeps.
    if s.pen_extra.ul == 0
        && let Some(n) = reset_len(input)
    {
        s.pen = Style::DEFAULT;
        return Some(n);
    }
    let mut params = Params::new();
    let (n, fin, colon) = parse_at(&mut params, input)?;
    dispatch(s, &params, fin, colon).then_some(n)
}

/// The reset that ends every coloured span, `CSI m` or `CSI 0 m`, is half
/// of all SGRs in coloured output: recognised without parsing. Its length.
#[inline(always)]
fn reset_len(input: &[u8]) -> Option<usize> {
    match input.get(2..)? {
        [b'm', ..] => Some(3),
        [b'0', b'm', ..] => Some(4),
        _ => None,
    }
}

/// The parameters, length, final byte and "has a `:`" of the complete CSI
/// at the start of `input` (which starts with `ESC [`), if its parameters
/// are plain (digits, `;`, `:`) and not too many for vte.
/// Parsed in place: the values are written as `u16`s and read back soon,
/// and moving the struct in between made the CPU wait on the stores.
#[inline(always)]
fn parse_at(params: &mut Params, input: &[u8]) -> Option<(usize, u8, bool)> {
    let body = input.get(2..)?;
    let (n, colon) = params.parse_prefix(body)?;
    let fin = *body.get(n)?;
    Some((n + 3, fin, colon))
}

/// `dispatch_at` for SGR only, on a pen passed by value: the new pen and
/// the sequence's length, `None` for anything else (and at 58/59). By
/// value so a declined SGR leaves no half-applied pen behind, and the
/// text loop's pen can stay in registers.
#[inline(always)]
fn sgr_at(mut pen: Style, input: &[u8]) -> Option<(Style, usize)> {
    if let Some(n) = reset_len(input) {
        return Some((Style::DEFAULT, n));
    }
    let mut params = Params::new();
    let (n, fin, colon) = parse_at(&mut params, input)?;
    if fin != b'm' {
        return None;
    }
    if colon {
        if touches_extra(&params) {
            return None;
        }
        sgr(&mut pen, &params);
        return Some((pen, n));
    }
    Some((sgr_values(pen, &params.values[..params.len])?, n))
}

/// Printable ASCII and the SGRs between its runs, drawn on the cursor's row
/// in one `Row::write_ascii_styled`: in coloured output the runs are a word
/// or a space long, and looking up the row and modes, or fixing the row's
/// invariants, per run cost more than drawing it. Does what
/// `print_ascii_prefix` and `dispatch_at` would do in turn; stops at the
/// row's end (the wrap is left to `print_ascii_prefix`) or at anything
/// else. Returns the bytes used.
#[inline]
fn text_and_sgr<L: TextLog>(s: &mut Screen, input: &[u8], log: &mut L) -> usize {
    // An underline colour or a link in the pen goes into the row's side
    // table, which `print_ascii_prefix` handles; the SGRs here never set
    // one (`sgr_at` declines 58 and 59).
    // Left/right margins end the row at the right margin: the general
    // printer handles them.
    if s.modes.insert
        || s.cursor.pending_wrap
        || s.lr.is_some()
        || s.charsets[s.active_charset & 3] != Charset::Ascii
        || !s.pen_extra.is_empty()
    {
        let n = s.print_ascii_prefix(input);
        log.text(input, n);
        return n;
    }
    let cols = s.cols;
    let col = s.cursor.col;
    let pen = s.pen;
    let row = s.cursor.row;
    let r = s.grid_mut().row_mut(row);
    // The text between the SGRs goes to the log as each SGR is met: from
    // `run` to the SGR's start, the rest after the loop.
    let mut run = 0;
    let (n, used, pen) = r.write_ascii_styled(col, input, pen, |pen, rest| {
        if rest.get(1) != Some(&b'[') {
            return None;
        }
        let next = sgr_at(pen, rest);
        if let Some((_, len)) = next {
            let at = input.len() - rest.len();
            // `get`, which cannot panic, so that without a log this is
            // no code at all.
            if let Some(from) = input.get(run..) {
                log.text(from, at.saturating_sub(run));
            }
            run = at + len;
        }
        next
    });
    if let Some(from) = input.get(run..) {
        log.text(from, used.saturating_sub(run));
    }
    if n > 0 {
        s.last_char = Some(r.cells[col + n - 1].ch);
        s.cursor.advance_to(col + n, cols);
    }
    s.pen = pen;
    used
}

/// Decodes `input[i..]` for as long as it holds printable ASCII, C0 controls
/// and the fast CSI sequences, the bulk of real output; returns where it
/// stopped (at anything else: UTF-8, DEL, other sequences, an incomplete
/// one), for the general path to take over. Must only be called in the
/// boundary tracker's ground state, where these bytes mean the same to vte.
/// The text and controls go to `log` too (see `TextLog`); the sequences
/// taken here are dropped by its rules.
#[inline]
pub fn ground<L: TextLog>(s: &mut Screen, input: &[u8], mut i: usize, log: &mut L) -> usize {
    while let Some(&b) = input.get(i) {
        if (0x20..0x7F).contains(&b) {
            match text_and_sgr(s, &input[i..], log) {
                0 => return i,
                n => i += n,
            }
        } else if b == 0x1b {
            if input.get(i + 1) != Some(&b'[') {
                return i;
            }
            match dispatch_at(s, &input[i..]) {
                Some(n) => i += n,
                None => return i,
            }
        } else if b < 0x20 {
            s.execute(b);
            log.control(b);
            i += 1;
        } else {
            return i;
        }
    }
    i
}

/// Applies a parsed `CSI params fin`; false, having done nothing, unless
/// `fin` is one of the fast ones.
#[inline(always)]
fn dispatch(s: &mut Screen, params: &Params, fin: u8, colon: bool) -> bool {
    if fin == b'm' {
        // vte's handler (`handler.rs`) keeps `pen_extra` right.
        if s.pen_extra.ul != 0 {
            return false;
        }
        if colon {
            if touches_extra(params) {
                return false;
            }
            sgr(&mut s.pen, params);
            return true;
        }
        // Declining (at 58/59) leaves the screen as it was.
        let Some(pen) = sgr_values(s.pen, &params.values[..params.len]) else {
            return false;
        };
        s.pen = pen;
        return true;
    }
    if !matches!(fin, b'H' | b'f' | b'K') {
        return false;
    }
    let mut groups = params.groups();
    // vte's `next_param_or`: the group's first value unless it is 0.
    let mut next_or = |default: u16| match groups.next() {
        Some(&[v, ..]) if v != 0 => v,
        _ => default,
    };
    if fin == b'K' {
        s.erase_line_mode(next_or(0));
    } else {
        let row = next_or(1);
        let col = next_or(1);
        s.goto(i64::from(row) - 1, i64::from(col) - 1);
    }
    true
}

/// Whether an SGR with subparameters may set or clear the underline colour
/// (58, 59), which lives in `Screen::pen_extra`, beyond the `Style` these
/// paths work on. Rare input: a group that merely starts with 58 as a
/// colour argument only costs the general path.
fn touches_extra(params: &Params) -> bool {
    params.groups().any(|g| matches!(g.first(), Some(58 | 59)))
}

/// SGR without subparameters (every group one value), the common form:
/// the same as `sgr` on such input, without the group slices. `None` at an
/// underline colour (58, 59: `Screen::pen_extra`, out of reach here): the
/// caller hands the whole SGR to the general path.
#[inline(always)]
fn sgr_values(mut p: Style, values: &[u16]) -> Option<Style> {
    let mut k = 0;
    while let Some(&v) = values.get(k) {
        k += 1;
        match sgr_simple(p, v) {
            Some(next) => p = next,
            None if v == 58 || v == 59 => return None,
            None => {
                let (c, used) = color_values(values.get(k..).unwrap_or_default());
                k += used;
                match (v, c) {
                    (38, Some(c)) => p.set_fg(c),
                    (48, Some(c)) => p.set_bg(c),
                    _ => {}
                }
            }
        }
    }
    Some(p)
}

/// `parse_color` over plain values: the colour and how many values it
/// consumed, which like vte's is as far as parsing got.
#[inline]
fn color_values(v: &[u16]) -> (Option<Color>, usize) {
    match v.first() {
        Some(2) => {
            for k in 1..4 {
                match v.get(k) {
                    None => return (None, v.len()),
                    Some(&x) if x > 255 => return (None, k + 1),
                    Some(_) => {}
                }
            }
            (Some(Color::Rgb(v[1] as u8, v[2] as u8, v[3] as u8)), 4)
        }
        Some(5) => match v.get(1) {
            None => (None, 1),
            Some(&x) => (u8::try_from(x).ok().map(Color::Indexed), 2),
        },
        Some(_) => (None, 1),
        None => (None, 0),
    }
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

/// One SGR value that takes no arguments, applied to `p`; `None` for
/// 38/48/58, which do, and 59, which like 58 is `Screen::pen_extra`'s.
#[inline(always)]
fn sgr_simple(mut p: Style, v: u16) -> Option<Style> {
    match v {
        0 => p = Style::default(),
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
        38 | 48 | 58 | 59 => return None,
        _ => {}
    }
    Some(p)
}

fn sgr(p: &mut Style, params: &Params) {
    let mut groups = params.groups();
    while let Some(g) = groups.next() {
        let colour = |target: Target, c: Option<Color>, p: &mut Style| match (target, c) {
            (Target::Fg, Some(c)) => p.set_fg(c),
            (Target::Bg, Some(c)) => p.set_bg(c),
            _ => {}
        };
        match g {
            [0] => *p = Default::default(),
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
                colour(target, c, p);
            }
            [38, rest @ ..] => colour(Target::Fg, colon_color(rest), p),
            [48, rest @ ..] => colour(Target::Bg, colon_color(rest), p),
            // 58 and 59 never get here (`touches_extra`): the underline
            // colour is vte's handler's to set.
            _ => {}
        }
    }
}
