//! A low soft `ulimit -f` (RLIMIT_FSIZE) cannot cripple the server or the
//! keeper: both raise it to the hard limit, so output rings, checkpoints
//! and snapshots are written and a crash recovers every pane, while the
//! panes' programs still get the user's limit.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use util::{Conn, Dirs, KillOnDrop};

/// The soft limit the server is started under: far below one output
/// ring (1 MiB and more) or a checkpoint of a few panes.
const SOFT: u64 = 64 << 10;

/// "Max file size" of `/proc/PID/limits`: (soft, hard) as printed.
fn fsize_limits(pid: u64) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max file size"))
        .expect("a Max file size line");
    let fields: Vec<&str> = line["Max file size".len()..].split_whitespace().collect();
    (fields[0].to_string(), fields[1].to_string())
}

fn status(socket: &std::path::Path) -> Option<Value> {
    std::os::unix::net::UnixStream::connect(socket).ok()?;
    Conn::try_connect(socket)?
        .try_call("server.status", json!({}))?
        .ok()
}

#[test]
fn a_low_soft_file_size_limit_is_raised_for_ptyd_and_kept_for_panes() {
    let dirs = Dirs::new();
    let ns = util::unique_name("fsize");
    let stderr = std::fs::File::create(dirs.path("err").join("server.stderr")).unwrap();
    let mut cmd = dirs.command(&ns);
    cmd.arg("server").stdout(Stdio::null()).stderr(stderr);
    // SAFETY: runs in the forked child before exec; setrlimit is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let rl = libc::rlimit {
                rlim_cur: SOFT,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let keeper = KillOnDrop::child(cmd.spawn().expect("starting ptyd server"));
    let socket = dirs.socket(&ns);
    let first = util::eventually("the server to answer", || status(&socket));
    let serving = first["pid"].as_u64().unwrap();
    assert_eq!(first["keeper"]["pid"], keeper.as_child().id(), "{first}");
    for pid in [serving, keeper.as_child().id() as u64] {
        assert_eq!(
            fsize_limits(pid),
            ("unlimited".into(), "unlimited".into()),
            "pid {pid} kept the soft limit"
        );
    }

    let mut c = Conn::connect(&socket);
    // A program in a pane has the user's limit, not ptyd's.
    let limits =
        c.create(json!({ "argv": ["sh", "-c", "cat /proc/self/limits; exec sleep 100000"] }));
    let limits = limits["id"].as_str().unwrap().to_string();
    c.wait_text(&limits, "Max file size");
    let text = c.capture(&limits);
    let line = text
        .lines()
        .find(|l| l.starts_with("Max file size"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&SOFT.to_string()), "{line}");
    // Panes with more output than the soft limit, in rings and in a
    // checkpoint: a crash of the serving process recovers every one.
    let mut panes = vec![limits];
    for i in 0..4 {
        let p = c.create(json!({ "argv": ["sh", "-c", format!("seq 1 20000; echo done{i}; exec sleep 100000")] }));
        let id = p["id"].as_str().unwrap().to_string();
        c.wait_text(&id, &format!("done{i}"));
        panes.push(id);
    }
    let pids = c.pane_pids();
    // A checkpoint that has them all (one follows each new pane soon).
    let checkpoints = c.ok("server.status", json!({}))["keeper"]["checkpoints"]
        .as_u64()
        .unwrap();
    util::eventually("a checkpoint after the last pane", || {
        let s = status(&socket)?;
        (s["keeper"]["checkpoints"].as_u64()? > checkpoints).then_some(())
    });
    drop(c);
    // SAFETY: kill(2) of the test's own serving process.
    unsafe { libc::kill(serving as i32, libc::SIGKILL) };
    let after = util::eventually("a replacement to answer", || {
        let s = status(&socket)?;
        (s["pid"].as_u64()? != serving).then_some(s)
    });
    assert!(!after["keeper"]["last_recovery"].is_null(), "{after}");
    assert_eq!(
        after["keeper"]["last_recovery"]["from"],
        Value::Null,
        "recovered from the snapshot, not the checkpoint: {after}"
    );
    let mut c = Conn::connect(&socket);
    assert_eq!(c.pane_pids(), pids, "every pane kept, with its process");
    for (i, id) in panes[1..].iter().enumerate() {
        assert!(c.capture(id).contains(&format!("done{i}")), "{id}");
    }
    // A save writes the snapshot whole.
    c.save();
    c.ok("server.stop", json!({}));
    let mut keeper = keeper.into_child();
    let code = util::wait_child(&mut keeper, util::TIMEOUT).expect("the keeper to exit");
    assert!(code.success(), "{code:?}");
}
