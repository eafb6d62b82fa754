//! Server memory: idle panes and full scrollback, ptyd against tmux.

use crate::common::server::{PtydServer, STUCK, wait_all};
use crate::common::tmux::Tmux;
use crate::common::upgrade;
use crate::common::{Footprint, Res, path_str, rss_bytes, shell_quote};
use crate::table::{Cell, Section};
use crate::{COLS, ROWS, Scale};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// `lines` lines of what a build or a log prints: words, a few in colour.
pub fn typical_output(path: &Path, lines: usize, marker: &str) -> Res<()> {
    let plain = crate::common::term::plain_text(lines * 80, b"\n");
    let colour = crate::common::term::sgr_text(lines * 20, b"\n");
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

pub fn mib(b: u64) -> Cell {
    Cell::num(b as f64 / (1 << 20) as f64, 1)
}

/// One measurement of ptyd (serving process and keeper) and tmux.
#[derive(Clone, Copy)]
pub struct Mem {
    ptyd: Footprint,
    serving_rss: u64,
    keeper_rss: u64,
    tmux: u64,
}

impl Mem {
    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::ratio(self.tmux as f64 / self.ptyd.total() as f64),
            mib(self.ptyd.total()),
            mib(self.serving_rss),
            mib(self.keeper_rss),
            mib(self.ptyd.memfd),
            mib(self.tmux),
        ]
    }
}

/// ptyd's footprint and its two processes' VmRSS now.
fn measure_ptyd(server: &PtydServer) -> Res<(Footprint, u64, u64)> {
    let keeper = server.child.id();
    if keeper == server.serving_pid {
        return Err("no keeper process".into());
    }
    Ok((
        server.footprint()?,
        rss_bytes(server.serving_pid)?,
        rss_bytes(keeper)?,
    ))
}

/// tmux's server: its VmRSS, every page it maps in full (one process
/// with no memfd; its PSS would fall with every other tmux server on the
/// machine).
fn measure_tmux(pid: u32) -> Res<u64> {
    rss_bytes(pid)
}

pub fn memory(
    plan: &Scale,
    ptyd_bin: &Path,
    baseline: Option<&Path>,
    nofile: u64,
    tmp: &Path,
) -> Section {
    let mut s = Section::new(
        "memory",
        "Server memory",
        vec![
            "load",
            "tmux / ptyd",
            "ptyd MiB",
            "serving RSS MiB",
            "keeper RSS MiB",
            "memfd MiB",
            "tmux MiB",
        ],
    );
    s.note = format!(
        "ptyd MiB is everything ptyd's two processes hold, each page once: the proportional \
         set size of the serving process and of its keeper (Pss_Anon + Pss_File in \
         /proc/PID/smaps_rollup: pages the two share, the binary's and those the fork left \
         shared, split between them rather than counted in each), plus the pages allocated in \
         every memfd either holds open or maps, counted once per file: the panes' raw-output \
         rings, which the serving process maps, and the crash checkpoint and the history log \
         of every pane's scrollback lines, which the keeper holds and no process maps, so \
         VmRSS alone would not show them. memfd MiB is that last part. The keeper is the \
         first process of `ptyd server`, which holds a copy of every pane's fds so panes \
         survive a crash of the serving one; after a live upgrade it is measured once the old \
         serving process is gone and the keeper's RSS has stopped falling. The two RSS columns \
         are VmRSS as the kernel reports it (RssShmem included: the touched pages of the \
         mapped rings; shared pages in both). tmux MiB is the tmux server's VmRSS (one process, \
         no memfd: its proportional share would depend on the other tmux servers running on \
         the machine); the ratio is tmux over ptyd MiB. Idle panes \
         run sleep; they are added to one server, measured at each count. The history row: \
         {} panes each print {} lines of typical output (words, every fifth line coloured) \
         plus a screenful, so each holds a full {}-line scrollback, measured once ptyd's \
         footprint stopped falling (the checkpoint after the output, then the rings given \
         back); tmux with history-limit {}. Panes are {COLS}x{ROWS}.",
        plan.history_panes, plan.history_lines, plan.history_lines, plan.history_lines
    );
    // With a baseline binary, each row twice: this build's, then the
    // baseline's, measured in the same run.
    let mut bins = vec![(ptyd_bin, "")];
    if let Some(base) = baseline {
        bins.push((base, " (baseline)"));
    }
    let runs: Vec<_> = bins
        .iter()
        .enumerate()
        .map(|(i, (bin, _))| {
            let dir = tmp.join(format!("mem-{i}"));
            let idle = memory_idle(plan, bin, nofile, &dir.join("idle"));
            let history = memory_history(plan, bin, nofile, &dir.join("hist"));
            (idle, history)
        })
        .collect();
    for (i, n) in plan.idle_panes.iter().enumerate() {
        for ((idle, _), (_, tag)) in runs.iter().zip(&bins) {
            let row = idle
                .as_ref()
                .map_err(|e| e.clone())
                .and_then(|v| v[i].clone());
            s.push(
                format!("{n} idle pane{}{tag}", if *n == 1 { "" } else { "s" }),
                row.map(|m| m.cells()),
            );
        }
    }
    let label = format!(
        "{} panes x {} lines",
        plan.history_panes, plan.history_lines
    );
    let mut after_rows = Vec::new();
    for ((_, history), (_, tag)) in runs.iter().zip(&bins) {
        match history {
            Ok((before, after, tmux)) => {
                let row = |&(ptyd, serving_rss, keeper_rss): &PtydMem| {
                    Mem {
                        ptyd,
                        serving_rss,
                        keeper_rss,
                        tmux: *tmux,
                    }
                    .cells()
                };
                s.push(format!("{label}{tag}"), Ok(row(before)));
                after_rows.push((
                    format!("{label}, after a live upgrade{tag}"),
                    after.as_ref().map(row).map_err(|e| e.clone()),
                ));
            }
            Err(e) => {
                s.push(format!("{label}{tag}"), Err(e.clone()));
                after_rows.push((
                    format!("{label}, after a live upgrade{tag}"),
                    Err(e.clone()),
                ));
            }
        }
    }
    for (label, row) in after_rows {
        s.push(label, row);
    }
    s
}

