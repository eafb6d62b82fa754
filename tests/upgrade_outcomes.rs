//! What `ptyd upgrade` reports, and when ("upgrades that report
//! the truth"), through the real binary: success
//! only once the new server survived its probation, naming the serving
//! process before and after; a second upgrade right after (or during) one
//! waits instead of failing; binaries that die, linger or cannot serve end
//! in a failure that says what happened, with nothing frozen or lost.
//!
//! The misbehaving binaries are shell scripts that answer the version probe
//! with the real build's `version --json` and then misbehave as a server.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use util::{Conn, KillOnDrop, PTYD, Ptyd, TIMEOUT};

/// A script standing in for a ptyd binary: `version --json` runs the real
/// build's (then `after_probe`, still as the probe); as a server it runs
/// `server`.
fn fake_binary(dir: &Path, name: &str, after_probe: &str, server: &str) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = version ]; then\n  \"{PTYD}\" version --json\n  {after_probe}\n  exit 0\nfi\n{server}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn serving_pid(c: &mut Conn) -> i64 {
    c.ok("server.status", json!({}))["pid"].as_i64().unwrap()
}

/// Live children of `pid` that are not pane processes: what an upgrade
/// left behind (a probe, a new server, a zombie counts too).
fn stray_children(pid: i64, panes: &BTreeMap<String, i64>) -> Vec<i32> {
    let pane_pids: BTreeSet<i64> = panes.values().copied().collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            util::proc_stat_field(*p, 4).and_then(|pp| pp.parse::<i64>().ok()) == Some(pid)
                && !pane_pids.contains(&(*p as i64))
        })
        .collect()
}

/// A server with a `cat` pane that echoes what it is sent.
fn server_with_cat() -> (Ptyd, Conn, String) {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let cat = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&cat, "ready");
    (ptyd, c, cat)
}

