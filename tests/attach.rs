//! Attached connections: frames both ways, detach, the EXIT frame that ends
//! every attachment, read-only clients, a client too slow to keep up (the
//! server must drop it, not stall), and the interactive `ptyd attach`
//! client driven through tmux.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};
use util::{DETACH, INPUT, Ptyd, RESIZE, Tmux, shell_quote};

fn cat_pane(ptyd: &Ptyd) -> String {
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    ptyd.connect().wait_text(&id, "ready");
    id
}

#[test]
fn frames_carry_input_output_resize_and_detach() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let (result, mut a) = ptyd
        .connect()
        .attach(json!({ "target": id, "cols": 70, "rows": 15 }));
    assert_eq!(result["pane"], id.as_str());
    assert_eq!(result["framing"], "ptyd-frames-1");
    // The redraw shows what was on screen before we attached.
    a.read_until("ready");
    // Attaching with a size resizes the pane.
    let info = c.pane_info(&id).unwrap();
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(70), Some(15))
    );
    assert_eq!(info["attached_clients"], 1);

    a.send(INPUT, b"typed-through-frames\n");
    a.read_until("typed-through-frames");
    c.wait_text(&id, "typed-through-frames");

    a.send(RESIZE, &[0, 120, 0, 40]);
    // An unknown frame kind is ignored.
    a.send(99, b"future");
    a.send(DETACH, b"");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
    let info = c.pane_info(&id).unwrap();
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(120), Some(40))
    );
    assert_eq!(info["state"], "running", "detaching hurt the pane");
    assert_eq!(info["attached_clients"], 0);
}

#[test]
fn every_attached_client_sees_output_and_read_only_ones_cannot_type() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let (_, mut writer) = ptyd.connect().attach(json!({ "target": id }));
    let (_, mut watcher) = ptyd
        .connect()
        .attach(json!({ "target": id, "read_only": true }));
    writer.read_until("ready");
    watcher.read_until("ready");
    writer.send(INPUT, b"seen-by-both\n");
    writer.read_until("seen-by-both");
    watcher.read_until("seen-by-both");

    // Input from the read-only client is dropped. Detaching after it and
    // waiting for the EXIT frame proves the server handled the input frame.
    watcher.send(INPUT, b"must-not-appear\n");
    watcher.send(RESIZE, &[0, 30, 0, 5]);
    watcher.send(DETACH, b"");
    assert_eq!(watcher.read_exit()["reason"], "detached");
    c.input(&id, "after-read-only\n");
    c.wait_text(&id, "after-read-only");
    let text = c.capture(&id);
    assert!(
        !text.contains("must-not-appear"),
        "read-only input typed:\n{text}"
    );
    assert_ne!(
        c.pane_info(&id).unwrap()["cols"],
        30,
        "read-only client resized"
    );
}

#[test]
fn pane_exit_and_removal_end_attachments() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let (_, mut a) = ptyd.connect().attach(json!({ "target": id }));
    a.read_until("ready");
    // EOF (Ctrl-D) makes cat exit with code 0.
    a.send(INPUT, b"\x04");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert_eq!(exit["pane"], id.as_str());
    assert_eq!(exit["exit"]["code"], 0, "{exit}");

    // Attaching to an exited pane: the last screen, then EXIT at once.
    let (_, mut late) = ptyd.connect().attach(json!({ "target": id }));
    let exit = late.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert!(String::from_utf8_lossy(&late.output).contains("ready"));

    let other = cat_pane(&ptyd);
    let (_, mut b) = ptyd
        .connect()
        .attach(json!({ "target": other, "read_only": true }));
    b.read_until("ready");
    c.ok("pane.remove", json!({ "target": other, "force": true }));
    let exit = b.read_exit();
    assert!(
        exit["reason"] == "pane_removed" || exit["reason"] == "pane_exited",
        "{exit}"
    );
}

