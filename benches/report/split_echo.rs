//! Keystroke echo in a four-pane view while the three other panes flood,
//! through `ptyd attach` and `tmux attach`, beside one-pane views of the
//! same servers typed into in the same rounds.

use crate::common::echo::{ECHO_SCRIPT, EchoSession, latency_stats};
use crate::common::pty::PtyProc;
use crate::common::server::PtydServer;
use crate::common::tmux::Tmux;
use crate::common::{Res, path_str, process_cpu, shell_quote, us};
use crate::table::{Cell, Goal, Section};
use crate::{COLS, ROWS, Scale};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// How much slower than a pane attached alone (`--pane-only`) the
/// four-pane view's echo may be.
const SPLIT_ECHO_GOAL: f64 = 1.10;

/// Keys typed into one terminal before the next one's turn. Small, so
/// that the load other work puts on the machine, which changes from one
/// second to the next, falls on every row alike; the first key of each
/// turn is typed but not counted, since it brings what the terminal's
/// output showed while the others were typed (the flooding panes' frames).
const KEYS_PER_TURN: usize = 10;

/// A terminal typed into, and the server whose CPU its rounds cost.
struct Target {
    label: &'static str,
    session: Res<EchoSession<PtyProc>>,
    samples: Vec<Duration>,
}

/// Text with no letter in it: the keys typed are letters, so whatever
/// letter the outer terminal shows is the echo.
pub fn generate_digits(path: &Path) -> Res<()> {
    let mut text = String::with_capacity(1 << 20);
    let mut i: u64 = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!("{i:012} 0123456789 {:>40}\n", i * 7919));
        i += 1;
    }
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn target(label: &'static str, proc: Res<PtyProc>, cols: u16) -> Target {
    let session = proc.and_then(|p| {
        EchoSession::start(p, cols)
            .map(EchoSession::with_wide_keys)
            .map_err(|e| format!("{label}: {e}"))
    });
    Target {
        label,
        session,
        samples: Vec::new(),
    }
}

const SPLIT: &str = "ptyd attach, four-pane view";
const ONE: &str = "ptyd attach, one-pane view";
const ALONE: &str = "ptyd attach --pane-only";

