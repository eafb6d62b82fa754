//! One screen cell and the pen (current SGR state) that stamps it.
//!
//! A cell is three 32-bit words, 12 bytes, so a 200x50 screen is 120 KB
//! instead of vt100's 320 KB. Each colour word carries the colour in its low
//! 26 bits and six attribute flags in its top six bits; the pen is the same
//! two words, so writing a cell is three stores and comparing styles is two
//! integer compares. Rare data (combining marks, underline colour, OSC 8
//! hyperlinks: `Extra`) lives in per-row side tables in `grid.rs`, never in
//! the cell, so text that uses none of it pays one empty check per write.
//!
//! Invariants: a `WIDE` cell is always followed by a `SPACER` cell in the same
//! row (the grid's writers maintain this); a spacer holds `' '`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Colour kinds, in bits 24..26 of a colour word.
const KIND_SHIFT: u32 = 24;
const KIND_MASK: u32 = 0b11 << KIND_SHIFT;
const KIND_INDEXED: u32 = 1 << KIND_SHIFT;
const KIND_RGB: u32 = 2 << KIND_SHIFT;
const COLOR_MASK: u32 = (1 << 26) - 1;

// Flags kept in the foreground word.
pub const BOLD: u32 = 1 << 26;
pub const DIM: u32 = 1 << 27;
pub const ITALIC: u32 = 1 << 28;
pub const BLINK: u32 = 1 << 29;
pub const INVERSE: u32 = 1 << 30;
pub const HIDDEN: u32 = 1 << 31;
// Flags kept in the background word.
pub const STRIKE: u32 = 1 << 26;
/// Underline style, 0 = none, 1 single, 2 double, 3 curly, 4 dotted, 5 dashed.
pub const UL_SHIFT: u32 = 27;
pub const UL_MASK: u32 = 0b111 << UL_SHIFT;
/// The cell holds a double-width character; the next cell is its spacer.
pub const WIDE: u32 = 1 << 30;
/// The right half of a double-width character.
pub const SPACER: u32 = 1 << 31;

/// Decoded colour, for callers that want to look rather than store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Color {
    Default,
    /// 0..=15 are the ANSI colours, the rest the 256-colour cube and greys.
    Indexed(u8),
    Rgb(u8, u8, u8),
}

impl Color {
    pub fn pack(self) -> u32 {
        match self {
            Color::Default => 0,
            Color::Indexed(i) => KIND_INDEXED | u32::from(i),
            Color::Rgb(r, g, b) => {
                KIND_RGB | (u32::from(r) << 16) | (u32::from(g) << 8) | u32::from(b)
            }
        }
    }

    pub fn unpack(word: u32) -> Color {
        match word & KIND_MASK {
            KIND_INDEXED => Color::Indexed((word & 0xff) as u8),
            KIND_RGB => Color::Rgb((word >> 16) as u8, (word >> 8) as u8, word as u8),
            _ => Color::Default,
        }
    }
}

/// The SGR state: foreground word and background word, flags included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Style {
    pub fg: u32,
    pub bg: u32,
}

impl Style {
    pub const DEFAULT: Style = Style { fg: 0, bg: 0 };

    pub fn fg_color(self) -> Color {
        Color::unpack(self.fg & COLOR_MASK)
    }
    pub fn bg_color(self) -> Color {
        Color::unpack(self.bg & COLOR_MASK)
    }
    pub fn set_fg(&mut self, c: Color) {
        self.fg = (self.fg & !COLOR_MASK) | c.pack();
    }
    pub fn set_bg(&mut self, c: Color) {
        self.bg = (self.bg & !COLOR_MASK) | c.pack();
    }
    pub fn underline(self) -> u32 {
        (self.bg & UL_MASK) >> UL_SHIFT
    }
    pub fn set_underline(&mut self, style: u32) {
        self.bg = (self.bg & !UL_MASK) | ((style.min(5)) << UL_SHIFT);
    }
    /// The style with cell-layout flags (wide, spacer) removed.
    pub fn pen_part(self) -> Style {
        Style {
            fg: self.fg,
            bg: self.bg & !(WIDE | SPACER),
        }
    }
    /// The style an erase leaves behind: background colour only (xterm's
    /// background-colour-erase), no attributes.
    pub fn erase_part(self) -> Style {
        Style {
            fg: 0,
            bg: self.bg & COLOR_MASK,
        }
    }

