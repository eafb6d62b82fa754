//! The terminal model: a screen emulator that keeps each pane's state so the
//! server can redraw it for any client that attaches, capture it, and carry
//! it across a binary upgrade (serde) or a reboot (`inject_history`).
//!
//! Data flow: while the boundary tracker is in ground state, `feed` decodes
//! the bulk of output (printable ASCII, C0 controls, SGR/CUP/EL) straight
//! from the input in `csi_fast::ground`, the hot path. At anything else it
//! hands the input up to the next ESC to `boundary::Boundary`, which cuts
//! it into ground-state text and complete escape sequences and holds back an
//! unfinished tail. Text is drawn by `Screen::text` (it mirrors vte's UTF-8
//! and C0 handling and is tested against vte). Sequences go to `csi_fast`
//! for SGR/CUP/EL (also tested against vte), REP is done by the model, and
//! everything else goes to vte's `Processor`, which calls the `Handler` in
//! `handler.rs`. Everything fed goes to `forward`, the bytes attached
//! clients should see, except what is held back or answered here. The fast
//! path is tested against the tracker-only path on random input.
//!
//! `feed_logged` also feeds a `TextLog` (the server's output log, which
//! keeps the printed text with escapes stripped) in the same pass: while
//! the log is in its text state, the fast path hands it the text runs and
//! controls as it decodes them, and everything else goes to the log's own
//! stripper. So the bulk of output is scanned once, not twice.
//!
//! Queries are answered here, not by clients: DA1, DA2, DA3, DSR 5/6 and
//! the DEC DSRs (DECXCPR and the rest), DECRQM, DECRQSS, DECRQPSR,
//! DECRQCRA (xterm's checksum), kitty `CSI ? u`, XTVERSION, modifyOtherKeys
//! `CSI ? 4 m`, XTWINOPS 11/13/18/19/20/21 (14 and 16 once the server gives
//! the client's cell size, `set_cell_pixels`), XTGETTCAP (`Co`, every
//! other capability as unknown), and OSC 4/5/10..19 colour queries produce
//! bytes in `take_replies` (for the server to write to the PTY) and are
//! removed from `forward`, so an
//! attached terminal never answers too and a program never gets two
//! answers (or none while no client is attached). See `queries.rs` and
//! `dec.rs` for the exact list.
//!
//! Left/right margins (DECLRMM, DECSLRM) bound printing, wrapping,
//! scrolling, ICH/DCH/IL/DL, DECIC/DECDC, SL/SR, CR, cursor moves and tabs
//! as in xterm; reverse wraparound (45, 1045), DECSTR, DECSCL levels, the
//! rectangle operations and DECSCA/SPA protection are modelled (`dec.rs`).
//! No sequence does more than a few screenfuls of work whatever its count
//! (REP included: a huge count is cut to what changes the screen).
//!
//! Synchronized output (2026) is tracked as a mode and restored by `redraw`,
//! but the model itself never buffers: its state always reflects every byte
//! fed (vte's own time-based sync buffer is disabled by `NoSyncTimeout`).
//!
//! Resize reflows the main screen and its history when the width changes
//! (`reflow.rs`: wrapped lines are joined and cut again at the new width,
//! the cursor follows its character); the alternate screen is truncated or
//! padded (a wide character cut in half is blanked). Shrinking the height
//! pushes rows above the cursor into scrollback, growing it pulls history
//! back while the bottom rows are empty; the scroll region is reset, as in
//! xterm.
//!
//! Invariants: no input can panic the model or grow it without bound:
//! sequences are capped at 64 KiB (`boundary::MAX_SEQ`), scrollback by lines
//! and bytes, events, replies, titles and stacks by constants. Serializing
//! and deserializing a `Terminal` gives one that behaves identically on any
//! further input (checked by `PartialEq` in the tests); vte's `Processor` is
//! not serialized because it never holds state between pieces.
//!
//! Underline colour (SGR 58/59) and OSC 8 hyperlinks are part of the pen
//! (`Screen::pen_extra`) and kept per cell in a row side table and in
//! scrollback lines, so capture, redraw and upgrades carry them; a link
//! longer than `cell::MAX_LINK` is forwarded but not kept.
//!
//! xterm's details: a cursor parked past the last column keeps its pending
//! wrap across screen switches (47, 1047, 1049), DECSC/DECRC on either
//! screen and erase-in-line 1 and 2 (EL 0 cancels it); DECCOLM (`CSI ? 3
//! h/l`) clears the screen, resets the margins and homes the cursor
//! without changing the width.
//!
//! Not modelled: one kitty keyboard stack is shared by both
//! screens; double-width lines, 132-column switching and sixel are not
//! implemented.

