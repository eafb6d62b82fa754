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
//! both figures beside the targets (blackout ≤ 10 ms at 100 panes,
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

use ptyd::client::{self, Client};
use ptyd::paths::NamespacePaths;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{
    find_ptyd, keep_dir, loadavg, nproc, parse_num, path_str, set_cloexec, shell_quote,
    wait_readable,
};

type Res<T> = Result<T, String>;

const COLS: u16 = 80;
const ROWS: u16 = 24;
/// The last line each pane prints; its appearance means the scrollback is
/// complete.
const MARKER: &str = "ptyd-bench-ready";
/// How long any single wait may take before the run is declared stuck.
const STUCK: Duration = Duration::from_secs(120);
/// The old server's probation after an upgrade (`upgrade::PROBATION`): no
/// point asking again sooner.
const PROBATION: Duration = Duration::from_secs(2);
/// How often to ask again while the answer is `busy`.
const BUSY_RETRY: Duration = Duration::from_millis(20);
/// The blackout targets: (panes, ms).
const TARGETS: &[(usize, f64)] = &[(100, 10.0), (1000, 100.0)];

struct Args {
    upgrades: usize,
    panes: Vec<usize>,
    lines: usize,
    line_len: usize,
    /// Only the in-process cost model, no server.
    model_only: bool,
}

