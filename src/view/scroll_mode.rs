//! Scroll mode over one pane's text, without any I/O: where the view and
//! the cursor are in the pane's numbered lines (history, then the screen
//! as it was when the mode opened), the keys that move them, search
//! (`?` `/` `n` `N`), a selection (`v` by lines, or a mouse drag by
//! characters) and the text it copies, and the OSC 52 sequence that puts
//! that text on a terminal's clipboard.
//!
//! Two places run it: the tab view draws it inside the pane's rectangle in
//! the server, from the pane's terminal model, and `--pane-only`'s client
//! draws it over its whole terminal from lines it fetches (`pane.history`).
//! Each reads lines through [`Lines`]; numbers are those of
//! `Terminal::history_lines`, so output arriving meanwhile does not move
//! what is shown.

/// Most text one copy puts on the clipboard (terminals cap OSC 52 too).
pub const MAX_COPY: usize = 256 << 10;
/// Lines a search line by line looks at before it gives up (`n` goes on
/// from there): a client that fetches lines over the socket.
pub const MAX_SEARCH: u64 = 200_000;

/// Where a scroll mode reads a pane's lines.
pub trait Lines {
    type Error;
    /// Line `n`'s text without styles, and whether autowrap continued it
    /// on the next line; `None` when no line has that number (any more).
    fn plain(&mut self, n: u64) -> Result<Option<(String, bool)>, Self::Error>;

    /// The nearest line after `from` (towards older lines with `back`,
    /// `from` itself left out) within `start..end` that `needle` matches.
    /// This default reads line by line and gives up after [`MAX_SEARCH`]
    /// lines (a client fetching lines over the socket); a reader holding
    /// the lines searches them all.
    fn find_line(
        &mut self,
        needle: &Needle,
        from: u64,
        back: bool,
        (start, end): (u64, u64),
    ) -> Result<Option<u64>, Self::Error> {
        let mut scratch = String::new();
        let mut n = from;
        for _ in 0..MAX_SEARCH {
            n = match back {
                true if n > start => n - 1,
                false if n + 1 < end => n + 1,
                _ => return Ok(None),
            };
            if let Some((plain, _)) = self.plain(n)?
                && needle.matches(&plain, &mut scratch)
            {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }
}

/// What a search looks for: the text, matched case-insensitively unless it
/// holds an upper-case letter (as less and vim's smartcase do).
pub struct Needle {
    text: String,
    fold: bool,
}

impl Needle {
    pub fn new(text: &str) -> Needle {
        let fold = !text.chars().any(char::is_uppercase);
        Needle {
            text: if fold {
                text.to_lowercase()
            } else {
                text.to_string()
            },
            fold,
        }
    }

    /// Whether `line` holds the text. `scratch` is reused between lines, so
    /// a search through a long history folds case without allocating.
    pub fn matches(&self, line: &str, scratch: &mut String) -> bool {
        if !self.fold {
            return line.contains(&self.text);
        }
        if line.is_ascii() {
            scratch.clear();
            scratch.push_str(line);
            scratch.make_ascii_lowercase();
            scratch.contains(&self.text)
        } else {
            line.to_lowercase().contains(&self.text)
        }
    }
}

/// A cell of the pane's text: its line number and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Point {
    pub line: u64,
    pub col: u16,
}

/// What is selected: from `anchor` to `head`, both included; whole lines
/// when `lines` (`v`), else the characters between (a mouse drag, as
/// tmux and zellij select).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    pub anchor: Point,
    pub head: Point,
    pub lines: bool,
}

impl Selection {
    fn ordered(&self) -> (Point, Point) {
        if self.anchor <= self.head {
            (self.anchor, self.head)
        } else {
            (self.head, self.anchor)
        }
    }

    /// Whether the cell at `line`, `col` is selected.
    pub fn contains(&self, line: u64, col: u16) -> bool {
        let (from, to) = self.ordered();
        if self.lines {
            return (from.line..=to.line).contains(&line);
        }
        let p = Point { line, col };
        from <= p && p <= to
    }

