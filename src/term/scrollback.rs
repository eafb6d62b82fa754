//! History: rows that scrolled off the top of the main screen, stored as
//! compact lines rather than cell grids.
//!
//! A line is one boxed byte slice: a flags byte, the text length, the UTF-8
//! text (trailing blanks trimmed, spacers dropped, combining marks inline),
//! then style runs only if some cell was not default-styled, then, only for
//! the rare line with underline colours or hyperlinks (flag `FLAG_EXTRAS`),
//! their runs as JSON and that JSON's length in the last four bytes. An 80-column
//! plain line costs its text plus a 16-byte slot, against 960 bytes as cells.
//! Lines are immutable once pushed: scrollback is read (capture) and trimmed,
//! never edited, so a lossy-but-stable conversion from cells is fine.
//!
//! Invariants: `bytes` equals the sum of `Line::heap_bytes` over `lines`;
//! after every `push`, `lines.len() <= max_lines` and `bytes <= max_bytes`
//! (whichever bound is hit first evicts the oldest lines).

use std::collections::VecDeque;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;

use super::cell::{Cell, Extra, PenWriter, SPACER, Style, WIDE};
use super::grid::Row;

const FLAG_WRAPPED: u8 = 1;
const FLAG_EXTRAS: u8 = 2;
/// `Row::wrap_gap`.
const FLAG_GAP: u8 = 4;
const HEADER: usize = 5;
const RUN_BYTES: usize = 12;

/// `chars` characters from character `start` of a line's text carry `extra`.
pub type ExtraRun = (u32, u32, Extra);

/// A run of `chars` characters drawn with `style`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub chars: u32,
    pub style: Style,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line(Box<[u8]>);

/// Serialized form: readable in JSON and independent of the packing.
/// Borrowed both ways: a live upgrade encodes and decodes every scrollback
/// line inside its blackout, so neither side copies a line's text into a
/// `String` of its own (the text is borrowed from the input unless it has
/// escapes).
#[derive(Serialize, Deserialize)]
struct LineRepr<'a> {
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

impl Serialize for Line {
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

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Line, D::Error> {
        let r = LineRepr::deserialize(deserializer)?;
        let runs: Vec<Run> =
            r.r.into_iter()
                .map(|(chars, fg, bg)| Run {
                    chars,
                    style: Style { fg, bg },
                })
                .collect();
        let mut line = Line::with_extras(&r.t, &runs, r.w, &r.x);
        if r.w && r.g {
            line.0[0] |= FLAG_GAP;
        }
        Ok(line)
    }
}

impl Line {
    #[cfg(test)]
    pub fn new(text: &str, runs: &[Run], wrapped: bool) -> Line {
        Line::with_extras(text, runs, wrapped, &[])
    }

    pub fn with_extras(text: &str, runs: &[Run], wrapped: bool, extras: &[ExtraRun]) -> Line {
        // Text longer than u32 cannot come from a row (cols are u16), but
        // inject_history takes arbitrary strings: cut rather than wrap around.
        let mut end = text.len().min(u32::MAX as usize / 2);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let text = &text[..end];
        let mut buf = Vec::with_capacity(HEADER + text.len() + runs.len() * RUN_BYTES);
        buf.push(if wrapped { FLAG_WRAPPED } else { 0 });
        buf.extend_from_slice(&(text.len() as u32).to_le_bytes());
        buf.extend_from_slice(text.as_bytes());
        for r in runs {
            buf.extend_from_slice(&r.chars.to_le_bytes());
            buf.extend_from_slice(&r.style.fg.to_le_bytes());
            buf.extend_from_slice(&r.style.bg.to_le_bytes());
        }
        append_extras(&mut buf, extras);
        Line(buf.into_boxed_slice())
    }

    /// Converts a screen row, dropping trailing default blanks.
    #[cfg(test)]
    pub fn from_row(row: &Row) -> Line {
        Line::from_row_with(row, &mut Vec::new(), &mut Vec::new())
    }

