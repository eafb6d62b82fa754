//! Bad input of every kind on the socket: each gets an error naming what is
//! wrong, and the same connection (and a new one) keeps working afterwards.
//! The one exception is a line over the 1 MiB limit, after which the
//! connection is closed.

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
    still_works(&ptyd, &mut c, "pane errors");
}

#[test]
fn a_near_limit_line_is_fine() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let pad = "x".repeat(1_000_000);
    let line = format!("{{\"id\": 1, \"method\": \"pane.list\", \"pad\": \"{pad}\"}}\n");
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
    c.ok("pane.kill", json!({ "target": "p1", "signal": "KILL" }));
    c.wait_exit("p1");
}
