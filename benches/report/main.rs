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

mod attach_time;
#[path = "../common/mod.rs"]
mod common;
mod crash_recovery;
mod history_depth;
mod latency;
mod live_upgrade;
mod memory;
mod save_restore;
mod split_cpu;
mod split_echo;
mod split_view;
mod svg;
mod table;
mod term_model;
mod throughput;

use common::{Res, check_limits, find_ptyd, keep_dir, loadavg, nproc, raised_nofile};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use table::{Goal, Section};

/// Terminal size of every pane and client in the throughput, latency,
/// memory and attach sections.
const COLS: u16 = 200;
const ROWS: u16 = 50;
/// Line length of the plain-text file (as `benches/core.rs`).
const LINE_LEN: usize = 100;
/// The goals the report checks each run against.
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
    "split",
    "split_echo",
    "split_cpu",
    "latency",
    "memory",
    "attach",
    "history",
    "term",
    "upgrade",
    "persist",
    "crash",
];

/// The sections that measure the tab view, reported together under one
/// heading ([`TAB_VIEW_HEADING`]).
const TAB_VIEW_SECTIONS: &[&str] = &["split", "split_echo", "split_cpu"];
const TAB_VIEW_HEADING: &str = "## Tab view";

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
    crash_panes: Vec<usize>,
    crash_rounds: usize,
    crash_lines: usize,
    /// Deep history: panes, lines each, scroll-mode pages timed, searches
    /// and captures timed.
    depth_panes: usize,
    depth_lines: usize,
    depth_reps: usize,
    depth_search_reps: usize,
    /// The live upgrade's and crash recovery's deep-history run: panes,
    /// history lines each.
    deep_panes: usize,
    deep_lines: usize,
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
            crash_panes: vec![10, 100, 1000],
            crash_rounds: 8,
            crash_lines: 200,
            depth_panes: 10,
            depth_lines: 1_000_000,
            depth_reps: 50,
            depth_search_reps: 5,
            deep_panes: 1000,
            deep_lines: 100_000,
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
            crash_panes: vec![10, 100],
            crash_rounds: 3,
            crash_lines: 200,
            depth_panes: 1,
            depth_lines: 1_000_000,
            depth_reps: 50,
            depth_search_reps: 3,
            deep_panes: 100,
            deep_lines: 10_000,
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
    // The echo and throughput rows run this binary as their relay floor.
    common::relay::run_if_relay();
    common::pace::run_if_pacer();
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
        .chain(&plan.crash_panes)
        .chain([&plan.deep_panes])
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
    let mut tab_bars = svg::TabBars::default();
    let mut goals = Vec::new();
    // Which of `goals` are the tab view's.
    let mut tab_goals: Vec<usize> = Vec::new();

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
    let inputs = if wants("throughput") || wants("split") || wants("latency") || wants("crash") {
        Some(throughput::generate_inputs(&plan, tmp)?)
    } else {
        None
    };
    if let (true, Some(inputs)) = (wants("throughput"), &inputs) {
        step("throughput");
        let (s, g) = throughput::throughput(
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
    if let (true, Some(inputs)) = (wants("split"), &inputs) {
        step("split-view throughput");
        let (s, g) = split_view::split_view(
            &plan,
            &ptyd_bin,
            nofile,
            tmp,
            inputs,
            &mut tab_bars.throughput,
        );
        print!("\n{}", s.to_text());
        sections.push(s);
        tab_goals.extend(goals.len()..goals.len() + g.len());
        goals.extend(g);
    }
    if wants("split_echo") {
        step("split-view echo");
        let (s, g) = split_echo::split_echo(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
        tab_goals.extend(goals.len()..goals.len() + g.len());
        goals.extend(g);
    }
    if wants("split_cpu") {
        step("split-view server cpu");
        let s = split_cpu::split_cpu(&plan, &ptyd_bin, nofile, tmp, &mut tab_bars.cpu);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if let (true, Some(inputs)) = (wants("latency"), &inputs) {
        step("echo latency");
        let (s, g) = latency::latency(
            &plan,
            &ptyd_bin,
            args.baseline.as_deref(),
            nofile,
            tmp,
            &inputs[0].path,
        );
        print!("\n{}", s.to_text());
        sections.push(s);
        goals.extend(g);
    }
    if wants("memory") {
        step("memory");
        let s = memory::memory(&plan, &ptyd_bin, args.baseline.as_deref(), nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("attach") {
        step("attach time");
        let s = attach_time::attach_time(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("history") {
        step("deep history");
        let (s, g) =
            history_depth::history_depth(&plan, &ptyd_bin, args.baseline.as_deref(), nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
        goals.extend(g);
    }
    if wants("term") {
        step("terminal model");
        let s = term_model::term_model(&plan);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("upgrade") {
        step("live upgrade");
        let (s, g) = live_upgrade::upgrades(&plan, &ptyd_bin, nofile, tmp, &mut blackout);
        print!("\n{}", s.to_text());
        sections.push(s);
        goals.extend(g);
    }
    if wants("persist") {
        step("save and restore");
        let s = save_restore::persist(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }
    if wants("crash") {
        step("crash recovery");
        if let Some(inputs) = &inputs {
            let (s, g) = crash_recovery::keeper_costs(&plan, &ptyd_bin, nofile, tmp, inputs);
            print!("\n{}", s.to_text());
            sections.push(s);
            goals.extend(g);
        }
        let s = crash_recovery::crashes(&plan, &ptyd_bin, nofile, tmp);
        print!("\n{}", s.to_text());
        sections.push(s);
    }

    machine.load_end = loadavg();
    machine.took = started.elapsed();
    step("done");
    let failed: usize = sections.iter().map(Section::failures).sum();

    println!("\n== Goals");
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
    // asked to; one of the tab view's sections only replaces its part.
    let docs = match (args.docs, &args.only) {
        (Some(d), _) => Some(d),
        (None, None) => Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")),
        (None, Some(_)) => None,
    };
    let tab_only = args
        .only
        .as_ref()
        .is_some_and(|o| o.iter().all(|k| TAB_VIEW_SECTIONS.contains(&k.as_str())));
    let tab_view =
        |goals_shown: &[&Goal]| tab_view_markdown(&plan, &machine, &sections, goals_shown);
    let tab_goal_list: Vec<&Goal> = tab_goals.iter().map(|&i| &goals[i]).collect();
    match docs {
        Some(docs) if tab_only => {
            let md_path = docs.join("benchmarks.md");
            let old = std::fs::read_to_string(&md_path)
                .map_err(|e| format!("reading {}: {e}", md_path.display()))?;
            write(&md_path, &splice_tab_view(&old, &tab_view(&tab_goal_list)))?;
            println!(
                "wrote {} and the tab view's part of {}",
                json_path.display(),
                md_path.display()
            );
        }
        Some(docs) => {
            std::fs::create_dir_all(&docs)
                .map_err(|e| format!("creating {}: {e}", docs.display()))?;
            let svg_path = docs.join("benchmarks.svg");
            write(
                &svg_path,
                &svg::draw(plan.mode, &machine.date, &bars, &blackout, &tab_bars),
            )?;
            let md_path = docs.join("benchmarks.md");
            let mut md = to_markdown(&plan, &machine, &sections, &goals, failed);
            if sections.iter().any(|s| TAB_VIEW_SECTIONS.contains(&s.key)) {
                md.push_str(&tab_view(&tab_goal_list));
            }
            md.push_str(&kept_sections(&md_path));
            write(&md_path, &md)?;
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

/// The hand-written part of benchmarks.md, from its first heading in
/// `KEPT_HEADINGS` to the end: figures measured by other benches and by
/// hand, which this report does not produce and must not drop.
fn kept_sections(path: &Path) -> String {
    const KEPT_HEADINGS: &[&str] = &["\n## Figures behind the design"];
    let old = std::fs::read_to_string(path).unwrap_or_default();
    KEPT_HEADINGS
        .iter()
        .filter_map(|h| old.find(h))
        .min()
        .map(|at| old[at..].to_string())
        .unwrap_or_default()
}

fn write(path: &Path, text: &str) -> Res<()> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
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
        if !TAB_VIEW_SECTIONS.contains(&s.key) {
            out.push_str(&s.to_markdown());
        }
    }
    out
}

/// The tab view's part of benchmarks.md: its sections and goals, and the
/// run they come from (a run of these sections alone rewrites only this).
fn tab_view_markdown(plan: &Scale, m: &Machine, sections: &[Section], goals: &[&Goal]) -> String {
    let mut out = format!("{TAB_VIEW_HEADING}\n\n");
    out.push_str(&table::wrap(
        &format!(
            "`ptyd attach` showing a tab of several panes, the server composing each frame \
             from the panes' terminal models, against `tmux attach` to a window split the same \
             way. Generated by `cargo bench --bench report -- {}--only {} --docs docs` on {} \
             ({} mode), ptyd commit {}; load average (1/5/15 min) at start {}, at end {} on {} \
             cores. On a loaded machine absolute figures vary from run to run: compare the \
             ratios, measured in the same run.",
            if plan.mode == "quick" { "--quick " } else { "" },
            TAB_VIEW_SECTIONS.join(","),
            m.date,
            plan.mode,
            m.commit,
            m.load_start,
            m.load_end,
            m.cores
        ),
        78,
        "",
    ));
    out.push('\n');
    if !goals.is_empty() {
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
    }
    for s in sections {
        if TAB_VIEW_SECTIONS.contains(&s.key) {
            out.push_str(&s.to_markdown_at(3));
        }
    }
    out
}

/// `old` (benchmarks.md) with its tab view part replaced by `part`, or
/// `part` added before the hand-written figures if it had none.
fn splice_tab_view(old: &str, part: &str) -> String {
    let heading = format!("\n{TAB_VIEW_HEADING}\n");
    if let Some(at) = old.find(&heading) {
        let from = at + 1;
        let body = from + TAB_VIEW_HEADING.len();
        let to = old[body..]
            .find("\n## ")
            .map_or(old.len(), |i| body + i + 1);
        return format!("{}{part}{}", &old[..from], &old[to..]);
    }
    let before = old
        .find("\n## Figures behind the design")
        .map_or(old.len(), |i| i + 1);
    format!("{}{part}{}", &old[..before], &old[before..])
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
