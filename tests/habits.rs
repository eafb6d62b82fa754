//! What tmux users and scripts type first: `ptyd help`,
//! "did you mean", `-t TARGET` everywhere, `new -A`, what `new -s` means,
//! `--json` on every command that changes something, snake_case capture
//! modes, and the default timeout of CLI waits.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use util::{Ptyd, assert_exit};

fn json_out(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

#[test]
fn help_and_did_you_mean() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["help"]);
    assert_exit(&out, 0);
    assert!(util::stdout(&out).contains("Commands:"), "{out:?}");
    let out = ptyd.run_cli(&["help", "attach"]);
    assert_exit(&out, 0);
    assert_eq!(
        util::stdout(&out),
        util::stdout(&ptyd.run_cli(&["attach", "--help"]))
    );
    let out = ptyd.run_cli(&["help", "atach"]);
    assert_exit(&out, 2);
    assert!(
        util::stderr(&out).contains("did you mean `ptyd attach`?"),
        "{out:?}"
    );

    let out = ptyd.run_cli(&["stauts"]);
    assert_exit(&out, 2);
    assert!(
        util::stderr(&out).contains("did you mean `ptyd status`?"),
        "{out:?}"
    );
    let out = ptyd.run_cli(&["send", "p1", "--entr", "x"]);
    assert_exit(&out, 2);
    assert!(
        util::stderr(&out).contains("did you mean --enter?"),
        "{out:?}"
    );
    let out = ptyd.run_cli(&["capture", "p1", "--jsn"]);
    assert_exit(&out, 2);
    assert!(
        util::stderr(&out).contains("did you mean --json?"),
        "{out:?}"
    );
    // A mistyped pane name.
    ptyd.create(json!({ "name": "build", "argv": ["cat"] }));
    let out = ptyd.run_cli(&["capture", "buidl"]);
    assert_exit(&out, 1);
    assert!(
        util::stderr(&out).contains("did you mean \"build\"?"),
        "{out:?}"
    );
    // An id typed in capitals means that id; an id-shaped miss is no
    // typo of a name one letter away.
    ptyd.create(json!({ "name": "x1", "argv": ["cat"] }));
    let out = ptyd.run_cli(&["capture", "P1"]);
    assert_exit(&out, 1);
    assert!(
        util::stderr(&out).contains("did you mean \"p1\"?"),
        "{out:?}"
    );
    let out = ptyd.run_cli(&["capture", "P9"]);
    assert_exit(&out, 1);
    assert!(!util::stderr(&out).contains("did you mean"), "{out:?}");
    // Far from everything: no guess.
    let out = ptyd.run_cli(&["frobnicate"]);
    assert_exit(&out, 2);
    assert!(!util::stderr(&out).contains("did you mean"), "{out:?}");
}

#[test]
fn names_with_repeated_id_letters_are_names() {
    let ptyd = Ptyd::start();
    for name in ["pp1", "tt2", "ww3"] {
        let out = ptyd.run_cli(&["new", "-d", "-n", name, "--", "cat"]);
        assert_exit(&out, 0);
        let out = ptyd.run_cli(&["capture", name]);
        assert_exit(&out, 0);
    }
    // One letter and digits is an id, and stays refused as a name.
    let out = ptyd.run_cli(&["new", "-d", "-n", "p7", "--", "cat"]);
    assert_exit(&out, 2);
    assert!(util::stderr(&out).contains("looks like an id"), "{out:?}");
}

