//! Sequence-boundary tracker: splits PTY output into ground-state text and
//! complete escape sequences before vte sees any of it.
//!
//! Why: vte's parser state is private and cannot be serialized, its OSC
//! buffer is unbounded, and `Terminal::feed` must know which bytes make up a
//! query in order to drop it from `forward`. So this mirrors vte 0.15's state
//! machine (Paul Williams' DEC parser, 7-bit, UTF-8 in ground) byte for byte,
//! and hands vte only whole units: a text run, or one sequence from its ESC
//! to the byte that returns the parser to ground.
//!
//! Invariants:
//! * Between pieces, vte's parser is in ground state with no partial UTF-8,
//!   so a fresh `Processor` is indistinguishable from the one that produced
//!   the state. The only parser state that survives is `tail` (the bytes of
//!   the unfinished unit, which have had no effect yet) plus `State`; both
//!   are serialized, so a round trip needs no replay.
//! * `tail.len() <= MAX_SEQ`. A unit that grows past it is dropped whole:
//!   its bytes are discarded as they arrive, state tracking continues, and
//!   parsing resumes at its terminator. An endless unterminated sequence
//!   therefore costs no memory.
//! * The output is equivalent for vte to the input, with two normalizations:
//!   a string (OSC/DCS/SOS/PM/APC) ended by an ESC that starts another
//!   sequence is emitted with a completed `ESC \` (so `forward` carries the
//!   same), and a UTF-8 prefix cut off by an invalid byte is marked
//!   `Piece::Invalid` so the caller draws U+FFFD, as vte would have. A sequence aborted by ESC is not emitted, except the C0
//!   controls vte would have executed inside it.

use serde::{Deserialize, Serialize};

use super::screen::is_default;

/// Longest sequence kept: 64 KiB of OSC/DCS/APC payload plus its framing.
pub const MAX_SEQ: usize = 64 * 1024 + 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
enum State {
    #[default]
    Ground,
    Utf8,
    Escape,
    EscInt,
    CsiEntry,
    CsiParam,
    CsiInt,
    CsiIgnore,
    DcsEntry,
    DcsParam,
    DcsInt,
    DcsIgnore,
    DcsPass,
    Osc,
    SosPmApc,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    #[default]
    Esc,
    Csi,
    Osc,
    Dcs,
    /// SOS, PM or APC.
    Str,
}

/// A unit ready for vte.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Ground-state bytes (text and C0 controls).
    Text(&'a [u8]),
    /// A UTF-8 prefix cut short by a byte that cannot continue it. vte would
    /// draw one U+FFFD for it, but fed alone it would wait for more bytes, so
    /// the caller draws U+FFFD and forwards these raw bytes.
    Invalid(&'a [u8]),
    /// One complete sequence. `c0` says C0 controls are embedded in it.
    Seq {
        bytes: &'a [u8],
        kind: Kind,
        c0: bool,
    },
}

/// C0 controls vte executes inside ESC and CSI sequences.
pub fn is_exec_c0(b: u8) -> bool {
    matches!(b, 0x00..=0x17 | 0x19 | 0x1C..=0x1F)
}

/// Fields at their default (the ground state between units, nearly
/// always) are left out of the encoding (handoff version 6 on) and read
/// back as the default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Boundary {
    #[serde(skip_serializing_if = "is_default")]
    state: State,
    #[serde(skip_serializing_if = "is_default")]
    kind: Kind,
    #[serde(skip_serializing_if = "is_default")]
    tail: Vec<u8>,
    /// The unit outgrew `MAX_SEQ`; its bytes are being discarded.
    #[serde(skip_serializing_if = "is_default")]
    dropping: bool,
    /// The unit holds C0 controls that vte executes mid-sequence.
    #[serde(skip_serializing_if = "is_default")]
    c0: bool,
    /// Escape state entered by the ESC that ended a string, which was
    /// already emitted with `ESC \`: a following `\` is the real ST.
    #[serde(skip_serializing_if = "is_default")]
    after_string: bool,
}

