//! Living under systemd: the unit file verifies, and the server speaks the
//! notify protocol through a live upgrade (READY, RELOADING, READY again from
//! the new generation, STOPPING).

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

#[test]
fn notify_protocol_through_an_upgrade() {
    let dirs = Dirs::new();
    let ns = unique_name("notify");
    let sock_path = dirs.state.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    let mut server = KillOnDrop::child(
        dirs.command(&ns)
            .arg("server")
            .env("NOTIFY_SOCKET", &sock_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
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

#[test]
fn systemd_unit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/systemd/ptyd.service"
    ))
    .unwrap();
    assert!(
        unit.contains("ExecReload=%h/.cargo/bin/ptyd upgrade"),
        "reload must be the live upgrade"
    );
    let unit = unit.replace("%h/.cargo/bin/ptyd", PTYD);
    let path = dir.path().join("ptyd.service");
    std::fs::write(&path, unit).unwrap();
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify"])
        .arg(&path)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze is needed (Debian package systemd)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let about_us: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ptyd.service"))
        .collect();
    assert!(
        about_us.is_empty(),
        "systemd-analyze complains: {about_us:?}"
    );
}
