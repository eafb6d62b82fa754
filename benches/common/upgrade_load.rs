//! The live upgrade under load: blackout and total time of
//! `server.upgrade` while some panes flood output at full speed, with an
//! attached client draining one of them and a client connecting in a loop
//! (see `benches/upgrade.rs`, `--load`).

use super::server::{PtydServer, wait_all};
use super::upgrade::{COLS, MARKER, ROWS, Sample, upgrade_server};
use super::{Res, path_str, shell_quote};
use ptyd::client::Client;
use serde_json::json;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The pause between two connects of the looping client.
const CONNECT_GAP: Duration = Duration::from_millis(5);
/// How long the flooding panes run before the first upgrade: their
/// scrollback is full by then.
const WARM: Duration = Duration::from_secs(2);

pub struct LoadPlan {
    pub upgrades: usize,
    pub lines: usize,
    /// Panes in all; `flooding` of them flood, the rest are idle.
    pub panes: usize,
    pub flooding: usize,
}

/// Everything measured for one flooding count.
pub struct LoadMeasurement {
    pub flooding: usize,
    pub panes: usize,
    pub samples: Vec<Sample>,
    /// Upgrades that failed, with the error (the old server serves on).
    pub failures: Vec<String>,
    /// Connect + first answer of the looping client during the upgrades.
    pub connects: Vec<Duration>,
    /// When each of `connects` started (Unix ms), to tell which phase of
    /// an upgrade a slow one waited in.
    pub connect_starts: Vec<f64>,
    pub connect_errors: Vec<String>,
    /// Output frames the attached client received, and whether its stream
    /// ended early.
    pub attached_bytes: u64,
    pub attached_ended: Option<String>,
    pub wall: Duration,
    pub load: (String, String),
}

/// A file of coloured lines (SGR colours on every word) for the flooding
/// `cat` panes.
pub fn generate_coloured(path: &Path, lines: usize) -> Res<()> {
    let mut w = BufWriter::new(File::create(path).map_err(|e| e.to_string())?);
    for i in 0..lines {
        let c = 31 + i % 7;
        writeln!(
            w,
            "\x1b[1;{c}m{i:08}\x1b[0m \x1b[38;5;{}mthe quick brown\x1b[0m \x1b[4mfox jumps\x1b[24m over the lazy dog",
            i % 256
        )
        .map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())
}

/// The config file giving every pane `lines` lines of scrollback.
fn write_config(tmp: &Path, lines: usize) -> Res<()> {
    let dir = tmp.join("config").join("ptyd");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(dir.join("config.toml"))
        .map_err(|e| format!("writing the config: {e}"))?;
    writeln!(f, "scrollback_lines = {lines}").map_err(|e| e.to_string())
}

