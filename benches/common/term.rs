//! The terminal model against the `vt100` crate: inputs (plain, SGR-heavy,
//! full-screen redraws) and the two feeders, timed in thread CPU time.

use super::thread_cpu;
use ptyd::term::{TermConfig, Terminal};
use std::hint::black_box;
use std::num::NonZeroU16;
use std::time::Duration;

pub const COLS: u16 = 80;
pub const ROWS: u16 = 24;
pub const SCROLLBACK: usize = 10_000;
pub struct Rng(pub u64);
impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n
    }
}

pub fn word(rng: &mut Rng) -> String {
    (0..rng.below(8) + 2)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect()
}

/// Lines of random words, each ended by `eol`.
pub fn plain_text(size: usize, eol: &[u8]) -> Vec<u8> {
    let mut rng = Rng(1);
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let mut line = String::new();
        while line.len() < 70 {
            line.push_str(&word(&mut rng));
            line.push(' ');
        }
        out.extend_from_slice(line.trim_end().as_bytes());
        out.extend_from_slice(eol);
    }
    out
}

/// Words in random SGR colours and attributes (16, 256 and RGB), lines
/// ended by `eol`.
pub fn sgr_text(size: usize, eol: &[u8]) -> Vec<u8> {
    let mut rng = Rng(2);
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let mut width = 0;
        while width < 70 {
            let w = word(&mut rng);
            width += w.len() + 1;
            let sgr = match rng.below(4) {
                0 => format!("\x1b[{}m", 31 + rng.below(7)),
                1 => format!("\x1b[1;38;5;{}m", rng.below(256)),
                2 => format!(
                    "\x1b[38;2;{};{};{}m",
                    rng.below(256),
                    rng.below(256),
                    rng.below(256)
                ),
                _ => format!("\x1b[4;{}m", 41 + rng.below(7)),
            };
            out.extend_from_slice(sgr.as_bytes());
            out.extend_from_slice(w.as_bytes());
            out.extend_from_slice(b"\x1b[0m ");
        }
        out.extend_from_slice(eol);
    }
    out
}

/// Full-screen redraws as a TUI (htop, vim) sends them: home, then every row
/// addressed with CUP, coloured segments, erase to end of line.
pub fn redraws(size: usize) -> Vec<u8> {
    let mut rng = Rng(3);
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        out.extend_from_slice(b"\x1b[H");
        for row in 1..=ROWS {
            out.extend_from_slice(format!("\x1b[{row};1H").as_bytes());
            let mut width = 0;
            while width < 70 {
                let w = word(&mut rng);
                width += w.len() + 1;
                out.extend_from_slice(
                    format!("\x1b[{};{}m", 30 + rng.below(8), 40 + rng.below(8)).as_bytes(),
                );
                out.extend_from_slice(w.as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(b"\x1b[0m\x1b[K");
        }
    }
    out
}

pub fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = thread_cpu();
            f();
            thread_cpu().saturating_sub(t)
        })
        .min()
        .unwrap_or_default()
}

pub fn ours(input: &[u8]) {
    let mut t = Terminal::new(COLS, ROWS, TermConfig::default());
    let mut fwd = Vec::with_capacity(64 * 1024);
    // Feed in PTY-read-sized chunks, as the server will.
    for chunk in input.chunks(16 * 1024) {
        fwd.clear();
        t.feed(chunk, &mut fwd);
    }
    black_box(&t);
}

pub fn theirs(input: &[u8], scrollback: usize) {
    let (Some(r), Some(c)) = (NonZeroU16::new(ROWS), NonZeroU16::new(COLS)) else {
        return;
    };
    let mut p = vt100::Parser::new(r, c, scrollback);
    for chunk in input.chunks(16 * 1024) {
        p.process(chunk);
    }
    black_box(&p);
}

pub fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

/// One input's throughput in MB/s (thread CPU time, best run).
pub struct Compared {
    pub input: &'static str,
    pub ours: f64,
    pub vt100: f64,
    pub vt100_no_scrollback: f64,
}

/// The inputs the term bench and the report use, `size` bytes each.
pub fn inputs(size: usize) -> [(&'static str, Vec<u8>); 3] {
    [
        ("plain text", plain_text(size, b"\r\n")),
        ("SGR-heavy text", sgr_text(size, b"\r\n")),
        ("full-screen redraws", redraws(size)),
    ]
}

/// Feeds each input to both emulators `rounds` times. Runs are interleaved
/// and the best of each kept, so load from other processes on the machine
/// hits both emulators alike.
pub fn compare(inputs: &[(&'static str, Vec<u8>)], rounds: usize) -> Vec<Compared> {
    inputs
        .iter()
        .map(|(name, input)| {
            let (mut a, mut b, mut c) = (Duration::MAX, Duration::MAX, Duration::MAX);
            for _ in 0..rounds {
                a = a.min(best_of(1, || ours(input)));
                b = b.min(best_of(1, || theirs(input, SCROLLBACK)));
                c = c.min(best_of(1, || theirs(input, 0)));
            }
            Compared {
                input: name,
                ours: mbps(input.len(), a),
                vt100: mbps(input.len(), b),
                vt100_no_scrollback: mbps(input.len(), c),
            }
        })
        .collect()
}