fn parse_args() -> Res<Args> {
    use lexopt::prelude::*;
    let mut args = Args {
        upgrades: 30,
        panes: vec![10, 100, 1000],
        lines: 1000,
        line_len: 0,
        model_only: false,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("upgrades") => args.upgrades = parse_num(p.value(), "--upgrades")?,
            Long("lines") => args.lines = parse_num(p.value(), "--lines")?,
            Long("line-len") => args.line_len = parse_num(p.value(), "--line-len")?,
            Long("model-only") => args.model_only = true,
            Long("panes") => {
                let v = p.value().map_err(|e| e.to_string())?;
                args.panes = v
                    .to_string_lossy()
                    .split(',')
                    .map(|s| {
                        s.trim().parse().map_err(|_| {
                            format!("--panes wants whole numbers separated by commas, got {s:?}")
                        })
                    })
                    .collect::<Res<_>>()?;
            }
            // `cargo bench` passes --bench; a filter argument is meaningless here.
            Long("bench") | Value(_) => {}
            Short('h') | Long("help") => {
                println!(
                    "usage: cargo bench --bench upgrade [-- [--upgrades N] [--panes 10,100,1000] [--lines N] [--line-len N] [--model-only]]"
                );
                std::process::exit(0);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if args.upgrades == 0 || args.panes.is_empty() || args.panes.contains(&0) {
        return Err("--upgrades and every --panes count must be at least 1".into());
    }
    Ok(args)
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
    let most = args.panes.iter().copied().max().unwrap_or(0);
    // One process per pane (sh execs sleep), a few server generations, and
    // whatever else this user runs: ask for plenty of headroom.
    if nproc_limit.0 < (most as u64) * 2 + 200 {
        return Err(format!(
            "RLIMIT_NPROC (ulimit -u) is {}: too low for {most} panes",
            fmt_limit(nproc_limit.0)
        ));
    }
    if nofile < (most as u64) * 3 + 100 {
        return Err(format!(
            "RLIMIT_NOFILE hard limit is {nofile}: too low for {most} panes (~3 fds each during an upgrade)"
        ));
    }
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
        let r = measure(&ptyd_bin, &tmp, nofile, panes, &args, &file);
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

// ---------------------------------------------------------------- measuring

/// Everything measured for one pane count.
struct Measurement {
    panes: usize,
    setup: Duration,
    scrollback: (u64, u64),
    warmup: Sample,
    samples: Vec<Sample>,
    busy_retries: usize,
    manifest_bytes: Vec<u64>,
    fds_before: FdCount,
    fds_after: FdCount,
    /// Pane processes found alive after the stop (killed by the guard).
    leftovers: usize,
    model: Res<ModelCost>,
}

/// One upgrade.
struct Sample {
    /// Client-observed round trip of the successful `server.upgrade`.
    total: Duration,
    report: Value,
    /// Scheduler accounting of the old server across the call.
    old_sched: Sched,
    /// Of the new server from its start until the answer arrived.
    new_sched: Sched,
}

/// Time a process's threads spent on a CPU and waiting in a run queue for
/// one (`/proc/PID/task/*/schedstat`, nanoseconds).
#[derive(Clone, Copy, Default)]
struct Sched {
    on_cpu: Duration,
    waiting: Duration,
}

impl Sched {
    fn of(pid: u32) -> Sched {
        let mut sum = Sched::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return sum;
        };
        for t in tasks.flatten() {
            let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            let mut f = s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
            sum.on_cpu += Duration::from_nanos(f.next().unwrap_or(0));
            sum.waiting += Duration::from_nanos(f.next().unwrap_or(0));
        }
        sum
    }

    fn since(self, earlier: Sched) -> Sched {
        Sched {
            on_cpu: self.on_cpu.saturating_sub(earlier.on_cpu),
            waiting: self.waiting.saturating_sub(earlier.waiting),
        }
    }
}

impl Sample {
    fn blackout_ms(&self) -> f64 {
        self.report["blackout_ms"].as_f64().unwrap_or(f64::NAN)
    }

    fn total_ms(&self) -> f64 {
        ms(self.total)
    }
}

fn measure(
    bin: &Path,
    tmp: &Path,
    nofile: u64,
    panes: usize,
    args: &Args,
    file: &Path,
) -> Res<Measurement> {
    let mut server = PtydServer::start(bin, tmp, nofile)?;
    let mut ctl = server.connect()?;
    let t0 = Instant::now();
    let ids = server.create_panes(&mut ctl, panes, file, tmp)?;
    wait_all(&mut ctl, &ids)?;
    let setup = t0.elapsed();
    let scrollback_before = scrollback_lines(&mut ctl, &ids[0])?;
    if scrollback_before < args.lines as u64 {
        return Err(format!(
            "pane {} holds {scrollback_before} lines of scrollback, not {}",
            ids[0], args.lines
        ));
    }
    let first_pid = server.serving_pid;
    let fds_before = FdCount::of(first_pid)?;

    let mut manifest_bytes = Vec::new();
    let mut busy_retries = 0;
    let mut samples = Vec::with_capacity(args.upgrades + 1);
    for i in 0..=args.upgrades {
        let old_pid = server.serving_pid;
        let (sample, retries) = upgrade_once(&mut ctl, old_pid, i > 0)?;
        busy_retries += retries;
        // The old server keeps the manifest memfd open through probation.
        if let Some(b) = memfd_size(old_pid, "ptyd-manifest") {
            manifest_bytes.push(b);
        }
        let r = &sample.report;
        let new_pid = r["new_pid"]
            .as_u64()
            .ok_or_else(|| format!("the report has no new_pid: {r}"))? as u32;
        if r["panes"].as_u64() != Some(panes as u64) || new_pid == old_pid {
            return Err(format!("upgrade {i}: unexpected report {r}"));
        }
        server.serving_pid = new_pid;
        server.serving = Some(PaneProc {
            pid: new_pid as i32,
            sid: new_pid as i32,
            start_token: start_time(new_pid),
        });
        samples.push(sample);
    }
    let warmup = samples.remove(0);
    let fds_after = FdCount::of(server.serving_pid)?;
    let scrollback_after = scrollback_lines(&mut ctl, &ids[ids.len() - 1])?;
    drop(ctl);
    let leftovers = server.stop()?;
    let model = model_cost(panes, file);
    Ok(Measurement {
        model,
        panes,
        setup,
        scrollback: (scrollback_before, scrollback_after),
        warmup,
        samples,
        busy_retries,
        manifest_bytes,
        fds_before,
        fds_after,
        leftovers,
    })
}

/// One `server.upgrade` to the same binary, asked again while the answer
/// is `busy` (the previous upgrade's probation); only the successful call
/// is timed. With `after_probation`, first sleeps out the probation rather
/// than polling through all of it.
fn upgrade_once(ctl: &mut Client, old_pid: u32, after_probation: bool) -> Res<(Sample, usize)> {
    if after_probation {
        std::thread::sleep(PROBATION);
    }
    let deadline = Instant::now() + STUCK;
    let mut retries = 0;
    loop {
        let before = Sched::of(old_pid);
        let t0 = Instant::now();
        match ctl.call("server.upgrade", json!({})) {
            Ok(report) => {
                let total = t0.elapsed();
                let old_sched = Sched::of(old_pid).since(before);
                let new_sched = report["new_pid"]
                    .as_u64()
                    .map_or_else(Sched::default, |p| Sched::of(p as u32));
                let sample = Sample {
                    total,
                    report,
                    old_sched,
                    new_sched,
                };
                return Ok((sample, retries));
            }
            Err(e) if e.code == "busy" && Instant::now() < deadline => {
                retries += 1;
                std::thread::sleep(BUSY_RETRY);
            }
            Err(e) => return Err(format!("server.upgrade: {} ({})", e.message, e.code)),
        }
    }
}

/// Waits until every pane shows the marker, all waits in flight at once.
fn wait_all(ctl: &mut Client, ids: &[String]) -> Res<()> {
    let mut pending = HashSet::new();
    for id in ids {
        let rpc = ctl
            .send_request(
                "pane.wait",
                json!({ "target": id, "text": MARKER, "timeout_ms": STUCK.as_millis() as u64 }),
            )
            .map_err(|e| e.to_string())?;
        pending.insert(rpc);
    }
    collect(ctl, pending, "pane.wait").map(drop)
}

/// Reads responses until every id in `pending` is answered; returns the
/// results by id.
fn collect(ctl: &mut Client, mut pending: HashSet<u64>, what: &str) -> Res<HashMap<u64, Value>> {
    let mut out = HashMap::new();
    while !pending.is_empty() {
        let msg = ctl.read_message().map_err(|e| e.to_string())?;
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if pending.remove(&id) {
            let r = client::response_result(msg).map_err(|e| format!("{what}: {e}"))?;
            out.insert(id, r);
        }
    }
    Ok(out)
}

fn scrollback_lines(ctl: &mut Client, pane: &str) -> Res<u64> {
    let cap = ctl
        .call("pane.capture", json!({ "target": pane }))
        .map_err(|e| format!("pane.capture: {e}"))?;
    if !client::capture_lines(&cap).contains(&MARKER) {
        return Err(format!("pane {pane} no longer shows {MARKER:?}"));
    }
    cap["scrollback_lines"]
        .as_u64()
        .ok_or_else(|| format!("pane.capture has no scrollback_lines: {cap}"))
}

/// Fds of a process: how many are PTY masters, and all of them.
#[derive(Clone, Copy)]
struct FdCount {
    pid: u32,
    ptmx: usize,
    total: usize,
}

impl FdCount {
    fn of(pid: u32) -> Res<FdCount> {
        let dir = format!("/proc/{pid}/fd");
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("reading {dir}: {e}"))?;
        let (mut ptmx, mut total) = (0, 0);
        for e in entries.flatten() {
            total += 1;
            if let Ok(target) = std::fs::read_link(e.path())
                && (target == Path::new("/dev/ptmx") || target == Path::new("/dev/pts/ptmx"))
            {
                ptmx += 1;
            }
        }
        Ok(FdCount { pid, ptmx, total })
    }
}

/// The size of a memfd named `name` that process `pid` holds open, if any.
fn memfd_size(pid: u32, name: &str) -> Option<u64> {
    let prefix = format!("/memfd:{name}");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with(&prefix))
        })
        .and_then(|e| std::fs::metadata(e.path()).ok())
        .map(|m| m.len())
}

