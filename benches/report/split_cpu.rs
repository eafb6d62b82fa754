//! What a redrawing view costs the server: three panes of a four-pane view
//! printing at a fixed rate, the same for ptyd and tmux, and each server's
//! CPU time per second of wall time while its client draws them.

use crate::common::pace::pacer_argv;
use crate::common::pty::PtyProc;
use crate::common::server::PtydServer;
use crate::common::tmux::Tmux;
use crate::common::{Res, median, path_str, process_cpu, shell_quote};
use crate::split_echo::generate_digits;
use crate::svg;
use crate::table::{Cell, Section};
use crate::{COLS, ROWS, Scale};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What each flooding pane prints per second.
const PANE_RATE: u64 = 200_000;
/// Printing before a window is measured, so it measures a steady state.
const WARM_UP: Duration = Duration::from_millis(300);
/// After a window: the client is drained of what the servers still had.
const SETTLE: Duration = Duration::from_millis(200);

/// One view being measured: its client's terminal and the processes whose
/// CPU time counts as the server's.
struct Target {
    label: &'static str,
    outer: Res<PtyProc>,
    server: Vec<u32>,
    switch: PathBuf,
    /// Per window: server CPU s per s, client CPU s per s, bytes per s.
    windows: Vec<(f64, f64, f64)>,
}

fn cpu_of(pids: &[u32]) -> Option<Duration> {
    pids.iter().map(|&p| process_cpu(p)).sum()
}

impl Target {
    fn window(&mut self, span: Duration) -> Res<()> {
        let outer = self.outer.as_mut().map_err(|e| e.clone())?;
        let client = outer.child.id();
        std::fs::write(&self.switch, b"")
            .map_err(|e| format!("creating {}: {e}", self.switch.display()))?;
        let measured = (|| -> Res<(f64, f64, f64)> {
            outer.drain_for(WARM_UP)?;
            let (server0, client0) = (cpu_of(&self.server), process_cpu(client));
            let t0 = Instant::now();
            let bytes = outer.drain_for(span)?;
            let wall = t0.elapsed().as_secs_f64();
            let (server1, client1) = (cpu_of(&self.server), process_cpu(client));
            let per_s = |a: Option<Duration>, b: Option<Duration>| -> Res<f64> {
                match (a, b) {
                    (Some(a), Some(b)) => Ok(b.saturating_sub(a).as_secs_f64() / wall),
                    _ => Err("a measured process is gone".to_string()),
                }
            };
            Ok((
                per_s(server0, server1)?,
                per_s(client0, client1)?,
                bytes as f64 / wall,
            ))
        })();
        let _ = std::fs::remove_file(&self.switch);
        let settled = outer.drain_for(SETTLE);
        self.windows.push(measured?);
        settled.map(drop)
    }
}

