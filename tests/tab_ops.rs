//! Tab and layout operations through the real binary: `ptyd tab
//! new|select|rename`, `select-layout`, `swap`, `resize-split`, `zoom`,
//! `focus` and `new -s/-v` change the tree `ptyd ls --json` reports, each
//! change is an event, bad input gets its error and exit code, and the
//! layouts come back exactly through a stop and restore and a live upgrade.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::process::Output;
use util::{Ptyd, assert_exit, stderr, stdout};

/// `ptyd ARGS`, which must succeed; its stdout, trimmed.
#[track_caller]
fn ok(ptyd: &Ptyd, args: &[&str]) -> String {
    let out = ptyd.run_cli(args);
    assert_exit(&out, 0);
    stdout(&out).trim().to_string()
}

/// `ptyd ARGS`, which must fail with `code`; its stderr.
#[track_caller]
fn fails(ptyd: &Ptyd, args: &[&str], code: i32) -> String {
    let out: Output = ptyd.run_cli(args);
    assert_exit(&out, code);
    stderr(&out)
}

/// `ptyd ls --json`.
fn ls(ptyd: &Ptyd) -> Value {
    serde_json::from_str(&ok(ptyd, &["ls", "--json"])).expect("ls --json prints JSON")
}

/// The tab `id` as `ls --json` reports it.
fn tab(ptyd: &Ptyd, id: &str) -> Value {
    ls(ptyd)["workspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["tabs"].as_array().cloned().unwrap_or_default())
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no tab {id} in ptyd ls --json"))
}

/// The panes of a layout node, in order.
fn panes_of(layout: &Value) -> Vec<String> {
    match layout.get("pane") {
        Some(p) => vec![p.as_str().unwrap().to_string()],
        None => {
            let s = &layout["split"];
            let mut out = panes_of(&s["first"]);
            out.extend(panes_of(&s["second"]));
            out
        }
    }
}

/// The tree without what a restart changes (each pane's process info).
fn layouts(tree: &Value) -> Value {
    let mut tree = tree.clone();
    tree.as_object_mut().unwrap().remove("panes");
    for ws in tree["workspaces"].as_array_mut().into_iter().flatten() {
        for tab in ws["tabs"].as_array_mut().into_iter().flatten() {
            tab.as_object_mut().unwrap().remove("panes");
        }
    }
    tree
}

/// Reads events until one of `kind` about tab `tab` (or with `tab` null
/// in the check, any), skipping others.
#[track_caller]
fn event(sub: &mut util::Conn, kind: &str, check: impl Fn(&Value) -> bool) -> Value {
    loop {
        let e = sub.next_event();
        if e["type"] == kind && check(&e) {
            return e;
        }
    }
}

fn sleeper(ptyd: &Ptyd, extra: &[&str]) -> String {
    let mut args = vec!["new", "-d", "--size", "80x24"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sleep", "1000"]);
    ok(ptyd, &args)
}

#[test]
fn each_command_changes_the_tree_and_is_an_event() {
    let ptyd = Ptyd::start();
    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({}));

    // a | (b / c): `-v` with -s stacks.
    let a = sleeper(&ptyd, &["-n", "a"]);
    let b = sleeper(&ptyd, &["-n", "b", "-s", "a"]);
    let c = sleeper(&ptyd, &["-n", "c", "-s", "b", "-v"]);
    assert_eq!((a.as_str(), b.as_str(), c.as_str()), ("p1", "p2", "p3"));
    let split = event(&mut sub, "tab.layout", |e| e["focus"] == "p3");
    assert_eq!(panes_of(&split["layout"]), ["p1", "p2", "p3"]);
    let t1 = tab(&ptyd, "t1");
    assert_eq!(t1["focus"], "p3");
    assert_eq!(
        t1["layout"]["split"]["second"]["split"]["direction"],
        "vertical"
    );

    // A preset from the panes in their order, focus kept.
    ok(&ptyd, &["select-layout", "-t", "a", "even-horizontal"]);
    let e = event(&mut sub, "tab.layout", |e| e["tab"] == "t1");
    let t1 = tab(&ptyd, "t1");
    assert_eq!(e["layout"], t1["layout"]);
    assert_eq!(t1["layout"]["split"]["direction"], "horizontal");
    assert_eq!(
        t1["layout"]["split"]["second"]["split"]["direction"],
        "horizontal"
    );
    assert_eq!(panes_of(&t1["layout"]), ["p1", "p2", "p3"]);
    assert_eq!(t1["focus"], "p3");
    ok(&ptyd, &["select-layout", "next"]);
    let t1 = tab(&ptyd, "t1");
    assert_eq!(t1["layout"]["split"]["direction"], "vertical");
    ok(&ptyd, &["layout", "even-horizontal"]);

    // Swapped: the focus stays on its pane.
    ok(&ptyd, &["swap", "a", "c"]);
    event(&mut sub, "tab.layout", |e| {
        panes_of(&e["layout"]) == ["p3", "p2", "p1"]
    });
    assert_eq!(tab(&ptyd, "t1")["focus"], "p3");

    // Three 80-column panes and two borders: 242 columns, 241 shared by
    // the top split, a third (80) to p3; 10 more to the right.
    let reply: Value = serde_json::from_str(&ok(
        &ptyd,
        &["resize-split", "-t", "c", "right", "10", "--json"],
    ))
    .unwrap();
    assert_eq!(reply["moved"], 10, "{reply}");
    let ratio = tab(&ptyd, "t1")["layout"]["split"]["ratio"]
        .as_f64()
        .unwrap();
    assert!((ratio - 90.0 / 241.0).abs() < 1e-4, "{ratio}");
    event(&mut sub, "tab.layout", |e| e["tab"] == "t1");
    // Clamped at the smallest pane, not an error.
    let out = ptyd.run_cli(&["resize-split", "-t", "c", "left", "1000"]);
    assert_exit(&out, 0);
    let reply: Value =
        serde_json::from_str(&ok(&ptyd, &["resize-split", "-t", "c", "left", "--json"])).unwrap();
    assert_eq!(reply["moved"], 0, "{reply}");

    // Zoom toggles; the zoomed pane is focused.
    ok(&ptyd, &["zoom", "b"]);
    let e = event(&mut sub, "tab.layout", |e| e["zoom"] != Value::Null);
    assert_eq!((&e["zoom"], &e["focus"]), (&json!("p2"), &json!("p2")));
    ok(&ptyd, &["zoom"]);
    assert_eq!(tab(&ptyd, "t1")["zoom"], Value::Null);
    ok(&ptyd, &["zoom", "--on", "c"]);
    assert_eq!(tab(&ptyd, "t1")["zoom"], "p3");

    // A new tab opens selected, after the others.
    assert_eq!(
        ok(&ptyd, &["tab", "new", "-n", "logs", "--", "sleep", "1000"]),
        "t2"
    );
    let e = event(&mut sub, "tab.created", |_| true);
    assert_eq!(
        (&e["tab"], &e["name"], &e["focus"]),
        (&json!("t2"), &json!("logs"), &json!("p4"))
    );
    event(&mut sub, "tab.selected", |e| e["tab"] == "t2");
    assert_eq!(tab(&ptyd, "t2")["active"], true);
    ok(&ptyd, &["tab", "select", "0"]);
    event(&mut sub, "tab.selected", |e| e["tab"] == "t1");
    assert_eq!(tab(&ptyd, "t1")["active"], true);
    ok(&ptyd, &["tab", "select", "next"]);
    assert_eq!(tab(&ptyd, "t2")["active"], true);
    ok(&ptyd, &["tab", "select", "next"]);
    assert_eq!(tab(&ptyd, "t1")["active"], true);
    ok(&ptyd, &["tab", "select", "prev"]);
    assert_eq!(tab(&ptyd, "t2")["active"], true);
    ok(&ptyd, &["tab", "select", "t1"]);
    assert_eq!(tab(&ptyd, "t1")["active"], true);

    // Renamed by id, and without one: the active tab.
    ok(&ptyd, &["tab", "rename", "t2", "journal"]);
    let e = event(&mut sub, "tab.renamed", |_| true);
    assert_eq!((&e["tab"], &e["name"]), (&json!("t2"), &json!("journal")));
    ok(&ptyd, &["tab", "rename", "work"]);
    assert_eq!(tab(&ptyd, "t1")["name"], "work");
    ok(&ptyd, &["tab", "select", "journal"]);

    // A new workspace's tab; `focus` brings back tab and workspace.
    let err = fails(&ptyd, &["tab", "new", "-w", "side"], 1);
    assert!(err.contains("no workspace \"side\""), "{err}");
    ok(&ptyd, &["workspace", "new", "side"]);
    let t3 = ok(&ptyd, &["tab", "new", "-w", "side", "-n", "other"]);
    assert_eq!(t3, "t3");
    event(&mut sub, "workspace.selected", |_| true);
    let tree = ls(&ptyd);
    assert_eq!(tree["workspaces"][1]["name"], "side");
    assert_eq!(tree["workspaces"][1]["active"], true);
    ok(&ptyd, &["focus", "a"]);
    let e = event(&mut sub, "tab.layout", |e| e["tab"] == "t1");
    assert_eq!(e["focus"], "p1");
    event(&mut sub, "tab.selected", |e| e["tab"] == "t1");
    let e = event(&mut sub, "workspace.selected", |_| true);
    assert_eq!(e["workspace"], "w1");
    assert_eq!(tab(&ptyd, "t1")["active"], true);

    // `new -v` without -s splits the current pane (p1, focused above).
    let d = sleeper(&ptyd, &["-v"]);
    let t1 = tab(&ptyd, "t1");
    assert_eq!(panes_of(&t1["layout"]), ["p3", "p2", "p1", d.as_str()]);
    assert_eq!(t1["focus"], d.as_str());

    // Bad input: what is wrong, a non-zero exit, nothing changed.
    let before = layouts(&ls(&ptyd));
    let err = fails(&ptyd, &["select-layout", "diagonal"], 2);
    assert!(
        err.contains("even-horizontal, even-vertical, main-horizontal, main-vertical, tiled"),
        "{err}"
    );
    let err = fails(&ptyd, &["select-layout"], 2);
    assert!(err.contains("usage: ptyd select-layout"), "{err}");
    let err = fails(&ptyd, &["swap", "a", "nosuch"], 1);
    assert!(err.contains("no pane \"nosuch\""), "{err}");
    fails(&ptyd, &["swap", "a"], 2);
    let err = fails(&ptyd, &["resize-split", "sideways"], 2);
    assert!(err.contains("left, right, up, down"), "{err}");
    let err = fails(&ptyd, &["resize-split", "-t", "c", "up", "2"], 2);
    assert!(
        err.contains("no split of tab t1 with panes stacked"),
        "{err}"
    );
    let err = fails(&ptyd, &["resize-split", "left", "0"], 2);
    assert!(err.contains("1 or more"), "{err}");
    let err = fails(&ptyd, &["tab", "select", "9"], 1);
    assert!(err.contains("has no tab 9"), "{err}");
    fails(&ptyd, &["tab", "select"], 2);
    let err = fails(&ptyd, &["tab", "select", "nosuch"], 1);
    assert!(err.contains("no tab or pane \"nosuch\""), "{err}");
    fails(&ptyd, &["tab", "new", "--force"], 2);
    fails(&ptyd, &["zoom", "--on", "--off"], 2);
    fails(&ptyd, &["zoom", "nosuch"], 1);
    assert_eq!(layouts(&ls(&ptyd)), before);
}

#[test]
fn layouts_come_back_exactly_after_restore_and_live_upgrade() {
    let dirs = util::Dirs::new();
    let ns = util::unique_name("tabops");
    let ptyd = dirs.start(&ns);
    for args in [
        &["-n", "a"][..],
        &["-n", "b", "-s", "a"],
        &["-n", "c", "-s", "b", "-v"],
        &["-n", "d", "-s", "c"],
    ] {
        sleeper(&ptyd, args);
    }
    ok(&ptyd, &["select-layout", "main-vertical"]);
    ok(&ptyd, &["resize-split", "-t", "a", "right", "7"]);
    ok(&ptyd, &["resize-split", "-t", "c", "down", "3"]);
    ok(&ptyd, &["swap", "a", "d"]);
    ok(&ptyd, &["workspace", "new", "side"]);
    ok(
        &ptyd,
        &[
            "tab", "new", "-w", "side", "-n", "other", "--", "sleep", "1000",
        ],
    );
    sleeper(&ptyd, &["-n", "e", "-s", "p5"]);
    ok(&ptyd, &["zoom", "e"]);
    ok(&ptyd, &["focus", "b"]);
    ok(&ptyd, &["zoom", "c"]);
    let tree = layouts(&ls(&ptyd));
    let t1 = &tree["workspaces"][0]["tabs"][0];
    assert_eq!((&t1["zoom"], &t1["focus"]), (&json!("p3"), &json!("p3")));
    assert_eq!(tree["workspaces"][0]["active"], true);
    assert_eq!(tree["workspaces"][1]["tabs"][0]["zoom"], "p6");
    let text = ok(&ptyd, &["ls"]);
    assert!(text.contains(" (zoomed p3)"), "{text}");

    ok(&ptyd, &["save"]);
    ptyd.stop();
    let ptyd = dirs.start(&ns);
    assert_eq!(layouts(&ls(&ptyd)), tree, "after a stop and restore");

    ok(&ptyd, &["upgrade"]);
    assert_eq!(layouts(&ls(&ptyd)), tree, "after a live upgrade");
}

/// A command run inside a pane acts on that pane's tab, not on the active
/// one.
#[test]
fn commands_inside_a_pane_act_on_its_tab() {
    let ptyd = Ptyd::start();
    sleeper(&ptyd, &["-n", "a"]);
    let script = format!(
        "read go; {bin} tab rename mine && {bin} zoom && echo done; exec sleep 1000",
        bin = util::PTYD
    );
    let inside = ok(&ptyd, &["new", "-d", "-s", "a", "--", "sh", "-c", &script]);
    ok(
        &ptyd,
        &["tab", "new", "-n", "elsewhere", "--", "sleep", "1000"],
    );
    let mut c = ptyd.connect();
    c.input(&inside, "\r");
    c.wait_text(&inside, "done");
    let t1 = tab(&ptyd, "t1");
    assert_eq!((&t1["name"], &t1["zoom"]), (&json!("mine"), &json!(inside)));
    assert_eq!(tab(&ptyd, "t2")["active"], true);
    assert_eq!(tab(&ptyd, "t2")["name"], "elsewhere");
}
