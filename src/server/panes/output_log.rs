//! A pane's recent output as plain text, for text waits that must match only
//! what a program printed after a given moment (the screen cannot say when
//! a line was written, so "PASS" already shown, or the echo of the command
//! that will print it, would satisfy a screen search at once).
//!
//! Every byte read from the PTY is counted (`output_bytes`, the number a
//! `pane.input` ack and pane info report) and run through a small escape
//! stripper: printable text and line feeds are kept, escape sequences
//! (CSI, OSC, DCS and the other strings, two- and three-byte escapes) and
//! other controls are dropped, a backspace removes the character before it
//! on the line, and carriage returns are dropped (CR LF is one line break).
//! The last [`KEEP_TEXT`] bytes of text are kept, and where in it each
//! command-start mark (OSC 133;C, shell integration) came: the output of
//! the command typed last begins there, after the shell's echo of it
//! however often that was redrawn.
//!
//! Output offsets are turned into text positions through checkpoints, taken
//! whenever an offset is handed out ([`OutputLog::checkpoint`]): an offset
//! is always at a read boundary then, so it maps exactly. An offset between
//! checkpoints maps to the one before it (a little more text, never less).

use std::collections::VecDeque;

/// Text kept for waits that start from an earlier offset.
pub const KEEP_TEXT: usize = 64 * 1024;
/// Checkpoints kept; older offsets map to the oldest one.
const KEEP_CHECKPOINTS: usize = 1024;
/// Command-start marks kept.
const KEEP_MARKS: usize = 256;
/// How much of an OSC payload is looked at (enough for `133;C`).
const OSC_PREFIX: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Strip {
    #[default]
    Text,
    /// After ESC.
    Esc,
    /// After ESC and an intermediate (`(`, `#`, ...): one more byte.
    EscIntermediate,
    /// In a CSI sequence, until its final byte.
    Csi,
    /// In an OSC, DCS, SOS, PM or APC string, until BEL or ST.
    Str,
    /// In a string, after ESC (an ST if `\` follows).
    StrEsc,
}

/// Equal when everything read so far left the same state (the fuzz target
/// `term_feed` and the tests compare the log fed through the model with
/// the log fed itself).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OutputLog {
    /// Bytes read from the PTY since the pane was created (or, after a live
    /// upgrade, since the first generation created it).
    total: u64,
    /// The kept text; `text[0]` is text position `base`.
    text: Vec<u8>,
    base: u64,
    state: Strip,
    /// (output offset, text position), ascending.
    checkpoints: VecDeque<(u64, u64)>,
    /// Text positions of command-start marks, ascending.
    command_starts: VecDeque<u64>,
    /// The kind of the last OSC 133 mark (`A`, `B`, `C`, `D`).
    last_mark: Option<u8>,
    /// The string being skipped is an OSC; its first bytes.
    in_osc: bool,
    osc: [u8; OSC_PREFIX],
    osc_len: usize,
}

