//! The CLI when the server cannot do what it asks, through the real
//! binary: a server out of file descriptors (its `busy` explanation is
//! shown), a stopped server (a time limit, not a hang), a final save that
//! fails (`ptyd stop` exits non-zero).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use std::os::unix::net::UnixStream;
use util::{Dirs, Ptyd, stderr};

#[test]
fn a_server_out_of_fds_is_explained_not_a_broken_pipe() {
    let ptyd = Dirs::new().start_limited(&util::unique_name("t"), &[], None, Some(64));
    // Idle connections until the server's fd table is full; the rest wait
    // in the listener's backlog.
    let held: Vec<UnixStream> = (0..96)
        .filter_map(|_| UnixStream::connect(ptyd.socket()).ok())
        .collect();
    util::eventually("the server to run out of fds", || {
        ptyd.stderr().contains("accept_starved")
    });
    let out = ptyd.run_cli(&["ls"]);
    assert!(!out.status.success(), "ls succeeded: {out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("out of file descriptors") && err.contains("LimitNOFILE"),
        "the server's explanation is shown: {err}"
    );
    drop(held);
    util::eventually("the server to serve again", || {
        ptyd.run_cli(&["ls"]).status.success()
    });
    ptyd.stop();
}

#[test]
fn a_stopped_server_times_out_instead_of_hanging_the_cli() {
    let ptyd = Ptyd::start();
    let serving = ptyd.serving_pid();
    // SAFETY: kill(2) of the serving process this test started.
    unsafe { libc::kill(serving, libc::SIGSTOP) };
    let out = ptyd.run_cli(&["ls"]);
    // SAFETY: as above.
    unsafe { libc::kill(serving, libc::SIGCONT) };
    assert!(!out.status.success(), "ls succeeded: {out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("did not answer") && err.contains("SIGSTOP"),
        "a time limit with what may be wrong: {err}"
    );
    util::assert_exit(&ptyd.run_cli(&["ls"]), 0);
    ptyd.stop();
}

#[test]
fn stop_exits_non_zero_when_its_final_save_failed() {
    const LIMIT: u64 = 32 * 1024;
    let mut ptyd = Dirs::new().start_with(&util::unique_name("t"), &[], Some(LIMIT));
    // A pane whose environment alone makes the snapshot pass the limit.
    let big = "x".repeat(LIMIT as usize + 1000);
    ptyd.create(json!({ "argv": ["sleep", "1000"], "env": { "BIG": big } }));
    let out = ptyd.run_cli(&["stop"]);
    assert!(!out.status.success(), "stop succeeded: {out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("final save failed") && err.contains("File too large"),
        "says what failed: {err}"
    );
    ptyd.wait_exit();
}
