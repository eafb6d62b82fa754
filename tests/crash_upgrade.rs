//! A crash in the middle of a live upgrade, through the real binary: the
//! old serving process killed before the pause and inside the blackout,
//! the new one killed during its import and in its probation. Each side is
//! stopped at a named step by the fault-injection hooks
//! (`handoff/fault.rs`, debug builds) rather than by racing timers, then
//! SIGKILLed. After each: the panes are served by exactly one server, with
//! their old pids, no SIGHUP, the counter's numbers contiguous, the
//! attached client back, no zombie, no fd leaked by the keeper.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

mod crash_support;

use crash_support::{Setup, check_counter, setup_with_config};
use std::io::Read;
use std::process::{Child, Stdio};

/// A long probation, so the new server can be killed inside it without
/// racing its end.
const CONFIG: &str = "upgrade_probation_ms = 60000\n";

/// The children of `pid` running `ptyd ... server`.
fn server_children(pid: i32) -> Vec<i32> {
    util::all_pids()
        .into_iter()
        .filter(|p| util::ppid(*p) == Some(pid))
        .filter(|p| util::cmdline(*p as i64).iter().any(|a| a == "server"))
        .collect()
}

fn sigkill(pid: i32) {
    // SAFETY: kill(2) of a server process this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// How many times the servers said they reached `step` and stalled there.
fn stalls(s: &Setup, step: &str) -> usize {
    s.ptyd
        .stderr()
        .matches(&format!("fault injection: stall at {step}"))
        .count()
}

/// Starts `ptyd upgrade` in the background (with `fault`, if any); returns
/// it and the new server's pid once it is there (and, with a fault, stalled
/// at its step).
fn start_upgrade(s: &Setup, old: i32, fault: Option<&str>) -> (util::KillOnDrop, i32) {
    let step = fault.and_then(|f| f.strip_suffix(":stall"));
    let stalled_before = step.map_or(0, |st| stalls(s, st));
    let mut args = vec!["upgrade", "--timeout", "30000"];
    if let Some(f) = fault {
        args.extend(["--fault", f]);
    }
    let mut cmd = s.ptyd.cli(&args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let cli = util::KillOnDrop::child(cmd.spawn().expect("spawning ptyd upgrade"));
    let mut new = util::eventually("the new server to start", || {
        server_children(old).first().copied()
    });
    if let Some(st) = step {
        util::eventually(format!("a server to stall at {st}"), || {
            (stalls(s, st) > stalled_before).then_some(())
        });
        // The child seen first may have been the version probe between
        // its fork and its exec (a copy of the old server, `server` in
        // its command line): by the stall it has long exited, and the
        // new server is the only child left.
        new = util::eventually("the new server (not the probe)", || {
            server_children(old).first().copied()
        });
    }
    (cli, new)
}

/// The upgrade command's exit code, once it ends (it must: whoever it
/// talked to either answers or is dead).
fn upgrade_result(cli: util::KillOnDrop) -> (Option<i32>, String) {
    let mut child: Child = cli.into_child();
    let status = util::wait_child(&mut child, util::TIMEOUT)
        .unwrap_or_else(|| panic!("ptyd upgrade did not end within {:?}", util::TIMEOUT));
    let out = child
        .wait_with_output()
        .expect("reading ptyd upgrade's output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (status.code(), text)
}

#[test]
fn crashes_during_an_upgrade_leave_every_pane_served_once() {
    let s = setup_with_config(&[], CONFIG);
    let mut fds = None;

    // The old server killed inside the blackout, every fd sent, before
    // the commit: the new server has everything and takes over.
    let before = s.before();
    let (cli, new) = start_upgrade(&s, before.serving, Some("old-after-transfer:stall"));
    sigkill(before.serving);
    let tag = "old killed in the blackout";
    let serving = s.check_after(&before, before.serving, tag, true, &mut fds);
    assert_eq!(serving, new, "{tag}: the new server should serve");
    let (code, text) = upgrade_result(cli);
    eprintln!("{tag}: ptyd upgrade exited {code:?}: {text}");
    assert!(!text.contains("closed the connection"), "{tag}: {text}");

    // The old server killed before the pause (it said hello to nothing
    // more): the new one gives up, the keeper replaces the dead one from
    // its checkpoint.
    let before = s.before();
    let (cli, new) = start_upgrade(&s, before.serving, Some("old-after-hello:stall"));
    sigkill(before.serving);
    let tag = "old killed before the pause";
    let serving = s.check_after(&before, before.serving, tag, false, &mut fds);
    assert_ne!(
        serving, new,
        "{tag}: the half-started server should be gone"
    );
    let (code, text) = upgrade_result(cli);
    eprintln!("{tag}: ptyd upgrade exited {code:?}: {text}");
    assert_ne!(code, Some(0), "{tag}: the upgrade cannot have succeeded");
    // It says what happened, not only that the connection closed.
    assert!(
        text.contains("the keeper recovered")
            && text.contains("nothing was upgraded")
            && text.contains(&format!("pid {serving}")),
        "{tag}: {text}"
    );

    // The new server killed during its import: the old one rolls back.
    let before = s.before();
    let (cli, new) = start_upgrade(&s, before.serving, Some("new-before-imported:stall"));
    sigkill(new);
    let tag = "new killed during its import";
    let serving = s.check_after(&before, new, tag, false, &mut fds);
    assert_eq!(serving, before.serving, "{tag}: the old server serves on");
    let (code, text) = upgrade_result(cli);
    assert_eq!(code, Some(1), "{tag}: {text}");

    // The new server killed in its probation, after it served (read the
    // counter's output, answered requests): the old one takes back, and
    // what the new one read is in the shared output ring, not lost.
    let before = s.before();
    let (mut cli, _) = start_upgrade(&s, before.serving, None);
    let mut c = s.ptyd.connect();
    // The new server is the old one's child that serves (the child
    // `start_upgrade` saw first may have been the version probe between
    // its fork and its exec).
    let new = util::eventually("the new server to serve", || {
        let serving = crash_support::serving_pid(&mut c);
        if serving != before.serving && util::ppid(serving) == Some(before.serving) {
            return Some(serving);
        }
        // An upgrade that ended without the new server serving says why.
        if matches!(cli.as_child_mut().try_wait(), Ok(Some(_))) {
            let mut text = String::new();
            let child = cli.as_child_mut();
            for mut out in [
                child.stdout.take().map(|o| Box::new(o) as Box<dyn Read>),
                child.stderr.take().map(|e| Box::new(e) as Box<dyn Read>),
            ]
            .into_iter()
            .flatten()
            {
                let _ = out.read_to_string(&mut text);
            }
            panic!(
                "the upgrade ended without its new server serving: {text}\nserver log:\n{}",
                s.ptyd.stderr()
            );
        }
        None
    });
    // The counter's output moves on under the new server.
    let top = |c: &mut util::Conn| check_counter(&c.capture_all(&s.counter), "probation").1;
    let seen = top(&mut c);
    util::eventually("the new server to read the counter", || {
        (top(&mut c) > seen + 100).then_some(())
    });
    // A pane the new server made: the old one does not know it, so it
    // must hang up, and the keeper must not hold on to its fds.
    let extra = s
        .ptyd
        .create_argv(&["/bin/sh", "-c", "echo extra-up; exec sleep 600"]);
    c.wait_text(&extra, "extra-up");
    let extra_pid = c.pane_info(&extra).unwrap()["pid"].as_i64().unwrap() as i32;
    drop(c);
    sigkill(new);
    let tag = "new killed in its probation";
    let serving = s.check_after(&before, new, tag, true, &mut fds);
    assert_eq!(serving, before.serving, "{tag}: the old server takes back");
    util::eventually(format!("{tag}: the new server's pane to hang up"), || {
        util::process_gone(extra_pid).then_some(())
    });
    let (code, text) = upgrade_result(cli);
    assert_eq!(code, Some(1), "{tag}: {text}");
}

#[test]
fn a_pane_exiting_while_the_old_server_is_in_probation_reports_its_code() {
    // Where the kernel cannot tell a pidfd's exit status (before 6.15,
    // simulated), a pane process still a child of the old server (in its
    // probation: it reaps it, but no longer serves) has its status passed
    // to the new server through the keeper.
    let mut dirs = util::Dirs::new();
    dirs.env = vec![("PTYD_NO_PIDFD_EXIT".into(), "1".into())];
    let dir = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), CONFIG).unwrap();
    let ptyd = util::Ptyd::start_in(dirs, &util::unique_name("probexit"));
    let pane = ptyd.create_argv(&["/bin/sh", "-c", "echo ready; read line; exit 7"]);
    let mut c = ptyd.connect();
    c.wait_text(&pane, "ready");
    let old = ptyd.serving_pid();
    let mut cmd = ptyd.cli(&["upgrade", "--timeout", "30000"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let _cli = util::KillOnDrop::child(cmd.spawn().expect("spawning ptyd upgrade"));
    let new = util::eventually("the new server to serve", || {
        let pid = ptyd.serving_pid();
        (pid != old).then_some(pid)
    });
    assert_eq!(
        util::ppid(c.pane(&pane)["pid"].as_i64().unwrap() as i32),
        Some(old)
    );
    let mut c = ptyd.connect();
    c.input(&pane, "go\n");
    let exited = c.wait_exit(&pane);
    assert_eq!(exited["code"], 7, "{exited}");
    assert_eq!(
        ptyd.serving_pid(),
        new,
        "the old server is still in probation"
    );
}
