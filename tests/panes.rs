//! Pane lifecycle through the socket API: create, list, input, capture,
//! wait, kill, remove; exit statuses as reported; killing a whole process
//! tree; input acknowledgement and `request_id` deduplication.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{KillOnDrop, Ptyd, eventually, proc_stat_field, process_gone};

#[test]
fn create_list_input_capture_kill_remove() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok(
        "pane.create",
        json!({ "name": "shell", "argv": ["/bin/sh"], "cols": 90, "rows": 20 }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    assert_eq!(info["name"], "shell");
    assert_eq!(info["state"], "running");
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(90), Some(20))
    );
    let pid = info["pid"].as_i64().unwrap() as i32;
    assert!(!process_gone(pid), "pane process {pid} is not running");

    let listed = c.pane_info(&id).expect("the new pane is listed");
    assert_eq!(listed["pid"], info["pid"]);
    assert_eq!(listed["state"], "running");

    // The arithmetic proves the shell ran the line: the typed text itself
    // (echoed by the tty) does not contain the result.
    let ack = c.input(&id, "echo result-$((6*7))\r");
    assert_eq!(ack["written"], true, "{ack}");
    c.wait_text(&id, "result-42");
    let cap = c.ok("pane.capture", json!({ "target": "shell" }));
    assert!(cap["text"].as_str().unwrap().contains("result-42"), "{cap}");
    assert_eq!(cap["cols"], 90);
    assert_eq!(cap["lines"].as_array().unwrap().len(), 20, "{cap}");

    // Removing a running pane is refused without force.
    c.err("pane.remove", json!({ "target": id }), "pane_running");

    // An interactive sh ignores SIGTERM, so ask for SIGKILL.
    assert_eq!(
        c.ok("pane.kill", json!({ "target": id, "signal": "KILL" })),
        json!({ "pane": id, "signal": 9, "signalled": true, "grace_ms": 3000 })
    );
    let exit = c.wait_exit(&id);
    assert_eq!(exit["reason"], "killed", "{exit}");
    assert_eq!(exit["signal"], 9, "{exit}");
    let listed = c.pane_info(&id).expect("an exited pane stays listed");
    assert_eq!(listed["state"], "exited");
    assert_eq!(listed["exit"], exit);
    // Its screen is still readable after the exit.
    assert!(c.capture(&id).contains("result-42"));
    // Killing an exited pane is a no-op.
    c.ok("pane.kill", json!({ "target": id }));

    c.ok("pane.remove", json!({ "target": id }));
    assert!(c.pane_info(&id).is_none(), "removed pane still listed");
    c.err("pane.capture", json!({ "target": id }), "not_found");
    c.err("pane.capture", json!({ "target": "shell" }), "not_found");
    assert!(process_gone(pid));
}

#[test]
fn force_remove_kills_a_running_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok("pane.create", json!({ "argv": ["sleep", "1000"] }));
    let id = info["id"].as_str().unwrap();
    let pid = info["pid"].as_i64().unwrap() as i32;
    c.ok("pane.remove", json!({ "target": id, "force": true }));
    assert!(c.pane_info(id).is_none());
    eventually("the removed pane's process to die", || {
        process_gone(pid).then_some(())
    });
}

#[test]
fn pane_ids_are_not_reused() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let a = ptyd.create_argv(&["true"]);
    c.wait_exit(&a);
    c.ok("pane.remove", json!({ "target": a }));
    let b = ptyd.create_argv(&["true"]);
    assert_ne!(a, b, "a removed pane's id was reused");
}

