//! End-to-end output throughput: `cat` through the real clients against a
//! bare PTY, and ptyd's protocol client.

use crate::common::server::PtydServer;
use crate::common::throughput::{
    EndToEnd, Ptyd, Terminal, Throughput, end_to_end, generate_colour, protocol,
};
use crate::common::{Res, generate_lines, median};
use crate::table::{Cell, Goal, Section};
use crate::{COLS, LINE_LEN, ROWS, Scale, THROUGHPUT_GOAL, svg};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A file the throughput runs `cat` (the plain one also floods in the
/// latency runs).
pub struct Input {
    pub name: &'static str,
    pub path: PathBuf,
    pub bytes: u64,
    pub lines: u64,
}

pub fn generate_inputs(plan: &Scale, tmp: &Path) -> Res<[Input; 2]> {
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
pub struct Runs {
    times: Vec<Vec<Res<Throughput>>>,
}

pub fn throughput(
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
         median of each run's ratio to the bare run of the same round. `ptyd attach` (its \
         default, `when_behind: redraw`) and tmux skip output the terminal falls behind on and \
         redraw its screen once it has caught up, so their clients write fewer bytes and the \
         clock stops when the end marker is on the terminal's screen; `ptyd attach, lossless` \
         (`--lossless`) forwards every byte, checked to have arrived, and its pane waits for \
         the terminal. `ptyd attach` passes its terminal to the server, which writes the \
         output to it directly; the socket path row turns that off (`PTYD_ATTACH_DIRECT=0`): \
         the client writes what it reads off the socket. The two-PTY relay is the floor under any multiplexer: one process \
         copying between the outer PTY and the program's, nothing else.",
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
        terminals.insert(3, Terminal::PtydBaseline);
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
                let min = if term.lossless() { want } else { 0 };
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
        let ratio_of = |term| {
            let ratio = terminals
                .iter()
                .position(|&t| t == term)
                .and_then(|i| ratios[i]);
            ratio.map_or("failed".into(), |r| format!("{r:.2}x"))
        };
        goals.push(Goal {
            name: format!("throughput, {name} text: ptyd attach within {THROUGHPUT_GOAL}x of bare"),
            detail: ptyd.map_or("a run failed".into(), |r| {
                format!(
                    "{r:.2}x bare (lossless {}, tmux attach {})",
                    ratio_of(Terminal::PtydLossless),
                    ratio_of(Terminal::TmuxAttach)
                )
            }),
            pass: ptyd.map(|r| r <= THROUGHPUT_GOAL),
        });
    }
    (s, goals)
}

/// The throughput goals when nothing could be measured.
pub fn tput_goals_failed() -> Vec<Goal> {
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
pub struct Summary {
    /// Median of each run's time over the bare run's of the same round.
    pub ratio: f64,
    pub mbs: f64,
    /// Median bytes the terminal received.
    pub received: f64,
    pub cells: Vec<Cell>,
}

pub fn summarize(runs: &[Res<Throughput>], bare: &[Res<Throughput>], size: u64) -> Res<Summary> {
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
    let received = median(ok.iter().map(|t| t.received as f64).collect());
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
        Cell::num(received, 0),
        cpu(&|t| t.server_cpu),
        cpu(&|t| t.client_cpu),
    ];
    Ok(Summary {
        ratio,
        mbs,
        received,
        cells,
    })
}