    /// The selected text: lines continued by autowrap joined, the others
    /// ended by a newline; at most [`MAX_COPY`] bytes.
    pub fn text<L: Lines>(&self, lines: &mut L) -> Result<String, L::Error> {
        let (from, to) = self.ordered();
        let mut text = String::new();
        for n in from.line..=to.line {
            let Some((plain, wrapped)) = lines.plain(n)? else {
                continue;
            };
            let lo = if self.lines || n != from.line {
                0
            } else {
                from.col
            };
            let hi = if self.lines || n != to.line {
                u16::MAX
            } else {
                to.col
            };
            text.push_str(columns(&plain, lo, hi).trim_end_matches(' '));
            if n != to.line && !wrapped {
                text.push('\n');
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

/// The characters of `text` that start in columns `lo..=hi` (a wide
/// character takes two).
fn columns(text: &str, lo: u16, hi: u16) -> &str {
    let (mut col, mut start, mut end) = (0u32, None, text.len());
    for (i, c) in text.char_indices() {
        if col > u32::from(hi) {
            end = i;
            break;
        }
        if start.is_none() && col >= u32::from(lo) {
            start = Some(i);
        }
        col += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) as u32;
    }
    match start {
        Some(s) => &text[s..end],
        None => "",
    }
}

/// A key in scroll mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
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
    /// A sequence scroll mode has no use for, skipped whole.
    Other,
}

/// The key at the start of `bytes` and how many bytes it takes (a lone
/// ESC is Escape); `None` for an empty slice.
pub fn key_at(bytes: &[u8]) -> Option<(Key, usize)> {
    let &first = bytes.first()?;
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
    if let Some((seq, key)) = seqs.iter().find(|(seq, _)| bytes.starts_with(seq)) {
        return Some((key.clone(), seq.len()));
    }
    Some(match first {
        0x1b if bytes.len() > 1 && (bytes[1] == b'[' || bytes[1] == b'O') => {
            let end = bytes[2..]
                .iter()
                .position(|b| (0x40..0x7f).contains(b))
                .map_or(bytes.len(), |p| p + 3);
            (Key::Other, end)
        }
        0x1b => (Key::Escape, 1),
        b'\r' | b'\n' => (Key::Enter, 1),
        0x7f | 0x08 => (Key::Backspace, 1),
        b if b < 0x20 => (Key::Ctrl(b + 0x40), 1),
        _ => {
            let len = match first {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => 1,
            }
            .min(bytes.len());
            let c = std::str::from_utf8(&bytes[..len])
                .ok()
                .and_then(|s| s.chars().next());
            match c {
                Some(c) => (Key::Char(c), len),
                None => (Key::Other, 1),
            }
        }
    })
}

/// Splits a read from the terminal into keys.
pub fn keys(bytes: &[u8]) -> Vec<Key> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some((key, used)) = key_at(&bytes[i..]) {
        if key != Key::Other {
            out.push(key);
        }
        i += used;
    }
    out
}

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Still in scroll mode (drawn again).
    Stay,
    /// The user left it.
    Leave,
    /// The user copied this text (OSC 52) and left.
    Copy(String),
}

/// One scroll mode's position, search and selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scroll {
    /// The range of lines it shows: `start..end`.
    pub start: u64,
    pub end: u64,
    /// The line on the top row, and the cursor's line.
    pub top: u64,
    pub cursor: u64,
    /// Rows the lines are shown in.
    pub rows: usize,
    pub selection: Option<Selection>,
    /// The last search: text and direction (towards older lines).
    pub search: Option<(String, bool)>,
    /// A search being typed.
    pub prompt: Option<(String, bool)>,
    /// What the last key found ("not found: x"), shown until the next.
    pub status: String,
}

impl Scroll {
    /// Over lines `start..end` shown in `rows` rows, at the bottom.
    pub fn new(start: u64, end: u64, rows: usize) -> Scroll {
        let mut s = Scroll {
            start,
            end: end.max(start + 1),
            top: start,
            cursor: start,
            rows: rows.max(1),
            selection: None,
            search: None,
            prompt: None,
            status: String::new(),
        };
        s.top = s.last_top();
        s.go(s.end as i64 - 1);
        s
    }

