//! The benchmark report: ptyd against tmux and a bare terminal, as users
//! experience it, in one command:
//!
//! ```text
//! cargo bench --bench report            # full, under 10 minutes on 2 cores
//! cargo bench --bench report -- --quick # smaller sizes, under 2 minutes
//! ```
//!
//! It builds nothing itself: the ptyd measured is `$PTYD_BIN`, else the
//! `ptyd` beside this bench in the target directory (`cargo bench` builds it
//! in release). tmux must be on the PATH (its rows fail otherwise).
//!
//! Sections, each measured by the code the single-purpose benches use
//! (`benches/common/`): end-to-end throughput through the real clients,
//! keystroke echo latency (idle and while a neighbour pane floods), server
//! memory, the terminal model against vt100, live-upgrade blackout, save
//! and restore, attach time. Runs of different terminals are interleaved
//! and medians reported, ratios first: absolute times on a shared machine
//! are noisy.
//!
//! Writes the table to stdout, the figures as JSON (`--json PATH`, default
//! `bench-report.json` in the target directory), `docs/benchmarks.md` and
//! `docs/benchmarks.svg` (`--docs DIR` elsewhere). A measurement that breaks
//! is marked FAILED in its row (never a number it did not measure) and
//! makes the run exit non-zero after writing everything. Every wait on
//! another process has a timeout.

#[path = "../common/mod.rs"]
mod common;
mod svg;
mod table;

use common::echo::{ECHO_SCRIPT, EchoSession, Latency, latency_stats};
use common::persist::{Kind, save_restore};
use common::pty::PtyProc;
use common::server::{PtydServer, STUCK, wait_all};
use common::throughput::{
    EndToEnd, Ptyd, Terminal, Throughput, end_to_end, generate_colour, protocol,
};
use common::tmux::Tmux;
use common::upgrade::{self, Plan, Sample};
use common::{
    Res, check_limits, find_ptyd, generate_lines, human_bytes, keep_dir, loadavg, median, ms,
    nproc, path_str, raised_nofile, rss_bytes, shell_quote, stats, us,
};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use table::{Cell, Goal, Outcome, Row, Section};

/// Terminal size of every pane and client in the throughput, latency,
/// memory and attach sections.
const COLS: u16 = 200;
const ROWS: u16 = 50;
/// Line length of the plain-text file (as `benches/core.rs`).
const LINE_LEN: usize = 100;
/// The issue's goals.
const THROUGHPUT_GOAL: f64 = 1.15;
const ECHO_SHARE_GOAL: f64 = 0.5;

struct Args {
    quick: bool,
    json: Option<PathBuf>,
    docs: Option<PathBuf>,
    /// Another ptyd binary measured beside this one (before/after).
    baseline: Option<PathBuf>,
    /// Only these sections (of [`SECTIONS`]).
    only: Option<Vec<String>>,
}

/// The sections `--only` can pick.
const SECTIONS: &[&str] = &[
    "throughput",
    "latency",
    "memory",
    "attach",
    "term",
    "upgrade",
    "persist",
];

/// What a mode measures.
struct Scale {
    mode: &'static str,
    mb: usize,
    runs: usize,
    keys: usize,
    key_rounds: usize,
    idle_panes: Vec<usize>,
    history_panes: usize,
    history_lines: usize,
    upgrade_panes: Vec<usize>,
    upgrades: usize,
    upgrade_lines: usize,
    persist_panes: Vec<usize>,
    term_mib: usize,
    term_rounds: usize,
    attach_reps: usize,
}

impl Scale {
    fn full() -> Scale {
        Scale {
            mode: "full",
            mb: 100,
            runs: 5,
            keys: 1000,
            key_rounds: 5,
            idle_panes: vec![1, 100, 1000],
            history_panes: 100,
            history_lines: 10_000,
            upgrade_panes: vec![10, 100, 1000],
            upgrades: 8,
            upgrade_lines: 1000,
            persist_panes: vec![10, 100, 1000],
            term_mib: 8,
            term_rounds: 5,
            attach_reps: 7,
        }
    }

    fn quick() -> Scale {
        Scale {
            mode: "quick",
            mb: 20,
            runs: 3,
            keys: 500,
            key_rounds: 5,
            idle_panes: vec![1, 100],
            history_panes: 100,
            history_lines: 10_000,
            upgrade_panes: vec![10, 100],
            upgrades: 3,
            upgrade_lines: 1000,
            persist_panes: vec![10, 100],
            term_mib: 2,
            term_rounds: 3,
            attach_reps: 3,
        }
    }
}

