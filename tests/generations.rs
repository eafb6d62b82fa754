//! Generation numbers only go forward: every server of a session, started
//! by an upgrade, a crash recovery or a take-back, has a number no other
//! server of it had, higher than all before it.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use util::{Conn, Ptyd};

fn status(ptyd: &Ptyd) -> Value {
    ptyd.connect().ok("server.status", json!({}))
}

/// The serving process's (pid, generation), once a server other than
/// `not` answers.
fn serving_other_than(ptyd: &Ptyd, not: u64) -> (u64, u64) {
    util::eventually("another server to answer", || {
        let mut c = Conn::try_connect(&ptyd.socket())?;
        let s = c.try_call("server.status", json!({}))?.ok()?;
        let pid = s["pid"].as_u64()?;
        (pid != not).then_some((pid, s["generation"].as_u64()?))
    })
}

#[test]
fn generations_only_go_forward_through_upgrades_crashes_and_take_backs() {
    let ptyd = Ptyd::start();
    let pane = ptyd.create_argv(&["sleep", "100000"]);
    let mut seen: Vec<(String, u64, u64)> = Vec::new();
    let s = status(&ptyd);
    let first = (
        s["pid"].as_u64().unwrap(),
        s["generation"].as_u64().unwrap(),
    );
    seen.push(("start".into(), first.0, first.1));

    // An upgrade.
    util::assert_exit(&ptyd.run_cli(&["upgrade"]), 0);
    let s = status(&ptyd);
    seen.push((
        "upgrade".into(),
        s["pid"].as_u64().unwrap(),
        s["generation"].as_u64().unwrap(),
    ));

    // A crash: the keeper's replacement continues from the checkpoint.
    let dead = seen.last().unwrap().1;
    // SAFETY: kill(2) of the test's own serving process.
    unsafe { libc::kill(dead as i32, libc::SIGKILL) };
    let (pid, generation) = serving_other_than(&ptyd, dead);
    seen.push(("crash recovery".into(), pid, generation));

    // A take-back: the new server dies in its probation, after the
    // commit, and the old one serves again.
    let out = ptyd.run_cli(&["upgrade", "--fault", "new-after-committed:exit"]);
    assert_ne!(out.status.code(), Some(0), "{}", util::stderr(&out));
    let s = status(&ptyd);
    assert_eq!(
        s["pid"].as_u64(),
        Some(pid),
        "the old server took back: {s}"
    );
    seen.push(("take-back".into(), pid, s["generation"].as_u64().unwrap()));

    // And an upgrade after it.
    util::assert_exit(&ptyd.run_cli(&["upgrade"]), 0);
    let s = status(&ptyd);
    seen.push((
        "upgrade after the take-back".into(),
        s["pid"].as_u64().unwrap(),
        s["generation"].as_u64().unwrap(),
    ));

    eprintln!("generations: {seen:?}");
    for pair in seen.windows(2) {
        assert!(
            pair[1].2 > pair[0].2,
            "{} (pid {}) has generation {}, not past {}'s {}: {seen:?}",
            pair[1].0,
            pair[1].1,
            pair[1].2,
            pair[0].0,
            pair[0].2
        );
    }
    // The server that died in its probation had the recovered one's
    // number plus one: the take-back goes past that too.
    assert!(seen[3].2 > seen[2].2 + 1, "{seen:?}");
    assert_eq!(
        ptyd.connect().pane(&pane)["state"],
        "running",
        "the pane outlived it all"
    );
}
