//! The event stream: replay from a sequence number, live delivery, strictly
//! increasing `seq`, the events pane changes produce, and every event being
//! exactly the typed `protocol::events::Event`.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use util::Ptyd;

/// Reads events until one of `kind` for `pane` arrives; returns all read.
fn events_until(c: &mut util::Conn, kind: &str, pane: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let e = c.next_event();
        let done = e["type"] == kind && e["pane"] == pane;
        seen.push(e);
        if done {
            return seen;
        }
    }
}

fn assert_increasing(events: &[Value]) {
    for pair in events.windows(2) {
        let (a, b) = (pair[0]["seq"].as_u64(), pair[1]["seq"].as_u64());
        assert!(
            a.is_some() && b.is_some() && a < b,
            "seq not increasing: {} then {}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn subscribe_since_zero_replays_everything_in_order() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let a = ptyd.create_argv(&["sh", "-c", "exit 5"]);
    c.wait_exit(&a);
    let b = ptyd.create_argv(&["sleep", "1000"]);
    c.ok(
        "pane.resize",
        json!({ "target": b, "cols": 100, "rows": 30 }),
    );
    c.ok("pane.kill", json!({ "target": b, "signal": "KILL" }));
    c.wait_exit(&b);
    c.ok("pane.remove", json!({ "target": a }));

    let mut sub = ptyd.connect();
    let r = sub.ok("events.subscribe", json!({ "since": 0 }));
    let last = r["seq"].as_u64().expect("subscribe returns the last seq");
    let events = events_until(&mut sub, "pane.removed", &a);
    assert_increasing(&events);
    assert_eq!(
        events[0]["seq"], 1,
        "replay does not start at 1: {}",
        events[0]
    );
    assert_eq!(events.last().unwrap()["seq"], last);
    // The panes' own events (the tree's are tests/tab_ops.rs's).
    let events: Vec<Value> = events
        .into_iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("pane.")))
        .collect();
    let summary: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("?").to_string(),
                e["pane"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("pane.created", &a),
        ("pane.exited", &a),
        ("pane.created", &b),
        ("pane.resized", &b),
        ("pane.exited", &b),
        ("pane.removed", &a),
    ]
    .iter()
    .map(|(t, p)| (t.to_string(), p.to_string()))
    .collect();
    assert_eq!(summary, want, "events: {events:#?}");
    assert_eq!(events[0]["info"]["id"], a.as_str());
    assert_eq!(events[1]["exit"]["code"], 5, "{}", events[1]);
    assert_eq!(events[3]["cols"], 100);
    assert_eq!(events[4]["exit"]["signal"], 9);
    assert_eq!(events[4]["exit"]["reason"], "killed");

    // Resuming after a seq gives only what follows it.
    let mut sub2 = ptyd.connect();
    sub2.ok("events.subscribe", json!({ "since": 3 }));
    let e = sub2.next_event();
    assert_eq!(e["seq"], 4, "{e}");
}

#[test]
fn live_events_follow_the_replay_without_gaps() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let first = ptyd.create_argv(&["true"]);
    c.wait_exit(&first);

    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({ "since": 0 }));
    let mut events = events_until(&mut sub, "pane.exited", &first);
    // Now live: a new pane's events arrive on the same stream.
    let second = ptyd.create_argv(&["sh", "-c", "exit 7"]);
    events.extend(events_until(&mut sub, "pane.exited", &second));
    assert_increasing(&events);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let contiguous: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, contiguous, "events were skipped: {events:#?}");
    assert_eq!(events.last().unwrap()["exit"]["code"], 7);

    // A subscription without `since` starts at the present.
    let mut now = ptyd.connect();
    let r = now.ok("events.subscribe", json!({}));
    let third = ptyd.create_argv(&["true"]);
    let e = now.next_event();
    assert_eq!(e["type"], "pane.created", "{e}");
    assert_eq!(e["pane"], third.as_str());
    assert_eq!(e["seq"].as_u64(), Some(r["seq"].as_u64().unwrap() + 1));
}