impl OutputLog {
    /// A log that continues counting from `total` (a live upgrade's import),
    /// with no text before it.
    pub fn resume(total: u64) -> OutputLog {
        OutputLog {
            total,
            ..OutputLog::default()
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The text position after everything kept.
    pub fn end(&self) -> u64 {
        self.base + self.text.len() as u64
    }

    /// Reads bytes the PTY gave: counted, stripped, text trimmed. The
    /// server feeds the log through the terminal model instead
    /// (`Terminal::feed_logged`, then `fed`), which the tests check gives
    /// the same result as this.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.strip_bytes(bytes);
        self.fed(bytes.len());
    }

    /// Ends a read of `n` bytes given to the log by `Terminal::feed_logged`:
    /// they are counted and the text is trimmed to what is kept.
    pub fn fed(&mut self, n: usize) {
        self.total += n as u64;
        if self.text.len() > KEEP_TEXT {
            // Drop in halves, so trimming costs O(1) per byte kept.
            let drop = self.text.len() - KEEP_TEXT / 2;
            self.text.drain(..drop);
            self.base += drop as u64;
        }
    }

    /// The escape stripper's rules (the module's doc) over `bytes`.
    fn strip_bytes(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            if self.state == Strip::Text {
                i = self.feed_text(bytes, i);
                if i == bytes.len() {
                    break;
                }
            }
            // Runs of printable text (the bulk of output) in one copy.
            if self.state == Strip::Text {
                let run = bytes[i..]
                    .iter()
                    .position(|&b| b < 0x20 || b == 0x7f)
                    .unwrap_or(bytes.len() - i);
                if run > 0 {
                    self.text.extend_from_slice(&bytes[i..i + run]);
                    i += run;
                    continue;
                }
            }
            // The parameters of a CSI sequence (the bulk of coloured
            // output's controls) skipped in one scan, to its final byte.
            if self.state == Strip::Csi {
                let run = bytes[i..]
                    .iter()
                    .position(|&b| (0x40..=0x7e).contains(&b) || b == 0x1b)
                    .unwrap_or(bytes.len() - i);
                i += run;
                if run > 0 {
                    continue;
                }
            }
            let b = bytes[i];
            i += 1;
            self.state = match self.state {
                Strip::Text => match b {
                    0x1b => Strip::Esc,
                    b'\n' | b'\t' => {
                        self.text.push(b);
                        Strip::Text
                    }
                    0x08 => {
                        self.backspace();
                        Strip::Text
                    }
                    0x00..=0x1f | 0x7f => Strip::Text,
                    _ => {
                        self.text.push(b);
                        Strip::Text
                    }
                },
                Strip::Esc => match b {
                    b'[' => Strip::Csi,
                    b']' | b'P' | b'X' | b'^' | b'_' => {
                        self.in_osc = b == b']';
                        self.osc_len = 0;
                        Strip::Str
                    }
                    b' '..=b'/' => Strip::EscIntermediate,
                    0x1b => Strip::Esc,
                    _ => Strip::Text,
                },
                Strip::EscIntermediate => Strip::Text,
                Strip::Csi => match b {
                    0x40..=0x7e => Strip::Text,
                    0x1b => Strip::Esc,
                    _ => Strip::Csi,
                },
                Strip::Str => match b {
                    0x07 => {
                        self.string_ended();
                        Strip::Text
                    }
                    0x1b => Strip::StrEsc,
                    _ => {
                        if self.osc_len < OSC_PREFIX {
                            self.osc[self.osc_len] = b;
                            self.osc_len += 1;
                        }
                        Strip::Str
                    }
                },
                Strip::StrEsc => match b {
                    b'\\' => {
                        self.string_ended();
                        Strip::Text
                    }
                    0x1b => Strip::StrEsc,
                    _ => Strip::Str,
                },
            };
        }
    }

    /// A backspace in text: removes the character before it on its line.
    fn backspace(&mut self) {
        if self.text.last().is_some_and(|&c| c != b'\n') {
            // A whole UTF-8 character, not one byte of it.
            while let Some(c) = self.text.pop() {
                if c & 0xc0 != 0x80 {
                    break;
                }
            }
        }
    }

    /// The ground-state loop, for the bulk of output: printable runs, line
    /// feeds, the controls dropped without a trace, and whole CSI sequences
    /// inside `bytes` (a coloured line is words between SGRs), each skipped
    /// in one scan instead of a state change per byte. Returns where it
    /// stopped, in `Strip::Text`, at anything the byte-wise machine in
    /// `feed` must take (a backspace, another escape, a CSI cut off by the
    /// end of the read or by an ESC inside it): what that machine does with
    /// these bytes, without its transitions.
    #[inline]
    fn feed_text(&mut self, bytes: &[u8], mut i: usize) -> usize {
        let text = &mut self.text;
        loop {
            let start = i;
            i += text_run(&bytes[i..]);
            text.extend_from_slice(&bytes[start..i]);
            let Some(&b) = bytes.get(i) else {
                return i;
            };
            match b {
                b'\n' | b'\t' => {
                    text.push(b);
                    i += 1;
                }
                0x1b => {
                    if bytes.get(i + 1) != Some(&b'[') {
                        return i;
                    }
                    // The byte-wise machine skips all but a final byte or
                    // an ESC while in a CSI; only a final byte ends here.
                    let rest = bytes.get(i + 2..).unwrap_or_default();
                    let n = csi_run(rest);
                    match rest.get(n) {
                        Some(&c) if c != 0x1b => i += 2 + n + 1,
                        _ => return i,
                    }
                }
                0x08 => return i,
                // Every other C0 control and DEL: dropped.
                _ => i += 1,
            }
        }
    }

