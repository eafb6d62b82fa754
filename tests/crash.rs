//! Crash recovery through the real binary: the serving process is killed
//! (SIGKILL, SIGSEGV, SIGABRT) and the keeper (`keeper/`, the process
//! the harness starts) replaces it. After each crash: the server answers,
//! every pane has its old pid, no pane got SIGHUP, a counter pane's
//! numbers have no gap and no repeat across the crash, the attached
//! client is back, the keeper leaks no fd and leaves no zombie. Also: a
//! crash loop, a tiny ring, the keeper's re-exec, the event history. The
//! busy counter's checkpoints leave its scrollback lines in the history
//! log (`server/continuity/history_log.rs`: appended, merged, evicted and given back
//! as it scrolls), so recovery reads them from there.
//!
//! `PTYD_CRASH_ROUNDS` sets the number of SIGKILL rounds (20 by default).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

mod crash_support;

use crash_support::{Rng, serving_pid, setup, wait_replacement};
use serde_json::json;
use util::{Ptyd, shell_quote};

fn rounds() -> usize {
    util::env_number("PTYD_CRASH_ROUNDS", 20)
}

#[test]
fn sigkill_of_the_serving_process_loses_no_pane_byte_or_client() {
    let s = setup(&[]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
    let mut fds = None;
    // The counter's scrollback lines are in the history log, appended
    // checkpoint after checkpoint (and merged, and evicted): the
    // checkpoints the rounds recover from refer to them there.
    let mut c = s.ptyd.connect();
    util::eventually("the counter's lines in the history log", || {
        let status = c.ok("server.status", json!({}));
        (status["keeper"]["history_log_panes"].as_u64() >= Some(1)).then_some(())
    });
    for round in 1..=rounds() {
        s.crash_round(&mut rng, libc::SIGKILL, round, &mut fds);
    }
}

#[test]
fn sigsegv_and_abort_are_survived_too() {
    let s = setup(&[]);
    let mut rng = Rng(42);
    let mut fds = None;
    for (round, sig) in [libc::SIGSEGV, libc::SIGABRT, libc::SIGSEGV]
        .into_iter()
        .enumerate()
    {
        s.crash_round(&mut rng, sig, round + 1, &mut fds);
    }
}

#[test]
fn a_removed_pane_still_hangs_up_when_removed() {
    // A process in a session of its own keeps the pane's terminal open
    // and writes to it: it sees the hang-up (EIO) only once every copy of
    // the master is closed, the keeper's included.
    let ptyd = Ptyd::start();
    let dir = ptyd.dirs.path("hup");
    let (done, pidfile) = (dir.join("done"), dir.join("pid"));
    let inner = format!(
        "echo $$ > {}; while echo x; do sleep 0.05; done; touch {}",
        shell_quote(pidfile.to_str().unwrap()),
        shell_quote(done.to_str().unwrap())
    );
    let pane = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        &format!(
            "setsid sh -c {} < /dev/null & echo up; exec sleep 600",
            shell_quote(&inner)
        ),
    ]);
    let mut c = ptyd.connect();
    c.wait_text(&pane, "up");
    util::eventually("the writer to start", || pidfile.exists().then_some(()));
    c.ok("pane.remove", json!({ "target": pane, "force": true }));
    let hung_up = util::poll_until(util::TIMEOUT, || done.exists().then_some(()));
    if hung_up.is_none() {
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: kill(2) of the writer this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the removed pane's terminal was not hung up (the keeper held on?)");
    }
}

#[test]
fn a_tiny_ring_still_recovers_exactly() {
    // A 4 KiB ring: the counter fills it many times a second, so the
    // server checkpoints as it fills and stops reading the pane while a
    // whole ring is unsaved (the PTY holds the rest): still exact.
    let s = setup(&[("PTYD_RING_BYTES", "4096")]);
    let mut rng = Rng(7);
    let mut fds = None;
    for round in 1..=3 {
        s.crash_round(&mut rng, libc::SIGKILL, round, &mut fds);
    }
    let status = s.ptyd.connect().ok("server.status", json!({}));
    let recovery = &status["keeper"]["last_recovery"];
    assert!(
        recovery["reason"]
            .as_str()
            .is_some_and(|r| r.contains("signal 9")),
        "{status}"
    );
    assert_eq!(recovery["inexact_panes"], json!([]), "{status}");
    // The text status says so too, not just `restore: none`.
    let out = s.ptyd.run_cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("recovery:"));
    assert!(
        line.is_some_and(|l| l.contains("signal 9") && l.contains("every pane kept")),
        "{text}"
    );
}

