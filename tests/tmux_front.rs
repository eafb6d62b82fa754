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
/// A control-mode client (`tmux -C`) driven over pipes, as libtmux and
/// terminal emulators drive one: command lines in, framed answers and
/// notifications out, read line by line as they come.
struct Control {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Control {
    fn start(front: &Front, args: &[&str]) -> Control {
        use std::io::BufRead;
        let mut child = front
            .command(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting tmux -C");
        let stdin = child.stdin.take();
        let mut out = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match out.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Control {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .expect("writing to tmux -C");
        stdin.flush().expect("flushing tmux -C's stdin");
    }

    /// The next line (without its line end); fails after `util::TIMEOUT`.
    fn line(&mut self) -> String {
        let line = self
            .lines
            .recv_timeout(util::TIMEOUT)
            .expect("tmux -C printed no further line");
        String::from_utf8_lossy(&line)
            .trim_end_matches('\n')
            .to_string()
    }

    /// Reads lines up to the first `keep` accepts; the lines before it.
    fn until(&mut self, what: &str, keep: impl Fn(&str) -> bool) -> (String, Vec<String>) {
        let mut before = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(util::TIMEOUT)
                .unwrap_or_else(|_| panic!("no {what} from tmux -C; it printed {before:#?}"));
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\n')
                .to_string();
            if keep(&line) {
                return (line, before);
            }
            before.push(line);
        }
    }

    /// One command's block: the lines between `%begin` and its `%end` (Ok)
    /// or `%error` (Err), checking the guard lines carry the same time,
    /// number and flags.
    fn block(&mut self, flags: &str) -> Result<Vec<String>, Vec<String>> {
        let (begin, _) = self.until("%begin", |l| l.starts_with("%begin "));
        let guard = begin.strip_prefix("%begin ").expect("a %begin line");
        assert!(guard.ends_with(&format!(" {flags}")), "{begin}");
        let mut body = Vec::new();
        loop {
            let line = self.line();
            if line == format!("%end {guard}") {
                return Ok(body);
            }
            if line == format!("%error {guard}") {
                return Err(body);
            }
            assert!(
                !line.starts_with("%end") && !line.starts_with("%error"),
                "{line} closes {begin}"
            );
            body.push(line);
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to end; its exit status.
    fn wait(&mut self) -> std::process::ExitStatus {
        eventually("tmux -C to exit", || self.child.try_wait().ok().flatten())
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn control_mode_frames_commands_streams_output_and_is_detached() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "ctl", "sh"]);
    let session_id = front.ok(&["display-message", "-p", "-t", "ctl", "#{session_id}"]);
    let mut ctl = Control::start(&front, &["-C", "attach-session", "-t", "ctl"]);
    // The command line's command, framed with flags 0, then the session.
    assert_eq!(ctl.block("0"), Ok(vec![]));
    assert_eq!(
        ctl.line(),
        format!("%session-changed {} ctl", session_id.trim())
    );
    // It is a client of the server, named as tmux names pipe clients.
    let pid = ctl.pid();
    let listing = format!("{pid} client-{pid} ctl 1");
    eventually("the control client in list-clients", || {
        let clients = front.ok(&[
            "list-clients",
            "-F",
            "#{client_pid} #{client_name} #{client_session} #{client_control_mode}",
        ]);
        if clients.trim() == listing {
            Ok(())
        } else {
            Err(clients)
        }
    });

    ctl.send("display-message -p 'hello #{session_name} ␞'");
    assert_eq!(ctl.block("1"), Ok(vec!["hello ctl ␞".to_string()]));
    ctl.send("nosuch -x");
    assert_eq!(
        ctl.block("1"),
        Err(vec!["parse error: unknown command: nosuch".to_string()])
    );
    ctl.send("has-session -t nosuch");
    assert_eq!(
        ctl.block("1"),
        Err(vec!["can't find session: nosuch".to_string()])
    );
    // Commands of one line run in a block each.
    ctl.send("display -p one ; display -p two");
    assert_eq!(ctl.block("1"), Ok(vec!["one".to_string()]));
    assert_eq!(ctl.block("1"), Ok(vec!["two".to_string()]));

    // A pane's output, escaped as tmux escapes it.
    let pane = front.ok(&["display-message", "-p", "-t", "ctl", "#{pane_id}"]);
    ctl.send("send-keys 'echo out-$((6*7))' Enter");
    assert_eq!(ctl.block("1"), Ok(vec![]));
    let prefix = format!("%output {} ", pane.trim());
    let (output, _) = ctl.until("the pane's output", |l| {
        l.starts_with(&prefix) && l.contains("out-42\\015\\012")
    });
    assert!(!output.contains('\r'), "{output}");

    // Windows made and renamed, through this client or another.
    ctl.send("new-window -d -n extra -P -F '#{window_id}'");
    let window = ctl.block("1").expect("new-window succeeds");
    let window = window[0].clone();
    ctl.until("%window-add", |l| l == format!("%window-add {window}"));
    ctl.send(&format!("rename-window -t {window} renamed"));
    assert_eq!(ctl.block("1"), Ok(vec![]));
    ctl.until("%window-renamed", |l| {
        l == format!("%window-renamed {window} renamed")
    });
    front.ok(&["kill-window", "-t", &window]);
    ctl.until("%window-close", |l| l == format!("%window-close {window}"));

    // Detached by another process: `%exit`, and no client is left.
    front.ok(&["detach-client", "-s", "ctl"]);
    ctl.until("%exit", |l| l == "%exit");
    assert!(ctl.wait().success());
    assert_eq!(front.ok(&["list-clients"]), "");
}

#[test]
fn control_mode_ends_on_an_empty_line_and_wraps_for_terminals() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "cc", "sh"]);
    let mut ctl = Control::start(&front, &["-CC", "attach", "-t", "cc"]);
    let (first, _) = ctl.until("%begin", |l| l.contains("%begin "));
    assert!(first.starts_with("\x1bP1000p%begin "), "{first:?}");
    ctl.until("%session-changed", |l| l.starts_with("%session-changed "));
    // refresh-client -C gives the client its size, as list-clients shows.
    ctl.send("refresh-client -C 100x30");
    assert_eq!(ctl.block("1"), Ok(vec![]));
    ctl.send("list-clients -F '#{client_width}x#{client_height} #{client_flags}'");
    assert_eq!(
        ctl.block("1"),
        Ok(vec![
            "100x30 attached,focused,control-mode,UTF-8".to_string()
        ])
    );
    ctl.send("");
    let (last, _) = ctl.until("%exit", |l| l.starts_with("%exit"));
    assert_eq!(last, "%exit");
    let end = ctl
        .lines
        .recv_timeout(util::TIMEOUT)
        .expect("the closing ST after %exit");
    assert_eq!(end, b"\x1b\\");
    assert!(ctl.wait().success());
    // A control client without a session runs its commands and ends.
    let out = front.run(&["-C", "list-sessions", "-F", "#S"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("%begin ") && lines[0].ends_with(" 0"),
        "{text}"
    );
    assert_eq!(lines[1], "cc", "{text}");
    assert_eq!(lines[2], lines[0].replacen("%begin", "%end", 1), "{text}");
    assert_eq!(lines[3], "%exit", "{text}");
}

/// set-environment and show-environment as tmux answers them, and the
/// variables reach the panes made afterwards in that session (globals
/// under the session's, `-r` removed), never the server's files.
#[test]
fn session_environment_is_shown_and_given_to_new_panes() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "env", "-e", "FROM_E=1", "sh"]);
    front.ok(&["new-session", "-d", "-s", "other", "sh"]);
    front.ok(&["set-environment", "-t", "env", "JOB", "build 7"]);
    front.ok(&["set-environment", "-g", "SHARED", "global"]);
    front.ok(&["set-environment", "-g", "JOB", "overridden"]);
    front.ok(&["set-environment", "-t", "env", "-r", "SHARED"]);
    front.ok(&["set-environment", "-t", "env", "-h", "SECRET", "s3cr3t"]);
    assert_eq!(
        front.ok(&["show-environment", "-t", "env"]),
        "FROM_E=1\nJOB=build 7\n-SHARED\n"
    );
    assert_eq!(
        front.ok(&["show-environment", "-t", "env", "-s", "JOB"]),
        "JOB=\"build 7\"; export JOB;\n"
    );
    assert_eq!(
        front.ok(&["show-environment", "-t", "env", "-h"]),
        "SECRET=s3cr3t\n"
    );
    let out = front.run(&["show-environment", "-t", "other", "JOB"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "unknown variable: JOB\n");

    // Kept in memory only: after a save, no file of the server's holds
    // a value no pane was made with yet.
    let saved = ptyd.run_cli(&["save"]);
    assert!(saved.status.success(), "{}", stderr(&saved));
    for dir in [&ptyd.dirs.runtime, &ptyd.dirs.state] {
        for file in util::files_under(dir) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(
                !bytes.windows(6).any(|w| w == b"s3cr3t"),
                "{} holds a variable's value",
                file.display()
            );
        }
    }

    front.ok(&["new-window", "-t", "env", "-n", "probe", "sh"]);
    front.ok(&[
        "send-keys",
        "-t",
        "env:probe",
        "echo \"[$JOB][$SHARED][$SECRET][$FROM_E]\"",
        "Enter",
    ]);
    front.wait_screen("env:probe", "[build 7][][s3cr3t][1]");
    front.ok(&["new-window", "-t", "other", "-n", "probe", "sh"]);
    front.ok(&[
        "send-keys",
        "-t",
        "other:probe",
        "echo \"<$JOB><$SHARED>\"",
        "Enter",
    ]);
    front.wait_screen("other:probe", "<overridden><global>");

    front.ok(&["set-environment", "-t", "env", "-u", "JOB"]);
    assert_eq!(
        front.ok(&["show-environment", "-t", "env"]),
        "FROM_E=1\n-SHARED\n"
    );
}

