//! What the crash tests share (`crash.rs`, `crash_upgrade.rs`): a server
//! with a counter pane, a shell and an attached client (in tmux), the crash
//! of the serving process at a random moment, and every check after it.

#![allow(dead_code)] // Each test file uses a different part.

use super::util::{self, Conn, Ptyd, Tmux, shell_quote, zombie_children};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The keeper's fds split in two: its checkpoint's (pre-copy, manifest,
/// history log, and the description it keeps for the fd store), which
/// come with the first checkpoint a server writes (or the first that has
/// scrollback, for the log) and are swapped as a set by each next one, and
/// all the others, which must be the same round after round.
pub fn keeper_fds(pid: i32) -> (usize, usize) {
    let (mut checkpoint, mut other) = (0, 0);
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let target = std::fs::read_link(e.path()).unwrap_or_default();
        let target = target.to_string_lossy();
        if target.contains("memfd:ptyd-checkpoint")
            || target.contains("memfd:ptyd-history-log")
            || target.contains("memfd:ptyd-keeper-checkpoint")
        {
            checkpoint += 1;
        } else {
            other += 1;
        }
    }
    (checkpoint, other)
}

/// A tiny deterministic generator (no dependency): xorshift.
pub struct Rng(pub u64);
impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

pub fn serving_pid(c: &mut Conn) -> i32 {
    c.ok("server.status", json!({}))["pid"].as_i64().unwrap() as i32
}

/// A server that answers again after a crash, with a pid other than
/// `dead`: connects and asks until one does (connections wait in the
/// listener's backlog meanwhile).
pub fn wait_replacement(ptyd: &Ptyd, dead: i32) -> (Conn, i32) {
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
pub fn check_counter(text: &str, tag: &str) -> (u64, u64) {
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

pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Sends `sig` to a pane's process (SIGSTOP/SIGCONT).
pub fn signal(pid: i64, sig: i32) {
    // SAFETY: plain kill(2) on the pid of this test's pane.
    unsafe { libc::kill(pid as i32, sig) };
}

pub struct Setup {
    pub ptyd: Ptyd,
    pub keeper: i32,
    pub counter: String,
    pub shell: String,
    pub hup_dir: std::path::PathBuf,
    pub tmux: Tmux,
}

/// The state before a crash, which every check after it compares with.
pub struct Before {
    /// The serving process's pid.
    pub serving: i32,
    pub pids: BTreeMap<String, i64>,
    pub at: Instant,
}

/// A shell `trap` that records a SIGHUP as the file `name` in the
/// server's `hups` directory (which every check reads), then exits.
pub fn hup_trap(ptyd: &Ptyd, name: &str) -> String {
    format!(
        "trap 'touch {}; exit 1' HUP",
        shell_quote(ptyd.dirs.path("hups").join(name).to_str().unwrap())
    )
}

/// A pane printing 1, 2, 3... at full speed (a SIGHUP is recorded as
/// `counter`; it ends when its terminal is gone): its pane id.
pub fn counter_pane(ptyd: &Ptyd) -> String {
    ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        &format!(
            "{}; i=0; while :; do i=$((i+1)); echo $i || exit 1; done",
            hup_trap(ptyd, "counter")
        ),
    ])
}

pub fn setup(env: &[(&str, &str)]) -> Setup {
    setup_with_config(env, "")
}

