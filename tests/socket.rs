//! Claiming a namespace: one server per namespace, stale socket recovery,
//! file modes, refusing an unsafe runtime directory, namespace isolation and
//! a clean stop.

mod util;

use serde_json::json;
use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use util::{Dirs, Ptyd, run_bounded, stderr, unique_name};

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_second_server_in_the_namespace_refuses_to_start() {
    let ptyd = Ptyd::start();
    let mut cmd = ptyd.cli(&["server"]);
    cmd.env_remove("PTYD_READY_FD");
    let out = run_bounded(cmd, "second ptyd server");
    assert!(
        !out.status.success(),
        "second server exited {:?}",
        out.status
    );
    let err = stderr(&out);
    assert!(err.contains("already running"), "stderr: {err}");
    assert!(
        err.contains(&ptyd.pid().to_string()),
        "stderr does not name the running server's pid {}: {err}",
        ptyd.pid()
    );
    // The first one is untouched and still owns the socket.
    let status = ptyd.connect().ok("server.status", json!({}));
    assert_eq!(status["pid"], ptyd.pid());
}

#[test]
fn a_stale_socket_left_by_a_killed_server_is_replaced() {
    let mut ptyd = Ptyd::start();
    let old_pid = ptyd.pid();
    ptyd.kill9();
    let socket = ptyd.socket();
    let meta = fs::symlink_metadata(&socket).expect("SIGKILL leaves the socket file");
    assert!(meta.file_type().is_socket());
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_err());

    ptyd.spawn_server();
    assert_ne!(ptyd.pid(), old_pid);
    let status = ptyd.connect().ok("server.status", json!({}));
    assert_eq!(status["pid"], ptyd.pid());
    // The CLI finds it too.
    let out = ptyd.run_cli(&["ls"]);
    util::assert_exit(&out, 0);
}

#[test]
fn socket_and_directories_are_private() {
    let ptyd = Ptyd::start();
    let ns_dir = ptyd.dirs.ns_dir(&ptyd.namespace);
    assert_eq!(mode(&ptyd.socket()), 0o600, "socket mode");
    assert_eq!(mode(&ns_dir), 0o700, "namespace dir mode");
    assert_eq!(mode(ns_dir.parent().unwrap()), 0o700, "ptyd dir mode");
    let lock = ns_dir.join("ptyd.lock");
    assert_eq!(mode(&lock) & 0o077, 0, "lock file open to others");
    // The lock names the server.
    assert_eq!(
        fs::read_to_string(&lock).unwrap().trim(),
        ptyd.pid().to_string()
    );
}

#[test]
fn an_open_runtime_directory_is_refused() {
    let dirs = Dirs::new();
    let ns = unique_name("open");
    let ns_dir = dirs.ns_dir(&ns);
    fs::create_dir_all(&ns_dir).unwrap();
    fs::set_permissions(ns_dir.parent().unwrap(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&ns_dir, fs::Permissions::from_mode(0o755)).unwrap();

    let mut cmd = dirs.command(&ns);
    cmd.arg("server");
    let out = run_bounded(cmd, "ptyd server");
    assert!(!out.status.success(), "server accepted a 0755 runtime dir");
    let err = stderr(&out);
    assert!(
        err.contains("755") && err.contains("chmod 700"),
        "unclear message: {err}"
    );
    assert!(!dirs.socket(&ns).exists(), "a socket was created anyway");

    // Clients refuse it too, and do not start a server there.
    let mut cmd = dirs.command(&ns);
    cmd.arg("ls");
    let out = run_bounded(cmd, "ptyd ls");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("chmod 700"), "{}", stderr(&out));
    assert!(!dirs.socket(&ns).exists());
    // The directory was not "fixed" behind the user's back.
    assert_eq!(mode(&ns_dir), 0o755);
}

#[test]
fn namespaces_are_isolated() {
    let dirs = Dirs::new();
    // Two servers sharing XDG directories, in two namespaces.
    let a = Ptyd::start_in(dirs, &unique_name("a"));
    let b_ns = unique_name("b");
    let b = util::try_spawn_server(&a.dirs, &b_ns, &a.dirs.state.path().join("b.stderr"))
        .expect("second namespace's server starts beside the first");
    let _b_guard = ChildGuard(b);
    assert_ne!(a.socket(), a.dirs.socket(&b_ns));

    let info = a.create(json!({ "argv": ["sleep", "1000"], "name": "only-in-a" }));
    let mut cb = util::Conn::connect(&a.dirs.socket(&b_ns));
    let list = cb.ok("pane.list", json!({}));
    assert_eq!(list["panes"], json!([]), "{list}");
    cb.err("pane.capture", json!({ "target": info["id"] }), "not_found");
    cb.err(
        "pane.capture",
        json!({ "target": "only-in-a" }),
        "not_found",
    );

    // The CLI with -L picks the namespace (overriding PTYD_NAMESPACE).
    let out = a.run_cli(&["-L", &b_ns, "ls", "--json"]);
    util::assert_exit(&out, 0);
    let v: serde_json::Value = serde_json::from_str(&util::stdout(&out)).unwrap();
    assert_eq!(v["panes"], json!([]));
    let out = a.run_cli(&["ls", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&util::stdout(&out)).unwrap();
    assert_eq!(v["panes"][0]["name"], "only-in-a", "{v}");
}

/// Stops a server child (SIGTERM, then SIGKILL) on drop.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        if util::wait_child(&mut self.0, util::TIMEOUT).is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn stop_ends_the_server_and_removes_its_socket() {
    let mut ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let pane = ptyd.create(json!({ "argv": ["sleep", "1000"] }));
    let pane_pid = pane["pid"].as_i64().unwrap() as i32;
    let out = ptyd.run_cli(&["stop"]);
    util::assert_exit(&out, 0);
    let status = ptyd.wait_exit();
    assert!(status.success(), "server exit: {status:?}");
    assert!(!ptyd.socket().exists(), "socket left behind after stop");
    // An existing connection is closed, not left hanging.
    while c.read_line().is_some() {}
    // The panes were hung up.
    util::eventually("the pane's process to get SIGHUP and exit", || {
        util::process_gone(pane_pid).then_some(())
    });
    // Client commands that need an existing server say there is none.
    let out = ptyd.run_cli(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no ptyd server"), "{}", stderr(&out));
}
