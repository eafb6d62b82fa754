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
//! queue must not fill); leaving asks for a redraw. The mode itself (keys,
//! search, selection, copy) is `view::scroll_mode`, which the tab view
//! draws inside a pane's rectangle in the server.

use super::attach::tty::{SignalPipe, poll_readable, write_stdout};
use super::{Client, ClientError, ErrorKind, FrameReader, ServerFrame};
use crate::paths::NamespacePaths;
use crate::protocol::methods::{self, Request};
use crate::view::scroll_mode::{self, Lines, Scroll, Step, strip_escapes};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Lines fetched per request.
const BLOCK: u64 = 200;

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

/// The pane's lines, fetched from the server a block at a time.
struct Fetched {
    client: Client,
    target: String,
    lines: HashMap<u64, Line>,
    /// The frozen range: `start..end`.
    start: u64,
    end: u64,
}

impl Fetched {
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
}

impl Lines for Fetched {
    type Error = ClientError;
    fn plain(&mut self, n: u64) -> Result<Option<(String, bool)>, ClientError> {
        Ok(self.line(n)?.map(|l| (l.plain.clone(), l.wrapped)))
    }
}

fn draw(s: &Scroll, lines: &mut Fetched, cols: usize) -> Result<(), ClientError> {
    let mut out = b"\x1b[?25l\x1b[?7l\x1b[0m".to_vec();
    for r in 0..s.rows {
        let n = s.top + r as u64;
        out.extend_from_slice(format!("\x1b[{};1H\x1b[0m\x1b[2K", r + 1).as_bytes());
        let Some(line) = lines.line(n)? else {
            continue;
        };
        if s.highlighted(n, 0) {
            out.extend_from_slice(b"\x1b[7m");
            out.extend_from_slice(clip(&line.plain, cols).as_bytes());
        } else {
            out.extend_from_slice(line.styled.as_bytes());
        }
        out.extend_from_slice(b"\x1b[0m");
    }
    let message = s.message();
    let help = if message.is_empty() {
        "q quit  ? / search  n N next  v select  y copy"
    } else {
        message.as_str()
    };
    out.extend_from_slice(
        format!(
            "\x1b[{};1H\x1b[0m\x1b[2K\x1b[7m{}\x1b[0m",
            s.rows + 1,
            clip(&format!("[scroll {}] {help}", s.position()), cols)
        )
        .as_bytes(),
    );
    write_stdout(&out);
    Ok(())
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
    let mut lines = Fetched {
        client,
        target: target.to_string(),
        lines: HashMap::new(),
        start: probe.history_start,
        end: probe.end,
    };
    // One row for the mode's own status line.
    let view_rows = |rows: u16| usize::from(rows).saturating_sub(1).max(1);
    let mut s = Scroll::new(probe.history_start, probe.end, view_rows(rows));
    let mut cols = usize::from(cols);
    lines.store(probe);
    if page_up {
        s.scroll_by(-(s.rows as i64));
    }
    let mut input = [0u8; 4096];
    loop {
        draw(&s, &mut lines, cols)?;
        if s.prompt.is_some() {
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
                cols = usize::from(c);
                s.set_rows(view_rows(r));
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
        for key in scroll_mode::keys(&input[..n]) {
            match s.key(key, &mut lines)? {
                Step::Stay => {}
                Step::Leave => {
                    write_stdout(b"\x1b[0m\x1b[?7h\x1b[?25h");
                    return Ok(Outcome::Done);
                }
                Step::Copy(text) => {
                    write_stdout(&scroll_mode::osc52(&text));
                    write_stdout(b"\x1b[0m\x1b[?7h\x1b[?25h");
                    return Ok(Outcome::Done);
                }
            }
        }
    }
}

/// The first `cols` characters of a plain line (one column each, near
/// enough for a status line and a highlighted row).
fn clip(text: &str, cols: usize) -> String {
    text.chars().take(cols).collect()
}
