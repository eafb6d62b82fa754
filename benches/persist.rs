//! Save and restore times for 10, 100 and 1000 panes, through the real
//! binary: `cargo build --release && cargo bench --bench persist`. Prints a
//! table; a size that fails is marked in its row and makes the run exit
//! non-zero.
//!
//! For each size and pane kind (`sleep 1000` with `restore: rerun`, a plain
//! `/bin/sh`, or a command that printed a full 2000-line history first),
//! panes are laid out four to a tab in nested splits, then:
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

mod common;

use common::persist::{Kind, save_restore};
use common::{Res, check_limits, find_ptyd, human_bytes, keep_dir, raised_nofile};

const SIZES: &[usize] = &[10, 100, 1000];

fn main() {
    if let Err(e) = run() {
        eprintln!("bench persist: error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    // PTYD_BENCH_SIZES=10,100 runs only those sizes.
    let sizes: Vec<usize> = std::env::var("PTYD_BENCH_SIZES").map_or_else(
        |_| SIZES.to_vec(),
        |s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
    );
    let bin = find_ptyd()?;
    let nofile = raised_nofile()?;
    check_limits(sizes.iter().copied().max().unwrap_or(0))?;
    let dir = tempfile::Builder::new()
        .prefix("ptyd-persistbench-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    println!(
        "| panes | kind | session.json | history | loop busy in save | save (client) | save (disk thread) | stop | restore: ready | restore: all running | restore.took_ms |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut failed = 0;
    for &n in &sizes {
        for kind in [Kind::Sleep, Kind::Shell, Kind::Output] {
            let tmp = dir.path().join(format!("{n}-{}", kind.name()));
            match save_restore(&bin, &tmp, nofile, n, kind) {
                Ok(r) => println!(
                    "| {n} | {} | {} | {} | {:.1} ms | {:.1} ms | {:.0} ms | {:.1} ms | {:.1} ms | {:.1} ms | {} ms |",
                    kind.name(),
                    human_bytes(r.session_bytes),
                    human_bytes(r.history_bytes),
                    r.loop_busy_ms,
                    r.save_client_ms,
                    r.save_disk_ms,
                    r.stop_ms,
                    r.restore_ready_ms,
                    r.restore_running_ms,
                    r.restore_took_ms,
                ),
                Err(e) => {
                    failed += 1;
                    println!("| {n} | {} | FAILED: {e} |", kind.name());
                }
            }
        }
    }
    keep_dir(dir);
    if failed > 0 {
        return Err(format!("{failed} measurement(s) failed, see above"));
    }
    Ok(())
}
