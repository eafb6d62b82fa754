//! Bad input of every kind on the socket: each gets an error naming what is
//! wrong, and the same connection (and a new one) keeps working afterwards.
//! The one exception is a line over the 1 MiB limit, after which the
//! connection is closed.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::io::Write;
use util::{Conn, Ptyd};

/// Checks that `c` and a fresh connection still answer requests.
fn still_works(ptyd: &Ptyd, c: &mut Conn, after: &str) {
    let r = c.call("pane.list", json!({}));
    assert!(
        r.is_ok(),
        "after {after}: pane.list on the same connection: {r:?}"
    );
    let r = ptyd.connect().call("server.status", json!({}));
    assert!(r.is_ok(), "after {after}: a new connection: {r:?}");
}

/// Sends one raw line and returns the error response.
fn raw_error(c: &mut Conn, line: &[u8]) -> Value {
    c.send_raw(line);
    let resp = c.next_response();
    assert!(
        resp.get("error").is_some(),
        "{:?} did not get an error: {resp}",
        String::from_utf8_lossy(line)
    );
    resp
}

#[test]
fn malformed_lines_get_errors_and_the_connection_survives() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // (line, expected code, expected id)
    let cases: &[(&[u8], &str, Value)] = &[
        (b"this is not json\n", "parse_error", Value::Null),
        (b"{\"id\": 1, \"method\": \"pane.list\"\n", "parse_error", Value::Null),
        (b"\xff\xfe\xfd\n", "parse_error", Value::Null),
        (b"42\n", "parse_error", Value::Null),
        (b"\"pane.list\"\n", "parse_error", Value::Null),
        (b"null\n", "parse_error", Value::Null),
        (b"[7, \"pane.list\", {}]\n", "parse_error", Value::Null),
        (b"{\"id\": 2}\n", "invalid_request", json!(2)),
        // An id that would come back other than sent (past 64 bits, read
        // as an inexact float): the client could never match the answer.
        (
            b"{\"id\": 6666666666666666666666666666666666666666666666666666666666666666666666666666661, \"method\": \"pane.list\"}\n",
            "invalid_request",
            Value::Null,
        ),
        // The same inside an id that is an array or an object.
        (
            b"{\"id\": {\"a\": [1, 26666666666666666666666666666666666666666666666666666666]}, \"method\": \"pane.list\"}\n",
            "invalid_request",
            Value::Null,
        ),
        (b"{\"id\": {\"a\": [1, \"b\"]}, \"method\": \"no.such\"}\n", "unknown_method", json!({"a": [1, "b"]})),
        (b"{\"id\": 18446744073709551615, \"method\": \"no.such\"}\n", "unknown_method", json!(u64::MAX)),
        (b"{\"id\": 1.5, \"method\": \"no.such\"}\n", "unknown_method", json!(1.5)),
        (b"{\"id\": 3, \"params\": {}}\n", "invalid_request", json!(3)),
        (b"{\"id\": \"s\", \"method\": \"no.such\"}\n", "unknown_method", json!("s")),
        (b"{\"id\": 5, \"method\": \"pane.list\", \"params\": {\"x\": 1}}\n", "invalid_params", json!(5)),
        (b"{\"id\": 6, \"method\": \"pane.list\", \"params\": 17}\n", "invalid_params", json!(6)),
        (b"{\"id\": 7, \"method\": \"pane.create\", \"params\": {\"argv\": \"sh\"}}\n", "invalid_params", json!(7)),
        (b"{\"id\": 8, \"method\": \"pane.create\", \"params\": {\"argvv\": [\"sh\"]}}\n", "invalid_params", json!(8)),
        (b"{\"id\": 9, \"method\": \"pane.create\", \"params\": {\"cols\": -5}}\n", "invalid_params", json!(9)),
        (b"{\"id\": 10, \"method\": \"pane.input\", \"params\": {\"target\": \"p1\"}}\n", "invalid_params", json!(10)),
        (b"{\"id\": 11, \"method\": \"pane.wait\", \"params\": {\"target\": \"p1\", \"exit\": true, \"text\": \"x\"}}\n", "invalid_params", json!(11)),
        (b"{\"id\": 12, \"method\": \"hello\", \"params\": {\"protocol\": 999}}\n", "version_mismatch", json!(12)),
        (b"{\"id\": 13, \"method\": \"pane.capture\", \"params\": {\"target\": \"p99\"}}\n", "not_found", json!(13)),
        (b"{\"id\": 14, \"method\": \"pane.kill\", \"params\": {\"target\": \"nobody\"}}\n", "not_found", json!(14)),
        (b"{\"id\": 15, \"method\": \"attach\", \"params\": {\"target\": \"p99\"}}\n", "not_found", json!(15)),
        // A misspelt `params` would otherwise run the method without them.
        (b"{\"id\": 16, \"method\": \"pane.kill\", \"prams\": {\"target\": \"p1\"}}\n", "invalid_request", json!(16)),
    ];
    // A pane exists, so "p1" in the params errors above is not what fails.
    let p1 = ptyd.create_argv(&["sleep", "1000"]);
    assert_eq!(p1, "p1");
    for (line, code, id) in cases {
        let what = String::from_utf8_lossy(line);
        let resp = raw_error(&mut c, line);
        assert_eq!(resp["error"]["code"], *code, "{what}: {resp}");
        assert_eq!(resp["id"], *id, "{what}: {resp}");
        let message = resp["error"]["message"].as_str().unwrap_or("");
        assert!(message.len() > 10, "{what}: unhelpful message {message:?}");
        still_works(&ptyd, &mut c, &what);
    }
    // The version mismatch message names both versions.
    let m = c.err("hello", json!({ "protocol": 999 }), "version_mismatch");
    assert!(m.contains("999") && m.contains("protocol 1"), "{m}");
    // An unknown member is named.
    let resp = raw_error(
        &mut c,
        b"{\"id\": 17, \"method\": \"tree\", \"jsonrpc\": \"2.0\"}\n",
    );
    let m = resp["error"]["message"].as_str().unwrap_or("");
    assert!(m.contains("\"jsonrpc\""), "{resp}");
    // A bad params message names the field.
    let m = c.err("pane.create", json!({ "argvv": [] }), "invalid_params");
    assert!(m.contains("argvv"), "{m}");
}