#[test]
fn exit_codes_and_signals_are_reported_exactly() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // (script, code, signal, shell_code)
    let cases: &[(&str, Option<i64>, Option<i64>, i64)] = &[
        ("exit 0", Some(0), None, 0),
        ("exit 42", Some(42), None, 42),
        ("kill -KILL $$", None, Some(9), 137),
        ("kill -TERM $$", None, Some(15), 143),
    ];
    let ids: Vec<String> = cases
        .iter()
        .map(|(script, ..)| ptyd.create_argv(&["/bin/sh", "-c", script]))
        .collect();
    for ((script, code, signal, shell_code), id) in cases.iter().zip(&ids) {
        let exit = c.wait_exit(id);
        assert_eq!(exit["reason"], "exited", "{script}: {exit}");
        assert_eq!(exit["code"].as_i64(), *code, "{script}: {exit}");
        assert_eq!(exit["signal"].as_i64(), *signal, "{script}: {exit}");
        assert_eq!(
            exit["shell_code"].as_i64(),
            Some(*shell_code),
            "{script}: {exit}"
        );
        if *signal == Some(9) {
            assert_eq!(exit["signal_name"], "SIGKILL", "{exit}");
        }
        if *signal == Some(15) {
            assert_eq!(exit["signal_name"], "SIGTERM", "{exit}");
        }
        // The list reports the same status.
        assert_eq!(c.pane_info(id).unwrap()["exit"], exit);
    }

    // A kill request: the reason says so, the signal is the one sent.
    let id = ptyd.create_argv(&["sleep", "1000"]);
    c.ok("pane.kill", json!({ "target": id, "signal": "TERM" }));
    let exit = c.wait_exit(&id);
    assert_eq!(
        (
            exit["reason"].as_str(),
            exit["signal"].as_i64(),
            exit["shell_code"].as_i64()
        ),
        (Some("killed"), Some(15), Some(143)),
        "{exit}"
    );
    let id = ptyd.create_argv(&["sleep", "1000"]);
    c.ok("pane.kill", json!({ "target": id, "signal": "9" }));
    let exit = c.wait_exit(&id);
    assert_eq!(exit["signal"], 9, "{exit}");

    // A wait on an already exited pane answers at once with the status.
    let again = c.wait_exit(&id);
    assert_eq!(again, exit);

    c.err(
        "pane.kill",
        json!({ "target": id, "signal": "NOPE" }),
        "invalid_params",
    );
}

/// The pane's shell starts a grandchild that moves to its own process group
/// (as job control does) and ignores SIGTERM. Killing the pane must still
/// reach it: TERM to the whole session, then KILL after the grace.
#[test]
fn kill_reaches_a_grandchild_in_its_own_process_group() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let pidfile = ptyd.dirs.state.join("grandchild.pid");
    let script = r#"
        perl -e '
            setpgrp(0, 0);
            $SIG{TERM} = "IGNORE";
            $SIG{HUP} = "IGNORE";
            open(my $f, ">", "$ENV{PIDFILE}.tmp") or die;
            print $f $$;
            close($f);
            rename("$ENV{PIDFILE}.tmp", $ENV{PIDFILE}) or die;
            sleep 1000;
        ' &
        echo started
        wait
    "#;
    let info = c.ok(
        "pane.create",
        json!({
            "argv": ["/bin/sh", "-c", script],
            "env": { "PIDFILE": pidfile.to_str().unwrap() },
        }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    let pane_pid = info["pid"].as_i64().unwrap() as i32;
    let grandchild: i32 = eventually("the grandchild to write its pid file", || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    // The premise: it is alive, in the pane's session, but in another
    // process group than the pane's process.
    assert!(!process_gone(grandchild));
    let pgrp: i32 = proc_stat_field(grandchild, 5).unwrap().parse().unwrap();
    let session: i32 = proc_stat_field(grandchild, 6).unwrap().parse().unwrap();
    assert_eq!(pgrp, grandchild, "the grandchild did not get its own group");
    assert_eq!(session, pane_pid, "the grandchild left the pane's session");

    c.ok("pane.kill", json!({ "target": id, "grace_ms": 300 }));
    let exit = c.wait_exit(&id);
    assert_eq!(exit["reason"], "killed", "{exit}");
    let guard = KillOnDrop::pid(grandchild);
    eventually("the grandchild to be killed after the grace", || {
        process_gone(grandchild).then_some(())
    });
    guard.disarm();
}

#[test]
fn input_is_acknowledged_and_request_ids_dedup() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // No tty echo, so each line typed appears once, printed by cat.
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");

    let first = c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-once\n", "request_id": "req-1" }),
    );
    assert_eq!(
        (&first["written"], &first["duplicate"]),
        (&json!(true), &json!(false))
    );
    let second = c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-once\n", "request_id": "req-1" }),
    );
    assert_eq!(
        (&second["written"], &second["duplicate"]),
        (&json!(true), &json!(true))
    );
    // A different request id is typed even with the same text; no id, too.
    c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-twice\n", "request_id": "req-2" }),
    );
    c.ok(
        "pane.input",
        json!({ "target": id, "data": "line-twice\n", "request_id": "req-3" }),
    );
    c.ok("pane.input", json!({ "target": id, "data": "end-mark\n" }));
    c.wait_text(&id, "end-mark");
    let text = c.capture(&id);
    assert_eq!(text.matches("line-once").count(), 1, "screen:\n{text}");
    assert_eq!(text.matches("line-twice").count(), 2, "screen:\n{text}");

    // Request ids are per pane: the same id on another pane is new input.
    let other = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&other, "ready");
    let r = c.ok(
        "pane.input",
        json!({ "target": other, "data": "other-pane\n", "request_id": "req-1" }),
    );
    assert_eq!(r["duplicate"], false);
    c.wait_text(&other, "other-pane");
}