/// Waits until the snapshot on disk names each of `pids` (pane id -> pid)
/// as running: what a model-less server matches the keeper's panes with.
fn wait_saved_pids(ptyd: &Ptyd, pids: &std::collections::BTreeMap<String, i64>) {
    let path = ptyd.dirs.session_path(&ptyd.namespace);
    util::eventually("the snapshot to name every pane's process", || {
        let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
        let saved: std::collections::BTreeMap<String, i64> = saved["panes"]
            .as_array()?
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap_or("").to_string(),
                    p["pid"].as_i64().unwrap_or(-1),
                )
            })
            .collect();
        (&saved == pids).then_some(())
    });
}

#[test]
fn a_crash_loop_falls_back_to_the_snapshot_and_adopts_every_pane_process() {
    // Every replacement dies before it serves (after the checkpoint is
    // imported and the rings replayed): the keeper backs off between
    // attempts (never spins); after `CRASH_LOOP_LIMIT` it starts a server
    // without the checkpoint that may be what kills it, from the snapshot
    // on disk, which adopts the panes' running processes from the fds the
    // keeper holds: same pids, no SIGHUP, input and output work, the
    // attached client comes back, and status says why.
    let s = setup(&[("PTYD_REPLACEMENT_FAULT", "new-before-imported:exit")]);
    let before = s.before();
    wait_saved_pids(&s.ptyd, &before.pids);
    // SAFETY: kill(2) of the serving process this test started.
    unsafe { libc::kill(before.serving, libc::SIGKILL) };
    let (mut c, _) = wait_replacement(&s.ptyd, before.serving);
    let status = c.ok("server.status", json!({}));
    let stderr = s.ptyd.stderr();
    let recovery = &status["keeper"]["last_recovery"];
    assert_eq!(
        recovery["from"], "adopted",
        "{status}\nkeeper's stderr:\n{stderr}"
    );
    let mut adopted: Vec<&str> = recovery["adopted"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    adopted.sort_unstable();
    let mut all: Vec<&str> = before.pids.keys().map(String::as_str).collect();
    all.sort_unstable();
    assert_eq!(adopted, all, "{recovery}");
    assert_eq!(recovery["let_go"], json!([]), "{recovery}");
    assert!(
        recovery["reason"]
            .as_str()
            .is_some_and(|r| r.contains("killed by signal 9")),
        "the crash that began the loop is the reason: {recovery}"
    );
    let backoffs = stderr
        .lines()
        .filter(|l| l.contains("crash loop") && l.contains("retrying in"))
        .count();
    assert_eq!(backoffs, 3, "a back-off before each retry:\n{stderr}");
    assert_eq!(c.pane_pids(), before.pids, "pane pids changed");
    // The adopted panes are served: input reaches the shell, its echo
    // comes back, and the counter's new output is read.
    c.input(&s.shell, "after-the-loop\n");
    c.wait_text(&s.shell, "got:after-the-loop");
    let first = c.capture(&s.counter);
    util::eventually("the counter's new output", || {
        (c.capture(&s.counter) != first).then_some(())
    });
    let hups: Vec<_> = std::fs::read_dir(&s.hup_dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(hups.is_empty(), "SIGHUP reached {hups:?}");
    util::eventually("the attached client to come back", || {
        (c.pane_info(&s.shell).unwrap()["attached_clients"] == 1).then_some(())
    });
    assert_eq!(
        status["persistence"]["restore"]["outcome_counts"]["adopted"],
        before.pids.len(),
        "{status}"
    );
    let out = s.ptyd.run_cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("recovery:"));
    assert!(
        line.is_some_and(|l| l.contains("signal 9") && l.contains("adopted 2")),
        "{text}"
    );
}

#[test]
fn when_model_less_servers_crash_too_the_panes_are_let_go_and_listed() {
    // The model-less servers die before they serve as well: the cause is
    // not the model. After as many of those the keeper lets the panes go
    // (a plain server from the snapshot), and lists each on its stderr
    // first, so the user can find what was lost.
    let s = setup(&[
        ("PTYD_REPLACEMENT_FAULT", "new-before-imported:exit"),
        ("PTYD_ADOPT_FAULT", "adopt-before-serving:exit"),
    ]);
    let before = s.before();
    wait_saved_pids(&s.ptyd, &before.pids);
    // SAFETY: kill(2) of the serving process this test started.
    unsafe { libc::kill(before.serving, libc::SIGKILL) };
    // Six back-offs come first, 12.6 s together: longer than `eventually`
    // waits for the plain server to answer.
    let listed = util::poll_until(std::time::Duration::from_secs(120), || {
        s.ptyd.stderr().contains("letting pane").then_some(())
    });
    assert!(listed.is_some(), "no pane let go:\n{}", s.ptyd.stderr());
    let (mut c, _) = wait_replacement(&s.ptyd, before.serving);
    let status = c.ok("server.status", json!({}));
    let stderr = s.ptyd.stderr();
    assert_eq!(
        status["keeper"]["last_recovery"]["from"], "snapshot",
        "{status}\nkeeper's stderr:\n{stderr}"
    );
    let backoffs = stderr
        .lines()
        .filter(|l| l.contains("crash loop") && l.contains("retrying in"))
        .count();
    assert_eq!(backoffs, 6, "a back-off before each retry:\n{stderr}");
    for (pane, pid) in &before.pids {
        let listed = format!("letting pane {pane} go (pid {pid})");
        assert!(stderr.contains(&listed), "{listed:?} in:\n{stderr}");
    }
}

#[test]
fn after_an_upgrade_the_keeper_reexecs_into_the_new_binary_and_still_recovers() {
    let s = setup(&[]);
    // Another path is other code as far as the keeper can tell.
    let copy = s.ptyd.dirs.path("bin").join("ptyd-next");
    std::fs::copy(util::PTYD, &copy).unwrap();
    let out = s
        .ptyd
        .run_cli(&["upgrade", "--binary", copy.to_str().unwrap()]);
    util::assert_exit(&out, 0);
    let mut c = s.ptyd.connect();
    util::eventually("the keeper to re-execute into the new binary", || {
        let status = c.ok("server.status", json!({}));
        let exe = std::fs::read_link(format!("/proc/{}/exe", s.keeper)).ok()?;
        (exe == copy && status["keeper"]["binary"] == copy.to_str().unwrap()).then_some(())
    });
    let status = c.ok("server.status", json!({}));
    assert_eq!(status["keeper"]["pid"], s.keeper, "{status}");
    assert_eq!(status["keeper"]["reexec_error"], json!(null), "{status}");
    drop(c);
    // It still holds everything: a crash is recovered as before.
    let mut rng = Rng(3);
    let mut fds = None;
    s.crash_round(&mut rng, libc::SIGKILL, 1, &mut fds);
}

#[test]
fn the_event_history_and_its_numbering_survive_a_crash() {
    // The checkpoint carries the event ring, so `events.subscribe` with
    // `since` replays from before the crash; events logged after the last
    // checkpoint are lost, but their numbers are not reused: each is a
    // `gap`, and the next event is numbered after every one a client saw.
    let ptyd = Ptyd::start_in(util::Dirs::new(), &util::unique_name("crashev"));
    let a = ptyd.create_argv(&["sleep", "1000"]);
    let b = ptyd.create_argv(&["sleep", "1000"]);
    let mut c = ptyd.connect();
    for cols in 81..=90 {
        c.ok(
            "pane.resize",
            json!({ "target": b, "cols": cols, "rows": 24 }),
        );
    }
    let reached = c.ok("events.subscribe", json!({}))["seq"].as_u64().unwrap();
    let dead = serving_pid(&mut c);
    drop(c);
    // SAFETY: kill(2) of the serving process this test started.
    unsafe { libc::kill(dead, libc::SIGKILL) };
    let (_, _) = wait_replacement(&ptyd, dead);
    let mut sub = ptyd.connect();
    let now = sub.ok("events.subscribe", json!({ "since": 0 }))["seq"]
        .as_u64()
        .unwrap();
    assert!(now >= reached, "numbering went back: {now} < {reached}");
    let events: Vec<serde_json::Value> = (1..=now).map(|_| sub.next_event()).collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e["seq"],
            i as u64 + 1,
            "not one event per number: {events:?}"
        );
    }
    let created: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "pane.created")
        .map(|e| &e["pane"])
        .collect();
    assert_eq!(created, [&json!(a), &json!(b)], "{events:?}");
    // Every number up to `reached` is the event logged then (the panes'
    // or their tabs'), or a gap.
    for e in &events[..reached as usize] {
        let kind = e["type"].as_str().unwrap_or("");
        assert!(
            ["pane.created", "pane.resized", "gap"].contains(&kind)
                || kind.starts_with("tab.")
                || kind.starts_with("workspace."),
            "{e}"
        );
    }
    // The next event comes after all of them.
    let mut c = ptyd.connect();
    c.ok(
        "pane.resize",
        json!({ "target": a, "cols": 70, "rows": 20 }),
    );
    let next = sub.wait_event("pane.resized", &a);
    assert!(next["seq"].as_u64().unwrap() > now, "{next}");
}