#[test]
fn an_oversized_frame_ends_the_attachment_not_the_server() {
    let ptyd = Ptyd::start();
    let id = cat_pane(&ptyd);
    let (_, mut a) = ptyd.connect().attach(json!({ "target": id }));
    a.read_until("ready");
    a.stream()
        .write_all(&[INPUT, 0xff, 0xff, 0xff, 0xff])
        .unwrap();
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "protocol_error", "{exit}");
    let mut c = ptyd.connect();
    assert_eq!(c.pane_info(&id).unwrap()["state"], "running");
    // A second attach on an attached connection is not possible either: the
    // connection speaks frames, so such a line is just bytes for the pane.
    c.input(&id, "server-fine\n");
    c.wait_text(&id, "server-fine");
}

#[test]
fn create_with_attach_streams_from_the_first_byte() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // The response, then frames on the same socket: nothing the pane prints
    // right at start is missed.
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "echo first-words; exit 9"], "attach": true, "read_only": true }),
    );
    assert_eq!(info["id"], "p1");
    let mut a = c.into_attached();
    let exit = a.read_exit();
    assert!(
        String::from_utf8_lossy(&a.output).contains("first-words"),
        "{:?}",
        String::from_utf8_lossy(&a.output)
    );
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert_eq!(exit["exit"]["code"], 9, "{exit}");
}

/// A client attached to a flooding pane that never reads is disconnected
/// with `too_slow`; meanwhile other clients get prompt answers. Then the slow
/// client's stream must still be well-formed frames ending in that EXIT.
#[test]
fn a_client_that_never_reads_is_dropped_and_the_server_keeps_answering() {
    let ptyd = Ptyd::start();
    let mut monitor = ptyd.connect();
    monitor.ok("events.subscribe", json!({}));
    let line = "flood-".repeat(20);
    let id = ptyd.create_argv(&["yes", &line]);
    let (_, slow) = ptyd
        .connect()
        .attach(json!({ "target": id, "read_only": true }));

    // Watch for the disconnect on a thread while this one keeps asking.
    let pane = id.clone();
    let watcher = std::thread::spawn(move || {
        loop {
            let e = monitor.next_event();
            if e["type"] == "client.detached" && e["pane"] == pane.as_str() {
                return e;
            }
        }
    });
    let mut c = ptyd.connect();
    let mut requests = 0;
    // Asks on and on until the watcher saw the disconnect.
    util::eventually("the slow client to be disconnected", || {
        if watcher.is_finished() {
            return true;
        }
        let t = Instant::now();
        let info = c.pane_info(&id).expect("pane listed");
        assert_eq!(info["state"], "running");
        c.capture(&id);
        requests += 1;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the server took {:?} to answer while a client was stuck",
            t.elapsed()
        );
        false
    });
    let event = watcher.join().expect("event watcher");
    assert_eq!(event["reason"], "too_slow", "{event}");
    assert!(requests > 0);

    // The stuck client now reads: whole frames, then EXIT too_slow, then EOF.
    let mut slow = slow;
    let exit = slow.read_exit();
    assert_eq!(exit["reason"], "too_slow", "{exit}");
    assert!(!slow.output.is_empty());
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
    c.wait_exit(&id);
}

