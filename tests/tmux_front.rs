//! The tmux front through the real binary, run as `tmux` (a symlink named
//! `tmux` to the build under test): the commands agent managers send
//! (`new-session -d`, `send-keys`, `capture-pane -p`, `list-panes -F`,
//! `split-window`, `display-message -p`) and their answers, tmux's error
//! words and exit codes, `TMUX`/`TMUX_PANE` inside the panes it makes (so
//! `tmux` run there reaches the same server), none in panes ptyd's own
//! commands make, and a script driving it that goes on unchanged through
//! a live upgrade and a SIGKILL of the serving process.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use std::path::PathBuf;
use std::process::{Command, Output};
use util::{Dirs, Ptyd, eventually, run_bounded, stderr, stdout, unique_name};

/// A directory holding `tmux`, a symlink to the ptyd under test.
fn tmux_dir(dirs: &Dirs) -> PathBuf {
    let dir = dirs.path("tmux-bin");
    let link = dir.join("tmux");
    if !link.exists() {
        std::os::unix::fs::symlink(util::PTYD, &link).expect("symlinking tmux to ptyd");
    }
    dir
}

struct Front {
    dirs: Dirs,
    namespace: String,
    bin: PathBuf,
}

impl Front {
    fn new(dirs: &Dirs, namespace: &str) -> Front {
        Front {
            bin: tmux_dir(dirs).join("tmux"),
            dirs: dirs.clone(),
            namespace: namespace.to_string(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.dirs.command_of(&self.bin, &self.namespace);
        // A tmux tool names its server with -L; nothing else tells it.
        cmd.env_remove("PTYD_NAMESPACE");
        cmd.arg("-L").arg(&self.namespace).args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        run_bounded(self.command(args), &format!("tmux {args:?}"))
    }

    /// Runs a command that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tmux {args:?} failed ({}): {}",
            out.status,
            stderr(&out)
        );
        stdout(&out)
    }

    fn screen(&self, target: &str) -> String {
        self.ok(&["capture-pane", "-p", "-t", target])
    }

    fn wait_screen(&self, target: &str, text: &str) {
        eventually(format!("{text:?} on {target}'s screen"), || {
            let screen = self.screen(target);
            if screen.contains(text) {
                Ok(())
            } else {
                Err(screen)
            }
        });
    }
}