#[test]
fn blank_lines_and_crlf_are_tolerated() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // Blank lines get no response; a CRLF line is a request like any other.
    c.send_raw(b"\n\r\n   \n{\"id\": 1, \"method\": \"pane.list\"}\r\n");
    let resp = c.next_response();
    assert_eq!(resp["id"], 1, "{resp}");
    assert!(resp["result"]["panes"].is_array(), "{resp}");
    // Two requests in one write, and one split across writes.
    c.send_raw(b"{\"id\": 2, \"method\": \"pane.list\"}\n{\"id\": 3, \"method\": \"pane.li");
    assert_eq!(c.next_response()["id"], 2);
    c.send_raw(b"st\"}\n");
    let resp = c.next_response();
    assert_eq!(resp["id"], 3, "{resp}");
    assert!(resp["result"].is_object(), "{resp}");
}

#[test]
fn pane_level_errors() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let done = ptyd.create_argv(&["true"]);
    c.wait_exit(&done);
    c.err(
        "pane.input",
        json!({ "target": done, "data": "x" }),
        "pane_exited",
    );
    // Input still works on a running pane afterwards.
    let live = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; exec cat"]);
    c.input(&live, "still-fine\n");
    c.wait_text(&live, "still-fine");

    let m = c.err(
        "pane.create",
        json!({ "argv": ["/nonexistent/program"] }),
        "spawn_failed",
    );
    assert!(m.contains("/nonexistent/program"), "{m}");
    c.err(
        "pane.create",
        json!({ "argv": ["true"], "cwd": "/nonexistent/dir" }),
        "invalid_params",
    );
    c.err("pane.create", json!({ "argv": [] }), "invalid_params");
    c.err(
        "pane.create",
        json!({ "argv": ["true"], "shell": "true" }),
        "invalid_params",
    );
    c.err(
        "pane.create",
        json!({ "argv": ["true"], "name": "p7" }),
        "invalid_params",
    );
    // Names are unique: a second pane cannot take one in use.
    let a = ptyd.create(json!({ "argv": ["sleep", "1000"], "name": "twin" }));
    let m = c.err(
        "pane.create",
        json!({ "argv": ["sleep", "1000"], "name": "twin" }),
        "invalid_params",
    );
    assert!(m.contains(a["id"].as_str().unwrap()), "{m}");
    assert_eq!(c.capture("twin"), c.capture(a["id"].as_str().unwrap()));
    // History comes in ranges of at most 1000 lines.
    let m = c.err(
        "pane.history",
        json!({ "target": live, "count": 1001 }),
        "invalid_params",
    );
    assert!(m.contains("1000"), "{m}");
    let range = c.ok(
        "pane.history",
        json!({ "target": live, "start": 0, "count": 5 }),
    );
    assert_eq!(range["first"], 0, "{range}");
    // Attaching to the pane the client says it runs in is refused.
    c.err(
        "attach",
        json!({ "target": live, "from_pane": live }),
        "self_attach",
    );
    still_works(&ptyd, &mut c, "pane errors");
}

