//! What the user sees through `ptyd attach`, with tmux as the outer
//! terminal: history replayed into the outer scrollback, the scroll mode,
//! nesting (self-attach refused, the prefix key sent through), clients of
//! different sizes each shown a correct screen, and detaching giving back
//! the outer screen as it was.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Ptyd, Tmux, shell_quote};

/// A tmux whose session `main` runs the outer shell, `cols` x `rows`, with
/// room for 20,000 lines of history and OSC 52 accepted into its buffers.
fn outer(ptyd: &Ptyd, cols: u16, rows: u16) -> Tmux {
    let tmux = Tmux::new();
    let (c, r) = (cols.to_string(), rows.to_string());
    let shell = util::outer_shell(ptyd);
    tmux.run(&[
        "start-server",
        ";",
        "set-option",
        "-g",
        "history-limit",
        "20000",
        ";",
        "set-option",
        "-g",
        "set-clipboard",
        "on",
        ";",
        "new-session",
        "-d",
        "-s",
        "main",
        "-x",
        &c,
        "-y",
        &r,
        &shell,
    ]);
    tmux.wait_screen("the outer prompt", |s| s.contains("outer$"));
    tmux
}

fn ptyd_cmd(args: &str) -> String {
    format!("{} {args}", shell_quote(util::PTYD))
}

#[test]
fn attach_replays_history_into_the_outer_scrollback() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    c.type_line(&id, "seq 1 5000; echo printed-''all");
    c.wait_text(&id, "printed-all");
    let tmux = outer(&ptyd, 100, 30);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    tmux.type_line(&ptyd_cmd(&format!(
        "attach --pane-only {id} --history 3000"
    )));
    ev.wait_event("client.attached", &id);
    tmux.wait_screen("the pane's screen", |s| s.contains("printed-all"));
    // The outer pane's own history (above its screen) holds the newest
    // 3000 lines of the pane's history, in order, and nothing older.
    let history = tmux.run(&["capture-pane", "-p", "-t", "main", "-S", "-", "-E", "-1"]);
    let numbers: Vec<u64> = history
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert!(
        numbers.len() >= 3000,
        "{} lines in the outer history",
        numbers.len()
    );
    let tail = &numbers[numbers.len() - 3000..];
    assert!(
        tail.windows(2).all(|w| w[1] == w[0] + 1),
        "the replayed lines are not consecutive"
    );
    assert!(
        tail[0] > 1000 && *tail.last().unwrap() > 4900,
        "{:?}",
        (tail[0], tail.last())
    );
    assert!(
        !numbers.contains(&1000),
        "more than the asked 3000 lines were replayed"
    );
    tmux.keys(&["C-\\"]);
    ev.wait_event("client.detached", &id);
}

#[test]
fn scroll_mode_pages_finds_and_copies() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    c.type_line(
        &id,
        "for i in $(seq 1 500); do echo row-$i.; done; echo rows-''done",
    );
    c.wait_text(&id, "rows-done");
    let tmux = outer(&ptyd, 80, 20);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    tmux.type_line(&ptyd_cmd(&format!(
        "attach --pane-only {id}; echo attach-''rc=$?"
    )));
    ev.wait_event("client.attached", &id);
    tmux.wait_screen("the pane", |s| s.contains("rows-done"));
    // Prefix, then `[`: the scroll mode, at the bottom.
    tmux.keys(&["C-\\", "["]);
    tmux.wait_screen("the scroll mode", |s| s.contains("[scroll"));
    // A page up shows lines from above the pane's screen.
    tmux.keys(&["PPage"]);
    tmux.wait_screen("a page up", |s| {
        s.contains("row-470.") && !s.contains("rows-done")
    });
    // Output meanwhile does not move the frozen view.
    c.type_line(&id, "echo while-''scrolling");
    c.wait_text(&id, "while-scrolling");
    // Search backwards for a line far up.
    tmux.keys(&["?"]);
    tmux.type_line("row-42.");
    let screen = tmux.wait_screen("the line found", |s| s.contains("found: row-42."));
    assert!(screen.lines().any(|l| l == "row-42."), "{screen}");
    assert!(!screen.contains("while-scrolling"), "{screen}");
    // Select three lines, copy them (OSC 52 into tmux's buffer), leave.
    tmux.keys(&["v", "j", "j", "y"]);
    tmux.wait_screen("the live screen again", |s| {
        s.contains("while-scrolling") && !s.contains("[scroll")
    });
    let buffer = util::eventually("the copied text in tmux's buffer", || {
        let mut cmd = tmux.command();
        cmd.args(["show-buffer"]);
        let out = util::run_bounded(cmd, "tmux show-buffer");
        let text = util::stdout(&out);
        text.contains("row-44").then_some(text)
    });
    assert_eq!(buffer, "row-42.\nrow-43.\nrow-44.");
    // q/Escape leave too; the pane still takes keys.
    tmux.keys(&["C-\\", "["]);
    tmux.wait_screen("the scroll mode", |s| s.contains("[scroll"));
    tmux.keys(&["Escape"]);
    tmux.wait_screen("the live screen", |s| !s.contains("[scroll"));
    tmux.type_line("echo typed-''after");
    c.wait_text(&id, "typed-after");
    tmux.keys(&["C-\\"]);
    tmux.wait_screen("the attach client exiting", |s| s.contains("attach-rc=0"));
}

