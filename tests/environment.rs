//! A pane's environment: its creating client's (not whatever the shell that
//! first started the server had), less what ptyd defines or must not leak,
//! `-e` on top; the `update_environment` variables refreshed by each
//! attaching client; and no value of a client's environment on disk.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Ptyd, Tmux, assert_exit, eventually, shell_quote, stdout};

/// A shell in tmux exports a variable and runs `ptyd run`: the pane's
/// program sees it, and sees none of tmux's variables nor the outer
/// terminal's `TERM`.
#[test]
fn a_variable_exported_in_the_client_shell_reaches_the_pane() {
    let ptyd = Ptyd::start();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    tmux.type_line("export MY_API_KEY=exported-in-shell COLORTERM=truecolor");
    // `$TMUX` is set in the outer shell (tmux runs it); the pane must not
    // think it runs in tmux.
    tmux.type_line("echo outer-tmux-[${TMUX:+set}]");
    tmux.wait_screen("the outer shell's TMUX", |s| s.contains("outer-tmux-[set]"));
    let run = format!(
        "{} run -- sh -c 'echo \"key=[$MY_API_KEY] tmux=[$TMUX$TMUX_PANE$TERM_PROGRAM$COLORTERM] \
         term=[$TERM]\"'",
        shell_quote(util::PTYD)
    );
    tmux.type_line(&run);
    let screen = tmux.wait_screen("the pane's line", |s| {
        s.lines().any(|l| l.starts_with("key=["))
    });
    assert!(
        screen.contains("key=[exported-in-shell] tmux=[] term=[xterm-256color]"),
        "{screen}"
    );
}

/// `FOO=bar ptyd run -- env` shows FOO; `-e` wins over the client's value;
/// ptyd's own variables win over a client's stale ones.
#[test]
fn the_client_environment_reaches_run_and_e_goes_on_top() {
    let ptyd = Ptyd::start();
    let mut cmd = ptyd.cli(&["run", "-e", "OVERRIDDEN=from-e", "--", "env"]);
    cmd.env("FOO", "bar")
        .env("OVERRIDDEN", "from-client")
        .env("TERM", "outer-term")
        .env("TERM_PROGRAM", "Outer.app")
        .env("TMUX", "/tmp/tmux-1/default,1,0");
    let out = util::run_bounded(cmd, "ptyd run -- env");
    assert_exit(&out, 0);
    let lines: Vec<String> = stdout(&out)
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect();
    let has = |l: &str| lines.iter().any(|x| x == l);
    assert!(has("FOO=bar"), "{lines:?}");
    assert!(has("OVERRIDDEN=from-e"), "{lines:?}");
    assert!(has("TERM=xterm-256color"), "{lines:?}");
    assert!(has("PTYD_PANE_ID=p1"), "{lines:?}");
    for gone in ["TERM_PROGRAM=", "TMUX="] {
        assert!(
            !lines.iter().any(|l| l.starts_with(gone)),
            "{gone} in {lines:?}"
        );
    }
}

/// The panes below print the values they got in capitals, so that their
/// screens (which the history files keep) never hold the values themselves.
const UPPER: &str = "tr a-z A-Z";

/// The `update_environment` variables come from the last attaching client:
/// a pane created from inside an older pane (whose `SSH_AUTH_SOCK` is from
/// the login that made it) gets the second client's agent; a pane created
/// from outside keeps its creator's own; nothing of either reaches a file.
#[test]
fn ssh_auth_sock_of_a_second_attaching_client_reaches_panes_created_afterwards() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let mut cmd = ptyd.cli(&["new", "-d", "-n", "old", "--", "/bin/sh"]);
    cmd.env("SSH_AUTH_SOCK", "/tmp/first-login-agent")
        .env("CLIENT_SECRET", "client-secret-value");
    let out = util::run_bounded(cmd, "ptyd new -d");
    assert_exit(&out, 0);
    let old = stdout(&out).trim().to_string();
    c.type_line("old", "echo \"old=[$SSH_AUTH_SOCK]\"");
    c.wait_text("old", "old=[/tmp/first-login-agent]");

    // A second login attaches, with another agent and no display.
    let (_term, _client) = util::attach_in_pty(
        &ptyd,
        &["old"],
        &[("SSH_AUTH_SOCK", "/tmp/second-login-agent")],
    );
    eventually("the second client to attach", || {
        (c.pane(&old)["attached_clients"] == 1).then_some(())
    });

    // From inside the old pane: the fresh agent, not the pane's own.
    c.type_line(
        "old",
        &format!(
            "{} new -d -n inner -- sh -c 'echo \"inner=[$SSH_AUTH_SOCK $CLIENT_SECRET]\" | {UPPER}; \
             exec sleep 60'",
            shell_quote(util::PTYD)
        ),
    );
    eventually("the pane made inside the old one", || {
        c.panes().into_iter().find(|p| p["name"] == "inner")
    });
    c.wait_text(
        "inner",
        "INNER=[/TMP/SECOND-LOGIN-AGENT CLIENT-SECRET-VALUE]",
    );

    // From outside, with an agent of its own: that one.
    let mut cmd = ptyd.cli(&[
        "new",
        "-d",
        "-n",
        "outside",
        "--",
        "sh",
        "-c",
        &format!("echo \"outside=[$SSH_AUTH_SOCK]\" | {UPPER}; exec sleep 60"),
    ]);
    cmd.env("SSH_AUTH_SOCK", "/tmp/third-agent");
    assert_exit(&util::run_bounded(cmd, "ptyd new -d"), 0);
    c.wait_text("outside", "OUTSIDE=[/TMP/THIRD-AGENT]");

    // The snapshot, the history files and the log hold no value a client
    // sent.
    c.ok("server.save", json!({}));
    let mut looked = 0;
    for dir in [&ptyd.dirs.state, &ptyd.dirs.runtime] {
        for rel in util::files_under(dir) {
            let path = dir.join(&rel);
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            looked += 1;
            let text = String::from_utf8_lossy(&bytes);
            for secret in ["client-secret-value", "second-login-agent", "third-agent"] {
                assert!(
                    !text.contains(secret),
                    "{secret} is in {}:\n{text}",
                    path.display()
                );
            }
        }
    }
    assert!(looked > 0, "no file under the state and runtime dirs");
}

/// A live upgrade carries each pane's client environment (in memory): a
/// respawn after it starts the command with the same variables.
#[test]
fn a_respawn_after_a_live_upgrade_keeps_the_creators_environment() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let mut cmd = ptyd.cli(&[
        "new",
        "-d",
        "-n",
        "job",
        "--",
        "sh",
        "-c",
        "echo \"cc=[$CC]\"",
    ]);
    cmd.env("CC", "clang");
    assert_exit(&util::run_bounded(cmd, "ptyd new -d"), 0);
    c.wait_exit("job");
    assert_exit(&ptyd.run_cli(&["upgrade"]), 0);
    let mut c = ptyd.connect();
    c.ok("pane.respawn", json!({ "target": "job" }));
    eventually("the respawned command's line", || {
        let text = c.capture("job");
        match text.matches("cc=[").count() {
            2 => Ok(text),
            _ => Err(text),
        }
    });
    let text = c.capture("job");
    assert_eq!(text.matches("cc=[clang]").count(), 2, "{text}");
}