    /// Over lines `start..end` as a mode elsewhere left them (another
    /// server's, carried over): `top` on the top row and the cursor on
    /// `cursor`, each kept inside the lines; `set_rows` gives it its rows
    /// before it is shown.
    pub fn resume(start: u64, end: u64, top: u64, cursor: u64) -> Scroll {
        // Line numbers are moved as `i64` (`go`, `scroll_by`): values from
        // elsewhere stay well inside that.
        let most = (i64::MAX >> 1) as u64;
        let start = start.min(most);
        let end = end.clamp(start + 1, most + 1);
        Scroll {
            start,
            end,
            top: top.clamp(start, end - 1),
            cursor: cursor.clamp(start, end - 1),
            rows: 1,
            selection: None,
            search: None,
            prompt: None,
            status: String::new(),
        }
    }

    /// The top line when the view is at the bottom.
    pub fn last_top(&self) -> u64 {
        self.end.saturating_sub(self.rows as u64).max(self.start)
    }

    pub fn at_bottom(&self) -> bool {
        self.top >= self.last_top()
    }

    /// Shown in `rows` rows from now on (the pane or the terminal was
    /// resized).
    pub fn set_rows(&mut self, rows: usize) {
        self.rows = rows.max(1);
        let cursor = self.cursor as i64;
        self.go(cursor);
    }

    /// Lines before `start` are gone (the history dropped its oldest).
    pub fn forget_before(&mut self, start: u64) {
        if start > self.start {
            self.start = start.min(self.end - 1);
            let cursor = self.cursor as i64;
            self.go(cursor);
        }
    }

    /// Lines from `end` on are not there (a pane carried over came back
    /// with fewer than the mode was told of).
    pub fn forget_after(&mut self, end: u64) {
        if end < self.end {
            self.end = end.max(self.start + 1);
            let cursor = self.cursor as i64;
            self.go(cursor);
        }
    }

    /// Moves the cursor to `n` (clamped) and the view so it shows it.
    pub fn go(&mut self, n: i64) {
        let n = n.clamp(self.start as i64, self.end.saturating_sub(1) as i64) as u64;
        self.cursor = n;
        let rows = self.rows as u64;
        if n < self.top {
            self.top = n;
        } else if n >= self.top + rows {
            self.top = n + 1 - rows;
        }
        self.top = self.top.min(self.last_top()).max(self.start);
        if let Some(sel) = self.selection.as_mut().filter(|s| s.lines) {
            sel.head.line = n;
        }
    }

    /// Moves the view by `delta` lines, the cursor with it.
    pub fn scroll_by(&mut self, delta: i64) {
        let top = (self.top as i64 + delta).clamp(self.start as i64, self.last_top() as i64) as u64;
        let moved = top as i64 - self.top as i64;
        self.top = top;
        self.go(self.cursor as i64 + if moved == 0 { delta } else { moved });
    }

    /// "12/240": the cursor's line among those shown.
    pub fn position(&self) -> String {
        format!("{}/{}", self.cursor + 1 - self.start, self.end - self.start)
    }

    /// What the mode has to say: the search being typed, else what the
    /// last key found; empty for nothing.
    pub fn message(&self) -> String {
        match &self.prompt {
            Some((text, back)) => format!("{}{text}", if *back { '?' } else { '/' }),
            None => self.status.clone(),
        }
    }

    /// Whether the cell at `line`, `col` is drawn highlighted: the
    /// selection's, or without one the cursor's line.
    pub fn highlighted(&self, line: u64, col: u16) -> bool {
        match &self.selection {
            Some(s) => s.contains(line, col),
            None => line == self.cursor,
        }
    }

    /// Searches from the cursor (exclusive) towards older lines (`back`)
    /// or newer ones; moves there if found.
    pub fn find<L: Lines>(
        &mut self,
        text: &str,
        back: bool,
        lines: &mut L,
    ) -> Result<bool, L::Error> {
        let needle = Needle::new(text);
        let Some(n) = lines.find_line(&needle, self.cursor, back, (self.start, self.end))? else {
            return Ok(false);
        };
        self.go(n as i64);
        // The hit in the middle of the view when it can be.
        let half = (self.rows / 2) as u64;
        self.top = n.saturating_sub(half).clamp(self.start, self.last_top());
        Ok(true)
    }

