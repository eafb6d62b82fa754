//! `ptyd upgrade --mode restore`, the fallback where a live handoff is
//! impossible: the session is saved, the server restarts in place (same pid)
//! as the new binary, and the panes come back from the snapshot by their
//! restore plans, with their history; attached clients reconnect to them.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Ptyd, Tmux, shell_quote};

#[test]
fn restore_mode_restarts_in_place_and_restores_the_session() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let marker_file = ptyd.dirs.state.join("runs.txt");
    let shell = ptyd.create_argv(&["/bin/sh"]);
    c.ok(
        "pane.input",
        json!({ "target": shell, "data": "echo before-the-restart\r" }),
    );
    c.wait_text(&shell, "before-the-restart");
    let script = format!(
        "echo run >> {}; echo started; exec sleep 1000",
        marker_file.display()
    );
    let rerun = c.ok(
        "pane.create",
        json!({ "shell": script, "restore": "rerun" }),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.wait_text(&rerun, "started");
    let held = ptyd.create_argv(&["sleep", "1000"]);
    let before = c.ok("server.status", json!({}));
    let old_pids = c.ok("pane.list", json!({}))["panes"].clone();

    let out = ptyd.run_cli(&["upgrade", "--mode", "restore", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut c = ptyd.connect();
    let after = c.ok("server.status", json!({}));
    assert_eq!(after["pid"], before["pid"], "restarts in the same process");
    assert_eq!(after["generation"], 2);
    let panes = c.ok("pane.list", json!({}))["panes"].clone();
    let find = |id: &str| pane_by_id(&panes, id);
    let old = |id: &str| pane_by_id(&old_pids, id);

    // A plain shell comes back as a fresh shell, its history above.
    assert_eq!(find(&shell)["state"], "running");
    assert_ne!(find(&shell)["pid"], old(&shell)["pid"]);
    let history = c.ok("pane.capture", json!({ "target": shell, "start": -100 }))["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(history.contains("before-the-restart"), "{history}");
    assert!(history.contains("--- ptyd: restored"), "{history}");

    // `rerun` ran its command a second time.
    assert_eq!(find(&rerun)["state"], "running");
    c.wait_text(&rerun, "started");
    util::eventually("the rerun pane to run again", || {
        std::fs::read_to_string(&marker_file)
            .unwrap_or_default()
            .lines()
            .count()
            >= 2
    });

    // The default policy for a command is `hold`: no process until respawned.
    assert_eq!(find(&held)["state"], "held");
    let info = c.ok("pane.respawn", json!({ "target": held }));
    assert_eq!(info["state"], "running");
}

#[test]
fn restore_mode_refuses_a_binary_that_cannot_read_the_snapshot() {
    let ptyd = Ptyd::start();
    let fake = ptyd.dirs.state.join("old-ptyd");
    std::fs::write(&fake, "#!/bin/sh\necho '{\"handoff_version\": 1, \"snapshot_version\": 0, \"server_version\": \"0.0.1\"}'\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pane = ptyd.create_argv(&["sleep", "1000"]);
    let mut c = ptyd.connect();
    let before = c.ok("server.status", json!({}));
    let msg = c.err(
        "server.upgrade",
        json!({ "mode": "restore", "binary": fake }),
        "upgrade_failed",
    );
    assert!(msg.contains("snapshot version 0"), "{msg}");
    let after = c.ok("server.status", json!({}));
    assert_eq!(after["pid"], before["pid"]);
    let list = c.ok("pane.list", json!({}));
    assert_eq!(list["panes"][0]["id"], pane);
    assert_eq!(list["panes"][0]["state"], "running");
}

#[test]
fn resume_rules_from_the_config_resume_known_programs() {
    let ptyd = Ptyd::start();
    let agent = ptyd.dirs.state.join("myagent");
    std::fs::write(&agent, "#!/bin/sh\necho agent-first-run\nexec sleep 1000\n").unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = ptyd.dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[[resume_rules]]\nprogram = \"myagent\"\nresume = \"echo resumed-by-rule; exec sleep 1000\"\n",
    )
    .unwrap();
    let mut c = ptyd.connect();
    let pane = ptyd.create_argv(&[agent.to_str().unwrap()]);
    c.wait_text(&pane, "agent-first-run");

    let out = ptyd.run_cli(&["upgrade", "--mode", "restore"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c = ptyd.connect();
    // Without the rule a command pane would be held; the rule resumes it.
    c.wait_text(&pane, "resumed-by-rule");
    let info = c.ok("pane.list", json!({}))["panes"][0].clone();
    assert_eq!(info["state"], "running", "{info}");
}

#[test]
fn attached_clients_reconnect_and_redraw_across_a_restore_mode_upgrade() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    c.type_line(&id, "echo before-$((6*7))");
    c.wait_text(&id, "before-42");
    let ptyd_bin = shell_quote(util::PTYD);
    // One client in the tab view (the default), one of the pane alone.
    let tab_view = Tmux::outer_session(&ptyd, 100, 30);
    tab_view.type_line(&format!("{ptyd_bin} attach {id}"));
    tab_view.wait_screen("the tab view", |s| s.contains("before-42"));
    let pane_only = Tmux::outer_session(&ptyd, 90, 25);
    pane_only.type_line(&format!("{ptyd_bin} attach --pane-only {id}"));
    pane_only.wait_screen("the pane alone", |s| s.contains("before-42"));
    util::eventually("both clients attached", || {
        (ptyd.status_json()["clients"] == 2).then_some(())
    });

    let out = ptyd.run_cli(&["upgrade", "--mode", "restore"]);
    util::assert_exit(&out, 0);

    // Each client is back on the restored shell: the screen redrawn (the
    // restore's notice is only in the new server's copy of the pane), no
    // word of a stop, and what it types reaches the pane again.
    for (tmux, what, echo) in [
        (&tab_view, "the tab view", "tab-$((6*7))"),
        (&pane_only, "the pane alone", "alone-$((6*7))"),
    ] {
        tmux.wait_screen(&format!("{what} redrawn by the new server"), |s| {
            s.contains("--- ptyd: restored")
        });
        let screen = tmux.screen();
        assert!(!screen.contains("server stopped"), "{what}:\n{screen}");
        tmux.type_line(&format!("echo {echo}"));
        let typed = echo.split('-').next().unwrap().to_string() + "-42";
        let mut c = ptyd.connect();
        c.wait_text(&id, &typed);
        tmux.wait_screen(&format!("{what} showing the output"), |s| {
            s.contains(&typed)
        });
    }
    util::eventually("both clients attached again", || {
        (ptyd.status_json()["clients"] == 2).then_some(())
    });
}

/// The entry with id `id` of a `pane.list` array.
fn pane_by_id(panes: &serde_json::Value, id: &str) -> serde_json::Value {
    panes
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no pane {id} in {panes}"))
}