pub fn measure_load(
    bin: &Path,
    tmp: &Path,
    nofile: u64,
    plan: &LoadPlan,
    idle_file: &Path,
    coloured: &Path,
) -> Res<LoadMeasurement> {
    write_config(tmp, plan.lines)?;
    let mut server = PtydServer::start(bin, tmp, nofile)?;
    let mut ctl = server.connect()?;
    let idle = plan.panes - plan.flooding;
    let cwd = path_str(tmp)?.to_string();
    let idle_script = format!(
        "cat {}; exec sleep 100000",
        shell_quote(path_str(idle_file)?)
    );
    let idle_ids = server.create_panes(
        &mut ctl,
        idle,
        |_| json!({ "argv": ["sh", "-c", idle_script], "cols": COLS, "rows": ROWS, "cwd": cwd }),
    )?;
    wait_all(&mut ctl, &idle_ids, MARKER)?;
    let cat_script = format!("while :; do cat {}; done", shell_quote(path_str(coloured)?));
    let flood_ids = server.create_panes(&mut ctl, plan.flooding, |i| {
        let argv = if i % 2 == 0 {
            json!(["yes"])
        } else {
            json!(["sh", "-c", cat_script])
        };
        json!({ "argv": argv, "cols": COLS, "rows": ROWS, "cwd": cwd })
    })?;
    if let Some(n) = std::env::var(PANE_NICE_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        renice_panes(&mut ctl, n)?;
    }
    std::thread::sleep(WARM);
    let load_before = super::loadavg();

    let stop = Arc::new(AtomicBool::new(false));
    // An attached client on the first flooding pane (or an idle one),
    // draining its stream as a terminal would.
    let attach_target = flood_ids.first().or(idle_ids.first()).cloned();
    let attached = attach_target
        .map(|target| {
            let client = server.connect()?;
            let params = ptyd::protocol::methods::Attach {
                target,
                read_only: true,
                cols: None,
                rows: None,
                history: None,
                alt_screen: false,
                from_pane: None,
                detach_others: false,
                when_behind: ptyd::protocol::methods::WhenBehind::Pause,
                view: None,
                client_env: None,
            };
            let (_, mut reader) =
                ptyd::client::attach(client, params).map_err(|e| format!("attach: {e}"))?;
            let stop = stop.clone();
            Ok::<_, String>(std::thread::spawn(move || {
                let mut bytes = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match reader.next_blocking() {
                        Ok(Some(ptyd::client::ServerFrame::Output(b))) => bytes += b.len() as u64,
                        Ok(Some(ptyd::client::ServerFrame::Exit(v))) => {
                            return (bytes, Some(format!("exit frame {v}")));
                        }
                        Ok(None) => return (bytes, Some("end of stream".into())),
                        Err(e) => return (bytes, Some(e.to_string())),
                    }
                }
                (bytes, None)
            }))
        })
        .transpose()?;
    let paths = server.paths.clone();
    let connector = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut times, mut starts, mut errors) = (Vec::new(), Vec::new(), Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let started = unix_ms();
                let r = Client::connect(&paths, false)
                    .map_err(|e| e.to_string())
                    .and_then(|mut c| {
                        c.set_read_timeout(Some(Duration::from_secs(60)))
                            .map_err(|e| e.to_string())?;
                        c.call("server.status", json!({}))
                            .map_err(|e| e.to_string())
                    });
                match r {
                    Ok(_) => {
                        times.push(t0.elapsed());
                        starts.push(started);
                    }
                    Err(e) => errors.push(e),
                }
                std::thread::sleep(CONNECT_GAP);
            }
            (times, starts, errors)
        })
    };

    let t0 = Instant::now();
    let mut samples = Vec::new();
    let mut failures = Vec::new();
    for i in 0..plan.upgrades {
        let before = server.serving_pid;
        match upgrade_server(&mut server, &mut ctl, plan.panes, i > 0) {
            Ok((s, _, _)) => samples.push(s),
            Err(e) => {
                failures.push(format!("upgrade {i}: {e}"));
                server.serving_pid = before;
                // A failed upgrade may leave a 2 s wait as well.
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    let wall = t0.elapsed();
    let load_after = super::loadavg();
    stop.store(true, Ordering::Relaxed);
    let (connects, connect_starts, connect_errors) =
        connector.join().map_err(|_| "the connector panicked")?;
    // The attached reader may block on a quiet stream; the stop ends it.
    drop(ctl);
    let _ = server.stop();
    let (attached_bytes, attached_ended) = match attached {
        Some(h) => h.join().map_err(|_| "the attached reader panicked")?,
        None => (0, None),
    };
    let m = LoadMeasurement {
        flooding: plan.flooding,
        panes: plan.panes,
        samples,
        failures,
        connects,
        connect_starts,
        connect_errors,
        attached_bytes,
        attached_ended,
        wall,
        load: (load_before, load_after),
    };
    if let Some(prefix) = std::env::var_os("PTYD_BENCH_CONNECTS") {
        let mut prefix = prefix
            .into_string()
            .map_err(|_| "PTYD_BENCH_CONNECTS is not UTF-8")?;
        prefix.push_str(&format!(".{}", plan.flooding));
        dump_connects(&m, &prefix)?;
    }
    Ok(m)
}

/// Each connect (start as Unix ms, duration ms) and each upgrade's window
/// (start and end as Unix ms: its phases, then the probation), as CSV in
/// `PREFIX.connects` and `PREFIX.upgrades`, to match slow connects to the
/// server's loop turns (`PTYD_TURN_TRACE`).
fn dump_connects(m: &LoadMeasurement, prefix: &str) -> Res<()> {
    let mut out = String::from("start_unix_ms,ms\n");
    for (d, start) in m.connects.iter().zip(&m.connect_starts) {
        out.push_str(&format!("{start:.3},{:.3}\n", super::ms(*d)));
    }
    std::fs::write(format!("{prefix}.connects"), out).map_err(|e| e.to_string())?;
    let mut out = String::from("start_unix_ms,finished_unix_ms,probation_end_unix_ms\n");
    for s in &m.samples {
        let Some(end) = s.report["finished_unix_ms"].as_f64() else {
            continue;
        };
        let probation = super::upgrade::PROBATION.as_secs_f64() * 1000.0;
        let start = end - super::ms(s.total);
        out.push_str(&format!("{start:.3},{end:.3},{:.3}\n", end + probation));
    }
    std::fs::write(format!("{prefix}.upgrades"), out).map_err(|e| e.to_string())
}

/// An experiment on CPU contention (the serving process competes with
/// every flooding pane for 2 cores): with `PTYD_BENCH_PANE_NICE=N`, every
/// pane's process gets N more niceness than the server (what a scheduling
/// answer giving the server a better share than its panes would do; the
/// processes a pane's shell starts later inherit it).
const PANE_NICE_ENV: &str = "PTYD_BENCH_PANE_NICE";

fn renice_panes(ctl: &mut Client, n: i32) -> Res<()> {
    let list = ctl
        .call("pane.list", json!({}))
        .map_err(|e| format!("pane.list: {e}"))?;
    for pane in list["panes"].as_array().into_iter().flatten() {
        let Some(pid) = pane["pid"].as_i64() else {
            continue;
        };
        // SAFETY: getpriority/setpriority of a process this bench started
        // (through the server); no memory is passed.
        unsafe {
            *libc::__errno_location() = 0;
            let now = libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t);
            libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, now + n);
        }
    }
    println!("  ({PANE_NICE_ENV}: every pane's process reniced by +{n})");
    Ok(())
}