#[test]
fn target_option_new_a_and_new_s() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let out = ptyd.run_cli(&[
        "new",
        "-d",
        "-n",
        "work",
        "--",
        "sh",
        "-c",
        "echo hello-pane; exec cat",
    ]);
    assert_exit(&out, 0);
    let id = util::stdout(&out).trim().to_string();
    c.wait_text(&id, "hello-pane");
    // -t works wherever a TARGET does.
    let out = ptyd.run_cli(&["capture", "-t", "work"]);
    assert_exit(&out, 0);
    assert!(util::stdout(&out).contains("hello-pane"), "{out:?}");
    assert_exit(
        &ptyd.run_cli(&["send", "-t", "work", "--enter", "typed-with-t"]),
        0,
    );
    c.wait_text(&id, "typed-with-t");
    assert_exit(&ptyd.run_cli(&["resize", "-t", "work", "90x20"]), 0);
    assert_eq!(c.pane(&id)["cols"], 90);
    let out = ptyd.run_cli(&["wait", "-t", "work", "--text", "typed-with-t", "--screen"]);
    assert_exit(&out, 0);

    // new -A -n NAME: the existing pane, not a second one.
    let out = ptyd.run_cli(&["new", "-A", "-d", "-n", "work", "--", "sleep", "100"]);
    assert_exit(&out, 0);
    assert_eq!(util::stdout(&out).trim(), id);
    assert_eq!(c.panes().len(), 1);
    // ... and a new one when there is none by that name.
    let out = ptyd.run_cli(&["new", "-A", "-d", "-n", "other", "--", "sleep", "100"]);
    assert_exit(&out, 0);
    assert_ne!(util::stdout(&out).trim(), id);
    assert_eq!(c.panes().len(), 2);
    assert_exit(&ptyd.run_cli(&["new", "-A", "-d", "--", "true"]), 2);

    // tmux's `new -s NAME`: the error says what -s is and what to type.
    let out = ptyd.run_cli(&["new", "-d", "-s", "mysession"]);
    assert_exit(&out, 2);
    let err = util::stderr(&out);
    assert!(
        err.contains("-s is --split") && err.contains("ptyd new -n mysession"),
        "{err}"
    );
    assert_eq!(c.panes().len(), 2);
}

#[test]
fn action_commands_print_json() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["sleep", "1000"]);

    let r = json_out(&ptyd.run_cli(&["resize", &id, "100x30", "--json"]));
    assert_eq!(
        (r["id"].clone(), r["cols"].clone(), r["rows"].clone()),
        (json!(id), json!(100), json!(30))
    );
    // Below the minimum: refused, with the minimum named, the size kept.
    for small in ["0x0", "1x30", "100x0"] {
        let out = ptyd.run_cli(&["resize", &id, small]);
        assert_exit(&out, 2);
        let err = util::stderr(&out);
        assert!(
            err.contains("too small") && err.contains("at least 2 columns and 1 row"),
            "{out:?}"
        );
        assert_eq!(
            (c.pane(&id)["cols"].clone(), c.pane(&id)["rows"].clone()),
            (json!(100), json!(30))
        );
    }
    let r = json_out(&ptyd.run_cli(&["resize", &id, "2x1", "--json"]));
    assert_eq!((r["cols"].clone(), r["rows"].clone()), (json!(2), json!(1)));
    let r = json_out(&ptyd.run_cli(&["focus", &id, "--json"]));
    assert_eq!(r, json!({}));
    let r = json_out(&ptyd.run_cli(&["resume", &id, "sleep 5", "--json"]));
    assert_eq!(r["resume"], "sleep 5");
    let r = json_out(&ptyd.run_cli(&["kill", &id, "--signal", "KILL", "--json"]));
    assert_eq!(
        r,
        json!({ "pane": id, "signal": 9, "signalled": true, "grace_ms": 3000 })
    );
    c.wait_exit(&id);
    let old_pid = c.pane(&id)["pid"].clone();
    let r = json_out(&ptyd.run_cli(&["respawn", &id, "--json"]));
    assert_eq!(r["state"], "running");
    assert_ne!(r["pid"], old_pid, "respawn reports the new pid");
    let r = json_out(&ptyd.run_cli(&["rm", &id, "--force", "--json"]));
    assert_eq!(r, json!({ "pane": id }));

    let r = json_out(&ptyd.run_cli(&["save", "--json"]));
    assert!(r["path"].as_str().unwrap().ends_with("session.json"), "{r}");
    assert!(r["revision"].as_u64().is_some(), "{r}");
    let r = json_out(&ptyd.run_cli(&["workspace", "new", "wsa", "--json"]));
    assert_eq!(r["name"], "wsa");
    let w = r["id"].as_str().unwrap().to_string();
    let r = json_out(&ptyd.run_cli(&["workspace", "rename", "-t", &w, "wsb", "--json"]));
    assert_eq!(r, json!({}));
    let tab = ptyd.create(json!({ "argv": ["true"], "workspace": "wsb", "tab_name": "tb" }));
    c.wait_exit(tab["id"].as_str().unwrap());
    let r = json_out(&ptyd.run_cli(&["tab", "rename", "tb", "tb2", "--json"]));
    assert_eq!(r, json!({}));
    let r = json_out(&ptyd.run_cli(&["rm", "--exited", "--json"]));
    assert_eq!(r, json!({ "removed": [tab["id"]] }));
    let r = json_out(&ptyd.run_cli(&["workspace", "rm", "wsb", "--json"]));
    assert_eq!(r, json!({}));

    // send keeps its acknowledgement counters.
    let sh = ptyd.create_argv(&["cat"]);
    let r = json_out(&ptyd.run_cli(&["send", &sh, "--enter", "x", "--json"]));
    let ack = &r["acks"][0];
    for key in [
        "written",
        "duplicate",
        "prompts_seen",
        "commands_finished",
        "output_bytes",
    ] {
        assert!(ack.get(key).is_some(), "{key} missing: {r}");
    }
}