#[test]
fn a_near_limit_line_is_fine() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // Padded with whitespace: an unknown member would be refused.
    let pad = " ".repeat(1_000_000);
    let line = format!("{{\"id\": 1, \"method\": \"pane.list\"{pad}}}\n");
    assert!(line.len() < 1 << 20);
    c.send_raw(line.as_bytes());
    let resp = c.next_response();
    assert_eq!(resp["id"], 1);
    assert!(resp["result"]["panes"].is_array(), "{resp}");
}

#[test]
fn a_line_over_one_mib_is_refused_and_the_connection_closed() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let huge = vec![b'a'; (1 << 20) + 4096];
    // The server stops reading at the limit, so write on a thread: the write
    // may block or fail with EPIPE once the server closes.
    let mut writer = c.stream.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        let _ = writer.write_all(&huge);
        let _ = writer.write_all(b"\n{\"id\": 2, \"method\": \"pane.list\"}\n");
    });
    let resp = c
        .read_line()
        .expect("the connection closed without a too_large error");
    assert_eq!(resp["error"]["code"], "too_large", "{resp}");
    assert!(resp["id"].is_null(), "{resp}");
    // Nothing more: in particular the request after the huge line is not
    // answered (the server cannot know where it starts).
    assert!(c.read_line().is_none(), "the connection stayed open");
    t.join().unwrap();
    // The server itself is fine.
    let r = ptyd.connect().call("pane.list", json!({}));
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn a_client_that_disconnects_mid_request_does_not_hurt_the_server() {
    let ptyd = Ptyd::start();
    {
        let mut c = ptyd.connect();
        c.send_raw(b"{\"id\": 1, \"method\": \"pane.li");
    }
    {
        // A wait whose connection goes away is dropped, not answered later.
        let mut c = ptyd.connect();
        let id = ptyd.create_argv(&["sleep", "1000"]);
        c.send("pane.wait", json!({ "target": id, "exit": true }));
        c.send_raw(b"{\"id\": 1, \"method\": \"server.status\"}\n");
        assert!(c.next_response()["result"].is_object());
    }
    let mut c = ptyd.connect();
    c.ok("pane.list", json!({}));
    // Those connections are gone from the server, parked wait and all.
    util::eventually("the closed connections to be dropped", || {
        // `connections` leaves out the connection asking.
        (c.ok("server.status", json!({}))["connections"] == 0).then_some(())
    });
    c.ok("pane.kill", json!({ "target": "p1", "signal": "KILL" }));
    c.wait_exit("p1");
}