mod boundary;
mod capture;
mod cell;
mod cold;
mod csi_fast;
mod dec;
mod grid;
mod handler;
mod history_line;
mod modes;
mod queries;
mod redraw;
mod reflow;
mod row;
mod screen;
mod scrollback;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use vte::ansi::{Processor, Timeout};

pub use capture::{Capture, CaptureOptions, CursorInfo};
pub use cell::{Cell, Color, INVERSE, Style};
pub use cold::{RECORD_HEADER, RecordIn, RecordSource, StoredBlock, record_checksum};
pub use modes::{Modes, MouseEncoding, MouseMode};
pub use redraw::ViewCache;
pub use scrollback::Line;

use boundary::{Boundary, Kind, Piece, is_exec_c0};
use screen::Screen;

/// A range of a pane's lines (`Terminal::history_lines`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryLines {
    /// Number of `lines[0]`.
    pub first: u64,
    pub lines: Vec<String>,
    /// Per line: autowrap continued it on the next one.
    pub wrapped: Vec<bool>,
    /// Number of the oldest line still in history.
    pub history_start: u64,
    /// Number of the screen's first row (one past the newest history line).
    pub screen_start: u64,
}

/// The JSON-able summary of modes returned by `Terminal::modes`.
pub type ModeSummary = Modes;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermConfig {
    /// Scrollback lines kept at most.
    pub scrollback_lines: usize,
    /// Scrollback heap bytes kept at most (estimate, see
    /// `Terminal::scrollback_memory_bytes`).
    pub scrollback_bytes: usize,
    /// Reported for OSC 10 `?` until the program sets its own.
    pub foreground: (u8, u8, u8),
    /// Reported for OSC 11 `?` until the program sets its own.
    pub background: (u8, u8, u8),
}