    fn string_ended(&mut self) {
        let payload = &self.osc[..self.osc_len];
        if self.in_osc && payload.len() > 4 && payload.starts_with(b"133;") {
            self.last_mark = Some(payload[4]);
        }
        if self.in_osc && (payload == b"133;C" || payload.starts_with(b"133;C;")) {
            if self.command_starts.len() == KEEP_MARKS {
                self.command_starts.pop_front();
            }
            self.command_starts.push_back(self.end());
        }
        self.in_osc = false;
    }

    /// Whether a command is running by the shell's last mark (C, and no
    /// D or A since): input then goes to it, not to the shell.
    pub fn command_running(&self) -> bool {
        self.last_mark == Some(b'C')
    }

    /// The position of the first command-start mark at or after `from`.
    pub fn command_start_from(&self, from: u64) -> Option<u64> {
        self.command_starts.iter().copied().find(|&p| p >= from)
    }

    /// Records that `total()` maps to the current text end and returns it:
    /// the offset to hand out (in an input ack or pane info).
    pub fn checkpoint(&mut self) -> u64 {
        let point = (self.total, self.end());
        if self.checkpoints.back() != Some(&point) {
            if self.checkpoints.len() == KEEP_CHECKPOINTS {
                self.checkpoints.pop_front();
            }
            self.checkpoints.push_back(point);
        }
        self.total
    }

    /// The text position output offset `offset` maps to. `None` if the
    /// offset is beyond the output so far.
    pub fn position_of(&self, offset: u64) -> Option<u64> {
        if offset > self.total {
            return None;
        }
        if offset == self.total {
            return Some(self.end());
        }
        let at = self.checkpoints.partition_point(|&(o, _)| o <= offset);
        let pos = match at {
            0 => self.base,
            n => self.checkpoints[n - 1].1,
        };
        Some(pos.max(self.base))
    }

    /// The kept text from position `from` (clamped to what is kept), with
    /// the position it starts at.
    pub fn text_from(&self, from: u64) -> (u64, &[u8]) {
        let from = from.clamp(self.base, self.end());
        (from, &self.text[(from - self.base) as usize..])
    }
}

/// The model's fast path hands the log the text and controls it decodes
/// (see `TextLog`): what `feed_text` would find in the same bytes.
impl crate::term::TextLog for OutputLog {
    #[inline(always)]
    fn in_text(&self) -> bool {
        self.state == Strip::Text
    }

    #[inline(always)]
    fn text(&mut self, from: &[u8], len: usize) {
        // Runs are a word long in coloured output: a fixed 16-byte copy
        // cut back is a couple of moves, a copy of the exact length a call.
        match from.first_chunk::<16>() {
            Some(word) if len <= 16 => {
                let keep = self.text.len() + len;
                self.text.extend_from_slice(word);
                self.text.truncate(keep);
            }
            _ => self
                .text
                .extend_from_slice(from.get(..len).unwrap_or_default()),
        }
    }

    #[inline(always)]
    fn control(&mut self, b: u8) {
        match b {
            b'\n' | b'\t' => self.text.push(b),
            0x08 => self.backspace(),
            _ => {}
        }
    }

    fn strip(&mut self, bytes: &[u8]) {
        self.strip_bytes(bytes);
    }
}

/// Bytes 0x01 and 0x80 in every lane of a word, and 0x7f: the constants
/// of the eight-bytes-at-a-time scans below.
const LANES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = LANES * 0x80;
const LOW7: u64 = LANES * 0x7f;

