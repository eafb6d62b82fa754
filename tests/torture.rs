//! The torture suite: everything at once against the real
//! binary, round after round, with the invariants checked after each.
//!
//! Running throughout: two counters printing increasing integers at full
//! speed (each recorded from its first byte by an attached client), an
//! echo pane, and a client thread connecting, attaching, typing, reading
//! its echo and detaching in a loop. Each round: random pane churn (a pane
//! created, a random one SIGKILLed and removed), then a live upgrade in one
//! of these ways, chosen at random:
//!
//! - plain: it must succeed;
//! - the new process SIGKILLed at a random moment after it appears,
//!   from its first milliseconds to well into its probation: the upgrade
//!   must fail (rollback or take-back) and the old server serve on;
//! - the new process SIGKILLed at a random moment of its probation: the
//!   old server takes everything back; it closes every connection (their
//!   streams were the new server's), clients attach again;
//! - the old process SIGKILLed at a random moment of the probation
//!   (never the first generation, which stays behind as the reaper): the
//!   new server must serve on.
//!
//! (The old process killed *before* the commit takes its panes with it
//! until a keeper holds their fds; not tortured here yet.)
//!
//! After every round: `ptyd status` answers; every surviving pane has its
//! pid and start time; no pane got SIGHUP; each counter's scrollback
//! counts without repeat, and without gap but one per take-back (what the
//! dead new server had read from the pane is lost until a keeper's ring
//! holds it); no zombie under the serving process or
//! the reaper; no fd leaked by the serving process; the saved snapshot
//! reads back strictly, with no repair needed. At the end each recorder's
//! stream counts from 1 without gap or repeat within each attachment.
//!
//! `PTYD_TORTURE_ROUNDS=N` (default 4: under a minute on a quiet machine) and
//! `PTYD_TORTURE_SEED=S` (default: from the clock, printed) for long or
//! reproducible runs.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod rng;
mod util;

use rng::Rng;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use util::{Conn, DETACH, INPUT, KillOnDrop, Ptyd, ppid, shell_quote, zombie_children};

/// Long enough that a kill aimed inside the probation lands inside it,
/// on a loaded machine too (kills aim at most [`MAX_KILL_DELAY`] after
/// the new process appears, and the probation starts later still).
const PROBATION_MS: u64 = 3000;
const MAX_KILL_DELAY: Duration = Duration::from_millis(1200);

fn rounds() -> u64 {
    util::env_number("PTYD_TORTURE_ROUNDS", 4)
}

fn seed() -> u64 {
    std::env::var("PTYD_TORTURE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

// ---------------------------------------------------------------------------
// /proc

/// Open fds of `pid` by kind.
fn fd_kinds(pid: i32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return kinds;
    };
    for e in entries.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        let kind = if target == "/dev/ptmx" || target == "/dev/pts/ptmx" {
            "ptmx"
        } else if target.contains("pidfd") {
            "pidfd"
        } else if target.contains("memfd:ptyd-ring") {
            // A pane's output ring, shared with the keeper.
            "ring"
        } else if target.contains("memfd:ptyd-checkpoint")
            || target.contains("memfd:ptyd-history-log")
        {
            // The last crash checkpoint (kept to rewrite its event count in
            // place), any on their way to the keeper, and the history log
            // (from the first checkpoint with scrollback): not part of the
            // base.
            "checkpoint"
        } else if target.starts_with("socket:") {
            "socket"
        } else if target.starts_with("pipe:") {
            "pipe"
        } else {
            "other"
        };
        *kinds.entry(kind.to_string()).or_insert(0) += 1;
    }
    kinds
}

// ---------------------------------------------------------------------------
// Counting.

/// Checks that `lines` count up by one each, except for at most
/// `gaps_allowed` jumps forward; never a repeat. Returns the first and
/// last numbers and the gaps seen.
fn check_counting(lines: &[&str], gaps_allowed: u64, what: &str) -> (u64, u64, u64) {
    let mut gaps = 0;
    let mut first = None;
    let mut prev: Option<u64> = None;
    for line in lines {
        let n: u64 = line
            .trim_end_matches('\r')
            .parse()
            .unwrap_or_else(|_| panic!("{what}: {line:?} is not a number (after {prev:?})"));
        first.get_or_insert(n);
        if let Some(p) = prev {
            assert!(
                n > p,
                "{what}: {n} after {p}: a repeat (output duplicated or torn)"
            );
            if n > p + 1 {
                gaps += 1;
                assert!(
                    gaps <= gaps_allowed,
                    "{what}: {n} after {p}: a gap (output lost), with {gaps_allowed} take-backs to explain gaps"
                );
            }
        }
        prev = Some(n);
    }
    (first.unwrap_or(0), prev.unwrap_or(0), gaps)
}