#[test]
fn a_resize_just_before_a_crash_is_not_lost() {
    // The serving process dies right after a resize, before any paced
    // checkpoint: the replacement brings the pane back at the size its
    // program draws for (the kernel's), not the checkpoint's.
    let ptyd = Ptyd::start();
    let pane = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        "trap 'echo size $(stty size)' WINCH; echo ready; while :; do sleep 0.05; done",
    ]);
    let mut c = ptyd.connect();
    util::eventually("the pane to start", || {
        let cap = c.ok("pane.capture", json!({ "target": pane }));
        cap.to_string().contains("ready").then_some(())
    });
    let dead = serving_pid(&mut c);
    // The first resize is checkpointed at once (none came for a while);
    // the second comes within the paced interval after it.
    for (cols, rows) in [(90, 25), (101, 31)] {
        c.ok(
            "pane.resize",
            json!({ "target": pane, "cols": cols, "rows": rows }),
        );
    }
    // SAFETY: kill(2) of the serving process this test started.
    unsafe { libc::kill(dead, libc::SIGKILL) };
    let (mut c, _) = wait_replacement(&ptyd, dead);
    let cap = c.ok("pane.capture", json!({ "target": pane }));
    assert_eq!(
        (cap["cols"].as_u64(), cap["rows"].as_u64()),
        (Some(101), Some(31)),
        "{cap}"
    );
    let info = c.ok("pane.list", json!({}))["panes"][0].clone();
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(101), Some(31)),
        "{info}"
    );
    // The program saw the new size too.
    util::eventually("the program's answer to SIGWINCH", || {
        let cap = c.ok("pane.capture", json!({ "target": pane }));
        cap.to_string().contains("size 31 101").then_some(())
    });
}

