//! History lines: the compact, immutable byte form a row takes once it
//! scrolls off the main screen, and the scratch that builds it from cells.
//!
//! A line is a byte string: a flags byte, the text length, the UTF-8 text
//! (trailing blanks trimmed, spacers dropped, combining marks inline), then
//! style runs only if some cell was not default-styled, then, only for the
//! rare line with underline colours or hyperlinks (flag `FLAG_EXTRAS`),
//! their runs as JSON and that JSON's length in the last four bytes. Lines
//! are immutable once pushed: scrollback is read (capture) and trimmed,
//! never edited, so a lossy-but-stable conversion from cells is fine.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;

use super::cell::{Extra, PenWriter, SPACER, Style, WIDE};
use super::grid::Row;
pub(super) const FLAG_WRAPPED: u8 = 1;
pub(super) const FLAG_EXTRAS: u8 = 2;
/// `Row::wrap_gap`.
pub(super) const FLAG_GAP: u8 = 4;
pub(super) const HEADER: usize = 5;
pub(super) const RUN_BYTES: usize = 12;

/// `chars` characters from character `start` of a line's text carry `extra`.
pub type ExtraRun = (u32, u32, Extra);

/// A run of `chars` characters drawn with `style`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub chars: u32,
    pub style: Style,
}

/// A history line, owned: what `take_lines` hands out and `push` takes.
/// Inside `Scrollback` lines live packed in an `Arena` and are read through
/// `LineRef`, which has all the accessors (`Line::view`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line(pub(super) Box<[u8]>);

/// A history line's bytes, borrowed from a `Line` or from the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRef<'a>(pub(super) &'a [u8]);

/// A line read from the history: borrowed from the uncompressed newest
/// lines, or a copy out of a decompressed block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryLine<'a> {
    Hot(LineRef<'a>),
    Cold(Line),
}

impl HistoryLine<'_> {
    pub fn view(&self) -> LineRef<'_> {
        match self {
            HistoryLine::Hot(line) => *line,
            HistoryLine::Cold(line) => line.view(),
        }
    }
}

/// Serialized form: readable in JSON and independent of the packing.
/// Borrowed both ways: a live upgrade encodes and decodes every scrollback
/// line inside its blackout, so neither side copies a line's text into a
/// `String` of its own (the text is borrowed from the input unless it has
/// escapes).
#[derive(Serialize, Deserialize)]
pub(super) struct LineRepr<'a> {
    #[serde(borrow)]
    t: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    r: Vec<(u32, u32, u32)>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    w: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    g: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    x: Vec<ExtraRun>,
}

impl Serialize for LineRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        LineRepr {
            t: Cow::Borrowed(self.text()),
            // Empty (no allocation) for the common unstyled line.
            r: self
                .runs()
                .map(|r| (r.chars, r.style.fg, r.style.bg))
                .collect(),
            w: self.wrapped(),
            g: self.wrap_gap(),
            x: self.extras(),
        }
        .serialize(serializer)
    }
}

impl Serialize for Line {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.view().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Line, D::Error> {
        LineRepr::deserialize(deserializer).map(|repr| repr.to_line())
    }
}

impl LineRepr<'_> {
    fn to_line(&self) -> Line {
        let mut scratch = LineScratch::default();
        let flags = scratch.fill_from_repr(self);
        scratch.to_line(flags)
    }
}

