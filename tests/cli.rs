//! The command line against a real server: the pane lifecycle through
//! `new -d`, `ls`, `send`, `wait`, `capture`, `kill` and `rm`; the exit codes
//! of `run` and `wait`; usage errors.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use util::{Ptyd, assert_exit, stderr, stdout};

fn ls_json(ptyd: &Ptyd) -> Value {
    let out = ptyd.run_cli(&["ls", "--json"]);
    assert_exit(&out, 0);
    serde_json::from_str(&stdout(&out)).expect("ls --json prints JSON")
}

#[test]
fn pane_lifecycle_through_the_cli() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["new", "-d", "-n", "work", "--", "/bin/sh"]);
    assert_exit(&out, 0);
    let id = stdout(&out).trim().to_string();
    assert_eq!(id, "p1", "new -d prints the pane id");

    let panes = ls_json(&ptyd)["panes"].clone();
    assert_eq!(panes.as_array().unwrap().len(), 1, "{panes}");
    assert_eq!(panes[0]["id"], "p1");
    assert_eq!(panes[0]["name"], "work");
    assert_eq!(panes[0]["state"], "running");
    assert_eq!(panes[0]["command"], json!({ "argv": ["/bin/sh"] }));

    // The human listing shows it too, under headers over its columns.
    let out = ptyd.run_cli(&["ls"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let header = text.lines().next().unwrap();
    let line = text.lines().find(|l| l.contains("running")).expect(&text);
    for (head, cell) in [("ID", "p1"), ("NAME", "work"), ("STATE", "running")] {
        assert_eq!(header.find(head), line.find(cell), "{head}:\n{text}");
    }
    for head in ["PID", "SIZE", "CLIENTS", "CWD", "COMMAND"] {
        assert!(header.contains(head), "{head}:\n{text}");
    }

    // Typed, then waited for in the output that follows the echoed line.
    let out = ptyd.run_cli(&[
        "send",
        "work",
        "--enter",
        "--wait-for",
        "cli-42",
        "--timeout",
        "20s",
        "echo",
        "cli-$((40+2))",
    ]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&["capture", "p1"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.trim() == "cli-42"),
        "capture:\n{text}"
    );
    assert!(
        !text.ends_with("\n\n"),
        "trailing blank lines kept:\n{text:?}"
    );
    let out = ptyd.run_cli(&["capture", "--json", "p1"]);
    assert_exit(&out, 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v["text"].as_str().unwrap().contains("cli-42"));

    // rm refuses a running pane.
    let out = ptyd.run_cli(&["rm", "p1"]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("still running"), "{}", stderr(&out));

    // An interactive sh ignores TERM, but not the HUP `kill` sends first.
    let out = ptyd.run_cli(&["kill", "work", "--grace", "200"]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&["wait", "p1", "--exit"]);
    assert_exit(&out, 129);
    let panes = ls_json(&ptyd)["panes"].clone();
    assert_eq!(panes[0]["state"], "exited");
    assert_eq!(panes[0]["exit"]["reason"], "killed");
    let out = ptyd.run_cli(&["ls"]);
    assert!(
        stdout(&out).contains("exited (killed by SIGHUP after ptyd kill)"),
        "{}",
        stdout(&out)
    );

    let out = ptyd.run_cli(&["rm", "p1"]);
    assert_exit(&out, 0);
    assert_eq!(ls_json(&ptyd)["panes"], json!([]));
    let out = ptyd.run_cli(&["ls"]);
    assert_exit(&out, 0);
    assert!(!stdout(&out).contains("work"), "{}", stdout(&out));
}

#[test]
fn wait_exit_returns_the_panes_code() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["new", "-d", "--", "sh", "-c", "exit 42"]);
    assert_exit(&out, 0);
    let id = stdout(&out).trim().to_string();
    let out = ptyd.run_cli(&["wait", &id, "--exit", "--json"]);
    assert_exit(&out, 42);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["exit"]["code"], 42, "{v}");

    let out = ptyd.run_cli(&["new", "-d", "--shell", "kill -TERM $$"]);
    assert_exit(&out, 0);
    let id = stdout(&out).trim().to_string();
    let out = ptyd.run_cli(&["wait", &id, "--exit"]);
    assert_exit(&out, 143);
}