#[test]
fn input_pipelined_on_one_connection_is_answered_in_order() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");
    let sent: Vec<u64> = (0..50)
        .map(|i| {
            c.send(
                "pane.input",
                json!({ "target": id, "data": format!("n{i}\n") }),
            )
        })
        .collect();
    for want in sent {
        let resp = c.next_response();
        assert_eq!(resp["id"], want, "{resp}");
        assert_eq!(resp["result"]["written"], true, "{resp}");
    }
    c.wait_text(&id, "n49");
}

/// Programs that close their terminal fds before exiting (GNU cat does, at
/// exit) must be reported with their own exit code, not killed by a hangup
/// the server causes by closing the PTY early.
#[test]
fn programs_closing_stdio_before_exit_report_their_own_code() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // cat reading its terminal closes fds 0, 1 and 2 after EOF (Ctrl-D),
    // then exits. One at a time, so the server is quick to see the EIO.
    for _ in 0..20 {
        let id = ptyd.create_argv(&["cat"]);
        c.input(&id, "\x04");
        let exit = c.wait_exit(&id);
        assert_eq!(exit["code"], 0, "{id}: {exit}");
    }
}

/// A `ptyd` command run inside a pane talks to the server that owns the
/// pane, whatever its namespace (agents in panes call `ptyd` themselves).
#[test]
fn ptyd_inside_a_pane_talks_to_its_own_server() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // `status` never starts a server, so a wrong namespace fails visibly.
    let script = format!(
        "'{}' status --json | grep -q '\"namespace\": \"{}\"' && echo own-server-ok || echo own-server-WRONG",
        util::PTYD,
        ptyd.namespace
    );
    let id = ptyd.create_argv(&["/bin/sh", "-c", &script]);
    assert_eq!(c.wait_exit(&id)["code"], 0);
    let text = c.capture(&id);
    assert!(text.contains("own-server-ok"), "screen:\n{text}");
}

#[test]
fn server_internals_do_not_leak_into_pane_environments() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["/bin/sh", "-c", "env | sort"], "env": { "EXTRA_VAR": "extra-value" }, "rows": 60 }),
    );
    let id = info["id"].as_str().unwrap();
    c.wait_exit(id);
    let text = c.capture(id);
    assert!(text.contains("PTYD_PANE_ID=p1"), "{text}");
    assert!(text.contains("EXTRA_VAR=extra-value"), "{text}");
    assert!(text.contains("TERM=xterm-256color"), "{text}");
    assert!(!text.contains("PTYD_READY_FD"), "{text}");
}

