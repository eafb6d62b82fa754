//! A runtime directory removed under a running server (logind at logout,
//! a tmp cleaner, `rm -rf`): the server makes its socket and lock again
//! and keeps every pane; a server started meanwhile refuses, naming the
//! one still running, instead of claiming the namespace beside it.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use util::{Conn, Ptyd, run_bounded, stderr};

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects; the pid is the test's server.
    unsafe { libc::kill(pid, sig) };
}

/// The panes `ptyd ls --json` lists, once it works again (each try may
/// autostart a server, which must refuse while the old one runs).
fn pane_ids_when_reachable(ptyd: &Ptyd) -> Vec<String> {
    util::eventually("ptyd ls to answer again", || {
        let out = ptyd.run_cli(&["ls", "--json"]);
        if !out.status.success() {
            eprintln!("ptyd ls: {}", stderr(&out));
            return None;
        }
        let list: Value = serde_json::from_slice(&out.stdout).ok()?;
        let mut ids: Vec<String> = list["panes"]
            .as_array()?
            .iter()
            .map(|p| p["id"].as_str().unwrap_or_default().to_string())
            .collect();
        ids.sort();
        Some(ids)
    })
}

fn running_panes(ptyd: &Ptyd, n: usize) -> Vec<String> {
    let mut ids: Vec<String> = (0..n)
        .map(|_| ptyd.create_argv(&["sleep", "1000"]))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_removed_runtime_directory_is_made_again_and_every_pane_kept() {
    let ptyd = Ptyd::start();
    let ids = running_panes(&ptyd, 3);
    let before = ptyd.status_json();
    let base = ptyd.dirs.runtime.join("ptyd");
    fs::remove_dir_all(&base).unwrap();
    assert!(!ptyd.socket().exists());

    assert_eq!(pane_ids_when_reachable(&ptyd), ids);
    let status = ptyd.status_json();
    // The same server, not a new one that started empty beside it.
    assert_eq!(status["pid"], before["pid"], "{status}");
    assert_eq!(status["keeper"]["pid"], before["keeper"]["pid"]);
    assert_eq!(status["running_panes"], 3, "{status}");
    assert_eq!(status["runtime_dir"]["rebinds"], 1, "{status}");
    assert!(
        status["runtime_dir"]["last_rebind"]["what"]
            .as_str()
            .is_some_and(|w| w.contains("socket and lock")),
        "{status}"
    );
    // Made again as private as at start-up, lock included.
    let ns_dir = ptyd.dirs.ns_dir(&ptyd.namespace);
    assert_eq!(mode(&base), 0o700);
    assert_eq!(mode(&ns_dir), 0o700);
    assert_eq!(mode(&ptyd.socket()), 0o600);
    assert_eq!(mode(&ns_dir.join("ptyd.lock")) & 0o077, 0);
    let log = fs::read_to_string(
        ptyd.dirs
            .state_dir(&ptyd.namespace)
            .join("diagnostics.jsonl"),
    )
    .unwrap();
    assert!(log.contains("runtime_dir_restored"), "{log}");

    // The lock is held again: a second server is refused as usual.
    let mut second = ptyd.cli(&["server"]);
    second.env_remove("PTYD_READY_FD");
    let out = run_bounded(second, "a second ptyd server");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("already running"), "{}", stderr(&out));

    // The keeper was given the new listener: a replacement after a crash
    // serves on the new socket, with every pane.
    let serving = before["pid"].as_i64().unwrap() as i32;
    signal(serving, libc::SIGKILL);
    util::eventually("a replacement to answer on the new socket", || {
        let mut c = Conn::try_connect(&ptyd.socket())?;
        let status = c.try_call("server.status", json!({}))?.ok()?;
        (status["pid"].as_i64()? as i32 != serving).then_some(())
    });
    assert_eq!(pane_ids_when_reachable(&ptyd), ids);
}

#[test]
fn a_server_started_while_the_directory_is_gone_names_the_one_still_running() {
    let ptyd = Ptyd::start();
    let ids = running_panes(&ptyd, 2);
    let serving = ptyd.serving_pid();
    // Stopped, so it cannot make the directory again before the new
    // server looks.
    signal(serving, libc::SIGSTOP);
    fs::remove_dir_all(ptyd.dirs.runtime.join("ptyd")).unwrap();

    let mut second = ptyd.cli(&["server"]);
    second.env_remove("PTYD_READY_FD");
    let out = run_bounded(second, "a ptyd server in the removed namespace");
    let err = stderr(&out);
    signal(serving, libc::SIGCONT);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("runtime directory") && err.contains("was removed"),
        "{err}"
    );
    assert!(err.contains(&ptyd.pid().to_string()), "{err}");
    assert!(!err.contains("systemd"), "{err}");

    // The old server takes the namespace back, lock file and all.
    assert_eq!(pane_ids_when_reachable(&ptyd), ids);
    assert_eq!(ptyd.serving_pid(), serving);
}

#[test]
fn a_removed_socket_alone_is_bound_again_at_sighup() {
    let mut dirs = util::Dirs::new();
    // No periodic check during the test: only the SIGHUP can find it.
    dirs.env
        .push(("PTYD_REBIND_CHECK_MS".into(), "3600000".into()));
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("hup"));
    let ids = running_panes(&ptyd, 1);
    fs::remove_file(ptyd.socket()).unwrap();
    // SIGHUP is a reload: the upgrade that follows hands on the new socket.
    signal(ptyd.pid(), libc::SIGHUP);
    assert_eq!(pane_ids_when_reachable(&ptyd), ids);
    // The server that made it again handed over to the upgrade's.
    let log = fs::read_to_string(
        ptyd.dirs
            .state_dir(&ptyd.namespace)
            .join("diagnostics.jsonl"),
    )
    .unwrap();
    assert!(
        log.lines().any(|l| l.contains("runtime_dir_restored")
            && l.contains("the socket in")
            && l.contains("SIGHUP found it")),
        "{log}"
    );
}