/// A client that sends requests but never reads the answers is cut off once
/// 4 MiB are owed; what it does receive is still whole JSON lines, the last
/// one saying why.
#[test]
fn a_client_that_never_reads_responses_is_cut_off_cleanly() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // A full 1000x500 screen makes each capture response about 1 MB.
    let info = c.ok(
        "pane.create",
        json!({
            "argv": ["sh", "-c", "i=0; while [ $i -lt 500 ]; do printf '%0999d\\n' $i; i=$((i+1)); done; echo filled; exec sleep 1000"],
            "cols": 1000,
            "rows": 500,
        }),
    );
    let id = info["id"].as_str().unwrap();
    c.wait_text(id, "filled");
    let mut greedy = ptyd.connect();
    for _ in 0..12 {
        greedy.send("pane.capture", json!({ "target": id }));
        // Meanwhile others are served. The round trip also lets the server
        // write part of what it owes `greedy` between its requests.
        c.ok("pane.list", json!({}));
    }
    // Now read: whole lines (read_line fails the test on a broken one),
    // some captures, then the overflow error, then the end.
    let mut captures = 0;
    let last = loop {
        let msg = greedy
            .read_line()
            .expect("closed without an overflow error");
        if msg.get("error").is_some() {
            break msg;
        }
        assert!(msg["result"]["text"].is_string(), "{msg}");
        captures += 1;
    };
    assert_eq!(last["error"]["code"], "too_large", "{last}");
    assert!(captures < 12, "every capture was delivered: no cut-off");
    assert!(greedy.read_line().is_none(), "lines after the last words");
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
}

/// Durations from clients are not trusted: the largest values must neither
/// crash the server nor fire early.
#[test]
fn huge_durations_are_harmless() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let max = u64::MAX;
    let id = ptyd.create_argv(&["sleep", "1000"]);
    let cases = [
        (
            "pane.wait",
            json!({ "target": id, "exit": true, "timeout_ms": max }),
        ),
        ("pane.wait", json!({ "target": id, "idle_ms": max })),
        (
            "pane.wait",
            json!({ "target": id, "text": "never", "timeout_ms": max }),
        ),
    ];
    for (method, params) in cases {
        // Parked, not answered: a status request behind it is.
        let waiting = ptyd.connect();
        let mut waiting = waiting;
        waiting.send(method, params.clone());
        let r = waiting.call("server.status", json!({}));
        assert!(r.is_ok(), "{method} {params}: {r:?}");
    }
    let big = c.call(
        "pane.create",
        json!({ "argv": ["sleep", "1000"], "timeout_ms": max, "idle_timeout_ms": max }),
    );
    let big = big.unwrap_or_else(|e| panic!("pane.create with huge watchdogs: {e:?}"));
    c.ok("pane.kill", json!({ "target": id, "grace_ms": max }));
    let exit = c.wait_exit(&id);
    // Without a signal, the ladder's first step: SIGHUP.
    assert_eq!(exit["signal"], 1, "{exit}");
    let info = c.pane_info(big["id"].as_str().unwrap()).unwrap();
    assert_eq!(info["state"], "running", "a huge watchdog fired: {info}");
    c.ok("server.status", json!({}));
}

#[test]
fn bad_pane_specs_are_refused_without_harm() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let cases = [
        json!({ "argv": ["true"], "name": "bad\nname" }),
        json!({ "argv": ["true"], "name": "" }),
        json!({ "argv": ["true"], "cwd": "relative/dir" }),
        json!({ "argv": ["true"], "env": { "A=B": "x" } }),
        json!({ "argv": ["true"], "env": { "": "x" } }),
        json!({ "argv": ["true"], "env": { "NUL": "a\u{0}b" } }),
        json!({ "argv": ["tr\u{0}ue"] }),
    ];
    for params in cases {
        match c.call("pane.create", params.clone()) {
            Ok(v) => panic!("{params} accepted: {v}"),
            Err((code, message)) => assert!(
                code == "invalid_params" || code == "spawn_failed",
                "{params}: {code}: {message}"
            ),
        }
        still_works(&ptyd, &mut c, &params.to_string());
    }
    assert_eq!(c.ok("pane.list", json!({}))["panes"], json!([]));
}

