//! `pane.wait` conditions (exit, text, idle) and timeouts, and the pane
//! watchdogs `timeout_ms` and `idle_timeout_ms`.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use std::time::{Duration, Instant};
use util::Ptyd;

#[test]
fn wait_idle_answers_after_output_stops() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["cat"]);
    let started = Instant::now();
    // The tty echoes this: output after `started`, so the pane cannot be
    // idle for 500 ms before `started` + 500 ms.
    c.input(&id, "echoed\r");
    let r = c.ok(
        "pane.wait",
        json!({ "target": id, "idle_ms": 500, "timeout_ms": 20000 }),
    );
    assert_eq!(r["reason"], "idle", "{r}");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "idle after {:?}",
        started.elapsed()
    );
    assert!(c.capture(&id).contains("echoed"));
}

#[test]
fn wait_idle_does_not_answer_while_output_flows() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // Output every 50 ms; no 3 s quiet period within the 1.5 s wait.
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done",
    ]);
    c.wait_text(&id, "tick 3");
    let started = Instant::now();
    let (code, _) = c
        .call(
            "pane.wait",
            json!({ "target": id, "idle_ms": 3000, "timeout_ms": 1500 }),
        )
        .expect_err("an idle wait answered while output flowed");
    assert_eq!(code, "timeout");
    assert!(started.elapsed() >= Duration::from_millis(1500));

    // Once output stops, the same kind of wait answers.
    c.ok("pane.kill", json!({ "target": id, "signal": "STOP" }));
    let r = c.ok(
        "pane.wait",
        json!({ "target": id, "idle_ms": 300, "timeout_ms": 20000 }),
    );
    assert_eq!(r["reason"], "idle");
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
}

#[test]
fn wait_timeout_is_an_error_after_the_time() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["sleep", "1000"]);
    for params in [
        json!({ "target": id, "text": "never", "timeout_ms": 300 }),
        json!({ "target": id, "exit": true, "timeout_ms": 300 }),
    ] {
        let started = Instant::now();
        let m = c.err("pane.wait", params, "timeout");
        assert!(started.elapsed() >= Duration::from_millis(300), "{m}");
    }
    // The connection is fine afterwards, and the pane untouched.
    assert_eq!(c.pane_info(&id).unwrap()["state"], "running");
}

#[test]
fn wait_text_already_shown_and_text_that_never_comes() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        "echo early-bird; sleep 0.3; echo late-one; exit 3",
    ]);
    c.wait_text(&id, "late-one");
    // Already on screen: answered at once when the screen counts.
    let r = c.ok(
        "pane.wait",
        json!({ "target": id, "text": "early-bird", "include_screen": true }),
    );
    assert_eq!(r["reason"], "text");
    c.wait_exit(&id);
    // The pane exited without it: an error, not a hang.
    let m = c.err(
        "pane.wait",
        json!({ "target": id, "text": "never-printed" }),
        "pane_exited",
    );
    assert!(m.contains("never-printed"), "{m}");
}

#[test]
fn waits_on_one_connection_are_answered_independently() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");
    let exit_wait = c.send("pane.wait", json!({ "target": id, "exit": true }));
    let text_wait = c.send("pane.wait", json!({ "target": id, "text": "second-line" }));
    c.send(
        "pane.input",
        json!({ "target": id, "data": "second-line\n" }),
    );
    // The input ack and the text wait arrive; the exit wait does not yet.
    let mut got = vec![c.next_response(), c.next_response()];
    got.sort_by_key(|r| r["id"].as_u64());
    assert_eq!(got[0]["id"], text_wait, "{got:?}");
    assert_eq!(got[0]["result"]["reason"], "text");
    assert!(got[1]["result"]["written"] == true, "{got:?}");
    // Removing the pane fails the pending exit wait.
    let mut other = ptyd.connect();
    other.ok("pane.remove", json!({ "target": id, "force": true }));
    let r = c.next_response();
    assert_eq!(r["id"], exit_wait);
    // The exit is reported before the removal, or the removal fails it.
    assert!(
        r["result"]["reason"] == "exited" || r["error"]["code"] == "not_found",
        "{r}"
    );
}

