//! The attach client's scroll mode (prefix `[` or prefix PageUp): the
//! pane's history and the screen as it was when the mode opened, paged
//! through on the user's terminal, with search and a line-wise copy to the
//! terminal's clipboard (OSC 52).
//!
//! Lines come from the server a block at a time (`pane.history`, on a
//! connection of its own), numbered from the first line the pane pushed
//! into history, so output arriving meanwhile does not move what is shown;
//! the mode never asks for the whole history at once. The attach
//! connection is read all along and its output dropped (the server's
//! queue must not fill); leaving asks for a redraw.

use super::attach::tty::{SignalPipe, poll_readable, write_stdout};
use super::{Client, ClientError, ErrorKind, FrameReader, ServerFrame};
use crate::paths::NamespacePaths;
use crate::protocol::methods::{self, Request};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Lines fetched per request.
const BLOCK: u64 = 200;
/// Most text one copy puts on the clipboard (terminals cap OSC 52 too).
const MAX_COPY: usize = 256 << 10;
/// Lines a search looks at before it gives up (`n` goes on from there).
const MAX_SEARCH: u64 = 200_000;

/// How the scroll mode ended.
pub enum Outcome {
    /// The user left it: the caller asks for a redraw.
    Done,
    /// The attachment ended meanwhile (the EXIT frame's payload).
    Exit(Value),
    /// A terminating signal.
    Signal,
    /// The attach connection dropped.
    Lost,
}

#[derive(Deserialize)]
struct HistoryReply {
    first: u64,
    lines: Vec<String>,
    wrapped: Vec<bool>,
    history_start: u64,
    end: u64,
}

/// A line as fetched: with its SGR, and plain for search and copy.
struct Line {
    styled: String,
    plain: String,
    wrapped: bool,
}

struct Scroll {
    client: Client,
    target: String,
    lines: HashMap<u64, Line>,
    /// The frozen range: `start..end`.
    start: u64,
    end: u64,
    /// The line shown on the top row, and the cursor's line.
    top: u64,
    cursor: u64,
    /// Start of a selection (`v`), to the cursor.
    mark: Option<u64>,
    cols: usize,
    rows: usize,
    /// The last search: text and direction (towards older lines).
    search: Option<(String, bool)>,
    status: String,
}

impl Scroll {
    fn fetch(&mut self, from: u64) -> Result<HistoryReply, ClientError> {
        self.client
            .request_as(&Request::PaneHistory(methods::PaneHistory {
                target: self.target.clone(),
                start: Some(from),
                count: BLOCK as u32,
                ansi: true,
            }))
    }

    fn store(&mut self, reply: HistoryReply) {
        for (i, (styled, wrapped)) in reply.lines.into_iter().zip(reply.wrapped).enumerate() {
            let plain = strip_escapes(&styled);
            self.lines.insert(
                reply.first + i as u64,
                Line {
                    styled,
                    plain,
                    wrapped,
                },
            );
        }
    }

    /// Line `n`, fetched with its block when missing. Lines that left the
    /// history since (or never were) read as blank.
    fn line(&mut self, n: u64) -> Result<Option<&Line>, ClientError> {
        if !self.lines.contains_key(&n) && n >= self.start && n < self.end {
            let from = (n - n % BLOCK).max(self.start);
            let reply = self.fetch(from)?;
            self.store(reply);
        }
        Ok(self.lines.get(&n))
    }

    fn view_rows(&self) -> usize {
        self.rows.saturating_sub(1).max(1)
    }

    fn last_top(&self) -> u64 {
        self.end
            .saturating_sub(self.view_rows() as u64)
            .max(self.start)
    }

    /// Moves the cursor to `n` (clamped) and the view so it shows it.
    fn go(&mut self, n: i64) {
        let n = n.clamp(self.start as i64, self.end.saturating_sub(1) as i64) as u64;
        self.cursor = n;
        let rows = self.view_rows() as u64;
        if n < self.top {
            self.top = n;
        } else if n >= self.top + rows {
            self.top = n + 1 - rows;
        }
        self.top = self.top.min(self.last_top()).max(self.start);
    }

