//! What a crash checkpoint costs the serving loop for a pane that floods
//! output: one encoding of its terminal (full default scrollback, 10,000
//! lines) as the checkpoint re-encodes it, plain (`serde_json`, the whole
//! history every time) against `Terminal::to_json_cached` (only the lines
//! that scrolled in since the last encoding), for several amounts of
//! output between checkpoints. Then the memory the line cache costs: the
//! process's RSS with 100 terminals of 10,000 lines each, before and
//! after each got a cache.
//!
//! Each encoding is timed as a new `Box<RawValue>` (the previous round's
//! results freed), as one after freeing the previous result first (what
//! the checkpoint does: the allocator hands back the same, already mapped
//! memory, not a fresh megabyte to fault in), and into a kept `Vec`.
//!
//! Usage: `cargo bench --bench checkpoint [-- --rounds N]`. Times are wall
//! clock, median and worst of the rounds, so read them with the load
//! average it prints.

use ptyd::term::{HistoryJson, TermConfig, Terminal};
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
        // The first encoding fills a cache, as the first checkpoint of a
        // busy pane does; one cache for each way of encoding, so each
        // sees the new lines.
        let mut cache = HistoryJson::default();
        black_box(t.to_json_cached(&mut cache).expect("encode"));
        let mut kept_cache = HistoryJson::default();
        black_box(t.to_json_cached(&mut kept_cache).expect("encode"));
        let mut plain = Vec::with_capacity(rounds);
        let mut cached = Vec::with_capacity(rounds);
        let mut reused = Vec::with_capacity(rounds);
        let mut reused_plain = Vec::with_capacity(rounds);
        let mut out = Vec::new();
        let mut freed_first = Vec::with_capacity(rounds);
        let mut prev = None;
        let mut cache3 = HistoryJson::default();
        black_box(t.to_json_cached(&mut cache3).expect("encode"));
        for _ in 0..rounds {
            feed(&mut t, &log_lines(n, per_checkpoint));
            n += per_checkpoint;
            let started = Instant::now();
            let a = black_box(serde_json::value::to_raw_value(&t).expect("encode"));
            plain.push(started.elapsed());
            let started = Instant::now();
            let b = black_box(t.to_json_cached(&mut cache).expect("encode"));
            cached.push(started.elapsed());
            assert_eq!(a.get(), b.get(), "the cached encoding differs");
            drop((a, b));
            let started = Instant::now();
            drop(prev.take());
            prev = Some(black_box(t.to_json_cached(&mut cache3).expect("encode")));
            freed_first.push(started.elapsed());
            let a = prev.as_ref().unwrap();
            out.clear();
            let started = Instant::now();
            serde_json::to_writer(&mut out, &t).expect("encode");
            reused_plain.push(started.elapsed());
            out.clear();
            let started = Instant::now();
            t.write_json_cached(&mut out, &mut kept_cache)
                .expect("encode");
            reused.push(started.elapsed());
            assert_eq!(a.get().as_bytes(), out, "the cached encoding differs");
        }
        println!("{per_checkpoint:>6} new lines per checkpoint:");
        println!("    plain,  new result            {}", summary(plain));
        println!("    cached, new result            {}", summary(cached));
        println!(
            "    cached, old result freed first {}",
            summary(freed_first)
        );
        println!(
            "    plain,  into a kept buffer    {}",
            summary(reused_plain)
        );
        println!("    cached, into a kept buffer    {}", summary(reused));
    }
    println!("load average after timing: {}", load());

    let base = rss_mib();
    let mut panes: Vec<Terminal> = (0..100)
        .map(|p| {
            let mut t = Terminal::new(80, 24, TermConfig::default());
            feed(&mut t, &log_lines(p * 10_100, 10_100));
            t
        })
        .collect();
    let filled = rss_mib();
    let mut caches: Vec<HistoryJson> = panes.iter().map(|_| HistoryJson::default()).collect();
    for (t, cache) in panes.iter_mut().zip(&mut caches) {
        black_box(t.to_json_cached(cache).expect("encode"));
    }
    let cached = rss_mib();
    let counted: usize = caches.iter().map(HistoryJson::memory_bytes).sum();
    let history: usize = panes.iter().map(Terminal::scrollback_memory_bytes).sum();
    println!(
        "100 panes x {} lines: RSS {:.0} MiB for the terminals ({:.0} MiB of \
         scrollback by its own count), {:.0} MiB more with a line cache each \
         ({:.0} MiB by the caches' count)",
        panes[0].scrollback_len(),
        filled - base,
        history as f64 / (1 << 20) as f64,
        cached - filled,
        counted as f64 / (1 << 20) as f64,
    );
    drop(caches);
    println!(
        "RSS after dropping the caches: {:.0} MiB above the start",
        rss_mib() - base
    );
}
