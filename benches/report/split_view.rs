//! Output throughput in a split view: `cat` in the left pane of a tab split
//! side by side, through `ptyd attach` (the server composes the view) and
//! `tmux attach` (a window split the same way), against a bare PTY.

use crate::common::median;
use crate::common::server::PtydServer;
use crate::common::throughput::{EndToEnd, Ptyd, Terminal, Throughput, end_to_end};
use crate::svg;
use crate::table::{Cell, Goal, Section};
use crate::throughput::{Input, summarize};
use crate::{COLS, ROWS, Scale};
use std::path::Path;

/// How many times tmux's throughput ptyd's split view is to reach.
const SPLIT_THROUGHPUT_GOAL: f64 = 2.0;

const TERMINALS: [Terminal; 3] = [Terminal::Bare, Terminal::PtydSplit, Terminal::TmuxSplit];

pub fn split_view(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    tmp: &Path,
    files: &[Input; 2],
    bars: &mut Vec<svg::Bar>,
) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "split",
        format!(
            "Split-view throughput: cat of {} MB in one pane of a two-pane {COLS}x{ROWS} view",
            plan.mb
        ),
        vec![
            "file / terminal",
            "time vs bare",
            "MB/s",
            "median s",
            "bytes to the terminal",
            "server cpu s",
            "client cpu s",
            "server cpu s per s",
        ],
    );
    s.note = format!(
        "As the throughput section, with the tab split side by side: cat runs in the left \
         pane, `sleep` in the right one, and the client shows both under its status line. \
         ptyd's server composes each frame from the panes' terminal models and writes what \
         changed; tmux redraws its window the same way. Bare is cat alone in a {COLS}x{ROWS} \
         PTY. \"bytes to the terminal\" is everything the client's terminal received; \"server \
         cpu s per s\" the server's CPU time over the run's wall time. {} \
         interleaved runs per row.",
        plan.runs
    );
    let server_dir = tmp.join("split-server");
    let mut server = match PtydServer::start(ptyd_bin, &server_dir, nofile) {
        Ok(s) => s,
        Err(e) => {
            s.push("ptyd server", Err(e));
            return (s, Vec::new());
        }
    };
    let mut goals = Vec::new();
    for (fi, input) in files.iter().enumerate() {
        let mut times: Vec<Vec<crate::common::Res<Throughput>>> =
            TERMINALS.iter().map(|_| Vec::new()).collect();
        for run in 0..plan.runs {
            let mut e = EndToEnd {
                ptyd: Ptyd {
                    bin: ptyd_bin,
                    server: &mut server,
                },
                baseline: None,
                tmp,
                size: (COLS, ROWS),
                run: 1000 + run + fi * plan.runs,
            };
            for (i, &term) in TERMINALS.iter().enumerate() {
                let min = if term.lossless() {
                    input.bytes + input.lines
                } else {
                    0
                };
                times[i].push(end_to_end(&mut e, term, &input.path, min));
            }
        }
        let mut summaries = Vec::new();
        for (i, term) in TERMINALS.iter().enumerate() {
            let sum = summarize(&times[i], &times[0], input.bytes);
            let label = format!("{}: {}", input.name, term.label());
            summaries.push(sum.as_ref().ok().map(|x| (x.mbs, x.received)));
            if let Ok(x) = &sum {
                bars.push(svg::Bar {
                    group: input.name.to_string(),
                    label: term.label().to_string(),
                    value: x.mbs,
                });
            }
            let per_s: Vec<f64> = times[i]
                .iter()
                .filter_map(|t| t.as_ref().ok())
                .filter_map(|t| Some(t.server_cpu?.as_secs_f64() / t.elapsed.as_secs_f64()))
                .collect();
            s.push(
                label,
                sum.map(|x| {
                    let mut cells = x.cells;
                    cells.push(if per_s.is_empty() {
                        Cell::text("-")
                    } else {
                        Cell::num(median(per_s), 2)
                    });
                    cells
                }),
            );
        }
        let (ptyd, tmux) = (summaries[1], summaries[2]);
        goals.push(Goal {
            name: format!(
                "split view, {} text: ptyd at least {SPLIT_THROUGHPUT_GOAL}x tmux's throughput",
                input.name
            ),
            detail: match (ptyd, tmux) {
                (Some(p), Some(t)) => {
                    format!("{:.2}x tmux ({:.1} vs {:.1} MB/s)", p.0 / t.0, p.0, t.0)
                }
                _ => "a run failed".into(),
            },
            pass: ptyd
                .zip(tmux)
                .map(|(p, t)| p.0 >= SPLIT_THROUGHPUT_GOAL * t.0),
        });
        goals.push(Goal {
            name: format!(
                "split view, {} text: no more bytes to the terminal than tmux writes",
                input.name
            ),
            detail: match (ptyd, tmux) {
                (Some(p), Some(t)) => format!("{:.2} MB vs tmux's {:.2} MB", p.1 / 1e6, t.1 / 1e6),
                _ => "a run failed".into(),
            },
            pass: ptyd.zip(tmux).map(|(p, t)| p.1 <= t.1),
        });
    }
    (s, goals)
}
