//! Crash survival: the keeper's cost on output throughput, and the time
//! from a SIGKILLed serving process to every pane served again.

use crate::Scale;
use crate::common::crash::{keeper_cost, recovery};
use crate::common::{human_bytes, stats};
use crate::table::{Cell, Goal, Section};
use crate::throughput::Input;
use crate::{COLS, ROWS};
use std::path::Path;

/// The bound on what the keeper's bookkeeping may cost `cat`.
const KEEPER_COST_GOAL_PERCENT: f64 = 3.0;

pub fn keeper_costs(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    tmp: &Path,
    files: &[Input; 2],
) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "keeper_cost",
        "Keeper cost on output throughput",
        vec![
            "file",
            "with keeper ms",
            "without ms",
            "cost %",
            "checkpoints",
            "last checkpoint",
        ],
    );
    s.note = format!(
        "cat of each throughput file in a {COLS}x{ROWS} pane through the protocol client, on a \
         server with its keeper (each pane's output ring, paced checkpoints) and on one started \
         with PTYD_NO_KEEPER=1 (no crash survival), {} interleaved runs each, medians. \
         Checkpoints: how many the keeper server wrote over all its runs, and the last one's \
         cost and size.",
        plan.runs
    );
    let mut goals = Vec::new();
    for file in files {
        let want = file.bytes + file.lines;
        let tmp = tmp.join(format!("keeper-{}", file.name));
        let r = std::fs::create_dir_all(&tmp)
            .map_err(|e| format!("creating {}: {e}", tmp.display()))
            .and_then(|()| {
                keeper_cost(
                    ptyd_bin,
                    &tmp,
                    nofile,
                    &file.path,
                    want,
                    plan.runs,
                    (COLS, ROWS),
                )
            });
        let name = format!(
            "keeper cost on {} text < {KEEPER_COST_GOAL_PERCENT} %",
            file.name
        );
        let cells = r.map(|c| {
            let with = stats(c.with).p50;
            let without = stats(c.without).p50;
            let percent = (with / without - 1.0) * 100.0;
            goals.push(Goal {
                name: name.clone(),
                detail: format!("{percent:+.1} % ({with:.0} ms vs {without:.0} ms)"),
                pass: Some(percent < KEEPER_COST_GOAL_PERCENT),
            });
            vec![
                Cell::num(with, 0),
                Cell::num(without, 0),
                Cell::num(percent, 1),
                Cell::text(c.keeper["checkpoints"].to_string()),
                Cell::text(format!(
                    "{} ms, {}",
                    c.keeper["last_checkpoint_ms"],
                    human_bytes(c.keeper["last_checkpoint_bytes"].as_u64().unwrap_or(0))
                )),
            ]
        });
        if cells.is_err() {
            goals.push(Goal {
                name,
                detail: "the measurement failed".into(),
                pass: None,
            });
        }
        s.push(file.name, cells);
    }
    (s, goals)
}

pub fn crashes(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
    let mut s = Section::new(
        "crash_recovery",
        "Crash recovery (SIGKILL of the serving process)",
        vec!["panes", "p50 ms", "p99 ms", "max ms", "last checkpoint"],
    );
    s.note = format!(
        "Each pane has printed {} lines and runs cat. {} rounds per pane count: SIGKILL the \
         serving process (the keeper stays), time until a replacement answers pane.list with \
         every pane and its old pid. The last row is the deep-history run: each pane prints \
         {} lines and keeps them all (scrollback_lines = {}). tmux and the others lose every pane \
         here, so there is nothing to compare against (benches/crash.rs runs this alone).",
        plan.crash_lines, plan.crash_rounds, plan.deep_lines, plan.deep_lines
    );
    let runs = plan
        .crash_panes
        .iter()
        .map(|&n| (n, plan.crash_lines, false))
        .chain([(plan.deep_panes, plan.deep_lines, true)]);
    for (n, lines, deep) in runs {
        let r = recovery(ptyd_bin, tmp, nofile, n, lines, plan.crash_rounds, deep);
        let label = match deep {
            false => n.to_string(),
            true => format!("{n} x {lines} lines"),
        };
        s.push(
            label,
            r.map(|r| {
                let t = stats(r.times);
                vec![
                    Cell::num(t.p50, 1),
                    Cell::num(t.p99, 1),
                    Cell::num(t.max, 1),
                    Cell::text(format!(
                        "{} ms, {}",
                        r.checkpoint_ms,
                        human_bytes(r.checkpoint_bytes)
                    )),
                ]
            }),
        );
    }
    s
}