#[test]
fn timeout_watchdog_kills_the_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let started = Instant::now();
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sleep", "1000"], "timeout_ms": 300 }),
    );
    let exit = c.wait_exit(info["id"].as_str().unwrap());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(exit["reason"], "timeout", "{exit}");
    assert_eq!(exit["signal"], 15, "{exit}");
}

#[test]
fn timeout_watchdog_escalates_to_kill() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // Ignores TERM: the watchdog's KILL after the 3 s grace ends it.
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "trap '' TERM; echo armed; while :; do sleep 1; done"], "timeout_ms": 200 }),
    );
    let id = info["id"].as_str().unwrap();
    let exit = c.wait_exit(id);
    assert_eq!(exit["reason"], "timeout", "{exit}");
    assert_eq!(exit["signal"], 9, "{exit}");
}

#[test]
fn idle_watchdog_kills_a_quiet_pane_and_spares_a_busy_one() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let quiet = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "echo hello; exec sleep 1000"], "idle_timeout_ms": 400 }),
    );
    let busy = c.ok(
        "pane.create",
        json!({
            "argv": ["sh", "-c", "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done"],
            "idle_timeout_ms": 3000,
        }),
    );
    let quiet = quiet["id"].as_str().unwrap();
    let busy = busy["id"].as_str().unwrap();
    let exit = c.wait_exit(quiet);
    assert_eq!(exit["reason"], "idle_timeout", "{exit}");
    assert_eq!(exit["signal"], 15, "{exit}");
    // 80 ticks take over 4 s, past the 3 s idle limit: output keeps it alive.
    c.wait_text(busy, "tick 80");
    assert_eq!(c.pane_info(busy).unwrap()["state"], "running");
    c.ok("pane.kill", json!({ "target": busy, "signal": "KILL" }));
}

/// Text printed and scrolled off within one read (a test runner's "PASS"
/// followed by its summary) is still seen: a text wait also looks at the
/// lines that entered the scrollback since its last check.
#[test]
fn wait_text_sees_text_that_scrolled_off_at_once() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // One write: the marker, then 200 lines that push it off a 24-row screen.
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        r#"read x; s=$(seq 1 200); printf 'marker-zz\n%s\n' "$s"; exec sleep 1000"#,
    ]);
    let wait = c.send(
        "pane.wait",
        json!({ "target": id, "text": "marker-zz", "timeout_ms": 5000 }),
    );
    // Answered after the wait is parked: the wait is in place before the
    // output comes.
    let status = c.send("server.status", json!({}));
    assert_eq!(c.next_response()["id"], status);
    ptyd.connect().input(&id, "\r");
    let r = c.next_response();
    assert_eq!(r["id"], wait);
    assert_eq!(r["result"]["reason"], "text", "{r}");
}

/// A line longer than the pane is split over rows by autowrap; waits and
/// `capture --join` see it whole, blanks at the joint included, on screen
/// and after it scrolled into history.
#[test]
fn wrapped_lines_are_found_and_captured_whole() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // 30 columns: the line wraps right after "the " (column 30).
    let line = "a line that is wrapped at the blank and ends with MARK-42";
    let info = ptyd.create(json!({
        "argv": ["sh", "-c", format!("printf '%s\\n' '{line}'; exec cat")],
        "cols": 30, "rows": 5,
    }));
    let id = info["id"].as_str().unwrap().to_string();
    let r = c.ok(
        "pane.wait",
        json!({ "target": id, "text": line, "include_screen": true, "timeout_ms": 20000 }),
    );
    assert_eq!(r["reason"], "text", "{r}");
    let cap = c.ok("pane.capture", json!({ "target": id }));
    assert_eq!(cap["wrapped"][0], true, "{cap}");
    assert_eq!(cap["lines"][0], "a line that is wrapped at the", "{cap}");
    let joined = c.ok("pane.capture", json!({ "target": id, "join": true }));
    assert_eq!(joined["lines"][0], line, "{joined}");
    // Push it into history; a joined capture of history gives it whole too.
    c.input(&id, "1\r2\r3\r4\r5\r");
    c.wait_text(&id, "4\n5");
    let hist = c.ok(
        "pane.capture",
        json!({ "target": id, "join": true, "start": -100, "end": -1 }),
    );
    assert!(
        hist["lines"].as_array().unwrap().iter().any(|l| l == line),
        "{hist}"
    );
}
