//! Throughput and memory of `ptyd::term` against `vt100` on the same inputs.
//!
//! Run with `cargo bench --bench term`. Prints MB/s for each input (thread
//! CPU time, best of interleaved runs) and the ratio ours/vt100 (the target
//! is at least 4x), then the heap added by 10,000 lines of 80-column
//! scrollback, measured with a counting global allocator.
//!
//! On a loaded machine the MB/s figures move by 2x from run to run; for a
//! load-independent comparison count instructions instead:
//! `TERM_BENCH_ONLY=ptyd TERM_BENCH_FILTER=SGR TERM_BENCH_MB=1
//! TERM_BENCH_ROUNDS=1 valgrind --tool=callgrind <bench binary>` (and
//! `TERM_BENCH_ONLY=vt100`, and `TERM_BENCH_FILTER=none` for the input
//! generation baseline to subtract).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicIsize, Ordering};

use ptyd::term::{TermConfig, Terminal};

mod common;

use common::term::{COLS, ROWS, SCROLLBACK, best_of, compare, inputs, mbps, ours, theirs};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to `System` unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Overridable (`TERM_BENCH_ROUNDS`, `TERM_BENCH_MB`) so the bench can run
/// under callgrind, whose instruction counts do not depend on machine load.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn main() {
    let size = env_usize("TERM_BENCH_MB", 8) << 20;
    let rounds = env_usize("TERM_BENCH_ROUNDS", 7);
    let inputs = inputs(size);
    println!(
        "throughput, {COLS}x{ROWS}, {} MiB per input, best of {rounds} interleaved runs (thread CPU time), both with {SCROLLBACK} lines of scrollback",
        size >> 20
    );
    println!(
        "{:<22} {:>12} {:>12} {:>8} {:>16}",
        "input", "ptyd MB/s", "vt100 MB/s", "ratio", "vt100 no-sb MB/s"
    );
    // For profiling: `TERM_BENCH_ONLY=ptyd` (or `vt100`) runs one emulator
    // and skips the memory part,
    // `TERM_BENCH_FILTER=SGR` picks inputs by name.
    let only = std::env::var("TERM_BENCH_ONLY").unwrap_or_default();
    if only == "ptyd" || only == "vt100" {
        let filter = std::env::var("TERM_BENCH_FILTER").unwrap_or_default();
        for (name, input) in inputs.iter().filter(|(n, _)| n.contains(filter.as_str())) {
            let a = if only == "ptyd" {
                best_of(rounds, || ours(input))
            } else {
                best_of(rounds, || theirs(input, SCROLLBACK))
            };
            println!("{name:<22} {:>12.1} ({only})", mbps(input.len(), a));
        }
        return;
    }
    for row in compare(&inputs, rounds) {
        println!(
            "{:<22} {:>12.1} {:>12.1} {:>7.2}x {:>16.1}",
            row.input,
            row.ours,
            row.vt100,
            row.ours / row.vt100,
            row.vt100_no_scrollback
        );
    }

    // Memory: 10,000 lines of 80 columns pushed through a 24-row screen.
    let line: Vec<u8> = (0..80).map(|i| b'a' + (i % 26) as u8).collect();
    let mut input = Vec::new();
    for _ in 0..SCROLLBACK + usize::from(ROWS) {
        input.extend_from_slice(&line);
        input.extend_from_slice(b"\r\n");
    }
    let raw = SCROLLBACK * 80;
    let before = live();
    let mut t = Terminal::new(COLS, ROWS, TermConfig::default());
    let ours_empty = live() - before;
    let mut fwd = Vec::new();
    t.feed(&input, &mut fwd);
    drop(fwd);
    let ours_full = live() - before;
    let estimate = t.scrollback_memory_bytes();
    let before = live();
    let (Some(r), Some(c)) = (NonZeroU16::new(ROWS), NonZeroU16::new(COLS)) else {
        return;
    };
    let mut p = vt100::Parser::new(r, c, SCROLLBACK);
    let theirs_empty = live() - before;
    p.process(&input);
    let theirs_full = live() - before;
    let (ours_sb, theirs_sb) = (ours_full - ours_empty, theirs_full - theirs_empty);
    println!();
    println!(
        "memory for {SCROLLBACK} lines x 80 cols of scrollback (raw text {raw} bytes), heap measured by allocator:"
    );
    println!(
        "  ptyd  {ours_sb:>10} bytes added by the lines ({:.2}x raw; scrollback_memory_bytes() says {estimate}); empty terminal {ours_empty} bytes",
        ours_sb as f64 / raw as f64
    );
    println!(
        "  vt100 {theirs_sb:>10} bytes added by the lines ({:.2}x raw); empty parser {theirs_empty} bytes",
        theirs_sb as f64 / raw as f64
    );
    println!(
        "  ratio vt100/ptyd {:.1}x",
        theirs_sb as f64 / ours_sb as f64
    );
    println!(
        "  (ptyd's empty size includes the 2 MiB that vte's Processor reserves for its sync buffer; it is never written, so never resident)"
    );
    black_box((&t, &p));
}