#[test]
fn attaching_to_the_own_pane_fails_at_once_and_nesting_needs_force() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let me = ptyd.create_argv(&["/bin/sh"]);
    let other = ptyd.create_argv(&["/bin/sh"]);
    let ptyd_path = shell_quote(util::PTYD);
    for (args, want) in [
        (format!("attach {me}"), "rc=1"),
        (format!("attach --force {me}"), "rc=1"),
        (format!("attach {other}"), "rc=2"),
    ] {
        c.type_line(&me, &format!("{ptyd_path} {args}; echo rc''=$?"));
        c.wait_text(&me, &format!("{want}\n"));
    }
    let screen = c.capture_all(&me);
    assert!(screen.contains("attaching to it would"), "{screen}");
    assert!(screen.contains("--force"), "{screen}");
    assert_eq!(c.pane_info(&me).unwrap()["attached_clients"], 0);
}

/// Without a terminal, attach is refused ("not a terminal") before it
/// draws anything; attaching to an exited pane says so with its status,
/// exits non-zero and leaves the pane's size alone.
#[test]
fn attach_needs_a_terminal_and_a_pane_that_runs() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["sleep", "1000"]);
    let out = ptyd.run_cli(&["attach", &id]);
    util::assert_exit(&out, 1);
    let err = util::stderr(&out);
    assert!(err.contains("not a terminal"), "{err}");
    assert!(util::stdout(&out).is_empty(), "{out:?}");
    assert_eq!(c.pane_info(&id).unwrap()["attached_clients"], 0);

    let done = ptyd.create(json!({ "argv": ["sh", "-c", "exit 3"], "cols": 50, "rows": 10 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.wait_exit(&done);
    let tmux = outer(&ptyd, 100, 30);
    tmux.type_line(&ptyd_cmd(&format!("attach {done}; echo attach-''rc=$?")));
    let screen = tmux.wait_screen("the attach's end", |s| s.contains("attach-rc="));
    assert!(screen.contains("attach-rc=1"), "{screen}");
    assert!(
        screen.contains(&format!("pane {done} has exited (code 3)")),
        "{screen}"
    );
    let info = c.pane_info(&done).unwrap();
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(50), Some(10))
    );
}