// ---------------------------------------------------------------- cost model

/// How often the in-process cost model is repeated (the best run counts).
const MODEL_RUNS: usize = 3;

/// What the terminal models alone cost, in this process, without the
/// server, sockets or other load in between: the floor for the capture and
/// import phases.
struct ModelCost {
    encode: Duration,
    decode: Duration,
    drop: Duration,
    bytes: usize,
}

/// Builds `panes` terminals fed what the bench's panes print (with the
/// tty's CR before each LF), then times their JSON round trip as the
/// manifest carries them.
fn model_cost(panes: usize, file: &Path) -> Res<ModelCost> {
    use ptyd::term::{TermConfig, Terminal};
    let text = std::fs::read(file).map_err(|e| e.to_string())?;
    let mut output = Vec::with_capacity(text.len() * 11 / 10);
    for &b in &text {
        if b == b'\n' {
            output.push(b'\r');
        }
        output.push(b);
    }
    let mut forward = Vec::new();
    let terms: Vec<Terminal> = (0..panes)
        .map(|_| {
            let mut t = Terminal::new(COLS, ROWS, TermConfig::default());
            t.feed(&output, &mut forward);
            forward.clear();
            t
        })
        .collect();
    let mut best: Option<ModelCost> = None;
    for _ in 0..MODEL_RUNS {
        let t0 = thread_cpu();
        let bytes = serde_json::to_vec(&terms).map_err(|e| e.to_string())?;
        let t1 = thread_cpu();
        let back: Vec<Terminal> = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        let t2 = thread_cpu();
        drop(back);
        let (encode, decode, drop) = (t1 - t0, t2 - t1, thread_cpu() - t2);
        let run = ModelCost {
            encode,
            decode,
            drop,
            bytes: bytes.len(),
        };
        best = Some(match best {
            Some(b) => ModelCost {
                encode: b.encode.min(run.encode),
                decode: b.decode.min(run.decode),
                drop: b.drop.min(run.drop),
                bytes: run.bytes,
            },
            None => run,
        });
    }
    best.ok_or_else(|| "no run".into())
}