    /// Moves the view by `delta` lines, the cursor with it.
    fn scroll_by(&mut self, delta: i64) {
        let top = (self.top as i64 + delta).clamp(self.start as i64, self.last_top() as i64) as u64;
        let moved = top as i64 - self.top as i64;
        self.top = top;
        self.go(self.cursor as i64 + if moved == 0 { delta } else { moved });
    }

    fn draw(&mut self) -> Result<(), ClientError> {
        let mut out = b"\x1b[?25l\x1b[?7l\x1b[0m".to_vec();
        let (lo, hi) = match self.mark {
            Some(m) => (m.min(self.cursor), m.max(self.cursor)),
            None => (self.cursor, self.cursor),
        };
        let cols = self.cols;
        for r in 0..self.view_rows() {
            let n = self.top + r as u64;
            out.extend_from_slice(format!("\x1b[{};1H\x1b[0m\x1b[2K", r + 1).as_bytes());
            let Some(line) = self.line(n)? else {
                continue;
            };
            if (lo..=hi).contains(&n) {
                out.extend_from_slice(b"\x1b[7m");
                out.extend_from_slice(clip(&line.plain, cols).as_bytes());
                out.extend_from_slice(b"\x1b[0m");
            } else {
                out.extend_from_slice(line.styled.as_bytes());
                out.extend_from_slice(b"\x1b[0m");
            }
        }
        let position = format!(
            "[scroll {}/{}] ",
            self.cursor + 1 - self.start,
            self.end - self.start
        );
        let help = if self.status.is_empty() {
            "q quit  ? / search  n N next  v select  y copy"
        } else {
            self.status.as_str()
        };
        out.extend_from_slice(
            format!(
                "\x1b[{};1H\x1b[0m\x1b[2K\x1b[7m{}\x1b[0m",
                self.rows,
                clip(&format!("{position}{help}"), cols)
            )
            .as_bytes(),
        );
        write_stdout(&out);
        Ok(())
    }