/// `ptyd new` in a pane attaches a client inside the pane's client: refused
/// without `--force` with attach's message, before any pane is made; `-d`
/// attaches nothing and needs none.
#[test]
fn new_inside_a_pane_needs_force_as_attach_does() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // Wide enough for the message on one line.
    let me = ptyd.create(json!({ "argv": ["/bin/sh"], "cols": 300 }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ptyd_path = shell_quote(util::PTYD);
    c.type_line(
        &me,
        &format!("{ptyd_path} new -n refused -- /bin/sh; echo new-rc''=$?"),
    );
    c.wait_text(&me, "new-rc=2\n");
    let screen = c.capture_all(&me);
    assert!(screen.contains("nests a client in a client"), "{screen}");
    assert!(screen.contains("Add --force"), "{screen}");
    assert_eq!(c.panes().len(), 1, "a pane was made: {:?}", c.panes());

    c.type_line(
        &me,
        &format!("{ptyd_path} new -d -n bg -- sleep 60; echo bg-rc''=$?"),
    );
    c.wait_text(&me, "bg-rc=0\n");
    c.type_line(
        &me,
        &format!("{ptyd_path} new --force -n nested -- sh -c 'exit 7'; echo forced-rc''=$?"),
    );
    c.wait_text(&me, "forced-rc=0\n");
    assert_eq!(c.pane("nested")["exit"]["code"], 7);
}

#[test]
fn the_prefix_key_twice_reaches_the_inner_client() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let outer_pane = ptyd.create_argv(&["/bin/sh"]);
    let inner_pane = ptyd.create_argv(&["/bin/sh"]);
    c.type_line(&inner_pane, "echo inner-''screen");
    c.wait_text(&inner_pane, "inner-screen");
    let tmux = outer(&ptyd, 100, 30);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    tmux.type_line(&ptyd_cmd(&format!("attach --pane-only {outer_pane}")));
    ev.wait_event("client.attached", &outer_pane);
    // Inside the outer pane, a client attached to the inner pane.
    tmux.type_line(&ptyd_cmd(&format!(
        "attach --force {inner_pane}; echo inner-''rc=$?"
    )));
    ev.wait_event("client.attached", &inner_pane);
    // Drawn once the inner client is in raw mode (before, the key would
    // be the outer pane's SIGQUIT).
    tmux.wait_screen("the inner pane", |s| s.contains("inner-screen"));
    // The key twice: the outer client sends it through, the inner one
    // detaches; the outer one stays.
    tmux.keys(&["C-\\", "C-\\"]);
    let detached = ev.wait_event("client.detached", &inner_pane);
    assert_eq!(
        detached["reason"],
        "detached",
        "{detached}\n{}",
        c.capture_all(&outer_pane)
    );
    c.wait_text(&outer_pane, "inner-rc=0");
    tmux.wait_screen("the inner client's end", |s| s.contains("inner-rc=0"));
    assert_eq!(c.pane_info(&outer_pane).unwrap()["attached_clients"], 1);
    tmux.keys(&["C-\\"]);
    ev.wait_event("client.detached", &outer_pane);
}

#[test]
fn clients_of_different_sizes_each_see_a_correct_screen() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let big = outer(&ptyd, 100, 30);
    let small = outer(&ptyd, 60, 15);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    big.type_line(&ptyd_cmd(&format!("attach --pane-only {id}")));
    ev.wait_event("client.attached", &id);
    small.type_line(&ptyd_cmd(&format!("attach --pane-only --read-only {id}")));
    ev.wait_event("client.attached", &id);
    assert_eq!(c.pane_info(&id).unwrap()["cols"], 100);
    // A 90-column line: whole for the 100-column client, cut at 60 for
    // the 60-column one (never wrapped onto a second row).
    big.type_line("printf '%090d\\n' 0 | tr 0 x; echo wide-''done");
    c.wait_text(&id, "wide-done");
    let line = "x".repeat(90);
    big.wait_screen("the whole line", |s| s.lines().any(|l| l == line));
    let screen = small.wait_screen("the clipped line", |s| {
        s.contains("wide-done") && s.lines().any(|l| l == "x".repeat(60))
    });
    assert!(
        !screen.lines().any(|l| l.starts_with('x') && l.len() < 60),
        "the line wrapped on the small client:\n{screen}"
    );
    // The small client types: the pane takes its size, the big client is
    // now shown the model (padded) and still sees the prompt and output.
    small.keys(&["C-\\"]);
    ev.wait_event("client.detached", &id);
    small.wait_screen("the small client gone", |s| {
        s.contains("[ptyd: detached from ")
    });
    small.type_line(&ptyd_cmd(&format!("attach --pane-only {id}")));
    ev.wait_event("client.attached", &id);
    assert_eq!(c.pane_info(&id).unwrap()["cols"], 60);
    small.type_line("echo from-''small");
    c.wait_text(&id, "from-small");
    big.wait_screen("output typed on the small client", |s| {
        s.lines().any(|l| l == "from-small")
    });
    small.wait_screen("its own output", |s| s.lines().any(|l| l == "from-small"));
}