/// A recorder's segments: the first counts from 1; each later one starts
/// mid-stream (its first, partial line is skipped) and goes on from where
/// the previous ended; within a segment nothing is lost or repeated, and
/// only each segment's very end may be cut short. Returns the last number.
fn check_segments(segments: &[Vec<u8>], what: &str) -> u64 {
    let mut last_seen = 0;
    for (i, seg) in segments.iter().enumerate() {
        let text = String::from_utf8_lossy(seg);
        let mut lines: Vec<&str> = text.split('\n').collect();
        lines.pop(); // the cut-off tail (or "")
        if i > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        if lines.is_empty() {
            continue;
        }
        let what = format!("{what}, segment {i}");
        let (first, last, _) = check_counting(&lines, 0, &what);
        if i == 0 {
            assert_eq!(first, 1, "{what}: the stream does not start at 1");
        }
        assert!(
            first > last_seen,
            "{what}: starts at {first}, after {last_seen}"
        );
        last_seen = last;
    }
    last_seen
}

// ---------------------------------------------------------------------------
// The world.

struct Counter {
    id: String,
    pid: i64,
    start: Value,
    marker: PathBuf,
    recorder: Option<Recorder>,
}

/// An attached client recording a pane's output on a thread, as segments:
/// one per attachment. A take-back closes every connection (their streams
/// were the dead new server's), so the recorder attaches again and skips
/// the redraw that starts the new attachment.
struct Recorder {
    lines: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Vec<Vec<u8>>>,
}

impl Recorder {
    fn start(first: util::Attached, socket: PathBuf, pane: String) -> Recorder {
        let lines = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&lines);
        let thread = std::thread::spawn(move || {
            let mut segments = vec![Vec::new()];
            let mut attached = first;
            let mut skip_redraw = false;
            loop {
                match attached.next_frame() {
                    Some((util::OUTPUT, payload)) => {
                        if std::mem::take(&mut skip_redraw) {
                            continue;
                        }
                        let n = payload.iter().filter(|b| **b == b'\n').count();
                        counter.fetch_add(n as u64, Ordering::SeqCst);
                        segments.last_mut().unwrap().extend_from_slice(&payload);
                    }
                    Some((util::EXIT, _)) => return segments,
                    Some((kind, _)) => panic!("recorder of {pane}: frame kind {kind}"),
                    None => {
                        // Closed without EXIT: attach again.
                        attached =
                            util::eventually(format!("{pane}'s recorder to attach again"), || {
                                std::panic::catch_unwind(AssertUnwindSafe(|| {
                                    Conn::connect(&socket).attach(json!({ "target": pane })).1
                                }))
                                .ok()
                            });
                        segments.push(Vec::new());
                        skip_redraw = true;
                    }
                }
            }
        });
        Recorder { lines, thread }
    }

    fn wait_lines_beyond(&self, n: u64, what: &str) {
        util::eventually(what, || self.lines.load(Ordering::SeqCst) > n);
    }

    fn finish(self) -> Vec<Vec<u8>> {
        self.thread.join().expect("a recorder panicked")
    }
}

#[derive(Clone)]
struct Victim {
    id: String,
    pid: i64,
}

#[derive(Default)]
struct Tally {
    plain: u64,
    new_killed: u64,
    old_killed: u64,
    upgrades_ok: u64,
    upgrades_failed: u64,
    /// New servers killed in their probation: everything taken back.
    take_backs: u64,
    panes_killed: u64,
    panes_created: u64,
    client_cycles: u64,
    client_failures_excused: u64,
}

