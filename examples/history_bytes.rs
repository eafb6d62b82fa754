//! Bytes the terminal model holds per byte of history text, compressed
//! blocks against all lines uncompressed, in one run: `PANES` terminals of
//! 80x24 each fed `LINES` lines (every fifth coloured), heap counted by a
//! counting allocator (the terminals' grids and parsers are measured
//! before the output and left out). Also the CPU time the feeding took.
//! Two inputs: log-like lines (timestamps, levels, words from a small
//! vocabulary, numbers) and lines of random letters (the benchmark
//! report's "typical output", which compresses worst).
//!
//! `cargo run --release --example history_bytes [PANES [LINES]]`. This
//! counts the serving process's model only; the keeper's crash-survival
//! history log is another copy (see docs/design/compressed-scrollback.md).

use ptyd::term::{TermConfig, Terminal};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        HELD.fetch_add(new, Ordering::Relaxed);
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as `dealloc` and `alloc`.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const WORDS: &[&str] = &[
    "request",
    "handled",
    "connection",
    "user",
    "session",
    "cache",
    "miss",
    "hit",
    "upstream",
    "timeout",
    "retry",
    "queue",
    "worker",
    "started",
    "finished",
    "job",
    "error",
    "warning",
    "file",
    "opened",
    "closed",
    "bytes",
    "written",
    "read",
    "from",
    "to",
    "for",
    "the",
    "in",
    "server",
    "client",
    "token",
    "refreshed",
    "build",
    "test",
    "passed",
    "failed",
    "compiling",
    "module",
    "index",
    "query",
    "rows",
    "took",
    "ms",
    "status",
    "ok",
    "path",
    "/api/v1/items",
];

/// Log-like: `2026-12-01T12:34:56.789Z INFO  worker[17] request handled in 12 ms ...`.
fn log_line(rng: &mut Rng, i: usize) -> String {
    let level = ["INFO ", "DEBUG", "WARN ", "INFO ", "ERROR"][rng.below(5) as usize];
    let mut line = format!(
        "2026-12-01T{:02}:{:02}:{:02}.{:03}Z {level} worker[{}] ",
        i / 36000 % 24,
        i / 600 % 60,
        i / 10 % 60,
        rng.below(1000),
        rng.below(64)
    );
    while line.len() < 60 + rng.below(40) as usize {
        if rng.below(4) == 0 {
            line.push_str(&rng.below(100_000).to_string());
        } else {
            line.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        }
        line.push(' ');
    }
    line
}

/// Random letters in words, as the benchmark report prints.
fn random_line(rng: &mut Rng) -> String {
    let mut line = String::new();
    while line.len() < 70 {
        for _ in 0..rng.below(8) + 2 {
            line.push((b'a' + rng.below(26) as u8) as char);
        }
        line.push(' ');
    }
    line
}

/// The output one pane prints, and the bytes of text in it.
fn output(lines: usize, log_like: bool, seed: u64) -> (Vec<u8>, usize) {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    let mut text = 0;
    for i in 0..lines {
        let line = if log_like {
            log_line(&mut rng, i)
        } else {
            random_line(&mut rng)
        };
        let line = line.trim_end();
        text += line.len();
        if i % 5 == 4 {
            let colour = 31 + rng.below(7);
            out.extend_from_slice(format!("\x1b[{colour}m{line}\x1b[0m\r\n").as_bytes());
        } else {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    (out, text)
}

fn run(panes: usize, lines: usize, log_like: bool, compress: bool) -> (f64, f64, f64) {
    let config = TermConfig {
        scrollback_lines: lines,
        scrollback_bytes: 1 << 30,
        ..TermConfig::default()
    };
    let inputs: Vec<(Vec<u8>, usize)> = (0..panes)
        .map(|p| output(lines + 24, log_like, p as u64 + 1))
        .collect();
    let mut terms: Vec<Terminal> = (0..panes)
        .map(|_| {
            let mut t = Terminal::new(80, 24, config.clone());
            if !compress {
                t.set_history_block_bytes(usize::MAX / 4);
            }
            t
        })
        .collect();
    let before = HELD.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut forward = Vec::new();
    for (t, (bytes, _)) in terms.iter_mut().zip(&inputs) {
        for chunk in bytes.chunks(16 << 10) {
            t.feed(chunk, &mut forward);
            forward.clear();
        }
    }
    let took = start.elapsed().as_secs_f64();
    let held = HELD.load(Ordering::Relaxed) - before;
    // Text that is in history (the last screenful is on the screen).
    let text: usize = terms
        .iter()
        .map(|t| {
            t.history_lines(0, usize::MAX, false)
                .lines
                .iter()
                .take(t.scrollback_len())
                .map(|l| l.len())
                .sum::<usize>()
        })
        .sum();
    let stored: usize = terms.iter().map(Terminal::history_stored_bytes).sum();
    let fed: usize = inputs.iter().map(|(b, _)| b.len()).sum();
    let per_char = held as f64 / text as f64;
    let mb_s = fed as f64 / took / 1e6;
    drop(terms);
    (per_char, stored as f64 / text as f64, mb_s)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let panes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let lines: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    println!("{panes} panes x {lines} lines, 80x24, every fifth line coloured");
    println!(
        "{:<14} {:<13} {:>16} {:>18} {:>12}",
        "input", "history", "heap/text byte", "stored/text byte", "feed MB/s"
    );
    for log_like in [true, false] {
        for compress in [false, true] {
            let (held, stored, mb_s) = run(panes, lines, log_like, compress);
            println!(
                "{:<14} {:<13} {held:>16.3} {stored:>18.3} {mb_s:>12.1}",
                if log_like { "log-like" } else { "random words" },
                if compress {
                    "compressed"
                } else {
                    "uncompressed"
                },
            );
        }
    }
}