/// Now as Unix milliseconds (the clock of the report's `finished_unix_ms`).
fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Where the connects over `slow_ms` started: in which phase of which
/// upgrade (the phases run back to back and end at the report's
/// `finished_unix_ms`, the new server going live), in the rest of the
/// `server.upgrade` call (`unphased`: from the client's call to the first
/// phase's start as the phases' lengths put it), in the probation after
/// it, or outside every upgrade. Counts by phase name,
/// in the order phases run, "outside" last.
pub fn slow_connects_by_phase(m: &LoadMeasurement, slow_ms: f64) -> Vec<(String, usize)> {
    let mut windows: Vec<(f64, f64, String)> = Vec::new();
    let mut order: Vec<String> = Vec::new();
    for s in &m.samples {
        let Some(end) = s.report["finished_unix_ms"].as_f64() else {
            continue;
        };
        let phases = s.report["phases"].as_array().cloned().unwrap_or_default();
        // The old server's probation follows (the new one serves).
        windows.push((
            end,
            end + super::upgrade::PROBATION.as_secs_f64() * 1000.0,
            "probation".into(),
        ));
        let mut at = end;
        for p in phases.iter().rev() {
            let len = p["ms"].as_f64().unwrap_or(0.0);
            let name = p["name"].as_str().unwrap_or("?").to_string();
            windows.push((at - len, at, name.clone()));
            at -= len;
        }
        // The call's time its phases do not count (work done in the turn
        // a phase ends, such as the save's history rendering, is in none
        // of them): still inside the upgrade.
        windows.push((end - super::ms(s.total), at, "unphased".into()));
        for p in &phases {
            let name = p["name"].as_str().unwrap_or("?").to_string();
            if !order.contains(&name) {
                order.push(name);
            }
        }
    }
    order.push("unphased".into());
    order.push("probation".into());
    order.push("outside".into());
    let mut counts: Vec<(String, usize)> = order.into_iter().map(|n| (n, 0)).collect();
    for (d, start) in m.connects.iter().zip(&m.connect_starts) {
        if super::ms(*d) <= slow_ms {
            continue;
        }
        let name = windows
            .iter()
            .find(|(from, to, _)| start >= from && start < to)
            .map_or("outside", |(_, _, n)| n.as_str());
        if let Some(c) = counts.iter_mut().find(|(n, _)| n == name) {
            c.1 += 1;
        }
    }
    counts.retain(|(_, c)| *c > 0);
    counts
}