/// wait-for as scripts use it: a pane signals the channel when its job is
/// done and the script's `wait-for` returns then; a signal sent before
/// anyone waits is kept for the next wait; `-L`/`-U` lock a channel.
#[test]
fn wait_for_channels_signal_and_lock_between_processes() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    let path = format!("PATH={}:/usr/bin:/bin", tmux_dir(&ptyd.dirs).display());
    front.ok(&["new-session", "-d", "-s", "job", "-e", &path, "sh"]);
    let mut waiter = front
        .command(&["wait-for", "job-done"])
        .spawn()
        .expect("starting wait-for");
    // The waiter is parked on its FIFO before the pane signals.
    let dir = ptyd.dirs.ns_dir(&ptyd.namespace).join("tmux-wait");
    eventually("the waiter's FIFO", || {
        std::fs::read_dir(&dir)
            .map(|d| d.flatten().count() > 0)
            .unwrap_or(false)
    });
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "wait-for returned early"
    );
    front.ok(&[
        "send-keys",
        "-t",
        "job",
        "echo building; tmux wait-for -S job-done",
        "Enter",
    ]);
    let status = eventually("wait-for to return", || waiter.try_wait().ok().flatten());
    assert!(status.success());
    // Signalled first, waited for after: returns at once, once.
    front.ok(&["wait-for", "-S", "early"]);
    front.ok(&["wait-for", "early"]);
    let out = front.run(&["wait-for", "-U", "free"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "channel free not locked\n");
    front.ok(&["wait-for", "-L", "lk"]);
    let mut second = front
        .command(&["wait-for", "-L", "lk"])
        .spawn()
        .expect("starting wait-for -L");
    eventually("the second locker's FIFO", || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains(".locker."))
            })
            .unwrap_or(false)
    });
    assert!(
        second.try_wait().unwrap().is_none(),
        "the lock was taken twice"
    );
    front.ok(&["wait-for", "-U", "lk"]);
    let status = eventually("the second locker to get the lock", || {
        second.try_wait().ok().flatten()
    });
    assert!(status.success());
    front.ok(&["wait-for", "-U", "lk"]);
}

