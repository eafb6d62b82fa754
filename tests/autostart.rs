//! Starting a server on demand: every command about panes starts one when
//! none runs (the server-lifecycle commands never do: tests/cli.rs), such a
//! server holds `rerun` panes instead of re-running them, and
//! `autostart = false` turns it off with an error that says what to do.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::Value;
use util::{Dirs, Ptyd};

fn ptyd(dirs: &Dirs, ns: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = dirs.command(ns);
    cmd.args(args);
    util::run_bounded(cmd, &format!("ptyd {args:?}"))
}

/// Stops the background server of a namespace when the test ends.
struct StopOnDrop<'a>(&'a Dirs, &'a str);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = ptyd(self.0, self.1, &["stop"]);
    }
}

#[test]
fn autostart_false_is_a_clear_error() {
    let dirs = Dirs::new();
    let ns = util::unique_name("noauto");
    let config = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "autostart = false\n").unwrap();
    for args in [
        &["ls"][..],
        &["new", "-d", "--", "true"],
        &["send", "p1", "x"],
        &["kill", "p1"],
    ] {
        let out = ptyd(&dirs, &ns, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("autostart = false") && err.contains(&format!("`ptyd -L {ns} server`")),
            "{args:?}: {err}"
        );
        assert!(!dirs.socket(&ns).exists(), "{args:?} started a server");
    }
}

#[test]
fn a_listing_never_reruns_commands() {
    let ptyd_fg = Ptyd::start();
    let (dirs, ns) = (&ptyd_fg.dirs, ptyd_fg.namespace.clone());
    let runs = dirs.state.join("runs.txt");
    let script = format!("echo run >> {}; exec sleep 1000", runs.display());
    let out = ptyd(
        dirs,
        &ns,
        &["new", "-d", "--restore", "rerun", "--shell", &script],
    );
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    util::eventually("the pane's first run", || {
        std::fs::read_to_string(&runs).ok().filter(|t| t == "run\n")
    });
    // Stopping saves the session; the foreground server exits.
    let out = ptyd(dirs, &ns, &["stop"]);
    assert!(out.status.success(), "{out:?}");
    let mut ptyd_fg = ptyd_fg;
    assert!(ptyd_fg.wait_exit().success());
    let (dirs, ns) = (&ptyd_fg.dirs, ptyd_fg.namespace.clone());

    // A listing starts a server, which restores the pane held.
    let out = ptyd(dirs, &ns, &["api", "pane.list"]);
    let _stop = StopOnDrop(dirs, &ns);
    assert!(out.status.success(), "{out:?}");
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pane = &list["panes"][0];
    assert_eq!(pane["id"], id.as_str(), "{list}");
    assert_eq!(pane["state"], "held", "{list}");
    let reason = pane["held_reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("`ptyd respawn {id}`")), "{list}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");

    // Respawning it is the user's decision.
    let out = ptyd(dirs, &ns, &["respawn", &id]);
    assert!(out.status.success(), "{out:?}");
    util::eventually("the pane's second run", || {
        std::fs::read_to_string(&runs)
            .ok()
            .filter(|t| t == "run\nrun\n")
    });
}

/// With the namespace's units installed, a client asks systemd to start the
/// service rather than starting a server outside it; when that fails (here
/// no user manager reads this test's unit directory) it says so and starts
/// nothing itself.
#[test]
fn installed_units_start_through_systemd_only() {
    let dirs = Dirs::new();
    let ns = util::unique_name("unit");
    let out = ptyd(&dirs, &ns, &["service", "install"]);
    let unit_dir = dirs.state.join("config/systemd/user");
    assert!(
        unit_dir.join(format!("ptyd-{ns}.socket")).exists(),
        "{out:?}"
    );
    let out = ptyd(&dirs, &ns, &["ls"]);
    if out.status.success() {
        // A user manager that reads this directory started the service.
        let _stop = StopOnDrop(&dirs, &ns);
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("systemctl --user start ptyd-{ns}.socket")),
        "{err}"
    );
    assert!(
        !dirs.socket(&ns).exists(),
        "a server was started outside systemd"
    );
    assert!(
        !dirs.state_dir(&ns).join("server.stderr").exists(),
        "a background server was started"
    );
}
