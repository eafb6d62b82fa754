//! systemd's fd store, played by the test: the keeper (the process `ptyd
//! server` starts as) pushes what it holds to `$NOTIFY_SOCKET` with
//! `FDSTORE=1` when `$FDSTORE` says the unit keeps fds, and removes it with
//! `FDSTOREREMOVE=1`; the keeper is SIGKILLed (its first serving process
//! dies with it), and a new `ptyd server` started with the stored fds at
//! 3.. (`LISTEN_FDS`, `LISTEN_FDNAMES`, `LISTEN_PID`), as systemd restarts
//! a unit, takes every pane over: same pids, no SIGHUP, the counter's
//! numbers contiguous. A removed pane is removed from the store too; a
//! live upgrade (the keeper re-executing itself) keeps the store, and a
//! serving process that outlived the keeper is ended, so one server serves.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

mod crash_support;

use crash_support::{check_counter, counter_pane};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use util::Conn;

/// What the store holds, by name (as systemd: `FDSTOREREMOVE` drops a
/// name, `FDSTORE` adds one).
type Held = Arc<Mutex<BTreeMap<String, Vec<OwnedFd>>>>;

/// Receives notifications on `sock` until it is shut down, keeping the
/// stored fds.
fn collect(sock: UnixDatagram, held: Held) {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    loop {
        let mut buf = vec![0u8; 4096];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 64]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let Ok(msg) = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) else {
            return;
        };
        let mut fds = Vec::new();
        for c in msg.cmsgs().into_iter().flatten() {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: the kernel just gave us these fds.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        let n = msg.bytes;
        if n == 0 {
            return;
        }
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        let vars: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let Some(name) = vars.get("FDNAME") else {
            continue;
        };
        let mut held = held.lock().unwrap();
        if vars.get("FDSTOREREMOVE") == Some(&"1") {
            held.remove(*name);
        } else if vars.get("FDSTORE") == Some(&"1") {
            held.entry(name.to_string()).or_default().extend(fds);
        }
    }
}

fn names(held: &Held) -> Vec<String> {
    held.lock().unwrap().keys().cloned().collect()
}

