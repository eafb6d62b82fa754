//! Server memory: idle panes and full scrollback, ptyd against tmux.

use crate::common::server::{PtydServer, STUCK, wait_all};
use crate::common::tmux::Tmux;
use crate::common::upgrade;
use crate::common::{Res, path_str, rss_bytes, shell_quote};
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

pub fn memory(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
    let mut s = Section::new(
        "memory",
        "Server memory (RSS)",
        vec![
            "load",
            "tmux / ptyd",
            "ptyd MiB",
            "ptyd keeper MiB",
            "tmux MiB",
        ],
    );
    s.note = format!(
        "VmRSS (/proc/PID/status) of ptyd's serving process and of its keeper (the first \
         process of `ptyd server`, which holds a copy of every pane's fds so panes survive a \
         crash of the serving one; after a live upgrade measured once the old serving process \
         is gone and the keeper's RSS has stopped falling), the keeper's counting the memfds it \
         holds that no process maps (the crash checkpoint and the history log of every pane's \
         scrollback lines; the output rings are in the serving process's RSS); the ratio \
         compares tmux with their sum. Idle panes \
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
            row.map(|(p, k, t)| {
                vec![
                    Cell::ratio(t as f64 / (p + k) as f64),
                    mib(p),
                    mib(k),
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
        Ok(((p, k), after, t)) => {
            s.push(
                label.clone(),
                Ok(vec![
                    Cell::ratio(t as f64 / (p + k) as f64),
                    mib(p),
                    mib(k),
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

pub type MemPair = Res<(u64, u64)>;
/// ptyd's serving process, its keeper, tmux.
pub type MemTriple = Res<(u64, u64, u64)>;

pub fn memory_idle(plan: &Scale, ptyd_bin: &Path, nofile: u64, dir: &Path) -> Res<Vec<MemTriple>> {
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
                let (serving, keeper) = server.rss()?;
                let keeper = keeper.ok_or("no keeper process")?;
                Ok((serving, keeper, rss_bytes(tmux_pid)?))
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

/// ((serving, keeper), after an upgrade (new serving, keeper), tmux).
pub fn memory_history(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    dir: &Path,
) -> Res<((u64, u64), MemPair, u64)> {
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
    let (serving, keeper) = server.rss()?;
    let ptyd = (serving, keeper.ok_or("no keeper process")?);
    let old_serving = server.serving_pid;
    let after = upgrade::upgrade_server(&mut server, &mut ctl, n, false)
        .and_then(|_| {
            ctl.call("server.status", json!({}))
                .map_err(|e| format!("server.status after the upgrade: {e}"))
        })
        .and_then(|_| wait_gone(old_serving))
        .and_then(|_| wait_reaper_settled(server.child.id()))
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