/// The high bit of each lane of `x` that is zero. Exact in every lane (no
/// carry crosses lanes), unlike the shorter borrow trick.
#[inline(always)]
fn zero_lanes(x: u64) -> u64 {
    !(((x & LOW7) + LOW7) | x) & HIGH
}

/// The index of the first byte of `bytes` that `stops`, eight bytes a
/// step: `word` gives the high bit of each lane of a little-endian word
/// that stops (exactly: it must agree with `byte` in every lane), `byte`
/// decides the tail shorter than a word. `bytes.len()` if none does.
#[inline(always)]
fn first_stop(bytes: &[u8], word: impl Fn(u64) -> u64, byte: impl Fn(u8) -> bool) -> usize {
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..).and_then(|b| b.first_chunk::<8>()) {
        let stop = word(u64::from_le_bytes(*chunk));
        if stop != 0 {
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let tail = &bytes[i..];
    i + tail.iter().position(|&b| byte(b)).unwrap_or(tail.len())
}

/// The length of the printable run at the start of `bytes`: up to the
/// first C0 control or DEL. This and `csi_run` are most of the time a
/// coloured flood spends here.
#[inline]
fn text_run(bytes: &[u8]) -> usize {
    first_stop(
        bytes,
        |x| {
            // A lane below 0x20 (high bit clear, and no carry to it from +0x60).
            let control = !(((x & LOW7) + LANES * 0x60) | x) & HIGH;
            control | zero_lanes(x ^ LOW7)
        },
        |b| b < 0x20 || b == 0x7f,
    )
}

/// The length of a CSI's body at the start of `bytes`: up to the first
/// final byte (0x40..=0x7e) or ESC; everything else (parameters,
/// intermediates, even controls) is skipped inside a CSI.
#[inline]
fn csi_run(bytes: &[u8]) -> usize {
    first_stop(
        bytes,
        |x| {
            // A lane at 0x40 or above with its high bit clear, but not DEL.
            let letter = ((x & LOW7) + LANES * 0x40) & !x & HIGH & !zero_lanes(x ^ LOW7);
            letter | zero_lanes(x ^ (LANES * 0x1b))
        },
        |c| (0x40..=0x7e).contains(&c) || c == 0x1b,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(bytes: &[u8]) -> String {
        let mut log = OutputLog::default();
        log.feed(bytes);
        String::from_utf8_lossy(log.text_from(0).1).into_owned()
    }

    #[test]
    fn escapes_and_controls_are_stripped() {
        assert_eq!(
            plain(b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07x\x1b]133;A\x1b\\y\r\n"),
            "red xy\n"
        );
        assert_eq!(plain(b"a\x1b(Bb\x1b=c\x1bPq#0\x1b\\d"), "abcd");
        // zsh redraws the first typed character: f, BS, false.
        assert_eq!(plain(b"f\x08false\r\r\n"), "false\n");
        assert_eq!(plain("é\x08e".as_bytes()), "e");
    }

    /// The ground-state loop (`feed_text`) skips a CSI whole only when it
    /// ends inside the read; fed a byte at a time, everything goes through
    /// the byte-wise machine. Both must keep the same text, marks and
    /// state for any input, here random bytes from an alphabet heavy in
    /// escapes, controls and parameter bytes.
    #[test]
    fn whole_reads_and_single_bytes_strip_alike() {
        const ALPHABET: &[u8] =
            b"\x1b\x1b\x1b[[[]]PX_^\\\x07\x08\n\r\t\x00\x7f;:0123458mHK(#?>~ \x40azAZ\xc3\xa9";
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..2000 {
            let len = (next() % 64) as usize;
            let mut input: Vec<u8> = (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect();
            if next() % 4 == 0 {
                input.extend_from_slice(b"\x1b]133;C\x07");
            }
            let mut whole = OutputLog::default();
            whole.feed(&input);
            let mut bytewise = OutputLog::default();
            for b in &input {
                bytewise.feed(std::slice::from_ref(b));
            }
            let ctx = String::from_utf8_lossy(&input).into_owned();
            assert_eq!(whole.text_from(0), bytewise.text_from(0), "{ctx:?}");
            assert_eq!(whole.state, bytewise.state, "{ctx:?}");
            assert_eq!(whole.command_starts, bytewise.command_starts, "{ctx:?}");
            assert_eq!(whole.last_mark, bytewise.last_mark, "{ctx:?}");
        }
    }

    /// `input` through the terminal model and on into a log
    /// (`Terminal::feed_logged`), cut into reads at `cuts`, against the
    /// log's own reading of it whole (`feed`): the same text, marks, state
    /// and count; and the model the same as when fed without a log.
    fn check_fold(input: &[u8], cuts: &[usize]) {
        use crate::term::{TermConfig, Terminal};
        let mut reference = OutputLog::default();
        reference.feed(input);
        let mut folded = OutputLog::default();
        // Narrow and wide: a row's end cuts the fast path's text runs.
        let cols = if input.len() % 2 == 0 { 12 } else { 70 };
        let mut term = Terminal::new(cols, 4, TermConfig::default());
        let mut plain_term = Terminal::new(cols, 4, TermConfig::default());
        let (mut fwd, mut plain_fwd) = (Vec::new(), Vec::new());
        let mut at = 0;
        for &cut in cuts.iter().chain([&input.len()]) {
            let cut = cut.clamp(at, input.len());
            term.feed_logged(&input[at..cut], &mut fwd, &mut folded);
            folded.fed(cut - at);
            plain_term.feed(&input[at..cut], &mut plain_fwd);
            at = cut;
        }
        let ctx = format!("{:?} cut at {cuts:?}", String::from_utf8_lossy(input));
        assert_eq!(folded.text_from(0), reference.text_from(0), "{ctx}");
        assert_eq!(folded.state, reference.state, "{ctx}");
        assert_eq!(folded.command_starts, reference.command_starts, "{ctx}");
        assert_eq!(folded.last_mark, reference.last_mark, "{ctx}");
        assert_eq!(folded.total(), reference.total(), "{ctx}");
        assert_eq!(folded, reference, "{ctx}");
        assert!(term == plain_term, "{ctx}");
        assert_eq!(fwd, plain_fwd, "{ctx}");
    }

    /// The log fed through the model's fast path keeps what it keeps when
    /// it reads everything itself, for random input (an alphabet heavy in
    /// SGRs, controls, backspaces, strings, and the escapes on which the
    /// log's rules and the model's differ) cut into random reads.
    #[test]
    fn folded_into_the_model_strips_alike() {
        const PIECES: &[&[u8]] = &[
            b"\x1b[1;31m",
            b"\x1b[0m",
            b"\x1b[m",
            b"\x1b[38;2;1;2;3m",
            b"\x1b[4:3m",
            b"\x1b[2;5H",
            b"\x1b[K",
            b"\x1b[?25l",
            b"\x1b[3",
            b"\x1b]133;C\x07",
            b"\x1b]0;t\x1bx",
            b"\x1b]7;file://h/x\x1b\\",
            b"\x1bP1$q\x1b\\",
            b"\x1b(0",
            b"\x1b",
            b"[",
            b"m",
            b";",
            b"\x07",
            b"\x08",
            b"\x08\x08",
            b"\n",
            b"\r\n",
            b"\t",
            b"\x18",
            b"\x1a",
            b"\x00",
            b"\x7f",
            b"ab",
            b"word ",
            b"x",
            b"\xc3\xa9",
            b"\xe2\x94",
            b"\x80",
            b"\x1b[58;5;1m",
            b"\x1b[2b",
            b"\x1b]8;;u\x07",
            b"a longer run of text than sixteen bytes",
            b"0123456789abcdef",
            b"0123456789abcde",
            b"0123456789abcdefg",
        ];
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1du64);
        for _ in 0..3000 {
            let mut input = Vec::new();
            for _ in 0..next() % 24 {
                input.extend_from_slice(PIECES[(next() % PIECES.len() as u64) as usize]);
            }
            let cuts: Vec<usize> = (0..next() % 4)
                .map(|_| (next() % (input.len() as u64 + 1)) as usize)
                .collect();
            let mut cuts = cuts;
            cuts.sort_unstable();
            check_fold(&input, &cuts);
        }
    }

    /// Every byte value in every position of coloured text (words between
    /// SGRs, a line feed, a backspace), fed whole and a byte at a time.
    #[test]
    fn folded_every_byte_everywhere() {
        let template: &[u8] = b"ab\x1b[1;38;5;9mcd\x1b[0m e\x08f\r\n\x1b[4;41mgh\x1b[m";
        let each: Vec<usize> = (1..template.len() + 1).collect();
        for pos in 0..template.len() {
            for b in 0..=255u8 {
                let mut input = template.to_vec();
                input[pos] = b;
                check_fold(&input, &[]);
                check_fold(&input, &each);
            }
        }
    }

    /// The word-at-a-time scans find what a byte-at-a-time one does, for
    /// every byte value in every lane.
    #[test]
    fn run_scans_match_the_bytewise_rules() {
        let text = |b: u8| b < 0x20 || b == 0x7f;
        let csi = |c: u8| (0x40..=0x7e).contains(&c) || c == 0x1b;
        for lane in 0..9 {
            for stop in 0..=255u8 {
                for fill in [b'a', b'0', b';', 0x80, 0xff, 0x20, 0x3f] {
                    let mut bytes = vec![fill; 8 + lane + 3];
                    bytes[lane] = stop;
                    // A later stop must not hide an earlier one.
                    bytes[lane + 1] = 0x1b;
                    let want = |f: &dyn Fn(u8) -> bool| {
                        bytes.iter().position(|&b| f(b)).unwrap_or(bytes.len())
                    };
                    assert_eq!(text_run(&bytes), want(&text), "{bytes:02x?}");
                    assert_eq!(csi_run(&bytes), want(&csi), "{bytes:02x?}");
                }
            }
        }
    }

    #[test]
    fn a_sequence_split_across_reads_is_still_stripped() {
        let mut log = OutputLog::default();
        let reads: [&[u8]; 3] = [b"one\x1b[3", b"8;5;1mtwo\x1b]7;file:", b"//h/tmp\x07three"];
        for read in reads {
            log.feed(read);
        }
        assert_eq!(log.text_from(0).1, b"onetwothree");
        assert_eq!(
            log.total(),
            reads.iter().map(|r| r.len() as u64).sum::<u64>()
        );
    }

    #[test]
    fn command_start_marks_are_located() {
        let mut log = OutputLog::default();
        log.feed(b"$ echo PASS\r\n\x1b]133;C\x07");
        log.feed(b"PASS\r\n\x1b]133;D;0\x1b\\\x1b]133;C;x\x07");
        let first = log.command_start_from(0).unwrap();
        assert_eq!(log.text_from(first).1, b"PASS\n");
        assert_eq!(log.command_start_from(first + 1), Some(log.end()));
        assert_eq!(log.command_start_from(log.end() + 1), None);
    }

    #[test]
    fn offsets_map_to_text_through_checkpoints() {
        let mut log = OutputLog::default();
        log.feed(b"before\n");
        let at = log.checkpoint();
        log.feed(b"\x1b[1mafter\n");
        let pos = log.position_of(at).unwrap();
        assert_eq!(log.text_from(pos).1, b"after\n");
        // Between checkpoints: the earlier one (more text, never less).
        assert_eq!(log.position_of(at + 2), Some(pos));
        assert_eq!(log.position_of(log.total()), Some(log.end()));
        assert_eq!(log.position_of(log.total() + 1), None);
    }

    #[test]
    fn text_is_bounded() {
        let mut log = OutputLog::default();
        let at = log.checkpoint();
        for _ in 0..100 {
            log.feed(&[b'x'; 4096]);
        }
        assert!(log.text_from(0).1.len() <= KEEP_TEXT);
        // A trimmed offset maps to the oldest text kept.
        let pos = log.position_of(at).unwrap();
        assert_eq!(pos, log.text_from(0).0);
        let mut resumed = OutputLog::resume(log.total());
        resumed.feed(b"new");
        assert_eq!(resumed.position_of(log.total()), Some(0));
    }
}