    fn search_status<L: Lines>(
        &mut self,
        text: &str,
        back: bool,
        lines: &mut L,
    ) -> Result<String, L::Error> {
        if text.is_empty() {
            return Ok(String::new());
        }
        Ok(if self.find(text, back, lines)? {
            format!("found: {text}")
        } else {
            format!("not found: {text}")
        })
    }

    /// The text `y` copies: the selection, else the cursor's line.
    pub fn copied<L: Lines>(&self, lines: &mut L) -> Result<String, L::Error> {
        let cursor = Point {
            line: self.cursor,
            col: 0,
        };
        self.selection
            .unwrap_or(Selection {
                anchor: cursor,
                head: cursor,
                lines: true,
            })
            .text(lines)
    }

    /// Handles one key.
    pub fn key<L: Lines>(&mut self, key: Key, lines: &mut L) -> Result<Step, L::Error> {
        if let Some((text, back)) = &mut self.prompt {
            match key {
                Key::Enter => {
                    let (text, back) = (text.clone(), *back);
                    self.prompt = None;
                    self.status = self.search_status(&text, back, lines)?;
                    self.search = Some((text, back));
                }
                Key::Escape | Key::Ctrl(b'C') | Key::Ctrl(b'G') => {
                    self.prompt = None;
                    self.status.clear();
                }
                Key::Backspace => {
                    text.pop();
                }
                Key::Char(c) if text.chars().count() < 200 => text.push(c),
                _ => {}
            }
            return Ok(Step::Stay);
        }
        self.status.clear();
        let page = self.rows as i64;
        let cursor = self.cursor as i64;
        match key {
            Key::Char('q') | Key::Escape | Key::Ctrl(b'C') => return Ok(Step::Leave),
            Key::Up | Key::Char('k') | Key::Ctrl(b'P') => self.go(cursor - 1),
            Key::Down | Key::Char('j') | Key::Ctrl(b'N') => self.go(cursor + 1),
            Key::PageUp | Key::Char('b') | Key::Ctrl(b'B') => self.scroll_by(-page),
            Key::PageDown | Key::Char('f') | Key::Char(' ') | Key::Ctrl(b'F') => {
                self.scroll_by(page)
            }
            Key::Ctrl(b'U') => self.scroll_by(-page / 2),
            Key::Ctrl(b'D') => self.scroll_by(page / 2),
            Key::Home | Key::Char('g') => self.go(self.start as i64),
            Key::End | Key::Char('G') => self.go(self.end as i64),
            Key::Char('?') => self.prompt = Some((String::new(), true)),
            Key::Char('/') => self.prompt = Some((String::new(), false)),
            Key::Char(c @ ('n' | 'N')) => {
                if let Some((text, back)) = self.search.clone() {
                    self.status = self.search_status(&text, back == (c == 'n'), lines)?;
                }
            }
            Key::Char('v') => {
                let at = Point {
                    line: self.cursor,
                    col: 0,
                };
                self.selection = match self.selection {
                    Some(_) => None,
                    None => Some(Selection {
                        anchor: at,
                        head: at,
                        lines: true,
                    }),
                }
            }
            Key::Char('y') | Key::Enter => return Ok(Step::Copy(self.copied(lines)?)),
            _ => {}
        }
        Ok(Step::Stay)
    }
}

