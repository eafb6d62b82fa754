//! Keystroke echo latency through the real clients, idle and while a
//! neighbour pane floods.

use crate::common::echo::{ECHO_SCRIPT, EchoSession, Latency, latency_stats};
use crate::common::pty::PtyProc;
use crate::common::relay::spawn_relayed;
use crate::common::server::PtydServer;
use crate::common::tmux::Tmux;
use crate::common::{Res, path_str, shell_quote, us};
use crate::table::{Cell, Goal, Section};
use crate::{COLS, ECHO_SHARE_GOAL, ROWS, Scale};
use serde_json::json;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// A terminal being typed into.
pub struct EchoTarget {
    label: &'static str,
    session: EchoSession<PtyProc>,
    samples: Vec<Duration>,
}

pub fn echo_target(label: &'static str, proc: PtyProc) -> Res<EchoTarget> {
    Ok(EchoTarget {
        label,
        session: EchoSession::start(proc, COLS).map_err(|e| format!("{label}: {e}"))?,
        samples: Vec::new(),
    })
}

pub fn latency(
    plan: &Scale,
    ptyd_bin: &Path,
    baseline: Option<&Path>,
    nofile: u64,
    tmp: &Path,
    flood_file: &Path,
) -> (Section, Vec<Goal>) {
    let mut s = Section::new(
        "echo_latency",
        format!("Keystroke echo latency, {} keys per row", plan.keys),
        vec![
            "terminal",
            "p50 added / tmux added",
            "p99 added / tmux added",
            "p50 us",
            "p99 us",
            "max us",
        ],
    );
    s.note = format!(
        "One byte written into the outer terminal, timed until it comes back, against cat on a \
         raw-mode tty (so cat itself echoes, as a shell's line editor would): bare is that \
         program in a PTY, ptyd and tmux run it in a pane with `ptyd attach` / `tmux attach` \
         in a PTY. All are typed into in {} interleaved rounds, after {} warm-up keys. \
         \"added / tmux added\" is (ptyd - bare) / (tmux - bare): the share of tmux's added latency \
         that ptyd adds (goal <= {ECHO_SHARE_GOAL}). With flood, another pane in the same \
         server (for bare: another PTY the bench drains) runs cat of the plain-text file in a \
         loop, unattached. The two-PTY relay is the floor under any multiplexer: one process \
         copying bytes between the outer PTY and the program's PTY, and nothing else (no \
         model, socket or client; with flood it copies only the echo program).",
        plan.key_rounds,
        crate::common::echo::WARMUP_KEYS
    );
    if let Some(b) = baseline {
        s.note.push_str(&format!(
            " The baseline rows run another ptyd binary, server and client, typed into in the \
             same rounds: {}.",
            b.display()
        ));
    }
    let mut goals = Vec::new();
    for flood in [false, true] {
        let tag = if flood { "flood" } else { "idle" };
        let lats = latency_set(
            plan,
            ptyd_bin,
            baseline,
            nofile,
            &tmp.join(format!("lat-{tag}")),
            flood_file,
            flood,
        );
        let suffix = if flood { ", neighbour floods" } else { "" };
        let f = |i: usize, p: fn(&Latency) -> Duration| lats[i].as_ref().map(|l| us(p(l))).ok();
        // (share of tmux's addition that ptyd adds, goal met): the
        // goal is compared directly, since a tmux that adds nothing
        // (or less than nothing, in noise) gives no share to divide.
        let share_of = |i: usize, p: fn(&Latency) -> Duration| -> Option<(f64, bool)> {
            let (b, d, t) = (f(0, p)?, f(i, p)?, f(2, p)?);
            Some(((d - b) / (t - b), d - b <= ECHO_SHARE_GOAL * (t - b)))
        };
        let share = |p: fn(&Latency) -> Duration| share_of(1, p);
        let (g50, g99) = (share(|l| l.p50), share(|l| l.p99));
        let (s50, s99) = (g50.map(|g| g.0), g99.map(|g| g.0));
        for (i, l) in lats.iter().enumerate() {
            let label = [
                "bare pty",
                "ptyd attach",
                "tmux attach",
                "two-PTY relay (floor)",
                "ptyd attach (baseline)",
            ][i];
            let (s50, s99) = if i >= 3 {
                (
                    share_of(i, |l| l.p50).map(|g| g.0),
                    share_of(i, |l| l.p99).map(|g| g.0),
                )
            } else {
                (s50, s99)
            };
            let share_cell = |v: Option<f64>| {
                if i != 0 && i != 2 {
                    v.map_or(Cell::text("-"), |v| Cell::num(v, 2))
                } else {
                    Cell::text("")
                }
            };
            s.push(
                format!("{label}{suffix}"),
                l.as_ref().map_err(|e| e.clone()).map(|l| {
                    vec![
                        share_cell(s50),
                        share_cell(s99),
                        Cell::num(us(l.p50), 0),
                        Cell::num(us(l.p99), 0),
                        Cell::num(us(l.max), 0),
                    ]
                }),
            );
        }
        let floor = match (share_of(3, |l| l.p50), share_of(3, |l| l.p99)) {
            (Some(a), Some(b)) => {
                format!("; a bare relay adds {:.2} (p50) and {:.2} (p99)", a.0, b.0)
            }
            _ => String::new(),
        };
        let detail = match (s50, s99) {
            (Some(a), Some(b)) => format!(
                "ptyd adds {a:.2} (p50) and {b:.2} (p99) of tmux's added latency{floor}; p50 bare/ptyd/tmux {} us, p99 {} us",
                fmt3(&lats, |l| l.p50),
                fmt3(&lats, |l| l.p99)
            ),
            _ => "a row failed".into(),
        };
        goals.push(Goal {
            name: format!("echo{suffix}: ptyd adds <= {ECHO_SHARE_GOAL} of what tmux adds over bare (p50 and p99)"),
            detail,
            pass: g50.zip(g99).map(|(a, b)| a.1 && b.1),
        });
    }
    (s, goals)
}

