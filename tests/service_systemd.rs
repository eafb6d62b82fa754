//! ptyd as a user service under a real `systemd --user` manager
//! (`systemd_support`), end to end, in the order a user lives it:
//! `ptyd service install`, socket activation by `ptyd new -d`, a counter
//! pane, a shell and an attached client; three `systemctl --user reload`s
//! (live upgrades: pane pids and the main PID unchanged, the counter
//! continuous, the client still attached); `kill -9` of the serving process
//! (panes kept), of the main PID without the fd store (the service restarts
//! and restores the panes from the snapshot) and with it (the panes are
//! taken over, same pids); `daemon-reload` while panes run; a reload to a
//! binary that cannot serve (exits non-zero, the unit stays active with
//! every pane, its status says what failed); `restart`; the service
//! starting with the user manager (`default.target`); `ptyd service
//! uninstall` while running; and `stop`, after which nothing is left in
//! the unit's cgroup. Also the unit's OOM and fd-limit settings as the
//! processes see them, and the logs the manager received.
//!
//! Needs root (CI has it); elsewhere it says why it skips, unless
//! `PTYD_REQUIRE_SYSTEMD` is set (`.ci/run` sets it), when that fails.

#![cfg(target_os = "linux")]

mod util;

mod crash_support;
mod systemd_support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use systemd_support::UserManager;
use util::{KillOnDrop, eventually};

const UNIT: &str = "ptyd.service";

/// The manager and the installed binary.
struct Service {
    m: UserManager,
    ptyd: PathBuf,
}

impl Service {
    /// `ptyd ARGS` as the user; must succeed; its stdout.
    #[track_caller]
    fn ptyd_ok(&self, args: &[&str]) -> String {
        let out = self.m.run(self.ptyd.to_str().unwrap(), args);
        assert!(
            out.status.success(),
            "ptyd {args:?} failed ({}):\n{}{}\nmanager log:\n{}",
            out.status,
            util::stdout(&out),
            util::stderr(&out),
            self.m.log()
        );
        util::stdout(&out)
    }