#[test]
fn attach_client_inside_tmux_types_shows_and_detaches() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    assert_eq!(id, "p1");

    // An outer shell inside tmux runs `ptyd attach --pane-only` (the
    // single-pane client: its prefix alone detaches, a pane exit ends it),
    // so that after it ends its message and exit code stay visible.
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    // The quotes keep the typed line itself from matching `attach-rc=`.
    let attach = format!(
        "{} attach --pane-only p1; echo attach-''rc=$?",
        shell_quote(util::PTYD)
    );
    tmux.type_line(&attach);
    ev.wait_event("client.attached", "p1");
    // The client sends its terminal size: tmux's pane is 100 columns.
    assert_eq!(c.pane_info("p1").unwrap()["cols"], 100);
    // It asks to be redrawn, not waited for, when it falls behind.
    let clients = c.ok("client.list", json!({}));
    assert_eq!(clients["clients"][0]["when_behind"], "redraw", "{clients}");

    tmux.type_line("echo hi-$((40+2))-there");
    c.wait_text("p1", "hi-42-there");
    tmux.wait_screen("the pane's output", |s| s.contains("hi-42-there"));

    // The outer terminal shrinks: SIGWINCH, a resize frame, a smaller pane.
    tmux.run(&["resize-window", "-t", "main", "-x", "90", "-y", "25"]);
    let resized = ev.wait_event("pane.resized", "p1");
    assert_eq!(resized["cols"], 90, "{resized}");
    c.input("p1", "stty size\r");
    c.wait_text("p1", &format!("{} 90", resized["rows"]));

    // Ctrl-\ detaches.
    tmux.keys(&["C-\\"]);
    let detached = ev.wait_event("client.detached", "p1");
    assert_eq!(detached["reason"], "detached", "{detached}");
    let screen = tmux.wait_screen("the attach client exiting", |s| s.contains("attach-rc="));
    assert!(screen.contains("attach-rc=0"), "{screen}");
    // The line names what the client left.
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("[ptyd: detached from ") && l.contains("p1")),
        "{screen}"
    );
    let info = c.pane_info("p1").unwrap();
    assert_eq!(info["state"], "running", "detach hurt the pane");
    assert_eq!(info["attached_clients"], 0);

    // Attach again, losslessly, and end the pane from inside: the client
    // reports it.
    let attach = attach
        .replace("attach-''rc=", "again-''rc=")
        .replace(" p1;", " p1 --lossless;");
    tmux.type_line(&attach);
    ev.wait_event("client.attached", "p1");
    let clients = c.ok("client.list", json!({}));
    assert_eq!(clients["clients"][0]["when_behind"], "pause", "{clients}");
    tmux.type_line("exit 4");
    let exit = c.wait_exit("p1");
    assert_eq!(exit["code"], 4, "{exit}");
    let screen = tmux.wait_screen("the attach client exiting", |s| s.contains("again-rc="));
    assert!(
        screen.contains("[ptyd: pane p1 exited: code 4]"),
        "{screen}"
    );
    assert!(screen.contains("again-rc=0"), "{screen}");

    // `ptyd new` creates a pane and attaches to it at once.
    let new = format!(
        "{} new -n fresh -- /bin/sh; echo new-''rc=$?",
        shell_quote(util::PTYD)
    );
    tmux.type_line(&new);
    ev.wait_event("client.attached", "p2");
    assert_eq!(c.pane_info("p2").unwrap()["name"], "fresh");
    let clients = c.ok("client.list", json!({ "target": "p2" }));
    assert_eq!(clients["clients"][0]["when_behind"], "redraw", "{clients}");
    tmux.type_line("echo in-fresh-$((1+1))");
    c.wait_text("fresh", "in-fresh-2");
    tmux.keys(&["C-\\"]);
    let screen = tmux.wait_screen("ptyd new exiting", |s| s.contains("new-rc="));
    assert!(screen.contains("new-rc=0"), "{screen}");
    assert_eq!(c.pane_info("p2").unwrap()["state"], "running");
}

/// Checks that the lines of an attachment's output that are numbers are
/// exactly `seq 1 n`'s, none lost, added or out of order; returns the
/// output as text with LF line ends.
#[track_caller]
fn assert_counts_to(output: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(output).replace("\r\n", "\n");
    let numbers: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(numbers.len(), n, "lines lost or added");
    assert!(
        numbers.iter().zip(1..).all(|(l, k)| *l == k.to_string()),
        "lines out of order"
    );
    text
}

/// A reading client gets every byte of a large output, in order, and the
/// screen ends with the last lines.
#[test]
fn large_output_reaches_attached_clients_whole_and_in_order() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "read go; seq 1 100000; echo all-done"] }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    let (_, mut a) = ptyd
        .connect()
        .attach(json!({ "target": id, "read_only": true }));
    c.input(&id, "\r");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert_counts_to(&a.output, 100000);
    let screen = c.capture(&id);
    assert!(screen.contains("100000\nall-done"), "{screen}");
}

