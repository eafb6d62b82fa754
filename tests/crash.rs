//! Crash recovery through the real binary: the serving process is killed
//! (SIGKILL, SIGSEGV, SIGABRT) and the keeper (`keeper.rs`, the process
//! the harness starts) replaces it. After each crash: the server answers,
//! every pane has its old pid, no pane got SIGHUP, a counter pane's
//! numbers have no gap and no repeat across the crash, the attached
//! client is back, the keeper leaks no fd and leaves no zombie.
//!
//! `PTYD_CRASH_ROUNDS` sets the number of SIGKILL rounds (20 by default).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use util::{Conn, Ptyd, Tmux, shell_quote, zombie_children};

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A tiny deterministic generator (no dependency): xorshift.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn serving_pid(c: &mut Conn) -> i32 {
    c.ok("server.status", json!({}))["pid"].as_i64().unwrap() as i32
}

fn pane_pids(c: &mut Conn) -> BTreeMap<String, i64> {
    c.panes()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["pid"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

/// A server that answers again after a crash, with a pid other than
/// `dead`: connects and asks until one does (connections wait in the
/// listener's backlog meanwhile).
fn wait_replacement(ptyd: &Ptyd, dead: i32) -> (Conn, i32) {
    util::eventually("a replacement server to answer", || {
        // Refused only where the keeper let the listener go (a crash
        // loop's fresh start); otherwise connections wait in its backlog.
        std::os::unix::net::UnixStream::connect(ptyd.socket()).ok()?;
        let mut c = Conn::connect(&ptyd.socket());
        match c.try_call("server.status", json!({})) {
            Some(Ok(status)) => {
                let pid = status["pid"].as_i64().unwrap_or(0) as i32;
                (pid != dead && pid != 0).then_some((c, pid))
            }
            _ => None,
        }
    })
}

/// The counter pane's numbers: checks each is the last plus one (the last
/// line may be cut short: the counter is stopped mid-write). Returns the
/// first and last.
fn check_counter(text: &str, tag: &str) -> (u64, u64) {
    assert!(
        !text.contains("recovered after a server crash"),
        "{tag}: the recovery was not exact:\n{}",
        tail(text)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut prev: Option<u64> = None;
    let mut first = None;
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let Ok(n) = line.trim().parse::<u64>() else {
            panic!("{tag}: not a number: {line:?}\n{}", tail(text));
        };
        if let Some(p) = prev {
            if last && n != p + 1 {
                assert!(
                    (p + 1).to_string().starts_with(line.trim()),
                    "{tag}: {p} then {n}\n{}",
                    tail(text)
                );
                continue;
            }
            assert_eq!(
                n,
                p + 1,
                "{tag}: gap or repeat after {p}: {:?}",
                &lines[i.saturating_sub(5)..(i + 5).min(lines.len())]
            );
        }
        first.get_or_insert(n);
        prev = Some(n);
    }
    (first.unwrap_or(0), prev.unwrap_or(0))
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Sends `sig` to a pane's process (SIGSTOP/SIGCONT).
fn signal(pid: i64, sig: i32) {
    // SAFETY: plain kill(2) on the pid of this test's pane.
    unsafe { libc::kill(pid as i32, sig) };
}

struct Setup {
    ptyd: Ptyd,
    keeper: i32,
    counter: String,
    shell: String,
    hup_dir: std::path::PathBuf,
    tmux: Tmux,
}

fn setup(env: &[(&str, &str)]) -> Setup {
    let mut dirs = util::Dirs::new();
    dirs.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("crash"));
    let keeper = ptyd.pid();
    let hup_dir = ptyd.dirs.path("hups");
    let hup = |name: &str| {
        format!(
            "trap 'touch {}; exit 1' HUP",
            shell_quote(hup_dir.join(name).to_str().unwrap())
        )
    };
    let counter = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        &format!(
            "{}; i=0; while :; do i=$((i+1)); echo $i || exit 1; done",
            hup("counter")
        ),
    ]);
    let shell = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        &format!(
            "{}; stty -echo; echo shell-ready; while read -r line; do echo \"got:$line\"; done",
            hup("shell")
        ),
    ]);
    let mut c = ptyd.connect();
    c.wait_text(&shell, "shell-ready");
    let tmux = Tmux::new();
    tmux.new_session(100, 30, &util::outer_shell(&ptyd));
    tmux.wait_screen("the outer prompt", |s| s.contains("outer$"));
    tmux.keys(&["-l", &format!("{} attach {shell}", shell_quote(util::PTYD))]);
    tmux.keys(&["Enter"]);
    util::eventually("the attach client to connect", || {
        (c.pane_info(&shell).unwrap()["attached_clients"] == 1).then_some(())
    });
    Setup {
        ptyd,
        keeper,
        counter,
        shell,
        hup_dir,
        tmux,
    }
}