/// Allocated bytes of the serving process's output ring memfds, summed.
fn ring_bytes(serving: i32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let dir = format!("/proc/{serving}/fd");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|t| t.to_string_lossy().starts_with("/memfd:ptyd-ring"))
        })
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

#[test]
fn a_ring_gives_back_what_a_checkpoint_covers_and_still_recovers_exactly() {
    // 2 MB printed, then quiet: once a checkpoint covers it, the ring's
    // pages are given back (a ring kept all it was ever given, up to
    // 16 MiB, for good); a crash after that replays nothing missing.
    let ptyd = Ptyd::start();
    let pane = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        "seq 1 300000; echo ring-given-back; exec sleep 600",
    ]);
    let mut c = ptyd.connect();
    c.wait_text(&pane, "ring-given-back");
    let serving = serving_pid(&mut c);
    util::eventually("the ring's pages to be given back", || {
        let held = ring_bytes(serving);
        if held < 256 * 1024 {
            Ok(())
        } else {
            Err(format!("the ring holds {held} bytes"))
        }
    });
    crash_support::signal(serving as i64, libc::SIGKILL);
    let (mut c, _) = wait_replacement(&ptyd, serving);
    let status = c.ok("server.status", json!({}));
    assert_eq!(
        status["keeper"]["last_recovery"]["inexact_panes"],
        json!([]),
        "{status}"
    );
    let text = c.capture(&pane);
    assert!(
        text.contains("300000\nring-given-back"),
        "the screen after the crash: {text}"
    );
    assert!(!text.contains('\0'), "a hole replayed as output: {text}");
}