/// As [`setup`], with `config` as the server's config.toml.
pub fn setup_with_config(env: &[(&str, &str)], config: &str) -> Setup {
    let mut dirs = util::Dirs::new();
    if !config.is_empty() {
        let dir = dirs.state.join("config/ptyd");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), config).unwrap();
    }
    dirs.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("crash"));
    let keeper = ptyd.pid();
    let hup_dir = ptyd.dirs.path("hups");
    let counter = counter_pane(&ptyd);
    let shell = ptyd.create_argv(&[
        "/bin/sh",
        "-c",
        &format!(
            "{}; stty -echo; echo shell-ready; while read -r line; do echo \"got:$line\"; done",
            hup_trap(&ptyd, "shell")
        ),
    ]);
    let mut c = ptyd.connect();
    c.wait_text(&shell, "shell-ready");
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    tmux.type_line(&format!("{} attach {shell}", shell_quote(util::PTYD)));
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
    /// The serving pid and the panes' pids, before a crash.
    pub fn before(&self) -> Before {
        let mut c = self.ptyd.connect();
        Before {
            serving: serving_pid(&mut c),
            pids: c.pane_pids(),
            at: Instant::now(),
        }
    }

    /// One crash of the serving process by `sig`, at a random moment, and
    /// every check after it.
    pub fn crash_round(&self, rng: &mut Rng, sig: i32, round: usize, fds: &mut Option<usize>) {
        let tag = format!("round {round} (signal {sig})");
        let mut before = self.before();
        let dead = before.serving;
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        before.at = Instant::now();
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
        self.check_after(&before, dead, &tag, round % 4 == 1, fds);
    }

    /// Every check after `killed` died: a server other than `killed`
    /// answers, with every pane's old pid, the counter's numbers have no
    /// gap and no repeat, no pane got SIGHUP, the attached client is back
    /// (and shows new output if `roundtrip`), no zombie under the keeper,
    /// one serving process, the keeper's fds as in `fds` (the first call's
    /// count). Returns the new serving pid.
    pub fn check_after(
        &self,
        before: &Before,
        killed: i32,
        tag: &str,
        roundtrip: bool,
        fds: &mut Option<usize>,
    ) -> i32 {
        let counter_pid = before.pids[&self.counter];
        // Stop the counter so the crash point stays in its scrollback;
        // what it wrote until now is in the PTY or the dead server's ring.
        signal(counter_pid, libc::SIGSTOP);
        let (mut c, new_pid) = wait_replacement(&self.ptyd, killed);
        let t_answer = before.at.elapsed();
        assert_eq!(c.pane_pids(), before.pids, "{tag}: pane pids changed");
        // Everything the counter wrote is read once the PTY is drained:
        // the pane goes quiet.
        c.ok(
            "pane.wait",
            json!({ "target": self.counter, "idle_ms": 150, "timeout_ms": 20_000 }),
        );
        let text = c.capture_all(&self.counter);
        let t_settled = before.at.elapsed();
        let (first, top) = check_counter(&text, tag);
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
        if roundtrip {
            let token = format!("tok-{}", before.at.elapsed().as_nanos());
            c.input(&self.shell, &format!("{token}\n"));
            self.tmux
                .wait_screen(&format!("{tag}: the client to show {token}"), |s| {
                    s.contains(&format!("got:{token}"))
                });
        }
        util::eventually(format!("{tag}: no zombie under the keeper"), || {
            zombie_children(self.keeper).is_empty().then_some(())
        });
        assert!(
            util::process_gone(killed),
            "{tag}: the killed server is there"
        );
        // Exactly one server serves: the keeper's only other `server`
        // descendant is the one answering (a stray half-imported server,
        // or an old one that did not let go, would be a second).
        util::eventually(format!("{tag}: one serving process"), || {
            let servers = self.servers();
            if servers == [new_pid] {
                Ok(())
            } else {
                Err(format!("{servers:?}, {new_pid} answers"))
            }
        });
        let status = c.ok("server.status", json!({}));
        assert_eq!(status["pid"], new_pid, "{tag}");
        assert_eq!(status["keeper"]["pid"], self.keeper, "{tag}: {status}");
        // The keeper's fds: a set per pane, the channel, the listener and
        // lock: the same every round; and one checkpoint's (at most four).
        let now = util::eventually(format!("{tag}: the keeper's fds to settle"), || {
            let (checkpoint, n) = keeper_fds(self.keeper);
            match fds {
                _ if checkpoint > 4 => Err(format!("{checkpoint} checkpoint fds")),
                Some(base) if n != *base => Err(format!("{n} fds, {base} before")),
                _ => Ok(n),
            }
        });
        fds.get_or_insert(now);
        eprintln!(
            "{tag}: answered after {t_answer:?}, counter settled after {t_settled:?}, all checked after {:?}",
            before.at.elapsed()
        );
        new_pid
    }

    /// The `ptyd server` processes under the keeper (its descendants by
    /// parent pid), the keeper excluded, sorted.
    pub fn servers(&self) -> Vec<i32> {
        let all = util::all_pids();
        let mut under = vec![self.keeper];
        let mut grew = true;
        while grew {
            grew = false;
            for &p in &all {
                if !under.contains(&p) && util::ppid(p).is_some_and(|pp| under.contains(&pp)) {
                    under.push(p);
                    grew = true;
                }
            }
        }
        let mut servers: Vec<i32> = under[1..]
            .iter()
            .copied()
            .filter(|p| {
                let argv = util::cmdline(*p as i64);
                let ptyd = argv.first().is_some_and(|a| {
                    std::path::Path::new(a)
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("ptyd"))
                });
                ptyd && argv.iter().any(|a| a == "server")
            })
            .collect();
        servers.sort_unstable();
        servers
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
