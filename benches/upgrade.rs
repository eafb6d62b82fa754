//! The live-upgrade benchmark: blackout and total time of `server.upgrade`
//! against a server holding many panes with full scrollback, in one run.
//!
//! For each pane count (`--panes`, default 10,100,1000) a fresh private
//! server gets that many 80x24 panes, each running `sh -c 'cat FILE; exec
//! sleep 100000'` where FILE holds `--lines` (default 1000) lines of
//! scrollback plus a screenful, the last one a marker; `pane.wait` on the
//! marker in every pane comes before any measurement. Then it is upgraded
//! to the same binary one warm-up time and `--upgrades` (default 30) times,
//! each measured as
//! - blackout: the report's `blackout_ms` (first pane paused → new server
//!   reading), and
//! - total: the client-observed round trip of `server.upgrade` on one
//!   connection (which is itself handed over).
//!
//! After each upgrade the previous server keeps a 2 s probation during which
//! another upgrade is refused with `busy`: the bench sleeps and retries, and
//! only the successful call is timed. Printed per pane count: p50/p99/max of
//! both figures beside the goals (blackout ≤ 10 ms at 100 panes,
//! ≤ 100 ms at 1000) with PASS/MISS on p50 and p99, the median of each
//! phase, the manifest size (read from the old server's memfd during its
//! probation), the ptmx fd count of the serving process before and after,
//! the time both servers spent on a CPU and waiting for one
//! (`/proc/PID/task/*/schedstat`: on a loaded machine the wait is most of
//! the blackout), and an in-process cost model: the JSON encode, decode and
//! drop of the same number of terminal models in this process, the floor
//! under the capture and import phases.
//!
//! Usage: `cargo build --release && cargo bench --bench upgrade [--
//! --upgrades N --panes 10,100,1000 --lines N --line-len N --model-only]`
//! (`--model-only`: the cost model alone, no server). `--line-len`
//! pads each scrollback line to N characters (default 0: bare numbers, as
//! `seq` prints). The ptyd binary is `$PTYD_BIN`, else `ptyd` in the parent
//! of this executable's directory (`target/release/ptyd`).
//!
//! Each server runs in its own namespace with XDG directories in one
//! temporary directory, with RLIMIT_NOFILE raised to the hard limit (1000
//! panes is ~2000 fds). On the way out, errors included, it is stopped
//! (`server.stop`, read to EOF), the first generation (which stays behind as
//! the reaper) is waited for, and any pane process still alive is killed and
//! reported; with `PTYD_BENCH_KEEP=1` the directory (server logs) is kept.
//!
//! In the load mode, `PTYD_BENCH_CONNECTS=PREFIX` writes every connect
//! (start, duration) and every upgrade's window as CSV to
//! `PREFIX.FLOODING.connects` and `.upgrades`, to match slow connects with
//! what the server did then; `PTYD_BENCH_PANE_NICE=N` renices every pane's
//! process by +N (the server keeps its niceness), to see how much of a
//! connect's wait is CPU contention with the panes.

use std::collections::HashMap;
use std::time::Duration;

mod common;

use common::upgrade::{
    COLS, MODEL_RUNS, Measurement, ModelCost, Plan, ROWS, Sample, generate, measure, model_cost,
    target_for,
};
use common::upgrade_load::{
    LoadMeasurement, LoadPlan, generate_coloured, measure_load, slow_connects_by_phase,
};
use common::{
    Res, check_limits, find_ptyd, fmt_limit, human_bytes, keep_dir, loadavg, ms, nproc, parse_num,
    raised_nofile, rlimit, stats,
};

struct Args {
    upgrades: usize,
    panes: Vec<usize>,
    lines: usize,
    line_len: usize,
    /// Only the in-process cost model, no server.
    model_only: bool,
    /// The load mode: these counts of flooding panes (among `panes[0]`).
    load: Option<Vec<usize>>,
}