#[test]
fn attach_and_detach_are_events() {
    let ptyd = Ptyd::start();
    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({}));
    let id = ptyd.create_argv(&["cat"]);
    let (_, attached) = ptyd
        .connect()
        .attach(json!({ "target": id, "read_only": true }));
    drop(attached);
    let events = events_until(&mut sub, "client.detached", &id);
    assert_increasing(&events);
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(types.contains(&"client.attached"), "{events:#?}");
    let attached = events
        .iter()
        .find(|e| e["type"] == "client.attached")
        .unwrap();
    assert_eq!(attached["read_only"], true);
    assert_eq!(attached["pid"].as_u64(), Some(std::process::id() as u64));

    // pane.create with `attach` is an attach too.
    let mut c = ptyd.connect();
    let info = c.ok("pane.create", json!({ "argv": ["true"], "attach": true }));
    let id = info["id"].as_str().unwrap();
    let events = events_until(&mut sub, "client.detached", id);
    let attached: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "client.attached" && e["pane"] == id)
        .collect();
    assert_eq!(attached.len(), 1, "{events:#?}");
    assert_eq!(attached[0]["read_only"], false);
}

#[test]
fn subscribe_with_a_since_beyond_the_present_gets_a_gap_at_once() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // Just past the present, far past it, and the largest number: numbers
    // this server never gave out (a server before it did, and lost them).
    for since in [None, Some(1000), Some(u64::MAX)] {
        let id = ptyd.create_argv(&["true"]);
        c.wait_exit(&id);
        let since = since.unwrap_or_else(|| {
            c.ok("server.status", json!({}))["event_seq"]
                .as_u64()
                .expect("event_seq")
                + 1
        });
        let mut sub = ptyd.connect();
        let r = sub.ok("events.subscribe", json!({ "since": since }));
        let seq = r["seq"].as_u64().expect("seq");
        // At once, before any new event: a gap that says so.
        let gap = sub.next_event();
        assert_eq!(gap["type"], "gap", "since {since}: {gap}");
        assert_eq!(gap["from"].as_u64(), Some(seq + 1), "since {since}: {gap}");
        assert_eq!(gap["to"].as_u64(), Some(since), "since {since}: {gap}");
        assert!(
            gap["message"].as_str().unwrap().contains("are lost"),
            "{gap}"
        );
        // Nothing is replayed; the next event is a new one.
        let id = ptyd.create_argv(&["sleep", "1000"]);
        let e = sub.next_event();
        assert_eq!(e["type"], "pane.created", "since {since}: {e}");
        assert_eq!(e["pane"], id.as_str(), "since {since}: {e}");
        assert_eq!(e["seq"].as_u64(), Some(seq + 1), "since {since}: {e}");
        c.ok("pane.remove", json!({ "target": id, "force": true }));
    }
    c.ok("server.status", json!({}));
}

#[test]
fn event_numbers_go_on_across_restarts_of_the_server() {
    let mut ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    ptyd.create_argv(&["sleep", "1000"]);
    let event_seq = |c: &mut util::Conn| {
        c.ok("server.status", json!({}))["event_seq"]
            .as_u64()
            .expect("event_seq")
    };
    let first = event_seq(&mut c);

    // A restore-mode upgrade: the new binary restores from the snapshot.
    util::assert_exit(&ptyd.run_cli(&["upgrade", "--mode", "restore"]), 0);
    let mut c = ptyd.connect();
    let upgraded = event_seq(&mut c);
    assert!(upgraded > first, "{first} then {upgraded}");
    // A subscriber that had read up to `first` is answered at once: the
    // old server's last events (its own copy of the ring went with it)
    // as a gap, then the new server's, numbered after them.
    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({ "since": first }));
    let mut replayed = vec![sub.next_event()];
    while replayed.last().unwrap()["seq"].as_u64() != Some(upgraded) {
        replayed.push(sub.next_event());
    }
    assert_eq!(
        replayed[0]["from"].as_u64(),
        Some(first + 1),
        "{replayed:#?}"
    );
    assert_increasing(&replayed[1..]);
    assert!(
        replayed.iter().any(|e| e["type"] == "server.restored"),
        "{replayed:#?}"
    );

    // A stop, then a start.
    c.ok("server.stop", json!({}));
    c.read_until_eof();
    assert!(ptyd.wait_exit().success(), "{}", ptyd.stderr());
    ptyd.spawn_server();
    let mut c = ptyd.connect();
    let restarted = event_seq(&mut c);
    assert!(restarted > upgraded, "{upgraded} then {restarted}");
    let id = ptyd.create_argv(&["sleep", "1000"]);
    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({ "since": restarted }));
    let e = sub.next_event();
    assert_eq!(
        (&e["type"], &e["pane"]),
        (&json!("pane.created"), &json!(id))
    );
    assert_eq!(e["seq"].as_u64(), Some(restarted + 1), "{e}");
}

/// Prints `count` titles of about `size` bytes each, then `done`.
fn title_flood(count: usize, size: usize) -> String {
    format!(
        "pad=$(head -c {size} /dev/zero | tr '\\0' x); i=0; \
         while [ $i -lt {count} ]; do printf '\\033]2;T%d-%s\\007' $i \"$pad\"; i=$((i+1)); done; \
         echo done; exec sleep 1000"
    )
}

