//! Hostile clients against the real binary: each test attacks a
//! server the way a misbehaving or malicious local client could, then checks
//! the server still serves everyone else with bounded memory: a bystander
//! pane created first is still listed by `pane.list` on a fresh connection,
//! and the server's RSS stays under [`RSS_CAP`].
//!
//! Each check prints a report line (`hostile: <attack>: rss .. MiB, pane.list
//! .. ms`); run with `--nocapture` to read them. Sizes are short for CI;
//! `PTYD_HOSTILE_LONG=1` runs the full sizes (100 MB of input and of random
//! bytes, 1000 idle connections).
//!
//! RSS is asserted against a generous cap only, never a time: the debug
//! binary the tests run idles near 10 MiB, and every buffer outside input
//! can grow is bounded (docs/design/security.md, "Bounds on what outside
//! input can grow"): 64 MiB of unfinished lines in all, 4 MiB queued per client,
//! 16 MiB of scrollback per pane, 8 MiB of events.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use util::{Conn, Ptyd};

/// The most resident memory the server may use during and after any attack.
const RSS_CAP_MIB: u64 = 256;

fn long() -> bool {
    std::env::var_os("PTYD_HOSTILE_LONG").is_some()
}

/// Short in CI, full with `PTYD_HOSTILE_LONG`.
fn size(ci: usize, full: usize) -> usize {
    if long() { full } else { ci }
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) the process has used.
fn cpu_time(pid: i32) -> Duration {
    let ticks = |n| {
        util::proc_stat_field(pid, n)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // USER_HZ is 100 on every Linux ABI.
    Duration::from_millis((ticks(14) + ticks(15)) * 10)
}

/// A server under attack, with a bystander pane to check on.
struct Target {
    ptyd: Ptyd,
    bystander: String,
}

impl Target {
    fn start() -> Target {
        let ptyd = Ptyd::start();
        let bystander = ptyd.create_argv(&["sleep", "100000"]);
        Target { ptyd, bystander }
    }

    /// Checks that the server serves a new client (`pane.list` lists the
    /// bystander) within bounded memory; prints the figures.
    fn check(&self, attack: &str) {
        let started = Instant::now();
        let mut c = self.ptyd.connect();
        let panes = c.panes();
        let latency = started.elapsed();
        // The serving process's, not the keeper's (`pid()`), which holds
        // no client's buffers.
        let pid = c.ok("server.status", json!({}))["pid"].as_i64().unwrap() as i32;
        let rss = rss_kib(pid);
        eprintln!(
            "hostile: {attack}: rss {:.1} MiB, pane.list {:.1} ms, cpu so far {:.2} s",
            rss as f64 / 1024.0,
            latency.as_secs_f64() * 1000.0,
            cpu_time(pid).as_secs_f64()
        );
        assert!(
            panes.iter().any(|p| p["id"] == self.bystander.as_str()),
            "{attack}: the bystander pane is gone: {panes:?}"
        );
        assert!(
            rss < RSS_CAP_MIB * 1024,
            "{attack}: server RSS {rss} KiB over the {RSS_CAP_MIB} MiB cap"
        );
    }
}

/// Writes `bytes` until done or the server stops taking them (closed the
/// connection); returns how much was written.
fn write_until_refused(stream: &mut UnixStream, total: usize, chunk: &[u8]) -> usize {
    let mut sent = 0;
    while sent < total {
        let n = chunk.len().min(total - sent);
        match stream.write(&chunk[..n]) {
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n,
        }
    }
    sent
}

/// Reads what the server sends until it closes the connection; returns it.
fn read_to_close(stream: &mut UnixStream) -> String {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A small deterministic generator for the random bytes (xorshift64).
fn random_bytes(n: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(n);
    out
}

#[test]
fn idle_connections_holding_partial_lines_cost_bounded_memory() {
    let t = Target::start();
    let n = size(300, 1000);
    let partial = vec![b'x'; 256 * 1024];
    let mut conns: Vec<Conn> = Vec::new();
    for _ in 0..n {
        conns.push(t.ptyd.connect());
    }
    t.check(&format!("{n} idle connections"));
    // Each sends a quarter MiB of a line that never ends: 75 MB in all at
    // 300, over the 64 MiB budget for unfinished lines.
    let mut refused = 0;
    for c in &mut conns {
        if c.stream.write_all(&partial).is_err() {
            refused += 1;
        }
    }
    t.check(&format!(
        "{n} connections with 256 KiB unfinished lines ({refused} cut off while sending)"
    ));
    drop(conns);
    t.check(&format!("{n} connections closed"));
}

#[test]
fn a_drip_fed_request_is_served_and_costs_little_cpu() {
    let t = Target::start();
    let mut c = t.ptyd.connect();
    // A valid request padded to `len` bytes, sent a few bytes per write.
    let len = size(32 * 1024, 256 * 1024);
    let head = r#"{"id":7,"method":"pane.list","params":{},"pad":""#;
    let mut line = head.as_bytes().to_vec();
    line.resize(len - 3, b' ');
    line.extend_from_slice(b"\"}\n");
    // Unknown members may be refused; either way the line must be answered.
    let cpu_before = cpu_time(t.ptyd.pid());
    for piece in line.chunks(4) {
        c.send_raw(piece);
    }
    let resp = c.next_response();
    let cpu = cpu_time(t.ptyd.pid()).saturating_sub(cpu_before);
    assert_eq!(resp["id"], 7, "{resp}");
    eprintln!(
        "hostile: {len} bytes dripped 4 at a time: answered, server cpu {:.2} s",
        cpu.as_secs_f64()
    );
    t.check("drip-fed request");
}

#[test]
fn a_huge_line_is_refused_and_the_connection_closed() {
    let t = Target::start();
    let mut s = UnixStream::connect(t.ptyd.socket()).unwrap();
    let total = size(16 << 20, 100 << 20);
    let sent = write_until_refused(&mut s, total, &[b'a'; 64 * 1024]);
    let reply = read_to_close(&mut s);
    assert!(reply.contains("too_large"), "{reply}");
    eprintln!("hostile: huge line: server closed after {sent} of {total} bytes sent");
    t.check("huge line");
}

#[test]
fn deep_json_invalid_utf8_and_random_bytes_get_errors() {
    let t = Target::start();
    // Deep nesting, as the line and inside params.
    for line in [
        format!("{}\n", "[".repeat(200_000)),
        format!(
            r#"{{"id":1,"method":"pane.create","params":{{"env":{}}}}}"#,
            "{\"a\":".repeat(100_000)
        ) + "\n",
    ] {
        let mut c = t.ptyd.connect();
        c.send_raw(line.as_bytes());
        let resp = c.next_response();
        assert!(resp["error"]["code"].is_string(), "{resp}");
    }
    t.check("deep JSON");

    let mut c = t.ptyd.connect();
    c.send_raw(b"{\"id\":2,\"method\":\"pane.list\",\"params\":{\"x\":\"\xff\xfe\"}}\n");
    let resp = c.next_response();
    assert_eq!(resp["error"]["code"], "parse_error", "{resp}");
    c.send_raw(b"\xc3\x28\xa0\xa1\n");
    let resp = c.next_response();
    assert_eq!(resp["error"]["code"], "parse_error", "{resp}");
    // The connection still serves a good request after bad ones.
    assert!(c.call("pane.list", json!({})).is_ok());
    t.check("invalid UTF-8");

    let total = size(4 << 20, 100 << 20);
    let bytes = random_bytes(total, 0x9e37_79b9_7f4a_7c15);
    let mut s = UnixStream::connect(t.ptyd.socket()).unwrap();
    let mut reader = s.try_clone().unwrap();
    let drain = std::thread::spawn(move || read_to_close(&mut reader).len());
    let sent = write_until_refused(&mut s, total, &bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let answered = drain.join().unwrap();
    eprintln!("hostile: random bytes: {sent} of {total} sent, {answered} bytes of answers");
    t.check("random bytes");
}

#[test]
fn a_flood_of_input_into_a_pane_is_bounded() {
    let t = Target::start();
    // Raw mode, no echo: the pane's program reads whatever arrives.
    let pane = t.ptyd.create(json!({
        "argv": ["sh", "-c", "stty raw -echo; echo ready; exec cat >/dev/null"]
    }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut c = t.ptyd.connect();
    c.ok(
        "pane.wait",
        json!({ "target": pane, "text": "ready", "include_screen": true, "timeout_ms": 20000 }),
    );
    let (_, mut attached) = t.ptyd.connect().attach(json!({ "target": pane }));
    let rss_before = rss_kib(t.ptyd.pid());
    let total = size(4 << 20, 100 << 20);
    let mut writer = attached.stream().try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let chunk =
            b"0123456789abcdef0123456789abcdef0123456789abcdef012345678901234\n".repeat(1024);
        let frame = util::frame(util::INPUT, &chunk);
        let mut sent = 0;
        while sent < total {
            if writer.write_all(&frame).is_err() {
                break;
            }
            sent += chunk.len();
        }
        sent
    });
    let sent = sender.join().unwrap();
    t.check(&format!("{} MB of input into a pane", total >> 20));
    // What is held is bounded (1 MiB pending, a client's unread frames),
    // not what went through: the pane's input buffer once kept everything
    // pasted while input kept arriving (100 MB held 100 MB; the long run
    // catches that).
    let grown = rss_kib(t.ptyd.pid()).saturating_sub(rss_before);
    assert!(grown < 32 * 1024, "RSS grew {grown} KiB during the flood");
    // Every byte was taken: the server reads the client only as fast as
    // the program reads (its socket fills up meanwhile), never ending the
    // attachment of a client whose program keeps reading.
    assert!(sent >= total, "only {sent} of {total} bytes were taken");
    attached.send(util::DETACH, b"");
    let exit = attached.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
    eprintln!("hostile: input flood: {sent} bytes sent, the attachment ended with {exit}");
    t.check("input flood over");
}

#[test]
fn a_never_reading_client_attached_to_a_flooding_pane_is_cut_off() {
    let t = Target::start();
    let pane = t
        .ptyd
        .create_argv(&["yes", "flood flood flood flood flood flood"]);
    let mut events = t.ptyd.connect();
    events.ok("events.subscribe", json!({}));
    // Attached and never read from.
    let (_, attached) = t.ptyd.connect().attach(json!({ "target": pane }));
    t.check("a never-reading client on a flooding pane");
    let detached = events.wait_event("client.detached", &pane);
    assert_eq!(detached["reason"], "too_slow", "{detached}");
    t.check("the never-reading client cut off");
    drop(attached);
    t.ptyd.connect().ok("pane.kill", json!({ "target": pane }));
}

#[test]
fn two_hundred_clients_at_once_are_all_served() {
    let t = Target::start();
    let n = 200;
    let socket = t.ptyd.socket();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (socket, barrier) = (socket.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let started = Instant::now();
                let mut c = Conn::connect(&socket);
                let panes = c.call("pane.list", json!({})).map(|r| r["panes"].clone());
                (panes, started.elapsed())
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for th in threads {
        let (panes, took) = th.join().unwrap();
        let panes = panes.expect("pane.list under 200 clients");
        assert_eq!(panes.as_array().map(Vec::len), Some(1));
        slowest = slowest.max(took);
    }
    eprintln!(
        "hostile: {n} clients at once: all served, slowest {:.1} ms",
        slowest.as_secs_f64() * 1000.0
    );
    t.check(&format!("{n} clients at once"));
}

#[test]
fn fd_exhaustion_then_recovery() {
    let dirs = util::Dirs::new();
    let ptyd = dirs.start_limited(&util::unique_name("h"), &[], None, Some(96));
    let t = Target {
        bystander: ptyd.create_argv(&["sleep", "100000"]),
        ptyd,
    };
    let mut idle = Vec::new();
    while let Some(c) = Conn::try_connect(&t.ptyd.socket()) {
        idle.push(c);
        if t.ptyd.stderr().contains("accept_starved") {
            break;
        }
    }
    util::eventually("the server to run out of fds", || {
        t.ptyd.stderr().contains("accept_starved")
    });
    eprintln!(
        "hostile: fd exhaustion: {} connections fill a 96-fd server (rss {:.1} MiB)",
        idle.len(),
        rss_kib(t.ptyd.pid()) as f64 / 1024.0
    );
    drop(idle);
    // A client landing before the server has seen the closes may be
    // refused (with the reason); one soon after is served.
    util::eventually("the server to serve again", || {
        util::serves(&t.ptyd.socket())
    });
    t.check("fd exhaustion over");
}

#[test]
fn half_sent_frames_of_every_kind_are_held_within_one_budget() {
    let t = Target::start();
    let mut events = t.ptyd.connect();
    events.ok("events.subscribe", json!({}));
    // Every client frame kind, and one no server knows; each announces a
    // full 1 MiB payload and sends all of it but its last byte. 12 of each
    // hold over 100 MiB in all, past the 64 MiB budget.
    let kinds: Vec<u8> = (1..=8).chain([200]).collect();
    let per_kind = 12;
    let announced = 1usize << 20;
    let mut frame = Vec::with_capacity(5 + announced);
    let mut held = Vec::new();
    for kind in &kinds {
        for _ in 0..per_kind {
            let (_, attached) = t.ptyd.connect().attach(json!({ "target": t.bystander }));
            frame.clear();
            frame.push(*kind);
            frame.extend_from_slice(&(announced as u32).to_be_bytes());
            frame.resize(5 + announced - 1, b'x');
            // A connection refused for the budget meanwhile is closed.
            let _ = attached.stream().write_all(&frame);
            held.push(attached);
        }
    }
    t.check(&format!("{} half-sent 1 MiB frames", held.len()));
    let detached = events.wait_event("client.detached", &t.bystander);
    assert_eq!(detached["reason"], "too_large", "{detached}");
    let status = t.ptyd.connect().ok("server.status", json!({}));
    let input = &status["client_input"];
    eprintln!("hostile: half-sent frames: client_input {input}");
    let budget = input["budget_bytes"].as_u64().unwrap();
    assert_eq!(budget, 64 << 20, "{input}");
    assert!(input["bytes"].as_u64().unwrap() <= budget, "{input}");
    assert!(input["refused"].as_u64().unwrap() >= 1, "{input}");
    // The rest still hold theirs: the budget, not the cap per connection,
    // is what bounded it.
    assert!(
        input["bytes"].as_u64().unwrap() >= budget / 2,
        "half-sent frames were dropped instead of held: {input}"
    );
    drop(held);
    util::eventually("the closed connections' input to be let go", || {
        let status = t.ptyd.connect().ok("server.status", json!({}));
        (status["client_input"]["bytes"].as_u64()? < 1 << 20).then_some(())
    });
    t.check("the half-sent frames' connections closed");
}
