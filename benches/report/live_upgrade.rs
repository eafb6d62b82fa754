//! Live upgrade blackout and total time at each pane count.

use crate::Scale;
use crate::common::upgrade::{self, Plan, Sample};
use crate::common::{human_bytes, stats};
use crate::table::{Cell, Goal, Section};
use std::path::Path;

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