fn canonical_ptyd() -> String {
    std::fs::canonicalize(PTYD)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn upgrade_twice_in_a_row_succeeds_and_names_the_process_before_and_after() {
    let (ptyd, mut c, cat) = server_with_cat();
    let panes = c.pane_pids();
    let first = serving_pid(&mut c);
    let version = env!("CARGO_PKG_VERSION");
    let bin = canonical_ptyd();

    let out = ptyd.run_cli(&["upgrade"]);
    util::assert_exit(&out, 0);
    let second = serving_pid(&mut c);
    let _guard = KillOnDrop::pid(second as i32);
    assert_ne!(second, first);
    let text = util::stdout(&out);
    let names = format!(
        "upgraded ptyd {version} ({bin}, pid {first}) -> ptyd {version} ({bin}, pid {second}) (generation 2)"
    );
    assert!(
        text.starts_with(&names),
        "{names:?} is not the start of {text:?}"
    );
    assert!(text.contains("probation  survived"), "{text}");

    // At once: the first command returned only after the probation, so
    // nothing is in the way, and nothing had to wait.
    let out = ptyd.run_cli(&["upgrade", "--json"]);
    util::assert_exit(&out, 0);
    assert_eq!(util::stderr(&out), "", "the second upgrade had to wait");
    let report: Value = serde_json::from_str(util::stdout(&out).trim()).unwrap();
    let third = serving_pid(&mut c);
    let _guard3 = KillOnDrop::pid(third as i32);
    assert_eq!(
        report["from"],
        json!({ "pid": second, "version": version, "binary": bin })
    );
    assert_eq!(
        report["to"],
        json!({ "pid": third, "version": version, "binary": bin })
    );
    assert_eq!(report["probation"], "survived", "{report}");
    assert!(report["probation_ms"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["generation"], 3);

    assert_eq!(c.pane_pids(), panes);
    c.input(&cat, "after-two\n");
    c.wait_text(&cat, "after-two");
    ptyd.stop();
}

#[test]
fn an_upgrade_to_a_binary_that_dies_50_ms_after_start_fails() {
    let (ptyd, mut c, cat) = server_with_cat();
    let panes = c.pane_pids();
    let old = serving_pid(&mut c);
    let dir = ptyd.dirs.path("bin");
    // The real server, SIGKILLed 50 ms after it starts (`$$` is the pid it
    // is exec'd into): wherever that falls, before the commit or in
    // probation, the upgrade fails and the old server serves on.
    let dying = fake_binary(
        &dir,
        "ptyd-dies",
        "",
        &format!("( sleep 0.05; kill -9 $$ ) &\nexec \"{PTYD}\" \"$@\""),
    );
    let out = ptyd.run_cli(&["upgrade", "--binary", dying.to_str().unwrap()]);
    util::assert_exit(&out, 1);
    let err = util::stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    for needle in [
        "ptyd: upgrade from ptyd",
        dying.to_str().unwrap(),
        "was killed by SIGKILL",
        &format!("pid {old}"),
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err:?}");
    }
    // A take-back in probation closes every connection the new server
    // had read from (see `take_back`); a rollback before the commit keeps
    // them. Which one happened depends on timing, so ask afresh.
    drop(c);
    let mut c = ptyd.connect();
    assert_eq!(serving_pid(&mut c), old);
    assert_eq!(c.pane_pids(), panes);
    c.input(&cat, "still-here\n");
    c.wait_text(&cat, "still-here");
    ptyd.stop();
}

/// A binary whose version probe prints, closes its output and keeps
/// running, and which as a server says nothing: the loop never waits for
/// either; both are killed and reaped without blocking.
#[test]
fn a_lingering_probe_and_a_silent_new_server_freeze_nothing() {
    let (ptyd, mut c, cat) = server_with_cat();
    let panes = c.pane_pids();
    let old = serving_pid(&mut c);
    let dir = ptyd.dirs.path("bin");
    let lingering = fake_binary(
        &dir,
        "ptyd-lingers",
        "exec >&- 2>&-; exec sleep 300",
        "exec >&- 2>&- <&-; exec sleep 300",
    );
    let mut upgrade = KillOnDrop::child(
        ptyd.cli(&[
            "upgrade",
            "--binary",
            lingering.to_str().unwrap(),
            "--timeout",
            "3s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // The probe's output ended and its process lingers; the new server
    // was started and says nothing. The server answers meanwhile.
    util::eventually("the upgrade to wait for the new server's hello", || {
        let st = c.ok("server.status", json!({}));
        (st["upgrade"]["phase"] == "prepare").then_some(())
    });
    c.input(&cat, "served-meanwhile\n");
    c.wait_text(&cat, "served-meanwhile");
    let status =
        util::wait_child(upgrade.as_child_mut(), TIMEOUT).expect("the upgrade command to end");
    let out = upgrade.into_child().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(1), "{err}");
    for needle in [
        "did not say hello within",
        "(phase prepare)",
        "--timeout",
        "keeps serving",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err:?}");
    }
    // Killed and reaped by the loop: no probe, no new server, no zombie.
    util::eventually("the probe and the new server to be reaped", || {
        let stray = stray_children(old, &panes);
        if stray.is_empty() {
            Ok(())
        } else {
            Err(format!("children left: {stray:?}"))
        }
    });
    assert_eq!(serving_pid(&mut c), old);
    assert_eq!(c.pane_pids(), panes);
    ptyd.stop();
}

/// `--mode restore` to a binary that passes the probe but exits as a
/// server. The session was saved before the exec; the command sees the
/// process end (not a 30 s wait), restores the session with its own
/// binary and fails saying so.
#[test]
fn a_restore_to_a_binary_that_cannot_serve_brings_the_session_back() {
    let (mut ptyd, mut c, cat) = server_with_cat();
    let ids: Vec<String> = c.pane_pids().into_keys().collect();
    let old = serving_pid(&mut c);
    drop(c);
    let dir = ptyd.dirs.path("bin");
    let broken = fake_binary(
        &dir,
        "ptyd-broken",
        "",
        "echo 'this build cannot serve' >&2; exit 3",
    );
    let out = ptyd.run_cli(&[
        "upgrade",
        "--mode",
        "restore",
        "--binary",
        broken.to_str().unwrap(),
    ]);
    util::assert_exit(&out, 1);
    let err = util::stderr(&out);
    for needle in [
        &format!("the server (pid {old}) restarted as {}", broken.display()),
        "exited before serving",
        "the saved session was restored by this ptyd instead",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err:?}");
    }
    // The harness's server process was the one exec'd into the broken
    // binary: it ended with its code.
    assert_eq!(ptyd.wait_exit().code(), Some(3));
    let mut c = ptyd.connect();
    let status = c.ok("server.status", json!({}));
    let restored = status["pid"].as_i64().unwrap() as i32;
    let _guard = KillOnDrop::pid(restored);
    assert_ne!(restored as i64, old);
    let now: Vec<String> = c.pane_pids().into_keys().collect();
    assert_eq!(now, ids, "the restored session has other panes");
    assert!(c.pane_info(&cat).is_some());
    c.ok("server.stop", json!({}));
    c.read_until_eof();
    util::eventually("the restored server to stop", || {
        util::process_gone(restored).then_some(())
    });
}

/// A new server that fails before the commit says why, and the old
/// side reports that rather than "the peer closed the handoff socket".
/// Here it cannot receive the pre-copy's fds (a limit of 6 open files).
#[test]
fn a_new_server_that_gives_up_is_quoted_not_a_closed_socket() {
    let (ptyd, mut c, _cat) = server_with_cat();
    let old = serving_pid(&mut c);
    let dir = ptyd.dirs.path("bin");
    let starved = fake_binary(
        &dir,
        "ptyd-few-fds",
        "",
        &format!("ulimit -n 6\nexec \"{PTYD}\" \"$@\""),
    );
    let out = ptyd.run_cli(&["upgrade", "--binary", starved.to_str().unwrap()]);
    util::assert_exit(&out, 1);
    let err = util::stderr(&out);
    assert!(
        err.contains("the new server gave up: ") && !err.contains("peer closed"),
        "{err:?}"
    );
    assert_eq!(serving_pid(&mut c), old);
    ptyd.stop();
}

/// Two reloads in a row by signal (`kill -HUP`, or the reaper forwarding
/// one): the second comes during the first one's probation (made long
/// here, so it surely does) and waits for it, then upgrades too.
#[test]
fn a_sighup_during_an_upgrade_upgrades_again_after_it() {
    let dirs = util::Dirs::new();
    let config = dirs.state.join("config").join("ptyd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "upgrade_probation_ms = 5000\n").unwrap();
    let ptyd = dirs.start(&util::unique_name("hup"));
    let mut c = ptyd.connect();
    let cat = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&cat, "ready");
    let panes = c.pane_pids();
    let first = ptyd.pid();
    let hup = || {
        // SAFETY: kill(2) has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(first, libc::SIGHUP) }, 0);
    };
    hup();
    // Committed: the first server is in its probation now.
    let second = util::eventually("the first upgrade to commit", || {
        let st = c.ok("server.status", json!({}));
        (st["generation"] == 2).then(|| st["pid"].as_i64().unwrap() as i32)
    });
    let _second = KillOnDrop::pid(second);
    hup();
    let third = util::eventually("the second upgrade to serve", || {
        let st = c.ok("server.status", json!({}));
        (st["generation"] == 3 && st["upgrade"].is_null())
            .then(|| st["pid"].as_i64().unwrap() as i32)
    });
    let _third = KillOnDrop::pid(third);
    assert_ne!(third, second);
    assert!(
        ptyd.stderr().contains("upgrade_queued"),
        "the second SIGHUP did not wait: {}",
        ptyd.stderr()
    );
    assert_eq!(c.pane_pids(), panes);
    c.input(&cat, "after-two-reloads\n");
    c.wait_text(&cat, "after-two-reloads");
    drop(c);
    ptyd.stop();
}