    /// Appends the SGR parameters (without `CSI` and `m`) that set this style
    /// from a reset state, starting with `0`.
    pub fn write_sgr_params(self, out: &mut Vec<u8>) {
        out.push(b'0');
        let flags = [
            (self.fg & BOLD, "1"),
            (self.fg & DIM, "2"),
            (self.fg & ITALIC, "3"),
            (self.fg & BLINK, "5"),
            (self.fg & INVERSE, "7"),
            (self.fg & HIDDEN, "8"),
            (self.bg & STRIKE, "9"),
        ];
        for (on, code) in flags {
            if on != 0 {
                out.push(b';');
                out.extend_from_slice(code.as_bytes());
            }
        }
        match self.underline() {
            0 => {}
            1 => out.extend_from_slice(b";4"),
            2 => out.extend_from_slice(b";4:2"),
            n => {
                out.extend_from_slice(b";4:");
                push_num(out, n);
            }
        }
        write_color(out, self.fg_color(), 30, 90, 38);
        write_color(out, self.bg_color(), 40, 100, 48);
    }

    /// The full `CSI ... m` sequence for this style.
    pub fn write_sgr(self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\x1b[");
        self.write_sgr_params(out);
        out.push(b'm');
    }
}

fn write_color(out: &mut Vec<u8>, c: Color, base: u32, bright: u32, ext: u32) {
    match c {
        Color::Default => {}
        Color::Indexed(i) if i < 8 => {
            out.push(b';');
            push_num(out, base + u32::from(i));
        }
        Color::Indexed(i) if i < 16 => {
            out.push(b';');
            push_num(out, bright + u32::from(i) - 8);
        }
        Color::Indexed(i) => {
            out.push(b';');
            push_num(out, ext);
            out.extend_from_slice(b";5;");
            push_num(out, u32::from(i));
        }
        Color::Rgb(r, g, b) => {
            out.push(b';');
            push_num(out, ext);
            out.extend_from_slice(b";2;");
            push_num(out, u32::from(r));
            out.push(b';');
            push_num(out, u32::from(g));
            out.push(b';');
            push_num(out, u32::from(b));
        }
    }
}

/// Appends a decimal number without going through `fmt`.
pub fn push_num(out: &mut Vec<u8>, mut n: u32) {
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Longest hyperlink (id plus URI) kept; a longer one is dropped (the
/// sequence is still forwarded). Links are stored per row, so this bounds a
/// row's side table at `cols * MAX_LINK` bytes whatever the program sends.
pub const MAX_LINK: usize = 2048;

/// An OSC 8 hyperlink: `ESC ] 8 ; id=ID ; URI ST`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Link {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub uri: String,
}

/// The attributes that do not fit in a cell's three words: underline
/// colour and hyperlink. Part of the pen like `Style`, stored per cell in a
/// row's side table. `Arc` so stamping a long link on every cell of a run
/// is a reference count, not a copy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Extra {
    /// Underline colour as `Color::pack` gives it; 0 = follow the text.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ul: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Arc<Link>>,
    /// DECSCA 1: selective erase (DECSED, DECSEL, DECSERA) spares the cell.
    #[serde(default, skip_serializing_if = "is_false")]
    pub protected: bool,
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Extra {
    pub fn is_empty(&self) -> bool {
        self.ul == 0 && self.link.is_none() && !self.protected
    }

    /// `Some(self)` unless empty: what a row's side table stores.
    pub fn non_empty(&self) -> Option<&Extra> {
        (!self.is_empty()).then_some(self)
    }

    pub fn set_underline_color(&mut self, c: Option<Color>) {
        self.ul = c.map_or(0, Color::pack);
    }

    /// Sets or (with `None` or an over-long link) ends the hyperlink.
    pub fn set_link(&mut self, link: Option<Link>) {
        self.link = link
            .filter(|l| l.uri.len() + l.id.as_ref().map_or(0, String::len) <= MAX_LINK)
            .map(Arc::new);
    }
}

/// Writes the fewest sequences that take a terminal from one (style,
/// extra) state to another, for everything that replays cells to a
/// terminal or a capture: attach redraw, `capture --ansi`, scrollback.
/// Starts from the reset state (default style, no link).
#[derive(Default)]
pub struct PenWriter {
    style: Style,
    ul: u32,
    link: Option<Arc<Link>>,
}

impl PenWriter {
    pub fn new() -> PenWriter {
        PenWriter::default()
    }

    /// Moves the terminal to `style` and `extra` (`None` = no extra).
    #[inline]
    pub fn pen(&mut self, out: &mut Vec<u8>, style: Style, extra: Option<&Extra>) {
        let ul = extra.map_or(0, |e| e.ul);
        if style != self.style || ul != self.ul {
            write_sgr_ul(out, style, ul);
            self.style = style;
            self.ul = ul;
        }
        let link = extra.and_then(|e| e.link.as_ref());
        if link != self.link.as_ref() {
            write_link(out, link.map(|l| &**l));
            self.link = link.cloned();
        }
    }

    /// Back to the reset state: SGR 0 and no open link, if needed.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.style != Style::DEFAULT || self.ul != 0 {
            out.extend_from_slice(b"\x1b[0m");
            self.style = Style::DEFAULT;
            self.ul = 0;
        }
        if self.link.is_some() {
            write_link(out, None);
            self.link = None;
        }
    }
}