impl Default for TermConfig {
    fn default() -> TermConfig {
        TermConfig {
            scrollback_lines: 10_000,
            scrollback_bytes: 16 << 20,
            foreground: (0xe5, 0xe5, 0xe5),
            background: (0, 0, 0),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TermEvent {
    Bell,
    Title(String),
    /// OSC 7, the path part of the `file://host/path` URL, percent-decoded.
    Cwd(String),
    /// OSC 133;A
    Prompt,
    /// OSC 133;C
    CommandStart,
    /// OSC 133;D[;exit]
    CommandFinished {
        exit: Option<i32>,
    },
}

/// A reader of everything fed to a terminal that keeps its text with the
/// escape sequences stripped (the server's output log), fed by
/// `Terminal::feed_logged` in the same pass as the model.
pub trait TextLog {
    /// Whether the log is in its text state, in which the bytes the fast
    /// path takes mean to it exactly what `text` and `control` report:
    /// printable ASCII kept, C0 controls one by one, and whole CSI
    /// sequences (ESC, `[`, digits, `;`, `:`, a final byte) dropped.
    fn in_text(&self) -> bool;
    /// A run of printable ASCII (0x20..0x7e) read in the text state: the
    /// first `len` bytes of `from` (the rest of the input follows them,
    /// so a short run can be copied as a whole word).
    fn text(&mut self, from: &[u8], len: usize);
    /// A C0 control other than ESC read in the text state.
    fn control(&mut self, b: u8);
    /// Any other bytes: the log reads them with its own rules.
    fn strip(&mut self, bytes: &[u8]);
}

/// No log: `Terminal::feed`. Always "in text", so the fast path runs with
/// calls that compile to nothing.
struct NoTextLog;

impl TextLog for NoTextLog {
    #[inline(always)]
    fn in_text(&self) -> bool {
        true
    }
    #[inline(always)]
    fn text(&mut self, _: &[u8], _: usize) {}
    #[inline(always)]
    fn control(&mut self, _: u8) {}
    #[inline(always)]
    fn strip(&mut self, _: &[u8]) {}
}

/// vte's `Processor` buffers everything after `CSI ? 2026 h` in a private,
/// time-based buffer. The model tracks 2026 as a mode instead and processes
/// bytes immediately, so this timeout never fires.
#[derive(Default)]
pub struct NoSyncTimeout;

impl Timeout for NoSyncTimeout {
    fn set_timeout(&mut self, _: std::time::Duration) {}
    fn clear_timeout(&mut self) {}
    fn pending_timeout(&self) -> bool {
        false
    }
}

thread_local! {
    /// One vte decoder for every terminal on the thread. It decodes escape
    /// sequences only and is handed whole ones (text and REP never reach
    /// it), so it holds no state between pieces and sharing it is exact.
    /// Sharing matters: each `Processor` reserves a 2 MiB buffer for
    /// synchronized output that ptyd never uses, and one per pane made every
    /// fork of a server with many panes slower (page tables to copy).
    static PROCESSOR: std::cell::RefCell<Processor<NoSyncTimeout>> =
        std::cell::RefCell::new(Processor::new());
}

#[derive(Serialize, Deserialize)]
#[serde(from = "Snapshot")]
pub struct Terminal {
    screen: Screen,
    boundary: Boundary,
    /// Bumped by every method that can change the state: a live upgrade
    /// copies a terminal ahead of its pause and re-sends only those whose
    /// count moved since. Not part of the state itself.
    #[serde(skip)]
    changes: u64,
    /// How many times the active screen changed (47, 1047, 1049, RIS on
    /// the alternate screen): a client kept on its own alternate screen
    /// gets a redraw instead of bytes that switch screens. Not state.
    #[serde(skip)]
    screen_switches: u64,
}

/// What a serialized `Terminal` holds. Deserializing goes through here so a
/// snapshot from another build (or a damaged one) is repaired to the model's
/// invariants instead of causing panics later.
#[derive(Deserialize)]
struct Snapshot {
    screen: Screen,
    boundary: Boundary,
}

impl From<Snapshot> for Terminal {
    fn from(s: Snapshot) -> Terminal {
        let mut screen = s.screen;
        screen.repair();
        let mut boundary = s.boundary;
        boundary.repair();
        Terminal {
            screen,
            boundary,
            changes: 0,
            screen_switches: 0,
        }
    }
}

impl PartialEq for Terminal {
    /// Equal when the model state and the pending parser state are equal;
    /// the shared vte `Processor` holds nothing between pieces.
    fn eq(&self, other: &Terminal) -> bool {
        self.screen == other.screen && self.boundary == other.boundary
    }
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("size", &self.size())
            .field("title", &self.title())
            .finish()
    }
}

impl Terminal {
    pub fn new(cols: u16, rows: u16, config: TermConfig) -> Terminal {
        Terminal {
            screen: Screen::new(cols, rows, config),
            boundary: Boundary::default(),
            changes: 0,
            screen_switches: 0,
        }
    }

    /// Processes PTY output. Appends to `forward` what attached clients should
    /// get: the input minus the queries answered here; bytes of a sequence not
    /// yet complete are held back until it completes.
    pub fn feed(&mut self, bytes: &[u8], forward: &mut Vec<u8>) {
        self.feed_logged(bytes, forward, &mut NoTextLog);
    }

    /// `feed`, also giving every byte to `log` (the server's output log,
    /// which keeps the text a program printed): the text and controls the
    /// fast path decodes as they go by (`TextLog::text`, `control`) while
    /// the log is in its text state, everything else to `TextLog::strip`.
    /// Each byte of the bulk of output is thus looked at once, not once
    /// here and again by the log's own scan.
    pub fn feed_logged<L: TextLog>(&mut self, bytes: &[u8], forward: &mut Vec<u8>, log: &mut L) {
        self.changes += 1;
        let Terminal {
            screen, boundary, ..
        } = self;
        let mut out = Forward {
            input: bytes,
            out: forward,
            start: 0,
            end: 0,
        };
        let mut i = 0;
        while i < bytes.len() {
            if boundary.is_ground() {
                // Text and the common sequences are decoded straight from
                // the input, each byte looked at once; they are always
                // forwarded whole. What the fast path takes (printable
                // ASCII, C0 controls but ESC, whole CSIs with plain
                // parameters and a final byte) reads to a log in its text
                // state as the text and controls it reports: a log in
                // another state (inside a string the model saw end, say)
                // reads the bytes itself.
                let end = if log.in_text() {
                    csi_fast::ground(screen, bytes, i, log)
                } else {
                    let end = csi_fast::ground(screen, bytes, i, &mut NoTextLog);
                    log.strip(&bytes[i..end]);
                    end
                };
                out.pass(&bytes[i..end]);
                i = end;
                if i == bytes.len() {
                    break;
                }
            }
            // Anything else goes through the boundary tracker up to the next
            // ESC, after which the fast path can usually resume. Splitting
            // the input there is exact: the tracker carries its state across
            // calls, as it does across `feed`s (and so does the log).
            let next = bytes[i + 1..]
                .iter()
                .position(|&b| b == 0x1b)
                .map_or(bytes.len(), |n| i + 1 + n);
            general(screen, boundary, &bytes[i..next], &mut out);
            log.strip(&bytes[i..next]);
            i = next;
        }
        out.flush();
        if std::mem::take(&mut self.screen.switched) {
            self.screen_switches += 1;
        }
    }

    /// See `screen_switches` on the struct.
    pub fn screen_switches(&self) -> u64 {
        self.screen_switches
    }

    /// `feed` without the fast path: every byte through the boundary
    /// tracker. The reference the fast path is tested against.
    #[cfg(test)]
    fn feed_general(&mut self, bytes: &[u8], forward: &mut Vec<u8>) {
        self.changes += 1;
        let mut out = Forward {
            input: bytes,
            out: forward,
            start: 0,
            end: 0,
        };
        general(&mut self.screen, &mut self.boundary, bytes, &mut out);
        out.flush();
        if std::mem::take(&mut self.screen.switched) {
            self.screen_switches += 1;
        }
    }

    pub fn take_replies(&mut self) -> Vec<u8> {
        self.changes += 1;
        std::mem::take(&mut self.screen.replies)
    }

    pub fn take_events(&mut self) -> Vec<TermEvent> {
        self.changes += 1;
        std::mem::take(&mut self.screen.events)
    }

    /// See `Screen::resize`: a width change reflows the main screen and
    /// its history, the alternate screen is cut or padded; rows leaving the
    /// top of the main screen go to scrollback, growing pulls history back.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.changes += 1;
        self.screen.resize(cols, rows);
    }

    /// The size in pixels (width, height) of a character cell of the
    /// terminal a client shows this pane on, or `None` when no client
    /// with a known cell size is attached. With it the model answers
    /// XTWINOPS 14 (text area in pixels) and 16 (cell size); without it
    /// those queries pass on to the clients, whose terminals answer. The
    /// server is to set it from its clients' window sizes (the pixel
    /// fields of their `TIOCGWINSZ`).
    pub fn set_cell_pixels(&mut self, cell: Option<(u16, u16)>) {
        self.changes += 1;
        self.screen.cell_pixels = cell.filter(|&(w, h)| w > 0 && h > 0);
    }

    pub fn size(&self) -> (u16, u16) {
        (self.screen.cols as u16, self.screen.rows as u16)
    }

    pub fn title(&self) -> &str {
        &self.screen.title
    }

    pub fn cwd(&self) -> Option<&str> {
        self.screen.cwd.as_deref()
    }

    pub fn visible_text(&self) -> Vec<String> {
        let g = self.screen.grid();
        (0..g.lines()).map(|r| g.row(r).text()).collect()
    }

    pub fn capture(&self, opts: &CaptureOptions) -> Capture {
        capture::capture(&self.screen, opts, self.modes())
    }

    pub fn redraw(&self, cols: u16, rows: u16) -> Vec<u8> {
        redraw::redraw(&self.screen, cols, rows)
    }

    /// `redraw` for a client that shows only the active screen on whatever
    /// screen it is on (it keeps its terminal on the alternate screen):
    /// never switches screens.
    pub fn redraw_flat(&self, cols: u16, rows: u16) -> Vec<u8> {
        redraw::redraw_with(&self.screen, cols, rows, false)
    }

    /// Bytes bringing a client that shows this screen at its own size
    /// (clipped or padded) up to date with it; see `redraw::view_update`.
    pub fn view_update(&self, cols: u16, rows: u16, cache: &mut ViewCache) -> Vec<u8> {
        redraw::view_update(&self.screen, cols, rows, cache)
    }

    /// Bytes that print the newest `lines` lines of history (fewer if they
    /// pass `max_bytes`) into a terminal `rows` high, from the start of the
    /// cursor's line (a client starts on a fresh line), and then scroll
    /// them all off its screen, with what was above them: they land in the
    /// terminal's own scrollback, where its scrolling and search reach
    /// them, and its screen is left blank for a redraw. Each line is one
    /// line there as it was here (a longer one wraps on a narrower
    /// terminal). Empty when there is no history or `lines` is 0.
    pub fn history_replay(&self, lines: usize, max_bytes: usize, rows: u16) -> Vec<u8> {
        let sb = &self.screen.scrollback;
        let mut picked: Vec<Vec<u8>> = Vec::new();
        let mut total = 0;
        for i in (0..sb.len()).rev().take(lines) {
            let Some(line) = sb.get(i) else { break };
            let line = line.view();
            let mut bytes = Vec::new();
            line.write_sgr(&mut bytes);
            if total + bytes.len() + 8 > max_bytes {
                break;
            }
            total += bytes.len() + 8;
            picked.push(bytes);
        }
        if picked.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(total + 64);
        out.extend_from_slice(b"\x1b[0m\r");
        for bytes in picked.iter().rev() {
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\x1b[0m\r\n");
        }
        // The cursor is on the row after the last line: down to the bottom
        // and on until every row above it has scrolled off.
        out.extend(std::iter::repeat_n(b'\n', usize::from(rows.max(1)) - 1));
        out
    }

    /// Lines `start..start + count` of the pane's text, numbered from the
    /// first line it ever pushed into history: history lines first
    /// (`history_start..screen_start`), then the rows of the active screen
    /// (`screen_start..screen_start + rows`). A line keeps its number while
    /// it stays in history (a width change re-wraps history and renumbers
    /// it). `start` is clamped to what exists; at most `count` lines.
    pub fn history_lines(&self, start: u64, count: usize, escapes: bool) -> HistoryLines {
        let sb = &self.screen.scrollback;
        let screen_start = sb.pushed();
        let history_start = screen_start.saturating_sub(sb.len() as u64);
        let grid = self.screen.grid();
        let end = screen_start + grid.lines() as u64;
        let first = start.clamp(history_start, end);
        let last = first.saturating_add(count as u64).min(end);
        let mut lines = Vec::new();
        let mut wrapped = Vec::new();
        for n in first..last {
            if n < screen_start {
                let Some(line) = sb.get((n - history_start) as usize) else {
                    break;
                };
                let line = line.view();
                if escapes {
                    let mut out = Vec::new();
                    line.write_sgr(&mut out);
                    lines.push(String::from_utf8_lossy(&out).into_owned());
                } else {
                    lines.push(line.text().trim_end_matches(' ').to_owned());
                }
                wrapped.push(line.wrapped());
            } else {
                let row = grid.row((n - screen_start) as usize);
                lines.push(if escapes {
                    capture::row_with_sgr(row)
                } else {
                    row.text().trim_end_matches(' ').to_owned()
                });
                wrapped.push(row.wrapped);
            }
        }
        HistoryLines {
            first,
            lines,
            wrapped,
            history_start,
            screen_start,
        }
    }

    /// The nearest line after `from` (numbered as in `history_lines`;
    /// towards older lines with `back`, `from` itself left out) within
    /// `start..end` whose text, without styles and trailing blanks, `hit`
    /// accepts. History lines are borrowed where they are stored, so a
    /// search through a million lines allocates nothing per line.
    pub fn find_line(
        &self,
        from: u64,
        back: bool,
        (start, end): (u64, u64),
        mut hit: impl FnMut(&str) -> bool,
    ) -> Option<u64> {
        let sb = &self.screen.scrollback;
        let screen_start = sb.pushed();
        let history_start = screen_start.saturating_sub(sb.len() as u64);
        let grid = self.screen.grid();
        let start = start.max(history_start);
        let end = end.min(screen_start + grid.lines() as u64);
        let mut test = |n: u64| {
            if n < screen_start {
                let i = usize::try_from(n - history_start).ok()?;
                sb.with_line(i, |l| hit(l.text().trim_end_matches(' ')))
            } else {
                let row = grid.row(usize::try_from(n - screen_start).ok()?);
                Some(hit(row.text().trim_end_matches(' ')))
            }
        };
        if back {
            (start..from.min(end))
                .rev()
                .find(|&n| test(n) == Some(true))
        } else {
            (from.saturating_add(1).max(start)..end).find(|&n| test(n) == Some(true))
        }
    }

    /// The cells of row `r` of the active screen (`None` past the last),
    /// for a view that composes several screens into one.
    pub fn row_cells(&self, r: usize) -> Option<&[Cell]> {
        let g = self.screen.grid();
        (r < g.lines()).then(|| &*g.row(r).cells)
    }

    /// Line `n` (numbered as in `history_lines`) as cells, at least the
    /// screen's width, for a view that draws history; `None` when no line
    /// has that number.
    pub fn numbered_cells(&self, n: u64) -> Option<Box<[Cell]>> {
        let sb = &self.screen.scrollback;
        let screen_start = sb.pushed();
        let history_start = screen_start.saturating_sub(sb.len() as u64);
        if n < history_start {
            return None;
        }
        if n < screen_start {
            let line = sb.get(usize::try_from(n - history_start).ok()?)?;
            let row = reflow::line_to_row(line.view(), self.screen.cols);
            return Some(row.cells);
        }
        let grid = self.screen.grid();
        let r = usize::try_from(n - screen_start).ok()?;
        (r < grid.lines()).then(|| grid.row(r).cells.clone())
    }

    /// Whether the program is on its alternate screen.
    pub fn alt_screen(&self) -> bool {
        self.screen.modes.alt_screen
    }

    /// The keyboard, mouse and cursor-shape modes of this screen (see
    /// `redraw::focus_modes`), and the bytes that switch every one of them
    /// off first.
    pub fn focus_modes(&self) -> (Vec<u8>, &'static [u8]) {
        (redraw::focus_modes(&self.screen), redraw::MODES_OFF)
    }

    pub fn modes(&self) -> ModeSummary {
        self.screen.modes.clone()
    }

    /// (col, row, visible), zero-based.
    pub fn cursor(&self) -> (u16, u16, bool) {
        (
            self.screen.cursor.col as u16,
            self.screen.cursor.row as u16,
            self.screen.modes.cursor_visible,
        )
    }

    /// Appends lines (plain text or with SGR sequences) to scrollback, oldest
    /// first. Each line is interpreted on a scratch one-row terminal wide
    /// enough for it (two columns per char, for wide characters), reset
    /// between lines, so only printable text and SGR take effect and no
    /// style leaks from one line to the next. One scratch terminal serves
    /// all lines: creating a vte `Processor` allocates 2 MiB.
    pub fn inject_history(&mut self, lines: &[String]) {
        self.changes += 1;
        let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let width = widest.saturating_mul(2).clamp(1, usize::from(u16::MAX)) as u16;
        let mut scratch = Terminal::new(width, 1, TermConfig::default());
        let mut sink = Vec::new();
        for line in lines {
            scratch.screen.reset();
            scratch.boundary = Boundary::default();
            scratch.feed(line.as_bytes(), &mut sink);
            sink.clear();
            self.screen.scrollback.push_row(scratch.screen.main.row(0));
        }
    }

    /// Prints lines (plain text or with SGR) on the screen as if a program
    /// had just printed them, each on a line of its own, from the cursor
    /// on: the last ones stay visible, the rest scroll into history. Only
    /// printable text and SGR take effect (each line is read on a scratch
    /// terminal first, as in `inject_history`). A restore shows what a
    /// pane printed before this way.
    pub fn print_lines(&mut self, lines: &[String]) {
        let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let width = widest.saturating_mul(2).clamp(1, usize::from(u16::MAX)) as u16;
        let mut scratch = Terminal::new(width, 1, TermConfig::default());
        let mut sink = Vec::new();
        for line in lines {
            scratch.screen.reset();
            scratch.boundary = Boundary::default();
            scratch.feed(line.as_bytes(), &mut sink);
            let text = capture::row_with_sgr(scratch.screen.main.row(0));
            self.feed(b"\x1b[0m", &mut sink);
            self.feed(text.as_bytes(), &mut sink);
            self.feed(b"\x1b[0m\r\n", &mut sink);
            sink.clear();
        }
    }

    pub fn scrollback_len(&self) -> usize {
        self.screen.scrollback.len()
    }

    /// The terminal as JSON with its history's lines left out (`"lines":
    /// []`), for an owner that keeps them elsewhere (the crash checkpoints'
    /// history log, `server/history_log.rs`); `restore_history` puts them
    /// back into the decoded terminal.
    pub fn to_json_without_history(&self) -> serde_json::Result<Box<RawValue>> {
        scrollback::without_lines(|| serde_json::value::to_raw_value(self))
    }

    /// How the history's lines are numbered now: (epoch, the oldest line's
    /// number, lines ever pushed). A line's number and text stay the same
    /// for as long as the epoch does (see `Scrollback::epoch`). `None` for a
    /// history that holds more lines than it counts (a snapshot from before
    /// the count): its lines have no numbers.
    pub fn history_numbering(&self) -> Option<(u64, u64, u64)> {
        let sb = &self.screen.scrollback;
        let oldest = sb.pushed().checked_sub(sb.len() as u64)?;
        Some((sb.epoch(), oldest, sb.pushed()))
    }

    /// History line number `n` (see `history_numbering`) as its packed
    /// bytes (`Line::from_stored` takes them back): borrowed, or for a
    /// compressed line a copy out of its decoded block, no encoding; `None`
    /// if no line has that number.
    pub fn history_line_bytes(&self, n: u64) -> Option<std::borrow::Cow<'_, [u8]>> {
        let sb = &self.screen.scrollback;
        let oldest = sb.pushed().checked_sub(sb.len() as u64)?;
        let i = usize::try_from(n.checked_sub(oldest)?).ok()?;
        sb.get(i).map(|line| match line {
            scrollback::HistoryLine::Hot(line) => std::borrow::Cow::Borrowed(line.stored()),
            scrollback::HistoryLine::Cold(line) => {
                std::borrow::Cow::Owned(line.view().stored().to_vec())
            }
        })
    }

    /// The history's compressed blocks, oldest first, as the history log
    /// stores them (`server/continuity/history_log.rs`), and how many of
    /// the newest lines are not in one (the hot lines, numbered up to
    /// `history_numbering`'s count of lines pushed).
    pub fn history_blocks(&self) -> (impl Iterator<Item = StoredBlock<'_>>, usize) {
        let sb = &self.screen.scrollback;
        (sb.stored_blocks(), sb.hot_len())
    }

    /// The history's blocks held once: each one `place(k, id)` (block `k`
    /// of `history_blocks`, of id `id`) says `source` holds as a record at
    /// that offset lets its bytes go from the heap and reads them from
    /// there; one it does not name comes back into the heap. For the
    /// history log's owner, right after a sync. Returns the heap bytes let
    /// go.
    pub fn keep_history_in_records(
        &mut self,
        source: &std::sync::Arc<dyn RecordSource>,
        place: impl Fn(usize, u64) -> Option<u64>,
    ) -> usize {
        self.screen.scrollback.keep_in_records(source, place)
    }

    /// Every history block's bytes back in the heap: the log holding them
    /// is let go.
    pub fn keep_history_in_heap(&mut self) {
        self.screen.scrollback.keep_in_heap();
    }

    /// Puts back the history a `to_json_without_history` encoding left
    /// out, as the history log kept it: its blocks as they are (checked,
    /// not compressed again; a damaged one becomes a marker line), then
    /// its newest lines, oldest first. Lines keep their numbers (the count
    /// of lines ever pushed is the encoding's).
    pub fn restore_history(&mut self, blocks: Vec<RecordIn>, hot: Vec<Line>) {
        self.screen.scrollback.restore_blocks(blocks, hot);
    }

    /// Whether history lines wait to be compressed (`compress_history`):
    /// put back by `restore_history` (lines only, from an older log) or
    /// decoded, which leave it for later
    /// so that a live upgrade's blackout does not compress every pane.
    pub fn history_backlog(&self) -> bool {
        self.screen.scrollback.has_backlog()
    }

    /// Compresses up to `max_blocks` blocks of that backlog (each about
    /// 32 KiB of lines); returns how many it did.
    pub fn compress_history(&mut self, max_blocks: usize) -> usize {
        self.screen.scrollback.compress_backlog(max_blocks)
    }

    /// How many state-changing calls this terminal has had (see `changes`).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Lines ever pushed into scrollback (monotonic, unlike its length).
    pub fn scrollback_pushed(&self) -> u64 {
        self.screen.scrollback.pushed()
    }

    /// Estimated heap bytes used by scrollback.
    pub fn scrollback_memory_bytes(&self) -> usize {
        self.screen.scrollback.memory_bytes()
    }

    /// History bytes as counted against the bounds (`scrollback_bytes`,
    /// `scrollback_total_bytes`): the uncompressed newest lines and the
    /// compressed blocks.
    pub fn history_stored_bytes(&self) -> usize {
        self.screen.scrollback.stored_bytes()
    }

    /// What the same history would take uncompressed.
    pub fn history_raw_bytes(&self) -> usize {
        self.screen.scrollback.raw_bytes()
    }

    /// Drops the history's oldest compressed block, leaving a marker line
    /// saying how many lines went (`scrollback_total_bytes`). Returns the
    /// bytes freed; `None` if no block is compressed yet.
    pub fn drop_oldest_history_block(&mut self) -> Option<usize> {
        let freed = self.screen.scrollback.drop_oldest_block()?;
        self.changes += 1;
        Some(freed)
    }

    /// Sets how many raw bytes fill a history block before it is
    /// compressed (tests and benches use small blocks so that every block
    /// edge is crossed); not kept by an encoding.
    #[doc(hidden)]
    pub fn set_history_block_bytes(&mut self, bytes: usize) {
        self.screen.scrollback.set_block_raw(bytes);
    }

    /// Bytes held back because the sequence they start is incomplete.
    pub fn pending_bytes(&self) -> usize {
        self.boundary.pending().len()
    }
}

/// The general path: the boundary tracker cuts `bytes` into pieces, which
/// are drawn, decoded by `csi_fast`, the model (REP) or vte, and forwarded
/// unless answered here.
fn general(screen: &mut Screen, boundary: &mut Boundary, bytes: &[u8], out: &mut Forward<'_>) {
    boundary.split(bytes, |piece| match piece {
        Piece::Text(text) => {
            screen.text(text);
            out.pass(text);
        }
        Piece::Invalid(raw) => {
            screen.print('\u{FFFD}');
            out.pass(raw);
        }
        Piece::Seq { bytes, kind, c0 } => {
            screen.swallow = false;
            if kind == Kind::Csi && !c0 && csi_fast::try_dispatch(screen, bytes) {
                // Decoded without vte (SGR, CUP, EL).
            } else if kind == Kind::Csi && queries::is_xtversion(bytes) {
                screen.reply(&queries::xtversion());
            } else if !c0 && dec::dispatch(screen, bytes, kind) {
                // A DEC or xterm sequence vte does not decode.
            } else if let Some(n) = (kind == Kind::Csi)
                .then(|| queries::parse_rep(bytes))
                .flatten()
            {
                // REP is done here, not by vte: vte's "preceding char"
                // is private and would not survive serialization.
                for &b in bytes.iter().filter(|&&b| is_exec_c0(b)) {
                    screen.execute(b);
                }
                screen.repeat(n);
            } else {
                PROCESSOR.with_borrow_mut(|processor| processor.advance(screen, bytes));
            }
            if kind == Kind::Osc {
                osc_extra(screen, bytes);
            }
            if !screen.swallow {
                out.pass(bytes);
            } else {
                out.flush();
                if c0 {
                    out.out
                        .extend(bytes.iter().copied().filter(|&b| is_exec_c0(b)));
                }
            }
            screen.swallow = false;
        }
    });
}

/// Builds `forward` with as few copies as possible: pieces that are
/// consecutive slices of the input are copied as one range when a piece
/// breaks the run (a swallowed query, bytes from the held-back tail) or at
/// the end of `feed`.
struct Forward<'a> {
    input: &'a [u8],
    out: &'a mut Vec<u8>,
    /// Uncopied range `input[start..end]`.
    start: usize,
    end: usize,
}