/// Text longer than u32 cannot come from a row (cols are u16), but
/// `inject_history` and snapshots carry arbitrary strings: cut, at a
/// character boundary, rather than wrap the length around.
fn cut_text(text: &str) -> &str {
    let mut end = text.len().min(u32::MAX as usize / 2);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Encodes a line (see the module doc) at the end of `buf`: `runs` already
/// encoded, `extras` the JSON of its extras or empty. `text` must be UTF-8
/// no longer than `cut_text` allows.
pub(super) fn encode(buf: &mut Vec<u8>, flags: u8, text: &[u8], runs: &[u8], extras: &[u8]) {
    buf.reserve(encoded_len(text, runs, extras));
    let flags = if extras.is_empty() {
        flags
    } else {
        flags | FLAG_EXTRAS
    };
    buf.push(flags);
    buf.extend_from_slice(&(text.len() as u32).to_le_bytes());
    buf.extend_from_slice(text);
    buf.extend_from_slice(runs);
    if !extras.is_empty() {
        buf.extend_from_slice(extras);
        buf.extend_from_slice(&(extras.len() as u32).to_le_bytes());
    }
}

pub(super) fn encoded_len(text: &[u8], runs: &[u8], extras: &[u8]) -> usize {
    let extras = if extras.is_empty() {
        0
    } else {
        extras.len() + 4
    };
    HEADER + text.len() + runs.len() + extras
}

/// The JSON of a line's extras, empty if it has none.
fn extras_json(extras: &[ExtraRun]) -> Vec<u8> {
    if extras.is_empty() {
        return Vec::new();
    }
    serde_json::to_vec(extras).unwrap_or_default()
}

impl Line {
    #[cfg(test)]
    pub fn new(text: &str, runs: &[Run], wrapped: bool) -> Line {
        LineRepr {
            t: Cow::Borrowed(text),
            r: runs
                .iter()
                .map(|r| (r.chars, r.style.fg, r.style.bg))
                .collect(),
            w: wrapped,
            g: false,
            x: Vec::new(),
        }
        .to_line()
    }

    /// Converts a screen row, dropping trailing default blanks.
    #[cfg(test)]
    pub fn from_row(row: &Row) -> Line {
        Line::from_row_with(row, &mut LineScratch::default())
    }

    /// `from_row` with caller-provided scratch buffers (reused across rows).
    pub fn from_row_with(row: &Row, scratch: &mut LineScratch) -> Line {
        let flags = scratch.fill(row);
        scratch.to_line(flags)
    }

    pub fn view(&self) -> LineRef<'_> {
        LineRef(&self.0)
    }

    /// An unstyled line of `text`.
    pub(super) fn plain(text: &str) -> Line {
        LineRepr {
            t: Cow::Borrowed(text),
            r: Vec::new(),
            w: false,
            g: false,
            x: Vec::new(),
        }
        .to_line()
    }

    /// A line from its packed bytes as `LineRef::stored` gave them (the
    /// history log keeps lines so: a copy, no encoding), checked so that
    /// no accessor can index out of bounds or find text that is not UTF-8;
    /// `None` for bytes no line packs to (a damaged file).
    pub fn from_stored(bytes: &[u8]) -> Option<Line> {
        let (&flags, rest) = bytes.split_first()?;
        if flags & !(FLAG_WRAPPED | FLAG_EXTRAS | FLAG_GAP) != 0 || rest.len() < HEADER - 1 {
            return None;
        }
        let text_len = u32::from_le_bytes(rest[..4].try_into().ok()?) as usize;
        let after_text = HEADER.checked_add(text_len)?;
        std::str::from_utf8(bytes.get(HEADER..after_text)?).ok()?;
        let extras = if flags & FLAG_EXTRAS != 0 {
            let tail = bytes.len().checked_sub(4)?;
            let json = u32::from_le_bytes(bytes[tail..].try_into().ok()?) as usize;
            let start = tail.checked_sub(json).filter(|&s| s >= after_text)?;
            serde_json::from_slice::<Vec<ExtraRun>>(&bytes[start..tail]).ok()?;
            json + 4
        } else {
            0
        };
        let runs = bytes.len().checked_sub(after_text + extras)?;
        (runs % RUN_BYTES == 0).then(|| Line(bytes.into()))
    }
}

/// A row taken apart into a line's sections, reused from row to row so
/// converting one allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct LineScratch {
    text: Vec<u8>,
    runs: Vec<u8>,
    extras: Vec<u8>,
}

impl LineScratch {
    /// The encoded size of the row last `fill`ed.
    pub(super) fn encoded_len(&self) -> usize {
        encoded_len(&self.text, &self.runs, &self.extras)
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>, flags: u8) {
        encode(buf, flags, &self.text, &self.runs, &self.extras);
    }

    fn to_line(&self, flags: u8) -> Line {
        let mut buf = Vec::with_capacity(self.encoded_len());
        self.encode(&mut buf, flags);
        Line(buf.into_boxed_slice())
    }

