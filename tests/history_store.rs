//! The history log keeps a history's compressed blocks as they are
//! (`server/continuity/history_log.rs`, `term/cold.rs`), through the real
//! binary: a pane's history (lines across block edges, wide characters,
//! hyperlinks, colours, wrapped lines) comes back byte for byte after a
//! SIGKILL of the serving process, a live upgrade and a restore from the
//! snapshot, while the keeper's log memfd holds it compressed (well below
//! its raw size); a block record damaged in the log reads back as one
//! marker line where its lines were and nothing else is lost; blocks the
//! global budget drops give their pages in the log back, and the marker
//! line it leaves survives a crash.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

mod crash_support;

use crash_support::wait_replacement;
use serde_json::{Value, json};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use util::{Dirs, Ptyd, eventually};

/// A command printing `n` lines of every kind, then `DONE`, then waiting:
/// hyperlinked, coloured, wide characters, combining marks, lines that
/// wrap at 80 columns; lengths vary so block edges fall anywhere. The
/// lines compress as logs do.
fn printer(n: u32) -> Value {
    let script = format!(
        "i=1; while [ $i -le {n} ]; do \
           case $((i % 5)) in \
             0) printf '\\033]8;;http://example.com/%d\\033\\\\link %d\\033]8;;\\033\\\\ after\\n' $i $i ;; \
             1) printf '\\033[3%dmcolour %d\\033[0m plain tail\\n' $((i % 8)) $i ;; \
             2) printf '中文字符 %d e\\314\\201 wide\\n' $i ;; \
             3) printf 'wrapping line %d %s\\n' $i \"$(printf '%*s' $((i % 150)) '' | tr ' ' x)\" ;; \
             *) printf 'log 2026-12-02 worker %d handled request %d\\n' $((i % 7)) $i ;; \
           esac; i=$((i + 1)); done; echo DONE; exec sleep 1000"
    );
    json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 10 })
}

/// `ptyd capture PANE -e -S -N`: the whole history and screen with
/// colours and links.
fn capture(ptyd: &Ptyd, pane: &str) -> String {
    let out = ptyd.run_cli(&["capture", pane, "-e", "-S", "-1000000"]);
    assert!(out.status.success(), "{out:?}");
    util::stdout(&out)
}

/// The keeper's fd for the history log.
fn keeper_log(keeper: i32) -> PathBuf {
    std::fs::read_dir(format!("/proc/{keeper}/fd"))
        .unwrap()
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|t| t.to_string_lossy().contains("memfd:ptyd-history-log"))
        })
        .map(|e| e.path())
        .expect("the keeper holds the history log")
}

/// Bytes of the keeper's history log in memory (its pages not punched).
fn log_bytes(keeper: i32) -> u64 {
    std::fs::metadata(keeper_log(keeper)).map_or(0, |m| m.blocks() * 512)
}