/// Shared with the client thread.
struct Clients {
    stop: AtomicBool,
    pause: AtomicBool,
    idle: AtomicBool,
    /// Bumped right before every SIGKILL of a server process and again once
    /// the upgrade it hit has answered: odd while a kill is in flight. A
    /// client cycle that fails while it changed, or that started while it
    /// was odd, lost its connection with that process (connections a new
    /// server accepted die with it, and a take-back closes the rest).
    kills: AtomicU64,
    cycles: AtomicU64,
    excused: AtomicU64,
    failures: Mutex<Vec<String>>,
}

/// One connect-attach-type-read-detach cycle; panics on any failure (the
/// caller catches it).
fn client_cycle(socket: &std::path::Path, cat: &str, n: u64) {
    let c = Conn::connect(socket);
    let (_, mut a) = c.attach(json!({ "target": cat }));
    let token = format!("client-{n}-typed");
    a.send(INPUT, format!("{token}\n").as_bytes());
    a.read_until(&token);
    a.send(DETACH, b"");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
}

fn client_loop(socket: PathBuf, cat: String, shared: Arc<Clients>) {
    let mut n = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        if shared.pause.load(Ordering::SeqCst) {
            shared.idle.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        shared.idle.store(false, Ordering::SeqCst);
        n += 1;
        let kills = shared.kills.load(Ordering::SeqCst);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| client_cycle(&socket, &cat, n)));
        shared.cycles.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = r {
            if kills % 2 == 1 || shared.kills.load(Ordering::SeqCst) != kills {
                shared.excused.fetch_add(1, Ordering::SeqCst);
            } else {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                shared
                    .failures
                    .lock()
                    .unwrap()
                    .push(format!("cycle {n}: {msg}"));
            }
        }
    }
    shared.idle.store(true, Ordering::SeqCst);
}

struct World {
    ptyd: Ptyd,
    /// Generation 1: the harness's child, the reaper after the first
    /// upgrade. Never killed.
    reaper: i32,
    rng: Rng,
    counters: Vec<Counter>,
    cat: String,
    cat_pid: i64,
    victims: Vec<Victim>,
    clients: Arc<Clients>,
    client_thread: Option<std::thread::JoinHandle<()>>,
    /// Every server process this test saw, killed on drop if still there.
    tracked: Vec<KillOnDrop>,
    /// The serving process's fds minus what its panes and clients
    /// account for, per kind of generation (first or later): constant
    /// unless something leaks.
    fd_base: BTreeMap<bool, usize>,
    tally: Tally,
    _markers: tempfile::TempDir,
}