impl Setup {
    /// One crash of the serving process by `sig`, at a random moment, and
    /// every check after it.
    fn crash_round(&self, rng: &mut Rng, sig: i32, round: usize, fds: &mut Option<usize>) {
        let tag = format!("round {round} (signal {sig})");
        let mut c = self.ptyd.connect();
        let dead = serving_pid(&mut c);
        let pids = pane_pids(&mut c);
        drop(c);
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        let t0 = Instant::now();
        // SAFETY: kill(2) of the serving process this test started.
        unsafe { libc::kill(dead, sig) };
        if sig == libc::SIGSEGV {
            // Rust's handler for SIGSEGV (stack overflow detection) resets
            // the default action and returns, expecting a real fault to
            // recur; one sent by kill(2) does not, so send it again.
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: as above.
            unsafe { libc::kill(dead, sig) };
        }
        let counter_pid = pids[&self.counter];
        // Stop the counter so the crash point stays in its scrollback;
        // what it wrote until now is in the PTY or the dead server's ring.
        signal(counter_pid, libc::SIGSTOP);
        let (mut c, new_pid) = wait_replacement(&self.ptyd, dead);
        let t_answer = t0.elapsed();
        assert_eq!(pane_pids(&mut c), pids, "{tag}: pane pids changed");
        // Everything the counter wrote is read once the PTY is drained:
        // the pane goes quiet.
        c.ok(
            "pane.wait",
            json!({ "target": self.counter, "idle_ms": 150, "timeout_ms": 20_000 }),
        );
        let text = c.capture_all(&self.counter);
        let t_settled = t0.elapsed();
        let (first, top) = check_counter(&text, &tag);
        assert!(top > first, "{tag}: {first}..{top}");
        signal(counter_pid, libc::SIGCONT);
        let hups: Vec<_> = std::fs::read_dir(&self.hup_dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(hups.is_empty(), "{tag}: SIGHUP reached {hups:?}");
        util::eventually(format!("{tag}: the attached client to come back"), || {
            (c.pane_info(&self.shell).unwrap()["attached_clients"] == 1).then_some(())
        });
        // Output reaches the re-attached client (every few rounds: the
        // terminal round trip is the slow part of a round).
        if round % 4 == 1 {
            let token = format!("tok-{round}");
            c.input(&self.shell, &format!("{token}\n"));
            self.tmux
                .wait_screen(&format!("{tag}: the client to show {token}"), |s| {
                    s.contains(&format!("got:{token}"))
                });
        }
        util::eventually(format!("{tag}: no zombie under the keeper"), || {
            zombie_children(self.keeper).is_empty().then_some(())
        });
        assert!(util::process_gone(dead), "{tag}: the dead server is there");
        let status = c.ok("server.status", json!({}));
        assert_eq!(status["pid"], new_pid, "{tag}");
        assert_eq!(status["keeper"]["pid"], self.keeper, "{tag}: {status}");
        // The keeper's fds: a set per pane, the channel, the listener and
        // lock, the checkpoint: the same every round.
        let now = util::eventually(format!("{tag}: the keeper's fds to settle"), || {
            let n = fd_count(self.keeper);
            match fds {
                Some(base) if n != *base => Err(format!("{n} fds, {base} before")),
                _ => Ok(n),
            }
        });
        fds.get_or_insert(now);
        eprintln!(
            "{tag}: answered after {t_answer:?}, counter settled after {t_settled:?}, all checked after {:?}",
            t0.elapsed()
        );
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        use std::io::{Read, Write};
        // Best effort, never panicking: the test may have failed with the
        // server in any state (the harness kills what is left).
        if let Ok(mut s) = std::os::unix::net::UnixStream::connect(self.ptyd.socket()) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(b"{\"id\":1,\"method\":\"server.stop\",\"params\":{}}\n");
            let _ = s.read(&mut [0u8; 4096]);
        }
    }
}

fn rounds() -> usize {
    std::env::var("PTYD_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Rounds close together must not look like a crash loop.
const ENV: &[(&str, &str)] = &[("PTYD_CRASH_LOOP_WINDOW_MS", "0")];

#[test]
fn sigkill_of_the_serving_process_loses_no_pane_byte_or_client() {
    let s = setup(ENV);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
    let mut fds = None;
    for round in 1..=rounds() {
        s.crash_round(&mut rng, libc::SIGKILL, round, &mut fds);
    }
}

#[test]
fn sigsegv_and_abort_are_survived_too() {
    let s = setup(ENV);
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
    let s = setup(&[
        ("PTYD_CRASH_LOOP_WINDOW_MS", "0"),
        ("PTYD_RING_BYTES", "4096"),
    ]);
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
}

#[test]
fn a_crash_loop_backs_off_then_gives_up_the_checkpoint() {
    // Every replacement is killed as soon as it answers: the keeper backs
    // off between attempts (never spins) and keeps the panes' processes;
    // after `CRASH_LOOP_LIMIT` it starts a server without the checkpoint
    // (from the snapshot on disk) in case that is what kills it.
    // A generous window: under load a replacement may take a while to
    // answer, and each must count as part of the loop.
    let s = setup(&[("PTYD_CRASH_LOOP_WINDOW_MS", "30000")]);
    let mut c = s.ptyd.connect();
    let pids = pane_pids(&mut c);
    let mut dead = serving_pid(&mut c);
    drop(c);
    let mut starts = Vec::new();
    for _ in 0..3 {
        // SAFETY: kill(2) of the serving process this test started.
        unsafe { libc::kill(dead, libc::SIGKILL) };
        let (mut c, pid) = wait_replacement(&s.ptyd, dead);
        starts.push(Instant::now());
        assert_eq!(
            pane_pids(&mut c),
            pids,
            "the panes did not survive the loop"
        );
        dead = pid;
    }
    // The third replacement came after a longer back-off than the second.
    let gap = starts[2].duration_since(starts[1]);
    assert!(gap >= Duration::from_millis(300), "no back-off: {gap:?}");
    // SAFETY: as above.
    unsafe { libc::kill(dead, libc::SIGKILL) };
    let (mut c, _) = wait_replacement(&s.ptyd, dead);
    let status = c.ok("server.status", json!({}));
    assert_eq!(
        status["keeper"]["last_recovery"]["from"],
        "snapshot",
        "{status}\nkeeper's stderr:\n{}",
        s.ptyd.stderr()
    );
}

#[test]
fn after_an_upgrade_the_keeper_reexecs_into_the_new_binary_and_still_recovers() {
    let s = setup(ENV);
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