/// CPU time this thread has used: the cost model's clock, blind to the
/// time other processes hold the CPU.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the valid timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

// ---------------------------------------------------------------- reporting

struct Stats {
    p50: f64,
    p99: f64,
    max: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(f64::total_cmp);
    let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)];
    Stats {
        p50: at(50),
        p99: at(99),
        max: v[v.len() - 1],
    }
}

fn target_for(panes: usize) -> Option<f64> {
    TARGETS.iter().find(|(p, _)| *p == panes).map(|(_, t)| *t)
}

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
    let med =
        |f: &dyn Fn(&Sample) -> Duration| stats(m.samples.iter().map(|s| ms(f(s))).collect()).p50;
    println!(
        "  scheduler (median ms per upgrade): old server {:.1} on a CPU + {:.1} waiting for one; new server {:.1} on a CPU + {:.1} waiting (start to answer)",
        med(&|s| s.old_sched.on_cpu),
        med(&|s| s.old_sched.waiting),
        med(&|s| s.new_sched.on_cpu),
        med(&|s| s.new_sched.waiting),
    );
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

fn fmt_limit(v: u64) -> String {
    if v == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

// ---------------------------------------------------------------- set-up

/// (soft, hard) limit of `resource`.
fn rlimit(resource: libc::__rlimit_resource_t) -> Res<(u64, u64)> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid rlimit we pass.
    if unsafe { libc::getrlimit(resource, &mut rl) } != 0 {
        return Err(format!("getrlimit: {}", io::Error::last_os_error()));
    }
    Ok((rl.rlim_cur, rl.rlim_max))
}

/// The RLIMIT_NOFILE the server gets: the hard limit, capped at 65536.
fn raised_nofile() -> Res<u64> {
    let (_, hard) = rlimit(libc::RLIMIT_NOFILE)?;
    Ok(hard.min(65536))
}

