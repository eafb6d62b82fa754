//! What must never take the panes down, through the real binary: a
//! stderr that cannot be written (a reader gone, a file at its size
//! limit), a low soft fd limit with hundreds of panes, the serving process
//! killed again and again soon after each start. After each: every pane
//! has its old process, and the server answers.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

mod crash_support;

use crash_support::{serving_pid, wait_replacement};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use util::{Dirs, Ptyd, ServerStderr, unique_name};

fn kill(pid: i32, sig: i32) {
    // SAFETY: plain kill(2) on a process this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {pid}");
}

/// Creates `n` idle panes; returns their pids by pane id.
fn idle_panes(ptyd: &Ptyd, n: usize) -> BTreeMap<String, i64> {
    for _ in 0..n {
        ptyd.create_argv(&["sleep", "100000"]);
    }
    let pids = ptyd.connect().pane_pids();
    assert_eq!(pids.len(), n, "panes created");
    pids
}

/// SIGKILLs the serving process and waits for its replacement; checks
/// every pane kept its process. Returns the replacement's pid.
fn crash_and_check(ptyd: &Ptyd, pids: &BTreeMap<String, i64>, what: &str) -> i32 {
    let dead = serving_pid(&mut ptyd.connect());
    kill(dead, libc::SIGKILL);
    let (mut c, pid) = wait_replacement(ptyd, dead);
    let after = c.pane_pids();
    if &after != pids {
        let stderr = ptyd.stderr();
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        panic!(
            "{what}: the panes after a crash differ: {} of {} kept; the server's stderr ends:\n{}",
            after
                .iter()
                .filter(|(id, pid)| pids.get(*id) == Some(pid))
                .count(),
            pids.len(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    pid
}

/// Log lines (a pane started, a crash, an upgrade) on a stderr that
/// cannot take them lose nothing: the panes live through the serving
/// process's lines, the keeper's when the serving process is killed, and
/// an upgrade's; the failures are counted in `status`.
fn panes_outlive_a_stderr_that_fails(stderr: ServerStderr, fsize: Option<u64>) {
    let mut dirs = Dirs::new();
    dirs.stderr = stderr;
    // Rings and checkpoints are memfds, bound by RLIMIT_FSIZE too.
    dirs.env.push(("PTYD_RING_BYTES".into(), "65536".into()));
    let ptyd = dirs.start_with(&unique_name("t"), &[], fsize);
    let pids = idle_panes(&ptyd, 3);
    let status = ptyd.connect().ok("server.status", json!({}));
    assert!(
        status["stderr_write_failures"].as_u64() >= Some(1),
        "the failed log writes are counted: {status}"
    );
    assert!(
        status["stderr_write_error"].is_string(),
        "and the first says why: {status}"
    );
    crash_and_check(&ptyd, &pids, "first crash");
    let out = ptyd.run_cli(&["upgrade"]);
    util::assert_exit(&out, 0);
    assert_eq!(
        ptyd.connect().pane_pids(),
        pids,
        "the panes after an upgrade"
    );
    crash_and_check(&ptyd, &pids, "crash after the upgrade");
    ptyd.stop();
}

#[test]
fn a_stderr_whose_reader_is_gone_kills_nothing() {
    panes_outlive_a_stderr_that_fails(ServerStderr::ClosedPipe, None);
}

#[test]
fn a_stderr_file_at_its_size_limit_kills_nothing() {
    const LIMIT: u64 = 1 << 20;
    panes_outlive_a_stderr_that_fails(ServerStderr::Full(LIMIT), Some(LIMIT));
}

/// Sets this test process's soft fd limit (the servers it starts inherit
/// it), keeping the hard one, which must be above `at_least`.
fn soft_fd_limit(soft: u64, at_least: u64) {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl), 0);
        assert!(
            rl.rlim_max >= at_least as libc::rlim_t,
            "this test needs a hard fd limit of at least {at_least} (`ulimit -Hn`), not {}",
            rl.rlim_max
        );
        rl.rlim_cur = soft as libc::rlim_t;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &rl), 0);
    }
}

