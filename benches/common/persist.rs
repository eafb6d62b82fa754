//! Save and restore through the real binary: panes laid out four to a tab
//! in nested splits, `server.save` timed as the client sees it and as the
//! disk thread reports it, then a stop and a cold start that restores them
//! (see `benches/persist.rs`).

use super::server::{PtydServer, STUCK, collect};
use super::{Res, median, ms};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// How many saves are timed (the median counts).
pub const SAVES: usize = 5;

#[derive(Clone, Copy)]
pub enum Kind {
    /// `sleep 1000` with `restore: rerun`.
    Sleep,
    /// A plain `/bin/sh`.
    Shell,
    /// Printed 2000 lines of 78 characters first: a full history each.
    Output,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sleep => "sleep",
            Kind::Shell => "sh",
            Kind::Output => "output",
        }
    }
}

/// Medians over [`SAVES`] saves, and one stop and restore.
pub struct PersistRow {
    pub session_bytes: u64,
    pub history_bytes: u64,
    /// How long the loop was busy serializing: a `server.status` sent right
    /// behind the save is answered once it is done.
    pub loop_busy_ms: f64,
    pub save_client_ms: f64,
    pub save_disk_ms: f64,
    pub stop_ms: f64,
    /// Spawn to the ready byte (the restore runs before it).
    pub restore_ready_ms: f64,
    /// Spawn to `server.status` reporting every pane running.
    pub restore_running_ms: f64,
    /// The server's own `restore.took_ms`.
    pub restore_took_ms: u64,
}

fn call(c: &mut ptyd::client::Client, method: &str, params: Value) -> Res<Value> {
    c.call(method, params).map_err(|e| format!("{method}: {e}"))
}

pub fn save_restore(bin: &Path, tmp: &Path, nofile: u64, n: usize, kind: Kind) -> Res<PersistRow> {
    let mut server = PtydServer::start(bin, tmp, nofile)?;
    let mut c = server.connect()?;
    let mut tab_first = String::new();
    for i in 0..n {
        let mut params = match kind {
            Kind::Sleep => json!({ "argv": ["sleep", "1000"], "restore": "rerun" }),
            Kind::Shell => json!({ "argv": ["/bin/sh"] }),
            Kind::Output => json!({
                "argv": ["sh", "-c", "seq -f '%078g' 1 2000; exec sleep 1000"],
                "restore": "rerun",
            }),
        };
        if i % 4 == 0 {
            params["tab_name"] = json!(format!("tab{}", i / 4));
        } else {
            params["split"] = json!(tab_first);
            params["direction"] = json!(if i % 2 == 0 { "vertical" } else { "horizontal" });
            params["ratio"] = json!(0.3 + 0.1 * (i % 4) as f64);
        }
        let info = call(&mut c, "pane.create", params)?;
        let id = server.track(&info)?;
        if i % 4 == 0 {
            tab_first = id;
        }
    }
    if let Kind::Shell | Kind::Output = kind {
        // Every pane has started and gone quiet (all waits in flight at once).
        let list = call(&mut c, "pane.list", json!({}))?;
        let mut waits = std::collections::HashSet::new();
        for p in list["panes"].as_array().into_iter().flatten() {
            let params = json!({ "target": p["id"], "idle_ms": 200, "timeout_ms": STUCK.as_millis() as u64 });
            waits.insert(
                c.send_request("pane.wait", params)
                    .map_err(|e| e.to_string())?,
            );
        }
        collect(&mut c, waits, "pane.wait")?;
    }
    call(&mut c, "server.save", json!({}))?; // warm-up: history files written once, caches warm
    let (mut client_times, mut disk_times, mut stalls) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAVES {
        let started = Instant::now();
        let save = c
            .send_request("server.save", json!({}))
            .map_err(|e| e.to_string())?;
        let status = c
            .send_request("server.status", json!({}))
            .map_err(|e| e.to_string())?;
        let mut done = collect(&mut c, [status].into(), "server.status")?;
        drop(done.remove(&status));
        stalls.push(ms(started.elapsed()));
        collect(&mut c, [save].into(), "server.save")?;
        client_times.push(ms(started.elapsed()));
        let status = call(&mut c, "server.status", json!({}))?;
        disk_times.push(
            status["persistence"]["last_save_ms"]
                .as_f64()
                .ok_or_else(|| {
                    format!("server.status has no persistence.last_save_ms: {status}")
                })?,
        );
    }
    let state = &server.paths.state_dir;
    let session_bytes = std::fs::metadata(state.join("session.json"))
        .map_err(|e| format!("session.json after a save: {e}"))?
        .len();
    let history_bytes = dir_bytes(&state.join("history"));
    drop(c);
    let started = Instant::now();
    server.stop()?;
    let stop = started.elapsed();
    drop(server);

    let started = Instant::now();
    let mut server = PtydServer::start(bin, tmp, nofile)?;
    let ready = started.elapsed();
    let mut c = server.connect()?;
    let deadline = Instant::now() + STUCK;
    let status = loop {
        let status = call(&mut c, "server.status", json!({}))?;
        if status["running_panes"].as_u64() == Some(n as u64) {
            break status;
        }
        if Instant::now() > deadline {
            // Whatever did come back is killed with the server.
            let _ = server.track_all(&mut c);
            return Err(format!(
                "not all {n} panes running after the restore: {status}"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let all_running = started.elapsed();
    server.track_all(&mut c)?;
    if status["panes"] != n {
        return Err(format!(
            "{n} panes saved, status after the restore: {status}"
        ));
    }
    let restore_took_ms = status["persistence"]["restore"]["took_ms"]
        .as_u64()
        .ok_or_else(|| format!("server.status has no persistence.restore.took_ms: {status}"))?;
    drop(c);
    server.stop()?;
    Ok(PersistRow {
        session_bytes,
        history_bytes,
        loop_busy_ms: median(stalls),
        save_client_ms: median(client_times),
        save_disk_ms: median(disk_times),
        stop_ms: ms(stop),
        restore_ready_ms: ms(ready),
        restore_running_ms: ms(all_running),
        restore_took_ms,
    })
}

/// Total size of the files under `dir` (0 if there is none).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
