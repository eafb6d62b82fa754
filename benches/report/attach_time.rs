//! Attach time: how long until a client has drawn the first screen of a pane
//! with full scrollback.

use crate::common::pty::PtyProc;
use crate::common::server::{PtydServer, STUCK, wait_all};
use crate::common::tmux::Tmux;
use crate::common::{Res, median, ms, path_str, shell_quote, stats};
use crate::memory::typical_output;
use crate::table::{Cell, Section};
use crate::{COLS, ROWS, Scale};
use std::path::Path;
use std::time::{Duration, Instant};

pub fn attach_time(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
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

pub fn attach_runs(
    plan: &Scale,
    ptyd_bin: &Path,
    nofile: u64,
    dir: &Path,
) -> Res<[Res<Vec<f64>>; 2]> {
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