enum Step {
    Consumed,
    /// The byte was not used; process it again in the (new) ground state.
    Reprocess,
}

impl Boundary {
    /// Bytes held back because their unit is not complete.
    pub fn pending(&self) -> &[u8] {
        &self.tail
    }

    /// In ground state with nothing held back: the next byte starts a new
    /// unit, so text and whole sequences mean the same to vte as on their own.
    pub fn is_ground(&self) -> bool {
        self.state == State::Ground && self.tail.is_empty()
    }

    /// Caps the held-back bytes after deserialization.
    pub fn repair(&mut self) {
        if self.tail.len() > MAX_SEQ {
            self.tail = Vec::new();
            self.dropping = true;
        }
    }

    pub fn split<F: FnMut(Piece<'_>)>(&mut self, input: &[u8], mut sink: F) {
        let mut i = 0;
        while i < input.len() {
            if self.state == State::Ground {
                let rest = &input[i..];
                let esc = rest.iter().position(|&b| b == 0x1b).unwrap_or(rest.len());
                let run = &rest[..esc];
                let cut = incomplete_utf8_start(run);
                if cut > 0 {
                    sink(Piece::Text(&run[..cut]));
                }
                if cut < run.len() {
                    if esc < rest.len() {
                        sink(Piece::Invalid(&run[cut..]));
                    } else {
                        self.tail.extend_from_slice(&run[cut..]);
                        self.state = State::Utf8;
                    }
                }
                i += esc;
                if esc < rest.len() {
                    // Most sequences arrive whole and plain: hand them over
                    // straight from the input without copying into `tail`.
                    if let Some((len, kind)) = whole_sequence(&input[i..]) {
                        sink(Piece::Seq {
                            bytes: &input[i..i + len],
                            kind,
                            c0: false,
                        });
                        i += len;
                        continue;
                    }
                    self.start_escape();
                    i += 1;
                }
                continue;
            }
            if matches!(self.state, State::Osc | State::DcsPass | State::SosPmApc) {
                // String payloads can be long (images, clipboard): copy up to
                // the next byte that can end the string in one go.
                let rest = &input[i..];
                let n = rest
                    .iter()
                    .position(|&b| self.ends_string(b))
                    .unwrap_or(rest.len());
                if n > 0 {
                    self.push_many(&rest[..n]);
                    i += n;
                    continue;
                }
            }
            match self.step(input[i], &mut sink) {
                Step::Consumed => i += 1,
                Step::Reprocess => {}
            }
        }
    }

    fn start_escape(&mut self) {
        self.tail.clear();
        if self.tail.capacity() > 4096 {
            self.tail.shrink_to(64);
        }
        self.tail.push(0x1b);
        self.state = State::Escape;
        self.kind = Kind::Esc;
        self.dropping = false;
        self.c0 = false;
        self.after_string = false;
    }

    fn push(&mut self, b: u8) {
        if self.dropping {
            return;
        }
        self.tail.push(b);
        if self.tail.len() > MAX_SEQ {
            self.dropping = true;
            self.tail = Vec::new();
        }
    }

    fn ends_string(&self, b: u8) -> bool {
        match b {
            0x18 | 0x1A | 0x1B => true,
            0x07 => self.state == State::Osc,
            0x9C => self.state == State::DcsPass,
            _ => false,
        }
    }

    fn push_many(&mut self, bytes: &[u8]) {
        if self.dropping {
            return;
        }
        if self.tail.len() + bytes.len() > MAX_SEQ {
            self.dropping = true;
            self.tail = Vec::new();
        } else {
            self.tail.extend_from_slice(bytes);
        }
    }

    fn finish(&mut self) {
        self.tail.clear();
        if self.tail.capacity() > 4096 {
            self.tail.shrink_to(64);
        }
        self.state = State::Ground;
        self.kind = Kind::default();
        self.dropping = false;
        self.c0 = false;
        self.after_string = false;
    }