/// A client may send its requests and shut down its writing side (as
/// `socat` or `nc -U` do at the end of their input); answers still owed,
/// including ones that come later, are delivered before the server closes.
#[test]
fn a_half_closed_connection_still_gets_its_answers() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["sh", "-c", "read x; exit 3"]);
    let mut c = ptyd.connect();
    c.send(
        "pane.wait",
        json!({ "target": id, "exit": true, "timeout_ms": 20000 }),
    );
    c.send("pane.list", json!({}));
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    // The list is answered at once; the wait only once the pane exits.
    let list = c.next_response();
    assert!(list["result"]["panes"].is_array(), "{list}");
    ptyd.connect().input(&id, "go\r");
    let wait = c.next_response();
    assert_eq!(wait["result"]["exit"]["code"], 3, "{wait}");
    assert!(c.read_line().is_none());

    // Half-closed with a wait that never ends, then closed for good: the
    // server lets the connection go.
    let sleeper = ptyd.create_argv(&["sleep", "1000"]);
    let mut c = ptyd.connect();
    c.send("pane.wait", json!({ "target": sleeper, "exit": true }));
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut status = ptyd.connect();
    status.ok("pane.list", json!({}));
    drop(c);
    util::eventually("the closed connection to be dropped", || {
        (status.ok("server.status", json!({}))["connections"] == 0).then_some(())
    });
}

/// a reply over the 4 MiB reply limit is refused with
/// `too_large` naming its size, the limit and how to ask for less, and the
/// connection goes on; a reply under it reaches a client that reads it even
/// when the client owes another (over the 4 MiB queue bound together).
#[test]
fn a_reply_over_the_limit_is_refused_not_taken_for_a_slow_client() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // 6000 lines of 990 characters in the scrollback of a 1000-column pane.
    let script = "awk 'BEGIN { s = sprintf(\"%990s\", \"\"); gsub(/ /, \"x\", s); \
                  for (i = 0; i < 6000; i++) print s }'; echo filled; exec sleep 1000";
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", script], "cols": 1000, "rows": 50 }),
    );
    let id = info["id"].as_str().unwrap();
    c.wait_text(id, "filled");

    let message = c.err(
        "pane.capture",
        json!({ "target": id, "start": -6000 }),
        "too_large",
    );
    assert!(
        message.starts_with("pane.capture reply of 11."),
        "{message}"
    );
    assert!(
        message.contains("exceeds the 4.0 MiB reply limit"),
        "{message}"
    );
    assert!(message.contains("start/end"), "{message}");
    still_works(&ptyd, &mut c, "a refused reply");

    // Two captures of about 3 MB each, asked at once, read afterwards.
    for _ in 0..2 {
        c.send("pane.capture", json!({ "target": id, "start": -1500 }));
    }
    for _ in 0..2 {
        let reply = c.next_response();
        assert!(
            reply["result"]["lines"]
                .as_array()
                .is_some_and(|l| l.len() > 1500),
            "{reply:.200}"
        );
    }
    still_works(&ptyd, &mut c, "two big replies");
}

/// CPU time (user + system, in clock ticks) the process has used.
fn cpu_ticks(pid: i32) -> u64 {
    let field = |n| {
        util::proc_stat_field(pid, n)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap()
    };
    field(14) + field(15)
}

