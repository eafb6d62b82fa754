//! Crash survival, measured: what the keeper's bookkeeping costs output
//! throughput, and how long a SIGKILLed serving process takes to be
//! replaced with every pane served again. `benches/crash.rs` prints these
//! on their own; the report runs the same code.

use super::server::{PtydServer, wait_all, write_history_config};
use super::upgrade::{MARKER, generate};
use super::{Res, ms, shell_quote};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// History bytes each pane may hold in a deep-history run: far more than
/// its short numbered lines need, so only the line bound applies.
pub const DEEP_PANE_BYTES: u64 = 64 << 20;

/// `cat` of one file through the protocol client, on a server with its
/// keeper and on one without (`PTYD_NO_KEEPER=1`: no keeper, no rings, no
/// checkpoints), runs interleaved.
pub struct KeeperCost {
    /// Milliseconds of each run with the keeper.
    pub with: Vec<f64>,
    /// Milliseconds of each run without.
    pub without: Vec<f64>,
    /// `server.status`'s `keeper` object after the runs (checkpoints
    /// written, the last one's cost and size).
    pub keeper: serde_json::Value,
}

/// `want` is how many bytes the pane must deliver (the file plus a CR a
/// line): a run that delivers fewer fails rather than timing a short read.
pub fn keeper_cost(
    bin: &Path,
    tmp: &Path,
    nofile: u64,
    file: &Path,
    want: u64,
    runs: usize,
    size: (u16, u16),
) -> Res<KeeperCost> {
    let mut with = PtydServer::start(bin, &tmp.join("keeper-with"), nofile)?;
    let mut without = PtydServer::start_env(
        bin,
        &tmp.join("keeper-without"),
        nofile,
        &[("PTYD_NO_KEEPER", "1")],
    )?;
    let mut cost = KeeperCost {
        with: Vec::new(),
        without: Vec::new(),
        keeper: serde_json::Value::Null,
    };
    for _ in 0..runs {
        for (server, out) in [
            (&mut without, &mut cost.without),
            (&mut with, &mut cost.with),
        ] {
            let t = super::throughput::protocol(server, file, tmp, size)?;
            if t.received < want {
                return Err(format!("only {} of {want} bytes arrived", t.received));
            }
            out.push(ms(t.elapsed));
        }
    }
    let status = with
        .connect()?
        .call("server.status", json!({}))
        .map_err(|e| e.to_string())?;
    cost.keeper = status["keeper"].clone();
    with.stop()?;
    without.stop()?;
    Ok(cost)
}

/// Crash rounds at one pane count.
pub struct Recovery {
    /// Milliseconds from SIGKILL to every pane served again, a round each.
    pub times: Vec<f64>,
    /// The last checkpoint's size and cost, from `server.status`.
    pub checkpoint_bytes: u64,
    pub checkpoint_ms: serde_json::Value,
}

/// A server with `panes` panes (each having printed `lines` lines, then
/// `cat`; with `deep`, a history of `lines` lines kept in each instead of
/// the default bound), then `rounds` times: SIGKILL the serving process and time until
/// a replacement answers `pane.list` with every pane, each with its old pid
/// ("served again": taken over, listening, answering). Rounds in quick
/// succession are no crash loop: each replacement served first.
pub fn recovery(
    bin: &Path,
    tmp: &Path,
    nofile: u64,
    panes: usize,
    lines: usize,
    rounds: usize,
    deep: bool,
) -> Res<Recovery> {
    let sub = match deep {
        false => tmp.join(format!("recovery-{panes}")),
        true => tmp.join(format!("recovery-{panes}x{lines}")),
    };
    std::fs::create_dir_all(&sub).map_err(|e| format!("creating {}: {e}", sub.display()))?;
    if deep {
        write_history_config(&sub, lines, DEEP_PANE_BYTES, panes)?;
    }
    let file = sub.join("lines.txt");
    generate(&file, lines, 0)?;
    let mut server = PtydServer::start_env(bin, &sub, nofile, &[])?;
    let result = crash_rounds(&mut server, &file, panes, rounds);
    let stopped = server.stop();
    let recovery = result?;
    stopped?;
    Ok(recovery)
}

fn crash_rounds(
    server: &mut PtydServer,
    file: &Path,
    panes: usize,
    rounds: usize,
) -> Res<Recovery> {
    let mut ctl = server.connect()?;
    let script = format!(
        "cat {}; exec cat",
        shell_quote(file.to_str().ok_or("a temporary path that is not UTF-8")?)
    );
    let ids = server.create_panes(
        &mut ctl,
        panes,
        |_| json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 24 }),
    )?;
    wait_all(&mut ctl, &ids, MARKER)?;
    drop(ctl);
    let before = pane_pids(&mut server.connect()?)?;
    if before.len() != panes {
        return Err(format!("{} panes listed, {panes} created", before.len()));
    }
    let mut times = Vec::new();
    for _ in 0..rounds {
        // Let a checkpoint follow the last change (it is due at once after
        // a pane is created, and at most every 500 ms after output).
        std::thread::sleep(Duration::from_millis(600));
        let dead = server.serving_pid;
        let t0 = Instant::now();
        // SAFETY: kill(2) of the serving process this bench started.
        unsafe { libc::kill(dead as i32, libc::SIGKILL) };
        let new_pid = loop {
            if t0.elapsed() > Duration::from_secs(120) {
                return Err(format!("no replacement within 120 s at {panes} panes"));
            }
            let Ok(mut c) = server.connect() else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            let Ok(status) = c.call("server.status", json!({})) else {
                continue;
            };
            let pid = status["pid"].as_u64().unwrap_or(0) as u32;
            if pid == dead || pid == 0 {
                continue;
            }
            if pane_pids(&mut c)? != before {
                return Err(format!(
                    "the panes changed across the crash at {panes} panes"
                ));
            }
            break pid;
        };
        times.push(ms(t0.elapsed()));
        server.serving_pid = new_pid;
    }
    let status = server
        .connect()?
        .call("server.status", json!({}))
        .map_err(|e| e.to_string())?;
    Ok(Recovery {
        times,
        checkpoint_bytes: status["keeper"]["last_checkpoint_bytes"]
            .as_u64()
            .unwrap_or(0),
        checkpoint_ms: status["keeper"]["last_checkpoint_ms"].clone(),
    })
}

/// Every pane's id and pid, sorted: equal before and after a crash when
/// every pane was taken over.
fn pane_pids(c: &mut ptyd::client::Client) -> Res<Vec<(String, i64)>> {
    let v = c.call("pane.list", json!({})).map_err(|e| e.to_string())?;
    let mut out: Vec<(String, i64)> = v["panes"]
        .as_array()
        .ok_or("pane.list without panes")?
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap_or("").to_string(),
                p["pid"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    out.sort();
    Ok(out)
}
