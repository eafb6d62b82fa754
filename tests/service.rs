//! Living under systemd: the unit file verifies, and the server speaks the
//! notify protocol through a live upgrade (READY, RELOADING, READY again from
//! the new generation, STOPPING).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use std::os::unix::net::UnixDatagram;
use std::process::Stdio;
use std::time::{Duration, Instant};
use util::{Dirs, KillOnDrop, PTYD, TIMEOUT, unique_name};

/// Receives notify datagrams until one contains `want`, failing after a
/// generous timeout. Returns every message seen.
fn wait_for(sock: &UnixDatagram, want: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        sock.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))
        .unwrap();
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            seen.push(msg.clone());
            if msg.contains(want) {
                return;
            }
        }
    }
    panic!("no notify message with {want:?}; saw {seen:?}");
}

/// A server whose sd_notify messages go to a datagram socket of the test's,
/// as systemd's `NOTIFY_SOCKET` would receive them.
fn notified_server(prefix: &str) -> (Dirs, String, UnixDatagram, KillOnDrop) {
    let dirs = Dirs::new();
    let ns = unique_name(prefix);
    let sock_path = dirs.state.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    let server = KillOnDrop::child(
        dirs.command(&ns)
            .arg("server")
            .env("NOTIFY_SOCKET", &sock_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (dirs, ns, sock, server)
}

#[test]
fn notify_protocol_through_an_upgrade() {
    let (dirs, ns, sock, mut server) = notified_server("notify");
    let mut seen = Vec::new();
    wait_for(&sock, "READY=1", &mut seen);

    let out = dirs
        .command(&ns)
        .args(["new", "-d", "--", "sleep", "1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = dirs
        .command(&ns)
        .args(["upgrade", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "upgrade failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(&sock, "RELOADING=1", &mut seen);
    let reloading = seen.last().unwrap().clone();
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    wait_for(&sock, "generation 2", &mut seen);
    assert!(seen.last().unwrap().contains("READY=1"), "{seen:?}");

    let out = dirs.command(&ns).arg("stop").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for(&sock, "STOPPING=1", &mut seen);
    // The spawned process is the first generation, now the reaper: it exits
    // once the last generation is gone, with that server's code.
    let status = util::wait_child(server.as_child_mut(), TIMEOUT)
        .expect("the reaper did not exit after stop");
    server.disarm();
    assert!(status.success(), "reaper exited with {status}");
}

/// Splits `ptyd service install --print` output into (file name, text).
fn printed_units(out: &str) -> Vec<(String, String)> {
    let mut units: Vec<(String, String)> = Vec::new();
    for line in out.lines() {
        if let Some(header) = line.strip_prefix("### ") {
            let name = header.split_whitespace().next().unwrap().to_string();
            units.push((name, String::new()));
        } else {
            let (_, text) = units.last_mut().expect("output starts with a ### header");
            text.push_str(line);
            text.push('\n');
        }
    }
    units
}

/// Runs `systemd-analyze verify --user` on unit files in `dir`, failing the
/// test with its complaints.
fn verify_units(dir: &std::path::Path, names: &[&str]) {
    let runtime = dir.join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut cmd = std::process::Command::new("systemd-analyze");
    cmd.args(["verify", "--user"])
        .args(names.iter().map(|n| dir.join(n)))
        .env("XDG_RUNTIME_DIR", &runtime);
    // Documentation=man:ptyd(1) is checked by running man(1): give it the
    // shipped page where it looks. Without man, that check is left out.
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok()
    {
        let man1 = dir.join("man/man1");
        std::fs::create_dir_all(&man1).unwrap();
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/man/ptyd.1"),
            man1.join("ptyd.1"),
        )
        .unwrap();
        cmd.env("MANPATH", dir.join("man"));
    } else {
        eprintln!("man(1) is not installed: Documentation=man:ptyd(1) goes unchecked");
        cmd.arg("--man=no");
    }
    let out = cmd
        .output()
        .expect("systemd-analyze is needed (Debian package systemd)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let about_us: Vec<&str> = stderr.lines().filter(|l| l.contains("ptyd")).collect();
    assert!(
        out.status.success() && about_us.is_empty(),
        "systemd-analyze complains ({}): {stderr}",
        out.status
    );
}

/// What `ptyd service install --print` writes verifies, names the binary
/// that ran it, and is what `install` writes.
#[test]
fn installed_units_verify() {
    let dirs = Dirs::new();
    let config = dirs.state.join("config");
    let out = dirs
        .command("default")
        .args(["service", "install", "--print"])
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    let units = printed_units(&printed);
    let names: Vec<&str> = units.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["ptyd.service", "ptyd.socket"]);
    let exe = std::fs::canonicalize(PTYD).unwrap();
    assert!(
        units[0]
            .1
            .contains(&format!("ExecStart={} -L default server", exe.display())),
        "{}",
        units[0].1
    );
    assert!(
        units[0].1.contains("upgrade"),
        "reload must be the live upgrade"
    );
    assert!(
        units[1]
            .1
            .contains("ListenStream=%t/ptyd/default/ptyd.sock")
    );
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in &units {
        std::fs::write(tmp.path().join(name), text).unwrap();
    }
    verify_units(tmp.path(), &names);

    // Installing writes the same files; reloading the user manager may fail
    // here (no user bus), which must be reported, files still in place.
    let out = dirs
        .command("default")
        .args(["service", "install"])
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (name, text) in &units {
        let path = config.join("systemd/user").join(name);
        assert_eq!(&std::fs::read_to_string(&path).unwrap(), text);
        assert!(
            stdout.contains(&format!("wrote {}", path.display())),
            "{stdout}"
        );
    }
    if !out.status.success() {
        assert!(stderr.contains("daemon-reload"), "{stderr}");
    }

    let out = dirs
        .command("default")
        .args(["service", "uninstall"])
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for (name, _) in &units {
        assert!(!config.join("systemd/user").join(name).exists(), "{stdout}");
    }
}

/// The units shipped for distribution packages verify (with their
/// /usr/bin/ptyd pointed at the binary under test).
#[test]
fn shipped_units_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let names = ["ptyd.service", "ptyd.socket"];
    for name in names {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("packaging/systemd")
                .join(name),
        )
        .unwrap();
        std::fs::write(tmp.path().join(name), text.replace("/usr/bin/ptyd", PTYD)).unwrap();
    }
    verify_units(tmp.path(), &names);
}

/// `ptyd server` while one serves the namespace exits 3 (the unit's
/// RestartPreventExitStatus) naming the serving pid (not
/// the reaper's, after an upgrade) and a stop command that works.
#[test]
fn a_second_server_names_the_serving_pid_and_a_working_stop() {
    let ptyd = util::Ptyd::start();
    let out = ptyd.run_cli(&["upgrade"]);
    assert!(out.status.success(), "{out:?}");
    let status = ptyd.run_cli(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let serving = status["pid"].as_i64().unwrap();
    assert_ne!(serving, ptyd.pid() as i64, "the upgrade kept the pid");

    let out = ptyd.run_cli(&["server"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("(pid {serving})")), "{err}");
    let command = err
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in {err}"));
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[0], "ptyd", "{err}");
    let mut stop = ptyd.dirs.command(&ptyd.namespace);
    stop.args(&words[1..]);
    let out = util::run_bounded(stop, command);
    assert!(out.status.success(), "`{command}` failed: {out:?}");
}

/// A rolled-back upgrade tells systemd it is ready again (the reload is
/// over, the old server serves on), and a later stop says STOPPING.
#[test]
fn notify_protocol_through_a_rollback() {
    let (dirs, ns, sock, mut server) = notified_server("notify-rb");
    let mut seen = Vec::new();
    wait_for(&sock, "READY=1", &mut seen);

    let out = dirs
        .command(&ns)
        .args(["upgrade", "--fault", "new-before-imported:exit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    wait_for(&sock, "RELOADING=1", &mut seen);
    wait_for(&sock, "READY=1", &mut seen);
    let ready = seen.last().unwrap();
    assert!(ready.contains("STATUS=upgrade failed"), "{seen:?}");

    let out = dirs.command(&ns).arg("stop").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for(&sock, "STOPPING=1", &mut seen);
    let status =
        util::wait_child(server.as_child_mut(), util::TIMEOUT).expect("server did not stop");
    assert!(status.success(), "{status}");
}