/// The size policy is tmux's `latest`: the client that attached, resized or
/// typed last sets the pane's size; read-only clients never do.
#[test]
fn the_latest_active_client_sets_the_size() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let size = |c: &mut util::Conn| {
        let info = c.pane_info(&id).unwrap();
        (
            info["cols"].as_u64().unwrap(),
            info["rows"].as_u64().unwrap(),
        )
    };
    let (_, mut small) = ptyd
        .connect()
        .attach(json!({ "target": id, "cols": 60, "rows": 20 }));
    small.read_until("ready");
    assert_eq!(size(&mut c), (60, 20));
    let (_, mut big) = ptyd
        .connect()
        .attach(json!({ "target": id, "cols": 120, "rows": 40 }));
    big.read_until("ready");
    assert_eq!(size(&mut c), (120, 40));
    let (_, mut watcher) = ptyd
        .connect()
        .attach(json!({ "target": id, "cols": 30, "rows": 10, "read_only": true }));
    watcher.read_until("ready");
    assert_eq!(
        size(&mut c),
        (120, 40),
        "a read-only attach resized the pane"
    );
    // Typing makes the small client the size-setter again.
    small.send(INPUT, b"small-typed\n");
    small.read_until("small-typed");
    assert_eq!(size(&mut c), (60, 20));
    big.send(RESIZE, &[0, 100, 0, 35]);
    big.send(INPUT, b"big-typed\n");
    big.read_until("big-typed");
    assert_eq!(size(&mut c), (100, 35));
}

/// A connection that subscribed to events and then attached carries frames
/// only: events must not be mixed into the frame stream.
#[test]
fn a_subscribed_connection_that_attaches_gets_only_frames() {
    let ptyd = Ptyd::start();
    let id = cat_pane(&ptyd);
    let mut conn = ptyd.connect();
    conn.ok("events.subscribe", json!({}));
    // With a new size, so the attach itself emits pane.resized.
    let (_, mut a) = conn.attach(json!({ "target": id, "cols": 91, "rows": 21 }));
    a.read_until("ready");
    // Events happen while it is attached.
    let other = ptyd.create_argv(&["true"]);
    ptyd.connect().wait_exit(&other);
    a.send(INPUT, b"still-frames\n");
    a.read_until("still-frames");
    a.send(DETACH, b"");
    assert_eq!(a.read_exit()["reason"], "detached");

    // The same through pane.create with attach.
    let mut conn = ptyd.connect();
    conn.ok("events.subscribe", json!({}));
    let info = conn.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "read x; echo got-$x"], "attach": true }),
    );
    let mut a = conn.into_attached();
    let third = ptyd.create_argv(&["true"]);
    ptyd.connect().wait_exit(&third);
    a.send(INPUT, b"it\r");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert_eq!(exit["pane"], info["id"]);
    assert!(String::from_utf8_lossy(&a.output).contains("got-it"));
}

/// A pane held back for a client that stopped reading goes on as soon as
/// that client goes away: by closing its socket, or by detaching (a write;
/// it still reads nothing).
#[test]
fn a_pane_held_for_a_stuck_client_resumes_when_it_leaves() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    for detach in [false, true] {
        let info = c.ok(
            "pane.create",
            json!({ "argv": ["sh", "-c", "read go; seq 1 300000; echo finished-$((6*7))"] }),
        );
        let id = info["id"].as_str().unwrap().to_string();
        let (_, stuck) = ptyd
            .connect()
            .attach(json!({ "target": id, "read_only": true }));
        c.input(&id, "\r");
        // About 2 MB of output: more than the client's socket and queue
        // take before the server holds the pane back. Held, it falls quiet
        // unfinished.
        let r = c.ok(
            "pane.wait",
            json!({ "target": id, "idle_ms": 500, "timeout_ms": 20000 }),
        );
        assert_eq!(r["reason"], "idle");
        assert_eq!(c.pane_info(&id).unwrap()["state"], "running");
        assert!(!c.capture(&id).contains("finished"));
        if detach {
            stuck.send(DETACH, b"");
        } else {
            drop(stuck);
        }
        let exit = c.wait_exit(&id);
        assert_eq!(exit["code"], 0, "{exit}");
        assert!(c.capture(&id).contains("finished-42"));
        // Released because the client left, not because it was cut off as
        // too slow after its stall limit (which would also let it finish).
        let log = ptyd.stderr();
        assert!(
            !log.contains("client_too_slow"),
            "detach {detach}: the pane stayed held after its client left:\n{log}"
        );
    }
}