pub fn split_echo(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "split_echo",
        format!(
            "Keystroke echo in a four-pane {COLS}x{ROWS} view, three panes flooding, {} keys per row",
            plan.keys
        ),
        vec![
            "terminal",
            "p50 us",
            "p99 us",
            "max us",
            "server cpu s per s",
        ],
    );
    s.note = format!(
        "The echo program of the latency section in the top-left pane of a tab split in four; \
         the three other panes run cat of a digits-only file in a loop, all drawn by the same \
         client, so the keys typed are letters outside ASCII (the echo is the only such letter \
         on the screen). The one-pane rows are a second client of the same server on a tab \
         of its own, idle; `--pane-only` a third, showing a pane of its own alone (the attach \
         there was before the tab view). The rows take turns of {KEYS_PER_TURN} keys after {} \
         warm-up keys, the first key of each turn not counted (it brings the output of the other \
         rows' turns). \"server cpu s per s\" is the ptyd or tmux server's CPU time over the wall \
         time of all turns (all of its clients).",
        crate::common::echo::WARMUP_KEYS
    );
    let dir = tmp.join("split-echo");
    let flood = dir.join("digits.txt");
    let setup = std::fs::create_dir_all(&dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))
        .and_then(|()| generate_digits(&flood))
        .and_then(|()| {
            path_str(&flood).map(|p| format!("while :; do cat {} || exit 1; done", shell_quote(p)))
        });
    let flood_script = match setup {
        Ok(f) => f,
        Err(e) => {
            s.push("setup", Err(e));
            return (s, Vec::new());
        }
    };
    let quarter = COLS / 2 - 1;

    // ptyd: one server, a four-pane tab and a one-pane tab, one client each.
    let mut server = PtydServer::start(ptyd_bin, &dir.join("ptyd"), nofile);
    let (ptyd_split, ptyd_one, ptyd_alone) = match &mut server {
        Ok(server) => {
            let made = (|| {
                let mut ctl = server.connect()?;
                let cwd = path_str(&dir)?.to_string();
                let mut create = |params: serde_json::Value| -> Res<String> {
                    let info = ctl
                        .call("pane.create", params)
                        .map_err(|e| format!("pane.create: {e}"))?;
                    server.track(&info)
                };
                let echo = create(
                    json!({ "argv": ["sh", "-c", ECHO_SCRIPT], "cols": COLS, "rows": ROWS, "cwd": cwd }),
                )?;
                let flood = |target: &str, direction: &str| json!({ "argv": ["sh", "-c", flood_script], "split": target, "direction": direction, "cwd": cwd });
                let right = create(flood(&echo, "horizontal"))?;
                create(flood(&echo, "vertical"))?;
                create(flood(&right, "vertical"))?;
                let one = create(
                    json!({ "argv": ["sh", "-c", ECHO_SCRIPT], "cols": COLS, "rows": ROWS, "cwd": cwd }),
                )?;
                let alone = create(
                    json!({ "argv": ["sh", "-c", ECHO_SCRIPT], "cols": COLS, "rows": ROWS, "cwd": cwd }),
                )?;
                Ok::<_, String>((echo, one, alone))
            })();
            match made {
                Ok((echo, one, alone)) => {
                    let attach = |id: &str, pane_only: bool| -> Res<PtyProc> {
                        let bin = path_str(ptyd_bin)?;
                        let ns = server.paths.namespace.clone();
                        let mut env = server.client_env()?;
                        env.push(("TERM", Path::new("xterm-256color")));
                        let mut argv = vec![bin, "-L", &ns, "attach", id];
                        if pane_only {
                            argv.push("--pane-only");
                        }
                        PtyProc::spawn(&argv, &env, COLS, ROWS)
                    };
                    (
                        target(SPLIT, attach(&echo, false), quarter),
                        target(ONE, attach(&one, false), COLS),
                        target(ALONE, attach(&alone, true), COLS),
                    )
                }
                Err(e) => (
                    target(SPLIT, Err(e.clone()), quarter),
                    target(ONE, Err(e.clone()), COLS),
                    target(ALONE, Err(e), COLS),
                ),
            }
        }
        Err(e) => (
            target(SPLIT, Err(e.clone()), quarter),
            target(ONE, Err(e.clone()), COLS),
            target(ALONE, Err(e.clone()), COLS),
        ),
    };

    // tmux: the same two views as two sessions.
    let tmux = Tmux::new(&dir, "splitecho", &[]);
    let (tmux_split, tmux_one) = match &tmux {
        Ok(t) => {
            let split = (|| {
                t.new_session("four", ECHO_SCRIPT, COLS, ROWS)?;
                t.run(&["split-window", "-d", "-h", "-t", "four:0.0", &flood_script])?;
                t.run(&["split-window", "-d", "-v", "-t", "four:0.0", &flood_script])?;
                t.run(&["split-window", "-d", "-v", "-t", "four:0.2", &flood_script])?;
                t.attach_client("four", COLS, ROWS)
            })();
            let one = t
                .new_session("one", ECHO_SCRIPT, COLS, ROWS)
                .and_then(|()| t.attach_client("one", COLS, ROWS));
            (
                target("tmux attach, four-pane window", split, quarter),
                target("tmux attach, one pane", one, COLS),
            )
        }
        Err(e) => (
            target("tmux attach, four-pane window", Err(e.clone()), quarter),
            target("tmux attach, one pane", Err(e.clone()), COLS),
        ),
    };
    let ptyd_pid = server.as_ref().ok().map(|s| s.serving_pid);
    let tmux_pid = tmux.as_ref().ok().and_then(|t| t.server_pid().ok());

    let mut targets = [ptyd_split, ptyd_one, ptyd_alone, tmux_split, tmux_one];
    let cpu0 = [
        ptyd_pid.and_then(process_cpu),
        tmux_pid.and_then(process_cpu),
    ];
    let t0 = Instant::now();
    for _ in 0..plan.keys.div_ceil(KEYS_PER_TURN) {
        for t in &mut targets {
            let Ok(session) = &mut t.session else {
                continue;
            };
            session.skip_next_key();
            match session.type_keys(KEYS_PER_TURN) {
                Ok(v) => t.samples.extend(v),
                Err(e) => t.session = Err(format!("{}: {e}", t.label)),
            }
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu_share = |i: usize, pid: Option<u32>| -> Option<f64> {
        let before = cpu0[i]?;
        let after = process_cpu(pid?)?;
        Some(after.saturating_sub(before).as_secs_f64() / wall)
    };
    let shares = [cpu_share(0, ptyd_pid), cpu_share(1, tmux_pid)];
    let mut p50 = Vec::new();
    for (i, t) in targets.into_iter().enumerate() {
        let stats = t
            .session
            .and_then(|_| latency_stats(t.samples))
            .map_err(|e| format!("{}: {e}", t.label));
        p50.push(stats.as_ref().ok().map(|l| (us(l.p50), us(l.p99))));
        // The first row of each server's carries its CPU share.
        let share = match i {
            0 => Some(shares[0]),
            3 => Some(shares[1]),
            _ => None,
        };
        s.push(
            t.label,
            stats.map(|l| {
                vec![
                    Cell::num(us(l.p50), 0),
                    Cell::num(us(l.p99), 0),
                    Cell::num(us(l.max), 0),
                    match share {
                        Some(Some(v)) => Cell::num(v, 3),
                        Some(None) => Cell::text("-"),
                        None => Cell::text(""),
                    },
                ]
            }),
        );
    }
    if let Ok(server) = &mut server {
        let _ = server.stop();
    }
    drop(tmux);
    let goal = match (p50[0], p50[2]) {
        (Some(split), Some(alone)) => Goal {
            name: format!(
                "echo in a four-pane view with three panes flooding: within {:.0} % of a pane attached alone (p50)",
                (SPLIT_ECHO_GOAL - 1.0) * 100.0
            ),
            detail: format!(
                "p50 {:.0} us vs {:.0} us --pane-only ({:.2}x; a one-pane view {}), p99 {:.0} vs {:.0} us",
                split.0,
                alone.0,
                split.0 / alone.0,
                p50[1].map_or("failed".to_string(), |one| format!("{:.0} us", one.0)),
                split.1,
                alone.1
            ),
            pass: Some(split.0 <= SPLIT_ECHO_GOAL * alone.0),
        },
        _ => Goal {
            name: "echo in a four-pane view with three panes flooding".into(),
            detail: "a row failed".into(),
            pass: None,
        },
    };
    (s, vec![goal])
}