/// libtmux's Pane methods for tmux's modes: each checks its pane and
/// draws nothing (no tmux client screen), so keys sent after reach the
/// program; send-prefix types the session's prefix key.
#[test]
fn mode_commands_check_their_pane_and_send_prefix_types_the_prefix() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "m", "cat -v"]);
    for args in [
        &["copy-mode", "-t", "m"][..],
        &["copy-mode", "-s", "m:0.0", "-t", "m"],
        &["clock-mode", "-t", "m"],
        &["choose-buffer", "-t", "m"],
        &["choose-client", "-t", "m"],
        &[
            "choose-tree",
            "-Z",
            "-r",
            "-F",
            "#{session_name}",
            "-f",
            "#{?session_attached,1,0}",
            "-O",
            "name",
            "-t",
            "m",
        ],
        &["customize-mode", "-t", "m"],
        &["find-window", "-t", "m", "sh"],
    ] {
        assert_eq!(front.ok(args), "", "{args:?}");
    }
    let out = front.run(&["copy-mode", "-t", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "can't find pane: nosuch\n");
    assert_eq!(
        front.ok(&["display-message", "-p", "-t", "m", "#{pane_in_mode}"]),
        "0\n"
    );
    front.ok(&["send-prefix", "-t", "m"]);
    front.ok(&["set-option", "-t", "m", "prefix", "C-a"]);
    front.ok(&["send-prefix", "-t", "m"]);
    front.ok(&["send-keys", "-t", "m", "Enter"]);
    front.wait_screen("m", "^B^A");
    assert_eq!(
        front.ok(&["show-prompt-history", "-T", "command"]),
        "History for command:\n\n"
    );
    front.ok(&["clear-prompt-history"]);
    let me = front.ok(&["server-access", "-l"]);
    assert!(me.ends_with(" (W)\n"), "{me}");
}