#[test]
fn resize_is_clamped_and_reaches_the_program() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    // Below the minimum is refused; above the maximum is clamped.
    let err = c.err(
        "pane.resize",
        json!({ "target": id, "cols": 5000, "rows": 0 }),
        "invalid_params",
    );
    assert!(err.contains("at least 2 columns and 1 row"), "{err}");
    let info = c.ok(
        "pane.resize",
        json!({ "target": id, "cols": 5000, "rows": 1 }),
    );
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(1000), Some(1))
    );
    let info = c.ok(
        "pane.resize",
        json!({ "target": id, "cols": 77, "rows": 33 }),
    );
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(77), Some(33))
    );
    c.input(&id, "stty size\r");
    c.wait_text(&id, "33 77");
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
}

/// Input is acknowledged once it is in the PTY, not when it is queued; past
/// 1 MiB pending, input is refused with `input_overflow`; input still pending
/// when the pane exits is answered with `pane_exited`.
#[test]
fn input_acks_wait_for_the_pty_and_overflow_is_refused() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // A program that never reads its terminal, in raw mode: in canonical
    // mode the kernel would accept and discard input past its line buffer.
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        "stty raw -echo; echo raw-ready; exec sleep 1000",
    ]);
    c.wait_text(&id, "raw-ready");
    let chunk = "y".repeat(600_000);
    let first = c.send("pane.input", json!({ "target": id, "data": chunk }));
    let second = c.send("pane.input", json!({ "target": id, "data": chunk }));
    // The second is refused at once; the first is still unacknowledged, so
    // the refusal is the next response.
    let resp = c.next_response();
    assert_eq!(resp["id"], second, "{resp}");
    assert_eq!(resp["error"]["code"], "input_overflow", "{resp}");
    // Other requests on the connection are not held up by the pending ack.
    c.ok("pane.list", json!({}));
    let mut other = ptyd.connect();
    other.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
    let resp = c.next_response();
    assert_eq!(resp["id"], first, "{resp}");
    assert_eq!(resp["error"]["code"], "pane_exited", "{resp}");
}