    /// Searches from the cursor (exclusive) towards older lines (`back`)
    /// or newer ones; moves there if found.
    fn find(&mut self, text: &str, back: bool) -> Result<bool, ClientError> {
        let fold = !text.chars().any(char::is_uppercase);
        let needle = if fold {
            text.to_lowercase()
        } else {
            text.to_string()
        };
        let mut n = self.cursor;
        for _ in 0..MAX_SEARCH {
            n = match back {
                true if n > self.start => n - 1,
                false if n + 1 < self.end => n + 1,
                _ => return Ok(false),
            };
            let Some(line) = self.line(n)? else {
                continue;
            };
            let hit = if fold {
                line.plain.to_lowercase().contains(&needle)
            } else {
                line.plain.contains(&needle)
            };
            if hit {
                self.go(n as i64);
                // The hit in the middle of the view when it can be.
                let half = (self.view_rows() / 2) as u64;
                self.top = n.saturating_sub(half).clamp(self.start, self.last_top());
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The selected lines (or the cursor's) as text, lines continued by
    /// autowrap joined.
    fn selection_text(&mut self) -> Result<String, ClientError> {
        let (lo, hi) = match self.mark {
            Some(m) => (m.min(self.cursor), m.max(self.cursor)),
            None => (self.cursor, self.cursor),
        };
        let mut text = String::new();
        for n in lo..=hi {
            if let Some(line) = self.line(n)? {
                text.push_str(&line.plain);
                if !line.wrapped && n != hi {
                    text.push('\n');
                }
            }
            if text.len() > MAX_COPY {
                let mut cut = MAX_COPY;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                break;
            }
        }
        Ok(text)
    }
}

/// A key in scroll mode.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Char(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Escape,
    Backspace,
    Ctrl(u8),
}

/// Splits a read from the terminal into keys (a lone ESC is Escape).
fn keys(bytes: &[u8]) -> Vec<Key> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let seqs: &[(&[u8], Key)] = &[
            (b"\x1b[A", Key::Up),
            (b"\x1bOA", Key::Up),
            (b"\x1b[B", Key::Down),
            (b"\x1bOB", Key::Down),
            (b"\x1b[5~", Key::PageUp),
            (b"\x1b[6~", Key::PageDown),
            (b"\x1b[H", Key::Home),
            (b"\x1bOH", Key::Home),
            (b"\x1b[1~", Key::Home),
            (b"\x1b[F", Key::End),
            (b"\x1bOF", Key::End),
            (b"\x1b[4~", Key::End),
        ];
        if let Some((seq, key)) = seqs.iter().find(|(seq, _)| rest.starts_with(seq)) {
            out.push(key.clone());
            i += seq.len();
            continue;
        }
        match rest[0] {
            0x1b if rest.len() > 1 && (rest[1] == b'[' || rest[1] == b'O') => {
                // Another sequence: skip it whole.
                let end = rest[2..]
                    .iter()
                    .position(|b| (0x40..0x7f).contains(b))
                    .map_or(rest.len(), |p| p + 3);
                i += end;
                continue;
            }
            0x1b => out.push(Key::Escape),
            b'\r' | b'\n' => out.push(Key::Enter),
            0x7f | 0x08 => out.push(Key::Backspace),
            b if b < 0x20 => out.push(Key::Ctrl(b + 0x40)),
            _ => {
                let s = String::from_utf8_lossy(rest);
                let c = s.chars().next().unwrap_or(' ');
                let len = c.len_utf8().min(rest.len());
                out.push(Key::Char(c));
                i += len;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Runs the scroll mode until the user leaves it or the attachment ends.
pub fn run(
    paths: &NamespacePaths,
    target: &str,
    reader: &mut FrameReader,
    signals: &mut SignalPipe,
    ended: &AtomicBool,
    page_up: bool,
) -> Result<Outcome, ClientError> {
    let (cols, rows) = super::terminal_size(&io::stdout()).unwrap_or((80, 24));
    let mut client = Client::connect(paths, false)?;
    // Where the screen starts now: that and everything above is frozen.
    let probe: HistoryReply = client.request_as(&Request::PaneHistory(methods::PaneHistory {
        target: target.to_string(),
        start: None,
        count: BLOCK as u32,
        ansi: true,
    }))?;
    let mut s = Scroll {
        client,
        target: target.to_string(),
        lines: HashMap::new(),
        start: probe.history_start,
        end: probe.end,
        top: 0,
        cursor: 0,
        mark: None,
        cols: usize::from(cols),
        rows: usize::from(rows),
        search: None,
        status: String::new(),
    };
    s.store(probe);
    s.top = s.last_top();
    s.go(s.end.saturating_sub(1) as i64);
    if page_up {
        s.scroll_by(-(s.view_rows() as i64));
    }
    // While typing a search: its text and direction.
    let mut prompt: Option<(String, bool)> = None;
    let mut input = [0u8; 4096];
    loop {
        if let Some((text, back)) = &prompt {
            s.status = format!("{}{text}", if *back { '?' } else { '/' });
        }
        s.draw()?;
        if prompt.is_some() {
            write_stdout(b"\x1b[?25h");
        }
        let fds = [0, signals.read.as_raw_fd(), reader.stream().as_raw_fd()];
        let ready = poll_readable(&fds, None).map_err(|e| ClientError {
            kind: ErrorKind::Io,
            message: format!("poll: {e}"),
        })?;
        if ready[2] {
            match reader.fill() {
                Ok(true) => {}
                Ok(false) | Err(_) => return Ok(Outcome::Lost),
            }
            while let Some(frame) = reader.next_buffered()? {
                if let ServerFrame::Exit(payload) = frame {
                    return Ok(Outcome::Exit(payload));
                }
            }
        }
        if ready[1] && signals.drain() {
            if ended.load(Ordering::Relaxed) {
                return Ok(Outcome::Signal);
            }
            if let Some((c, r)) = super::terminal_size(&io::stdout()) {
                s.cols = usize::from(c);
                s.rows = usize::from(r);
                let cursor = s.cursor as i64;
                s.go(cursor);
            }
        }
        if !ready[0] {
            continue;
        }
        let n = match crate::sys::read_stdin(&mut input) {
            Ok(0) => return Ok(Outcome::Done),
            Ok(n) => n,
            Err(_) => continue,
        };
        for key in keys(&input[..n]) {
            if prompt.is_some() {
                prompt_key(&mut s, &mut prompt, key)?;
            } else if let Some(outcome) = view_key(&mut s, &mut prompt, key)? {
                return Ok(outcome);
            }
        }
    }
}

/// A key while a search is typed (`prompt`, with its direction).
fn prompt_key(
    s: &mut Scroll,
    prompt: &mut Option<(String, bool)>,
    key: Key,
) -> Result<(), ClientError> {
    let Some((text, back)) = prompt else {
        return Ok(());
    };
    match key {
        Key::Enter => {
            let (text, back) = (text.clone(), *back);
            *prompt = None;
            s.status = search_status(s, &text, back)?;
            s.search = Some((text, back));
        }
        Key::Escape | Key::Ctrl(b'C') | Key::Ctrl(b'G') => {
            *prompt = None;
            s.status.clear();
        }
        Key::Backspace => {
            text.pop();
        }
        Key::Char(c) => text.push(c),
        _ => {}
    }
    Ok(())
}

/// A key over the history: moves, searches, selects; how the scroll mode
/// ends, if it does.
fn view_key(
    s: &mut Scroll,
    prompt: &mut Option<(String, bool)>,
    key: Key,
) -> Result<Option<Outcome>, ClientError> {
    s.status.clear();
    let page = s.view_rows() as i64;
    let cursor = s.cursor as i64;
    match key {
        Key::Char('q') | Key::Escape | Key::Ctrl(b'C') => {
            write_stdout(b"\x1b[0m\x1b[?7h\x1b[?25h");
            return Ok(Some(Outcome::Done));
        }
        Key::Up | Key::Char('k') | Key::Ctrl(b'P') => s.go(cursor - 1),
        Key::Down | Key::Char('j') | Key::Ctrl(b'N') => s.go(cursor + 1),
        Key::PageUp | Key::Char('b') | Key::Ctrl(b'B') => s.scroll_by(-page),
        Key::PageDown | Key::Char('f') | Key::Char(' ') | Key::Ctrl(b'F') => s.scroll_by(page),
        Key::Ctrl(b'U') => s.scroll_by(-page / 2),
        Key::Ctrl(b'D') => s.scroll_by(page / 2),
        Key::Home | Key::Char('g') => s.go(s.start as i64),
        Key::End | Key::Char('G') => s.go(s.end as i64),
        Key::Char('?') => *prompt = Some((String::new(), true)),
        Key::Char('/') => *prompt = Some((String::new(), false)),
        Key::Char(c @ ('n' | 'N')) => {
            if let Some((text, back)) = s.search.clone() {
                s.status = search_status(s, &text, back == (c == 'n'))?;
            }
        }
        Key::Char('v') => {
            s.mark = match s.mark {
                Some(_) => None,
                None => Some(s.cursor),
            }
        }
        Key::Char('y') | Key::Enter => {
            let text = s.selection_text()?;
            let mut out = b"\x1b]52;c;".to_vec();
            out.extend_from_slice(base64(text.as_bytes()).as_bytes());
            out.extend_from_slice(b"\x07");
            write_stdout(&out);
            write_stdout(b"\x1b[0m\x1b[?7h\x1b[?25h");
            return Ok(Some(Outcome::Done));
        }
        _ => {}
    }
    Ok(None)
}

fn search_status(s: &mut Scroll, text: &str, back: bool) -> Result<String, ClientError> {
    if text.is_empty() {
        return Ok(String::new());
    }
    Ok(if s.find(text, back)? {
        format!("found: {text}")
    } else {
        format!("not found: {text}")
    })
}

/// The first `cols` characters of a plain line (one column each, near
/// enough for a status line and a highlighted row).
fn clip(text: &str, cols: usize) -> String {
    text.chars().take(cols).collect()
}

/// A line's text without the SGR and OSC 8 sequences `pane.history` puts
/// in it.
pub fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\x40'..'\x7f').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\x07' {
                        break;
                    }
                    if c == '\x1b' {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Standard base64 with padding, for OSC 52.
pub fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn escapes_are_stripped() {
        assert_eq!(
            strip_escapes("\x1b[1;31mred\x1b[0m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
            "red link"
        );
    }

    #[test]
    fn keys_are_split() {
        assert_eq!(
            keys(b"k\x1b[5~\x1b[Aq\x1b"),
            vec![
                Key::Char('k'),
                Key::PageUp,
                Key::Up,
                Key::Char('q'),
                Key::Escape
            ]
        );
    }
}