/// `style.write_sgr` plus the underline colour (`ul`, packed; 0 = none).
pub fn write_sgr_ul(out: &mut Vec<u8>, style: Style, ul: u32) {
    out.extend_from_slice(b"\x1b[");
    style.write_sgr_params(out);
    // 58 has no short forms for the first 16 colours: always `58;5;N`.
    match Color::unpack(ul) {
        Color::Default => {}
        Color::Indexed(i) => {
            out.extend_from_slice(b";58;5;");
            push_num(out, u32::from(i));
        }
        rgb => write_color(out, rgb, 58, 58, 58),
    }
    out.push(b'm');
}

/// OSC 8 opening `link`, or closing the current one with `None`.
pub fn write_link(out: &mut Vec<u8>, link: Option<&Link>) {
    out.extend_from_slice(b"\x1b]8;");
    if let Some(l) = link {
        if let Some(id) = &l.id {
            out.extend_from_slice(b"id=");
            out.extend(id.bytes().filter(|b| !b.is_ascii_control()));
        }
        out.push(b';');
        out.extend(l.uri.bytes().filter(|b| !b.is_ascii_control()));
    } else {
        out.push(b';');
    }
    out.extend_from_slice(b"\x1b\\");
}

/// One screen cell: a character and its style words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub ch: char,
    pub style: Style,
}

impl Cell {
    pub const BLANK: Cell = Cell {
        ch: ' ',
        style: Style::DEFAULT,
    };

    pub fn blank(style: Style) -> Cell {
        Cell { ch: ' ', style }
    }
    pub fn is_wide(&self) -> bool {
        self.style.bg & WIDE != 0
    }
    pub fn is_spacer(&self) -> bool {
        self.style.bg & SPACER != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_is_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Cell>(), 12);
    }

    #[test]
    fn colours_round_trip_with_flags() {
        let mut s = Style::default();
        s.fg |= BOLD | HIDDEN;
        s.set_fg(Color::Rgb(1, 2, 3));
        s.set_bg(Color::Indexed(200));
        s.set_underline(3);
        assert_eq!(s.fg_color(), Color::Rgb(1, 2, 3));
        assert_eq!(s.bg_color(), Color::Indexed(200));
        assert_eq!(s.underline(), 3);
        assert_ne!(s.fg & BOLD, 0);
        let mut out = Vec::new();
        s.write_sgr(&mut out);
        assert_eq!(out, b"\x1b[0;1;8;4:3;38;2;1;2;3;48;5;200m");
    }
}
