//! What the server writes to stderr: journald priority prefixes without a
//! repeated identifier when stderr is the journal stream systemd names in
//! `JOURNAL_STREAM`, plain `ptyd[PID]:` lines otherwise, commands written as
//! command lines (never Rust's Debug text); and the background server's
//! `server.stderr`, appended to and rotated, never truncated.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::process::Stdio;
use util::Dirs;

/// Runs a server with stderr on a file and `JOURNAL_STREAM` set to
/// `journal_stream(file)`, makes one pane, stops it; returns its stderr.
fn server_log(journal_stream: impl Fn(&std::fs::Metadata) -> String) -> String {
    let dirs = Dirs::new();
    let ns = util::unique_name("logs");
    let log_path = dirs.state.join("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let stream = journal_stream(&log.metadata().unwrap());
    let notify_path = dirs.state.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let mut server = util::KillOnDrop::child(
        dirs.command(&ns)
            .arg("server")
            .env("JOURNAL_STREAM", stream)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // Once READY=1 comes the server accepts connections. Every datagram is
    // read, as a manager would: the keeper also asks whether this one keeps
    // fds (it stores a probe, then waits for a barrier), which reading
    // drops, and so refuses.
    notify.set_read_timeout(Some(util::TIMEOUT)).unwrap();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok(n) = notify.recv(&mut buf) {
            if String::from_utf8_lossy(&buf[..n]).contains("READY=1") {
                let _ = ready_tx.send(());
            }
        }
    });
    ready
        .recv_timeout(util::TIMEOUT)
        .expect("no READY from the server");

    let run = |args: &[&str]| {
        let mut cmd = dirs.command(&ns);
        cmd.args(args);
        let out = util::run_bounded(cmd, &format!("ptyd {args:?}"));
        assert!(out.status.success(), "{out:?}");
    };
    run(&["new", "-d", "--", "sleep", "1000"]);
    run(&["stop"]);
    let status =
        util::wait_child(server.as_child_mut(), util::TIMEOUT).expect("server did not stop");
    assert!(status.success());
    std::fs::read_to_string(&log_path).unwrap()
}

#[test]
fn journal_lines_carry_priorities_and_no_identifier() {
    let log = server_log(|m| format!("{}:{}", m.dev(), m.ino()));
    for line in log.lines() {
        assert!(line.starts_with('<'), "no priority: {line:?} in\n{log}");
        assert!(!line.contains("ptyd["), "identifier repeated: {line:?}");
    }
    assert!(log.contains("<5>started: "), "{log}");
    assert!(log.contains("<6>pane_started: pane p1 pid "), "{log}");
    assert!(log.contains("(sleep 1000)"), "{log}");
    assert!(log.contains("<5>stopped: "), "{log}");
}

#[test]
fn other_stderr_gets_plain_lines() {
    // The variable names some other stream (inherited, say): not ours.
    let log = server_log(|m| format!("{}:{}", m.dev(), m.ino() + 1));
    for line in log.lines() {
        assert!(line.starts_with("ptyd["), "{line:?} in\n{log}");
    }
    assert!(log.contains("]: pane_started: pane p1 pid "), "{log}");
    assert!(
        log.contains("(sleep 1000)") && !log.contains("Argv("),
        "{log}"
    );
}

#[test]
fn background_server_stderr_is_appended_and_rotated() {
    let dirs = Dirs::new();
    let ns = util::unique_name("bgerr");
    let state = dirs.state.join("ptyd").join(&ns);
    std::fs::create_dir_all(&state).unwrap();
    let path = state.join("server.stderr");
    std::fs::write(&path, "an earlier server's last words\n").unwrap();
    let run = |args: &[&str]| {
        let mut cmd = dirs.command(&ns);
        cmd.args(args);
        let out = util::run_bounded(cmd, &format!("ptyd {args:?}"));
        assert!(out.status.success(), "{out:?}");
        out
    };
    let stop = |pid: i32| {
        run(&["stop"]);
        util::eventually("the background server to exit", || {
            util::process_gone(pid).then_some(())
        });
    };
    let pid = |out: std::process::Output| {
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        status["pid"].as_i64().unwrap() as i32
    };

    // Stops whichever background server runs if the test fails half-way.
    let _guard = util::KillOnDrop::command({
        let mut cmd = dirs.command(&ns);
        cmd.arg("stop");
        cmd
    });
    run(&["ls"]); // starts one
    let first = pid(run(&["status", "--json"]));
    stop(first);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("an earlier server's last words\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("ptyd[{first}]: started: ")),
        "{text}"
    );

    // Past 1 MiB the file moves aside before the next server appends.
    let big = "x".repeat(100) + "\n";
    std::fs::write(&path, big.repeat(11_000)).unwrap();
    run(&["ls"]);
    let second = pid(run(&["status", "--json"]));
    stop(second);
    let rotated = std::fs::read_to_string(state.join("server.stderr.1")).unwrap();
    assert_eq!(rotated.len(), big.len() * 11_000);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(&format!("ptyd[{second}]: started: ")),
        "{text}"
    );
    assert!(text.len() < 10_000, "{} bytes", text.len());
}