fn parse_args() -> Res<Args> {
    use lexopt::prelude::*;
    let mut args = Args {
        upgrades: 30,
        panes: vec![10, 100, 1000],
        lines: 1000,
        line_len: 0,
        model_only: false,
        load: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("upgrades") => args.upgrades = parse_num(p.value(), "--upgrades")?,
            Long("lines") => args.lines = parse_num(p.value(), "--lines")?,
            Long("line-len") => args.line_len = parse_num(p.value(), "--line-len")?,
            Long("model-only") => args.model_only = true,
            Long("panes") => args.panes = parse_list(p.value(), "--panes")?,
            Long("load") => args.load = Some(vec![0, 50, 200]),
            Long("flooding") => args.load = Some(parse_list(p.value(), "--flooding")?),
            // `cargo bench` passes --bench; a filter argument is meaningless here.
            Long("bench") | Value(_) => {}
            Short('h') | Long("help") => {
                println!(
                    "usage: cargo bench --bench upgrade [-- [--upgrades N] [--panes 10,100,1000] [--lines N] [--line-len N] [--model-only] [--load [--flooding 0,50,200]]]"
                );
                std::process::exit(0);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if args.upgrades == 0 || args.panes.is_empty() || args.panes.contains(&0) {
        return Err("--upgrades and every --panes count must be at least 1".into());
    }
    if let Some(flooding) = &args.load {
        // The load mode's default: 200 panes in all.
        if args.panes == [10, 100, 1000] {
            args.panes = vec![flooding.iter().copied().max().unwrap_or(0).max(1)];
        }
        if flooding.iter().any(|&f| f > args.panes[0]) {
            return Err("--flooding counts cannot exceed --panes".into());
        }
    }
    Ok(args)
}

fn parse_list(v: Result<std::ffi::OsString, lexopt::Error>, what: &str) -> Res<Vec<usize>> {
    let v = v.map_err(|e| e.to_string())?;
    v.to_string_lossy()
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("{what} wants whole numbers separated by commas, got {s:?}"))
        })
        .collect()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench upgrade: error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let args = parse_args()?;
    let ptyd_bin = find_ptyd()?;
    let nofile = raised_nofile()?;
    let nproc_limit = rlimit(libc::RLIMIT_NPROC)?;
    check_limits(args.panes.iter().copied().max().unwrap_or(0))?;
    let dir = tempfile::Builder::new()
        .prefix("ptyd-upbench-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let file = dir.path().join("scrollback.txt");
    let printed = args.lines + usize::from(ROWS) - 1;
    let bytes = generate(&file, printed, args.line_len)?;

    println!(
        "ptyd upgrade bench: nproc {}, load {}, ptyd {}",
        nproc(),
        loadavg(),
        ptyd_bin.display()
    );
    println!(
        "server RLIMIT_NOFILE {nofile}; RLIMIT_NPROC (ulimit -u) {}",
        fmt_limit(nproc_limit.0)
    );
    println!(
        "each pane: {COLS}x{ROWS}, `cat` of {printed} lines ({bytes} B, line length {}) then `sleep`, {} lines of scrollback; {} upgrades (+1 warm-up) per pane count; busy waits not counted",
        if args.line_len == 0 {
            "as seq".to_string()
        } else {
            args.line_len.to_string()
        },
        args.lines,
        args.upgrades
    );

    if let Some(flooding) = &args.load {
        return run_load(&args, flooding, &ptyd_bin, nofile, &dir, &file);
    }
    if args.model_only {
        for &panes in &args.panes {
            print_model(panes, &model_cost(panes, &file));
        }
        keep_dir(dir);
        return Ok(());
    }
    let mut results = Vec::new();
    let mut failed = 0;
    for &panes in &args.panes {
        println!();
        let tmp = dir.path().join(format!("p{panes}"));
        let plan = Plan {
            upgrades: args.upgrades,
            lines: args.lines,
            model: true,
        };
        let r = measure(&ptyd_bin, &tmp, nofile, panes, &plan, &file);
        match &r {
            Ok(m) => print_one(m),
            Err(e) => {
                failed += 1;
                println!("{panes} panes: FAILED: {e}");
            }
        }
        results.push((panes, r));
    }
    print_summary(&results);
    keep_dir(dir);
    if failed > 0 {
        return Err(format!("{failed} pane count(s) failed, see above"));
    }
    Ok(())
}