#[test]
fn many_clients_at_once_all_get_answers() {
    let ptyd = Ptyd::start();
    let file = ptyd.dirs.state.join("typed.txt");
    let script = format!("stty -echo; echo ready; exec cat > '{}'", file.display());
    let id = ptyd.create_argv(&["/bin/sh", "-c", &script]);
    let mut c = ptyd.connect();
    c.wait_text(&id, "ready");
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let socket = ptyd.socket();
            let id = id.clone();
            std::thread::spawn(move || {
                let mut c = util::Conn::connect(&socket);
                for i in 0..10 {
                    c.ok("pane.list", json!({}));
                    c.input(&id, &format!("client-{t}-line-{i}\n"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client thread failed");
    }
    // Every line was acknowledged, so all are in the PTY before this EOF.
    c.input(&id, "\x04");
    assert_eq!(c.wait_exit(&id)["code"], 0);
    let typed = std::fs::read_to_string(&file).unwrap();
    assert_eq!(typed.lines().count(), 160, "{typed}");
    for t in 0..16 {
        let mine: Vec<&str> = typed
            .lines()
            .filter(|l| l.starts_with(&format!("client-{t}-")))
            .collect();
        let want: Vec<String> = (0..10).map(|i| format!("client-{t}-line-{i}")).collect();
        assert_eq!(mine, want, "client {t}'s lines lost or reordered");
    }
}

#[test]
fn capture_reports_title_and_keeps_colours_on_request() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        r"printf '\033]0;my-title\007'; printf 'plain \033[31mred-word\033[0m done\n'; echo marker-end; exec sleep 1000",
    ]);
    c.wait_text(&id, "marker-end");
    let plain = c.ok("pane.capture", json!({ "target": id }));
    let text = plain["text"].as_str().unwrap();
    assert!(text.contains("plain red-word done"), "{text}");
    assert!(!text.contains('\u{1b}'), "escapes without ansi: {text:?}");
    assert_eq!(plain["title"], "my-title", "{plain}");
    assert_eq!(c.pane_info(&id).unwrap()["title"], "my-title");
    let coloured = c.ok("pane.capture", json!({ "target": id, "ansi": true }));
    let text = coloured["text"].as_str().unwrap();
    assert!(text.contains("red-word"), "{text:?}");
    let before = &text[..text.find("red-word").unwrap()];
    assert!(
        before.contains("\u{1b}["),
        "no SGR before the red word: {text:?}"
    );
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
}

/// The exit is reported when the pane's own process exits, even while a
/// background child (one that ignores the hangup) still holds the terminal;
/// what that child prints afterwards still reaches the screen.
#[test]
fn exit_is_reported_while_a_background_child_holds_the_terminal() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let pidfile = ptyd.dirs.state.join("bg.pid");
    let ready = ptyd.dirs.state.join("bg.ready");
    // The parent exits only once the child ignores SIGHUP: the session
    // leader's exit sends one to the foreground process group.
    let script = format!(
        "sh -c \"trap '' HUP; echo > '{ready}'; sleep 0.5; echo late-output; exec sleep 1000\" & echo $! > '{pid}'; \
         while [ ! -e '{ready}' ]; do sleep 0.01; done; echo bg-started; exit 5",
        ready = ready.display(),
        pid = pidfile.display()
    );
    let id = ptyd.create_argv(&["sh", "-c", &script]);
    let exit = c.wait_exit(&id);
    assert_eq!(exit["code"], 5, "{exit}");
    let bg: i32 = eventually("the pid file", || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    let _guard = KillOnDrop::pid(bg);
    assert!(
        !process_gone(bg),
        "the background child should outlive the exit"
    );
    eventually("output written after the exit to reach the screen", || {
        c.capture(&id).contains("late-output").then_some(())
    });
    c.ok("pane.remove", json!({ "target": id }));
}

/// The config file's scrollback limit applies to new panes; a value over
/// its maximum or an unknown key is reported in `server.status` and the
/// default used instead, and the server starts either way.
#[test]
fn scrollback_limit_comes_from_the_config_file() {
    let start_with = |config: &str| {
        let dirs = util::Dirs::new();
        let dir = dirs.state.join("config/ptyd");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), config).unwrap();
        Ptyd::start_in(dirs, &util::unique_name("cfg"))
    };
    let ptyd = start_with("scrollback_lines = 50\n");
    let mut c = ptyd.connect();
    let status = c.ok("server.status", json!({}));
    assert_eq!(status["config"]["scrollback_lines"], 50, "{status}");
    assert_eq!(status["config"]["problems"], json!([]), "{status}");
    let id = ptyd.create_argv(&["sh", "-c", "seq 1 500; exec sleep 1000"]);
    c.wait_text(&id, "500");
    let cap = c.ok("pane.capture", json!({ "target": id, "start": -1000 }));
    assert_eq!(cap["scrollback_lines"], 50, "{cap}");
    assert_eq!(cap["lines"][0], "428", "the oldest line kept: {cap}");

    for (bad, says) in [
        ("scrollback_lines = 5000000", "more than the maximum"),
        ("scrolback_lines = 5", "unknown key"),
        ("not toml", "not valid TOML"),
    ] {
        let ptyd = start_with(bad);
        let status = ptyd.connect().ok("server.status", json!({}));
        let problems = status["config"]["problems"].to_string();
        assert!(problems.contains(says), "{bad}: {status}");
        assert_eq!(status["config"]["scrollback_lines"], 10000, "{status}");
    }
}