pub fn fmt3(lats: &[Res<Latency>], p: fn(&Latency) -> Duration) -> String {
    lats.iter()
        .take(3)
        .map(|l| {
            l.as_ref()
                .map_or("-".into(), |l| format!("{:.0}", us(p(l))))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Bare, ptyd attach, tmux attach and the relay floor (then the baseline
/// ptyd, if given), typed into in interleaved rounds.
/// Each is set up on its own, so one that breaks fails only its row.
pub fn latency_set(
    plan: &Scale,
    ptyd_bin: &Path,
    baseline: Option<&Path>,
    nofile: u64,
    dir: &Path,
    flood_file: &Path,
    flood: bool,
) -> Vec<Res<Latency>> {
    let flood_script =
        path_str(flood_file).map(|p| format!("while :; do cat {} || exit 1; done", shell_quote(p)));
    let flood_script = flood.then_some(flood_script).transpose();
    // Bare, with a neighbour PTY drained as a terminal would.
    let mut flooder = None;
    let bare = (|| {
        if let Some(script) = flood_script.clone()? {
            let p = PtyProc::spawn(&["sh", "-c", &script], &[], COLS, ROWS)?;
            let mut master = p.master.try_clone().map_err(|e| e.to_string())?;
            // Ends with EIO when `p` is dropped.
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while matches!(master.read(&mut buf), Ok(n) if n > 0) {}
            });
            flooder = Some(p);
        }
        let p = PtyProc::spawn(&["sh", "-c", ECHO_SCRIPT], &[], COLS, ROWS)?;
        echo_target("bare pty", p)
    })();
    // ptyd (and the baseline binary, in a server of its own).
    let start_ptyd = |bin_path: &Path, dir: &Path, label: &'static str| {
        let mut server = PtydServer::start(bin_path, dir, nofile);
        let target = server.as_mut().map_err(|e| e.clone()).and_then(|server| {
            let mut ctl = server.connect()?;
            let cwd = path_str(dir)?;
            let mut scripts = vec![ECHO_SCRIPT.to_string()];
            scripts.extend(flood_script.clone()?);
            let ids = server.create_panes(&mut ctl, scripts.len(), |i| {
                json!({ "argv": ["sh", "-c", scripts[i]], "cols": COLS, "rows": ROWS, "cwd": cwd })
            })?;
            let bin = path_str(bin_path)?;
            let ns = server.paths.namespace.clone();
            let mut env = server.client_env()?;
            env.push(("TERM", Path::new("xterm-256color")));
            let client = PtyProc::spawn(&[bin, "-L", &ns, "attach", &ids[0]], &env, COLS, ROWS)?;
            echo_target(label, client)
        });
        (server, target)
    };
    let (mut server, ptyd) = start_ptyd(ptyd_bin, dir, "ptyd attach");
    let mut baseline_run =
        baseline.map(|b| start_ptyd(b, &dir.join("baseline"), "ptyd attach (baseline)"));
    // tmux.
    let tmux = Tmux::new(dir, "lat", &[]);
    let tmux_target = tmux.as_ref().map_err(|e| e.clone()).and_then(|tmux| {
        tmux.new_session("echo", ECHO_SCRIPT, COLS, ROWS)?;
        if let Some(script) = flood_script.clone()? {
            tmux.new_session("flood", &script, COLS, ROWS)?;
        }
        echo_target("tmux attach", tmux.attach_client("echo", COLS, ROWS)?)
    });

    let relay = spawn_relayed(&["sh", "-c", ECHO_SCRIPT], COLS, ROWS)
        .and_then(|p| echo_target("two-PTY relay (floor)", p));

    let mut targets = vec![bare, ptyd, tmux_target, relay];
    if let Some((_, target)) = &mut baseline_run {
        targets.push(std::mem::replace(target, Err(String::new())));
    }
    let per_round = plan.keys.div_ceil(plan.key_rounds);
    for _ in 0..plan.key_rounds {
        for slot in &mut targets {
            let Ok(t) = slot else { continue };
            match t.session.type_keys(per_round) {
                Ok(v) => t.samples.extend(v),
                Err(e) => *slot = Err(format!("{}: {e}", t.label)),
            }
        }
    }
    let mut out: Vec<Res<Latency>> = targets
        .into_iter()
        .map(|t| t.and_then(|t| latency_stats(t.samples)))
        .collect();
    drop(flooder);
    if let Ok(server) = &mut server
        && let Err(e) = server.stop()
    {
        out[1] = Err(format!("stopping the server: {e}"));
    }
    if let Some((Ok(server), _)) = &mut baseline_run
        && let Err(e) = server.stop()
    {
        out[4] = Err(format!("stopping the baseline server: {e}"));
    }
    drop(tmux);
    out
}