/// ptyd's footprint, its serving process's and keeper's VmRSS.
pub type PtydMem = (Footprint, u64, u64);

pub fn memory_idle(plan: &Scale, ptyd_bin: &Path, nofile: u64, dir: &Path) -> Res<Vec<Res<Mem>>> {
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
                let (ptyd, serving_rss, keeper_rss) = measure_ptyd(&server)?;
                Ok(Mem {
                    ptyd,
                    serving_rss,
                    keeper_rss,
                    tmux: measure_tmux(tmux_pid)?,
                })
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

/// ptyd, ptyd after an upgrade (new serving process, reaper), tmux.
pub fn memory_history(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    dir: &Path,
) -> Res<(PtydMem, Res<PtydMem>, u64)> {
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
    wait_settled(&server)?;
    let ptyd = measure_ptyd(&server)?;
    let old_serving = server.serving_pid;
    let after = upgrade::upgrade_server(&mut server, &mut ctl, n, false)
        .and_then(|_| {
            ctl.call("server.status", json!({}))
                .map_err(|e| format!("server.status after the upgrade: {e}"))
        })
        .and_then(|_| wait_gone(old_serving))
        .and_then(|_| wait_reaper_settled(server.child.id()))
        .and_then(|_| measure_ptyd(&server).map_err(|e| format!("after the upgrade: {e}")));
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
    let tmux_rss = measure_tmux(tmux.server_pid()?)?;
    Ok((ptyd, after, tmux_rss))
}

/// Waits until the old server has become the reaper: its loop's epoll fd
/// is closed (the server is dropped) and its RSS has stopped falling (the
/// freed heap handed back). Letting go of the PTY masters comes first, so
/// `wait_released` alone measures a server still freeing its panes. There
/// is no event for either, so this polls.
pub fn wait_reaper_settled(reaper: u32) -> Res<()> {
    let deadline = Instant::now() + STUCK;
    let mut last = u64::MAX;
    loop {
        let polls = std::fs::read_dir(format!("/proc/{reaper}/fd"))
            .map_err(|e| format!("reading /proc/{reaper}/fd: {e}"))?
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|t| t.to_string_lossy().contains("eventpoll"))
            })
            .count();
        let rss = crate::common::rss_bytes(reaper)?;
        // Settled: no loop left and no more than 1% freed in the last 50 ms.
        if polls == 0 && rss + rss / 100 >= last {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the reaper (pid {reaper}) still frees memory or runs a loop after {STUCK:?}"
            ));
        }
        last = rss;
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until ptyd's footprint has stopped falling: once the last pane
/// showed the end of its output, the checkpoint that covers it is still
/// to come, and 250 ms after it each pane's output ring gives back what it
/// covers (10-20 MiB of 100 panes that just printed 10,000 lines each,
/// which the row counted or not as the measurement raced those). Settled:
/// no more than 1% less over the last 500 ms. There is no event for it,
/// so this polls.
pub fn wait_settled(server: &PtydServer) -> Res<()> {
    let deadline = Instant::now() + STUCK;
    let mut history = std::collections::VecDeque::new();
    loop {
        let now = server.footprint()?.total();
        history.push_back(now);
        if history.len() > 10 {
            history.pop_front();
            let oldest = history[0];
            if now + oldest / 100 >= oldest {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "ptyd's memory still falls {STUCK:?} after the output ended"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the end of the old serving process after its probation (the
/// keeper reaps it). There is no event for it here, so this polls.
pub fn wait_gone(pid: u32) -> Res<()> {
    let deadline = Instant::now() + STUCK;
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        // Gone, or a zombie the keeper has yet to reap: its memory is freed.
        let ended = state.is_none_or(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        });
        if ended {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the old serving process (pid {pid}) still runs {STUCK:?} after the upgrade"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