/// What a pane's program starts with: the PTY as its controlling terminal
/// in a session of its own (job control works), no signal ignored or
/// blocked (the server ignores SIGPIPE and must not pass that on), no
/// fd of the server's beyond 0-2, and a program name looked up in the
/// pane's own PATH, not the server's.
#[test]
fn pane_process_starts_clean_in_its_own_session() {
    // The server inherits an fd without close-on-exec, as from a shell's
    // `$(...)`: the pane must not get it.
    let mut pipe = [0; 2];
    // SAFETY: `pipe` has room for the two fds.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let ptyd = Ptyd::start();
    for fd in pipe {
        // SAFETY: closing the fds this test created, once.
        unsafe { libc::close(fd) };
    }
    let mut c = ptyd.connect();
    let bin = ptyd.dirs.state.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let probe = bin.join("ptyd-probe");
    std::fs::write(
        &probe,
        "#!/bin/sh\n\
         echo \"tty=$(tty) self=$$ sid=$(ps -o sess= -p $$ | tr -d ' ') tpgid=$(ps -o tpgid= -p $$ | tr -d ' ')\"\n\
         grep -E '^Sig(Ign|Blk)' /proc/$$/status | tr '\\t\\n' '  '; echo\n\
         echo PROBE-DONE; exec sleep 1000\n",
    )
    .unwrap();
    std::fs::set_permissions(&probe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["ptyd-probe"], "env": { "PATH": path } }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    c.wait_text(&id, "PROBE-DONE");
    let screen = c.capture(&id);
    let line = |prefix: &str| {
        screen
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line in:\n{screen}"))
            .to_string()
    };
    let ids = line("tty=");
    let field = |k: &str| {
        ids.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(field("tty").starts_with("/dev/pts/"), "{ids}");
    assert_eq!(field("sid"), field("self"), "not a session leader: {ids}");
    assert_eq!(
        field("tpgid"),
        field("self"),
        "no controlling terminal: {ids}"
    );
    let sigs = line("SigBlk");
    assert!(
        sigs.contains("SigBlk:\t0000000000000000") || sigs.contains("SigBlk: 0000000000000000"),
        "{sigs}"
    );
    // glibc's posix_spawn leaves its two internal signals (32, 33; no
    // program can ask for them by name) ignored; nothing else may be.
    let ignored = sigs
        .split_whitespace()
        .skip_while(|w| *w != "SigIgn:")
        .nth(1)
        .and_then(|m| u64::from_str_radix(m, 16).ok())
        .unwrap_or(u64::MAX);
    assert_eq!(ignored & !(0b11 << 31), 0, "{sigs}");
    // After `exec sleep`, the process holds exactly what it inherited. Read
    // the fds only once sleep sits in its nanosleep: its own start-up (the
    // locale files of LANG) opens and closes fds of its own.
    let pid = info["pid"].as_i64().unwrap();
    let fds = eventually("the probe to exec sleep and start sleeping", || {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).ok()?;
        // wchan is "0" for a process that is running (its dynamic loader
        // still has libc open: a CI failure) and on a kernel that hides
        // it: then sleeping (state S) is what tells.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let sleeping = state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('S'));
        let asleep = wchan.contains("sleep") || (wchan.trim() == "0" && sleeping);
        (comm.trim() == "sleep" && asleep).then(|| {
            let mut fds: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            fds.sort();
            fds
        })
    });
    let links: Vec<String> = fds
        .iter()
        .map(|f| {
            format!(
                "{f}->{:?}",
                std::fs::read_link(format!("/proc/{pid}/fd/{f}"))
            )
        })
        .collect();
    assert_eq!(
        fds,
        [0, 1, 2],
        "fds the pane's process inherited: {links:?}"
    );
}