#[test]
fn a_killed_keeper_is_replaced_from_systemds_fd_store() {
    let mut dirs = util::Dirs::new();
    let notify_path = dirs.path("systemd").join("notify");
    let sock = UnixDatagram::bind(&notify_path).unwrap();
    let held: Held = Arc::default();
    let collector = {
        let sock = sock.try_clone().unwrap();
        let held = Arc::clone(&held);
        std::thread::spawn(move || collect(sock, held))
    };
    dirs.env = vec![
        ("NOTIFY_SOCKET".into(), notify_path.to_str().unwrap().into()),
        ("FDSTORE".into(), "4096".into()),
    ];
    let ptyd = util::Ptyd::start_in(dirs, &util::unique_name("fdstore"));
    let hup_dir = ptyd.dirs.path("hups");
    let counter = counter_pane(&ptyd);
    let doomed = ptyd.create_argv(&["/bin/sh", "-c", "echo doomed-up; exec sleep 600"]);
    let mut c = ptyd.connect();
    c.wait_text(&doomed, "doomed-up");
    let pids = c.pane_pids();
    let num = |id: &str| id.trim_start_matches('p').to_string();
    let (counter_n, doomed_n) = (num(&counter), num(&doomed));
    util::eventually("the keeper to store both panes and a checkpoint", || {
        let n = names(&held);
        let want = [
            format!("ptyd-keeper-master-{counter_n}"),
            format!("ptyd-keeper-ring-{counter_n}"),
            format!("ptyd-keeper-pidfd-{doomed_n}"),
            "ptyd-keeper-listener".into(),
            "ptyd-keeper-lock".into(),
            "ptyd-keeper-checkpoint".into(),
            "ptyd-keeper-precopy".into(),
        ];
        if want.iter().all(|w| n.contains(w)) {
            Ok(())
        } else {
            Err(format!("{n:?}"))
        }
    });
    // Nothing of the service manager's reaches a pane.
    let environ = std::fs::read(format!("/proc/{}/environ", pids[&counter])).unwrap();
    for var in environ.split(|b| *b == 0) {
        let var = String::from_utf8_lossy(var);
        assert!(
            !var.starts_with("FDSTORE=") && !var.starts_with("NOTIFY_SOCKET="),
            "the pane inherited {var}"
        );
    }
    // A removed pane leaves the store, so it hangs up when removed.
    let doomed_pid = pids[&doomed] as i32;
    c.ok("pane.remove", json!({ "target": doomed, "force": true }));
    util::eventually("the removed pane to leave the store and die", || {
        let n = names(&held);
        let stored = n.iter().any(|x| x.ends_with(&format!("-{doomed_n}")));
        (!stored && util::process_gone(doomed_pid)).then_some(())
    });
    let counter_pid = pids[&counter];
    let mut pids = pids;
    pids.remove(&doomed);
    drop(c);

    // A live upgrade first: the serving process is then a later
    // generation, which the keeper's death does not take along.
    let checkpoint_id = || {
        let held = held.lock().unwrap();
        held.get("ptyd-keeper-checkpoint")
            .and_then(|fds| fds.last())
            .map(|fd| std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok())
            .map(|m| m.map(|m| std::os::unix::fs::MetadataExt::ino(&m)))
    };
    // To another path, so the keeper re-executes itself too (keeping
    // its fds and what it stored).
    let copy = ptyd.dirs.path("bin").join("ptyd-next");
    std::fs::copy(util::PTYD, &copy).unwrap();
    util::assert_exit(
        &ptyd.run_cli(&["upgrade", "--binary", copy.to_str().unwrap()]),
        0,
    );
    util::eventually("the keeper to re-execute into the new binary", || {
        (std::fs::read_link(format!("/proc/{}/exe", ptyd.pid())).ok()? == copy).then_some(())
    });
    let survivor = ptyd.serving_pid();
    // Two checkpoints later the stored one names the new server.
    for _ in 0..2 {
        let seen = checkpoint_id();
        util::eventually("a checkpoint after the upgrade", || {
            (checkpoint_id() != seen).then_some(())
        });
    }

    // The keeper is killed: only the store holds the panes now, and the
    // serving process runs on without it.
    // SAFETY: kill(2) of the keeper this test started.
    unsafe { libc::kill(ptyd.pid(), libc::SIGKILL) };
    util::eventually("the keeper to die", || {
        util::process_gone(ptyd.pid()).then_some(())
    });
    crash_support::signal(counter_pid, libc::SIGSTOP);
    assert!(
        !util::process_gone(counter_pid as i32),
        "the counter died with the keeper"
    );

    // "systemd" restarts the unit with the stored fds at 3..
    let stored: Vec<(String, OwnedFd)> = {
        let held = held.lock().unwrap();
        held.iter()
            .flat_map(|(n, fds)| {
                fds.iter()
                    .map(move |fd| (n.clone(), fd.try_clone().unwrap()))
            })
            .collect()
    };
    // Out of the way of 3.. first, so no dup2 overwrites a source.
    let high: Vec<OwnedFd> = stored
        .iter()
        .map(|(_, fd)| {
            // SAFETY: fcntl(F_DUPFD_CLOEXEC) on an fd we hold.
            let raw = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 512) };
            assert!(raw >= 0, "dup: {}", std::io::Error::last_os_error());
            // SAFETY: fcntl just made it for us.
            unsafe { OwnedFd::from_raw_fd(raw) }
        })
        .collect();
    let fdnames: Vec<&str> = stored.iter().map(|(n, _)| n.as_str()).collect();
    let mut cmd = ptyd.dirs.command(&ptyd.namespace);
    // LISTEN_PID must be the server's own pid: sh's $$, which exec keeps.
    cmd.args(["server"]);
    let program = cmd.get_program().to_owned();
    let mut sh = std::process::Command::new("/bin/sh");
    sh.arg("-c")
        .arg("LISTEN_PID=$$ exec \"$0\" server")
        .arg(program)
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("LISTEN_FDS", stored.len().to_string())
        .env("LISTEN_FDNAMES", fdnames.join(":"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    for (k, v) in cmd.get_envs() {
        if v.is_none() {
            sh.env_remove(k);
        }
    }
    let raws: Vec<i32> = high.iter().map(|f| f.as_raw_fd()).collect();
    // SAFETY: only dup2 (async-signal-safe) between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut sh, move || {
            for (i, fd) in raws.iter().enumerate() {
                if libc::dup2(*fd, 3 + i as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let keeper = util::KillOnDrop::child(sh.spawn().expect("starting the new keeper"));
    drop(high);
    drop(stored);
    let mut c = util::eventually("the panes to be served again", || {
        let mut c = Conn::try_connect(&ptyd.socket())?;
        // Not the survivor, which may answer until the new keeper ends it.
        match c.try_call("server.status", json!({})) {
            Some(Ok(status)) if status["pid"] != survivor => Some(c),
            _ => None,
        }
    });
    assert_eq!(c.pane_pids(), pids, "pane pids changed");
    c.ok(
        "pane.wait",
        json!({ "target": counter, "idle_ms": 150, "timeout_ms": 20_000 }),
    );
    let text = c.capture_all(&counter);
    let (first, top) = check_counter(&text, "after the keeper's death");
    assert!(top > first, "{first}..{top}");
    crash_support::signal(counter_pid, libc::SIGCONT);
    let hups: Vec<_> = std::fs::read_dir(&hup_dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(hups.is_empty(), "SIGHUP reached {hups:?}");
    // The server that outlived the keeper was ended first: one server.
    util::eventually("the survivor of the keeper to be gone", || {
        util::process_gone(survivor).then_some(())
    });
    let status = c.ok("server.status", json!({}));
    assert_ne!(status["pid"], survivor, "{status}");
    assert_eq!(
        status["keeper"]["pid"],
        keeper.guarded_pid().unwrap(),
        "{status}"
    );
    assert!(
        status["keeper"]["last_recovery"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("fd store")),
        "{status}"
    );
    // A clean stop empties the store (nothing of ours is kept).
    c.ok("server.stop", json!({}));
    drop(c);
    util::eventually("the store to be emptied by the stop", || {
        let n = names(&held);
        if n.is_empty() {
            Ok(())
        } else {
            Err(format!("{n:?}"))
        }
    });
    let mut keeper = keeper.into_child();
    util::wait_child(&mut keeper, util::TIMEOUT).expect("the keeper to exit after the stop");
    let _ = nix::sys::socket::shutdown(sock.as_raw_fd(), nix::sys::socket::Shutdown::Both);
    drop(sock);
    let _ = collector;
}