/// The `history` references of the checkpoint the keeper holds: every
/// `"history"` member with `blocks` in its memfds' JSON lines.
fn checkpoint_histories(keeper: i32) -> Vec<Value> {
    fn walk(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if k == "history" && v.get("blocks").is_some() {
                        out.push(v.clone());
                    }
                    walk(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{keeper}/fd"))
        .unwrap()
        .flatten()
    {
        let target = std::fs::read_link(e.path()).unwrap_or_default();
        if !target.to_string_lossy().contains("memfd:ptyd-") {
            continue;
        }
        let bytes = std::fs::read(e.path()).unwrap_or_default();
        for line in bytes.split(|&b| b == b'\n') {
            if let Ok(v) = serde_json::from_slice::<Value>(line) {
                walk(&v, &mut out);
            }
        }
    }
    out
}

fn setup(config: &str) -> (Ptyd, String) {
    let dirs = Dirs::new();
    dirs.write_config(config);
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("hstore"));
    let mut c = ptyd.connect();
    let pane = c.create(printer(6000))["id"].as_str().unwrap().to_string();
    c.wait_text(&pane, "DONE");
    (ptyd, pane)
}

/// Waits for a checkpoint naming the pane's history in blocks; returns
/// the keeper's log bytes then.
fn wait_logged(ptyd: &Ptyd, blocks: usize) -> u64 {
    eventually("the history's blocks in the keeper's checkpoint", || {
        let h = checkpoint_histories(ptyd.pid());
        h.iter()
            .any(|h| h["blocks"].as_array().is_some_and(|b| b.len() >= blocks))
            .then_some(())
    });
    log_bytes(ptyd.pid())
}

#[test]
fn history_comes_back_byte_for_byte_through_a_crash_an_upgrade_and_a_restore() {
    let (mut ptyd, pane) = setup("scrollback_lines = 100000\n");
    let before = capture(&ptyd, &pane);
    assert!(before.contains("\x1b]8;;http://example.com/5"), "no link");
    assert!(before.contains("中文字符 2"), "no wide characters");
    assert!(before.lines().count() > 6000, "{}", before.lines().count());

    // The keeper's log holds the history compressed: well under its raw
    // size (the lines as the history packs them).
    let logged = wait_logged(&ptyd, 5);
    let raw = ptyd.connect().pane(&pane)["history_bytes"]["raw"]
        .as_u64()
        .unwrap();
    assert!(
        logged * 2 < raw,
        "the history log holds {logged} bytes for {raw} of history"
    );

    let serving = ptyd.serving_pid();
    crash_support::signal(serving as i64, libc::SIGKILL);
    let (mut c, _) = wait_replacement(&ptyd, serving);
    assert_eq!(capture(&ptyd, &pane), before, "after the crash");
    // Put back as blocks: nothing waits to be compressed, and the new
    // server's log is still the compressed one.
    let status = c.ok("server.status", json!({}));
    assert!(
        status["keeper"]["history_log_bytes"].as_u64().unwrap() * 2 < raw,
        "{status}"
    );

    let report = c.ok("server.upgrade", json!({}));
    assert!(report["new_pid"].as_i64().is_some(), "{report}");
    assert_eq!(capture(&ptyd, &pane), before, "after the upgrade");
    let logged = log_bytes(ptyd.pid());
    assert!(logged * 2 < raw, "after the upgrade: {logged} for {raw}");

    // A reboot: the snapshot's history, then the restored marker.
    c.save();
    let mut stop = ptyd.connect();
    stop.ok("server.stop", json!({}));
    stop.read_until_eof();
    assert!(ptyd.wait_exit().success(), "{}", ptyd.stderr());
    ptyd.spawn_server();
    let after = capture(&ptyd, &pane);
    let history = before.trim_end_matches('\n');
    let kept: Vec<&str> = history.lines().take(6000).collect();
    let back: Vec<&str> = after.lines().take(6000).collect();
    assert_eq!(back, kept, "after the restore");
}

#[test]
fn a_damaged_block_record_is_one_marker_line_and_nothing_else_is_lost() {
    let (ptyd, pane) = setup("scrollback_lines = 100000\n");
    wait_logged(&ptyd, 5);
    let before = capture(&ptyd, &pane);
    // Read again until it parses: the keeper may be taking a newer
    // checkpoint in while it is read.
    let history = eventually("a checkpoint naming the history's blocks", || {
        checkpoint_histories(ptyd.pid())
            .into_iter()
            .find(|h| h["blocks"].as_array().is_some_and(|b| b.len() >= 5))
    });
    // The second block's record: junk in the middle of its LZ4 bytes.
    let block = &history["blocks"][1];
    let (offset, len, lines) = (
        block[0].as_u64().unwrap(),
        block[1].as_u64().unwrap(),
        block[2].as_u64().unwrap(),
    );
    let log = std::fs::OpenOptions::new()
        .write(true)
        .open(keeper_log(ptyd.pid()))
        .unwrap();
    log.write_all_at(&[0xa5; 64], offset + len / 2).unwrap();
    drop(log);

    let serving = ptyd.serving_pid();
    crash_support::signal(serving as i64, libc::SIGKILL);
    let (_c, _) = wait_replacement(&ptyd, serving);
    let after = capture(&ptyd, &pane);
    let marker = format!(
        "[ptyd: {lines} history lines lost here: their stored block is damaged and was refused]"
    );
    let at = after
        .lines()
        .position(|l| l.contains(&marker))
        .unwrap_or_else(|| panic!("no marker {marker:?} in:\n{after}"));
    let (old, new): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    assert_eq!(new[..at], old[..at], "before the damaged block");
    assert_eq!(
        new[at + 1..],
        old[at + lines as usize..],
        "after the damaged block"
    );
}

#[test]
fn blocks_the_budget_drops_give_their_pages_in_the_log_back() {
    const LIMIT: u64 = 1 << 20;
    let (ptyd, pane) = setup("scrollback_lines = 1000000\nscrollback_bytes = 1073741824\n");
    let mut c = ptyd.connect();
    // Lines that compress about 3:1, fast (awk, not a shell loop).
    let script = "awk 'BEGIN { srand(7); for (i = 1; i <= 250000; i++) \
        printf \"big line %d of a log that says about the same each time %08x\\n\", i, int(rand() * 4294967295) }'; \
        echo BIG-DONE; exec sleep 1000";
    let more = c.create(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 10 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.wait_text(&more, "BIG-DONE");
    let full = wait_logged(&ptyd, 20);
    ptyd.dirs.write_config(&format!(
        "scrollback_total_bytes = {LIMIT}\nscrollback_lines = 1000000\n\
         scrollback_bytes = 1073741824\n"
    ));
    let out = ptyd.run_cli(&["config", "reload"]);
    assert!(out.status.success(), "{out:?}");
    eventually("history back within scrollback_total_bytes", || {
        let s = ptyd.status_json();
        (s["history"]["stored_bytes"].as_u64().unwrap() <= LIMIT).then_some(())
    });
    // The next checkpoints no longer name the dropped blocks: their pages
    // go, down to about what the histories hold compressed (plus each
    // pane's hot lines and the pages partly used).
    let slack = 2 * (128 << 10) + (64 << 10);
    let logged = eventually("the log's pages given back", || {
        let logged = log_bytes(ptyd.pid());
        if logged <= LIMIT + slack {
            Ok(logged)
        } else {
            Err(format!(
                "the log holds {logged} bytes (was {full}) for {LIMIT} of history"
            ))
        }
    });
    assert!(logged * 2 < full, "{logged} of {full}");
    // The marker the budget left is a block of its own in the log: after
    // a crash it is still there, and the lines after it are the same.
    let oldest = |c: &mut util::Conn| {
        let page = c.ok(
            "pane.history",
            json!({ "target": more, "start": 0, "count": 1000 }),
        );
        page["lines"].clone()
    };
    let before = oldest(&mut c);
    let first = before[0].as_str().unwrap_or_default();
    assert!(
        first.contains("older history lines dropped here"),
        "{first}"
    );
    let serving = ptyd.serving_pid();
    crash_support::signal(serving as i64, libc::SIGKILL);
    let (mut c, _) = wait_replacement(&ptyd, serving);
    assert_eq!(oldest(&mut c), before, "after the crash");
    assert!(capture(&ptyd, &pane).contains("DONE"));
}

/// The serving process's anonymous memory (its heap), from
/// `/proc/PID/smaps_rollup`.
fn anonymous_bytes(pid: i32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Anonymous:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("Anonymous in smaps_rollup")
}

/// Waits until the pane's history is read from the keeper's log: what the
/// serving process holds of it (`history_bytes.heap`) is a small part of
/// what it stores. Returns the bytes stored.
fn wait_held_once(c: &mut util::Conn, pane: &str) -> u64 {
    eventually("the history's blocks read from the log", || {
        let bytes = &c.pane(pane)["history_bytes"];
        let (stored, heap) = (bytes["stored"].as_u64(), bytes["heap"].as_u64());
        match (stored, heap) {
            (Some(stored), Some(heap)) if heap * 4 < stored => Ok(stored),
            _ => Err(format!("history_bytes {bytes}")),
        }
    })
}

#[test]
fn the_serving_process_holds_a_logged_history_once() {
    let (ptyd, _) = setup("scrollback_lines = 1000000\nscrollback_bytes = 1073741824\n");
    let mut c = ptyd.connect();
    let serving = ptyd.serving_pid();
    let before = anonymous_bytes(serving);
    // Random hex, which LZ4 barely shrinks: megabytes of blocks.
    let script = "awk 'BEGIN { srand(11); for (i = 1; i <= 150000; i++) \
        printf \"%d %08x %08x %08x %08x %08x\\n\", i, int(rand() * 4294967295), \
        int(rand() * 4294967295), int(rand() * 4294967295), int(rand() * 4294967295), \
        int(rand() * 4294967295) }'; echo BIG-DONE; exec sleep 1000";
    let big = c.create(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 10 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.wait_text(&big, "BIG-DONE");
    let stored = wait_held_once(&mut c, &big);
    assert!(stored > 4 << 20, "only {stored} bytes of history");
    // Its blocks are in the keeper's log; the serving process's heap grew
    // by far less than them (the freed blocks are given back to the
    // system a moment after the checkpoint that let them go).
    let logged = log_bytes(ptyd.pid());
    assert!(
        logged >= stored / 2,
        "{logged} bytes in the log for {stored}"
    );
    eventually("the serving process's heap without the blocks", || {
        let grown = anonymous_bytes(serving).saturating_sub(before);
        if grown * 3 < stored {
            Ok(())
        } else {
            Err(format!(
                "the heap grew by {grown} bytes for {stored} of history"
            ))
        }
    });
    // And it reads back as it was printed.
    let out = ptyd.run_cli(&["capture", &big, "-S", "-1000000"]);
    assert!(out.status.success(), "{out:?}");
    let text = util::stdout(&out);
    let numbers: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(numbers, (1..=150000).collect::<Vec<u64>>());
}

/// Multipliers of the hashes the reader pane below prints: lines LZ4
/// barely shrinks, which the test can tell apart.
const HASHES: [u64; 3] = [2_654_435_761, 2_246_822_519, 3_266_489_917];

/// Lines `from..=to` as the reader pane below prints them.
fn entries(from: u64, to: u64) -> Vec<String> {
    (from..=to)
        .map(|i| {
            let [a, b, c] = HASHES.map(|m| i * m % (1 << 32));
            format!("entry {i:06} {a:08x} {b:08x} {c:08x}")
        })
        .collect()
}

#[test]
fn a_history_read_from_the_log_stays_right_as_its_records_are_freed() {
    let (ptyd, _) = setup("scrollback_lines = 40000\n");
    let mut c = ptyd.connect();
    // Two floods, the second on input: it evicts every block of the
    // first, whose records the log frees and gives back.
    let [a, b, h] = HASHES;
    let body = format!(
        "for (i = FROM; i <= TO; i++) printf \"entry %06d %08x %08x %08x\\n\", i, \
         (i * {a}) % 4294967296, (i * {b}) % 4294967296, (i * {h}) % 4294967296"
    );
    let awk = |from: u64, to: u64| {
        format!(
            "awk 'BEGIN {{ {} }}'",
            body.replace("FROM", &from.to_string())
                .replace("TO", &to.to_string())
        )
    };
    let script = format!(
        "{}; echo FIRST-DONE; read x; {}; echo SECOND-DONE; exec sleep 1000",
        awk(1, 60000),
        awk(60001, 120000)
    );
    let pane = c.create(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 10 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let history = |_: &mut util::Conn| -> Vec<String> {
        let out = ptyd.run_cli(&["capture", &pane, "-S", "-1000000"]);
        assert!(out.status.success(), "{out:?}");
        util::stdout(&out)
            .lines()
            .map(|l| l.trim_end().to_string())
            .filter(|l| l.starts_with("entry "))
            .collect()
    };
    c.wait_text(&pane, "FIRST-DONE");
    wait_held_once(&mut c, &pane);
    let first = history(&mut c);
    assert!(first.len() > 30000, "{} lines", first.len());
    assert_eq!(first, entries(60001 - first.len() as u64, 60000));
    c.ok("pane.input", json!({ "target": pane, "data": "go\n" }));
    c.wait_text(&pane, "SECOND-DONE");
    // The first flood's records freed and given back: the log holds about
    // the history there is now.
    let stored = wait_held_once(&mut c, &pane);
    eventually("the first flood's records given back", || {
        let logged = log_bytes(ptyd.pid());
        if logged < 2 * stored + (512 << 10) {
            Ok(())
        } else {
            Err(format!("the log holds {logged} bytes for {stored}"))
        }
    });
    let second = history(&mut c);
    assert!(second.len() > 30000, "{} lines", second.len());
    assert_eq!(second, entries(120001 - second.len() as u64, 120000));
}
