//! Several clients on one pane: `ptyd clients` and `ls` show who
//! is attached, `ptyd detach` and `attach -d` detach others, the pane's size
//! follows the `window_size` policy and is worked out again when a client
//! leaves, and `ptyd status` does not count its own connection.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use util::{Attached, DETACH, INPUT, Ptyd, RESIZE, Tmux, shell_quote};

fn size(c: &mut util::Conn, pane: &str) -> (u64, u64) {
    let info = c.pane(pane);
    (
        info["cols"].as_u64().unwrap(),
        info["rows"].as_u64().unwrap(),
    )
}

fn attach(ptyd: &Ptyd, pane: &str, cols: u16, rows: u16, extra: Value) -> Attached {
    let mut params = json!({ "target": pane, "cols": cols, "rows": rows });
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    ptyd.connect().attach(params).1
}

fn resize_payload(cols: u16, rows: u16) -> Vec<u8> {
    let mut p = cols.to_be_bytes().to_vec();
    p.extend_from_slice(&rows.to_be_bytes());
    p
}

fn cli_json(ptyd: &Ptyd, args: &[&str]) -> Value {
    let out = ptyd.run_cli(args);
    assert!(out.status.success(), "ptyd {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("ptyd {args:?} printed no JSON ({e}): {out:?}"))
}

#[test]
fn clients_are_listed_and_the_size_follows_the_remaining_client() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let p = c.create(json!({ "argv": ["cat"], "cols": 80, "rows": 24 }))["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Own connection not counted: nothing attached, nothing else open.
    let status = cli_json(&ptyd, &["status", "--json"]);
    assert_eq!(
        (status["clients"].clone(), status["connections"].clone()),
        (json!(0), json!(1)),
        "{status}"
    );

    let mut a = attach(&ptyd, &p, 100, 30, json!({}));
    assert_eq!(size(&mut c, &p), (100, 30));
    let b = attach(&ptyd, &p, 120, 40, json!({}));
    assert_eq!(size(&mut c, &p), (120, 40), "latest: the last to attach");
    // A read-only watcher neither counts for the size nor is the latest.
    let _watcher = attach(&ptyd, &p, 50, 10, json!({ "read_only": true }));
    assert_eq!(size(&mut c, &p), (120, 40));

    let list = cli_json(&ptyd, &["clients", "--json"]);
    let clients = list["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 3, "{list}");
    let me = std::process::id() as i64;
    for cl in clients {
        assert_eq!(cl["pane"], p.as_str());
        assert_eq!(cl["pid"].as_i64(), Some(me), "pid from SO_PEERCRED: {cl}");
        assert!(
            cl["since_unix_ms"].as_u64().unwrap() > 1_700_000_000_000,
            "{cl}"
        );
    }
    let sizes: Vec<(Value, Value, Value, Value)> = clients
        .iter()
        .map(|cl| {
            (
                cl["cols"].clone(),
                cl["rows"].clone(),
                cl["read_only"].clone(),
                cl["latest"].clone(),
            )
        })
        .collect();
    assert_eq!(
        sizes,
        vec![
            (json!(100), json!(30), json!(false), json!(false)),
            (json!(120), json!(40), json!(false), json!(true)),
            (json!(50), json!(10), json!(true), json!(false)),
        ]
    );
    let b_number = clients[1]["client"].as_u64().unwrap();
    let text = util::stdout(&ptyd.run_cli(&["clients"]));
    assert!(
        text.contains("read-only") && text.contains("120x40"),
        "{text}"
    );
    let ls = util::stdout(&ptyd.run_cli(&["ls"]));
    assert!(ls.contains("3 attached"), "{ls}");
    let status = cli_json(&ptyd, &["status", "--json"]);
    assert_eq!(status["clients"], 3, "{status}");
    // c, a, b and the watcher; not `status` itself.
    assert_eq!(status["connections"], 4, "{status}");
    assert!(util::stdout(&ptyd.run_cli(&["status"])).contains("clients:    3 attached"));

    // A types: it becomes the latest and sets the size.
    a.send(INPUT, b"x");
    c.wait_text(&p, "x");
    assert_eq!(size(&mut c, &p), (100, 30));
    // B resizes: the latest again.
    b.send(RESIZE, &resize_payload(110, 35));
    util::eventually("the pane takes B's new size", || {
        (size(&mut c, &p) == (110, 35)).then_some(())
    });
    // B leaves: the size follows the remaining client at once.
    b.send(DETACH, b"");
    let mut b = b;
    assert_eq!(b.read_exit()["reason"], "detached");
    assert_eq!(
        size(&mut c, &p),
        (100, 30),
        "the size follows A once B left"
    );
    let list = cli_json(&ptyd, &["clients", "--json"]);
    assert!(
        list["clients"]
            .as_array()
            .unwrap()
            .iter()
            .all(|cl| cl["client"] != b_number),
        "{list}"
    );

    // `ptyd detach TARGET`: every client of the pane.
    let out = ptyd.run_cli(&["detach", &p, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let detached: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        detached["detached"].as_array().unwrap().len(),
        2,
        "{detached}"
    );
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
    assert!(
        exit["message"].as_str().unwrap().contains("ptyd detach"),
        "{exit}"
    );
    let status = cli_json(&ptyd, &["status", "--json"]);
    assert_eq!(status["clients"], 0, "{status}");
    assert!(!util::stdout(&ptyd.run_cli(&["ls"])).contains("attached"));
}

#[test]
fn smallest_policy_detach_others_and_attach_d() {
    let dirs = util::Dirs::new();
    let config = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "window_size = \"smallest\"\n").unwrap();
    let ptyd = dirs.start(&util::unique_name("small"));
    let mut c = ptyd.connect();
    assert_eq!(ptyd.status_json()["config"]["window_size"], "smallest");
    let p = c.create(json!({ "argv": ["cat"], "cols": 80, "rows": 24 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut a = attach(&ptyd, &p, 100, 30, json!({}));
    let b = attach(&ptyd, &p, 120, 20, json!({}));
    assert_eq!(size(&mut c, &p), (100, 20), "smallest columns and rows");
    // Typing does not change it under `smallest`.
    a.send(INPUT, b"y");
    c.wait_text(&p, "y");
    assert_eq!(size(&mut c, &p), (100, 20));

    // `detach --others` keeps the latest client (a, which typed).
    let out = ptyd.run_cli(&["detach", "-t", &p, "--others"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(util::stdout(&out).trim(), "detached 1 client");
    let mut b = b;
    assert_eq!(b.read_exit()["reason"], "detached");
    assert_eq!(size(&mut c, &p), (100, 30), "b left: a alone sets the size");

    // attach -d: the newcomer detaches everyone else.
    let _c2 = attach(&ptyd, &p, 90, 50, json!({ "detach_others": true }));
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
    assert!(exit["message"].as_str().unwrap().contains("-d"), "{exit}");
    assert_eq!(size(&mut c, &p), (90, 50));

    // Usage: detach with nothing to detach, and a client that is not there.
    let out = ptyd.run_cli(&["detach"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = ptyd.run_cli(&["detach", "--client", "9999"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(util::stderr(&out).contains("ptyd clients"), "{out:?}");
    let out = ptyd.run_cli(&["detach", "--all"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(util::stdout(&out).trim(), "detached 1 client");
}

#[test]
fn bare_attach_takes_the_focused_pane_and_attach_d_detaches_others() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    c.create(json!({ "name": "one", "argv": ["/bin/sh"] }));
    let two = c.create(json!({ "name": "two", "argv": ["/bin/sh"] }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.ok("pane.focus", json!({ "target": "one" }));
    let mut other = attach(&ptyd, "two", 80, 24, json!({ "read_only": true }));
    // Read-only attaches do not take the focus.
    let focus = |c: &mut util::Conn| {
        let tree = c.ok("tree", json!({}));
        tree["workspaces"][0]["tabs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["active"] == true)
            .map(|t| t["focus"].clone())
            .unwrap()
    };
    assert_eq!(focus(&mut c), "p1");

    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    let cmd = format!(
        "{} attach --pane-only; echo attach-''rc=$?",
        shell_quote(util::PTYD)
    );
    tmux.type_line(&cmd);
    ev.wait_event("client.attached", "p1");
    // Typed through the client: it is in raw mode, so C-\ detaches.
    tmux.type_line("echo in-''one");
    c.wait_text("p1", "in-one");
    tmux.keys(&["C-\\"]);
    tmux.wait_screen("the first attach ends", |s| s.contains("attach-rc=0"));

    // `-t` and `-d`: the read-only watcher of p2 is detached.
    let cmd = format!(
        "{} attach --pane-only -d -t two; echo attach2-''rc=$?",
        shell_quote(util::PTYD)
    );
    tmux.type_line(&cmd);
    ev.wait_event("client.attached", &two);
    let exit = other.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
    assert_eq!(focus(&mut c), two.as_str(), "attaching focuses the pane");
    tmux.type_line("echo in-''two");
    c.wait_text(&two, "in-two");
    tmux.keys(&["C-\\"]);
    tmux.wait_screen("the second attach ends", |s| s.contains("attach2-rc=0"));

    // Now a bare attach comes back to p2, the pane attached last.
    tmux.type_line(&format!("{} attach --pane-only", shell_quote(util::PTYD)));
    ev.wait_event("client.attached", &two);
    let list = c.ok("client.list", json!({}));
    assert_eq!(list["clients"][0]["pane"], two.as_str(), "{list}");
}

/// When a pane ends, its clients are let go one by one: the ended pane
/// keeps its size (and its last screen) instead of taking each remaining
/// client's.
#[test]
fn an_ended_pane_keeps_its_size_as_its_clients_go() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let p = c.create(json!({ "argv": ["cat"], "cols": 80, "rows": 24 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut a = attach(&ptyd, &p, 100, 30, json!({}));
    let mut b = attach(&ptyd, &p, 120, 40, json!({}));
    assert_eq!(size(&mut c, &p), (120, 40));
    c.ok("pane.kill", json!({ "target": p, "signal": "KILL" }));
    c.wait_exit(&p);
    assert_eq!(a.read_exit()["reason"], "pane_exited");
    assert_eq!(b.read_exit()["reason"], "pane_exited");
    assert_eq!(size(&mut c, &p), (120, 40));
}