    /// Takes a decoded line apart. Returns its flags.
    pub(super) fn fill_from_repr(&mut self, repr: &LineRepr) -> u8 {
        self.text.clear();
        self.text.extend_from_slice(cut_text(&repr.t).as_bytes());
        self.runs.clear();
        for &(chars, fg, bg) in &repr.r {
            let style = Style { fg, bg };
            push_run(&mut self.runs, Run { chars, style });
        }
        self.extras = extras_json(&repr.x);
        line_flags(repr.w, repr.g)
    }

    /// Takes `row` apart (trailing default blanks dropped): one pass over
    /// the cells. Returns the line's flags.
    pub(super) fn fill(&mut self, row: &Row) -> u8 {
        let LineScratch { text, runs, extras } = self;
        let cells = &row.cells[..row.content_end()];
        text.clear();
        runs.clear();
        extras.clear();
        let flags = row_flags(row);
        // Fast path, the common case: ASCII without wide characters, marks
        // or extras. A line all in the default style gets no runs.
        if row.marks.is_empty() && row.extras.is_none() {
            // Plain text first: the check stops at the first styled cell.
            if cells
                .iter()
                .all(|c| c.style == Style::DEFAULT && c.ch.is_ascii())
            {
                text.extend(cells.iter().map(|c| c.ch as u8));
                return flags;
            }
            // One pass over a styled line writes the text and the style
            // runs and notes any cell that rules this path out: a non-ASCII
            // character shows in the OR of all of them, a wide one in the
            // style, which is the same for every cell of a run.
            text.resize(cells.len(), 0);
            // At most one run per cell: no growth checks fail in the loop.
            runs.reserve(cells.len() * RUN_BYTES);
            let mut cur = cells.first().map_or(Style::DEFAULT, |c| c.style);
            let mut start = 0;
            let mut chars = 0;
            let mut styles = cur.bg;
            for (i, (t, c)) in text.iter_mut().zip(cells).enumerate() {
                chars |= c.ch as u32;
                *t = c.ch as u8;
                if c.style != cur {
                    push_run(
                        runs,
                        Run {
                            chars: (i - start) as u32,
                            style: cur,
                        },
                    );
                    cur = c.style;
                    styles |= cur.bg;
                    start = i;
                }
            }
            if chars < 0x80 && styles & (WIDE | SPACER) == 0 {
                if !runs.is_empty() || cur != Style::DEFAULT {
                    let chars = (cells.len() - start) as u32;
                    push_run(runs, Run { chars, style: cur });
                }
                return flags;
            }
            text.clear();
            runs.clear();
        }
        let mut extra_runs: Vec<ExtraRun> = Vec::new();
        let mut at_char = 0u32;
        let mut styled = false;
        let mut run = Run {
            chars: 0,
            style: Style::DEFAULT,
        };
        for (i, cell) in cells.iter().enumerate() {
            if cell.is_spacer() {
                continue;
            }
            let style = cell.style.pen_part();
            let c = cell.ch;
            if c.is_ascii() {
                text.push(c as u8);
            } else {
                let mut b = [0u8; 4];
                text.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
            let mut n = 1;
            if !row.marks.is_empty() {
                if let Some(m) = row.marks_at(i) {
                    text.extend_from_slice(m.as_bytes());
                    n += m.chars().count() as u32;
                }
            }
            if style != run.style && run.chars > 0 {
                push_run(runs, run);
                run.chars = 0;
            }
            styled |= style != Style::DEFAULT;
            run.style = style;
            run.chars += n;
            if let Some(x) = row.extra_at(i) {
                match extra_runs.last_mut() {
                    Some((start, chars, e)) if *start + *chars == at_char && e == x => *chars += n,
                    _ => extra_runs.push((at_char, n, x.clone())),
                }
            }
            at_char += n;
        }
        if run.chars > 0 {
            push_run(runs, run);
        }
        if !styled {
            runs.clear();
        }
        *extras = extras_json(&extra_runs);
        flags
    }
}

impl<'a> LineRef<'a> {
    /// A line's packed bytes as a line made them (`stored`), or checked by
    /// `Line::from_stored`: the accessors index by them.
    pub(super) fn new(bytes: &'a [u8]) -> LineRef<'a> {
        LineRef(bytes)
    }

    /// Length of the extras section with its length word (0 if none).
    fn extras_len(&self) -> usize {
        if self.0[0] & FLAG_EXTRAS == 0 {
            return 0;
        }
        let n = self.0.len();
        let Some(tail) = self.0.get(n.saturating_sub(4)..) else {
            return 0;
        };
        let json = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
        (json + 4).min(n - HEADER - self.text_len())
    }

    /// Underline colours and hyperlinks of this line, by character range.
    pub fn extras(&self) -> Vec<ExtraRun> {
        let len = self.extras_len();
        if len == 0 {
            return Vec::new();
        }
        let end = self.0.len() - 4;
        serde_json::from_slice(&self.0[end + 4 - len..end]).unwrap_or_default()
    }

    fn text_len(&self) -> usize {
        let mut n = [0u8; 4];
        n.copy_from_slice(&self.0[1..HEADER]);
        u32::from_le_bytes(n) as usize
    }

    pub fn text(&self) -> &'a str {
        let bytes = &self.0[HEADER..HEADER + self.text_len()];
        // Encoded from a &str, and never mutated.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    pub fn wrapped(&self) -> bool {
        self.0[0] & FLAG_WRAPPED != 0
    }