/// Writes `lines` lines: numbers (padded with text to `line_len` if that
/// is longer), the last one [`MARKER`]. Returns the byte count.
fn generate(path: &Path, lines: usize, line_len: usize) -> Res<usize> {
    let filler = b"the quick brown fox jumps over the lazy dog 0123456789 ";
    let mut w = BufWriter::new(File::create(path).map_err(|e| e.to_string())?);
    let mut total = 0;
    let mut line = Vec::new();
    for i in 1..lines {
        line.clear();
        write!(line, "{i}").map_err(|e| e.to_string())?;
        let mut k = i % filler.len();
        while line.len() < line_len {
            line.push(filler[k]);
            k = (k + 1) % filler.len();
        }
        line.push(b'\n');
        w.write_all(&line).map_err(|e| e.to_string())?;
        total += line.len();
    }
    writeln!(w, "{MARKER}").map_err(|e| e.to_string())?;
    w.flush().map_err(|e| e.to_string())?;
    Ok(total + MARKER.len() + 1)
}

/// A pane's process as created: enough to find it again, and to tell it
/// from a later process reusing the pid.
struct PaneProc {
    pid: i32,
    sid: i32,
    start_token: Option<u64>,
}

impl PaneProc {
    /// Still the process we created (same pid, same kernel start time, not
    /// a zombie)?
    fn alive(&self) -> bool {
        match proc_stat(self.pid as u32) {
            Some((state, start)) => {
                state != "Z" && (self.start_token.is_none() || Some(start) == self.start_token)
            }
            None => false,
        }
    }
}

/// The state and kernel start time of process `pid` (`/proc/PID/stat`
/// fields 3 and 22).
fn proc_stat(pid: u32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, which may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((fields.first()?.to_string(), fields.get(19)?.parse().ok()?))
}

fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, start)| start)
}

/// A private ptyd server: its own namespace and XDG directories inside
/// `tmp`. The child is the first generation, which becomes the reaper
/// after the first upgrade; `serving_pid` is the generation serving now.
/// Stopped on drop, and every pane process with it.
struct PtydServer {
    child: Child,
    paths: NamespacePaths,
    serving_pid: u32,
    /// The serving generation when it is not the first, for the clean-up.
    serving: Option<PaneProc>,
    panes: Vec<PaneProc>,
    stopped: bool,
}

