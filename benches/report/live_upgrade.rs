//! Live upgrade blackout and total time at each pane count, and at many
//! panes with deep histories.

use crate::Scale;
use crate::common::crash::DEEP_PANE_BYTES;
use crate::common::server::write_history_config;
use crate::common::upgrade::{self, Plan, Sample};
use crate::common::{Res, Stats, human_bytes, stats};
use crate::table::{Cell, Goal, Section};
use std::path::Path;

/// The deep-history run's goal: (panes, lines each, blackout p99 ms).
const DEEP_GOAL: (usize, usize, f64) = (1000, 100_000, 20.0);

pub fn upgrades(
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
         phases and scheduler figures). The last row is the deep-history run: each pane holds \
         {} lines (scrollback_lines = {}).",
        upgrade::COLS,
        upgrade::ROWS,
        plan.upgrade_lines,
        plan.upgrades,
        plan.deep_lines,
        plan.deep_lines
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
        let r = r.and_then(no_leftovers);
        let cells = r.map(|m| {
            let (b, cells) = row(&m);
            blackout.push((n, b.p50, b.p99));
            if let Some(target) = upgrade::target_for(n) {
                goals.push(Goal {
                    name: format!("upgrade blackout at {n} panes <= {target} ms (p50 and p99)"),
                    detail: format!("p50 {:.2} ms, p99 {:.2} ms", b.p50, b.p99),
                    pass: Some(b.p50 <= target && b.p99 <= target),
                });
            }
            cells
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
    let (n, lines) = (plan.deep_panes, plan.deep_lines);
    let r = deep_upgrades(plan, ptyd_bin, nofile, tmp).and_then(no_leftovers);
    let goal = (n, lines) == (DEEP_GOAL.0, DEEP_GOAL.1);
    let name = format!(
        "upgrade blackout at {n} panes x {lines} history lines < {} ms (p99)",
        DEEP_GOAL.2
    );
    let cells = r.map(|m| {
        let (b, cells) = row(&m);
        if goal {
            goals.push(Goal {
                name: name.clone(),
                detail: format!("p50 {:.2} ms, p99 {:.2} ms", b.p50, b.p99),
                pass: Some(b.p99 < DEEP_GOAL.2),
            });
        }
        cells
    });
    if cells.is_err() && goal {
        goals.push(Goal {
            name,
            detail: "the measurement failed".into(),
            pass: None,
        });
    }
    s.push(format!("{n} x {lines} lines"), cells);
    (s, goals)
}

/// The upgrades of the deep-history run: `deep_panes` panes, each
/// holding `deep_lines` lines of history.
fn deep_upgrades(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    tmp: &Path,
) -> Res<upgrade::Measurement> {
    let (n, lines) = (plan.deep_panes, plan.deep_lines);
    let dir = tmp.join(format!("up{n}x{lines}"));
    write_history_config(&dir, lines, DEEP_PANE_BYTES, n)?;
    let file = dir.join("scrollback.txt");
    upgrade::generate(&file, lines + usize::from(upgrade::ROWS) - 1, 0)?;
    let p = Plan {
        upgrades: plan.upgrades,
        lines,
        model: false,
    };
    upgrade::measure(ptyd_bin, &dir, nofile, n, &p, &file)
}

/// A row's blackout figures and its cells: blackout p50/p99, total
/// p50/p99, the largest manifest.
fn row(m: &upgrade::Measurement) -> (Stats, Vec<Cell>) {
    let b = stats(m.samples.iter().map(Sample::blackout_ms).collect());
    let t = stats(m.samples.iter().map(Sample::total_ms).collect());
    let manifest = m.manifest_bytes.iter().copied().max();
    let cells = vec![
        Cell::num(b.p50, 2),
        Cell::num(b.p99, 2),
        Cell::num(t.p50, 2),
        Cell::num(t.p99, 2),
        Cell::text(manifest.map_or("?".into(), human_bytes)),
    ];
    (b, cells)
}

fn no_leftovers(m: upgrade::Measurement) -> Res<upgrade::Measurement> {
    if m.leftovers > 0 {
        Err(format!(
            "{} pane process(es) outlived the server",
            m.leftovers
        ))
    } else {
        Ok(m)
    }
}