impl World {
    fn start(seed: u64) -> World {
        let dirs = util::Dirs::new();
        let config = dirs.state.join("config").join("ptyd");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            format!("upgrade_probation_ms = {PROBATION_MS}\n"),
        )
        .unwrap();
        let ptyd = dirs.start(&util::unique_name("torture"));
        let reaper = ptyd.pid();
        let markers = tempfile::tempdir().unwrap();
        let mut counters = Vec::new();
        for i in 0..2 {
            let marker = markers.path().join(format!("counter-{i}-got-sighup"));
            let script = format!(
                "trap 'echo hup >> {}' HUP; i=0; while :; do i=$((i+1)); echo $i || exit 1; done",
                shell_quote(marker.to_str().unwrap())
            );
            let mut c = ptyd.connect();
            let info = c.ok(
                "pane.create",
                json!({ "argv": ["/bin/sh", "-c", script], "attach": true }),
            );
            let id = info["id"].as_str().unwrap().to_string();
            let recorder = Recorder::start(c.into_attached(), ptyd.socket(), id.clone());
            recorder.wait_lines_beyond(10, "a counter's first lines");
            counters.push(Counter {
                id,
                pid: info["pid"].as_i64().unwrap(),
                start: info["start_token"].clone(),
                marker,
                recorder: Some(recorder),
            });
        }
        let mut c = ptyd.connect();
        let cat = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
        c.wait_text(&cat, "ready");
        let cat_pid = c.pane(&cat)["pid"].as_i64().unwrap();
        let clients = Arc::new(Clients {
            stop: AtomicBool::new(false),
            pause: AtomicBool::new(false),
            idle: AtomicBool::new(false),
            kills: AtomicU64::new(0),
            cycles: AtomicU64::new(0),
            excused: AtomicU64::new(0),
            failures: Mutex::new(Vec::new()),
        });
        let client_thread = {
            let (socket, cat, shared) = (ptyd.socket(), cat.clone(), Arc::clone(&clients));
            std::thread::spawn(move || client_loop(socket, cat, shared))
        };
        World {
            ptyd,
            reaper,
            rng: Rng(seed),
            counters,
            cat,
            cat_pid,
            victims: Vec::new(),
            clients,
            client_thread: Some(client_thread),
            tracked: Vec::new(),
            fd_base: BTreeMap::new(),
            tally: Tally::default(),
            _markers: markers,
        }
    }

    fn conn(&self) -> Conn {
        self.ptyd.connect()
    }

    fn serving_pid(&self) -> i32 {
        self.conn().ok("server.status", json!({}))["pid"]
            .as_i64()
            .unwrap() as i32
    }

    fn track(&mut self, pid: i32) {
        self.tracked.push(KillOnDrop::pid(pid));
    }

    /// A pane created, a random victim SIGKILLed and removed.
    fn churn_panes(&mut self) {
        let mut c = self.conn();
        if self.victims.len() < 4 || self.rng.below(2) == 0 {
            let argv = if self.rng.below(2) == 0 {
                json!(["sleep", "600"])
            } else {
                json!(["/bin/sh", "-c", "exec cat"])
            };
            let info = c.ok("pane.create", json!({ "argv": argv }));
            self.victims.push(Victim {
                id: info["id"].as_str().unwrap().to_string(),
                pid: info["pid"].as_i64().unwrap(),
            });
            self.tally.panes_created += 1;
        }
        if !self.victims.is_empty() && self.rng.below(2) == 0 {
            let v = self
                .victims
                .remove(self.rng.below(self.victims.len() as u64) as usize);
            let _ = nix_kill(v.pid as i32, libc::SIGKILL);
            c.wait_exit(&v.id);
            c.ok("pane.remove", json!({ "target": v.id }));
            self.tally.panes_killed += 1;
        }
    }

    /// A random moment: often the very first milliseconds, sometimes deep
    /// into the sequence or the probation.
    fn kill_delay(&mut self) -> Duration {
        let max_us = match self.rng.below(4) {
            0 => 1,
            1 => 3_000,
            2 => 60_000,
            _ => MAX_KILL_DELAY.as_micros() as u64,
        };
        Duration::from_micros(self.rng.below(max_us))
    }

    /// Runs `server.upgrade` on a thread; returns its answer later.
    fn upgrade_async(&self) -> std::thread::JoinHandle<Result<Value, (String, String)>> {
        let socket = self.ptyd.socket();
        std::thread::spawn(move || Conn::connect(&socket).call("server.upgrade", json!({})))
    }

    fn upgrade_round(&mut self, round: u64) -> String {
        let old = self.serving_pid();
        let mode = match std::env::var("PTYD_TORTURE_MODE").ok() {
            Some(m) => m.parse().unwrap(),
            None => self.rng.below(4),
        };
        match mode {
            3 => {
                self.tally.new_killed += 1;
                let delay = self.kill_delay();
                let answer = self.upgrade_async();
                // Committed once the serving pid changes: the new server
                // is in its probation.
                let mut c = self.conn();
                let new = util::eventually(format!("round {round}: the commit"), || {
                    let pid = c.ok("server.status", json!({}))["pid"].as_i64().unwrap() as i32;
                    (pid != old).then_some(pid)
                });
                self.track(new);
                std::thread::sleep(delay);
                self.clients.kills.fetch_add(1, Ordering::SeqCst);
                let _ = nix_kill(new, libc::SIGKILL);
                let r = answer.join().unwrap();
                // Settled: the kill's effects on connections are over.
                self.clients.kills.fetch_add(1, Ordering::SeqCst);
                let desc = format!("new server {new} SIGKILLed {delay:?} into its probation");
                self.tally.take_backs += 1;
                match &r {
                    Err((code, msg)) if code == "upgrade_failed" => {
                        assert!(msg.contains("SIGKILL"), "round {round}: {desc}: {msg}");
                        self.tally.upgrades_failed += 1;
                    }
                    other => panic!("round {round}: {desc}: the upgrade answered {other:?}"),
                }
                assert_eq!(
                    self.serving_pid(),
                    old,
                    "round {round}: {desc}: serving pid"
                );
                format!("{desc}: {}", short(&r))
            }
            1 => {
                self.tally.new_killed += 1;
                let delay = self.kill_delay();
                let answer = self.upgrade_async();
                // The new process, as soon as the old server reports it
                // (its status names it from the `prepare` phase on; the
                // `preflight` one names the version probe), or, if the
                // status first answered after the blackout, the new
                // server answering it.
                let mut c = self.conn();
                let new = util::eventually(format!("round {round}: the new server's pid"), || {
                    let st = c.ok("server.status", json!({}));
                    let phase = &st["upgrade"]["phase"];
                    if phase.is_string() && phase != "preflight" {
                        return st["upgrade"]["new_pid"].as_i64().map(|p| p as i32);
                    }
                    let pid = st["pid"].as_i64().unwrap() as i32;
                    (pid != old).then_some(pid)
                });
                self.track(new);
                std::thread::sleep(delay);
                self.clients.kills.fetch_add(1, Ordering::SeqCst);
                let _ = nix_kill(new, libc::SIGKILL);
                let r = answer.join().unwrap();
                // Settled: the kill's effects on connections are over.
                self.clients.kills.fetch_add(1, Ordering::SeqCst);
                let desc = format!("new server {new} SIGKILLed {delay:?} after it was reported");
                match &r {
                    Err((code, msg)) if code == "upgrade_failed" => {
                        assert!(msg.contains("SIGKILL"), "round {round}: {desc}: {msg}");
                        self.tally.upgrades_failed += 1;
                        if msg.contains("during probation") {
                            self.tally.take_backs += 1;
                        }
                    }
                    other => panic!("round {round}: {desc}: the upgrade answered {other:?}"),
                }
                let now = self.serving_pid();
                assert_eq!(now, old, "round {round}: {desc}: serving pid");
                format!("{desc}: {}", short(&r))
            }
            2 if old != self.reaper => {
                self.tally.old_killed += 1;
                let delay = self.kill_delay();
                let answer = self.upgrade_async();
                // Committed once the serving pid changes; then the old
                // process is in its probation.
                let mut c = self.conn();
                let new = util::eventually(format!("round {round}: the commit"), || {
                    let pid = c.ok("server.status", json!({}))["pid"].as_i64().unwrap() as i32;
                    (pid != old).then_some(pid)
                });
                self.track(new);
                std::thread::sleep(delay);
                self.clients.kills.fetch_add(1, Ordering::SeqCst);
                let _ = nix_kill(old, libc::SIGKILL);
                let r = answer.join().unwrap();
                // Settled: the kill's effects on connections are over.
                self.clients.kills.fetch_add(1, Ordering::SeqCst);
                let desc = format!("old server {old} SIGKILLed {delay:?} into its probation");
                let report = r.unwrap_or_else(|e| panic!("round {round}: {desc}: {e:?}"));
                assert_eq!(report["new_pid"], new, "round {round}: {desc}");
                assert_eq!(self.serving_pid(), new, "round {round}: {desc}");
                self.tally.upgrades_ok += 1;
                desc
            }
            _ => {
                self.tally.plain += 1;
                let r = self.upgrade_async().join().unwrap();
                let report = r.unwrap_or_else(|e| {
                    panic!(
                        "round {round}: a plain upgrade failed: {e:?}\n{}",
                        self.ptyd.stderr()
                    )
                });
                let new = report["new_pid"].as_i64().unwrap() as i32;
                self.track(new);
                assert_eq!(report["probation"], "survived", "{report}");
                assert_eq!(report["from"]["pid"], old, "{report}");
                assert_eq!(self.serving_pid(), new);
                self.tally.upgrades_ok += 1;
                format!("plain {old} -> {new}")
            }
        }
    }

    /// Every invariant, after a round.
    fn check(&mut self, round: u64) {
        let what = |s: &str| format!("after round {round}: {s}");
        // `ptyd status` answers.
        let out = self.ptyd.run_cli(&["status"]);
        util::assert_exit(&out, 0);

        let mut c = self.conn();
        let panes: BTreeMap<String, Value> = c
            .panes()
            .into_iter()
            .map(|p| (p["id"].as_str().unwrap().to_string(), p))
            .collect();
        // Pids and start times unchanged; nobody got SIGHUP.
        for k in &self.counters {
            let p = &panes[&k.id];
            assert_eq!(p["pid"], k.pid, "{}", what("a counter's pid"));
            assert_eq!(p["state"], "running", "{}", what("a counter's state"));
            assert_eq!(
                util::start_time(k.pid as i32).map(|s| json!(s.parse::<u64>().unwrap())),
                Some(k.start.clone()),
                "{}",
                what("a counter's process is not the one it started with")
            );
            assert!(!k.marker.exists(), "{}", what("a counter got SIGHUP"));
        }
        assert_eq!(panes[&self.cat]["pid"], self.cat_pid, "{}", what("cat"));
        for v in &self.victims {
            assert_eq!(panes[&v.id]["pid"], v.pid, "{}", what("a pane's pid"));
            assert_eq!(panes[&v.id]["state"], "running", "{}", what(&v.id));
        }
        // Each counter's scrollback counts without gap or repeat.
        for k in &self.counters {
            let cap = c.ok("pane.capture", json!({ "target": k.id, "start": -3000 }));
            let lines: Vec<&str> = cap["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap())
                .filter(|l| !l.is_empty())
                .collect();
            // The last line on screen may be a number still being printed.
            let body = &lines[..lines.len().saturating_sub(1)];
            assert!(body.len() > 10, "{}", what("too little scrollback"));
            // A take-back loses what the dead new server had read (until
            // a keeper's ring holds it): one gap each at most.
            check_counting(
                body,
                self.tally.take_backs,
                &what(&format!("{}'s scrollback", k.id)),
            );
        }
        // No zombie, under the serving process or the reaper.
        let serving = self.serving_pid();
        let reaper = self.reaper;
        util::eventually(what("no zombies"), || {
            let z: Vec<i32> = zombie_children(serving)
                .into_iter()
                .chain(zombie_children(reaper))
                .collect();
            if z.is_empty() {
                Ok(())
            } else {
                Err(format!("zombies: {z:?}"))
            }
        });
        self.check_fds(serving, &mut c, round);
        // The snapshot reads back strictly, with nothing to repair.
        c.ok("server.save", json!({}));
        let path = self.ptyd.dirs.session_path(&self.ptyd.namespace);
        let text = std::fs::read_to_string(&path).unwrap();
        let snap: ptyd::persist::snapshot::Snapshot = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", what("session.json does not parse")));
        ptyd::persist::tree::strict(&snap, []).unwrap_or_else(|e| panic!("{}: {e}", what("")));
        let ids: HashSet<String> = snap.panes.iter().map(|p| p.id.clone()).collect();
        let live: HashSet<String> = panes.keys().cloned().collect();
        assert_eq!(ids, live, "{}", what("the snapshot's panes"));
        let repaired = ptyd::persist::tree::repair(snap);
        assert!(
            repaired.fixes.is_empty(),
            "{}: {:?}",
            what("the snapshot needed repairs"),
            repaired.fixes
        );
    }

    /// With the client thread paused and every departed connection gone,
    /// the serving process's fds beyond its panes and clients are what they
    /// were after earlier rounds in a process of the same kind.
    fn check_fds(&mut self, serving: i32, c: &mut Conn, round: u64) {
        self.clients.pause.store(true, Ordering::SeqCst);
        util::eventually("the client thread to pause", || {
            self.clients.idle.load(Ordering::SeqCst)
        });
        // The two recorders (`connections` leaves out `c`, the asker).
        util::eventually(format!("round {round}: 2 connections left"), || {
            let now = c.ok("server.status", json!({}))["connections"].clone();
            if now == 2 {
                Ok(())
            } else {
                Err(format!("{now}"))
            }
        });
        let listed = c.panes();
        let panes = listed.len();
        let running: Vec<i64> = listed
            .iter()
            .filter(|p| p["state"] == "running")
            .map(|p| p["pid"].as_i64().unwrap())
            .collect();
        let inherited = running
            .iter()
            .filter(|p| ppid(**p as i32) != Some(serving))
            .count();
        let first_generation = serving == self.reaper;
        let expected_base = self.fd_base.get(&first_generation).copied();
        let settled = util::eventually(format!("round {round}: fds to settle"), || {
            let kinds = fd_kinds(serving);
            let ptmx = kinds.get("ptmx").copied().unwrap_or(0);
            let pidfd = kinds.get("pidfd").copied().unwrap_or(0);
            let rings = kinds.get("ring").copied().unwrap_or(0);
            let checkpoints = kinds.get("checkpoint").copied().unwrap_or(0);
            let total: usize = kinds.values().sum();
            let base = total - ptmx - pidfd - rings - checkpoints;
            let ok = ptmx == running.len()
                && pidfd == inherited
                && rings <= panes
                // The kept one, a pre-copy + manifest pair in flight, and
                // the history log.
                && checkpoints <= 4
                && expected_base.is_none_or(|b| b == base);
            if ok {
                Ok(base)
            } else {
                Err(format!(
                    "{kinds:?}: {} running panes, {inherited} inherited; base {base}, expected {expected_base:?}",
                    running.len()
                ))
            }
        });
        self.fd_base.insert(first_generation, settled);
        self.clients.pause.store(false, Ordering::SeqCst);
    }

    fn finish(mut self) -> Tally {
        self.clients.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.client_thread.take() {
            t.join().unwrap();
        }
        let failures = self.clients.failures.lock().unwrap().clone();
        assert!(
            failures.is_empty(),
            "client cycles failed with no server killed meanwhile: {failures:#?}"
        );
        self.tally.client_cycles = self.clients.cycles.load(Ordering::SeqCst);
        self.tally.client_failures_excused = self.clients.excused.load(Ordering::SeqCst);
        // Each recorder's whole stream counts from 1.
        let mut c = self.conn();
        for k in &mut self.counters {
            c.ok("pane.kill", json!({ "target": k.id, "signal": "KILL" }));
            c.wait_exit(&k.id);
            let segments = k.recorder.take().unwrap().finish();
            assert!(
                segments.len() as u64 <= 1 + self.tally.take_backs,
                "{}: {} attachments, for {} take-backs",
                k.id,
                segments.len(),
                self.tally.take_backs
            );
            let last = check_segments(&segments, &format!("{}'s recorded stream", k.id));
            assert!(last > 100, "{} only reached {last}", k.id);
        }
        drop(c);
        let mut stop = self.conn();
        stop.ok("server.stop", json!({}));
        stop.read_until_eof();
        let status = self.ptyd.wait_exit();
        assert!(status.success(), "the lineage ended with {status}");
        std::mem::take(&mut self.tally)
    }
}