    /// `from_row` with caller-provided scratch buffers (reused across rows
    /// by `Scrollback::push_row`): one pass over the cells, then one exactly
    /// sized allocation.
    pub fn from_row_with(row: &Row, text: &mut Vec<u8>, runs: &mut Vec<u8>) -> Line {
        let cells = &row.cells[..row.content_end()];
        text.clear();
        runs.clear();
        // Fast path, the common case: ASCII without wide characters, marks
        // or extras. A line all in the default style gets no runs.
        if row.marks.is_empty() && row.extras.is_none() {
            // Plain text first: the check stops at the first styled cell.
            if cells
                .iter()
                .all(|c| c.style == Style::DEFAULT && c.ch.is_ascii())
            {
                text.extend(cells.iter().map(|c| c.ch as u8));
                return Line::assemble(row_flags(row), text, runs, &[]);
            }
            // One pass over a styled line writes the text and the style
            // runs (both style words compared as one) and notes any cell
            // that rules this path out.
            text.resize(cells.len(), 0);
            // At most one run per cell: no growth checks fail in the loop.
            runs.reserve(cells.len() * RUN_BYTES);
            let key = |c: &Cell| u64::from(c.style.fg) << 32 | u64::from(c.style.bg);
            let mut cur = cells.first().map_or(0, key);
            let mut start = 0;
            let mut odd = 0;
            for (i, (t, c)) in text.iter_mut().zip(cells).enumerate() {
                odd |= (c.ch as u32 >> 7) | (c.style.bg & (WIDE | SPACER));
                *t = c.ch as u8;
                let k = key(c);
                if k != cur {
                    push_run_key(runs, (i - start) as u32, cur);
                    cur = k;
                    start = i;
                }
            }
            if odd == 0 {
                if !runs.is_empty() || cur != 0 {
                    push_run_key(runs, (cells.len() - start) as u32, cur);
                }
                return Line::assemble(row_flags(row), text, runs, &[]);
            }
            text.clear();
            runs.clear();
        }
        let mut extras: Vec<ExtraRun> = Vec::new();
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
                match extras.last_mut() {
                    Some((start, chars, e)) if *start + *chars == at_char && e == x => *chars += n,
                    _ => extras.push((at_char, n, x.clone())),
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
        Line::assemble(row_flags(row), text, runs, &extras)
    }

    /// One exactly sized allocation from the text and encoded runs.
    fn assemble(flags: u8, text: &[u8], runs: &[u8], extras: &[ExtraRun]) -> Line {
        let text_len = text.len().min(u32::MAX as usize / 2);
        let mut buf = Vec::with_capacity(HEADER + text_len + runs.len());
        buf.push(flags);
        buf.extend_from_slice(&(text_len as u32).to_le_bytes());
        buf.extend_from_slice(&text[..text_len]);
        buf.extend_from_slice(runs);
        append_extras(&mut buf, extras);
        Line(buf.into_boxed_slice())
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

    pub fn text(&self) -> &str {
        let bytes = &self.0[HEADER..HEADER + self.text_len()];
        // Built from a &str in `new`, and never mutated.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    pub fn wrapped(&self) -> bool {
        self.0[0] & FLAG_WRAPPED != 0
    }

    /// See `Row::wrap_gap`.
    pub fn wrap_gap(&self) -> bool {
        self.0[0] & FLAG_GAP != 0
    }

    pub fn runs(&self) -> impl Iterator<Item = Run> + '_ {
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

    /// Heap plus slot cost of this line.
    pub fn heap_bytes(&self) -> usize {
        self.0.len() + std::mem::size_of::<Line>()
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

/// The flags byte of a line made from `row`.
fn row_flags(row: &Row) -> u8 {
    match (row.wrapped, row.wrap_gap) {
        (false, _) => 0,
        (true, false) => FLAG_WRAPPED,
        (true, true) => FLAG_WRAPPED | FLAG_GAP,
    }
}

/// Appends the extras section (and sets its flag) unless `extras` is empty.
fn append_extras(buf: &mut Vec<u8>, extras: &[ExtraRun]) {
    if extras.is_empty() {
        return;
    }
    let Ok(json) = serde_json::to_vec(extras) else {
        return;
    };
    buf[0] |= FLAG_EXTRAS;
    buf.extend_from_slice(&json);
    buf.extend_from_slice(&(json.len() as u32).to_le_bytes());
}

/// `push_run` for a style given as `fg << 32 | bg`.
#[inline]
fn push_run_key(out: &mut Vec<u8>, chars: u32, key: u64) {
    let mut b = [0u8; RUN_BYTES];
    b[0..4].copy_from_slice(&chars.to_le_bytes());
    b[4..8].copy_from_slice(&((key >> 32) as u32).to_le_bytes());
    b[8..12].copy_from_slice(&(key as u32).to_le_bytes());
    out.extend_from_slice(&b);
}

fn push_run(out: &mut Vec<u8>, r: Run) {
    let mut b = [0u8; RUN_BYTES];
    b[0..4].copy_from_slice(&r.chars.to_le_bytes());
    b[4..8].copy_from_slice(&r.style.fg.to_le_bytes());
    b[8..12].copy_from_slice(&r.style.bg.to_le_bytes());
    out.extend_from_slice(&b);
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Scrollback {
    lines: VecDeque<Line>,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
    /// Scratch buffers for `push_row`, kept to avoid two allocations per
    /// scrolled line.
    #[serde(skip)]
    scratch: (Vec<u8>, Vec<u8>),
    /// Lines ever pushed: lets a reader ask "what scrolled off since I
    /// last looked", which `len` cannot say once the oldest are trimmed.
    #[serde(default)]
    pushed: u64,
}

impl PartialEq for Scrollback {
    fn eq(&self, other: &Scrollback) -> bool {
        self.lines == other.lines
            && self.bytes == other.bytes
            && self.max_lines == other.max_lines
            && self.max_bytes == other.max_bytes
    }
}

impl Eq for Scrollback {}

impl Scrollback {
    pub fn new(max_lines: usize, max_bytes: usize) -> Scrollback {
        Scrollback {
            lines: VecDeque::new(),
            bytes: 0,
            max_lines,
            max_bytes,
            scratch: Default::default(),
            pushed: 0,
        }
    }

    /// Converts and pushes a screen row that scrolled off.
    pub fn push_row(&mut self, row: &Row) {
        if self.max_lines == 0 {
            return;
        }
        let (text, runs) = &mut self.scratch;
        let line = Line::from_row_with(row, text, runs);
        self.push(line);
    }

    pub fn push(&mut self, line: Line) {
        if self.max_lines == 0 {
            return;
        }
        self.bytes += line.heap_bytes();
        self.lines.push_back(line);
        self.pushed += 1;
        while self.lines.len() > self.max_lines
            || (self.bytes > self.max_bytes && !self.lines.is_empty())
        {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.heap_bytes();
            }
        }
    }

    /// All lines, oldest first, leaving the history empty; `pushed` is
    /// kept, so lines put back by `restore_lines` do not count as new.
    pub fn take_lines(&mut self) -> Vec<Line> {
        self.bytes = 0;
        std::mem::take(&mut self.lines).into()
    }

    /// Puts lines back after `take_lines` (bounds applied, oldest evicted).
    pub fn restore_lines(&mut self, lines: Vec<Line>) {
        let pushed = self.pushed;
        for line in lines {
            self.push(line);
        }
        self.pushed = pushed;
    }

    /// Takes back the newest line (used when the screen grows taller).
    pub fn pop_newest(&mut self) -> Option<Line> {
        let line = self.lines.pop_back()?;
        self.bytes -= line.heap_bytes();
        Some(line)
    }

    pub fn clear(&mut self) {
        self.lines.clear();
        self.lines.shrink_to_fit();
        self.bytes = 0;
    }

    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Line `i`, 0 = oldest.
    pub fn get(&self, i: usize) -> Option<&Line> {
        self.lines.get(i)
    }

    /// Estimated heap use: line payloads plus the ring's slots.
    pub fn memory_bytes(&self) -> usize {
        self.bytes - self.lines.len() * std::mem::size_of::<Line>()
            + self.lines.capacity() * std::mem::size_of::<Line>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::cell::{BOLD, Cell, Color};

    #[test]
    fn line_is_a_thin_slot() {
        assert_eq!(std::mem::size_of::<Line>(), 16);
    }

    #[test]
    fn from_row_keeps_text_and_runs() {
        let mut row = Row::new(10, Style::DEFAULT);
        let mut bold = Style::DEFAULT;
        bold.fg |= BOLD;
        bold.set_fg(Color::Indexed(1));
        for (i, ch) in "ab".chars().enumerate() {
            row.cells[i] = Cell { ch, style: bold };
        }
        row.cells[2].ch = 'c';
        row.wrapped = true;
        let line = Line::from_row(&row);
        assert_eq!(line.text(), "abc");
        assert!(line.wrapped());
        let runs: Vec<Run> = line.runs().collect();
        assert_eq!(
            runs,
            vec![
                Run {
                    chars: 2,
                    style: bold
                },
                Run {
                    chars: 1,
                    style: Style::DEFAULT
                }
            ]
        );
        let json = serde_json::to_string(&line).unwrap();
        let back: Line = serde_json::from_str(&json).unwrap();
        assert_eq!(back, line);
    }

    /// The wire form is part of the handoff manifest (HANDOFF_VERSION): it
    /// must not change, and text with escapes (not borrowable) and input
    /// from a reader (never borrowable) decode too.
    #[test]
    fn serialized_form_is_stable() {
        let style = Style { fg: 7, bg: 9 };
        let runs = [Run { chars: 3, style }];
        let cases = [
            (Line::new("plain", &[], false), r#"{"t":"plain"}"#),
            (
                Line::new("a\"b\\é", &runs, true),
                r#"{"t":"a\"b\\é","r":[[3,7,9]],"w":true}"#,
            ),
        ];
        for (line, want) in cases {
            assert_eq!(serde_json::to_string(&line).unwrap(), want);
            let back: Line = serde_json::from_str(want).unwrap();
            assert_eq!(back, line);
            let back: Line = serde_json::from_reader(want.as_bytes()).unwrap();
            assert_eq!(back, line);
        }
    }

    #[test]
    fn bounded_by_lines_and_bytes() {
        let mut sb = Scrollback::new(3, usize::MAX);
        for i in 0..10 {
            sb.push(Line::new(&i.to_string(), &[], false));
        }
        assert_eq!(sb.len(), 3);
        assert_eq!(sb.get(0).map(Line::text), Some("7"));
        let mut sb = Scrollback::new(1000, 200);
        for _ in 0..100 {
            sb.push(Line::new(&"x".repeat(50), &[], false));
        }
        assert!(sb.memory_bytes() <= 200 + sb.len() * 16 + 16 * 8);
        assert!(sb.len() <= 3);
    }
}