impl PtydServer {
    fn start(bin: &Path, tmp: &Path, nofile: u64) -> Res<PtydServer> {
        let namespace = format!("upbench-{}", std::process::id());
        let run_dir = tmp.join("run");
        let state_dir = tmp.join("state");
        for d in [tmp, &run_dir, &state_dir] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(d)
                .map_err(|e| format!("creating {}: {e}", d.display()))?;
        }
        let paths = NamespacePaths {
            namespace: namespace.clone(),
            runtime_dir: run_dir.join("ptyd").join(&namespace),
            state_dir: state_dir.join("ptyd").join(&namespace),
        };
        let (ready_r, ready_w) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
        set_cloexec(ready_r.as_raw_fd())?;
        let stderr = File::create(tmp.join("ptyd-server.stderr")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        cmd.args(["-L", &namespace, "server"])
            .env("XDG_RUNTIME_DIR", &run_dir)
            .env("XDG_STATE_HOME", &state_dir)
            .env(
                ptyd::protocol::READY_FD_ENV,
                ready_w.as_raw_fd().to_string(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let limit = libc::rlimit {
            rlim_cur: nofile,
            rlim_max: rlimit(libc::RLIMIT_NOFILE)?.1,
        };
        // SAFETY: setrlimit is async-signal-safe and reads only `limit`, a
        // copy owned by the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        drop(ready_w);
        let serving_pid = child.id();
        let server = PtydServer {
            child,
            paths,
            serving_pid,
            serving: None,
            panes: Vec::new(),
            stopped: false,
        };
        // One byte when it accepts connections; EOF if it died first.
        let mut byte = [0u8; 1];
        if !wait_readable(ready_r.as_raw_fd(), STUCK)?
            || !matches!(File::from(ready_r).read(&mut byte), Ok(1))
        {
            let log = std::fs::read_to_string(tmp.join("ptyd-server.stderr")).unwrap_or_default();
            return Err(format!("the ptyd server did not start: {}", log.trim()));
        }
        Ok(server)
    }

    fn connect(&self) -> Res<Client> {
        Client::connect(&self.paths, false).map_err(|e| e.to_string())
    }

    /// Creates `n` panes, all requests in flight at once; returns their ids
    /// in creation order and remembers their processes for the clean-up.
    fn create_panes(
        &mut self,
        ctl: &mut Client,
        n: usize,
        file: &Path,
        cwd: &Path,
    ) -> Res<Vec<String>> {
        let script = format!("cat {}; exec sleep 100000", shell_quote(path_str(file)?));
        let mut order = Vec::with_capacity(n);
        for _ in 0..n {
            let rpc = ctl
                .send_request(
                    "pane.create",
                    json!({
                        "argv": ["sh", "-c", script],
                        "cols": COLS,
                        "rows": ROWS,
                        "cwd": path_str(cwd)?,
                    }),
                )
                .map_err(|e| e.to_string())?;
            order.push(rpc);
        }
        let mut results = collect(ctl, order.iter().copied().collect(), "pane.create")?;
        let mut ids = Vec::with_capacity(n);
        for rpc in order {
            let info = results.remove(&rpc).unwrap_or_default();
            let field = |k: &str| info[k].as_i64().map(|v| v as i32);
            let (Some(id), Some(pid), Some(sid)) =
                (info["id"].as_str(), field("pid"), field("sid"))
            else {
                return Err(format!("pane.create answered {info}"));
            };
            self.panes.push(PaneProc {
                pid,
                sid,
                start_token: info["start_token"].as_u64(),
            });
            ids.push(id.to_string());
        }
        Ok(ids)
    }

    /// `server.stop`, read to EOF; waits for the first generation (the
    /// reaper) to exit, then kills any pane process still alive. Returns
    /// how many there were.
    fn stop(&mut self) -> Res<usize> {
        self.stopped = true;
        let mut c = self.connect()?;
        c.call("server.stop", json!({}))
            .map_err(|e| format!("server.stop: {e}"))?;
        // The server closes the connection as its last act.
        while c.read_message().is_ok() {}
        let code = self.wait_child(STUCK)?;
        if code != Some(0) {
            return Err(format!(
                "the server's first generation (pid {}) exited with {code:?}",
                self.child.id()
            ));
        }
        Ok(self.kill_leftovers(Duration::from_secs(5)))
    }

    /// Waits for the first generation to exit; its exit code, or an error
    /// after `timeout`.
    fn wait_child(&mut self, timeout: Duration) -> Res<Option<i32>> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status.code()),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    return Err(format!(
                        "the server (pid {}) did not exit within {timeout:?}",
                        self.child.id()
                    ));
                }
                Err(e) => return Err(format!("waiting for the server: {e}")),
            }
        }
    }

    /// Gives pane processes `grace` to go (they get SIGHUP from the stop),
    /// then SIGKILLs the session of each still alive; returns the count.
    fn kill_leftovers(&mut self, grace: Duration) -> usize {
        let deadline = Instant::now() + grace;
        while self.panes.iter().any(PaneProc::alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut killed = 0;
        for p in self.panes.iter().filter(|p| p.alive()) {
            // SAFETY: kill has no memory-safety preconditions; `alive`
            // checked the start time, so the pid was not reused.
            unsafe { libc::kill(-p.sid, libc::SIGKILL) };
            killed += 1;
        }
        self.panes.clear();
        killed
    }
}

impl Drop for PtydServer {
    fn drop(&mut self) {
        if !self.stopped {
            let stopped = self.connect().and_then(|mut c| {
                c.call("server.stop", json!({}))
                    .map_err(|e| e.to_string())?;
                while c.read_message().is_ok() {}
                Ok(())
            });
            if stopped.is_err() {
                // The first generation forwards SIGTERM to the current one.
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            }
        }
        if self.wait_child(Duration::from_secs(30)).is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // A later generation that outlived the first (it should not).
        if let Some(serving) = self.serving.take()
            && serving.alive()
        {
            // SAFETY: kill has no memory-safety preconditions; `alive`
            // checked the start time, so the pid was not reused.
            unsafe { libc::kill(serving.pid, libc::SIGKILL) };
        }
        let killed = self.kill_leftovers(Duration::from_secs(2));
        if killed > 0 {
            eprintln!("killed {killed} pane process(es) left behind");
        }
    }
}