#[test]
fn a_checkpoint_encoded_over_several_turns_recovers_every_pane_exactly() {
    // One pane's line a loop turn (`PTYD_CHECKPOINT_PANES`): each
    // checkpoint holds lines encoded in different turns, each with its own
    // pane's ring position then, and recovery replays each ring from its
    // own line's position. Two more counters print meanwhile, so every
    // line of a checkpoint is older than the next pane's.
    let s = setup(&[("PTYD_CHECKPOINT_PANES", "1")]);
    let more: Vec<String> = (0..2)
        .map(|_| {
            s.ptyd.create_argv(&[
                "/bin/sh",
                "-c",
                "i=0; while :; do i=$((i+1)); echo $i || exit 1; done",
            ])
        })
        .collect();
    let mut c = s.ptyd.connect();
    util::eventually("a checkpoint encoded over several turns", || {
        let status = c.ok("server.status", json!({}));
        (status["keeper"]["last_checkpoint_turns"].as_u64() >= Some(4)).then_some(())
    });
    let mut rng = Rng(0x5eed ^ std::process::id() as u64);
    let mut fds = None;
    for round in 1..=3 {
        s.crash_round(&mut rng, libc::SIGKILL, round, &mut fds);
        let mut c = s.ptyd.connect();
        for pane in &more {
            let text = c.capture_all(pane);
            let (first, top) =
                crash_support::check_counter(&text, &format!("round {round}, pane {pane}"));
            assert!(top > first, "round {round}, pane {pane}: {first}..{top}");
        }
    }
    let status = s.ptyd.connect().ok("server.status", json!({}));
    assert_eq!(
        status["keeper"]["last_recovery"]["inexact_panes"],
        json!([]),
        "{status}"
    );
}

#[test]
fn an_idle_pane_saved_by_earlier_checkpoints_recovers_its_screen() {
    // An idle pane's terminal is encoded once: each later checkpoint
    // copies it from the one before (the keeper's pre-copy memfd), not
    // from a copy in the server's heap. While a counter forces checkpoint
    // after checkpoint, the idle pane's screen (text, colour, cursor,
    // title, modes) must come back whole after a crash.
    let ptyd = Ptyd::start();
    let idle = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        "printf '\\033]2;idle-title\\007\\033[?2004h\\033[31mred-marker\\033[0m\\r\\n\\033[5;10Hat-5-10'; exec sleep 1000",
    ]);
    let mut c = ptyd.connect();
    let capture =
        |c: &mut util::Conn| c.ok("pane.capture", json!({ "target": idle, "ansi": true }));
    let before = util::eventually("the idle pane's output", || {
        let cap = capture(&mut c);
        cap["text"]
            .as_str()
            .is_some_and(|t| t.contains("at-5-10"))
            .then_some(cap)
    });
    let _counter = crash_support::counter_pane(&ptyd);
    let written = |c: &mut util::Conn| {
        c.ok("server.status", json!({}))["keeper"]["checkpoints"]
            .as_u64()
            .unwrap_or(0)
    };
    let start = written(&mut c);
    util::eventually("three more checkpoints", || {
        (written(&mut c) >= start + 3).then_some(())
    });
    let dead = serving_pid(&mut c);
    // SAFETY: kill(2) of the serving process this test started.
    unsafe { libc::kill(dead, libc::SIGKILL) };
    let (mut c, _) = wait_replacement(&ptyd, dead);
    let after = capture(&mut c);
    for key in ["text", "cursor", "title", "modes", "cols", "rows"] {
        assert_eq!(after[key], before[key], "{key}: {after} vs {before}");
    }
    assert!(
        before["text"]
            .as_str()
            .is_some_and(|t| t.contains("31mred-marker")),
        "{before}"
    );
    assert_eq!(before["title"], json!("idle-title"));
}