/// a request line dripped in small pieces is scanned once,
/// not again from its start at every read: 4000 pieces of 100 bytes cost
/// the server about what the 4000 round trips pacing them cost.
#[test]
fn a_dripped_line_is_not_rescanned_from_its_start() {
    let ptyd = Ptyd::start();
    let mut pacer = ptyd.connect();
    let mut drip = ptyd.connect();
    let serving = ptyd.serving_pid();
    let before = cpu_ticks(serving);
    let piece = [b' '; 100];
    for _ in 0..4000 {
        drip.send_raw(&piece);
        // The server reports `drip` readable no later than `pacer`: once
        // this answer is back, the piece was read.
        pacer.ok("pane.list", json!({}));
    }
    drip.send_raw(b"{\"id\": 7, \"method\": \"pane.list\"}\n");
    let reply = drip.next_response();
    assert_eq!(reply["id"], 7, "{reply}");
    let ticks = cpu_ticks(serving) - before;
    // Rescanning read 800 MB: 3 s of CPU in a debug build; scanned once,
    // the line and the round trips take about 0.1 s.
    let hz = 100; // USER_HZ on Linux
    assert!(
        ticks < hz,
        "the server spent {ticks} ticks on a 400 KB line"
    );
}

/// unfinished request lines are bounded in aggregate: past
/// 64 MiB across connections, the connection with the largest one is
/// refused with `too_large` and closed; the server's memory stays bounded
/// and everyone else is served.
#[test]
fn partial_lines_have_an_aggregate_budget() {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    let ptyd = Ptyd::start();
    let partial = vec![b'x'; 1000 << 10];
    let mut conns = Vec::new();
    for _ in 0..80 {
        let mut s = UnixStream::connect(ptyd.socket()).unwrap();
        s.set_write_timeout(Some(util::TIMEOUT)).unwrap();
        // A refused connection may be closed before all of it is written.
        let _ = s.write_all(&partial);
        s.set_nonblocking(true).unwrap();
        conns.push((s, Vec::new()));
    }
    let refused = util::eventually("16 connections refused", || {
        let mut refused = Vec::new();
        for (s, got) in conns.iter_mut() {
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if got.ends_with(b"\n") {
                refused.push(String::from_utf8_lossy(got).into_owned());
            }
        }
        (refused.len() >= 16).then_some(refused)
    });
    for line in &refused {
        let msg: Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(msg["error"]["code"], "too_large", "{msg}");
        let text = msg["error"]["message"].as_str().unwrap();
        assert!(text.contains("over its 64 MiB budget"), "{text}");
    }
    let status = fs_status(ptyd.serving_pid());
    assert!(status < 160 << 10, "server RSS {status} kB");
    let mut c = ptyd.connect();
    still_works(&ptyd, &mut c, "the partial-line budget");
}

/// VmRSS of a process in kB.
fn fs_status(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// the API's rules (shared with the restore path): NUL in
/// argv is `invalid_params`, not `spawn_failed`; tab names empty or with
/// NUL, names with escape sequences or like ids, env names with `=`.
#[test]
fn names_commands_and_env_are_validated_as_params() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    for (params, says) in [
        (
            json!({ "argv": ["echo", "a\u{0}b"] }),
            "argv[1] contains NUL",
        ),
        (json!({ "argv": [""] }), "argv[0] is empty"),
        (json!({ "argv": [] }), "argv is empty"),
        (json!({ "shell": "echo \u{0}" }), "shell contains NUL"),
        (json!({ "tab_name": "" }), "tab_name"),
        (json!({ "tab_name": "a\u{0}b" }), "tab_name"),
        (json!({ "name": "\u{1b}[31mred" }), "printable"),
        (json!({ "name": "p12" }), "looks like an id"),
        (json!({ "name": "x".repeat(100_000) }), "1-128 bytes"),
        (json!({ "env": { "A=B": "1" } }), "env name"),
    ] {
        let message = c.err("pane.create", params.clone(), "invalid_params");
        assert!(message.contains(says), "{params:.80}: {message}");
        assert!(
            message.len() < 400,
            "the message repeats the input: {message:.100}"
        );
    }
    let id = ptyd.create_argv(&["sleep", "1000"]);
    let tab = c.ok("tree", json!({}))["workspaces"][0]["tabs"][0]["id"].clone();
    let message = c.err(
        "tab.rename",
        json!({ "target": tab, "name": "" }),
        "invalid_params",
    );
    assert!(message.contains("tab name"), "{message}");
    still_works(&ptyd, &mut c, "invalid names");
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
}