pub fn split_cpu(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    tmp: &Path,
    bars: &mut Vec<svg::Bar>,
) -> Section {
    let mut s = Section::new(
        "split_cpu",
        format!(
            "Server CPU per second of composed frames: three panes of a four-pane {COLS}x{ROWS} \
             view printing {} KB/s each",
            PANE_RATE / 1000
        ),
        vec![
            "load / terminal",
            "server cpu s per s",
            "vs tmux",
            "client cpu s per s",
            "KB/s to the terminal",
        ],
    );
    let span = Duration::from_millis(if plan.mode == "quick" { 1500 } else { 3000 });
    s.note = format!(
        "The layout of the split-view echo section with nothing typed: the top-left pane \
         idle, the three others each printing a file at {} KB/s (plain: digits and spaces; \
         colour: SGR-coloured words), paced by the bench so both servers are given the same \
         output, and drawn by one attached client whose terminal the bench drains. \"server \
         cpu s per s\" is the server's CPU time (user + system; ptyd's serving process and \
         its keeper) over the wall time of a {:.1} s window, \"client cpu s per s\" the \
         attach client's; medians of {} windows per row, the terminals' windows interleaved, \
         each after {} ms of printing.",
        PANE_RATE / 1000,
        span.as_secs_f64(),
        plan.runs,
        WARM_UP.as_millis()
    );
    let dir = tmp.join("split-cpu");
    let plain = dir.join("digits.txt");
    let colour = dir.join("colour.txt");
    let made = std::fs::create_dir_all(&dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))
        .and_then(|()| generate_digits(&plain))
        .and_then(|()| crate::common::throughput::generate_colour(&colour, 1 << 20).map(drop));
    if let Err(e) = made {
        s.push("setup", Err(e));
        return s;
    }
    for (name, file) in [("plain", &plain), ("colour", &colour)] {
        let load_dir = dir.join(name);
        let mut server = PtydServer::start(ptyd_bin, &load_dir.join("ptyd"), nofile);
        let tmux = Tmux::new(&load_dir, &format!("cpu-{name}"), &[]);
        let mut targets = [
            Target {
                label: "ptyd attach, four-pane view",
                outer: server
                    .as_mut()
                    .map_err(|e| e.clone())
                    .and_then(|srv| ptyd_view(srv, ptyd_bin, &load_dir, file)),
                server: server
                    .as_ref()
                    .map(|srv| vec![srv.serving_pid, srv.child.id()])
                    .unwrap_or_default(),
                switch: load_dir.join("ptyd.on"),
                windows: Vec::new(),
            },
            Target {
                label: "tmux attach, four-pane window",
                outer: tmux
                    .as_ref()
                    .map_err(|e| e.clone())
                    .and_then(|t| tmux_view(t, &load_dir, file)),
                server: tmux
                    .as_ref()
                    .ok()
                    .and_then(|t| t.server_pid().ok())
                    .into_iter()
                    .collect(),
                switch: load_dir.join("tmux.on"),
                windows: Vec::new(),
            },
        ];
        for _ in 0..plan.runs {
            for t in &mut targets {
                if t.outer.is_err() {
                    continue;
                }
                if let Err(e) = t.window(span) {
                    t.outer = Err(e);
                }
            }
        }
        let medians: Vec<Res<[f64; 3]>> = targets
            .iter()
            .map(|t| {
                t.outer.as_ref().map_err(|e| format!("{}: {e}", t.label))?;
                let pick =
                    |f: fn(&(f64, f64, f64)) -> f64| median(t.windows.iter().map(f).collect());
                Ok([pick(|w| w.0), pick(|w| w.1), pick(|w| w.2)])
            })
            .collect();
        let tmux_cpu = medians[1].as_ref().ok().map(|m| m[0]);
        for (t, m) in targets.iter().zip(medians) {
            let is_tmux = t.label.starts_with("tmux");
            if let Ok(m) = &m {
                bars.push(svg::Bar {
                    group: name.to_string(),
                    label: t.label.split(',').next().unwrap_or(t.label).to_string(),
                    value: m[0],
                });
            }
            s.push(
                format!("{name}: {}", t.label),
                m.map(|m| {
                    vec![
                        Cell::num(m[0], 3),
                        match tmux_cpu {
                            Some(tc) if !is_tmux && tc > 0.0 => Cell::ratio(m[0] / tc),
                            _ => Cell::text(""),
                        },
                        Cell::num(m[1], 3),
                        Cell::num(m[2] / 1000.0, 0),
                    ]
                }),
            );
        }
        drop(targets);
        if let Ok(server) = &mut server {
            let _ = server.stop();
        }
        drop(tmux);
    }
    s
}

/// The four-pane tab in ptyd, the top-left pane idle and focused, and a
/// client attached to it.
fn ptyd_view(server: &mut PtydServer, bin: &Path, dir: &Path, file: &Path) -> Res<PtyProc> {
    let switch = dir.join("ptyd.on");
    let argv = pacer_argv(file, &switch, PANE_RATE)?;
    let mut ctl = server.connect()?;
    let cwd = path_str(dir)?.to_string();
    let mut create = |params: serde_json::Value| -> Res<String> {
        let info = ctl
            .call("pane.create", params)
            .map_err(|e| format!("pane.create: {e}"))?;
        server.track(&info)
    };
    let idle =
        create(json!({ "argv": ["sleep", "100000"], "cols": COLS, "rows": ROWS, "cwd": cwd }))?;
    let flood = |target: &str, direction: &str| json!({ "argv": argv, "split": target, "direction": direction, "cwd": cwd });
    let right = create(flood(&idle, "horizontal"))?;
    create(flood(&idle, "vertical"))?;
    create(flood(&right, "vertical"))?;
    let ns = server.paths.namespace.clone();
    let mut env = server.client_env()?;
    env.push(("TERM", Path::new("xterm-256color")));
    PtyProc::spawn(
        &[path_str(bin)?, "-L", &ns, "attach", &idle],
        &env,
        COLS,
        ROWS,
    )
}

/// The same window in tmux, and a client attached to it.
fn tmux_view(t: &Tmux, dir: &Path, file: &Path) -> Res<PtyProc> {
    let switch = dir.join("tmux.on");
    let flood: Vec<String> = pacer_argv(file, &switch, PANE_RATE)?
        .iter()
        .map(|a| shell_quote(a))
        .collect();
    let flood = flood.join(" ");
    t.new_session("four", "sleep 100000", COLS, ROWS)?;
    t.run(&["split-window", "-d", "-h", "-t", "four:0.0", &flood])?;
    t.run(&["split-window", "-d", "-v", "-t", "four:0.0", &flood])?;
    t.run(&["split-window", "-d", "-v", "-t", "four:0.2", &flood])?;
    t.attach_client("four", COLS, ROWS)
}
