//! Pane lifecycle through the socket API: create, list, input, capture,
//! wait, kill, remove; exit statuses as reported; killing a whole process
//! tree; input acknowledgement and `request_id` deduplication.

mod util;

use serde_json::json;
use util::{Ptyd, eventually, proc_stat_field, process_gone};

#[test]
fn create_list_input_capture_kill_remove() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok(
        "pane.create",
        json!({ "name": "shell", "argv": ["/bin/sh"], "cols": 90, "rows": 20 }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    assert_eq!(info["name"], "shell");
    assert_eq!(info["state"], "running");
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(90), Some(20))
    );
    let pid = info["pid"].as_i64().unwrap() as i32;
    assert!(!process_gone(pid), "pane process {pid} is not running");

    let listed = c.pane_info(&id).expect("the new pane is listed");
    assert_eq!(listed["pid"], info["pid"]);
    assert_eq!(listed["state"], "running");

    // The arithmetic proves the shell ran the line: the typed text itself
    // (echoed by the tty) does not contain the result.
    let ack = c.input(&id, "echo result-$((6*7))\r");
    assert_eq!(ack["written"], true, "{ack}");
    c.wait_text(&id, "result-42");
    let cap = c.ok("pane.capture", json!({ "target": "shell" }));
    assert!(cap["text"].as_str().unwrap().contains("result-42"), "{cap}");
    assert_eq!(cap["cols"], 90);
    assert_eq!(cap["lines"].as_array().unwrap().len(), 20, "{cap}");

    // Removing a running pane is refused without force.
    c.err("pane.remove", json!({ "target": id }), "pane_running");

    // An interactive sh ignores SIGTERM, so ask for SIGKILL.
    assert_eq!(
        c.ok("pane.kill", json!({ "target": id, "signal": "KILL" })),
        json!({})
    );
    let exit = c.wait_exit(&id);
    assert_eq!(exit["reason"], "killed", "{exit}");
    assert_eq!(exit["signal"], 9, "{exit}");
    let listed = c.pane_info(&id).expect("an exited pane stays listed");
    assert_eq!(listed["state"], "exited");
    assert_eq!(listed["exit"], exit);
    // Its screen is still readable after the exit.
    assert!(c.capture(&id).contains("result-42"));
    // Killing an exited pane is a no-op.
    c.ok("pane.kill", json!({ "target": id }));

    c.ok("pane.remove", json!({ "target": id }));
    assert!(c.pane_info(&id).is_none(), "removed pane still listed");
    c.err("pane.capture", json!({ "target": id }), "not_found");
    c.err("pane.capture", json!({ "target": "shell" }), "not_found");
    assert!(process_gone(pid));
}

#[test]
fn force_remove_kills_a_running_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok("pane.create", json!({ "argv": ["sleep", "1000"] }));
    let id = info["id"].as_str().unwrap();
    let pid = info["pid"].as_i64().unwrap() as i32;
    c.ok("pane.remove", json!({ "target": id, "force": true }));
    assert!(c.pane_info(id).is_none());
    eventually("the removed pane's process to die", || {
        process_gone(pid).then_some(())
    });
}

#[test]
fn pane_ids_are_not_reused() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let a = ptyd.create_argv(&["true"]);
    c.wait_exit(&a);
    c.ok("pane.remove", json!({ "target": a }));
    let b = ptyd.create_argv(&["true"]);
    assert_ne!(a, b, "a removed pane's id was reused");
}

#[test]
fn exit_codes_and_signals_are_reported_exactly() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // (script, code, signal, shell_code)
    let cases: &[(&str, Option<i64>, Option<i64>, i64)] = &[
        ("exit 0", Some(0), None, 0),
        ("exit 42", Some(42), None, 42),
        ("kill -KILL $$", None, Some(9), 137),
        ("kill -TERM $$", None, Some(15), 143),
    ];
    let ids: Vec<String> = cases
        .iter()
        .map(|(script, ..)| ptyd.create_argv(&["/bin/sh", "-c", script]))
        .collect();
    for ((script, code, signal, shell_code), id) in cases.iter().zip(&ids) {
        let exit = c.wait_exit(id);
        assert_eq!(exit["reason"], "exited", "{script}: {exit}");
        assert_eq!(exit["code"].as_i64(), *code, "{script}: {exit}");
        assert_eq!(exit["signal"].as_i64(), *signal, "{script}: {exit}");
        assert_eq!(
            exit["shell_code"].as_i64(),
            Some(*shell_code),
            "{script}: {exit}"
        );
        if *signal == Some(9) {
            assert_eq!(exit["signal_name"], "SIGKILL", "{exit}");
        }
        if *signal == Some(15) {
            assert_eq!(exit["signal_name"], "SIGTERM", "{exit}");
        }
        // The list reports the same status.
        assert_eq!(c.pane_info(id).unwrap()["exit"], exit);
    }

    // A kill request: the reason says so, the signal is the one sent.
    let id = ptyd.create_argv(&["sleep", "1000"]);
    c.ok("pane.kill", json!({ "target": id, "signal": "TERM" }));
    let exit = c.wait_exit(&id);
    assert_eq!(
        (
            exit["reason"].as_str(),
            exit["signal"].as_i64(),
            exit["shell_code"].as_i64()
        ),
        (Some("killed"), Some(15), Some(143)),
        "{exit}"
    );
    let id = ptyd.create_argv(&["sleep", "1000"]);
    c.ok("pane.kill", json!({ "target": id, "signal": "9" }));
    let exit = c.wait_exit(&id);
    assert_eq!(exit["signal"], 9, "{exit}");

    // A wait on an already exited pane answers at once with the status.
    let again = c.wait_exit(&id);
    assert_eq!(again, exit);

    c.err(
        "pane.kill",
        json!({ "target": id, "signal": "NOPE" }),
        "invalid_params",
    );
}

