//! The files and directories a server trusts,
//! through the real binary: a state or config directory another user could
//! write is refused with what to run; `session.json`, history files and the
//! config are read only when they are regular files of ours that nobody
//! else may change, never through a symlink, never blocking on a FIFO and
//! never beyond a bound; a save never follows a `history/` symlink; the
//! lock file is never followed or truncated.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};
use util::{Dirs, eventually, set_mode};

/// A uid nobody on a test machine has: files "owned by another user".
const OTHER_UID: u32 = 54_321;

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Starts a server in `ns`, makes a pane whose `resume` command would
/// touch `marker` at the next restore, saves and stops. Returns the saved
/// session's bytes.
fn saved_session_with_resume(env: &Dirs, ns: &str, marker: &Path) -> Vec<u8> {
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({
        "name": "planted",
        "argv": ["sleep", "1000"],
        "resume": format!("touch {}; exec sleep 1000", marker.display()),
    }));
    c.save();
    server.stop();
    fs::read(env.session_path(ns)).unwrap()
}

/// Runs `ptyd server` expecting it to refuse to start; returns its stderr.
fn refused_start(env: &Dirs, ns: &str) -> String {
    let mut cmd = env.command(ns);
    cmd.arg("server");
    let out = util::run_bounded(cmd, "ptyd server (expected to refuse)");
    assert!(!out.status.success(), "the server started: {out:?}");
    util::stderr(&out)
}

fn restore_report(server: &util::Ptyd) -> Value {
    server.status_json()["persistence"]["restore"].clone()
}

#[test]
fn a_state_dir_others_can_write_is_refused_and_left_untouched() {
    let env = Dirs::new();
    let ns = "open-state";
    let marker = env.path("marks").join("resumed");
    let original = saved_session_with_resume(&env, ns, &marker);
    let state = env.state_dir(ns);

    set_mode(&state, 0o777);
    let err = refused_start(&env, ns);
    assert!(err.contains("chmod go-w"), "{err}");
    assert!(err.contains(&state.display().to_string()), "{err}");
    assert!(!marker.exists(), "the planted resume command ran");
    assert_eq!(fs::read(env.session_path(ns)).unwrap(), original);
    // A command that starts a server says why it could not, once.
    let mut cmd = env.command(ns);
    cmd.arg("ls");
    let out = util::run_bounded(cmd, "ptyd ls (autostart refused)");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = util::stderr(&out);
    assert!(
        err.starts_with("ptyd: could not start a ptyd server: refusing the state directory"),
        "{err}"
    );
    assert_eq!(err.matches("chmod go-w").count(), 1, "{err}");
    set_mode(&state, 0o700);

    if is_root() {
        std::os::unix::fs::chown(&state, Some(OTHER_UID), None).unwrap();
        let err = refused_start(&env, ns);
        assert!(err.contains(&format!("owned by uid {OTHER_UID}")), "{err}");
        assert!(err.contains("chown"), "{err}");
        assert!(!marker.exists(), "the planted resume command ran");
        assert_eq!(fs::read(env.session_path(ns)).unwrap(), original);
        std::os::unix::fs::chown(&state, Some(0), None).unwrap();
    }

    // Fixed, it restores as usual.
    let server = env.start(ns);
    eventually("the resume command ran", || marker.exists());
    server.stop();
}

