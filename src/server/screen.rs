//! The seam between the loop and the terminal model.
//!
//! Until the full model in `term/` lands this is a small line model: enough
//! for `capture`, `wait --text` and an attach redraw of recent text. It has
//! the same method names as the model so the swap touches only this file.

use std::collections::VecDeque;

/// Lines kept in the interim model; older ones are dropped.
const MAX_LINES: usize = 2_000;

pub struct Screen {
    cols: u16,
    rows: u16,
    lines: VecDeque<Vec<char>>,
    cursor_col: usize,
    parser: vte::Parser,
}

struct Sink<'a> {
    lines: &'a mut VecDeque<Vec<char>>,
    col: &'a mut usize,
    cols: usize,
}

impl Screen {
    pub fn new(cols: u16, rows: u16) -> Screen {
        let mut lines = VecDeque::new();
        lines.push_back(Vec::new());
        Screen {
            cols,
            rows,
            lines,
            cursor_col: 0,
            parser: vte::Parser::new(),
        }
    }

    /// Takes output bytes; appends to `forward` what attached clients get.
    pub fn feed(&mut self, bytes: &[u8], forward: &mut Vec<u8>) {
        forward.extend_from_slice(bytes);
        let mut sink = Sink {
            lines: &mut self.lines,
            col: &mut self.cursor_col,
            cols: self.cols as usize,
        };
        self.parser.advance(&mut sink, bytes);
    }

    /// Query answers to write back to the PTY (the interim model answers none).
    pub fn take_replies(&mut self) -> Vec<u8> {
        Vec::new()
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.cols = cols;
        self.rows = rows;
    }

    /// The last `rows` lines, trailing blanks trimmed.
    pub fn visible_text(&self) -> Vec<String> {
        let skip = self.lines.len().saturating_sub(self.rows as usize);
        let mut out: Vec<String> = self
            .lines
            .iter()
            .skip(skip)
            .map(|l| l.iter().collect::<String>().trim_end().to_string())
            .collect();
        out.resize(self.rows as usize, String::new());
        out
    }

    /// All retained text, one line per line, for the history file.
    pub fn history_text(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.extend(line.iter());
            let trimmed = out.trim_end_matches(' ').len();
            out.truncate(trimmed);
            out.push('\n');
        }
        out
    }

    /// Puts restored text above what the new process will print.
    pub fn inject_history(&mut self, text: &str) {
        let mut forward = Vec::new();
        let normalized = text.replace("\r\n", "\n").replace('\n', "\r\n");
        self.feed(normalized.as_bytes(), &mut forward);
        if !normalized.ends_with('\n') {
            self.feed(b"\r\n", &mut forward);
        }
    }

    /// Bytes that show the current text on a fresh terminal.
    pub fn redraw(&self, _cols: u16, _rows: u16) -> Vec<u8> {
        let mut out = b"\x1b[H\x1b[2J".to_vec();
        let text = self.visible_text();
        let last = text.iter().rposition(|l| !l.is_empty()).unwrap_or(0);
        for (i, line) in text.iter().take(last + 1).enumerate() {
            if i > 0 {
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(line.as_bytes());
        }
        out
    }
}

impl Sink<'_> {
    fn newline(&mut self) {
        self.lines.push_back(Vec::new());
        if self.lines.len() > MAX_LINES {
            self.lines.pop_front();
        }
    }
}

impl vte::Perform for Sink<'_> {
    fn print(&mut self, c: char) {
        let s = self;
        if *s.col >= s.cols {
            s.newline();
            *s.col = 0;
        }
        let col = *s.col;
        if let Some(line) = s.lines.back_mut() {
            if line.len() <= col {
                line.resize(col, ' ');
                line.push(c);
            } else {
                line[col] = c;
            }
        }
        *s.col += 1;
    }

    fn execute(&mut self, byte: u8) {
        let s = self;
        match byte {
            b'\n' => s.newline(),
            b'\r' => *s.col = 0,
            0x08 => *s.col = s.col.saturating_sub(1),
            _ => {}
        }
    }
}
