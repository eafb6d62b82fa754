//! What a crash checkpoint costs the serving loop for a pane that floods
//! output: one encoding of its terminal (full default scrollback, 10,000
//! lines) the old way, whole (`serde_json`, every history line every
//! time), against the history log's way (`server/continuity/history_log.rs`): the
//! terminal without its history lines plus a copy of the packed bytes of
//! the lines that scrolled in since the last checkpoint, for several amounts of output
//! between checkpoints. Then what the log holds for 100 such panes beside
//! the process's RSS for their terminals.
//!
//! Usage: `cargo bench --bench checkpoint [-- --rounds N]`. Times are wall
//! clock, median and worst of the rounds, so read them with the load
//! average it prints.

use ptyd::term::{TermConfig, Terminal};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A build log's line: 80 to 120 columns, every fourth one coloured.
fn log_lines(from: usize, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in from..from + n {
        let pad = "-".repeat(40 + i % 40);
        if i % 4 == 0 {
            out.extend_from_slice(
                format!("\x1b[32m   Compiling\x1b[0m crate{i} v0.{i}.0 {pad}\r\n").as_bytes(),
            );
        } else {
            out.extend_from_slice(
                format!("warning: unused variable `x{i}` at src/m{i}.rs:{i}:9 {pad}\r\n")
                    .as_bytes(),
            );
        }
    }
    out
}

fn feed(t: &mut Terminal, bytes: &[u8]) {
    let mut forward = Vec::new();
    t.feed(bytes, &mut forward);
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    format!(
        "median {:7.3} ms, worst {:7.3} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(30usize);
    println!("load average at start: {}", load());
    let mut t = Terminal::new(120, 40, TermConfig::default());
    let mut n = 0;
    feed(&mut t, &log_lines(n, 12_000));
    n += 12_000;
    let json = serde_json::to_string(&t).expect("encode");
    println!(
        "terminal: 120x40, {} lines of scrollback, {} KiB of JSON",
        t.scrollback_len(),
        json.len() >> 10
    );
    // What every encoding costs whatever the history: the screen.
    let mut bare = Terminal::new(
        120,
        40,
        TermConfig {
            scrollback_lines: 0,
            ..TermConfig::default()
        },
    );
    feed(&mut bare, &log_lines(0, 100));
    let times = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            black_box(serde_json::value::to_raw_value(&bare).expect("encode"));
            started.elapsed()
        })
        .collect();
    println!(
        "the same terminal without scrollback ({} KiB): {}",
        serde_json::to_string(&bare).expect("encode").len() >> 10,
        summary(times)
    );
    for per_checkpoint in [10, 100, 1000, 10_000] {
        let mut whole = Vec::with_capacity(rounds);
        let mut logged = Vec::with_capacity(rounds);
        let mut lines = Vec::new();
        for _ in 0..rounds {
            let (_, _, before) = t.history_numbering().expect("numbered");
            feed(&mut t, &log_lines(n, per_checkpoint));
            n += per_checkpoint;
            let started = Instant::now();
            black_box(serde_json::value::to_raw_value(&t).expect("encode"));
            whole.push(started.elapsed());
            let started = Instant::now();
            let (_, oldest, pushed) = t.history_numbering().expect("numbered");
            black_box(t.to_json_without_history().expect("encode"));
            lines.clear();
            for k in before.max(oldest)..pushed {
                let line = t.history_line_bytes(k).expect("held");
                lines.extend_from_slice(&(line.len() as u32).to_le_bytes());
                lines.extend_from_slice(&line);
            }
            black_box(&lines);
            logged.push(started.elapsed());
        }
        println!("{per_checkpoint:>6} new lines per checkpoint:");
        println!("    whole terminal               {}", summary(whole));
        println!("    screen + new lines (the log) {}", summary(logged));
    }
    println!("load average after timing: {}", load());

    let base = rss_mib();
    let panes: Vec<Terminal> = (0..100)
        .map(|p| {
            let mut t = Terminal::new(80, 24, TermConfig::default());
            feed(&mut t, &log_lines(p * 10_100, 10_100));
            t
        })
        .collect();
    let filled = rss_mib();
    let history: usize = panes.iter().map(Terminal::scrollback_memory_bytes).sum();
    let mut log_bytes = 0;
    for t in &panes {
        let (_, oldest, pushed) = t.history_numbering().expect("numbered");
        for k in oldest..pushed {
            log_bytes += t.history_line_bytes(k).expect("held").len() + 4;
        }
    }
    println!(
        "100 panes x {} lines: RSS {:.0} MiB for the terminals ({:.0} MiB of \
         scrollback by its own count); their lines in the history log: {:.0} MiB \
         (shared memory the keeper holds, not the serving process's heap)",
        panes[0].scrollback_len(),
        filled - base,
        history as f64 / (1 << 20) as f64,
        log_bytes as f64 / (1 << 20) as f64,
    );
}