/// typed input beyond what the pane holds pending (1 MiB) is
/// never dropped silently. It is held (the client's socket is not read)
/// while the program reads; a program that reads none of it for 5 s ends
/// the attachment with EXIT `input_overflow`, saying how much was not
/// delivered; the pane and the server go on.
#[test]
fn input_beyond_the_pending_limit_ends_the_attachment_saying_so() {
    let ptyd = Ptyd::start();
    // A program that never reads its input, on a terminal in raw mode (in
    // canonical mode the line discipline takes and discards what overflows
    // a line, which counts as reading).
    let id = ptyd.create_argv(&["sh", "-c", "stty raw -echo; echo ready; exec sleep 1000"]);
    ptyd.connect().ok(
        "pane.wait",
        json!({ "target": id, "text": "ready", "include_screen": true, "timeout_ms": 20000 }),
    );
    let (_, mut a) = ptyd.connect().attach(json!({ "target": id }));
    let chunk = vec![b'x'; 512 << 10];
    for _ in 0..3 {
        a.send(INPUT, &chunk);
    }
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "input_overflow", "{exit}");
    let message = exit["message"].as_str().unwrap_or_default();
    assert!(message.contains("limit 1048576"), "{message}");
    assert!(
        message.contains("524288 typed bytes were not delivered"),
        "{message}"
    );
    assert!(message.contains(&format!("ptyd attach {id}")), "{message}");
    let mut c = ptyd.connect();
    assert_eq!(c.pane_info(&id).unwrap()["state"], "running");
}

/// A client whose socket filled up (it stopped reading, the pane was held
/// back) gets the rest, whole and in order, once it reads again: the
/// server watches a connection for room only while output waits for it,
/// and must not miss the moment the client drains its socket.
#[test]
fn a_client_that_stopped_reading_gets_the_rest_once_it_reads_again() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "read go; seq 1 300000; echo finished-$((6*7))"] }),
    );
    let id = info["id"].as_str().unwrap().to_string();
    // `pause` is the default; asked for by name here.
    let (_, mut a) = ptyd
        .connect()
        .attach(json!({ "target": id, "read_only": true, "when_behind": "pause" }));
    c.input(&id, "\r");
    // About 2 MB: more than the socket and the queue take, so the pane is
    // held and falls quiet unfinished while the client reads nothing.
    let r = c.ok(
        "pane.wait",
        json!({ "target": id, "idle_ms": 500, "timeout_ms": 20000 }),
    );
    assert_eq!(r["reason"], "idle");
    assert!(!c.capture(&id).contains("finished"));
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    let text = assert_counts_to(&a.output, 300000);
    assert!(text.contains("finished-42"));
}

/// A client attached with `when_behind: redraw` that stops reading does
/// not hold its pane (tmux's way): the program prints megabytes and
/// finishes while the client reads nothing, the output the client could
/// not take is skipped, and once it reads, its stream ends with the pane's
/// screen as it is now: drawn once it has caught up, or before the EXIT
/// frame if the pane exited meanwhile.
#[test]
fn a_redraw_client_that_stops_reading_does_not_hold_its_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    for exits in [false, true] {
        let script = format!(
            "read go; seq 1 1000000; echo finished-$((6*7)){}",
            if exits { "" } else { "; read end" }
        );
        let info = c.ok(
            "pane.create",
            json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 24 }),
        );
        let id = info["id"].as_str().unwrap().to_string();
        let (_, mut a) = ptyd
            .connect()
            .attach(json!({ "target": id, "read_only": true, "when_behind": "redraw" }));
        c.input(&id, "\r");
        // About 7.9 MB, far more than the client's socket and queue hold,
        // go by while it reads nothing.
        if exits {
            let exit = c.wait_exit(&id);
            assert_eq!(exit["code"], 0, "{exit}");
            let exit = a.read_exit();
            assert_eq!(exit["reason"], "pane_exited", "{exit}");
        } else {
            c.wait_text(&id, "finished-42");
            a.read_until("finished-42");
        }
        let screen = a.screen(24, 80);
        assert!(
            screen.contains("1000000\nfinished-42"),
            "exits {exits}: the client's screen:\n{screen}"
        );
        assert!(
            a.output.len() < 4 << 20,
            "exits {exits}: {} bytes reached the client: output was not skipped",
            a.output.len()
        );
        if !exits {
            c.input(&id, "\r");
            let exit = a.read_exit();
            assert_eq!(exit["reason"], "pane_exited", "{exit}");
        }
    }
}