/// At the usual soft limit of 1024 (the hard one higher) the keeper holds
/// three fds for each of 400 panes: it raises its limit as the server
/// does, so a crash of the serving process keeps every pane, and
/// `status` and `stop` answer.
#[test]
fn hundreds_of_panes_at_a_soft_fd_limit_of_1024_survive_a_crash() {
    const PANES: usize = 400;
    soft_fd_limit(1024, 4 * PANES as u64 + 256);
    let mut dirs = Dirs::new();
    dirs.ready_timeout = 4 * util::TIMEOUT;
    let ptyd = dirs.start(&unique_name("t"));
    let mut c = ptyd.connect();
    for _ in 0..PANES {
        c.create(json!({ "argv": ["sleep", "100000"] }));
    }
    let pids = c.pane_pids();
    assert_eq!(pids.len(), PANES);
    let status = c.ok("server.status", json!({}));
    assert!(
        status["keeper"]["fd_limit"].as_u64() > Some(1024),
        "the keeper raised its fd limit: {}",
        status["keeper"]
    );
    crash_and_check(&ptyd, &pids, "a crash with 400 panes");
    assert_eq!(ptyd.status_json()["panes"].as_u64(), Some(PANES as u64));
    ptyd.stop();
}

/// The serving process SIGKILLed four times, each soon after it started
/// (well within a few seconds) but after it answered: each replacement
/// served, so none is part of a crash loop, and every pane keeps its
/// process (the keeper never falls back to the snapshot on disk).
#[test]
fn kills_soon_after_each_start_are_no_crash_loop() {
    let ptyd = Ptyd::start();
    let pids = idle_panes(&ptyd, 3);
    for round in 1..=4 {
        crash_and_check(&ptyd, &pids, &format!("kill {round}"));
    }
    let status = ptyd.connect().ok("server.status", json!({}));
    assert!(
        status["keeper"]["last_recovery"]["from"].is_null(),
        "recovered from the checkpoint, not the snapshot: {}",
        status["keeper"]
    );
    ptyd.stop();
}

/// A snapshot planted in `dirs` for namespace `ns`: one pane, p1, in
/// `cwd`, alone in a tab laid out as `layout` (JSON text).
fn plant(dirs: &Dirs, ns: &str, cwd: &str, layout: &str) {
    let pane = json!({
        "id": "p1", "name": null, "cwd": cwd, "command": { "argv": ["sleep", "100000"] },
        "env": {}, "cols": 80, "rows": 24, "restore": "rerun",
        "resume": null, "history": null, "pid": null, "start_token": null,
    });
    let snapshot = format!(
        "{{\"version\": 1, \"server_version\": \"0.1.0\", \"written_unix_ms\": 0, \"revision\": 1, \
         \"generation\": 1, \"counters\": {{\"workspace\": 2, \"tab\": 2, \"pane\": 2}}, \
         \"active_workspace\": \"w1\", \
         \"workspaces\": [{{\"id\": \"w1\", \"name\": \"main\", \"tabs\": [\"t1\"], \"active_tab\": \"t1\"}}], \
         \"tabs\": [{{\"id\": \"t1\", \"name\": \"planted\", \"workspace\": \"w1\", \"layout\": {layout}, \
         \"focus\": \"p1\", \"zoom\": null}}], \"panes\": [{pane}]}}"
    );
    std::fs::create_dir_all(dirs.state_dir(ns)).unwrap();
    std::fs::write(dirs.session_path(ns), snapshot).unwrap();
}

/// Starts a server on the planted snapshot; checks `status` answers (it
/// was refused as over 4 MiB for the server's whole life), the pane is
/// back, and no log line is huge. Returns the restore report's repairs
/// (as JSON text) and their total.
fn restore_planted(dirs: &Dirs, ns: &str) -> (String, u64) {
    let ptyd = dirs.start(ns);
    let mut c = ptyd.connect();
    let status = c.ok("server.status", json!({}));
    let restore = &status["persistence"]["restore"];
    let repairs = restore["repairs"].as_array().expect("repairs listed");
    assert!(repairs.len() <= 101, "{} repairs kept", repairs.len());
    let text = restore["repairs"].to_string();
    assert!(text.len() < 200_000, "repairs of {} bytes", text.len());
    assert_eq!(c.panes().len(), 1, "the pane restored");
    assert!(
        ptyd.stderr().lines().all(|l| l.len() < 64 * 1024),
        "no huge log line"
    );
    ptyd.stop();
    (text, restore["repairs_total"].as_u64().unwrap_or(0))
}

