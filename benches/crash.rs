//! The crash-recovery benchmark, in one run:
//!
//! - **Throughput cost** of the bookkeeping (each pane's output ring, the
//!   checkpoints, the keeper's copies): `cat` of a `--mb` MB file (default
//!   100) through a pane, read through ptyd's protocol client (as the
//!   `report` bench's throughput does), on a server with its keeper and on
//!   one started with `PTYD_NO_KEEPER=1` (no keeper, no rings, no
//!   checkpoints), `--runs` times each (default 5), interleaved.
//! - **Recovery time**: for each pane count (`--panes`, default
//!   10,100,1000) a server with that many panes (each having printed
//!   `--lines` lines, default 200, then `cat`), then `--rounds` times
//!   (default 10): SIGKILL the serving process, and time until a
//!   replacement answers `pane.list` with every pane, each with its old
//!   pid ("served again": taken over, listening, answering). Rounds in
//!   quick succession are no crash loop: each replacement served first.
//!
//! Usage: `cargo build --release && cargo bench --bench crash [-- --mb N
//! --runs N --panes 10,100,1000 --rounds N --lines N]`. The ptyd binary is
//! `$PTYD_BIN`, else `target/release/ptyd`.

mod common;

use common::crash;
use common::upgrade::generate;
use common::{Res, check_limits, find_ptyd, loadavg, nproc, parse_num, raised_nofile, stats};

struct Args {
    mb: usize,
    runs: usize,
    panes: Vec<usize>,
    rounds: usize,
    lines: usize,
}

fn parse_args() -> Res<Args> {
    use lexopt::prelude::*;
    let mut args = Args {
        mb: 100,
        runs: 5,
        panes: vec![10, 100, 1000],
        rounds: 10,
        lines: 200,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("mb") => args.mb = parse_num(p.value(), "--mb")?,
            Long("runs") => args.runs = parse_num(p.value(), "--runs")?,
            Long("rounds") => args.rounds = parse_num(p.value(), "--rounds")?,
            Long("lines") => args.lines = parse_num(p.value(), "--lines")?,
            Long("panes") => {
                let v = p.value().map_err(|e| e.to_string())?;
                args.panes = v
                    .to_string_lossy()
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| {
                        s.trim()
                            .parse()
                            .map_err(|_| format!("--panes wants whole numbers, got {s:?}"))
                    })
                    .collect::<Res<_>>()?;
            }
            Long("bench") | Value(_) => {}
            Short('h') | Long("help") => {
                println!(
                    "usage: cargo bench --bench crash [-- [--mb N] [--runs N] [--panes 10,100,1000] [--rounds N] [--lines N]]"
                );
                std::process::exit(0);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    Ok(args)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench crash: error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let args = parse_args()?;
    let bin = find_ptyd()?;
    let nofile = raised_nofile()?;
    check_limits(args.panes.iter().copied().max().unwrap_or(0))?;
    let dir = tempfile::Builder::new()
        .prefix("ptyd-crashbench-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    println!(
        "ptyd crash bench: nproc {}, load {}, ptyd {}",
        nproc(),
        loadavg(),
        bin.display()
    );
    if args.mb > 0 && args.runs > 0 {
        throughput(&args, &bin, dir.path(), nofile)?;
    }
    if args.rounds > 0 {
        println!(
            "\nrecovery: SIGKILL of the serving process -> every pane served again ({} rounds)",
            args.rounds
        );
        println!(
            "{:>6}  {:>9} {:>9} {:>9}  {:>12}",
            "panes", "p50 ms", "p99 ms", "max ms", "checkpoint"
        );
        for &n in &args.panes {
            recovery(&args, &bin, dir.path(), nofile, n)?;
        }
    }
    Ok(())
}

fn throughput(args: &Args, bin: &std::path::Path, tmp: &std::path::Path, nofile: u64) -> Res<()> {
    let file = tmp.join("out.txt");
    // 100-byte lines.
    let bytes = generate(&file, args.mb * 10_000, 99)?;
    let cost = crash::keeper_cost(bin, tmp, nofile, &file, bytes as u64, args.runs, (80, 24))?;
    let keeper = &cost.keeper;
    let (w, wo) = (
        stats(cost.with.clone()).p50,
        stats(cost.without.clone()).p50,
    );
    let mbps = |t: f64| bytes as f64 / 1e6 / (t / 1000.0);
    println!(
        "\nthroughput: cat of {:.0} MB through a pane, protocol client, {} runs each, interleaved",
        bytes as f64 / 1e6,
        args.runs
    );
    println!(
        "  without keeper (PTYD_NO_KEEPER=1): p50 {wo:.0} ms ({:.0} MB/s), runs {:.0?}",
        mbps(wo),
        cost.without
    );
    println!(
        "  with keeper + ring + checkpoints:  p50 {w:.0} ms ({:.0} MB/s), runs {:.0?}",
        mbps(w),
        cost.with
    );
    println!(
        "  cost: {:+.1} % of the time (target < 3 %); {} checkpoints written, the last {} ms, {} bytes",
        (w / wo - 1.0) * 100.0,
        keeper["checkpoints"],
        keeper["last_checkpoint_ms"],
        keeper["last_checkpoint_bytes"]
    );
    Ok(())
}

fn recovery(
    args: &Args,
    bin: &std::path::Path,
    tmp: &std::path::Path,
    nofile: u64,
    n: usize,
) -> Res<()> {
    let r = crash::recovery(bin, tmp, nofile, n, args.lines, args.rounds, false)?;
    let s = stats(r.times);
    println!(
        "{n:>6}  {:>9.1} {:>9.1} {:>9.1}  {:>7} KiB {} ms",
        s.p50,
        s.p99,
        s.max,
        r.checkpoint_bytes / 1024,
        r.checkpoint_ms
    );
    Ok(())
}