// ---------------------------------------------------------------- load mode

fn run_load(
    args: &Args,
    flooding: &[usize],
    bin: &std::path::Path,
    nofile: u64,
    dir: &tempfile::TempDir,
    idle_file: &std::path::Path,
) -> Res<()> {
    let coloured = dir.path().join("coloured.txt");
    generate_coloured(&coloured, 20_000)?;
    println!(
        "load mode: {} panes, of which {flooding:?} flood (`yes`, and `cat` of a coloured file in a loop, alternately), the rest idle; scrollback_lines = {}; an attached client drains the first flooding pane; a client connects (+ server.status) every {} ms",
        args.panes[0], args.lines, 5
    );
    let mut rows = Vec::new();
    for &f in flooding {
        println!();
        let plan = LoadPlan {
            upgrades: args.upgrades,
            lines: args.lines,
            panes: args.panes[0],
            flooding: f,
        };
        let tmp = dir.path().join(format!("load{f}"));
        match measure_load(bin, &tmp, nofile, &plan, idle_file, &coloured) {
            Ok(m) => {
                print_load(&m);
                rows.push(m);
            }
            Err(e) => println!("{f} flooding: FAILED: {e}"),
        }
    }
    println!();
    println!(
        "{:>8} {:>6} {:>12} {:>12} {:>11} {:>11} {:>11} {:>11} {:>9}",
        "flooding",
        "failed",
        "blackout p50",
        "blackout p99",
        "total p50",
        "total p99",
        "connect p99",
        "connect max",
        ">50ms"
    );
    for m in &rows {
        let b = stats(m.samples.iter().map(Sample::blackout_ms).collect());
        let t = stats(m.samples.iter().map(Sample::total_ms).collect());
        let c = stats(m.connects.iter().map(|d| ms(*d)).collect());
        println!(
            "{:>8} {:>6} {:>12.2} {:>12.2} {:>11.2} {:>11.2} {:>11.2} {:>11.2} {:>9}",
            m.flooding,
            m.failures.len(),
            b.p50,
            b.p99,
            t.p50,
            t.p99,
            c.p99,
            c.max,
            m.connects.iter().filter(|d| ms(**d) > 50.0).count()
        );
    }
    println!(
        "(ms; targets: 0 failed, blackout p99 <= 20 ms with 200 flooding, no connect over 50 ms)"
    );
    Ok(())
}