#[test]
fn wait_timeout_exits_124() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["sleep", "1000"]);
    let started = std::time::Instant::now();
    let out = ptyd.run_cli(&["wait", &id, "--text", "never-shown", "--timeout", "300"]);
    assert_exit(&out, 124);
    assert!(started.elapsed().as_millis() >= 300);
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    let out = ptyd.run_cli(&["wait", &id, "--exit", "--timeout", "100"]);
    assert_exit(&out, 124);
}

#[test]
fn run_mirrors_output_and_exits_with_the_code() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["run", "--", "sh", "-c", "echo run-output-$((1+1)); exit 3"]);
    assert_exit(&out, 3);
    assert!(stdout(&out).contains("run-output-2"), "{}", stdout(&out));
    let out = ptyd.run_cli(&["run", "--", "true"]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&["run", "--shell", "kill -KILL $$"]);
    assert_exit(&out, 137);
    // The panes stay, exited, for inspection.
    let panes = ls_json(&ptyd)["panes"].as_array().unwrap().clone();
    assert_eq!(panes.len(), 3);
    assert!(panes.iter().all(|p| p["state"] == "exited"), "{panes:?}");
    assert_eq!(panes[0]["exit"]["code"], 3);
}

#[test]
fn run_passes_name_env_and_cwd() {
    let ptyd = Ptyd::start();
    let dir = ptyd.dirs.state.to_str().unwrap().to_string();
    let out = ptyd.run_cli(&[
        "run",
        "-n",
        "envtest",
        "-e",
        "GREETING=hi-env",
        "-c",
        &dir,
        "--size",
        "50x10",
        "--",
        "sh",
        "-c",
        "echo $GREETING; pwd; stty size; echo id=$PTYD_PANE_ID",
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("hi-env"), "{text}");
    assert!(text.contains(&dir), "{text}");
    assert!(text.contains("10 50"), "{text}");
    assert!(text.contains("id=p1"), "{text}");
    assert_eq!(ls_json(&ptyd)["panes"][0]["name"], "envtest");
}

#[test]
fn api_and_status_commands() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["api", "pane.create", r#"{"argv": ["sleep", "1000"]}"#]);
    assert_exit(&out, 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["id"], "p1");
    let out = ptyd.run_cli(&["status", "--json"]);
    assert_exit(&out, 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    // The process started is the keeper; it forked the serving process.
    assert_eq!(v["keeper"]["pid"], ptyd.pid());
    assert_ne!(v["pid"], ptyd.pid());
    assert_eq!(v["namespace"], ptyd.namespace.as_str());
    assert_eq!(v["running_panes"], 1);
    // A server error becomes exit 1 with the message.
    let out = ptyd.run_cli(&["api", "pane.capture", r#"{"target": "p9"}"#]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("p9"), "{}", stderr(&out));
}

#[test]
fn usage_and_target_errors() {
    let ptyd = Ptyd::start();
    for args in [
        &["frobnicate"][..],
        &["ls", "--bogus"],
        &["send"],
        &["send", "p1"],
        &["wait", "p1", "--timeout", "soon"],
        &["run"],
        &["api"],
        &["api", "pane.list", "{not json"],
        &["-L", "../escape", "ls"],
    ] {
        let out = ptyd.run_cli(args);
        assert_exit(&out, 2);
        assert!(!stderr(&out).is_empty(), "{args:?}: no message");
    }
    for args in [
        &["capture", "nosuch"][..],
        &["kill", "p7"],
        &["send", "p7", "x"],
        &["rm", "p7"],
        &["attach", "p7"],
    ] {
        let out = ptyd.run_cli(args);
        assert_exit(&out, 1);
        assert!(stderr(&out).contains("ptyd:"), "{args:?}: {}", stderr(&out));
    }
    let out = ptyd.run_cli(&["--help"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("attach"));
    let out = ptyd.run_cli(&["wait", "--help"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("--timeout"), "{}", stdout(&out));
}

/// A client command with no server running starts one in the background
/// (detached, in the same namespace); `ptyd stop` ends it.
#[test]
fn client_commands_start_a_server_when_none_runs() {
    let dirs = util::Dirs::new();
    let ns = util::unique_name("auto");
    let cli = |args: &[&str]| {
        let mut cmd = dirs.command(&ns);
        cmd.args(args);
        util::run_bounded(cmd, &format!("ptyd {args:?}"))
    };
    // Commands about the server itself do not start one.
    for args in [&["status"][..], &["stop"], &["save"], &["upgrade"]] {
        let out = cli(args);
        assert_exit(&out, 1);
        assert!(!dirs.socket(&ns).exists(), "{args:?} started a server");
    }

    let out = cli(&["new", "-d", "--", "sleep", "1000"]);
    assert_exit(&out, 0);
    let mut stop = dirs.command(&ns);
    stop.arg("stop");
    let guard = util::KillOnDrop::command(stop);
    assert_eq!(stdout(&out).trim(), "p1");
    let out = cli(&["status", "--json"]);
    assert_exit(&out, 0);
    let status: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let server_pid = status["pid"].as_i64().unwrap() as i32;
    let out = cli(&["stop"]);
    assert_exit(&out, 0);
    guard.disarm();
    util::eventually("the background server to exit after stop", || {
        util::process_gone(server_pid).then_some(())
    });
    assert!(!dirs.socket(&ns).exists());
}

/// Interrupting `ptyd run` kills its pane and reports that status.
#[test]
fn interrupting_run_kills_the_pane() {
    let ptyd = Ptyd::start();
    let mut events = ptyd.connect();
    events.ok("events.subscribe", json!({}));
    let mut cmd = ptyd.cli(&["run", "--", "sleep", "1000"]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let guard = util::KillOnDrop::pid(child.id() as i32);
    // Wait for the pane to exist, and for run to be attached to it.
    loop {
        let e = events.next_event();
        if e["type"] == "client.attached" {
            break;
        }
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = util::wait_child(&mut child, util::TIMEOUT).expect("run did not exit");
    guard.disarm();
    assert_eq!(status.code(), Some(143), "{status:?}");
    let pane = &ls_json(&ptyd)["panes"][0];
    assert_eq!(pane["exit"]["reason"], "killed", "{pane}");
}

#[test]
fn events_command_prints_json_lines() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["sh", "-c", "exit 6"]);
    c.wait_exit(&id);
    let mut cmd = ptyd.cli(&["events", "--since", "0"]);
    cmd.stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let _guard = util::KillOnDrop::pid(child.id() as i32);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    // The pane's own events; the tree's (its workspace and tab) between.
    let mut pane_events = lines
        .by_ref()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("pane.")));
    let first = pane_events.next().unwrap();
    let second = pane_events.next().unwrap();
    assert_eq!(first["type"], "pane.created", "{first}");
    assert_eq!(second["type"], "pane.exited", "{second}");
    assert_eq!(second["exit"]["code"], 6, "{second}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn send_request_id_and_wait_idle_from_the_cli() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");
    for _ in 0..2 {
        let out = ptyd.run_cli(&["send", &id, "--request-id", "cli-1", "--enter", "once-only"]);
        assert_exit(&out, 0);
    }
    let out = ptyd.run_cli(&["send", &id, "--enter", "after"]);
    assert_exit(&out, 0);
    // The text may be on the screen before the wait starts: --screen.
    let out = ptyd.run_cli(&[
        "wait",
        &id,
        "--text",
        "after",
        "--screen",
        "--timeout",
        "20000",
    ]);
    assert_exit(&out, 0);
    let text = c.capture(&id);
    assert_eq!(text.matches("once-only").count(), 1, "{text}");
    let out = ptyd.run_cli(&["wait", &id, "--idle", "200", "--timeout", "20000", "--json"]);
    assert_exit(&out, 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["reason"], "idle", "{v}");
}

/// `ptyd demo` runs end to end in its own namespace and shows, step by
/// step, the command line for each API call, an attach, a restore and a
/// live upgrade that keeps every process, then what to try next.
#[test]
fn demo_shows_each_step_as_a_command() {
    let dirs = util::Dirs::new();
    let mut cmd = dirs.command("unused");
    cmd.arg("demo");
    let out = util::run_bounded(cmd, "ptyd demo");
    assert_exit(&out, 0);
    let text = stdout(&out);
    for want in [
        "$ ptyd -L demo-",
        " new -d -n shell ",
        "attach shell --read-only",
        "first frame: the redraw",
        "upgrade --mode restore",
        "--- ptyd: restored",
        "(same processes)",
        "no gap, no repeat",
        "== what to try next",
    ] {
        assert!(text.contains(want), "no {want:?} in\n{text}");
    }
}

/// a reader that went away (`ptyd status --json | head
/// -c 5`) ends a command quietly, exit 141 as SIGPIPE would, never with a
/// panic message; an error about the runtime directory is printed once, as
/// one line.
#[test]
fn a_closed_stdout_ends_commands_quietly() {
    let ptyd = Ptyd::start();
    ptyd.create_argv(&["sleep", "1000"]);
    for args in [
        &["status", "--json"][..],
        &["ls"],
        &["ls", "--json"],
        &["--help"],
        &["completions", "bash"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let stderr_file = ptyd.dirs.path("err").join("stderr");
        let mut child = ptyd
            .cli(args)
            .stdout(writer)
            .stderr(std::fs::File::create(&stderr_file).unwrap())
            .spawn()
            .unwrap();
        let status = util::wait_child(&mut child, util::TIMEOUT).expect("the command hung");
        let err = std::fs::read_to_string(&stderr_file).unwrap();
        assert_eq!(status.code(), Some(141), "{args:?}: {status:?} {err}");
        assert_eq!(err, "", "{args:?}");
    }

    let dirs = util::Dirs::new();
    let runtime = dirs.runtime.join("ptyd");
    std::fs::create_dir_all(&runtime).unwrap();
    util::set_mode(&runtime, 0o777);
    let mut cmd = dirs.command("default");
    cmd.arg("ls");
    let out = util::run_bounded(cmd, "ptyd ls in an open runtime directory");
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert_eq!(err.matches("chmod 700").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.ends_with('\n'), "{err:?}");
}

/// `ptyd rename`: the new name is a target at once, announced, refused
/// when another pane has it, and saved with the snapshot.
#[test]
fn rename_names_a_pane_for_targets_events_and_the_snapshot() {
    let ptyd = Ptyd::start();
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    let id = ptyd.create_argv(&["sleep", "1000"]);
    let other = ptyd.create_argv(&["sleep", "1000"]);
    assert_exit(&ptyd.run_cli(&["rename", &id, "build"]), 0);
    let event = ev.wait_event("pane.renamed", &id);
    assert_eq!(event["name"], "build", "{event}");
    let out = ptyd.run_cli(&["rename", "build", "builder", "--json"]);
    assert_exit(&out, 0);
    let info: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (info["id"].as_str(), info["name"].as_str()),
        (Some(id.as_str()), Some("builder"))
    );

    let out = ptyd.run_cli(&["rename", &other, "builder"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("already used by pane"), "{out:?}");
    let out = ptyd.run_cli(&["rename", &other]);
    assert_exit(&out, 2);

    assert_exit(&ptyd.run_cli(&["save"]), 0);
    let snapshot = std::fs::read_to_string(ptyd.dirs.session_path(&ptyd.namespace)).unwrap();
    let saved: Value = serde_json::from_str(&snapshot).unwrap();
    let names: Vec<&str> = saved["panes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["builder"], "{saved}");
}

#[test]
fn tmux_command_names_point_at_ptyd_commands() {
    let dirs = util::Dirs::new();
    for (typed, ours) in [
        ("send-keys", "`ptyd send`"),
        ("kill-server", "`ptyd stop`"),
        ("splitw", "`ptyd split`"),
        ("capture-pane", "`ptyd capture`"),
        ("list-panes", "`ptyd ls`"),
    ] {
        let mut cmd = dirs.command("t");
        cmd.arg(typed);
        let out = util::run_bounded(cmd, typed);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains(&format!("tmux's {typed} is {ours}")), "{err}");
        // The message says what to do: no pointer to the help as well.
        assert!(!err.contains("Try `ptyd --help`"), "{err}");
    }
    // A name nothing resembles still gets the pointer.
    let mut cmd = dirs.command("t");
    cmd.arg("zzqqxx");
    let out = util::run_bounded(cmd, "an unknown command");
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("Try `ptyd --help`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn status_and_stop_without_a_server_create_nothing_and_say_so() {
    let dirs = util::Dirs::new();
    let ns = util::unique_name("unused");
    for command in ["status", "stop"] {
        let mut cmd = dirs.command(&ns);
        cmd.arg(command);
        let out = util::run_bounded(cmd, command);
        assert_exit(&out, 1);
        let err = stderr(&out);
        assert!(err.contains("no ptyd server"), "{command}: {err}");
        if command == "stop" {
            assert!(err.contains("nothing to stop"), "{err}");
            assert!(!err.contains("start one"), "{err}");
        }
        assert!(!dirs.ns_dir(&ns).exists(), "{command} made the runtime dir");
        assert!(
            !dirs.state_dir(&ns).exists(),
            "{command} made the state dir"
        );
    }
}

#[test]
fn upgrade_errors_name_what_was_wrong_once() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["upgrade", "--binary", "/nonexistent/ptyd"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("no binary at /nonexistent/ptyd; check the path given to --binary"),
        "{err}"
    );
    assert!(!err.contains("pass --binary"), "{err}");
    let out = ptyd.run_cli(&["upgrade", "--binary", "/bin/true"]);
    assert!(!out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("did not answer `version --json`"), "{err}");
    assert_eq!(err.matches("nothing was").count(), 1, "{err}");
}

/// `ptyd stop --forget` in a terminal of its own, answering `answer` to
/// its question: its exit code and what it wrote.
fn forget_in_pty(ptyd: &Ptyd, answer: &str) -> (Option<i32>, String) {
    use std::io::{Read, Write};
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = || std::process::Stdio::from(pty.slave.try_clone().unwrap());
    let mut cmd = ptyd.cli(&["stop", "--forget"]);
    cmd.stdin(slave()).stdout(slave()).stderr(slave());
    let mut child = util::KillOnDrop::child(cmd.spawn().unwrap());
    // Only the child holds the terminal now: its end is the master's EIO.
    drop(cmd);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("[y/N]") {
        match master.read(&mut buf) {
            Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => panic!("no question: {}", String::from_utf8_lossy(&seen)),
        }
    }
    master.write_all(answer.as_bytes()).unwrap();
    let status = util::wait_child(child.as_child_mut(), util::TIMEOUT).expect("stop --forget");
    // What it wrote after the answer (EIO once it and the echo are read).
    while let Ok(n @ 1..) = master.read(&mut buf) {
        seen.extend_from_slice(&buf[..n]);
    }
    (status.code(), String::from_utf8_lossy(&seen).into_owned())
}

#[test]
fn stop_forget_ends_the_namespace_for_good_once_confirmed() {
    let mut ptyd = Ptyd::start();
    ptyd.create_argv(&["sleep", "1000"]);
    ptyd.connect().save();
    let session = ptyd.dirs.session_path(&ptyd.namespace);
    assert!(session.exists());

    // Without a terminal to ask on, and without --yes: refused.
    let mut cmd = ptyd.cli(&["stop", "--forget"]);
    cmd.stdin(std::process::Stdio::null());
    let out = util::run_bounded(cmd, "stop --forget");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    // Asked, and not confirmed.
    let (code, text) = forget_in_pty(&ptyd, "n\n");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("nothing was changed"), "{text}");
    // Nothing changed either way.
    assert!(session.exists());
    assert_eq!(ptyd.status_json()["panes"], 1);

    // Confirmed: the server stops, the snapshot goes.
    let (code, text) = forget_in_pty(&ptyd, "y\n");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("snapshot") && text.contains("removed"),
        "{text}"
    );
    assert!(ptyd.wait_exit().success(), "{}", ptyd.stderr());
    assert!(!session.exists());
    assert!(
        !ptyd
            .dirs
            .state_dir(&ptyd.namespace)
            .join("history")
            .exists()
    );
    // The next command's server starts empty.
    assert_eq!(ls_json(&ptyd)["panes"], json!([]));
    // --yes, without a terminal, with no server running: the new
    // server's (empty) snapshot goes as well.
    let mut cmd = ptyd.cli(&["stop", "--forget", "--yes"]);
    cmd.stdin(std::process::Stdio::null());
    assert_exit(&util::run_bounded(cmd, "stop --forget --yes"), 0);
    assert!(!session.exists());
    let mut cmd = ptyd.cli(&["stop", "--forget", "--yes"]);
    cmd.stdin(std::process::Stdio::null());
    assert_exit(&util::run_bounded(cmd, "stop --forget --yes again"), 0);
}

/// `row-N ` and words up to 150 characters: two rows of an 80-column
/// pane, cut mid-word or at a blank.
fn long_row(n: usize) -> String {
    let mut s = format!("row-{n} ");
    while s.len() < 150 {
        s.push_str("abcdefghij ");
    }
    s.trim_end().to_string()
}

#[test]
fn a_capture_longer_than_one_reply_comes_whole_in_parts() {
    let dirs = util::Dirs::new();
    dirs.write_config("scrollback_lines = 100000\n");
    let ptyd = dirs.start(&util::unique_name("cap"));
    let pane = ptyd.create(json!({
        "argv": ["sh", "-c", "awk 'BEGIN { for (i = 1; i <= 20000; i++) { s = sprintf(\"row-%d \", i); while (length(s) < 150) s = s \"abcdefghij \"; print s } print \"capture-end\" }'; exec sleep 1000"],
        "cols": 80,
        "rows": 24,
    }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut c = ptyd.connect();
    c.wait_text(&pane, "capture-end");
    // One reply cannot hold it: what the CLI works around.
    let whole = c.request(
        "pane.capture",
        json!({ "target": pane, "start": -100000, "join": true }),
    );
    assert_eq!(whole["error"]["code"], "too_large", "{whole}");

    let out = ptyd.run_cli(&["capture", &pane, "-J", "-S", "-100000"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("row-")).collect();
    assert_eq!(rows.len(), 20000, "joined lines: {}", rows.len());
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(*row, long_row(i + 1), "line {i} of the joined capture");
    }
    assert!(
        text.ends_with("capture-end\n"),
        "{:?}",
        &text[text.len() - 200..]
    );

    let out = ptyd.run_cli(&["capture", &pane, "-S", "-100000"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let cut = text.lines().filter(|l| !l.is_empty()).count();
    // Each line two rows, and the end marker.
    assert_eq!(cut, 40001, "rows captured");
}