impl Drop for World {
    /// A failed round must not leave the client thread hammering a
    /// server that is gone.
    fn drop(&mut self) {
        self.clients.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.client_thread.take() {
            let _ = t.join();
        }
    }
}

fn nix_kill(pid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn short(r: &Result<Value, (String, String)>) -> String {
    match r {
        Ok(v) => format!("ok (new pid {})", v["new_pid"]),
        Err((code, msg)) => format!("{code}: {}", &msg[..msg.len().min(160)]),
    }
}

#[test]
fn torture() {
    let seed = seed();
    let rounds = rounds();
    eprintln!("torture: seed {seed} (PTYD_TORTURE_SEED), {rounds} rounds (PTYD_TORTURE_ROUNDS)");
    let started = Instant::now();
    let mut w = World::start(seed);
    w.check(0);
    for round in 1..=rounds {
        let t0 = Instant::now();
        w.churn_panes();
        let t1 = Instant::now();
        let what = w.upgrade_round(round);
        let t2 = Instant::now();
        w.check(round);
        eprintln!(
            "torture: round {round}: {what} (churn {:?}, upgrade {:?}, checks {:?})",
            t1 - t0,
            t2 - t1,
            t2.elapsed()
        );
    }
    let t = w.finish();
    eprintln!(
        "torture: {rounds} rounds in {:?}: {} plain, {} new killed, {} old killed; {} upgrades ok, {} failed as they should; {} panes created, {} killed; {} client cycles ({} cut by a kill)",
        started.elapsed(),
        t.plain,
        t.new_killed,
        t.old_killed,
        t.upgrades_ok,
        t.upgrades_failed,
        t.panes_created,
        t.panes_killed,
        t.client_cycles,
        t.client_failures_excused
    );
}