/// Output a program wrote for the old size, still in the PTY when a resize
/// arrives, is read at the old size: a scroll region vim set for 24 rows
/// does not stay on the 40-row screen the shell gets back (`seq 1 60`
/// then shows 22 to 60 and the prompt, not 38 to 60 scrolled inside 24
/// rows). The server is stopped while the resize request and the bytes
/// arrive, the request first, so it sees both in one wakeup.
#[test]
fn output_written_before_a_resize_is_read_at_the_old_size() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let script = format!(
        "printf '\\033[?1049h\\033[1;24rone'; \
         while [ ! -e '{d}/go1' ]; do sleep 0.05; done; \
         printf '\\033[1;24r'; touch '{d}/wrote'; \
         while [ ! -e '{d}/go2' ]; do sleep 0.05; done; \
         printf '\\033[?1049l\\033[H\\033[2J'; seq 1 60; printf 'end$ '; exec sleep 1000"
    );
    let info = c.create(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 24 }));
    let id = info["id"].as_str().unwrap().to_string();
    c.wait_text(&id, "one");
    let server = ptyd.serving_pid();
    // SAFETY: signals to the server this test started.
    unsafe { libc::kill(server, libc::SIGSTOP) };
    // kill() returns before the stop takes: the request must find the
    // server stopped.
    eventually("the server to stop", || {
        (proc_stat_field(server, 3).as_deref() == Some("T")).then_some(())
    });
    let resize = c.send(
        "pane.resize",
        json!({ "target": id, "cols": 120, "rows": 40 }),
    );
    std::fs::write(dir.path().join("go1"), "").unwrap();
    let wrote = dir.path().join("wrote");
    eventually("the program to write its region", || {
        wrote.exists().then_some(())
    });
    unsafe { libc::kill(server, libc::SIGCONT) };
    c.response(resize).expect("resized");
    std::fs::write(dir.path().join("go2"), "").unwrap();
    c.wait_text(&id, "end$");
    let screen = c.capture(&id);
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.first(), Some(&"22"), "{screen}");
    assert_eq!(lines.len(), 40, "{screen}");
}

/// `ptyd kill` without a signal hangs the pane up as a closing terminal
/// does: an interactive bash (which ignores SIGTERM) ends at once and
/// saves its history; what ignores SIGHUP gets SIGTERM before SIGKILL.
#[test]
fn kill_hangs_up_first_then_terminates_then_kills() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let histfile = ptyd.dirs.state.join("bash_history");
    let info = c.ok(
        "pane.create",
        json!({
            "argv": ["bash", "--norc", "--noprofile", "-i"],
            "env": { "HISTFILE": histfile.to_str().unwrap(), "PS1": "bash$ " },
            "shell_integration": false,
        }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    // A screen's text is matched without its trailing blanks.
    c.wait_text(&id, "bash$");
    c.type_line(&id, "echo typed-''before-the-kill");
    c.wait_text(&id, "typed-before-the-kill");
    let out = ptyd.run_cli(&["kill", &id, "--json"]);
    util::assert_exit(&out, 0);
    let reply: serde_json::Value = serde_json::from_str(&util::stdout(&out)).unwrap();
    assert_eq!(reply["signal"], 1, "{reply}");
    let exit = c.wait_exit(&id);
    assert_eq!(exit["signal_name"], "SIGHUP", "{exit}");
    let history = std::fs::read_to_string(&histfile).unwrap_or_default();
    assert!(
        history.contains("echo typed-''before-the-kill"),
        "history: {history:?}"
    );

    // Deaf to SIGHUP, it ends by its SIGTERM trap, before the SIGKILL.
    let script = "trap '' HUP; trap 'echo got-term; exit 5' TERM; echo ready; \
                  while :; do sleep 0.05; done";
    let id = ptyd.create_argv(&["sh", "-c", script]);
    c.wait_text(&id, "ready");
    util::assert_exit(&ptyd.run_cli(&["kill", &id, "--grace", "2s"]), 0);
    let exit = c.wait_exit(&id);
    assert_eq!(exit["code"], 5, "{exit}");
    c.wait_text(&id, "got-term");
}