impl Forward<'_> {
    fn pass(&mut self, piece: &[u8]) {
        let base = self.input.as_ptr() as usize;
        let at = (piece.as_ptr() as usize).wrapping_sub(base);
        if at == self.end && at + piece.len() <= self.input.len() {
            self.end += piece.len();
            return;
        }
        self.flush();
        if at < self.input.len() && at + piece.len() <= self.input.len() {
            self.start = at;
            self.end = at + piece.len();
        } else {
            self.out.extend_from_slice(piece);
        }
    }

    fn flush(&mut self) {
        if let Some(range) = self.input.get(self.start..self.end) {
            self.out.extend_from_slice(range);
        }
        self.start = self.end;
    }
}

/// OSC 7 (cwd) and 133 (shell integration), which vte leaves unhandled.
fn osc_extra(screen: &mut Screen, seq: &[u8]) {
    let Some(body) = seq.strip_prefix(b"\x1b]") else {
        return;
    };
    let body = body
        .strip_suffix(b"\x1b\\")
        .or_else(|| body.strip_suffix(b"\x07"))
        .or_else(|| body.strip_suffix(b"\x18"))
        .or_else(|| body.strip_suffix(b"\x1a"))
        .unwrap_or(body);
    // vte drops C0 controls inside an OSC; so must this second reading.
    let cleaned: Vec<u8>;
    let body = if body.iter().any(|&b| b < 0x20) {
        cleaned = body.iter().copied().filter(|&b| b >= 0x20).collect();
        &cleaned[..]
    } else {
        body
    };
    if let Some(url) = body.strip_prefix(b"7;") {
        let path = cwd_from_url(url);
        screen.cwd = Some(path.clone());
        screen.push_event(TermEvent::Cwd(path));
    } else if let Some(rest) = body.strip_prefix(b"133;") {
        let mut parts = rest.split(|&b| b == b';');
        match parts.next() {
            Some(b"A") => screen.push_event(TermEvent::Prompt),
            Some(b"C") => screen.push_event(TermEvent::CommandStart),
            Some(b"D") => {
                let exit = parts
                    .next()
                    .and_then(|p| std::str::from_utf8(p).ok()?.parse().ok());
                screen.push_event(TermEvent::CommandFinished { exit });
            }
            _ => {}
        }
    }
}

/// `file://host/path%20x` -> `/path x`; anything else is kept as text.
fn cwd_from_url(url: &[u8]) -> String {
    let path = match url.strip_prefix(b"file://") {
        Some(rest) => match rest.iter().position(|&b| b == b'/') {
            Some(i) => &rest[i..],
            None => &b"/"[..],
        },
        None => url,
    };
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%' && i + 2 < path.len() {
            let hex = std::str::from_utf8(&path[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(path[i]);
        i += 1;
    }
    let mut s = String::from_utf8_lossy(&out).into_owned();
    if let Some((cut, _)) = s.char_indices().nth(screen::MAX_TITLE) {
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests;
