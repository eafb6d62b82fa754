//! Limits the server enforces on what the API can build, and that what it
//! builds up to them survives a restart and a live upgrade, through the real
//! binary:
//!
//! - `split_chain_*`: layouts nest at most `MAX_SPLIT_DEPTH` splits (~62 nested splits made `session.json` unreadable and failed
//!   live upgrades).
//! - `panes_up_to_the_fd_limit_*`, `accept_*`: a server under a low
//!   `RLIMIT_NOFILE`.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use ptyd::workspace::layout::MAX_SPLIT_DEPTH;
use serde_json::{Value, json};
use util::{Conn, Ptyd};

/// The panes of every tab, in layout order, from `tree`.
fn tab_panes(c: &mut Conn) -> Vec<Vec<String>> {
    fn leaves(layout: &Value, out: &mut Vec<String>) {
        if let Some(p) = layout["pane"].as_str() {
            out.push(p.to_string());
        } else {
            leaves(&layout["split"]["first"], out);
            leaves(&layout["split"]["second"], out);
        }
    }
    let tree = c.ok("tree", json!({}));
    let mut tabs = Vec::new();
    for ws in tree["workspaces"].as_array().unwrap() {
        for tab in ws["tabs"].as_array().unwrap() {
            let mut out = Vec::new();
            leaves(&tab["layout"], &mut out);
            tabs.push(out);
        }
    }
    tabs
}