/// a replay larger than a client's 4 MiB queue arrives
/// whole, in order, at the pace the client reads; events the byte-bounded
/// ring dropped are announced by a `gap`, and live events follow the
/// replay with none lost or repeated.
#[test]
fn a_replay_larger_than_the_queue_arrives_whole_after_a_gap() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // 2600 titles of 4000 bytes (titles are cut at 4096 characters): over
    // 10 MB of events, more than the 8 MiB ring.
    let p = ptyd.create_argv(&["sh", "-c", &title_flood(2600, 4000)]);
    c.wait_text(&p, "done");
    let held = ptyd.status_json()["event_ring_bytes"].as_u64().unwrap();
    assert!(
        held <= 8 << 20 && held > 7 << 20,
        "the ring holds {held} bytes"
    );

    let mut sub = ptyd.connect();
    let last = sub.ok("events.subscribe", json!({ "since": 0 }))["seq"]
        .as_u64()
        .unwrap();
    // A live event while the replay is still queued.
    c.ok(
        "pane.resize",
        json!({ "target": p, "cols": 90, "rows": 20 }),
    );

    let gap = sub.next_event();
    assert_eq!(gap["type"], "gap", "{gap}");
    let first_kept = gap["to"].as_u64().unwrap() + 1;
    assert!(first_kept > 2, "the ring dropped nothing: {gap}");
    let mut bytes = 0;
    let mut expect = first_kept;
    loop {
        let e = sub.next_event();
        assert_eq!(e["seq"], expect, "an event lost or repeated");
        bytes += e.to_string().len();
        expect += 1;
        if e["type"] == "pane.resized" {
            break;
        }
    }
    assert_eq!(
        expect,
        last + 2,
        "the live event came before the replay ended"
    );
    assert!(bytes > 6 << 20, "replayed only {bytes} bytes");
    assert!(bytes < 9 << 20, "the ring held {bytes} bytes");
    // Still subscribed and served.
    c.ok("pane.kill", json!({ "target": p, "signal": "KILL" }));
    assert_eq!(sub.wait_event("pane.exited", &p)["seq"], last + 2);
}

/// Every event the server sends reads back as `protocol::events::Logged`
/// and serializes to the very same JSON: the typed enum is the wire.
#[test]
fn every_event_is_the_typed_enum_exactly() {
    use ptyd::protocol::events::{Event, Logged};
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    c.ok("workspace.create", json!({ "name": "side" }));
    let sh = ptyd.create_argv(&["/bin/sh"]);
    // Title, bell, cwd and the shell-integration marks, printed by the
    // shell itself (OSC 0, BEL, OSC 7, OSC 133 A/C/D).
    c.input(
        &sh,
        "printf '\\033]0;typed\\007\\007\\033]7;file:///tmp\\007\\033]133;A\\007\\033]133;C\\007\\033]133;D;3\\007'; echo marks-$((1+1))\r",
    );
    c.wait_text(&sh, "marks-2");
    c.ok(
        "pane.resize",
        json!({ "target": sh, "cols": 90, "rows": 20 }),
    );
    c.ok("pane.kill", json!({ "target": sh, "signal": "KILL" }));
    c.wait_exit(&sh);
    c.ok("pane.respawn", json!({ "target": sh }));
    c.ok("pane.remove", json!({ "target": sh, "force": true }));
    c.ok("workspace.remove", json!({ "target": "side" }));

    let mut sub = ptyd.connect();
    sub.ok("events.subscribe", json!({ "since": 0 }));
    let mut kinds = Vec::new();
    loop {
        let wire = sub.next_event();
        let logged: Logged = serde_json::from_value(wire.clone())
            .unwrap_or_else(|e| panic!("event {wire} is not the typed enum: {e}"));
        assert_eq!(serde_json::to_value(&logged).unwrap(), wire);
        assert!(logged.seq.is_some(), "{wire}");
        kinds.push(wire["type"].as_str().unwrap().to_string());
        if matches!(logged.event, Event::WorkspaceRemoved { .. }) {
            break;
        }
    }
    for kind in [
        "workspace.created",
        "pane.created",
        "pane.title",
        "pane.bell",
        "pane.cwd",
        "pane.prompt",
        "pane.command_started",
        "pane.command_finished",
        "pane.resized",
        "pane.exited",
        "pane.respawned",
        "pane.removed",
        "workspace.removed",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
}
