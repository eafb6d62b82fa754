//! Save and restore times for 10, 100 and 1000 panes, through the real
//! binary: `cargo bench --bench persist` (release). Not a test: it prints a
//! table and asserts only that every pane came back.
//!
//! For each size and pane kind (`sleep 1000` with `restore: rerun`, a plain
//! `/bin/sh`, or a command that printed a full 2000-line history first), panes are laid out four to a tab in nested splits, then:
//! - save: `server.save` round trip as the client sees it and the disk
//!   thread's own `persistence.last_save_ms` (medians of 5), and how long the
//!   loop was busy serializing (a `server.status` sent right behind the save);
//! - stop: `server.stop` until the connection closes (includes the final save);
//! - restore: a cold start in the same namespace, from spawning the server to
//!   its ready byte (the restore runs before it) and to `server.status`
//!   reporting every pane running; plus the server's `restore.took_ms`.
//!
//! Each pane is a real process holding a PTY master in the server, so the
//! open-file limit is raised to its hard maximum first.

#[path = "../tests/util/mod.rs"]
mod util;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use util::{Dirs, files_under};

const SIZES: &[usize] = &[10, 100, 1000];

fn main() {
    raise_nofile();
    // PTYD_BENCH_SIZES=10,100 runs only those sizes.
    let sizes: Vec<usize> = std::env::var("PTYD_BENCH_SIZES").map_or_else(
        |_| SIZES.to_vec(),
        |s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
    );
    println!(
        "| panes | kind | session.json | history | loop busy in save | save (client) | save (disk thread) | stop | restore: ready | restore: all running | restore.took_ms |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &sizes {
        for kind in [Kind::Sleep, Kind::Shell, Kind::Output] {
            bench(n, kind);
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Sleep,
    Shell,
    /// Printed 2000 lines of 78 characters first: a full history each.
    Output,
}

fn bench(n: usize, kind: Kind) {
    let mut env = Dirs::new();
    // 1000 panes with full histories take a while to restore.
    env.ready_timeout = Duration::from_secs(300);
    let ns = format!("bench{n}");
    let server = env.start(&ns);
    let mut c = server.connect();
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
        let info = c.ok("pane.create", params);
        if i % 4 == 0 {
            tab_first = info["id"].as_str().unwrap().to_string();
        }
    }
    if let Kind::Shell | Kind::Output = kind {
        // Every pane has started and gone quiet (all waits in flight at once).
        let waits: Vec<u64> = c
            .panes()
            .iter()
            .map(|p| {
                c.send(
                    "pane.wait",
                    json!({ "target": p["id"], "idle_ms": 200, "timeout_ms": 60_000 }),
                )
            })
            .collect();
        for id in waits {
            c.response(id).expect("pane.wait");
        }
    }
    c.save(); // warm-up: history files written once, caches warm
    let mut client_times = Vec::new();
    let mut disk_times = Vec::new();
    let mut stalls = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        // A status request right behind the save is answered once the loop
        // has serialized the snapshot: the time the loop was busy.
        let save = c.send("server.save", json!({}));
        let status = c.send("server.status", json!({}));
        c.response(status).expect("server.status");
        stalls.push(started.elapsed());
        c.response(save).expect("server.save");
        client_times.push(started.elapsed());
        let status = c.ok("server.status", json!({}));
        disk_times.push(status["persistence"]["last_save_ms"].as_u64().unwrap_or(0));
    }
    client_times.sort();
    disk_times.sort_unstable();
    stalls.sort();
    let state = env.state_dir(&ns);
    let session_bytes = std::fs::metadata(state.join("session.json")).map_or(0, |m| m.len());
    let history_bytes: u64 = files_under(&state.join("history"))
        .iter()
        .map(|f| std::fs::metadata(state.join("history").join(f)).map_or(0, |m| m.len()))
        .sum();
    drop(c);
    let started = Instant::now();
    server.stop();
    let stop = started.elapsed();

    let started = Instant::now();
    let server = env.start(&ns);
    let ready = server.ready_after;
    let mut c = server.connect();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status: Value = loop {
        let status = c.ok("server.status", json!({}));
        if status["running_panes"].as_u64() == Some(n as u64) {
            break status;
        }
        assert!(Instant::now() < deadline, "not all panes running: {status}");
        std::thread::sleep(Duration::from_millis(1));
    };
    let all_running = started.elapsed();
    assert_eq!(status["panes"], n, "{status}");
    let took = status["persistence"]["restore"]["took_ms"]
        .as_u64()
        .unwrap_or(0);
    drop(c);
    server.stop();

    println!(
        "| {n} | {} | {} | {} | {} | {} | {} ms | {} | {} | {} | {took} ms |",
        match kind {
            Kind::Sleep => "sleep",
            Kind::Shell => "sh",
            Kind::Output => "output",
        },
        kib(session_bytes),
        kib(history_bytes),
        ms(stalls[stalls.len() / 2]),
        ms(client_times[client_times.len() / 2]),
        disk_times[disk_times.len() / 2],
        ms(stop),
        ms(ready),
        ms(all_running),
    );
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Soft RLIMIT_NOFILE up to the hard limit; servers we start inherit it.
fn raise_nofile() {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit to fill and then pass back.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as above.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) };
    assert!(
        now.rlim_cur >= 3 * 1000 + 100,
        "RLIMIT_NOFILE {} is too low for 1000 panes; raise the hard limit",
        now.rlim_cur
    );
}