#[test]
fn tmux_version_and_errors_are_tmuxs() {
    let dirs = Dirs::new();
    let front = Front::new(&dirs, &unique_name("tx"));
    assert_eq!(front.ok(&["-V"]), "tmux 3.3a\n");
    // No server: only new-session and start-server start one.
    let out = front.run(&["list-sessions"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("no server running on "),
        "{}",
        stderr(&out)
    );
    assert!(
        !dirs.socket(&front.namespace).exists(),
        "ls started a server"
    );
    front.ok(&["start-server"]);
    for (args, message) in [
        (
            &["has-session", "-t", "nosuch"][..],
            "can't find session: nosuch",
        ),
        (
            &["kill-window", "-t", "nosuch:3"],
            "can't find session: nosuch",
        ),
        (&["frobnicate"], "unknown command: frobnicate"),
        (
            &["new-session", "-Q"],
            "command new-session: unknown flag -Q",
        ),
        (
            &["set-option", "-g", "no-such-option", "1"],
            "invalid option: no-such-option",
        ),
        (&["new-session"], "open terminal failed: not a terminal"),
    ] {
        let out = front.run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "tmux {args:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).starts_with(message),
            "tmux {args:?} said {:?}, not {message:?}",
            stderr(&out)
        );
    }
    front.ok(&["kill-server"]);
    let out = front.run(&["has-session"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("no server running on "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sessions_windows_and_panes_map_onto_workspaces_tabs_and_panes() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&[
        "new-session",
        "-d",
        "-s",
        "work",
        "-n",
        "editor",
        "-x",
        "100",
        "-y",
        "30",
    ]);
    front.ok(&["new-session", "-d"]);
    let sessions = front.ok(&["list-sessions", "-F", "#{session_name} #{session_windows}"]);
    assert_eq!(sessions, "work 1\n0 1\n");
    // ptyd sees a workspace per session; the number tmux gave is kept.
    let ls = stdout(&ptyd.run_cli(&["ls", "--json"]));
    assert!(ls.contains("\"~0\"") && ls.contains("\"work\""), "{ls}");

    let new = front.ok(&["split-window", "-h", "-t", "work", "-P", "-F", "#{pane_id}"]);
    let panes = front.ok(&[
        "list-panes",
        "-t",
        "work:editor",
        "-F",
        "#{pane_index} #{pane_id} #{pane_width}x#{pane_height} #{?pane_active,active,}",
    ]);
    let rows: Vec<&str> = panes.lines().collect();
    assert_eq!(rows.len(), 2, "{panes}");
    assert!(
        rows[0].starts_with("0 %") && rows[0].ends_with(" 50x30 "),
        "{panes}"
    );
    assert_eq!(rows[1], format!("1 {} 49x30 active", new.trim()), "{panes}");

    let window = front.ok(&["new-window", "-t", "work", "-n", "logs", "-P"]);
    assert_eq!(window, "work:1\n");
    let windows = front.ok(&[
        "list-windows",
        "-t",
        "work",
        "-F",
        "#{window_index}:#{window_name}:#{window_active}",
    ]);
    assert_eq!(windows, "0:editor:0\n1:logs:1\n");
    front.ok(&["select-window", "-t", "work:0"]);
    let shown = front.ok(&[
        "display-message",
        "-p",
        "-t",
        "work",
        "#{window_name} #{window_panes} #{session_id}",
    ]);
    assert!(shown.starts_with("editor 2 $"), "{shown}");

    front.ok(&["kill-window", "-t", "work:logs"]);
    front.ok(&["rename-session", "-t", "work", "job"]);
    assert_eq!(front.ok(&["has-session", "-t", "job"]), "");
    front.ok(&["kill-session", "-t", "job"]);
    assert_eq!(front.ok(&["list-sessions", "-F", "#S"]), "0\n");
    // A user option set is read back.
    front.ok(&["set-option", "-g", "@agent", "claude"]);
    assert_eq!(front.ok(&["show-options", "-gv", "@agent"]), "claude\n");
}

#[test]
fn panes_the_front_makes_know_their_tmux_and_reach_it() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    let path = format!("PATH={}:/usr/bin:/bin", tmux_dir(&ptyd.dirs).display());
    front.ok(&["new-session", "-d", "-s", "agents", "-e", &path, "sh"]);
    front.ok(&[
        "send-keys",
        "-t",
        "agents",
        "echo pane=$TMUX_PANE; echo in=$(tmux display -p '#{session_name}/#{pane_id}')",
        "Enter",
    ]);
    let id = front.ok(&["display-message", "-p", "-t", "agents", "#{pane_id}"]);
    let id = id.trim();
    front.wait_screen("agents", &format!("in=agents/{id}"));
    assert!(front.screen("agents").contains(&format!("pane={id}")));
}

#[test]
fn panes_ptyd_makes_never_inherit_tmux_variables() {
    let mut dirs = Dirs::new();
    dirs.env
        .push(("TMUX".into(), "/tmp/tmux-1000/default,4242,0".into()));
    dirs.env.push(("TMUX_PANE".into(), "%7".into()));
    let ptyd = dirs.start(&unique_name("tv"));
    let id = ptyd.create_argv(&["sh", "-c", "echo \"[$TMUX][$TMUX_PANE]\"; sleep 60"]);
    let mut conn = ptyd.connect();
    let text = eventually("the pane's echo", || {
        let capture = conn.ok("pane.capture", json!({"target": id}));
        let text = capture["text"].as_str().unwrap_or("").to_string();
        text.contains(']').then_some(text)
    });
    assert!(text.contains("[][]"), "{text}");
}

/// What agent managers do, in a loop: type into a pane, read its screen,
/// list panes. The script goes on unchanged while the server is upgraded
/// and while its serving process is SIGKILLed; the panes are the same
/// processes throughout.
#[test]
fn an_agent_manager_script_survives_an_upgrade_and_a_crash() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&[
        "new-session",
        "-d",
        "-s",
        "jobs",
        "-x",
        "120",
        "-y",
        "40",
        "sh",
    ]);
    front.ok(&["split-window", "-v", "-t", "jobs", "sh"]);
    let list = || front.ok(&["list-panes", "-t", "jobs", "-F", "#{pane_id} #{pane_pid}"]);
    let before = list();
    assert_eq!(before.lines().count(), 2, "{before}");
    let mut round = 0;
    let mut step = |front: &Front| {
        round += 1;
        for target in ["jobs:0.0", "jobs:0.1"] {
            front.ok(&[
                "send-keys",
                "-t",
                target,
                &format!("echo step-$((1000+{round}))"),
                "Enter",
            ]);
            front.wait_screen(target, &format!("step-{}", 1000 + round));
        }
    };
    step(&front);

    let out = ptyd.run_cli(&["upgrade"]);
    assert!(out.status.success(), "upgrade failed: {}", stderr(&out));
    assert_eq!(list(), before, "the panes changed in the upgrade");
    step(&front);

    let serving = ptyd.serving_pid();
    // SAFETY: a plain signal to a process this test's server started.
    unsafe { libc::kill(serving, libc::SIGKILL) };
    eventually("a replacement serving process", || {
        let out = ptyd.run_cli(&["status", "--json"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        status["pid"]
            .as_i64()
            .is_some_and(|p| p != i64::from(serving))
    });
    assert_eq!(list(), before, "the panes changed in the crash");
    step(&front);
}

/// The layout commands run ptyd's layout operations: the tree `ptyd ls`
/// reports changes as tmux says it does.
#[test]
fn layout_commands_arrange_the_tab() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    let tab = || -> serde_json::Value {
        let ls: serde_json::Value =
            serde_json::from_str(&stdout(&ptyd.run_cli(&["ls", "--json"]))).unwrap();
        ls["workspaces"][0]["tabs"][0].clone()
    };
    let ids = || front.ok(&["list-panes", "-t", "lay:0", "-F", "#{pane_id}"]);
    front.ok(&["new-session", "-d", "-s", "lay", "-x", "80", "-y", "24"]);
    front.ok(&["split-window", "-h", "-t", "lay:0"]);
    front.ok(&["split-window", "-v", "-t", "lay:0"]);
    let before = ids();
    assert_eq!(before.lines().count(), 3, "{before}");

    front.ok(&["select-layout", "-t", "lay:0", "even-v"]);
    let t = tab();
    assert_eq!(t["layout"]["split"]["direction"], "vertical", "{t}");
    assert_eq!(
        t["layout"]["split"]["second"]["split"]["direction"], "vertical",
        "{t}"
    );
    assert_eq!(ids(), before, "a layout keeps the panes' order");
    let out = front.run(&["select-layout", "-t", "lay:0", "diagonal"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("invalid layout: diagonal"),
        "{}",
        stderr(&out)
    );
    front.ok(&["next-layout", "-t", "lay:0"]);
    assert_ne!(tab()["layout"], t["layout"]);
    front.ok(&["select-layout", "-t", "lay:0", "even-horizontal"]);

    // Swapped: the order changes and the source becomes active.
    let first = before.lines().next().unwrap().to_string();
    front.ok(&["swap-pane", "-s", "lay:0.0", "-t", "lay:0.2"]);
    let after = ids();
    assert_eq!(after.lines().last(), Some(first.as_str()), "{after}");
    let active = front.ok(&["display-message", "-p", "-t", "lay:0", "#{pane_id}"]);
    assert_eq!(active.trim(), first);

    // -L moves the border beside the pane; -Z toggles the zoom.
    let ratio = |t: &serde_json::Value| t["layout"]["split"]["ratio"].as_f64().unwrap();
    let was = ratio(&tab());
    front.ok(&["resize-pane", "-t", "lay:0.0", "-R", "5"]);
    assert!(ratio(&tab()) > was, "{} not above {was}", ratio(&tab()));
    front.ok(&["resize-pane", "-Z", "-t", "lay:0.1"]);
    let zoomed = front.ok(&[
        "display-message",
        "-p",
        "-t",
        "lay:0",
        "#{window_zoomed_flag}",
    ]);
    assert_eq!(zoomed.trim(), "1");
    assert!(tab()["zoom"].is_string());
    front.ok(&["resize-pane", "-Z", "-t", "lay:0.1"]);
    assert!(tab()["zoom"].is_null());

    // break-pane: a new window after the pane's own.
    let printed = front.ok(&["break-pane", "-s", "lay:0.2", "-n", "solo", "-P"]);
    assert_eq!(printed, "lay:1.0\n");
    let windows = front.ok(&[
        "list-windows",
        "-t",
        "lay",
        "-F",
        "#{window_name} #{window_panes}",
    ]);
    assert!(windows.ends_with("solo 1\n"), "{windows}");
    let out = front.run(&["break-pane", "-s", "lay:1.0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("can't break with only one pane"),
        "{}",
        stderr(&out)
    );
}
