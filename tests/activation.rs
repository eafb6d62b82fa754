//! Socket activation: a listening socket passed the way systemd passes it
//! (fd 3, `LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`) is served, handed on
//! by live and restore-mode upgrades, and never unlinked by ptyd; a socket
//! bound elsewhere, or not a listening socket at all, is refused with a
//! message that says what is wrong.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use util::{Dirs, KillOnDrop, PTYD, unique_name};

/// `ptyd server` started as systemd starts an activated service: `fd` as
/// fd 3 and the variables naming this very process (`sh` sets `LISTEN_PID`
/// to its own pid, then execs ptyd in place).
fn activated_server(dirs: &Dirs, ns: &str, fd: RawFd, stderr: &Path) -> KillOnDrop {
    let template = dirs.command(ns);
    let mut cmd = Command::new("/bin/sh");
    cmd.args([
        "-c",
        "LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=ptyd.socket exec \"$0\" server",
        PTYD,
    ]);
    for (key, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap());
    // SAFETY: dup2 and fcntl are async-signal-safe; they place the socket
    // at fd 3 without FD_CLOEXEC, exactly as systemd does (dup2 onto itself
    // would leave the flag set, hence the fcntl).
    unsafe {
        cmd.pre_exec(move || {
            let ok = if fd == 3 {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if ok < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    KillOnDrop::child(cmd.spawn().unwrap())
}

/// A listening socket at `path`, bound as the socket unit would bind it.
fn bind(path: &Path) -> UnixListener {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    for dir in [
        path.parent().unwrap(),
        path.parent().unwrap().parent().unwrap(),
    ] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let listener = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    listener
}

fn ptyd(dirs: &Dirs, ns: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = dirs.command(ns);
    cmd.args(args);
    util::run_bounded(cmd, &format!("ptyd {args:?}"))
}

fn inode(path: &Path) -> (u64, u64) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.dev(), meta.ino())
}

#[test]
fn serves_a_passed_socket_through_upgrades() {
    let dirs = Dirs::new();
    let ns = unique_name("activated");
    let path = dirs.socket(&ns);
    let listener = bind(&path);
    let ours = inode(&path);
    let stderr = dirs.state.join("server.stderr");
    let mut server = activated_server(&dirs, &ns, listener.as_raw_fd(), &stderr);
    // The server has its own copy now; ours must not keep accepting.
    drop(listener);

    // The socket already listens, so this connects at once and is answered
    // once the server has adopted it.
    let out = ptyd(
        &dirs,
        &ns,
        &["new", "-d", "-n", "job", "--", "sleep", "1000"],
    );
    assert!(out.status.success(), "{out:?}\n{}", read(&stderr));
    let log = read(&stderr);
    assert!(log.contains("adopted from systemd"), "{log}");
    let status = ptyd(&dirs, &ns, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    // The process systemd started is the keeper; it forked the server.
    assert_eq!(
        status["keeper"]["pid"].as_u64(),
        Some(server.as_child().id() as u64),
        "{status}"
    );

    // A live upgrade hands the listener on like any other.
    let out = ptyd(&dirs, &ns, &["upgrade", "--json"]);
    assert!(out.status.success(), "{out:?}\n{}", read(&stderr));
    let out = ptyd(&dirs, &ns, &["ls"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("job"),
        "{out:?}"
    );
    assert_eq!(inode(&path), ours, "the socket file was replaced");

    // So does a restore-mode upgrade, which execs in place: the new binary
    // gets the same socket as fd 3 rather than binding a new file.
    // (Refused while the previous generation is in its probation.)
    util::eventually("the restore-mode upgrade to be taken", || {
        let out = ptyd(&dirs, &ns, &["upgrade", "--mode", "restore"]);
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.success() {
            true => Some(()),
            false if err.contains("probation") => None,
            false => panic!("{out:?}\n{}", read(&stderr)),
        }
    });
    let out = ptyd(&dirs, &ns, &["ls"]);
    assert!(out.status.success(), "{out:?}\n{}", read(&stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("job"),
        "{out:?}"
    );
    assert_eq!(inode(&path), ours, "the socket file was replaced");

    let out = ptyd(&dirs, &ns, &["stop"]);
    assert!(out.status.success(), "{out:?}");
    let status =
        util::wait_child(server.as_child_mut(), util::TIMEOUT).expect("server did not stop");
    assert!(status.success(), "{status}\n{}", read(&stderr));
    // The path is the socket unit's: it stays for the next activation.
    assert_eq!(inode(&path), ours, "ptyd removed systemd's socket");
}

#[test]
fn refuses_a_socket_bound_elsewhere() {
    let dirs = Dirs::new();
    let ns = unique_name("wrongpath");
    let elsewhere = dirs.runtime.join("other/ptyd.sock");
    let listener = bind(&elsewhere);
    let stderr = dirs.state.join("server.stderr");
    let mut server = activated_server(&dirs, &ns, listener.as_raw_fd(), &stderr);
    let status =
        util::wait_child(server.as_child_mut(), util::TIMEOUT).expect("server did not exit");
    assert_eq!(status.code(), Some(1), "{}", read(&stderr));
    let log = read(&stderr);
    assert!(
        log.contains(&format!("is bound to {}", elsewhere.display()))
            && log.contains(&dirs.socket(&ns).display().to_string())
            && log.contains("ListenStream="),
        "{log}"
    );
    assert!(!dirs.socket(&ns).exists(), "bound a socket of its own");
}

#[test]
fn refuses_what_is_not_a_listening_socket() {
    let dirs = Dirs::new();
    let ns = unique_name("notlistening");
    let stderr = dirs.state.join("server.stderr");
    // A connected socket at the right path is still not a listener.
    let path = dirs.socket(&ns);
    let _listener = bind(&path);
    let stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let mut server = activated_server(&dirs, &ns, stream.as_raw_fd(), &stderr);
    let status =
        util::wait_child(server.as_child_mut(), util::TIMEOUT).expect("server did not exit");
    assert_eq!(status.code(), Some(1), "{}", read(&stderr));
    assert!(
        read(&stderr).contains("is not listening"),
        "{}",
        read(&stderr)
    );

    // A regular file.
    let file = std::fs::File::open(PTYD).unwrap();
    let mut server = activated_server(&dirs, &ns, file.as_raw_fd(), &stderr);
    let status =
        util::wait_child(server.as_child_mut(), util::TIMEOUT).expect("server did not exit");
    assert_eq!(status.code(), Some(1), "{}", read(&stderr));
    assert!(
        read(&stderr).contains("is not a socket"),
        "{}",
        read(&stderr)
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `ptyd server`, not activated, while a socket unit listens on the
/// namespace's path: it refuses instead of replacing systemd's socket.
#[test]
fn a_plain_server_leaves_a_socket_unit_alone() {
    let dirs = Dirs::new();
    let ns = unique_name("unitlistens");
    let path = dirs.socket(&ns);
    let _listener = bind(&path);
    let ours = inode(&path);
    let mut cmd = dirs.command(&ns);
    cmd.arg("server");
    let out = util::run_bounded(cmd, "ptyd server");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("systemctl --user start ptyd-{ns}.service")),
        "{err}"
    );
    assert_eq!(inode(&path), ours, "the socket file was replaced");
}