#[test]
fn split_chain_up_to_the_cap_survives_restart_and_upgrade_and_one_more_is_refused() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let hold = json!(["sleep", "100000"]);
    let mut last = c.create(json!({ "argv": hold }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut chain = vec![last.clone()];
    for i in 0..MAX_SPLIT_DEPTH {
        let direction = if i % 2 == 0 { "horizontal" } else { "vertical" };
        let info = c.create(json!({ "argv": hold, "split": last, "direction": direction }));
        last = info["id"].as_str().unwrap().to_string();
        chain.push(last.clone());
    }
    let msg = c.err(
        "pane.create",
        json!({ "argv": hold, "split": last }),
        "invalid_params",
    );
    assert!(
        msg.contains(&format!("{MAX_SPLIT_DEPTH} splits deep"))
            && msg.contains("new tab")
            && msg.contains(&format!("pane {last}")),
        "{msg}"
    );
    // The refusal started nothing: no pane was added.
    assert_eq!(c.panes().len(), chain.len());
    assert_eq!(tab_panes(&mut c), vec![chain.clone()]);
    c.save();

    // Restart: the file reads back whole, with no repair.
    let dirs = ptyd.dirs.clone();
    let ns = ptyd.namespace.clone();
    ptyd.stop();
    let ptyd = dirs.start(&ns);
    let mut c = ptyd.connect();
    let status = c.ok("server.status", json!({}));
    let restore = &status["persistence"]["restore"];
    assert_eq!(restore["found"], true, "{status}");
    assert_eq!(restore["panes"], chain.len(), "{status}");
    assert_eq!(restore["repairs"], json!([]), "{status}");
    assert_eq!(tab_panes(&mut c), vec![chain.clone()]);

    // A live upgrade carries the same layout.
    let report = c.call("server.upgrade", json!({})).unwrap_or_else(|e| {
        panic!("upgrade failed: {e:?}\n{}", ptyd.stderr());
    });
    let generation = status["generation"].as_u64().unwrap();
    assert_eq!(report["generation"], generation + 1, "{report}");
    let mut c = ptyd.connect();
    assert_eq!(tab_panes(&mut c), vec![chain.clone()]);
    c.err(
        "pane.create",
        json!({ "argv": hold, "split": last }),
        "invalid_params",
    );
    c.ok("server.stop", json!({}));
    c.read_until_eof();
}

/// The server's stderr lines so far, waited on for its log tags.
fn wait_log(ptyd: &Ptyd, tag: &str) {
    util::eventually(format!("the server to log {tag}"), || {
        ptyd.stderr().contains(tag)
    });
}

/// Connections until the server is out of fds: every one it can accept,
/// then more that stay pending in its backlog, until it logs that it is
/// starved. Returns them all.
fn exhaust_fds(ptyd: &Ptyd) -> Vec<Conn> {
    let mut conns = Vec::new();
    let starved_before = ptyd.stderr().matches("accept_starved").count();
    while ptyd.stderr().matches("accept_starved").count() == starved_before {
        match Conn::try_connect(&ptyd.socket()) {
            Some(c) => conns.push(c),
            // Backlog full: the server has stopped accepting, so it will
            // say so.
            None => {
                util::eventually("the server to log accept_starved", || {
                    ptyd.stderr().matches("accept_starved").count() > starved_before
                });
                break;
            }
        }
        assert!(conns.len() < 5000, "the server never ran out of fds");
    }
    conns
}

#[test]
fn accept_survives_fd_exhaustion_serves_the_pending_client_and_refuses_after_the_grace() {
    let dirs = util::Dirs::new();
    let ptyd = dirs.start_limited(&util::unique_name("fd"), &[], None, Some(64));
    let idle = exhaust_fds(&ptyd);
    eprintln!("{} connections exhausted a 64-fd server", idle.len());

    // A client pending when the fds come free is served, without anyone
    // else connecting to wake the listener.
    let mut pending = Conn::try_connect(&ptyd.socket()).expect("a backlog slot");
    let id = pending.send("pane.list", json!({}));
    drop(idle);
    let resp = pending.response(id).expect("pane.list once fds are free");
    assert_eq!(resp["panes"], json!([]), "{resp}");
    wait_log(&ptyd, "accept_resumed");

    // A client that waits through the grace period is told why (it need
    // not even send a request).
    let idle = exhaust_fds(&ptyd);
    let mut refused = Conn::try_connect(&ptyd.socket()).expect("a backlog slot");
    let line = refused.next_response();
    let msg = line["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(line["error"]["code"], "busy", "{line}");
    assert!(
        msg.contains("out of file descriptors") && msg.contains("limit is 64"),
        "{line}"
    );
    drop(idle);
    // The closes reach the server in some turn of its loop; a client that
    // lands before that in a turn with no fd free is refused, rightly.
    util::eventually("the server to serve again", || util::serves(&ptyd.socket()));

    let out = ptyd.run_cli(&["ls"]);
    assert!(out.status.success(), "{}", util::stderr(&out));
    let out = ptyd.run_cli(&["stop"]);
    assert!(out.status.success(), "{}", util::stderr(&out));
    let mut ptyd = ptyd;
    assert!(ptyd.wait_exit().success());
}

#[test]
fn panes_up_to_the_fd_limit_are_refused_clearly_and_saves_and_upgrades_still_work() {
    let dirs = util::Dirs::new();
    let ptyd = dirs.start_limited(&util::unique_name("fd"), &[], None, Some(160));
    let mut c = ptyd.connect();
    let mut created = 0;
    let msg = loop {
        match c.call("pane.create", json!({ "argv": ["sleep", "100000"] })) {
            Ok(_) => created += 1,
            Err((code, msg)) => {
                assert_eq!(code, "spawn_failed", "{msg}");
                break msg;
            }
        }
        assert!(created < 200, "160 fds never ran out");
    };
    eprintln!("{created} panes fit in 160 fds; then: {msg}");
    assert!(created >= 20, "only {created} panes fit in 160 fds");
    assert!(
        msg.contains("limit (RLIMIT_NOFILE) is 160") && msg.contains("LimitNOFILE="),
        "{msg}"
    );
    assert_eq!(c.panes().len(), created);
    c.save();
    let report = c
        .call("server.upgrade", json!({}))
        .unwrap_or_else(|e| panic!("upgrade at the fd limit: {e:?}\n{}", ptyd.stderr()));
    assert_eq!(report["panes"], created, "{report}");
    let mut c = ptyd.connect();
    assert_eq!(c.panes().len(), created);
    c.save();
    let out = ptyd.run_cli(&["ls"]);
    assert!(out.status.success(), "{}", util::stderr(&out));
    c.ok("server.stop", json!({}));
    c.read_until_eof();
}