#[test]
fn a_session_file_not_ours_alone_is_not_read_or_overwritten() {
    let env = Dirs::new();
    let ns = "open-session";
    let marker = env.path("marks").join("resumed");
    let original = saved_session_with_resume(&env, ns, &marker);
    let session = env.session_path(ns);

    // Writable by others.
    set_mode(&session, 0o666);
    let server = env.start(ns);
    let report = restore_report(&server);
    assert!(
        report["unusable"]
            .as_str()
            .unwrap_or_default()
            .contains("chmod go-w"),
        "{report}"
    );
    let mut c = server.connect();
    c.create(json!({ "argv": ["sleep", "1000"] }));
    server.stop();
    assert!(
        !marker.exists(),
        "the resume command of an untrusted file ran"
    );
    assert_eq!(
        fs::read(&session).unwrap(),
        original,
        "the file was overwritten"
    );

    // A symlink to a real snapshot: not followed.
    let elsewhere = env.path("elsewhere").join("session.json");
    fs::rename(&session, &elsewhere).unwrap();
    symlink(&elsewhere, &session).unwrap();
    let server = env.start(ns);
    let report = restore_report(&server);
    assert!(
        report["unusable"]
            .as_str()
            .unwrap_or_default()
            .contains("symbolic link"),
        "{report}"
    );
    server.stop();
    assert!(!marker.exists());
    assert!(
        fs::symlink_metadata(&session)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    if is_root() {
        fs::remove_file(&session).unwrap();
        fs::rename(&elsewhere, &session).unwrap();
        set_mode(&session, 0o600);
        std::os::unix::fs::chown(&session, Some(OTHER_UID), None).unwrap();
        let server = env.start(ns);
        let report = restore_report(&server);
        assert!(
            report["unusable"]
                .as_str()
                .unwrap_or_default()
                .contains("owned by uid"),
            "{report}"
        );
        server.stop();
        assert!(!marker.exists());
    }
}

#[test]
fn fifos_as_state_and_config_files_never_hang_start_up() {
    let env = Dirs::new();
    let ns = "fifos";
    let state = env.state_dir(ns);
    fs::create_dir_all(&state).unwrap();
    set_mode(&state, 0o700);
    set_mode(state.parent().unwrap(), 0o700);
    mkfifo(&env.session_path(ns));
    let config_dir = env.state.join("config/ptyd");
    fs::create_dir_all(&config_dir).unwrap();
    mkfifo(&config_dir.join("config.toml"));

    let started = Instant::now();
    let server = env.start(ns);
    assert!(started.elapsed() < Duration::from_secs(10));
    let report = restore_report(&server);
    assert!(
        report["unusable"]
            .as_str()
            .unwrap_or_default()
            .contains("not a regular file"),
        "{report}"
    );
    let problems = server.status_json()["config"]["problems"].to_string();
    assert!(problems.contains("not a regular file"), "{problems}");
    server.stop();

    // `ptyd config check` says the same, at once.
    let mut cmd = env.command(ns);
    cmd.args(["config", "check"]);
    let out = util::run_bounded(cmd, "ptyd config check");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(util::stderr(&out).contains("not a regular file"), "{out:?}");
}

#[test]
fn a_config_others_can_write_is_not_used() {
    let env = Dirs::new();
    let ns = "open-config";
    let config_dir = env.state.join("config/ptyd");
    fs::create_dir_all(&config_dir).unwrap();
    let config = config_dir.join("config.toml");
    fs::write(&config, "scrollback_lines = 77\n").unwrap();
    set_mode(&config, 0o666);
    let server = env.start(ns);
    let status = server.status_json();
    let problems = status["config"]["problems"].to_string();
    assert!(problems.contains("chmod go-w"), "{status}");
    server.stop();

    set_mode(&config, 0o644);
    set_mode(&config_dir, 0o777);
    let server = env.start(ns);
    let problems = server.status_json()["config"]["problems"].to_string();
    assert!(
        problems.contains(&format!("{} has mode 777", config_dir.display())),
        "{problems}"
    );
    server.stop();
}

#[test]
fn a_history_symlink_never_leads_a_save_to_delete_elsewhere() {
    let env = Dirs::new();
    let ns = "history-link";
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "argv": ["/bin/sh"] }));
    c.type_line("p1", "echo hello");
    c.wait_text("p1", "hello");
    c.save();

    // history/ replaced by a link to a directory of precious files.
    let victim_dir = env.path("precious");
    let victim = victim_dir.join("thesis.tex");
    fs::write(&victim, b"years of work").unwrap();
    let history = env.state_dir(ns).join("history");
    fs::remove_dir_all(&history).unwrap();
    symlink(&victim_dir, &history).unwrap();
    c.create(json!({ "argv": ["sleep", "1000"] }));
    c.save();
    assert_eq!(fs::read(&victim).unwrap(), b"years of work");
    let meta = fs::symlink_metadata(&history).unwrap();
    assert!(meta.is_dir(), "history/ is still a link");
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert!(history.join("p1.txt").exists());
    server.stop();
    assert_eq!(fs::read(&victim).unwrap(), b"years of work");
}