/// Planted snapshots built to make `status` too large for good: a pane
/// whose cwd is 6 MB long, and a tab whose layout nests 100,000 splits,
/// each with a leaf for a pane that does not exist. Both are repaired; the
/// repairs kept are bounded in count and size, quoted values cut.
#[test]
fn a_planted_snapshot_cannot_make_status_too_large() {
    const DEPTH: usize = 100_000;
    let dirs = Dirs::new();
    let ns = unique_name("cwd");
    plant(
        &dirs,
        &ns,
        &format!("/{}", "x".repeat(6 << 20)),
        "{\"pane\":\"p1\"}",
    );
    let (text, _) = restore_planted(&dirs, &ns);
    assert!(
        text.contains("cwd /xxx") && text.contains("6291457 bytes"),
        "the cwd repair, its value cut: {}",
        &text[..text.len().min(2000)]
    );
    // Built as text: a Value this deep would overflow the stack.
    let mut layout = String::with_capacity(DEPTH * 90);
    for i in 0..DEPTH {
        layout.push_str(&format!(
            "{{\"split\":{{\"direction\":\"horizontal\",\"ratio\":0.5,\"first\":{{\"pane\":\"p{}\"}},\"second\":",
            i + 2
        ));
    }
    layout.push_str("{\"pane\":\"p1\"}");
    for _ in 0..DEPTH {
        layout.push_str("}}");
    }
    let ns = unique_name("deep");
    plant(&dirs, &ns, "/", &layout);
    let (text, total) = restore_planted(&dirs, &ns);
    assert!(
        text.contains("more repairs, not listed"),
        "the rest counted: {}",
        &text[..text.len().min(2000)]
    );
    assert!(total >= DEPTH as u64, "every repair counted: {total}");
}

/// A config file of 100,000 unknown keys (and one good one): the server
/// starts and serves with the good key in force, and the problems are a
/// bounded list in `status`, in the reload's answer and in the log, not a
/// line per key.
#[test]
fn a_config_of_100k_unknown_keys_gives_a_bounded_list_of_problems() {
    const KEYS: usize = 100_000;
    let dirs = Dirs::new();
    let dir = dirs.state.join("config").join("ptyd");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::from("scrollback_lines = 123\n");
    for i in 0..KEYS {
        // Short: the file must stay under the 1 MiB ptyd reads.
        text.push_str(&format!("k{i}=1\n"));
    }
    std::fs::write(dir.join("config.toml"), text).unwrap();
    let ptyd = dirs.start(&unique_name("t"));
    let mut c = ptyd.connect();
    let config = c.ok("server.status", json!({}))["config"].clone();
    assert_eq!(
        config["scrollback_lines"], 123,
        "the good key applies: {}",
        config["problems"][0]
    );
    let problems = config["problems"].as_array().expect("problems");
    assert!(problems.len() <= 51, "{} problems listed", problems.len());
    assert!(
        problems[0]
            .as_str()
            .unwrap_or("")
            .contains(":2: unknown key \"k0\""),
        "the first problem, with its line: {}",
        problems[0]
    );
    assert!(
        problems
            .last()
            .and_then(|p| p.as_str())
            .is_some_and(|p| p.contains(&format!("{} more problems", KEYS - 50))),
        "the rest counted: {problems:?}"
    );
    let reload = c.ok("server.config.reload", json!({}));
    assert_eq!(
        reload["problems"].as_array().map(Vec::len),
        Some(problems.len())
    );
    util::assert_exit(&ptyd.run_cli(&["ls"]), 0);
    let logged = ptyd.stderr().matches("config_ignored").count();
    assert!(logged <= 2 * 51, "{logged} log lines for config problems");
    ptyd.stop();
}