/// source-file runs a file's commands as a config's (a line ending in
/// `\` goes on), `-q` skips a missing file, `-n` only parses.
#[test]
fn source_file_runs_a_files_commands() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "src"]);
    let conf = ptyd.dirs.path("conf").join("a.conf");
    std::fs::write(
        &conf,
        "# a config\nset -g @source_test_opt yes\nnew-window -d \\\n  -n fromfile\n",
    )
    .unwrap();
    let path = conf.display().to_string();
    front.ok(&["source-file", &path]);
    assert_eq!(
        front.ok(&["show-options", "-gv", "@source_test_opt"]),
        "yes\n"
    );
    let windows = front.ok(&["list-windows", "-t", "src", "-F", "#{window_name}"]);
    assert_eq!(windows.lines().nth(1), Some("fromfile"), "{windows}");
    front.ok(&["source-file", "-q", "/nonexistent/path.conf"]);
    let out = front.run(&["source-file", "/nonexistent/path.conf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("/nonexistent/path.conf: "),
        "{}",
        stderr(&out)
    );
    std::fs::write(&conf, "set -g @parsed_only yes\n").unwrap();
    front.ok(&["source-file", "-n", &path]);
    assert_eq!(front.ok(&["show-options", "-gv", "@parsed_only"]), "");
}

/// last-window, previous-window, next-window, last-pane and `-l` go
/// back where the front moved the focus from; `-d` leaves it alone.
#[test]
fn last_windows_and_panes_follow_the_focus() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    let active = || {
        front.ok(&[
            "display-message",
            "-p",
            "-t",
            "f",
            "#{window_id} #{pane_id}",
        ])
    };
    front.ok(&["new-session", "-d", "-s", "f"]);
    let first = front.ok(&["new-window", "-t", "f", "-P", "-F", "#{window_id}"]);
    let second = front.ok(&["new-window", "-t", "f", "-P", "-F", "#{window_id}"]);
    assert!(active().starts_with(second.trim()), "{}", active());
    let hidden = front.ok(&["new-window", "-d", "-t", "f", "-P", "-F", "#{window_id}"]);
    assert!(
        active().starts_with(second.trim()),
        "-d moved: {}",
        active()
    );
    front.ok(&["last-window", "-t", "f"]);
    assert!(active().starts_with(first.trim()), "{}", active());
    front.ok(&["next-window", "-t", "f"]);
    assert!(active().starts_with(second.trim()), "{}", active());
    front.ok(&["next-window", "-t", "f"]);
    assert!(active().starts_with(hidden.trim()), "{}", active());
    front.ok(&["previous-window", "-t", "f"]);
    front.ok(&["select-window", "-l", "-t", "f"]);
    assert!(active().starts_with(hidden.trim()), "{}", active());

    let old = front.ok(&["display-message", "-p", "-t", "f", "#{pane_id}"]);
    let new = front.ok(&["split-window", "-d", "-t", "f", "-P", "-F", "#{pane_id}"]);
    assert!(
        active().ends_with(old.as_str()),
        "split -d moved: {}",
        active()
    );
    front.ok(&["select-pane", "-t", new.trim()]);
    front.ok(&["last-pane", "-t", "f"]);
    assert!(active().ends_with(old.as_str()), "{}", active());
    front.ok(&["select-pane", "-l", "-t", "f"]);
    assert!(active().ends_with(new.as_str()), "{}", active());
    let out = front.run(&["new-session", "-d", "-s", "g", ";", "last-pane", "-t", "g"]);
    assert_eq!(stderr(&out), "no last pane\n");
    assert_eq!(
        front.ok(&[
            "list-sessions",
            "-f",
            "#{==:#S,f}",
            "-F",
            "#{active_window_index} #{last_window_index}"
        ]),
        "3 3\n"
    );
}