fn print_load(m: &LoadMeasurement) {
    let b = stats(m.samples.iter().map(Sample::blackout_ms).collect());
    let t = stats(m.samples.iter().map(Sample::total_ms).collect());
    let c = stats(m.connects.iter().map(|d| ms(*d)).collect());
    println!(
        "{} flooding of {} panes: {} upgrades ok, {} failed in {:.1} s; load {} before, {} after",
        m.flooding,
        m.panes,
        m.samples.len(),
        m.failures.len(),
        m.wall.as_secs_f64(),
        m.load.0,
        m.load.1
    );
    for f in &m.failures {
        println!("  failed: {f}");
    }
    println!("  {:<14} {:>9} {:>9} {:>9}", "(ms)", "p50", "p99", "max");
    for (name, s) in [("blackout", &b), ("total", &t), ("connect", &c)] {
        println!(
            "  {:<14} {:>9.2} {:>9.2} {:>9.2}",
            name, s.p50, s.p99, s.max
        );
    }
    println!(
        "  connects: {} ok, {} over 50 ms, {} failed{}",
        m.connects.len(),
        m.connects.iter().filter(|d| ms(**d) > 50.0).count(),
        m.connect_errors.len(),
        m.connect_errors
            .first()
            .map_or(String::new(), |e| format!(" (first: {e})"))
    );
    let by_phase = slow_connects_by_phase(m, 50.0);
    if !by_phase.is_empty() {
        println!(
            "  connects over 50 ms by the phase they started in: {}",
            by_phase
                .iter()
                .map(|(n, c)| format!("{n} {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!("  phases (median ms): {}", phase_medians(&m.samples));
    if let Some(slow) = m
        .samples
        .iter()
        .max_by(|a, b| a.blackout_ms().total_cmp(&b.blackout_ms()))
    {
        println!(
            "  worst blackout {:.2} ms, phases (ms): {}",
            slow.blackout_ms(),
            phase_medians(std::slice::from_ref(slow))
        );
    }
    print_scheduler(&m.samples);
    println!(
        "  attached client: {} received{}",
        human_bytes(m.attached_bytes),
        m.attached_ended
            .as_deref()
            .map_or(String::new(), |e| if e.contains("\"server_exit\"") {
                // The bench stops the server once the upgrades are done.
                ", its stream ended by the bench's stop of the server".to_string()
            } else {
                format!(", stream ended early: {e}")
            })
    );
}

// ---------------------------------------------------------------- reporting

fn verdict(value: f64, target: f64) -> &'static str {
    if value <= target { "PASS" } else { "MISS" }
}

fn print_one(m: &Measurement) {
    let blackout = stats(m.samples.iter().map(Sample::blackout_ms).collect());
    let total = stats(m.samples.iter().map(Sample::total_ms).collect());
    println!(
        "{} panes: set-up {:.1} s; scrollback {} lines before, {} after; {} upgrades measured, {} busy retries (not counted)",
        m.panes,
        m.setup.as_secs_f64(),
        m.scrollback.0,
        m.scrollback.1,
        m.samples.len(),
        m.busy_retries
    );
    println!(
        "  {:<14} {:>9} {:>9} {:>9}   {:<18}",
        "(ms)", "p50", "p99", "max", "target"
    );
    let target = target_for(m.panes);
    println!(
        "  {:<14} {:>9.2} {:>9.2} {:>9.2}   {}",
        "blackout",
        blackout.p50,
        blackout.p99,
        blackout.max,
        match target {
            Some(t) => format!(
                "<= {t} ms: p50 {}, p99 {}",
                verdict(blackout.p50, t),
                verdict(blackout.p99, t)
            ),
            None => "(none)".into(),
        }
    );
    println!(
        "  {:<14} {:>9.2} {:>9.2} {:>9.2}",
        "total", total.p50, total.p99, total.max
    );
    println!(
        "  warm-up (first) upgrade: blackout {:.2} ms, total {:.2} ms",
        m.warmup.blackout_ms(),
        m.warmup.total_ms()
    );
    println!("  phases (median ms): {}", phase_medians(&m.samples));
    if let Some(slow) = m.samples.iter().max_by(|a, b| a.total.cmp(&b.total)) {
        println!(
            "  slowest upgrade: total {:.2} ms, blackout {:.2} ms, phases (ms): {}",
            slow.total_ms(),
            slow.blackout_ms(),
            phase_medians(std::slice::from_ref(slow))
        );
    }
    print_scheduler(&m.samples);
    print_model(m.panes, &m.model);
    let r = &m.samples[m.samples.len() - 1].report;
    println!(
        "  report: fds {}, fd_batches {}, clients {}, generation {}",
        r["fds"], r["fd_batches"], r["clients"], r["generation"]
    );
    match m.manifest_bytes.iter().copied().max() {
        Some(max) => {
            let min = m.manifest_bytes.iter().copied().min().unwrap_or(max);
            println!(
                "  manifest: {} (min {}, {} bytes/pane)",
                human_bytes(max),
                human_bytes(min),
                max / m.panes as u64
            );
        }
        None => println!("  manifest: size not found (no memfd in the old server)"),
    }
    println!(
        "  serving process fds: before pid {} ptmx {} of {}; after pid {} ptmx {} of {}{}",
        m.fds_before.pid,
        m.fds_before.ptmx,
        m.fds_before.total,
        m.fds_after.pid,
        m.fds_after.ptmx,
        m.fds_after.total,
        if m.fds_before.ptmx == m.panes && m.fds_after.ptmx == m.panes {
            " (one per pane: ok)"
        } else {
            " (NOT one per pane)"
        }
    );
    if m.leftovers > 0 {
        println!(
            "  {} pane process(es) were still alive after the stop (killed)",
            m.leftovers
        );
    }
}

fn print_model(panes: usize, model: &Res<ModelCost>) {
    match model {
        Ok(c) => println!(
            "  in-process CPU cost of {panes} terminal models (best of {MODEL_RUNS}): JSON encode {:.1} ms, decode {:.1} ms, drop {:.1} ms; {}",
            ms(c.encode),
            ms(c.decode),
            ms(c.drop),
            human_bytes(c.bytes as u64)
        ),
        Err(e) => println!("  in-process cost model failed: {e}"),
    }
}

/// The median of each phase, in the order the report lists them.
fn phase_medians(samples: &[Sample]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, Vec<f64>> = HashMap::new();
    for s in samples {
        for p in s.report["phases"].as_array().into_iter().flatten() {
            let (Some(name), Some(ms)) = (p["name"].as_str(), p["ms"].as_f64()) else {
                continue;
            };
            if !by_name.contains_key(name) {
                order.push(name.to_string());
            }
            by_name.entry(name.to_string()).or_default().push(ms);
        }
    }
    order
        .iter()
        .map(|n| {
            format!(
                "{n} {:.2}",
                stats(by_name.remove(n).unwrap_or_default()).p50
            )
        })
        .collect::<Vec<_>>()
        .join("  ")
}

fn print_summary(results: &[(usize, Res<Measurement>)]) {
    println!();
    println!(
        "{:>6} {:>12} {:>12} {:>10} {:>8} {:>11} {:>11} {:>10}",
        "panes",
        "blackout p50",
        "blackout p99",
        "target",
        "verdict",
        "total p50",
        "total p99",
        "manifest"
    );
    for (panes, r) in results {
        let Ok(m) = r else {
            println!("{panes:>6} failed");
            continue;
        };
        let b = stats(m.samples.iter().map(Sample::blackout_ms).collect());
        let t = stats(m.samples.iter().map(Sample::total_ms).collect());
        let (target, v) = match target_for(*panes) {
            Some(tg) => (
                format!("<= {tg} ms"),
                format!("{}/{}", verdict(b.p50, tg), verdict(b.p99, tg)),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:>6} {:>12.2} {:>12.2} {:>10} {:>8} {:>11.2} {:>11.2} {:>10}",
            panes,
            b.p50,
            b.p99,
            target,
            v,
            t.p50,
            t.p99,
            m.manifest_bytes
                .iter()
                .copied()
                .max()
                .map_or("?".into(), human_bytes)
        );
    }
    println!("(ms; verdict is p50/p99 against the target)");
}

/// Both servers' time on a CPU and waiting for one, median per upgrade
/// (on a loaded machine the wait is most of the blackout).
fn print_scheduler(samples: &[Sample]) {
    let med =
        |f: &dyn Fn(&Sample) -> Duration| stats(samples.iter().map(|s| ms(f(s))).collect()).p50;
    println!(
        "  scheduler (median ms per upgrade): old server {:.1} on a CPU + {:.1} waiting for one; new server {:.1} on a CPU + {:.1} waiting (start to answer)",
        med(&|s| s.old_sched.on_cpu),
        med(&|s| s.old_sched.waiting),
        med(&|s| s.new_sched.on_cpu),
        med(&|s| s.new_sched.waiting),
    );
}