/// Torture: the serving process SIGKILLed again and again, each kill soon
/// after the last (the next as soon as the replacement answered, or a
/// random moment below a second later: well within the 3 s that once
/// counted as a crash loop), while a counter prints at full speed and the
/// server's stderr is a pipe whose reader is gone (every log line of each
/// crash fails): every pane keeps its process, the counter's scrollback
/// counts without gap or repeat, no SIGHUP reached it, and the keeper
/// never fell back to the snapshot.
#[test]
fn kills_less_than_three_seconds_apart_with_a_closed_stderr_lose_nothing() {
    let mut dirs = Dirs::new();
    dirs.stderr = ServerStderr::ClosedPipe;
    let ptyd = dirs.start(&unique_name("t"));
    let counter = crash_support::counter_pane(&ptyd);
    idle_panes_beside(&ptyd, 2);
    let pids = ptyd.connect().pane_pids();
    let mut rng = crash_support::Rng(0x7e57 ^ u64::from(std::process::id()));
    for round in 1..=6 {
        crash_and_check(&ptyd, &pids, &format!("kill {round}"));
        let pause = rng.below(1000);
        std::thread::sleep(std::time::Duration::from_millis(pause));
    }
    let mut c = ptyd.connect();
    let status = c.ok("server.status", json!({}));
    assert!(
        status["keeper"]["last_recovery"]["from"].is_null(),
        "recovered from the checkpoint, not the snapshot: {}",
        status["keeper"]
    );
    assert!(
        status["stderr_write_failures"].as_u64() >= Some(1),
        "{status}"
    );
    crash_support::signal(pids[&counter], libc::SIGSTOP);
    let text = c.capture_all(&counter);
    crash_support::signal(pids[&counter], libc::SIGCONT);
    let (first, last) = crash_support::check_counter(&text, "the counter after six kills");
    assert!(last > first, "the counter printed: {first}..{last}");
    assert!(
        !ptyd.dirs.path("hups").join("counter").exists(),
        "the counter got SIGHUP"
    );
    ptyd.stop();
}

/// Creates `n` idle panes beside those there are.
fn idle_panes_beside(ptyd: &Ptyd, n: usize) {
    for _ in 0..n {
        ptyd.create_argv(&["sleep", "100000"]);
    }
}

/// A snapshot of many panes (the restore report stays in `status` for the
/// server's whole life): the per-pane outcomes listed are the first 100,
/// counted all in `outcome_counts`, and `ptyd status` says how many more.
#[test]
fn the_outcomes_of_a_large_restore_are_listed_bounded_and_counted_all() {
    const PANES: usize = 250;
    let dirs = Dirs::new();
    let ns = unique_name("many");
    let ids: Vec<String> = (1..=PANES).map(|i| format!("p{i}")).collect();
    let panes: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({
                "id": id, "name": null, "cwd": "/", "command": { "argv": ["sleep", "100000"] },
                "env": {}, "cols": 80, "rows": 24, "restore": "hold",
                "resume": null, "history": null, "pid": null, "start_token": null,
            })
        })
        .collect();
    let tabs: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            json!({ "id": format!("t{}", i + 1), "name": format!("tab{}", i + 1), "workspace": "w1",
                    "layout": { "pane": id }, "focus": id, "zoom": null })
        })
        .collect();
    let tab_ids: Vec<Value> = tabs.iter().map(|t| t["id"].clone()).collect();
    let snapshot = json!({
        "version": 1, "server_version": "0.1.0", "written_unix_ms": 0, "revision": 1,
        "generation": 1, "counters": { "workspace": 2, "tab": PANES + 1, "pane": PANES + 1 },
        "active_workspace": "w1",
        "workspaces": [{ "id": "w1", "name": "main", "tabs": tab_ids, "active_tab": "t1" }],
        "tabs": tabs, "panes": panes,
    });
    std::fs::create_dir_all(dirs.state_dir(&ns)).unwrap();
    std::fs::write(dirs.session_path(&ns), snapshot.to_string()).unwrap();

    let ptyd = dirs.start(&ns);
    let status = ptyd.connect().ok("server.status", json!({}));
    let restore = &status["persistence"]["restore"];
    assert_eq!(restore["panes"], PANES, "{restore}");
    assert_eq!(restore["repairs_total"], 0, "{restore}");
    let outcomes = restore["outcomes"].as_array().expect("outcomes listed");
    assert_eq!(outcomes.len(), 100, "outcomes listed");
    assert_eq!(outcomes[0]["pane"], "p1");
    assert_eq!(restore["outcome_counts"], json!({ "held": PANES }));
    let out = ptyd.run_cli(&["status"]);
    util::assert_exit(&out, 0);
    let text = util::stdout(&out);
    assert!(
        text.contains(&format!("held: {PANES}")) && text.contains("... and 150 more"),
        "{text}"
    );
    ptyd.stop();
}