    /// The unit is complete including `b`.
    fn complete(&mut self, b: u8, sink: &mut dyn FnMut(Piece<'_>)) -> Step {
        self.push(b);
        if self.dropping {
            // The oversized unit is dropped, but a CAN/SUB that ended it is
            // still executed, as vte would.
            if matches!(b, 0x18 | 0x1A) {
                sink(Piece::Text(&[b][..]));
            }
        } else {
            sink(Piece::Seq {
                bytes: &self.tail,
                kind: self.kind,
                c0: self.c0,
            });
        }
        self.finish();
        Step::Consumed
    }

    /// ESC inside a non-string sequence: vte abandons it and starts anew.
    fn abort(&mut self, sink: &mut dyn FnMut(Piece<'_>)) -> Step {
        if self.c0 && !self.dropping && matches!(self.kind, Kind::Esc | Kind::Csi) {
            let controls: Vec<u8> = self
                .tail
                .iter()
                .copied()
                .filter(|&b| is_exec_c0(b))
                .collect();
            sink(Piece::Text(&controls));
        }
        self.start_escape();
        Step::Consumed
    }

    /// ESC inside a string: vte ends (dispatches) the string and starts a
    /// new escape sequence with this ESC.
    fn string_esc(&mut self, sink: &mut dyn FnMut(Piece<'_>)) -> Step {
        if !self.dropping {
            self.tail.extend_from_slice(b"\x1b\\");
            sink(Piece::Seq {
                bytes: &self.tail,
                kind: self.kind,
                c0: false,
            });
        }
        self.start_escape();
        self.after_string = true;
        Step::Consumed
    }

    fn step(&mut self, b: u8, sink: &mut dyn FnMut(Piece<'_>)) -> Step {
        use State::*;
        let can = matches!(b, 0x18 | 0x1A);
        match self.state {
            Ground => {
                sink(Piece::Text(&[b][..]));
                Step::Consumed
            }
            Utf8 => {
                self.tail.push(b);
                match std::str::from_utf8(&self.tail) {
                    Ok(_) => {
                        sink(Piece::Text(&self.tail));
                        self.finish();
                        Step::Consumed
                    }
                    Err(e) if e.error_len().is_none() && self.tail.len() < 4 => Step::Consumed,
                    Err(_) => {
                        self.tail.pop();
                        sink(Piece::Invalid(&self.tail));
                        self.finish();
                        Step::Reprocess
                    }
                }
            }
            Escape => {
                if self.after_string {
                    self.after_string = false;
                    if b == b'\\' {
                        self.finish();
                        return Step::Consumed;
                    }
                }
                match b {
                    _ if can => self.complete(b, sink),
                    0x1b => self.abort(sink),
                    _ if is_exec_c0(b) => {
                        self.c0 = true;
                        self.push(b);
                        Step::Consumed
                    }
                    0x20..=0x2F => self.enter(b, EscInt, Kind::Esc),
                    b'P' => self.enter(b, DcsEntry, Kind::Dcs),
                    b'X' | b'^' | b'_' => self.enter(b, SosPmApc, Kind::Str),
                    b'[' => self.enter(b, CsiEntry, Kind::Csi),
                    b']' => self.enter(b, Osc, Kind::Osc),
                    0x30..=0x7E => self.complete(b, sink),
                    _ => self.keep(b),
                }
            }
            EscInt => match b {
                _ if can => self.complete(b, sink),
                0x1b => self.abort(sink),
                _ if is_exec_c0(b) => self.keep_c0(b),
                0x30..=0x7E => self.complete(b, sink),
                _ => self.keep(b),
            },
            CsiEntry | CsiParam | CsiInt | CsiIgnore => match b {
                _ if can => self.complete(b, sink),
                0x1b => self.abort(sink),
                _ if is_exec_c0(b) => self.keep_c0(b),
                0x40..=0x7E => self.complete(b, sink),
                _ => {
                    self.state = match (self.state, b) {
                        (CsiEntry, 0x20..=0x2F) | (CsiParam, 0x20..=0x2F) => CsiInt,
                        (CsiEntry, 0x30..=0x3F) => CsiParam,
                        (CsiParam, 0x3C..=0x3F) | (CsiInt, 0x30..=0x3F) => CsiIgnore,
                        (s, _) => s,
                    };
                    self.keep(b)
                }
            },
            DcsEntry | DcsParam | DcsInt => match b {
                _ if can => self.complete(b, sink),
                0x1b => self.abort(sink),
                0x40..=0x7E => {
                    self.state = DcsPass;
                    self.keep(b)
                }
                _ => {
                    self.state = match (self.state, b) {
                        (DcsEntry, 0x20..=0x2F) | (DcsParam, 0x20..=0x2F) => DcsInt,
                        (DcsEntry, 0x30..=0x3F) => DcsParam,
                        (DcsParam, 0x3C..=0x3F) | (DcsInt, 0x30..=0x3F) => DcsIgnore,
                        (s, _) => s,
                    };
                    self.keep(b)
                }
            },
            DcsIgnore => match b {
                _ if can => self.complete(b, sink),
                0x1b => self.abort(sink),
                _ => self.keep(b),
            },
            DcsPass => match b {
                _ if can => self.complete(b, sink),
                0x1b => self.string_esc(sink),
                0x9C => self.complete(b, sink),
                _ => self.keep(b),
            },
            Osc => match b {
                0x07 => self.complete(b, sink),
                _ if can => self.complete(b, sink),
                0x1b => self.string_esc(sink),
                _ => self.keep(b),
            },
            SosPmApc => match b {
                _ if can => self.complete(b, sink),
                0x1b => self.string_esc(sink),
                _ => self.keep(b),
            },
        }
    }

    fn enter(&mut self, b: u8, state: State, kind: Kind) -> Step {
        self.state = state;
        self.kind = kind;
        self.keep(b)
    }

    fn keep(&mut self, b: u8) -> Step {
        self.push(b);
        Step::Consumed
    }

    fn keep_c0(&mut self, b: u8) -> Step {
        self.c0 = true;
        self.push(b);
        Step::Consumed
    }
}

/// Length and kind of a complete, plain sequence at the start of `seq`
/// (which starts with ESC): a CSI or ESC sequence without embedded controls,
/// or an OSC ended by BEL or ST. Anything else (incomplete, embedded C0,
/// 8-bit bytes, strings other than OSC) returns `None` and goes through the
/// byte-wise state machine, which handles every case.
fn whole_sequence(seq: &[u8]) -> Option<(usize, Kind)> {
    match *seq.get(1)? {
        b'[' => {
            // Any run of parameter and intermediate bytes keeps vte in a CSI
            // state (possibly CsiIgnore); any final byte ends it.
            let n = seq[2..].iter().position(|b| !(0x20..=0x3F).contains(b))?;
            let last = seq[2 + n];
            (0x40..=0x7E).contains(&last).then_some((n + 3, Kind::Csi))
        }
        b']' => {
            let body = &seq[2..];
            let n = body
                .iter()
                .position(|&b| matches!(b, 0x07 | 0x18 | 0x1A | 0x1B))?;
            if n + 3 > MAX_SEQ {
                return None;
            }
            match (body[n], body.get(n + 1)) {
                (0x07, _) => Some((n + 3, Kind::Osc)),
                (0x1B, Some(b'\\')) => Some((n + 4, Kind::Osc)),
                _ => None,
            }
        }
        b'P' | b'X' | b'^' | b'_' => None,
        0x30..=0x7E => Some((2, Kind::Esc)),
        0x20..=0x2F => {
            let n = seq[2..].iter().position(|b| !(0x20..=0x2F).contains(b))?;
            let last = seq[2 + n];
            (0x30..=0x7E).contains(&last).then_some((n + 3, Kind::Esc))
        }
        _ => None,
    }
}

/// Index where a trailing incomplete (but so far valid) UTF-8 sequence
/// starts, or `run.len()` if the run does not end inside a character.
fn incomplete_utf8_start(run: &[u8]) -> usize {
    let len = run.len();
    if len == 0 || run[len - 1] < 0x80 {
        return len;
    }
    let from = len.saturating_sub(3);
    for start in (from..len).rev() {
        let b = run[start];
        if b & 0xC0 != 0x80 {
            if b >= 0xC0 {
                if let Err(e) = std::str::from_utf8(&run[start..]) {
                    if e.valid_up_to() == 0 && e.error_len().is_none() {
                        return start;
                    }
                }
            }
            return len;
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    enum P {
        T(Vec<u8>),
        S(Vec<u8>, Kind),
        I(Vec<u8>),
    }

    fn run(b: &mut Boundary, input: &[u8]) -> Vec<P> {
        let mut out = Vec::new();
        b.split(input, |p| match p {
            Piece::Text(t) => out.push(P::T(t.to_vec())),
            Piece::Seq { bytes, kind, .. } => out.push(P::S(bytes.to_vec(), kind)),
            Piece::Invalid(raw) => out.push(P::I(raw.to_vec())),
        });
        out
    }

    #[test]
    fn splits_text_and_sequences() {
        let mut b = Boundary::default();
        let out = run(&mut b, b"ab\x1b[1;2Hc\x1b]0;t\x07d");
        assert_eq!(
            out,
            vec![
                P::T(b"ab".to_vec()),
                P::S(b"\x1b[1;2H".to_vec(), Kind::Csi),
                P::T(b"c".to_vec()),
                P::S(b"\x1b]0;t\x07".to_vec(), Kind::Osc),
                P::T(b"d".to_vec()),
            ]
        );
    }

    #[test]
    fn holds_incomplete_sequences_and_utf8() {
        let mut b = Boundary::default();
        assert_eq!(run(&mut b, b"x\x1b[3"), vec![P::T(b"x".to_vec())]);
        assert_eq!(b.pending(), b"\x1b[3");
        assert_eq!(
            run(&mut b, b"1m\xe2\x82"),
            vec![P::S(b"\x1b[31m".to_vec(), Kind::Csi)]
        );
        assert_eq!(
            run(&mut b, b"\xacz"),
            vec![P::T("€".as_bytes().to_vec()), P::T(b"z".to_vec())]
        );
        assert!(b.pending().is_empty());
    }

    #[test]
    fn string_ended_by_escape_gets_st() {
        let mut b = Boundary::default();
        let out = run(&mut b, b"\x1b]2;a\x1b[c\x1b]2;b\x1b\\");
        assert_eq!(
            out,
            vec![
                P::S(b"\x1b]2;a\x1b\\".to_vec(), Kind::Osc),
                P::S(b"\x1b[c".to_vec(), Kind::Csi),
                P::S(b"\x1b]2;b\x1b\\".to_vec(), Kind::Osc),
            ]
        );
        assert!(b.pending().is_empty());
    }

    #[test]
    fn oversized_string_is_dropped_without_growing() {
        let mut b = Boundary::default();
        let chunk = vec![b'x'; 4096];
        let mut out = run(&mut b, b"\x1b]0;");
        for _ in 0..100 {
            out.extend(run(&mut b, &chunk));
            assert!(b.pending().len() <= MAX_SEQ);
        }
        out.extend(run(&mut b, b"\x07ok"));
        assert_eq!(out, vec![P::T(b"ok".to_vec())]);
    }

    #[test]
    fn aborted_csi_keeps_its_controls() {
        let mut b = Boundary::default();
        let out = run(&mut b, b"\x1b[1\n\x1b[m");
        assert_eq!(
            out,
            vec![P::T(b"\n".to_vec()), P::S(b"\x1b[m".to_vec(), Kind::Csi)]
        );
    }

    #[test]
    fn invalid_utf8_prefix_is_marked_with_its_raw_bytes() {
        let mut b = Boundary::default();
        assert_eq!(run(&mut b, b"\xe2"), vec![]);
        assert_eq!(
            run(&mut b, b"A"),
            vec![P::I(b"\xe2".to_vec()), P::T(b"A".to_vec())]
        );
        assert_eq!(
            run(&mut b, b"\xe2\x82\x1b[m"),
            vec![
                P::I(b"\xe2\x82".to_vec()),
                P::S(b"\x1b[m".to_vec(), Kind::Csi)
            ]
        );
    }
}