/// Key tables are kept as tmux keeps them: its defaults, and what is
/// bound and unbound, printed as its list-keys prints them.
#[test]
fn key_bindings_are_kept_and_listed() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "k"]);
    let all = front.ok(&["list-keys"]);
    assert!(
        all.lines()
            .any(|l| l == "bind-key    -T prefix       c                    new-window"),
        "{all}"
    );
    front.ok(&["bind-key", "-T", "root", "F12", "display-message", "bound"]);
    let root = front.ok(&["list-keys", "-T", "root"]);
    assert!(
        root.lines().any(
            |l| l.starts_with("bind-key -T root F12 ") && l.ends_with(" display-message bound")
        ),
        "{root}"
    );
    // One argument is a command string.
    front.ok(&["bind-key", "-n", "F11", "display-message -p 'a b'"]);
    let root = front.ok(&["list-keys", "-T", "root", "F11"]);
    assert!(
        root.ends_with(" F11 display-message -p \"a b\"\n"),
        "{root}"
    );
    front.ok(&["unbind-key", "-T", "root", "F12"]);
    assert!(!front.ok(&["list-keys", "-T", "root"]).contains("F12"));
    let out = front.run(&["list-keys", "-T", "nosuch"]);
    assert_eq!(stderr(&out), "table nosuch doesn't exist\n");
}

/// rotate-window moves every pane one place; a bare select-layout
/// applies the last named layout again.
#[test]
fn rotate_window_and_a_bare_select_layout() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "r", "-x", "80", "-y", "40"]);
    front.ok(&["split-window", "-t", "r"]);
    front.ok(&["split-window", "-t", "r"]);
    let order = || front.ok(&["list-panes", "-t", "r", "-F", "#{pane_id}"]);
    let before: Vec<String> = order().lines().map(str::to_string).collect();
    front.ok(&["rotate-window", "-t", "r"]);
    let after: Vec<String> = order().lines().map(str::to_string).collect();
    assert_eq!(
        after,
        [before[1].clone(), before[2].clone(), before[0].clone()],
        "{before:?}"
    );
    front.ok(&["rotate-window", "-D", "-t", "r"]);
    assert_eq!(order().lines().collect::<Vec<_>>(), before);

    let layout = || front.ok(&["display-message", "-p", "-t", "r", "#{window_layout}"]);
    let split = layout();
    front.ok(&["select-layout", "-t", "r"]);
    assert_eq!(
        layout(),
        split,
        "a bare select-layout with none given changed it"
    );
    front.ok(&["select-layout", "-t", "r", "even-horizontal"]);
    let side_by_side = layout();
    // tmux's layout string: a checksum, then the panes side by side.
    assert!(
        side_by_side.get(4..5) == Some(",") && side_by_side.contains('{'),
        "{side_by_side}"
    );
    front.ok(&["next-layout", "-t", "r"]);
    assert_ne!(layout(), side_by_side);
    front.ok(&["select-layout", "-t", "r"]);
    assert_eq!(layout(), side_by_side, "the layout was not applied again");

    // An unnamed broken-out window is named after what runs in it (its
    // words exec'd, so the pane runs sleep itself).
    let sleeper = front.ok(&[
        "split-window",
        "-t",
        "r",
        "-P",
        "-F",
        "#{pane_id}",
        "sleep",
        "100",
    ]);
    front.ok(&["break-pane", "-s", sleeper.trim()]);
    assert_eq!(
        front.ok(&[
            "display-message",
            "-p",
            "-t",
            sleeper.trim(),
            "#{window_name}"
        ]),
        "sleep\n"
    );
}