#[test]
fn the_lock_file_is_never_followed_or_truncated() {
    let env = Dirs::new();
    let ns = "lock-link";
    let ns_dir = env.ns_dir(ns);
    fs::create_dir_all(&ns_dir).unwrap();
    set_mode(&ns_dir, 0o700);
    set_mode(ns_dir.parent().unwrap(), 0o700);
    let victim = env.path("precious").join("notes.txt");
    fs::write(&victim, b"keep me").unwrap();
    symlink(&victim, ns_dir.join("ptyd.lock")).unwrap();
    let err = refused_start(&env, ns);
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(fs::read(&victim).unwrap(), b"keep me");

    // A real lock file with more in it than a pid: overwritten in place,
    // never truncated, and still names the server.
    fs::remove_file(ns_dir.join("ptyd.lock")).unwrap();
    let long = "x".repeat(100);
    fs::write(ns_dir.join("ptyd.lock"), &long).unwrap();
    let server = env.start(ns);
    let text = fs::read_to_string(ns_dir.join("ptyd.lock")).unwrap();
    assert_eq!(text.len(), 100, "{text:?}");
    assert_eq!(
        text.split_whitespace().next(),
        Some(server.pid().to_string().as_str())
    );
    server.stop();
}

#[test]
fn huge_and_endless_history_files_are_read_within_a_bound() {
    let env = Dirs::new();
    let ns = "history-bound";
    let server = env.start(ns);
    let mut c = server.connect();
    c.create(json!({ "argv": ["/bin/sh"] }));
    c.create(json!({ "argv": ["/bin/sh"] }));
    c.type_line("p1", "echo one");
    c.wait_text("p1", "one");
    c.type_line("p2", "echo two");
    c.wait_text("p2", "two");
    c.save();
    server.stop();

    // p1's history: 64 MiB, its last line a marker. p2's: /dev/zero.
    let history = env.state_dir(ns).join("history");
    let big = fs::File::create(history.join("p1.txt")).unwrap();
    big.set_len(64 << 20).unwrap();
    drop(big);
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(history.join("p1.txt"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"\nthe-newest-line\n").unwrap();
    drop(f);
    fs::remove_file(history.join("p2.txt")).unwrap();
    symlink("/dev/zero", history.join("p2.txt")).unwrap();

    let started = Instant::now();
    let server = env.start(ns);
    assert!(started.elapsed() < Duration::from_secs(10));
    let report = restore_report(&server);
    let repairs = report["repairs"].to_string();
    assert!(repairs.contains("p1: history file"), "{report}");
    assert!(repairs.contains("bytes skipped"), "{report}");
    assert!(repairs.contains("p2: history not restored"), "{report}");
    assert!(repairs.contains("symbolic link"), "{report}");
    let mut c = server.connect();
    let screen = c.capture_all("p1");
    assert!(screen.contains("the-newest-line"), "{screen}");
    // The server read about 1 MiB, not 64: its memory says so.
    let rss_kb: u64 = fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kb < 48 << 10, "peak RSS {rss_kb} kB");
    server.stop();
}

#[test]
fn logs_are_never_written_through_a_symlink() {
    let env = Dirs::new();
    let ns = "log-link";
    let state = env.state_dir(ns);
    fs::create_dir_all(&state).unwrap();
    set_mode(&state, 0o700);
    set_mode(state.parent().unwrap(), 0o700);
    let victim = env.path("precious").join("notes.txt");
    fs::write(&victim, b"keep me").unwrap();
    symlink(&victim, state.join("diagnostics.jsonl")).unwrap();
    symlink(&victim, state.join("server.stderr")).unwrap();
    // A server the CLI starts (its stderr goes to server.stderr), which
    // logs to diagnostics.jsonl.
    let mut cmd = env.command(ns);
    cmd.args(["new", "-d", "--", "sleep", "1000"]);
    let out = util::run_bounded(cmd, "ptyd new -d (autostart)");
    assert!(out.status.success(), "{out:?}");
    let mut cmd = env.command(ns);
    cmd.args(["status", "--json"]);
    let status: Value = serde_json::from_slice(&util::run_bounded(cmd, "status").stdout).unwrap();
    let _server = util::KillOnDrop::pid(status["pid"].as_i64().unwrap() as i32);
    let mut cmd = env.command(ns);
    cmd.arg("stop");
    util::run_bounded(cmd, "ptyd stop");
    assert_eq!(fs::read(&victim).unwrap(), b"keep me");
}
