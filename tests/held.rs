//! Restore you can see: a held pane says it is held and why in
//! `ls`, the attach banner, `send`'s error and `wait --exit`; `respawn
//! --held` starts them all; `status` shows the last restore (when, which
//! file, per outcome which panes) and `server.restored` carries the same.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use util::{Dirs, Ptyd, Tmux, assert_exit, shell_quote};

/// A server restored from a snapshot with one pane per outcome: `agent`
/// resumed, a plain shell back as a shell, `build` held (policy hold),
/// `job` rerun.
fn restored() -> (Dirs, Ptyd, Value) {
    let dirs = Dirs::new();
    let ns = util::unique_name("held");
    let first = dirs.start(&ns);
    let mut c = first.connect();
    c.create(json!({ "name": "agent", "argv": ["sleep", "1000"], "resume": "sleep 1001" }));
    c.create(json!({ "argv": ["sh"] }));
    c.create(json!({ "name": "build", "argv": ["sleep", "1002"], "restore": "hold" }));
    c.create(json!({ "name": "job", "argv": ["sleep", "1003"], "restore": "rerun" }));
    c.save();
    first.stop();
    let ptyd = dirs.start(&ns);
    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({ "since": 0 }));
    let event = sub.wait_event_type("server.restored");
    (dirs, ptyd, event)
}

#[test]
fn held_panes_say_why_everywhere() {
    let (_dirs, ptyd, event) = restored();
    let mut c = ptyd.connect();
    let build = c.pane("build");
    assert_eq!(build["state"], "held");
    let id = build["id"].as_str().unwrap().to_string();
    let reason = build["held_reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("policy hold") && reason.contains("ptyd respawn"),
        "{reason}"
    );

    // The restore report, in status and in the event.
    let status = ptyd.status_json();
    let report = &status["persistence"]["restore"];
    let mut event = event;
    event.as_object_mut().unwrap().remove("seq");
    event.as_object_mut().unwrap().remove("type");
    assert_eq!(&event, report, "server.restored carries the status report");
    let outcome = |name: &str| {
        report["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("no outcome for {name}: {report}"))
            .clone()
    };
    assert_eq!(outcome("agent")["outcome"], "resumed");
    assert_eq!(outcome("build")["outcome"], "held");
    assert_eq!(outcome("build")["held_reason"], reason.as_str());
    assert_eq!(outcome("job")["outcome"], "rerun");
    let shell = report["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"].is_null())
        .unwrap();
    assert_eq!(shell["outcome"], "shell");
    assert!(
        report["file"].as_str().unwrap().ends_with("session.json"),
        "{report}"
    );
    let text = util::stdout(&ptyd.run_cli(&["status"]));
    for needle in [
        "restore:    20",
        "session.json: 4 panes",
        "resumed (resume command): 1: p1 (agent)",
        "rerun: 1: p4 (job)",
        "back as a shell: 1: p2",
        &format!("held: 1\n    {id} (build): {reason}"),
    ] {
        assert!(text.contains(needle), "status lacks {needle:?}:\n{text}");
    }

    // ls: held, with the reason below.
    let ls = util::stdout(&ptyd.run_cli(&["ls"]));
    assert!(ls.contains(&format!("held: {reason}")), "{ls}");
    // send: held and why, not "has exited".
    let out = ptyd.run_cli(&["send", "build", "hello"]);
    assert_exit(&out, 1);
    let err = util::stderr(&out);
    assert!(err.contains("is held") && err.contains(&reason), "{err}");
    // wait --exit: at once, held and why, exit 1.
    let out = ptyd.run_cli(&["wait", "build", "--exit"]);
    assert_exit(&out, 1);
    assert!(util::stderr(&out).contains(&reason), "{out:?}");
    let out = ptyd.run_cli(&["wait", "build", "--exit", "--json"]);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result, json!({ "reason": "held", "held_reason": reason }));
    // attach (API): EXIT reason pane_held with the reason.
    let (_, mut a) = ptyd.connect().attach(json!({ "target": "build" }));
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "pane_held", "{exit}");
    assert_eq!(exit["held_reason"], reason.as_str(), "{exit}");

    // respawn --held: every held pane runs again.
    let out = ptyd.run_cli(&["respawn", "--held"]);
    assert_exit(&out, 0);
    assert_eq!(util::stdout(&out).trim(), id);
    assert_eq!(c.pane("build")["state"], "running");
    let out = ptyd.run_cli(&["respawn", "--held", "--json"]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r, json!({ "respawned": [], "failed": [] }));
}

#[test]
fn attaching_a_held_pane_shows_why() {
    let (_dirs, ptyd, _) = restored();
    let mut c = ptyd.connect();
    let reason = c.pane("build")["held_reason"].as_str().unwrap().to_string();
    let tmux = Tmux::outer_session(&ptyd, 120, 30);
    let cmd = format!(
        "{} attach build; echo attach-''rc=$?",
        shell_quote(util::PTYD)
    );
    tmux.type_line(&cmd);
    let screen = tmux.wait_screen("the held banner", |s| s.contains("attach-rc="));
    // The banner may wrap in 120 columns: look for its start.
    assert!(screen.contains("is held (no process)"), "{screen}");
    assert!(screen.contains(&reason[..30]), "{screen}");
    assert!(!screen.contains("unknown status"), "{screen}");
}

/// Output rings of process `pid` (one per pane that can print).
fn rings(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("/memfd:ptyd-ring"))
        .count()
}

/// A held pane has no program and prints nothing: no output ring for it,
/// in the serving process or the keeper, before a live upgrade or after
/// one (the new server gave every restored held pane a ring, two fds
/// each); respawned, it gets one.
#[test]
fn a_held_pane_gets_no_output_ring_until_it_runs() {
    let (_dirs, ptyd, _) = restored();
    let mut c = ptyd.connect();
    assert_eq!(c.pane("build")["state"], "held");
    let keeper = ptyd.pid();
    // Three panes run (agent, the shell, job): three rings each side.
    let serving = ptyd.serving_pid();
    util::eventually("the keeper to hold the running panes' rings", || {
        (rings(keeper) == 3).then_some(())
    });
    assert_eq!(rings(serving), 3);
    let report = c.ok("server.upgrade", json!({}));
    let new_pid = report["new_pid"].as_i64().unwrap() as i32;
    assert_eq!(ptyd.serving_pid(), new_pid);
    assert_eq!(rings(new_pid), 3, "the new server's rings");
    util::eventually("the keeper to hold three rings", || {
        (rings(keeper) == 3).then_some(())
    });
    let mut c = ptyd.connect();
    c.ok("pane.respawn", json!({ "target": "build" }));
    assert_eq!(rings(new_pid), 4, "a ring for the respawned pane");
}