/// The OSC 52 sequence that puts `text` on the terminal's clipboard.
pub fn osc52(text: &str) -> Vec<u8> {
    let mut out = b"\x1b]52;c;".to_vec();
    out.extend_from_slice(base64(text.as_bytes()).as_bytes());
    out.extend_from_slice(b"\x07");
    out
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

    /// Lines "line-0" .. as a pane would number them, `wrapped` ones
    /// continued.
    struct Numbered {
        wrapped: Vec<u64>,
    }

    impl Lines for Numbered {
        type Error = ();
        fn plain(&mut self, n: u64) -> Result<Option<(String, bool)>, ()> {
            Ok((n < 1000).then(|| (format!("line-{n}"), self.wrapped.contains(&n))))
        }
    }

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
        assert_eq!(osc52("foo"), b"\x1b]52;c;Zm9v\x07");
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
            keys(b"k\x1b[5~\x1b[Aq\x1b[<0;1;1M\x1b"),
            vec![
                Key::Char('k'),
                Key::PageUp,
                Key::Up,
                Key::Char('q'),
                Key::Escape
            ]
        );
        assert_eq!(key_at("é!".as_bytes()), Some((Key::Char('é'), 2)));
        assert_eq!(key_at(b"\xff"), Some((Key::Other, 1)));
    }

    #[test]
    fn the_view_pages_searches_and_copies() {
        let mut lines = Numbered { wrapped: vec![] };
        let mut s = Scroll::new(0, 200, 10);
        assert_eq!(
            (s.top, s.cursor, s.position()),
            (190, 199, "200/200".into())
        );
        assert!(s.at_bottom());
        s.key(Key::PageUp, &mut lines).unwrap();
        assert_eq!((s.top, s.cursor), (180, 189));
        for k in "?line-42\r".chars() {
            let key = if k == '\r' { Key::Enter } else { Key::Char(k) };
            assert_eq!(s.key(key, &mut lines), Ok(Step::Stay));
        }
        assert_eq!((s.cursor, s.status.as_str()), (42, "found: line-42"));
        assert!(s.top <= 42 && 42 < s.top + 10);
        s.key(Key::Char('v'), &mut lines).unwrap();
        s.key(Key::Down, &mut lines).unwrap();
        assert!(s.highlighted(43, 5) && !s.highlighted(44, 0));
        assert_eq!(
            s.key(Key::Char('y'), &mut lines),
            Ok(Step::Copy("line-42\nline-43".into()))
        );
        // Older lines went from the history meanwhile.
        s.forget_before(100);
        assert_eq!(s.cursor, 100);
        assert_eq!(s.key(Key::Char('q'), &mut lines), Ok(Step::Leave));
    }

    #[test]
    fn a_resumed_mode_keeps_its_place_and_any_numbers_stay_inside_its_lines() {
        let mut s = Scroll::resume(0, 200, 30, 48);
        s.set_rows(10);
        assert_eq!((s.top, s.cursor, s.position()), (39, 48, "49/200".into()));
        let mut s = Scroll::resume(0, 200, 30, 35);
        s.set_rows(10);
        assert_eq!((s.top, s.cursor), (30, 35));
        // Fewer lines than it was told of.
        s.forget_after(32);
        assert_eq!((s.top, s.cursor, s.end), (22, 31, 32));
        for (start, end, top, cursor) in [
            (u64::MAX, 0, u64::MAX, 0),
            (5, 2, 0, u64::MAX),
            (0, u64::MAX, u64::MAX, u64::MAX),
        ] {
            let mut s = Scroll::resume(start, end, top, cursor);
            s.set_rows(40);
            s.scroll_by(-100);
            s.scroll_by(100);
            s.forget_after(0);
            s.forget_before(u64::MAX);
            assert!(
                s.start <= s.top && s.top <= s.cursor && s.cursor < s.end,
                "{s:?}"
            );
        }
    }

    #[test]
    fn a_character_selection_copies_what_lies_between_and_joins_wrapped_lines() {
        let mut lines = Numbered { wrapped: vec![5] };
        let sel = Selection {
            anchor: Point { line: 6, col: 2 },
            head: Point { line: 4, col: 5 },
            lines: false,
        };
        assert_eq!(sel.text(&mut lines), Ok("4\nline-5lin".into()));
        assert!(sel.contains(5, 900) && sel.contains(4, 5) && !sel.contains(4, 4));
        assert!(!sel.contains(6, 3));
        assert_eq!(columns("a漢b", 1, 2), "漢");
        assert_eq!(columns("a漢b", 3, 9), "b");
    }
}