fn parse_args() -> Res<Args> {
    use lexopt::prelude::*;
    let mut args = Args {
        quick: false,
        json: None,
        docs: None,
        baseline: None,
        only: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("quick") => args.quick = true,
            Long("json") => args.json = Some(p.value().map_err(|e| e.to_string())?.into()),
            Long("docs") => args.docs = Some(p.value().map_err(|e| e.to_string())?.into()),
            Long("only") => {
                let v = p.value().map_err(|e| e.to_string())?;
                let picked: Vec<String> = v
                    .to_string_lossy()
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect();
                if let Some(bad) = picked.iter().find(|p| !SECTIONS.contains(&p.as_str())) {
                    return Err(format!(
                        "--only: no section {bad:?}; the sections are {}",
                        SECTIONS.join(",")
                    ));
                }
                args.only = Some(picked);
            }
            Long("baseline") => {
                let path: PathBuf = p.value().map_err(|e| e.to_string())?.into();
                if !path.is_file() {
                    return Err(format!("--baseline {} is not a file", path.display()));
                }
                args.baseline = Some(path);
            }
            // `cargo bench` passes --bench; a filter argument is meaningless here.
            Long("bench") | Value(_) => {}
            Short('h') | Long("help") => {
                println!(
                    "usage: cargo bench --bench report [-- [--quick] [--json PATH] [--docs DIR] [--baseline PTYD] [--only SECTION,...]]\nsections: {}",
                    SECTIONS.join(",")
                );
                std::process::exit(0);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    Ok(args)
}

fn main() {
    match run() {
        Ok(0) => {}
        Ok(failed) => {
            eprintln!("bench report: {failed} measurement(s) FAILED, see the rows marked so");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("bench report: error: {e}");
            std::process::exit(1);
        }
    }
}

/// Facts about the machine and the run, for the report's header.
struct Machine {
    date: String,
    cores: usize,
    cpu: String,
    kernel: String,
    tmux: String,
    ptyd: String,
    commit: String,
    load_start: String,
    load_end: String,
    took: Duration,
}

fn run() -> Res<usize> {
    let args = parse_args()?;
    let plan = if args.quick {
        Scale::quick()
    } else {
        Scale::full()
    };
    let started = Instant::now();
    let ptyd_bin = find_ptyd()?;
    let nofile = raised_nofile()?;
    let most = plan
        .idle_panes
        .iter()
        .chain(&plan.upgrade_panes)
        .chain(&plan.persist_panes)
        .copied()
        .max()
        .unwrap_or(0);
    check_limits(most)?;
    let mut machine = Machine {
        date: utc_now(),
        cores: nproc(),
        cpu: cpu_model(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "?".into(), |s| s.trim().to_string()),
        tmux: common::tmux::version().unwrap_or_else(|e| format!("none ({e})")),
        ptyd: stdout_of(&ptyd_bin, &["--version"], "?")
            .trim_start_matches("ptyd ")
            .to_string(),
        commit: stdout_of(
            Path::new("git"),
            &[
                "-C",
                env!("CARGO_MANIFEST_DIR"),
                "rev-parse",
                "--short",
                "HEAD",
            ],
            "unknown",
        ),
        load_start: loadavg(),
        load_end: String::new(),
        took: Duration::ZERO,
    };
    println!(
        "ptyd benchmark report ({} mode): {}, {} cores ({}), kernel {}, {}, load {}",
        plan.mode,
        machine.date,
        machine.cores,
        machine.cpu,
        machine.kernel,
        machine.tmux,
        machine.load_start
    );
    println!("ptyd {} at {}", machine.ptyd, ptyd_bin.display());
    let dir = tempfile::Builder::new()
        .prefix("ptyd-report-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let tmp = dir.path();

    let mut sections = Vec::new();
    let mut blackout: Vec<(usize, f64, f64)> = Vec::new();
    let mut bars: Vec<svg::Bar> = Vec::new();
    let mut goals = Vec::new();

    let step = |name: &str| {
        eprintln!(
            "[{:>5.1} s] {name} (load {})",
            started.elapsed().as_secs_f64(),
            loadavg()
        )
    };
    let wants = |key: &str| {
        args.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|k| k == key))
    };
    // The inputs of the throughput runs; the plain one also floods in the
    // latency runs.
    let inputs = if wants("throughput") || wants("latency") {
        Some(generate_inputs(&plan, tmp)?)
    } else {
        None
    };
    if let (true, Some(inputs)) = (wants("throughput"), &inputs) {
        step("throughput");
        let (s, g) = throughput(
            &plan,
            &ptyd_bin,
            args.baseline.as_deref(),
            nofile,
            tmp,
            inputs,
            &mut bars,
        );
        print!("\n{}", s.to_text());
        sections.push(s);
        goals.extend(g);
    }
    if let (true, Some(inputs)) = (wants("latency"), &inputs) {
        step("echo latency");
        let (s, g) = latency(&plan, &ptyd_bin, nofile, tmp, &inputs[0].path);
        print!("\n{}", s.to_text());
        sections.push(s);
        goals.extend(g);
    }
    if wants("memory") {
        step("memory");
        let s = memory(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("attach") {
        step("attach time");
        let s = attach_time(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("term") {
        step("terminal model");
        let s = term_model(&plan);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("upgrade") {
        step("live upgrade");
        let (s, g) = upgrades(&plan, &ptyd_bin, nofile, tmp, &mut blackout);
        print!("\n{}", s.to_text());
        sections.push(s);
        goals.extend(g);
    }
    if wants("persist") {
        step("save and restore");
        let s = persist(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    let mut crash = Section::new("crash_recovery", "Crash recovery", vec!["case", "time ms"]);
    crash.rows.push(Row {
        label: "server killed, panes back".into(),
        outcome: Outcome::NotMeasured("no crash recovery yet (issue 11)".into()),
    });
    print!("\n{}", crash.to_text());
    sections.push(crash);

    machine.load_end = loadavg();
    machine.took = started.elapsed();
    step("done");
    let failed: usize = sections.iter().map(Section::failures).sum();

    println!("\n== Goals (from issue 18 and the upgrade bench)");
    for g in &goals {
        println!("{:<6} {}: {}", g.verdict(), g.name, g.detail);
    }
    println!(
        "\nload average at start {}, at end {}; took {:.0} s",
        machine.load_start,
        machine.load_end,
        machine.took.as_secs_f64()
    );

    let json_path = match args.json {
        Some(p) => p,
        None => target_dir()?.join("bench-report.json"),
    };
    let json = to_json(&plan, &machine, &sections, &goals, failed);
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    write(&json_path, &text)?;
    // A partial run (--only) does not replace the committed report unless
    // asked to.
    let docs = match (args.docs, &args.only) {
        (Some(d), _) => Some(d),
        (None, None) => Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")),
        (None, Some(_)) => None,
    };
    match docs {
        Some(docs) => {
            std::fs::create_dir_all(&docs)
                .map_err(|e| format!("creating {}: {e}", docs.display()))?;
            let svg_path = docs.join("benchmarks.svg");
            write(
                &svg_path,
                &svg::draw(plan.mode, &machine.date, &bars, &blackout),
            )?;
            let md_path = docs.join("benchmarks.md");
            write(
                &md_path,
                &to_markdown(&plan, &machine, &sections, &goals, failed),
            )?;
            println!(
                "wrote {}, {} and {}",
                json_path.display(),
                md_path.display(),
                svg_path.display()
            );
        }
        None => println!(
            "wrote {} (a partial run: pass --docs DIR for the Markdown and SVG)",
            json_path.display()
        ),
    }
    keep_dir(dir);
    Ok(failed)
}

fn write(path: &Path, text: &str) -> Res<()> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

// ---------------------------------------------------------------- throughput

/// A file the throughput runs `cat` (the plain one also floods in the
/// latency runs).
struct Input {
    name: &'static str,
    path: PathBuf,
    bytes: u64,
    lines: u64,
}

fn generate_inputs(plan: &Scale, tmp: &Path) -> Res<[Input; 2]> {
    let bytes = plan.mb * 1_000_000;
    let plain = tmp.join("plain.txt");
    let colour = tmp.join("colour.txt");
    let lines = generate_lines(&plain, bytes, LINE_LEN)? as u64;
    let (cbytes, clines) = generate_colour(&colour, bytes)?;
    Ok([
        Input {
            name: "plain",
            path: plain,
            bytes: bytes as u64,
            lines,
        },
        Input {
            name: "colour",
            path: colour,
            bytes: cbytes,
            lines: clines,
        },
    ])
}

/// The end-to-end runs of one file: per terminal, every run's time.
struct Runs {
    times: Vec<Vec<Res<Throughput>>>,
}

fn throughput(
    plan: &Scale,
    ptyd_bin: &Path,
    baseline: Option<&Path>,
    nofile: u64,
    tmp: &Path,
    files: &[Input; 2],
    bars: &mut Vec<svg::Bar>,
) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "throughput",
        format!(
            "Output throughput: cat of {} MB in a {COLS}x{ROWS} pane",
            plan.mb
        ),
        vec![
            "file / terminal",
            "time vs bare",
            "MB/s",
            "median s",
            "bytes read",
            "server cpu s",
            "client cpu s",
        ],
    );
    s.note = format!(
        "End to end through the real clients: the pane prints READY and waits; once READY has \
         reached the bench (client attached and drawing) cat starts, and the clock stops when \
         the bench, reading the outer terminal as fast as it can, has seen the end marker printed \
         after cat. `ptyd attach` and `tmux attach` (tmux with a private socket and no config) \
         each run in a PTY the bench drains; bare is cat straight in such a PTY. The protocol \
         client row reads ptyd's frames itself (no `ptyd attach`), timed from pane.create to the \
         EXIT frame, as benches/core.rs does. {} interleaved runs per row; median time, and the \
         median of each run's ratio to the bare run of the same round. tmux redraws rather than \
         forwards, so its client writes fewer bytes.",
        plan.runs
    );
    if let Some(b) = baseline {
        s.note.push_str(&format!(
            " The baseline rows run another ptyd binary, server and client: {}.",
            b.display()
        ));
    }
    let mut goals = Vec::new();
    let server_dir = tmp.join("tput-server");
    let mut server = match PtydServer::start(ptyd_bin, &server_dir, nofile) {
        Ok(s) => s,
        Err(e) => {
            s.push("ptyd server", Err(e));
            return (s, tput_goals_failed());
        }
    };
    let mut baseline_server = match baseline
        .map(|b| PtydServer::start(b, &tmp.join("tput-baseline"), nofile))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            s.push("baseline ptyd server", Err(e));
            return (s, tput_goals_failed());
        }
    };
    let mut terminals = Terminal::ALL.to_vec();
    if baseline.is_some() {
        terminals.insert(2, Terminal::PtydBaseline);
    }
    let mut all: Vec<Runs> = Vec::new();
    let mut proto: Vec<Vec<Res<Throughput>>> = Vec::new();
    for Input {
        path: file,
        bytes: size,
        lines,
        ..
    } in files
    {
        // What cat writes through the tty: the file plus a CR per line.
        let want = size + lines;
        let mut runs = Runs {
            times: (0..terminals.len()).map(|_| Vec::new()).collect(),
        };
        let mut proto_runs = Vec::new();
        for run in 0..plan.runs {
            let mut e = EndToEnd {
                ptyd: Ptyd {
                    bin: ptyd_bin,
                    server: &mut server,
                },
                baseline: baseline
                    .zip(baseline_server.as_mut())
                    .map(|(bin, server)| Ptyd { bin, server }),
                tmp,
                size: (COLS, ROWS),
                run: run + all.len() * plan.runs,
            };
            for (i, &term) in terminals.iter().enumerate() {
                let min = if term == Terminal::TmuxAttach {
                    0
                } else {
                    want
                };
                runs.times[i].push(end_to_end(&mut e, term, file, min));
            }
            proto_runs.push(
                protocol(&mut server, file, tmp, (COLS, ROWS)).and_then(|t| {
                    if t.received == want {
                        Ok(t)
                    } else {
                        Err(format!("received {} bytes, expected {want}", t.received))
                    }
                }),
            );
        }
        all.push(runs);
        proto.push(proto_runs);
    }
    drop(server);
    drop(baseline_server);

    for (
        fi,
        Input {
            name, bytes: size, ..
        },
    ) in files.iter().enumerate()
    {
        let bare = &all[fi].times[0];
        let mut rows: Vec<(String, &Vec<Res<Throughput>>)> = terminals
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("{name}: {}", t.label()), &all[fi].times[i]))
            .collect();
        rows.push((format!("{name}: ptyd protocol client"), &proto[fi]));
        let mut ratios = Vec::new();
        for (label, runs) in rows {
            let cells = summarize(runs, bare, *size);
            ratios.push(cells.as_ref().map(|c| c.ratio).ok());
            if let Ok(Summary { mbs, .. }) = &cells {
                bars.push(svg::Bar {
                    group: (*name).to_string(),
                    label: label.split(": ").nth(1).unwrap_or("").to_string(),
                    value: *mbs,
                });
            }
            s.push(label, cells.map(|c| c.cells));
        }
        let ptyd = ratios[1];
        let tmux = terminals
            .iter()
            .position(|&t| t == Terminal::TmuxAttach)
            .and_then(|i| ratios[i]);
        goals.push(Goal {
            name: format!("throughput, {name} text: ptyd attach within {THROUGHPUT_GOAL}x of bare"),
            detail: ptyd.map_or("a run failed".into(), |r| {
                format!(
                    "{r:.2}x bare (tmux attach {})",
                    tmux.map_or("failed".into(), |t| format!("{t:.2}x"))
                )
            }),
            pass: ptyd.map(|r| r <= THROUGHPUT_GOAL),
        });
    }
    (s, goals)
}

/// The throughput goals when nothing could be measured.
fn tput_goals_failed() -> Vec<Goal> {
    ["plain", "colour"]
        .iter()
        .map(|name| Goal {
            name: format!("throughput, {name} text: ptyd attach within {THROUGHPUT_GOAL}x of bare"),
            detail: "the measurement failed".into(),
            pass: None,
        })
        .collect()
}

/// One terminal's runs of one file.
struct Summary {
    /// Median of each run's time over the bare run's of the same round.
    ratio: f64,
    mbs: f64,
    cells: Vec<Cell>,
}

fn summarize(runs: &[Res<Throughput>], bare: &[Res<Throughput>], size: u64) -> Res<Summary> {
    let ok: Vec<&Throughput> = runs
        .iter()
        .map(|r| r.as_ref().map_err(|e| e.clone()))
        .collect::<Res<_>>()?;
    let bare: Vec<&Throughput> = bare
        .iter()
        .map(|r| r.as_ref().map_err(|e| format!("bare pty run failed: {e}")))
        .collect::<Res<_>>()?;
    let secs = |t: &Throughput| t.elapsed.as_secs_f64();
    let ratio = median(
        ok.iter()
            .zip(&bare)
            .map(|(t, b)| secs(t) / secs(b))
            .collect(),
    );
    let time = median(ok.iter().map(|t| secs(t)).collect());
    let mbs = size as f64 / 1e6 / time;
    let cpu = |f: &dyn Fn(&Throughput) -> Option<Duration>| {
        let v: Vec<f64> = ok
            .iter()
            .filter_map(|t| f(t))
            .map(|d| d.as_secs_f64())
            .collect();
        if v.is_empty() {
            Cell::text("-")
        } else {
            Cell::num(median(v), 2)
        }
    };
    let cells = vec![
        Cell::ratio(ratio),
        Cell::num(mbs, 1),
        Cell::num(time, 3),
        Cell::num(median(ok.iter().map(|t| t.received as f64).collect()), 0),
        cpu(&|t| t.server_cpu),
        cpu(&|t| t.client_cpu),
    ];
    Ok(Summary { ratio, mbs, cells })
}

// ---------------------------------------------------------------- latency

/// A terminal being typed into.
struct EchoTarget {
    label: &'static str,
    session: EchoSession<PtyProc>,
    samples: Vec<Duration>,
}

fn echo_target(label: &'static str, proc: PtyProc) -> Res<EchoTarget> {
    Ok(EchoTarget {
        label,
        session: EchoSession::start(proc, COLS).map_err(|e| format!("{label}: {e}"))?,
        samples: Vec::new(),
    })
}

fn latency(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    tmp: &Path,
    flood_file: &Path,
) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "echo_latency",
        format!("Keystroke echo latency, {} keys per row", plan.keys),
        vec![
            "terminal",
            "p50 added / tmux added",
            "p99 added / tmux added",
            "p50 us",
            "p99 us",
            "max us",
        ],
    );
    s.note = format!(
        "One byte written into the outer terminal, timed until it comes back, against cat on a \
         raw-mode tty (so cat itself echoes, as a shell's line editor would): bare is that \
         program in a PTY, ptyd and tmux run it in a pane with `ptyd attach` / `tmux attach` \
         in a PTY. The three are typed into in {} interleaved rounds, after {} warm-up keys. \
         \"added / tmux added\" is (ptyd - bare) / (tmux - bare): the share of tmux's added latency \
         that ptyd adds (goal <= {ECHO_SHARE_GOAL}). With flood, another pane in the same \
         server (for bare: another PTY the bench drains) runs cat of the plain-text file in a \
         loop, unattached.",
        plan.key_rounds,
        common::echo::WARMUP_KEYS
    );
    let mut goals = Vec::new();
    for flood in [false, true] {
        let tag = if flood { "flood" } else { "idle" };
        let lats = latency_set(
            plan,
            ptyd_bin,
            nofile,
            &tmp.join(format!("lat-{tag}")),
            flood_file,
            flood,
        );
        let suffix = if flood { ", neighbour floods" } else { "" };
        let f = |i: usize, p: fn(&Latency) -> Duration| lats[i].as_ref().map(|l| us(p(l))).ok();
        // (share of tmux's addition that ptyd adds, goal met): the
        // goal is compared directly, since a tmux that adds nothing
        // (or less than nothing, in noise) gives no share to divide.
        let share = |p: fn(&Latency) -> Duration| -> Option<(f64, bool)> {
            let (b, d, t) = (f(0, p)?, f(1, p)?, f(2, p)?);
            Some(((d - b) / (t - b), d - b <= ECHO_SHARE_GOAL * (t - b)))
        };
        let (g50, g99) = (share(|l| l.p50), share(|l| l.p99));
        let (s50, s99) = (g50.map(|g| g.0), g99.map(|g| g.0));
        for (i, l) in lats.iter().enumerate() {
            let label = ["bare pty", "ptyd attach", "tmux attach"][i];
            let share_cell = |v: Option<f64>| {
                if i == 1 {
                    v.map_or(Cell::text("-"), |v| Cell::num(v, 2))
                } else {
                    Cell::text("")
                }
            };
            s.push(
                format!("{label}{suffix}"),
                l.as_ref().map_err(|e| e.clone()).map(|l| {
                    vec![
                        share_cell(s50),
                        share_cell(s99),
                        Cell::num(us(l.p50), 0),
                        Cell::num(us(l.p99), 0),
                        Cell::num(us(l.max), 0),
                    ]
                }),
            );
        }
        let detail = match (s50, s99) {
            (Some(a), Some(b)) => format!(
                "ptyd adds {a:.2} (p50) and {b:.2} (p99) of tmux's added latency; p50 bare/ptyd/tmux {} us, p99 {} us",
                fmt3(&lats, |l| l.p50),
                fmt3(&lats, |l| l.p99)
            ),
            _ => "a row failed".into(),
        };
        goals.push(Goal {
            name: format!("echo{suffix}: ptyd adds <= {ECHO_SHARE_GOAL} of what tmux adds over bare (p50 and p99)"),
            detail,
            pass: g50.zip(g99).map(|(a, b)| a.1 && b.1),
        });
    }
    (s, goals)
}