#[test]
fn detach_gives_the_outer_screen_back() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    c.type_line(
        &id,
        "echo inside-''pane; printf '\\033[?1049h'; echo on-''alt",
    );
    c.wait_text(&id, "on-alt");
    let tmux = outer(&ptyd, 80, 20);
    tmux.type_line("echo before-''attach");
    tmux.wait_screen("the outer text", |s| s.contains("before-attach"));
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    tmux.type_line(&ptyd_cmd(&format!(
        "attach --pane-only {id}; echo attach-''rc=$?"
    )));
    ev.wait_event("client.attached", &id);
    let screen = tmux.wait_screen("the pane", |s| s.contains("on-alt"));
    assert!(!screen.contains("before-attach"), "{screen}");
    // The pane leaves its alternate screen while attached: the outer
    // terminal stays on its own (a redraw shows the pane's main screen).
    c.type_line(&id, "printf '\\033[?1049l'; echo back-''main");
    tmux.wait_screen("the pane's main screen", |s| {
        s.contains("inside-pane") && s.contains("back-main") && !s.contains("before-attach")
    });
    tmux.keys(&["C-\\"]);
    let screen = tmux.wait_screen("the outer screen again", |s| s.contains("attach-rc=0"));
    assert!(screen.contains("before-attach"), "{screen}");
    assert!(!screen.contains("inside-pane"), "{screen}");
    // The message and the next prompt each on a line of their own.
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("[ptyd: detached from "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(lines[at + 1], "attach-rc=0", "{screen}");
}

#[test]
fn the_detach_key_and_screen_come_from_the_config_file() {
    let dirs = util::Dirs::new();
    let config = dirs.state.join("config");
    std::fs::create_dir_all(config.join("ptyd")).unwrap();
    std::fs::write(
        config.join("ptyd/config.toml"),
        "detach_key = \"C-a\"\nattach_alt_screen = false\nattach_history = 0\n",
    )
    .unwrap();
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("t"));
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    c.type_line(&id, "echo in-''pane");
    c.wait_text(&id, "in-pane");
    let tmux = outer(&ptyd, 80, 20);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    let env = format!("XDG_CONFIG_HOME={}", shell_quote(config.to_str().unwrap()));
    tmux.type_line(&format!(
        "{env} {}; echo attach-''rc=$?",
        ptyd_cmd(&format!("attach --pane-only {id}"))
    ));
    ev.wait_event("client.attached", &id);
    tmux.wait_screen("the pane", |s| s.contains("in-pane"));
    // C-\ is the pane's now; C-a detaches.
    tmux.keys(&["C-\\"]);
    tmux.type_line("echo still-''attached");
    c.wait_text(&id, "still-attached");
    tmux.keys(&["C-a"]);
    ev.wait_event("client.detached", &id);
    // On the main screen: the pane's last screen stays, the message below.
    let screen = tmux.wait_screen("the client's end", |s| s.contains("attach-rc=0"));
    assert!(screen.contains("still-attached"), "{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("[ptyd: detached from "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        lines[..at].iter().any(|l| l.contains("still-attached")),
        "{screen}"
    );
}

#[test]
fn a_reloaded_detach_key_is_for_the_clients_that_attach_afterwards() {
    let dirs = util::Dirs::new();
    let config = dirs.state.join("config");
    std::fs::create_dir_all(config.join("ptyd")).unwrap();
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("t"));
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let tmux = outer(&ptyd, 80, 20);
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    let env = format!("XDG_CONFIG_HOME={}", shell_quote(config.to_str().unwrap()));
    let attach = |ev: &mut util::Conn, how: &str| {
        tmux.type_line(&format!(
            "{env} {}; echo attach-''rc=$?",
            ptyd_cmd(&format!("attach {how} {id}"))
        ));
        ev.wait_event("client.attached", &id);
    };
    // A tab view attached with the default prefix, C-\.
    attach(&mut ev, "");
    std::fs::write(config.join("ptyd/config.toml"), "detach_key = \"C-a\"\n").unwrap();
    let out = ptyd.run_cli(&["config", "reload"]);
    util::assert_exit(&out, 0);
    let report = util::stdout(&out);
    assert!(
        report.contains(
            "detach_key = \"C-a\" (for clients that attach from now on; attached clients keep theirs)"
        ),
        "{report}"
    );
    // As reported: C-a reaches the pane, C-\ is still the prefix.
    tmux.keys(&["-l", "echo kept-''prefix"]);
    tmux.keys(&["C-a"]);
    tmux.keys(&["Enter"]);
    c.wait_text(&id, "kept-prefix");
    tmux.keys(&["C-\\", "d"]);
    ev.wait_event("client.detached", &id);
    tmux.wait_screen("the tab view's end", |s| s.contains("attach-rc=0"));
    // Clients that attach now have the new key, in either mode.
    tmux.type_line("clear");
    attach(&mut ev, "--pane-only");
    tmux.keys(&["C-a"]);
    ev.wait_event("client.detached", &id);
    tmux.type_line("clear");
    attach(&mut ev, "");
    tmux.keys(&["C-a", "d"]);
    ev.wait_event("client.detached", &id);
}