    /// See `Row::wrap_gap`.
    pub fn wrap_gap(&self) -> bool {
        self.0[0] & FLAG_GAP != 0
    }

    pub fn runs(&self) -> impl Iterator<Item = Run> + 'a {
        self.0[HEADER + self.text_len()..self.0.len() - self.extras_len()]
            .chunks_exact(RUN_BYTES)
            .map(|c| {
                let w = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
                Run {
                    chars: w(0),
                    style: Style { fg: w(4), bg: w(8) },
                }
            })
    }

    pub fn to_line(self) -> Line {
        Line(self.0.into())
    }

    /// The packed bytes (see the module doc), for `Line::from_stored`.
    pub fn stored(&self) -> &'a [u8] {
        self.0
    }
    /// The line with SGR sequences: each run starts with its full style, and
    /// the line ends with a reset if any style was set.
    pub fn write_sgr(&self, out: &mut Vec<u8>) {
        let text = self.text();
        let extras = self.extras();
        if extras.is_empty() {
            // Each run starts with its full style: the common, cheap case.
            let mut chars = text.chars();
            let mut any = false;
            for run in self.runs() {
                run.style.write_sgr(out);
                any = true;
                for _ in 0..run.chars {
                    match chars.next() {
                        Some(c) => {
                            let mut b = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                        }
                        None => break,
                    }
                }
            }
            out.extend_from_slice(chars.as_str().as_bytes());
            if any {
                out.extend_from_slice(b"\x1b[0m");
            }
            return;
        }
        let mut pen = PenWriter::new();
        let mut runs = self.runs();
        let mut run = runs.next();
        let mut left = run.map_or(u32::MAX, |r| r.chars);
        for (i, c) in text.chars().enumerate() {
            let i = i as u32;
            let extra = extras
                .iter()
                .find(|(start, n, _)| i >= *start && i - *start < *n)
                .map(|(_, _, e)| e);
            pen.pen(out, run.map_or(Style::DEFAULT, |r| r.style), extra);
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            left = left.saturating_sub(1);
            if left == 0 {
                run = runs.next();
                left = run.map_or(u32::MAX, |r| r.chars);
            }
        }
        pen.finish(out);
    }
}

/// A line's flags byte.
fn line_flags(wrapped: bool, gap: bool) -> u8 {
    match (wrapped, gap) {
        (false, _) => 0,
        (true, false) => FLAG_WRAPPED,
        (true, true) => FLAG_WRAPPED | FLAG_GAP,
    }
}

/// The flags byte of a line made from `row`.
fn row_flags(row: &Row) -> u8 {
    line_flags(row.wrapped, row.has_gap())
}

#[inline]
fn push_run(out: &mut Vec<u8>, r: Run) {
    let mut b = [0u8; RUN_BYTES];
    b[0..4].copy_from_slice(&r.chars.to_le_bytes());
    b[4..8].copy_from_slice(&r.style.fg.to_le_bytes());
    b[8..12].copy_from_slice(&r.style.bg.to_le_bytes());
    out.extend_from_slice(&b);
}