/// A server the front starts reads `-f`'s config; option values are
/// checked as tmux checks them; array options show every element;
/// list-buffers filters with a format.
#[test]
fn config_option_values_arrays_and_buffer_filters() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    // The servers this test starts through the front are not `ptyd`'s
    // child; whichever runs at the end is stopped, even after a failure.
    let _last_server = util::KillOnDrop::command(front.command(&["kill-server"]));
    let conf = ptyd.dirs.path("conf").join("tmux.conf");
    // A bad line is skipped, as tmux skips it.
    std::fs::write(
        &conf,
        "set -g status off\nno-such-command\nrun-shell 'echo from-config'\nset -g @from_config yes\n",
    )
    .unwrap();
    let conf = conf.display().to_string();
    // Only a server the front starts reads a config.
    front.ok(&["kill-server"]);
    // libtmux passes -f to every command; only the start reads it. The
    // config's output is not the command's: -P prints only the session.
    assert_eq!(
        front.ok(&[
            "-f",
            &conf,
            "new-session",
            "-d",
            "-P",
            "-F",
            "#S",
            "-s",
            "o"
        ]),
        "o\n"
    );
    front.ok(&["set-option", "-g", "@from_config", "changed"]);
    front.ok(&["-f", &conf, "new-session", "-d", "-s", "o2"]);
    assert_eq!(front.ok(&["show-options", "-g", "status"]), "status off\n");
    assert_eq!(
        front.ok(&["show-options", "-gv", "@from_config"]),
        "changed\n"
    );
    front.ok(&["kill-server"]);
    // Without -f, tmux's own ~/.tmux.conf; base-index numbers the windows.
    std::fs::write(ptyd.dirs.home.join(".tmux.conf"), "set -g base-index 1\n").unwrap();
    assert_eq!(
        front.ok(&[
            "new-session",
            "-d",
            "-s",
            "o",
            ";",
            "list-windows",
            "-F",
            "#I"
        ]),
        "1\n"
    );
    // The options set on the server before went with it.
    assert_eq!(front.ok(&["show-options", "-gv", "@from_config"]), "");

    for (args, error) in [
        (
            &["set-option", "aggressive-resize", "invalid"][..],
            "bad value: invalid\n",
        ),
        (
            &["set-option", "-g", "history-limit", "lots"],
            "value is invalid: lots\n",
        ),
        (
            &["set-option", "status-style", "invalid-style"],
            "invalid style: invalid-style\n",
        ),
    ] {
        let out = front.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&out), error, "{args:?}");
    }
    front.ok(&[
        "set-option",
        "status-style",
        "fg=colour240,bg=#525252,bold,underscore",
    ]);
    front.ok(&[
        "set-option",
        "status-style",
        "fg=#{?pane_in_mode,red,green}",
    ]);
    assert_eq!(
        front.ok(&["show-options", "-v", "status-style"]),
        "fg=#{?pane_in_mode,red,green}\n"
    );

    let aliases = front.ok(&["show-options", "-s", "command-alias"]);
    assert!(
        aliases.starts_with("command-alias[0] split-pane=split-window\ncommand-alias[1] "),
        "{aliases}"
    );
    assert_eq!(aliases.lines().count(), 6, "{aliases}");

    front.ok(&["set-buffer", "-b", "match_a", "keep"]);
    front.ok(&["set-buffer", "-b", "miss_b", "drop"]);
    assert_eq!(
        front.ok(&[
            "list-buffers",
            "-F",
            "#{buffer_name}:#{buffer_size}",
            "-f",
            "#{m:match_*,#{buffer_name}}"
        ]),
        "match_a:4\n"
    );
}

/// synchronize-panes sends keys to every synchronized pane of the window;
/// `select-pane -d` turns a pane's input off until `-e`.
#[test]
fn synchronized_panes_and_input_off() {
    let ptyd = Ptyd::start();
    let front = Front::new(&ptyd.dirs, &ptyd.namespace);
    front.ok(&["new-session", "-d", "-s", "y", "cat"]);
    front.ok(&["split-window", "-t", "y", "cat"]);
    front.ok(&["set-option", "-w", "-t", "y", "synchronize-panes", "on"]);
    assert_eq!(
        front.ok(&[
            "display-message",
            "-p",
            "-t",
            "y:0.0",
            "#{pane_synchronized}"
        ]),
        "1\n"
    );
    front.ok(&["send-keys", "-t", "y:0.1", "both-see-this", "Enter"]);
    front.wait_screen("y:0.0", "both-see-this");
    front.wait_screen("y:0.1", "both-see-this");

    front.ok(&["set-option", "-w", "-t", "y", "synchronize-panes", "off"]);
    front.ok(&["select-pane", "-d", "-t", "y:0.0"]);
    assert_eq!(
        front.ok(&["display-message", "-p", "-t", "y:0.0", "#{pane_input_off}"]),
        "1\n"
    );
    front.ok(&["send-keys", "-t", "y:0.0", "dropped", "Enter"]);
    front.ok(&["select-pane", "-e", "-t", "y:0.0"]);
    front.ok(&["send-keys", "-t", "y:0.0", "typed", "Enter"]);
    front.wait_screen("y:0.0", "typed");
    assert!(!front.screen("y:0.0").contains("dropped"));
}
