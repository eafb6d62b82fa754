//! Version skew: users upgrade from whatever build they run. A live
//! upgrade from an older ptyd (a pinned commit of this repository's own
//! history, built once and cached under the target directory) to this
//! build, with panes and an attached client: same pane processes, screens
//! intact, the client still attached, and the lineage (the keeper the old
//! build started, which re-executes into this build once the new server's
//! probation is over) working through a further upgrade and the stop.
//!
//! The pin is the oldest build whose handoff this one accepts live (see
//! docs/protocol.md, "Version skew"). Move it forward when
//! `HANDOFF_VERSION` changes: to a commit of main speaking the previous
//! version (the last one, where main has it: version 3 was reverted on main
//! and came back with version 4, so its only main commit is the first), or,
//! once the previous version is no longer accepted live, to the first
//! commit of the current one.
//!
//! Cost: the first run builds the pinned commit (a debug build in its own
//! target directory, about 40 s of CPU; 2.5 minutes wall-clock on a
//! loaded two-core machine); later runs reuse the binary.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use util::{Conn, Dirs, INPUT, KillOnDrop, PTYD, unique_name};

/// The first commit with handoff version 3 (the busy-pane settle step).
/// This build still reads 3 (`HANDOFF_ACCEPTS_FROM`), so the pin stays a
/// version 3 build until 3 is no longer read; then it moves to the first
/// commit of the oldest version still read.
const PINNED: &str = "e3d4343fab01dec8261469fccee11a5f4dd23d69";

/// The pinned build's binary: `<target>/ptyd-pinned/<commit>/ptyd`, built
/// from `git archive` of the commit on first use.
fn pinned_binary() -> PathBuf {
    // PTYD is <target>/debug/ptyd.
    let target = Path::new(PTYD)
        .parent()
        .and_then(Path::parent)
        .expect("the target directory");
    let dir = target.join("ptyd-pinned").join(PINNED);
    let bin = dir.join("ptyd");
    if bin.is_file() {
        return bin;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("src-{}", std::process::id()));
    let build_target = dir.join(format!("target-{}", std::process::id()));
    std::fs::create_dir_all(&src).unwrap();
    let repo = env!("CARGO_MANIFEST_DIR");
    // `git archive` rather than a worktree: nothing is registered in the
    // repository, so an interrupted run leaves nothing to prune.
    let archive = format!(
        "git -C '{repo}' archive --format=tar {PINNED} | tar -x -C '{}'",
        src.display()
    );
    let out = Command::new("sh").args(["-c", &archive]).output().unwrap();
    assert!(
        out.status.success() && src.join("Cargo.toml").is_file(),
        "extracting commit {PINNED} failed (a shallow clone lacks it: `git fetch --unshallow`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO"))
        .args(["build", "--locked", "--bin", "ptyd"])
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &build_target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building commit {PINNED} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Into place atomically; only the binary is kept.
    let tmp = dir.join(format!("ptyd.{}", std::process::id()));
    std::fs::copy(build_target.join("debug").join("ptyd"), &tmp).unwrap();
    std::fs::rename(&tmp, &bin).unwrap();
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&build_target);
    bin
}

fn screens(c: &mut Conn, panes: &BTreeMap<String, i64>) -> Vec<String> {
    panes.keys().map(|id| c.capture_all(id)).collect()
}

#[test]
fn a_live_upgrade_from_the_pinned_older_build_keeps_panes_screens_and_clients() {
    let old_bin = pinned_binary();
    let dirs = Dirs::new();
    let ptyd = dirs.start_binary(&old_bin, &unique_name("skew"), &[], None, None);
    let mut c = ptyd.connect();
    let before = c.ok("server.status", json!({}));
    // The pinned build starts as a keeper plus a serving process: the
    // upgrade hands over from the serving one.
    let old_pid = before["pid"]
        .as_i64()
        .expect("status names the serving pid");

    let cat = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&cat, "ready");
    let art = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        "printf '\\033[1;31mred\\033[0m and \\033[4munderlined\\033[0m\\n'; seq 1 60; echo drawn; exec sleep 600",
    ]);
    c.wait_text(&art, "drawn");
    let pids = c.pane_pids();
    let screens_before = screens(&mut c, &pids);
    let mut attached = ptyd.connect().attach(json!({ "target": cat })).1;
    attached.read_until("ready");

    // The old build runs the sequence; this build is the new server and
    // answers once the old one's probation is over.
    let report: Value = c
        .call("server.upgrade", json!({ "binary": PTYD }))
        .unwrap_or_else(|e| panic!("upgrade from {PINNED}: {e:?}\n{}", ptyd.stderr()));
    let new_pid = report["new_pid"].as_i64().unwrap();
    let _new = KillOnDrop::pid(new_pid as i32);
    assert_eq!(report["generation"], 2, "{report}");
    assert_eq!(report["from"]["pid"], old_pid, "{report}");
    assert_eq!(report["from"]["version"], before["server_version"]);
    assert_eq!(report["to"]["pid"], new_pid, "{report}");
    assert_eq!(report["probation"], "survived", "{report}");
    assert_eq!(c.ok("server.status", json!({}))["pid"], new_pid);

    assert_eq!(c.pane_pids(), pids, "pane processes changed");
    assert_eq!(screens(&mut c, &pids), screens_before, "screens changed");
    // The client stayed attached: what it types reaches the pane, and the
    // pane's output reaches it.
    attached.send(INPUT, b"typed-after-skew\n");
    attached.read_until("typed-after-skew");
    c.input(&cat, "sent-after-skew\n");
    attached.read_until("sent-after-skew");

    // The keeper the old build started holds the lineage: a further
    // upgrade and the stop go through it.
    let again = c
        .call("server.upgrade", json!({}))
        .unwrap_or_else(|e| panic!("second upgrade: {e:?}\n{}", ptyd.stderr()));
    let _third = KillOnDrop::pid(again["new_pid"].as_i64().unwrap() as i32);
    assert_eq!(again["from"]["pid"], new_pid, "{again}");
    assert_eq!(c.pane_pids(), pids);
    drop(attached);
    drop(c);
    ptyd.stop();
}