#[test]
fn capture_modes_are_snake_case() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        "printf '\\033[?1002h\\033[?1006hmodes-set'; exec cat",
    ]);
    c.wait_text(&id, "modes-set");
    let capture = json_out(&ptyd.run_cli(&["capture", &id, "--json"]));
    let modes = &capture["modes"];
    assert_eq!(modes["mouse"], "button", "{modes}");
    assert_eq!(modes["mouse_encoding"], "sgr", "{modes}");
    let fresh = ptyd.create_argv(&["cat"]);
    let capture = json_out(&ptyd.run_cli(&["capture", &fresh, "--json"]));
    assert_eq!(capture["modes"]["mouse"], "off");
    assert_eq!(capture["modes"]["mouse_encoding"], "default");
}

/// The default of CLI waits comes from `wait_timeout_ms` (30 s unless set):
/// a shortened one here, ending a wait that has nothing to wait for.
#[test]
fn waits_time_out_by_default() {
    let dirs = util::Dirs::new();
    let config = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "wait_timeout_ms = 1500\n").unwrap();
    let ptyd = dirs.start(&util::unique_name("waitdef"));
    let id = ptyd.create_argv(&["cat"]);
    let started = Instant::now();
    let out = ptyd.run_cli(&["wait", &id, "--text", "never-printed"]);
    assert_exit(&out, 124);
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(util::stderr(&out).contains("(1500 ms)"), "{out:?}");
    let out = ptyd.run_cli(&["send", &id, "--enter", "x", "--wait-for", "never-printed"]);
    assert_exit(&out, 124);
    assert!(util::stderr(&out).contains("(1500 ms)"), "{out:?}");
}

/// The default itself: 30 s, reported by the server's config and by the
/// help; with `PTYD_LONG_TESTS=1` also waited out for real.
#[test]
fn the_default_wait_timeout_is_30s() {
    let ptyd = Ptyd::start();
    assert_eq!(ptyd.status_json()["config"]["wait_timeout_ms"], 30_000);
    let help = util::stdout(&ptyd.run_cli(&["wait", "--help"]));
    assert!(help.contains("default 30s"), "{help}");
    if std::env::var_os("PTYD_LONG_TESTS").is_none() {
        return;
    }
    let id = ptyd.create_argv(&["cat"]);
    let started = Instant::now();
    // A harness bound well past the 30 s under test.
    let mut child = util::KillOnDrop::child(
        ptyd.cli(&["wait", &id, "--text", "never-printed"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let status = util::wait_child(child.as_child_mut(), Duration::from_secs(90))
        .expect("the default timeout ended the wait");
    let took = started.elapsed();
    assert_eq!(status.code(), Some(124));
    let mut err = String::new();
    std::io::Read::read_to_string(child.as_child_mut().stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("(30000 ms)"), "{err}");
    assert!(
        took >= Duration::from_secs(30) && took < Duration::from_secs(60),
        "{took:?}"
    );
}