    #[track_caller]
    fn api(&self, method: &str, params: Value) -> Value {
        let out = self.ptyd_ok(&["api", method, &params.to_string()]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{method}: {e}: {out:?}"))
    }

    /// Pane id → pid, for panes with a running process.
    fn running_pids(&self) -> BTreeMap<String, i64> {
        self.api("pane.list", json!({}))["panes"]
            .as_array()
            .expect("panes")
            .iter()
            .filter_map(|p| Some((p["id"].as_str()?.to_string(), p["pid"].as_i64()?)))
            .filter(|(_, pid)| *pid > 0)
            .collect()
    }

    fn pane_ids(&self) -> Vec<String> {
        self.api("pane.list", json!({}))["panes"]
            .as_array()
            .expect("panes")
            .iter()
            .filter_map(|p| Some(p["id"].as_str()?.to_string()))
            .collect()
    }

    fn capture_all(&self, pane: &str) -> String {
        self.api("pane.capture", json!({ "target": pane, "start": -100_000 }))["text"]
            .as_str()
            .expect("capture text")
            .to_string()
    }

    fn serving_pid(&self) -> i64 {
        self.api("server.status", json!({}))["pid"]
            .as_i64()
            .expect("pid")
    }

    fn main_pid(&self) -> i32 {
        self.m.show(UNIT, "MainPID").parse().unwrap_or(0)
    }

    fn active_state(&self) -> String {
        self.m.show(UNIT, "ActiveState")
    }

    /// A counter pane (one line per 20 ms) and a bash pane; their ids.
    fn counter_and_shell(&self) -> (String, String) {
        let counter = self
            .ptyd_ok(&[
                "new",
                "-d",
                "--",
                "/bin/sh",
                "-c",
                "i=0; while :; do i=$((i+1)); echo $i || exit 1; sleep 0.02; done",
            ])
            .trim()
            .to_string();
        let shell = self
            .ptyd_ok(&[
                "new",
                "-d",
                "--no-shell-integration",
                "--",
                "/bin/bash",
                "--norc",
            ])
            .trim()
            .to_string();
        (counter, shell)
    }

    /// The shell in `pane` still runs commands.
    fn shell_answers(&self, pane: &str, tag: &str) {
        self.api(
            "pane.input",
            json!({ "target": pane, "data": format!("echo {tag}-$((6*7))\r") }),
        );
        eventually(format!("the shell to answer ({tag})"), || {
            self.capture_all(pane).contains(&format!("{tag}-42"))
        });
    }

    /// The counter's numbers so far are contiguous; the last one.
    fn counter_continuous(&self, pane: &str, tag: &str) -> u64 {
        let text = self.capture_all(pane);
        crash_support::check_counter(&text, tag).1
    }

    /// The counter counts on past `after`.
    fn counter_beyond(&self, pane: &str, after: u64, tag: &str) {
        eventually(format!("the counter to pass {after} ({tag})"), || {
            self.counter_continuous(pane, tag) > after + 5
        });
    }

    /// `systemctl --user reload ptyd`, which must succeed; its wall time.
    fn reload(&self) -> std::time::Duration {
        let t = Instant::now();
        self.m.systemctl_ok(&["reload", UNIT]);
        t.elapsed()
    }
}

/// Sends SIGKILL to `pid`.
fn kill9(pid: i32) {
    assert!(pid > 0, "no pid to kill");
    // SAFETY: kill has no memory preconditions.
    assert_eq!(
        unsafe { libc::kill(pid, libc::SIGKILL) },
        0,
        "kill -9 {pid}"
    );
}

/// `oom_score_adj` of a process.
fn oom_score_adj(pid: i64) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .unwrap_or_else(|e| panic!("oom_score_adj of {pid}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// The hard `Max open files` of a process.
fn hard_nofile(pid: i64) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields[fields.len() - 2].parse().unwrap()
}

/// `kill -9` of the main PID with the fd store: systemd restarts the unit,
/// whose new keeper takes every pane over (same pids, the shell answers,
/// the counter's numbers contiguous). Returns the new main PID.
fn kill_keeper_keeping_panes(
    s: &Service,
    pids: &BTreeMap<String, i64>,
    counter: &str,
    shell: &str,
) -> i32 {
    let keeper = s.main_pid();
    let last = s.counter_continuous(counter, "before the keeper died");
    kill9(keeper);
    let new = eventually("the service to restart from its fd store", || {
        let pid = s.main_pid();
        (pid != 0 && pid != keeper && s.active_state() == "active").then_some(pid)
    });
    assert_eq!(
        &s.running_pids(),
        pids,
        "the fd store did not keep the panes"
    );
    s.counter_beyond(counter, last, "after the keeper died");
    s.shell_answers(shell, &format!("keeper-{keeper}-killed"));
    new
}

/// `ptyd attach -t PANE` as the user, on a PTY whose output a thread
/// collects; the client and what it printed so far.
fn attach(s: &Service, pane: &str) -> (KillOnDrop, Arc<Mutex<Vec<u8>>>) {
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let slave = || std::process::Stdio::from(pty.slave.try_clone().unwrap());
    let mut cmd = s.m.command(s.ptyd.as_os_str(), &["attach", "-t", pane]);
    cmd.stdin(slave()).stdout(slave()).stderr(slave());
    let client = KillOnDrop::child(cmd.spawn().expect("starting ptyd attach"));
    drop(pty.slave);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let mut master = std::fs::File::from(pty.master);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (client, seen)
}

#[test]
fn the_service_under_a_real_user_manager() {
    let m = match UserManager::start() {
        Ok(m) => m,
        Err(why) if std::env::var_os("PTYD_REQUIRE_SYSTEMD").is_some() => {
            panic!(
                "ptyd under a real systemd --user manager cannot run: {why} (PTYD_REQUIRE_SYSTEMD is set)"
            )
        }
        Err(why) => {
            eprintln!("skipped: ptyd under a real systemd --user manager: {why}");
            return;
        }
    };
    let ptyd = m.install_binary(std::path::Path::new(util::PTYD), "ptyd");
    let s = Service { m, ptyd };

    // Install; the socket listens, the service waits for a client.
    let out = s.ptyd_ok(&["service", "install"]);
    assert!(out.contains("ran: systemctl --user daemon-reload"), "{out}");
    s.m.systemctl_ok(&["enable", UNIT, "ptyd.socket"]);
    s.m.systemctl_ok(&["start", "ptyd.socket"]);
    assert_eq!(s.active_state(), "inactive");

    // The first client starts it through the socket.
    let (counter, shell) = s.counter_and_shell();
    // READY=1 may reach the manager after the first reply reached us.
    eventually("the service to be active", || s.active_state() == "active");
    let keeper = s.main_pid();
    let serving = s.serving_pid();
    let in_unit = s.m.cgroup_pids(UNIT);
    assert!(
        in_unit.contains(&keeper) && in_unit.contains(&(serving as i32)),
        "keeper {keeper} and serving process {serving} must be in {UNIT}'s cgroup: {in_unit:?}"
    );
    s.shell_answers(&shell, "first");
    let pids = s.running_pids();
    assert_eq!(pids.len(), 2, "{pids:?}");

    // What the unit says about OOM and fds, as the processes see it.
    assert_eq!(s.m.show(UNIT, "OOMPolicy"), "continue");
    let keeper_adj = oom_score_adj(keeper.into());
    assert_eq!(oom_score_adj(serving), keeper_adj);
    for (id, pid) in &pids {
        assert_eq!(
            oom_score_adj(*pid),
            (keeper_adj + 500).min(1000),
            "pane {id} (pid {pid}) must be a likelier OOM victim than the keeper"
        );
    }
    let manager_hard = hard_nofile(s.m.manager_pid().into());
    assert_eq!(hard_nofile(keeper.into()), manager_hard.min(524_288));

    // An attached client, then three live upgrades.
    let (mut client, seen) = attach(&s, &counter);
    eventually("the attached client to show the counter", || {
        seen.lock().unwrap().len() > 100
    });
    let mut last = s.counter_continuous(&counter, "before the reloads");
    for round in 1..=3 {
        let before = s.serving_pid();
        let took = s.reload();
        eprintln!("systemctl --user reload {round}: {} ms", took.as_millis());
        assert_eq!(s.active_state(), "active");
        assert_eq!(s.main_pid(), keeper, "reload {round} changed the main PID");
        assert_ne!(s.serving_pid(), before, "reload {round} did not upgrade");
        assert_eq!(s.running_pids(), pids, "reload {round} changed the panes");
        s.counter_beyond(&counter, last, &format!("reload {round}"));
        last = s.counter_continuous(&counter, &format!("reload {round}"));
        let shown = seen.lock().unwrap().len();
        eventually(
            format!("the attached client to go on after reload {round}"),
            || seen.lock().unwrap().len() > shown + 50,
        );
        assert!(
            client.as_child_mut().try_wait().unwrap().is_none(),
            "the attached client ended at reload {round}"
        );
    }
    s.shell_answers(&shell, "reloaded");
    drop(client);

    // The serving process dies: the keeper replaces it, every pane kept.
    let dead = s.serving_pid();
    kill9(dead as i32);
    eventually("a replacement serving process", || {
        s.api("server.status", json!({}))["pid"].as_i64() != Some(dead)
    });
    assert_eq!(s.main_pid(), keeper);
    assert_eq!(s.active_state(), "active");
    assert_eq!(s.running_pids(), pids);
    s.counter_beyond(&counter, last, "after the serving process died");
    s.shell_answers(&shell, "server-killed");

    // The keeper dies, no fd store: systemd restarts the unit (killing the
    // panes' processes with it) and the panes come back from the snapshot.
    s.ptyd_ok(&["save"]);
    kill9(keeper);
    let keeper = eventually("the service to restart after its main PID died", || {
        let pid = s.main_pid();
        (pid != 0 && pid != keeper && s.active_state() == "active").then_some(pid)
    });
    for (id, pid) in &pids {
        let pid = *pid as i32;
        eventually(format!("pane {id}'s old process {pid} to be gone"), || {
            util::process_gone(pid)
        });
    }
    let ids = s.pane_ids();
    for id in pids.keys() {
        assert!(ids.contains(id), "pane {id} not restored: {ids:?}");
    }
    assert_eq!(s.m.show(UNIT, "NRestarts"), "1");

    // Without the drop-in the manager refused the keeper's probe, so it
    // stored nothing else (and said nothing about it).
    assert_eq!(s.m.show(UNIT, "NFileDescriptorStore"), "0");
    assert!(
        !s.m.log().contains("systemd's fd store"),
        "the keeper complained about a store the unit does not have:\n{}",
        s.m.log()
    );

    // The fd-store drop-in, then daemon-reload while panes run: nothing
    // changes; at the next reload the keeper finds the store and fills it.
    for id in &ids {
        s.ptyd_ok(&["rm", id, "--force"]);
    }
    let (counter, shell) = s.counter_and_shell();
    s.shell_answers(&shell, "fresh");
    let pids = s.running_pids();
    s.m.write_file(
        &s.m.home
            .join(".config/systemd/user/ptyd.service.d/fd-store.conf"),
        "[Service]\nFileDescriptorStoreMax=4096\nKillMode=process\n",
        0o644,
    );
    s.m.systemctl_ok(&["daemon-reload"]);
    assert_eq!(s.main_pid(), keeper, "daemon-reload changed the main PID");
    assert_eq!(s.running_pids(), pids, "daemon-reload changed the panes");
    assert_eq!(s.m.show(UNIT, "FileDescriptorStoreMax"), "4096");
    s.reload();
    eventually("the keeper to fill systemd's fd store", || {
        s.m.show(UNIT, "NFileDescriptorStore")
            .parse::<u32>()
            .unwrap_or(0)
            >= 6
    });
    // The serving process is a later generation (the reload's), not the
    // keeper's child: no parent-death signal ends it with the keeper, yet
    // it must not read on into output the next keeper cannot replay.
    let keeper = kill_keeper_keeping_panes(&s, &pids, &counter, &shell);

    // A reload to a binary that cannot serve: the reload fails, the unit
    // and every pane stay, the status says why.
    let real =
        s.m.install_binary(std::path::Path::new(util::PTYD), "ptyd-real");
    let failing = format!(
        "#!/bin/sh\nif [ -n \"$PTYD_HANDOFF_FD\" ]; then echo 'this build cannot serve' >&2; exit 3; fi\nexec {} \"$@\"\n",
        real.display()
    );
    s.m.write_file(&s.ptyd, &failing, 0o755);
    let serving = s.serving_pid();
    let out = s.m.systemctl(&["reload", UNIT]);
    assert!(
        !out.status.success(),
        "a reload to a binary that cannot serve succeeded"
    );
    assert_eq!(s.active_state(), "active");
    assert_eq!(s.main_pid(), keeper);
    assert_eq!(s.serving_pid(), serving);
    assert_eq!(s.running_pids(), pids);
    let status = s.m.show(UNIT, "StatusText");
    assert!(
        status.starts_with("upgrade failed") && status.contains("exited with code 3"),
        "the unit's status must say what failed: {status:?}"
    );
    s.shell_answers(&shell, "after-a-failed-reload");

    // Restart: stopping ends the panes; starting restores them.
    s.ptyd_ok(&["save"]);
    s.m.systemctl_ok(&["restart", UNIT]);
    let restarted = s.main_pid();
    assert_ne!(restarted, keeper);
    for (id, pid) in &pids {
        let pid = *pid as i32;
        eventually(
            format!("pane {id}'s process {pid} to end at restart"),
            || util::process_gone(pid),
        );
    }
    let ids = s.pane_ids();
    for id in pids.keys() {
        assert!(
            ids.contains(id),
            "pane {id} not restored at restart: {ids:?}"
        );
    }

    // A keeper that started with the store: its serving process is its
    // first, which dies with it, so no output is lost either.
    for id in &ids {
        s.ptyd_ok(&["rm", id, "--force"]);
    }
    let (counter, shell) = s.counter_and_shell();
    s.shell_answers(&shell, "restarted");
    let pids = s.running_pids();
    eventually("the keeper to fill systemd's fd store", || {
        s.m.show(UNIT, "NFileDescriptorStore")
            .parse::<u32>()
            .unwrap_or(0)
            >= 6
    });
    kill_keeper_keeping_panes(&s, &pids, &counter, &shell);

    // Logout and login: the manager stops the service (ending the panes;
    // the snapshot keeps them) and, the unit being wanted by
    // default.target, starts it again with no client asking.
    s.ptyd_ok(&["save"]);
    let mut s = s;
    s.m.restart();
    let ids = eventually("the service to start with the user manager", || {
        (s.active_state() == "active").then(|| s.pane_ids())
    });
    for id in pids.keys() {
        assert!(ids.contains(id), "pane {id} not restored at login: {ids:?}");
    }
    let (_, shell) = s.counter_and_shell();
    s.shell_answers(&shell, "logged-in");

    // Logs without journald: the manager got plain lines naming ptyd.
    let log = s.m.log();
    assert!(
        log.lines()
            .any(|l| l.starts_with("ptyd[") && l.contains("]: ")),
        "no `ptyd[PID]: ` line in the manager's log:\n{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.len() > 3 && l.starts_with('<') && l.as_bytes()[2] == b'>'),
        "a journald priority prefix went to a plain stderr:\n{log}"
    );

    // Uninstall while it runs: the units go, the service and its panes stay.
    let out = s.ptyd_ok(&["service", "uninstall"]);
    assert!(out.contains("removed"), "{out}");
    assert!(!s.m.home.join(".config/systemd/user/ptyd.service").exists());
    assert_eq!(s.active_state(), "active");
    let pids = s.running_pids();

    // Stop: every pane hung up and reaped, nothing left in the cgroup.
    let before = s.m.cgroup_pids(UNIT);
    assert!(!before.is_empty());
    s.m.systemctl_ok(&["stop", UNIT]);
    assert_eq!(s.active_state(), "inactive");
    let left = s.m.cgroup_pids(UNIT);
    assert!(
        left.is_empty(),
        "left in {UNIT}'s cgroup after stop: {left:?}"
    );
    for pid in before
        .iter()
        .copied()
        .chain(pids.values().map(|p| *p as i32))
    {
        eventually(format!("process {pid} to be gone, not a zombie"), || {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        });
    }
}

/// Not a check: the reload's wall time and blackout under systemd
/// (`systemctl --user reload`) beside the same upgrade of a server started
/// by hand (`ptyd upgrade`), with the same two panes, printed.
/// `cargo test --release --test service_systemd -- --ignored --nocapture`
#[test]
#[ignore]
fn reload_timings() {
    const ROUNDS: usize = 5;
    let m = match UserManager::start() {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let ptyd = m.install_binary(std::path::Path::new(util::PTYD), "ptyd");
    let s = Service { m, ptyd };
    s.ptyd_ok(&["service", "install", "--enable"]);
    let (counter, _) = s.counter_and_shell();
    s.counter_beyond(&counter, 0, "warm-up");
    let mut under = Vec::new();
    for _ in 0..ROUNDS {
        let wall = s.reload();
        let log = s.m.log();
        let blackout = log
            .lines()
            .rev()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("blackout")?
                    .trim()
                    .strip_suffix(" ms")
            })
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        under.push((wall.as_secs_f64() * 1000.0, blackout));
    }
    drop(s);

    let plain = util::Ptyd::start();
    plain.create_argv(&[
        "/bin/sh",
        "-c",
        "i=0; while :; do i=$((i+1)); echo $i || exit 1; sleep 0.02; done",
    ]);
    plain.create_argv(&["/bin/bash", "--norc"]);
    let mut by_hand = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let out = plain.run_cli(&["upgrade", "--json"]);
        let wall = t.elapsed();
        util::assert_exit(&out, 0);
        let v: Value = serde_json::from_str(&util::stdout(&out)).expect("upgrade --json");
        by_hand.push((
            wall.as_secs_f64() * 1000.0,
            v["blackout_ms"].as_f64().unwrap_or(f64::NAN),
        ));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    for (what, rounds) in [
        ("systemctl --user reload", &under),
        ("ptyd upgrade, no systemd", &by_hand),
    ] {
        let mut walls: Vec<f64> = rounds.iter().map(|r| r.0).collect();
        let mut blackouts: Vec<f64> = rounds.iter().map(|r| r.1).collect();
        eprintln!(
            "{what:26} wall median {:7.1} ms (all {:?}); blackout median {:6.2} ms (all {:?})",
            median(&mut walls),
            rounds.iter().map(|r| r.0.round()).collect::<Vec<_>>(),
            median(&mut blackouts),
            rounds.iter().map(|r| r.1).collect::<Vec<_>>()
        );
    }
}