/// The pane's shell starts a grandchild that moves to its own process group
/// (as job control does) and ignores SIGTERM. Killing the pane must still
/// reach it: TERM to the whole session, then KILL after the grace.
#[test]
fn kill_reaches_a_grandchild_in_its_own_process_group() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let pidfile = ptyd.dirs.state.path().join("grandchild.pid");
    let script = r#"
        perl -e '
            setpgrp(0, 0);
            $SIG{TERM} = "IGNORE";
            $SIG{HUP} = "IGNORE";
            open(my $f, ">", "$ENV{PIDFILE}.tmp") or die;
            print $f $$;
            close($f);
            rename("$ENV{PIDFILE}.tmp", $ENV{PIDFILE}) or die;
            sleep 1000;
        ' &
        echo started
        wait
    "#;
    let info = c.ok(
        "pane.create",
        json!({
            "argv": ["/bin/sh", "-c", script],
            "env": { "PIDFILE": pidfile.to_str().unwrap() },
        }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    let pane_pid = info["pid"].as_i64().unwrap() as i32;
    let grandchild: i32 = eventually("the grandchild to write its pid file", || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    // The premise: it is alive, in the pane's session, but in another
    // process group than the pane's process.
    assert!(!process_gone(grandchild));
    let pgrp: i32 = proc_stat_field(grandchild, 5).unwrap().parse().unwrap();
    let session: i32 = proc_stat_field(grandchild, 6).unwrap().parse().unwrap();
    assert_eq!(pgrp, grandchild, "the grandchild did not get its own group");
    assert_eq!(session, pane_pid, "the grandchild left the pane's session");

    c.ok("pane.kill", json!({ "target": id, "grace_ms": 300 }));
    let exit = c.wait_exit(&id);
    assert_eq!(exit["reason"], "killed", "{exit}");
    let guard = KillOnDrop(grandchild);
    eventually("the grandchild to be killed after the grace", || {
        process_gone(grandchild).then_some(())
    });
    std::mem::forget(guard);
}

/// Kills a stray process if the test fails before it is gone.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

#[test]
fn input_is_acknowledged_and_request_ids_dedup() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // No tty echo, so each line typed appears once, printed by cat.
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");

    let first = c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-once\n", "request_id": "req-1" }),
    );
    assert_eq!(
        (&first["written"], &first["duplicate"]),
        (&json!(true), &json!(false))
    );
    let second = c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-once\n", "request_id": "req-1" }),
    );
    assert_eq!(
        (&second["written"], &second["duplicate"]),
        (&json!(true), &json!(true))
    );
    // A different request id is typed even with the same text; no id, too.
    c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-twice\n", "request_id": "req-2" }),
    );
    c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-twice\n", "request_id": "req-3" }),
    );
    c.ok("pane.input", json!({ "target": id, "data": "end-mark\n" }));
    c.wait_text(&id, "end-mark");
    let text = c.capture(&id);
    assert_eq!(text.matches("line-once").count(), 1, "screen:\n{text}");
    assert_eq!(text.matches("line-twice").count(), 2, "screen:\n{text}");

    // Request ids are per pane: the same id on another pane is new input.
    let other = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&other, "ready");
    let r = c.ok(
        "pane.input",
        json!({ "target": other, "data": "other-pane\n", "request_id": "req-1" }),
    );
    assert_eq!(r["duplicate"], false);
    c.wait_text(&other, "other-pane");
}

#[test]
fn input_pipelined_on_one_connection_is_answered_in_order() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");
    let sent: Vec<u64> = (0..50)
        .map(|i| {
            c.send(
                "pane.input",
                json!({ "target": id, "data": format!("n{i}\n") }),
            )
        })
        .collect();
    for want in sent {
        let resp = c.next_response();
        assert_eq!(resp["id"], want, "{resp}");
        assert_eq!(resp["result"]["written"], true, "{resp}");
    }
    c.wait_text(&id, "n49");
}