/// `ptyd attach` asks to be redrawn when it falls behind: stopped (its
/// terminal takes nothing), it does not hold its pane, which prints
/// megabytes and finishes; continued, it is still attached and shows the
/// pane's last screen.
#[test]
fn a_stopped_attach_client_does_not_hold_its_pane() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&[
        "sh",
        "-c",
        // ~2 MB: many times what a stopped client's socket and queue take
        // before it counts as behind (64 KiB at 80x24), and quick enough
        // for a debug server on a loaded machine.
        "stty -echo; read go; seq 1 300000; echo finished-$((6*7)); exec sleep 1000",
    ]);
    let tmux = Tmux::outer_session(&ptyd, 80, 24);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    // exec: a shell left waiting for its foreground job would see the
    // SIGSTOP below, take the terminal back and leave the continued client
    // in the background, drawing nothing.
    let attach = format!("exec {} attach {id}", shell_quote(util::PTYD));
    tmux.type_line(&attach);
    ev.wait_event("client.attached", &id);
    let clients = c.ok("client.list", json!({ "target": id }));
    let client = &clients["clients"][0];
    assert_eq!(client["when_behind"], "redraw", "{clients}");
    let pid = client["pid"].as_i64().expect("the client's pid") as i32;
    // SAFETY: kill(2) on the attach client this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    c.input(&id, "\r");
    c.wait_text(&id, "finished-42");
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let screen = tmux.wait_screen("the pane's last screen", |s| s.contains("finished-42"));
    assert!(screen.contains("300000"), "{screen}");
    let clients = c.ok("client.list", json!({ "target": id }));
    assert_eq!(
        clients["clients"].as_array().map(Vec::len),
        Some(1),
        "the client was disconnected: {clients}"
    );
}

/// Twenty panes printing as fast as they can do not keep the server from
/// the rest: keys typed into another pane come back through its attached
/// client, and new connections are accepted and answered, between the
/// floods' slices (the loop bounds the time it feeds pane output per turn,
/// looking at the clock after every read, and puts a typed key's echo
/// ahead of the busy panes), and a key or a connection that arrives while
/// the loop reads the floods ends that pass early.
#[test]
fn keys_and_connections_are_served_while_twenty_panes_flood() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let flooders: Vec<String> = (0..20).map(|_| ptyd.create_argv(&["yes"])).collect();
    let id = ptyd.create_argv(&["sh", "-c", "stty raw -echo; echo ready; exec cat"]);
    c.wait_text(&id, "ready");
    let (_, mut a) = ptyd.connect().attach(json!({ "target": id }));
    a.read_until("ready");
    for i in 0..10 {
        let key = format!("<key{i}>");
        a.send(INPUT, key.as_bytes());
        a.read_until(&key);
        let mut fresh = ptyd.connect();
        let status = fresh.ok("server.status", json!({}));
        assert!(status["pid"].as_i64().is_some(), "{status}");
    }
    // The floods went on meanwhile.
    for f in &flooders {
        assert_eq!(c.pane_info(f).unwrap()["state"], "running");
    }
    assert!(c.capture(&flooders[0]).contains('y'));
    // And some of those keys or connections, arriving while the loop read
    // the floods, ended its pass over them there (`pane_passes_cut`)
    // rather than waiting for the pass's time budget. The loop spends most
    // of its time in such passes now, so a few more keys make it certain.
    let mut keys = 10;
    while ptyd.status_json()["pane_passes_cut"].as_u64() == Some(0) && keys < 500 {
        let key = format!("<key{keys}>");
        a.send(INPUT, key.as_bytes());
        a.read_until(&key);
        keys += 1;
    }
    let status = ptyd.status_json();
    assert!(
        status["pane_passes_cut"].as_u64() > Some(0),
        "no pass over the floods ended early for {keys} keys and 10 connections: {status}"
    );
}