fn fmt3(lats: &[Res<Latency>], p: fn(&Latency) -> Duration) -> String {
    lats.iter()
        .map(|l| {
            l.as_ref()
                .map_or("-".into(), |l| format!("{:.0}", us(p(l))))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Bare, ptyd attach and tmux attach, typed into in interleaved rounds.
/// Each is set up on its own, so one that breaks fails only its row.
fn latency_set(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    dir: &Path,
    flood_file: &Path,
    flood: bool,
) -> Vec<Res<Latency>> {
    let flood_script =
        path_str(flood_file).map(|p| format!("while :; do cat {}; done", shell_quote(p)));
    let flood_script = flood.then_some(flood_script).transpose();
    // Bare, with a neighbour PTY drained as a terminal would.
    let mut flooder = None;
    let bare = (|| {
        if let Some(script) = flood_script.clone()? {
            let p = PtyProc::spawn(&["sh", "-c", &script], &[], COLS, ROWS)?;
            let mut master = p.master.try_clone().map_err(|e| e.to_string())?;
            // Ends with EIO when `p` is dropped.
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while matches!(master.read(&mut buf), Ok(n) if n > 0) {}
            });
            flooder = Some(p);
        }
        let p = PtyProc::spawn(&["sh", "-c", ECHO_SCRIPT], &[], COLS, ROWS)?;
        echo_target("bare pty", p)
    })();
    // ptyd.
    let mut server = PtydServer::start(ptyd_bin, dir, nofile);
    let ptyd =
        server.as_mut().map_err(|e| e.clone()).and_then(|server| {
            let mut ctl = server.connect()?;
            let cwd = path_str(dir)?;
            let mut scripts = vec![ECHO_SCRIPT.to_string()];
            scripts.extend(flood_script.clone()?);
            let ids = server.create_panes(&mut ctl, scripts.len(), |i| {
            json!({ "argv": ["sh", "-c", scripts[i]], "cols": COLS, "rows": ROWS, "cwd": cwd })
        })?;
            let bin = path_str(ptyd_bin)?;
            let ns = server.paths.namespace.clone();
            let mut env = server.client_env()?;
            env.push(("TERM", Path::new("xterm-256color")));
            let client = PtyProc::spawn(&[bin, "-L", &ns, "attach", &ids[0]], &env, COLS, ROWS)?;
            echo_target("ptyd attach", client)
        });
    // tmux.
    let tmux = Tmux::new(dir, "lat", &[]);
    let tmux_target = tmux.as_ref().map_err(|e| e.clone()).and_then(|tmux| {
        tmux.new_session("echo", ECHO_SCRIPT, COLS, ROWS)?;
        if let Some(script) = flood_script.clone()? {
            tmux.new_session("flood", &script, COLS, ROWS)?;
        }
        echo_target("tmux attach", tmux.attach_client("echo", COLS, ROWS)?)
    });

    let mut targets = [bare, ptyd, tmux_target];
    let per_round = plan.keys.div_ceil(plan.key_rounds);
    for _ in 0..plan.key_rounds {
        for slot in &mut targets {
            let Ok(t) = slot else { continue };
            match t.session.type_keys(per_round) {
                Ok(v) => t.samples.extend(v),
                Err(e) => *slot = Err(format!("{}: {e}", t.label)),
            }
        }
    }
    let mut out: Vec<Res<Latency>> = targets
        .into_iter()
        .map(|t| t.and_then(|t| latency_stats(t.samples)))
        .collect();
    drop(flooder);
    if let Ok(server) = &mut server
        && let Err(e) = server.stop()
    {
        out[1] = Err(format!("stopping the server: {e}"));
    }
    drop(tmux);
    out
}

// ---------------------------------------------------------------- memory

/// `lines` lines of what a build or a log prints: words, a few in colour.
fn typical_output(path: &Path, lines: usize, marker: &str) -> Res<()> {
    let plain = common::term::plain_text(lines * 80, b"\n");
    let colour = common::term::sgr_text(lines * 20, b"\n");
    let mut out = Vec::new();
    let (mut p, mut c) = (plain.split(|&b| b == b'\n'), colour.split(|&b| b == b'\n'));
    for i in 0..lines {
        let line = if i % 5 == 4 { c.next() } else { p.next() }.unwrap_or(b"-");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.extend_from_slice(marker.as_bytes());
    out.push(b'\n');
    std::fs::write(path, out).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn mib(b: u64) -> Cell {
    Cell::num(b as f64 / (1 << 20) as f64, 1)
}

fn memory(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
    let mut s = Section::new(
        "memory",
        "Server memory (RSS)",
        vec![
            "load",
            "tmux / ptyd",
            "ptyd MiB",
            "ptyd reaper MiB",
            "tmux MiB",
        ],
    );
    s.note = format!(
        "VmRSS of the server process (/proc/PID/status), and of ptyd's reaper (the first server \
         generation, which stays behind after a live upgrade; measured once its 2 s probation \
         is over and it has let go of the panes) where there is one; the ratio compares tmux \
         with their sum. Idle panes \
         run sleep; they are added to one server, measured at each count. The history row: \
         {} panes each print {} lines of typical output (words, every fifth line coloured) \
         plus a screenful, so each holds a full {}-line scrollback; tmux with history-limit \
         {}. Panes are {COLS}x{ROWS}.",
        plan.history_panes, plan.history_lines, plan.history_lines, plan.history_lines
    );
    let idle = memory_idle(plan, ptyd_bin, nofile, &tmp.join("mem-idle"));
    for (i, n) in plan.idle_panes.iter().enumerate() {
        let row = idle
            .as_ref()
            .map_err(|e| e.clone())
            .and_then(|v| v[i].clone());
        s.push(
            format!("{n} idle pane{}", if *n == 1 { "" } else { "s" }),
            row.map(|(p, t)| {
                vec![
                    Cell::ratio(t as f64 / p as f64),
                    mib(p),
                    Cell::text("-"),
                    mib(t),
                ]
            }),
        );
    }
    let label = format!(
        "{} panes x {} lines",
        plan.history_panes, plan.history_lines
    );
    match memory_history(plan, ptyd_bin, nofile, &tmp.join("mem-hist")) {
        Ok((p, after, t)) => {
            s.push(
                label.clone(),
                Ok(vec![
                    Cell::ratio(t as f64 / p as f64),
                    mib(p),
                    Cell::text("-"),
                    mib(t),
                ]),
            );
            s.push(
                format!("{label}, after a live upgrade"),
                after.map(|(p2, r)| {
                    vec![
                        Cell::ratio(t as f64 / (p2 + r) as f64),
                        mib(p2),
                        mib(r),
                        mib(t),
                    ]
                }),
            );
        }
        Err(e) => {
            s.push(label.clone(), Err(e.clone()));
            s.push(format!("{label}, after a live upgrade"), Err(e));
        }
    }
    s
}

type MemPair = Res<(u64, u64)>;

fn memory_idle(plan: &Scale, ptyd_bin: &Path, nofile: u64, dir: &Path) -> Res<Vec<MemPair>> {
    let mut server = PtydServer::start(ptyd_bin, dir, nofile)?;
    let mut ctl = server.connect()?;
    let tmux = Tmux::new(dir, "mem", &["history-limit 10000"])?;
    tmux.new_session("idle", "sleep 100000", COLS, ROWS)?;
    let tmux_pid = tmux.server_pid()?;
    let cwd = path_str(dir)?.to_string();
    let mut have = 0;
    let mut out = Vec::new();
    for &n in &plan.idle_panes {
        let add = n - have;
        let r =
            (|| {
                server.create_panes(&mut ctl, add, |_| {
                json!({ "argv": ["sleep", "100000"], "cols": COLS, "rows": ROWS, "cwd": cwd })
            })?;
                // tmux's first pane came with the session.
                let tmux_add = if have == 0 { add - 1 } else { add };
                tmux.new_windows("idle", "sleep 100000", tmux_add)?;
                let panes = tmux.run(&["list-panes", "-a"])?.lines().count();
                if panes != n {
                    return Err(format!("tmux has {panes} panes, not {n}"));
                }
                // A round trip, so the server has finished with the requests.
                ctl.call("server.status", json!({}))
                    .map_err(|e| format!("server.status: {e}"))?;
                Ok((rss_bytes(server.serving_pid)?, rss_bytes(tmux_pid)?))
            })();
        have = n;
        let failed = r.is_err();
        out.push(r);
        if failed {
            break;
        }
    }
    while out.len() < plan.idle_panes.len() {
        out.push(Err("an earlier count failed".into()));
    }
    drop(ctl);
    server.stop()?;
    Ok(out)
}

/// (ptyd, after an upgrade (new server, reaper), tmux).
fn memory_history(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    dir: &Path,
) -> Res<(u64, MemPair, u64)> {
    const MARKER: &str = "ptyd-bench-history-end";
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let file = dir.join("history.txt");
    // A screenful more, so the scrollback holds the full count.
    typical_output(&file, plan.history_lines + usize::from(ROWS), MARKER)?;
    let n = plan.history_panes;
    let mut server = PtydServer::start(ptyd_bin, dir, nofile)?;
    let mut ctl = server.connect()?;
    let ids = server.create_cat_panes(&mut ctl, n, &file, dir, (COLS, ROWS))?;
    wait_all(&mut ctl, &ids, MARKER)?;
    let cap = ctl
        .call("pane.capture", json!({ "target": ids[0] }))
        .map_err(|e| format!("pane.capture: {e}"))?;
    if cap["scrollback_lines"].as_u64() < Some(plan.history_lines as u64) {
        return Err(format!(
            "pane {} holds {} lines of scrollback, not {}",
            ids[0], cap["scrollback_lines"], plan.history_lines
        ));
    }
    let ptyd = rss_bytes(server.serving_pid)?;
    let after = upgrade::upgrade_server(&mut server, &mut ctl, n, false)
        .and_then(|_| {
            ctl.call("server.status", json!({}))
                .map_err(|e| format!("server.status after the upgrade: {e}"))
        })
        .and_then(|_| wait_released(server.child.id()))
        .and_then(|_| server.rss())
        .and_then(|(p, r)| Ok((p, r.ok_or("no reaper after the upgrade")?)));
    drop(ctl);
    server.stop()?;

    let tmux = Tmux::new(dir, "hist", &["history-limit 10000"])?;
    let script = format!("cat {}; exec sleep 100000", shell_quote(path_str(&file)?));
    tmux.new_session("hist", &script, COLS, ROWS)?;
    tmux.new_windows("hist", &script, n - 1)?;
    let panes: Vec<String> = tmux
        .run(&["list-panes", "-a", "-F", "#{pane_id}"])?
        .lines()
        .map(str::to_string)
        .collect();
    if panes.len() != n {
        return Err(format!("tmux has {} panes, not {n}", panes.len()));
    }
    let deadline = Instant::now() + STUCK;
    for p in &panes {
        while !tmux.run(&["capture-pane", "-p", "-t", p])?.contains(MARKER) {
            if Instant::now() > deadline {
                return Err(format!("tmux pane {p} never showed the end of its output"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let tmux_rss = rss_bytes(tmux.server_pid()?)?;
    Ok((ptyd, after, tmux_rss))
}

/// Waits for the end of the old server's probation: the first generation,
/// now the reaper, has let go of every PTY master. There is no event for
/// it, so this polls.
fn wait_released(reaper: u32) -> Res<()> {
    let deadline = Instant::now() + STUCK;
    loop {
        let fds = upgrade::FdCount::of(reaper)?;
        if fds.ptmx == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the reaper (pid {reaper}) still holds {} PTY masters after {STUCK:?}",
                fds.ptmx
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------- attach time

fn attach_time(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
    let mut s = Section::new(
        "attach_time",
        format!("Attach time with {} lines of history", plan.history_lines),
        vec!["client", "vs tmux", "median ms", "max ms"],
    );
    s.note = format!(
        "A {COLS}x{ROWS} pane that printed {} lines (so its scrollback is full) and sleeps; \
         the client is started in a PTY and timed until the pane's last line has reached \
         that terminal: the first screen drawn. Median of {} attaches, ptyd and tmux \
         interleaved.",
        plan.history_lines, plan.attach_reps
    );
    match attach_runs(plan, ptyd_bin, nofile, &tmp.join("attach")) {
        Ok([p, t]) => {
            let med = |v: &Res<Vec<f64>>| v.as_ref().map(|v| median(v.clone())).ok();
            let ratio = med(&p).zip(med(&t)).map_or(f64::NAN, |(p, t)| p / t);
            for (label, v) in [("ptyd attach", p), ("tmux attach", t)] {
                let is_ptyd = label.starts_with("ptyd");
                s.push(
                    label,
                    v.map(|v| {
                        vec![
                            if is_ptyd {
                                Cell::ratio(ratio)
                            } else {
                                Cell::text("")
                            },
                            Cell::num(median(v.clone()), 1),
                            Cell::num(stats(v).max, 1),
                        ]
                    }),
                );
            }
        }
        Err(e) => {
            s.push("ptyd attach", Err(e.clone()));
            s.push("tmux attach", Err(e));
        }
    }
    s
}

fn attach_runs(plan: &Scale, ptyd_bin: &Path, nofile: u64, dir: &Path) -> Res<[Res<Vec<f64>>; 2]> {
    const MARKER: &str = "\u{2592}ptyd-bench-attach\u{2592}";
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let file = dir.join("history.txt");
    typical_output(&file, plan.history_lines + usize::from(ROWS), MARKER)?;
    let mut server = PtydServer::start(ptyd_bin, dir, nofile)?;
    let mut ctl = server.connect()?;
    let ids = server.create_cat_panes(&mut ctl, 1, &file, dir, (COLS, ROWS))?;
    wait_all(&mut ctl, &ids, MARKER)?;
    let tmux = Tmux::new(dir, "attach", &["history-limit 10000"])?;
    let script = format!("cat {}; exec sleep 100000", shell_quote(path_str(&file)?));
    tmux.new_session("hist", &script, COLS, ROWS)?;
    let deadline = Instant::now() + STUCK;
    while !tmux
        .run(&["capture-pane", "-p", "-t", "hist"])?
        .contains(MARKER)
    {
        if Instant::now() > deadline {
            return Err("the tmux pane never showed the end of its output".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let bin = path_str(ptyd_bin)?;
    let ns = server.paths.namespace.clone();
    let mut env = server.client_env()?;
    env.push(("TERM", Path::new("xterm-256color")));
    let (mut p, mut t) = (Ok(Vec::new()), Ok(Vec::new()));
    for _ in 0..plan.attach_reps {
        let once = |spawn: &dyn Fn() -> Res<PtyProc>| -> Res<f64> {
            let t0 = Instant::now();
            let mut c = spawn()?;
            let (_, at) = c.read_until(MARKER.as_bytes(), STUCK)?;
            Ok(ms(at.duration_since(t0)))
        };
        if let Ok(v) = &mut p {
            match once(&|| PtyProc::spawn(&[bin, "-L", &ns, "attach", &ids[0]], &env, COLS, ROWS)) {
                Ok(x) => v.push(x),
                Err(e) => p = Err(e),
            }
        }
        if let Ok(v) = &mut t {
            match once(&|| tmux.attach_client("hist", COLS, ROWS)) {
                Ok(x) => v.push(x),
                Err(e) => t = Err(e),
            }
        }
    }
    drop(ctl);
    server.stop()?;
    Ok([p, t])
}

// ---------------------------------------------------------------- term model

fn term_model(plan: &Scale) -> Section {
    let mut s = Section::new(
        "terminal_model",
        "Terminal model against the vt100 crate",
        vec![
            "input",
            "ptyd / vt100",
            "ptyd MB/s",
            "vt100 MB/s",
            "vt100 no-scrollback MB/s",
        ],
    );
    s.note = format!(
        "In this process, 80x24 with 10,000 lines of scrollback, {} MiB per input fed in 16 KiB \
         chunks, best of {} interleaved runs in thread CPU time (benches/term.rs, which also \
         measures memory).",
        plan.term_mib, plan.term_rounds
    );
    let inputs = common::term::inputs(plan.term_mib << 20);
    for c in common::term::compare(&inputs, plan.term_rounds) {
        s.push(
            c.input,
            Ok(vec![
                Cell::ratio(c.ours / c.vt100),
                Cell::num(c.ours, 1),
                Cell::num(c.vt100, 1),
                Cell::num(c.vt100_no_scrollback, 1),
            ]),
        );
    }
    s
}

// ---------------------------------------------------------------- upgrade

fn upgrades(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    tmp: &Path,
    blackout: &mut Vec<(usize, f64, f64)>,
) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "upgrade",
        "Live upgrade (server.upgrade to the same binary)",
        vec![
            "panes",
            "blackout p50 ms",
            "blackout p99 ms",
            "total p50 ms",
            "total p99 ms",
            "manifest",
        ],
    );
    s.note = format!(
        "Each pane ({}x{}) holds {} lines of scrollback. {} upgrades per pane count after one \
         warm-up; blackout is the server's own figure (first pane paused to the new server \
         reading), total the client's round trip of server.upgrade (benches/upgrade.rs has the \
         phases and scheduler figures).",
        upgrade::COLS,
        upgrade::ROWS,
        plan.upgrade_lines,
        plan.upgrades
    );
    let mut goals = Vec::new();
    let file = tmp.join("upgrade-scrollback.txt");
    let printed = plan.upgrade_lines + usize::from(upgrade::ROWS) - 1;
    if let Err(e) = upgrade::generate(&file, printed, 0) {
        s.push("input file", Err(e));
        return (s, goals);
    }
    for &n in &plan.upgrade_panes {
        let p = Plan {
            upgrades: plan.upgrades,
            lines: plan.upgrade_lines,
            model: false,
        };
        let r = upgrade::measure(ptyd_bin, &tmp.join(format!("up{n}")), nofile, n, &p, &file);
        let r = r.and_then(|m| {
            if m.leftovers > 0 {
                Err(format!(
                    "{} pane process(es) outlived the server",
                    m.leftovers
                ))
            } else {
                Ok(m)
            }
        });
        let cells = r.map(|m| {
            let b = stats(m.samples.iter().map(Sample::blackout_ms).collect());
            let t = stats(m.samples.iter().map(Sample::total_ms).collect());
            blackout.push((n, b.p50, b.p99));
            if let Some(target) = upgrade::target_for(n) {
                goals.push(Goal {
                    name: format!("upgrade blackout at {n} panes <= {target} ms (p50 and p99)"),
                    detail: format!("p50 {:.2} ms, p99 {:.2} ms", b.p50, b.p99),
                    pass: Some(b.p50 <= target && b.p99 <= target),
                });
            }
            vec![
                Cell::num(b.p50, 2),
                Cell::num(b.p99, 2),
                Cell::num(t.p50, 2),
                Cell::num(t.p99, 2),
                Cell::text(
                    m.manifest_bytes
                        .iter()
                        .copied()
                        .max()
                        .map_or("?".into(), human_bytes),
                ),
            ]
        });
        if let (Err(_), Some(target)) = (&cells, upgrade::target_for(n)) {
            goals.push(Goal {
                name: format!("upgrade blackout at {n} panes <= {target} ms (p50 and p99)"),
                detail: "the measurement failed".into(),
                pass: None,
            });
        }
        s.push(n.to_string(), cells);
    }
    (s, goals)
}

// ---------------------------------------------------------------- persist

fn persist(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
    let mut s = Section::new(
        "save_restore",
        "Save and restore",
        vec![
            "panes",
            "save ms",
            "loop busy ms",
            "disk thread ms",
            "restore: ready ms",
            "restore: all running ms",
            "session.json",
            "history",
        ],
    );
    s.note = format!(
        "Panes running sleep (restore: rerun), four to a tab in nested splits \
         (benches/persist.rs, which also has shells and panes with full histories). Save: \
         median of {} server.save round trips, how long the loop was busy serializing, and the \
         disk thread's own time. Restore: a cold start in the same namespace, from spawning \
         the server to its ready byte and to every pane running.",
        common::persist::SAVES
    );
    for &n in &plan.persist_panes {
        let r = save_restore(
            ptyd_bin,
            &tmp.join(format!("persist{n}")),
            nofile,
            n,
            Kind::Sleep,
        );
        s.push(
            n.to_string(),
            r.map(|r| {
                vec![
                    Cell::num(r.save_client_ms, 1),
                    Cell::num(r.loop_busy_ms, 1),
                    Cell::num(r.save_disk_ms, 0),
                    Cell::num(r.restore_ready_ms, 1),
                    Cell::num(r.restore_running_ms, 1),
                    Cell::text(human_bytes(r.session_bytes)),
                    Cell::text(human_bytes(r.history_bytes)),
                ]
            }),
        );
    }
    s
}

// ---------------------------------------------------------------- output

fn to_json(
    plan: &Scale,
    m: &Machine,
    sections: &[Section],
    goals: &[Goal],
    failed: usize,
) -> Value {
    let mut secs = serde_json::Map::new();
    for s in sections {
        secs.insert(s.key.to_string(), s.to_json());
    }
    json!({
        "mode": plan.mode,
        "date": m.date,
        "machine": {
            "cores": m.cores,
            "cpu": m.cpu,
            "kernel": m.kernel,
            "tmux": m.tmux,
            "load_average_start": m.load_start,
            "load_average_end": m.load_end,
        },
        "ptyd": { "version": m.ptyd, "commit": m.commit },
        "took_s": m.took.as_secs_f64(),
        "failed": failed,
        "goals": goals.iter().map(|g| json!({
            "goal": g.name, "verdict": g.verdict(), "detail": g.detail,
        })).collect::<Vec<_>>(),
        "sections": secs,
    })
}

fn to_markdown(
    plan: &Scale,
    m: &Machine,
    sections: &[Section],
    goals: &[Goal],
    failed: usize,
) -> String {
    let mut out = String::from("# Benchmarks\n\n");
    if plan.mode == "quick" {
        out.push_str(
            "**QUICK MODE**: smaller sizes and fewer repetitions than the full report; \
             figures are indicative only.\n\n",
        );
    }
    out.push_str(&format!(
        "Generated by `cargo bench --bench report{}` on {} ({} mode, took {:.0} s). \
         Rerun it on your machine to check these figures; it rewrites this file, \
         `docs/benchmarks.svg` and `bench-report.json` in the target directory.\n\n",
        if plan.mode == "quick" {
            " -- --quick"
        } else {
            ""
        },
        m.date,
        plan.mode,
        m.took.as_secs_f64()
    ));
    out.push_str(&format!(
        "Machine: {} cores ({}), Linux {}, {}; ptyd {} (commit {}). \
         Load average (1/5/15 min) at start {}, at end {}.\n\n",
        m.cores, m.cpu, m.kernel, m.tmux, m.ptyd, m.commit, m.load_start, m.load_end
    ));
    if failed > 0 {
        out.push_str(&format!(
            "**{failed} measurement(s) FAILED** in this run; their rows say why.\n\n"
        ));
    }
    out.push_str("![throughput and upgrade blackout](benchmarks.svg)\n\n## Goals\n\n");
    out.push_str("| verdict | goal | figures |\n|---|---|---|\n");
    for g in goals {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            g.verdict(),
            g.name,
            g.detail
        ));
    }
    out.push('\n');
    for s in sections {
        out.push_str(&s.to_markdown());
    }
    out
}

/// The target directory this bench runs from (`target/release/deps/..`).
fn target_dir() -> Res<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} has no target directory above it", exe.display()))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The trimmed stdout of a short command, or `fallback` when it fails.
fn stdout_of(program: &Path, args: &[&str], fallback: &str) -> String {
    let mut c = std::process::Command::new(program);
    c.args(args);
    common::output_within(c, Duration::from_secs(10), &program.display().to_string())
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || fallback.into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )
}

/// Now in UTC, `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}
