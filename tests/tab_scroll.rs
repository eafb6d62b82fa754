//! Scroll mode and the mouse inside the tab view, through the real binary
//! with tmux as the outer terminal: scroll mode drawn inside the pane's
//! rectangle while its neighbour stays live, for one client only; search
//! and leaving it; the wheel scrolling the pane under the pointer, or
//! reaching a program that asked for the mouse in its own coordinates; a
//! border dragged; a drag selection copied to the outer terminal's
//! clipboard (OSC 52, read back as tmux's buffer).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Ptyd, Tmux, shell_quote};

/// `a | b` side by side, shells with a short prompt; a 120x40 outer
/// window gives `a` columns 0-59, the border column 60, `b` 61-119, rows
/// 0-38, the status line row 39.
fn two_panes(ptyd: &Ptyd) -> (String, String) {
    let shell = |extra: serde_json::Value| {
        let mut params = json!({ "argv": ["/bin/sh"], "env": { "PS1": "$ " } });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        ptyd.create(params)["id"].as_str().unwrap().to_string()
    };
    let a = shell(json!({ "tab_name": "work" }));
    let b = shell(json!({ "split": a, "direction": "horizontal" }));
    (a, b)
}

const A: (usize, usize) = (0, 60);
const B: (usize, usize) = (61, 59);
const ROWS: usize = 39;

/// Columns `x..x + cols` of the pane rows of a captured screen.
fn region(screen: &str, (x, cols): (usize, usize)) -> String {
    screen
        .lines()
        .take(ROWS)
        .map(|l| l.chars().skip(x).take(cols).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

fn status_line(screen: &str) -> String {
    screen.lines().nth(ROWS).unwrap_or("").to_string()
}

/// Attaches the outer terminal of `tmux` to the tab view of `target`.
fn attach(tmux: &Tmux, target: &str) {
    tmux.type_line(&format!(
        "{} attach {target}; echo attach-''rc=$?",
        shell_quote(util::PTYD)
    ));
    tmux.wait_screen("the status line", |s| status_line(s).contains("[main]"));
}

fn prefixed(tmux: &Tmux, key: &str) {
    tmux.keys(&["C-\\"]);
    tmux.keys(&[key]);
}

/// An SGR mouse report (1-based `x`, `y`) typed into the outer terminal.
fn mouse(tmux: &Tmux, button: u16, x: u16, y: u16, release: bool) {
    let end = if release { 'm' } else { 'M' };
    tmux.keys(&["-l", &format!("\x1b[<{button};{x};{y}{end}")]);
}

/// The newest tmux paste buffer (an OSC 52 copy makes one with
/// `set-clipboard on`), once there is one.
fn show_buffer(tmux: &Tmux) -> String {
    util::eventually("a copy in tmux's buffer", || {
        let mut cmd = tmux.command();
        cmd.args(["show-buffer"]);
        match cmd.output() {
            Ok(out) if out.status.success() => {
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            }
            other => Err(format!("{other:?}")),
        }
    })
}

fn numbered_lines(c: &mut util::Conn, pane: &str) {
    c.type_line(pane, "for i in $(seq 1 200); do echo line-$i.; done");
    c.wait_text(pane, "line-200.");
}

#[test]
fn scroll_mode_is_drawn_in_the_pane_while_its_neighbour_and_other_clients_stay_live() {
    let ptyd = Ptyd::start();
    let (a, b) = two_panes(&ptyd);
    let mut c = ptyd.connect();
    c.type_line(&a, "echo MARK-''left");
    numbered_lines(&mut c, &b);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    attach(&tmux, &b);
    // Another client on the same pane, which must not follow.
    let other = Tmux::outer_session(&ptyd, 120, 40);
    attach(&other, &b);

    prefixed(&tmux, "[");
    tmux.wait_screen("scroll mode on the status line", |s| {
        status_line(s).contains("[SCROLL ")
    });
    tmux.keys(&["PPage"]);
    let screen = tmux.wait_screen("older lines in the right pane", |s| {
        let r = region(s, B);
        r.contains("line-150.") && !r.contains("line-200.")
    });
    assert!(region(&screen, A).contains("MARK-left"), "{screen}");
    // The border is still drawn where it was.
    assert!(
        screen
            .lines()
            .take(ROWS)
            .all(|l| l.chars().nth(60) == Some('│')),
        "{screen}"
    );
    // The neighbour still updates around it.
    c.type_line(&a, "echo still-''live");
    let screen = tmux.wait_screen("the left pane's new output", |s| {
        region(s, A).contains("still-live")
    });
    assert!(!region(&screen, B).contains("line-200."), "{screen}");
    assert!(status_line(&screen).contains("[SCROLL "), "{screen}");
    // The other client shows the live pane, not in scroll mode.
    let seen = other.wait_screen("the live pane", |s| region(s, B).contains("line-200."));
    assert!(!status_line(&seen).contains("SCROLL"), "{seen}");

    // Search towards older lines finds one, the status says so.
    tmux.keys(&["?"]);
    tmux.keys(&["-l", "line-42."]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_screen("the line found", |s| region(s, B).contains("line-42."));
    assert!(status_line(&screen).contains("found: line-42."), "{screen}");
    assert!(!region(&screen, B).contains("line-150."), "{screen}");

    // `v` and a line down select two lines; `y` copies them (OSC 52 to
    // the outer terminal, tmux's buffer) and leaves.
    tmux.keys(&["v"]);
    tmux.keys(&["Down"]);
    tmux.keys(&["y"]);
    tmux.wait_screen("the live pane", |s| {
        region(s, B).contains("line-200.") && !status_line(s).contains("SCROLL")
    });
    assert_eq!(show_buffer(&tmux), "line-42.\nline-43.");

    // PageUp after the prefix: a page up at once; `q` the live screen again.
    prefixed(&tmux, "PPage");
    tmux.wait_screen("older lines in the right pane", |s| {
        let r = region(s, B);
        status_line(s).contains("[SCROLL ") && r.contains("line-150.") && !r.contains("line-200.")
    });
    tmux.keys(&["q"]);
    let screen = tmux.wait_screen("the live pane", |s| {
        region(s, B).contains("line-200.") && !status_line(s).contains("SCROLL")
    });
    assert!(!screen.contains("attach-rc"), "{screen}");
    tmux.type_line("echo typed-''again");
    c.wait_text(&b, "typed-again");
}

#[test]
fn the_wheel_scrolls_the_pane_under_it_or_reaches_a_program_that_asked_for_the_mouse() {
    let ptyd = Ptyd::start();
    let (a, b) = two_panes(&ptyd);
    let mut c = ptyd.connect();
    numbered_lines(&mut c, &a);
    c.type_line(&b, "printf '\\033[?1000h\\033[?1006h'; stty -echo; cat -v");
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &b);
    // Over the right pane, whose program reads the mouse: it gets the
    // wheel in its own coordinates (column 71 is its 10th).
    mouse(&tmux, 64, 71, 5, false);
    mouse(&tmux, 65, 71, 6, false);
    tmux.type_line("after-wheel");
    c.wait_text(&b, "^[[<64;10;5M^[[<65;10;6Mafter-wheel");
    assert!(!status_line(&tmux.screen()).contains("SCROLL"));

    // Over the left pane: scroll mode there, older lines in its rectangle.
    for _ in 0..10 {
        mouse(&tmux, 64, 10, 10, false);
    }
    let screen = tmux.wait_screen("older lines on the left", |s| {
        let r = region(s, A);
        status_line(s).contains("[SCROLL ") && !r.contains("line-200.") && r.contains("line-16")
    });
    assert!(region(&screen, B).contains("after-wheel"), "{screen}");
    assert!(
        status_line(&screen).contains(&format!("\"{a} ")),
        "the pane scrolled has the focus: {screen}"
    );
    // Down to the bottom: scroll mode ends.
    for _ in 0..11 {
        mouse(&tmux, 65, 10, 10, false);
    }
    tmux.wait_screen("the live left pane", |s| {
        region(s, A).contains("line-200.") && !status_line(s).contains("SCROLL")
    });
}

#[test]
fn dragging_a_border_resizes_the_panes_on_both_sides() {
    let ptyd = Ptyd::start();
    let (a, b) = two_panes(&ptyd);
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &a);
    // The border is column 61 (1-based): pressed there, dragged ten
    // columns right, let go.
    mouse(&tmux, 0, 61, 10, false);
    mouse(&tmux, 32, 66, 10, false);
    mouse(&tmux, 32, 71, 10, false);
    mouse(&tmux, 0, 71, 10, true);
    for (p, size) in [(&a, "39 70"), (&b, "39 49")] {
        c.type_line(p, "clear; stty size");
        c.wait_text(p, size);
    }
    tmux.wait_screen("the border moved, the left pane wider", |s| {
        s.lines().take(ROWS).all(|l| l.chars().nth(70) == Some('│'))
            && region(s, (0, 70)).contains("39 70")
    });
    // Back left, past where it started.
    mouse(&tmux, 0, 71, 20, false);
    mouse(&tmux, 32, 51, 20, false);
    mouse(&tmux, 0, 51, 20, true);
    c.type_line(&a, "clear; stty size");
    c.wait_text(&a, "39 50");
    c.type_line(&b, "clear; stty size");
    c.wait_text(&b, "39 69");
}

#[test]
fn a_drag_in_a_pane_selects_and_the_release_copies_with_osc52() {
    let ptyd = Ptyd::start();
    let (a, _b) = two_panes(&ptyd);
    let mut c = ptyd.connect();
    c.type_line(&a, "clear; echo first-line-text; echo select-me here");
    c.wait_text(&a, "select-me here");
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    attach(&tmux, &a);
    // From `line-text` on the first row (column 7, 1-based) to the end of
    // `select-me` on the second (column 9).
    mouse(&tmux, 0, 7, 1, false);
    mouse(&tmux, 32, 12, 2, false);
    mouse(&tmux, 32, 9, 2, false);
    // Highlighted while dragging.
    tmux.wait_screen("the selection shown", |_| {
        let styled = tmux.run(&["capture-pane", "-p", "-e", "-t", "main"]);
        styled
            .lines()
            .next()
            .is_some_and(|l| l.contains("\x1b[7m") && l.contains("line-text"))
    });
    mouse(&tmux, 0, 9, 2, true);
    assert_eq!(show_buffer(&tmux), "line-text\nselect-me");
    // The drag's scroll mode ended with the release; keys reach the pane.
    let screen = tmux.wait_screen("the live view", |s| {
        status_line(s).contains("copied 19 characters")
    });
    assert!(!status_line(&screen).contains("SCROLL"), "{screen}");
    tmux.type_line("echo after-''copy");
    c.wait_text(&a, "after-copy");
}

#[test]
fn dragging_the_border_of_a_nested_split_moves_that_border_only() {
    let ptyd = Ptyd::start();
    let (a, b) = two_panes(&ptyd);
    let cc = ptyd.create(json!({
        "argv": ["/bin/sh"], "env": { "PS1": "$ " }, "split": b, "direction": "horizontal"
    }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &a);
    // `a | (b | c)`: b and c share columns 61-119, their border between.
    let cols = |c: &mut util::Conn, p: &str| c.pane(p)["cols"].as_u64().unwrap_or(0);
    let (wide_b, wide_c) = (cols(&mut c, &b), cols(&mut c, &cc));
    assert_eq!(wide_b + wide_c + 1, 59, "{wide_b} {wide_c}");
    let border = (61 + wide_b + 1) as u16;
    mouse(&tmux, 0, border, 10, false);
    mouse(&tmux, 32, border - 5, 10, false);
    mouse(&tmux, 0, border - 5, 10, true);
    util::eventually("the inner border moved", || {
        let now = (cols(&mut c, &a), cols(&mut c, &b), cols(&mut c, &cc));
        if now == (60, wide_b - 5, wide_c + 5) {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    });
}

#[test]
fn a_search_reaches_the_top_of_a_history_of_hundreds_of_thousands_of_lines() {
    let dirs = util::Dirs::new();
    dirs.write_config("scrollback_lines = 400000\n");
    let ptyd = dirs.start(&util::unique_name("deep"));
    let mut c = ptyd.connect();
    let pane = ptyd.create(json!({ "argv": ["/bin/sh"], "env": { "PS1": "$ " } }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The marker first, then far more lines than a line-by-line search
    // looks through.
    c.type_line(&pane, "echo deep-''top-line; seq 1 300000; echo deep-''end");
    c.wait_text(&pane, "deep-end");
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &pane);
    prefixed(&tmux, "[");
    tmux.wait_screen("scroll mode on the status line", |s| {
        status_line(s).contains("[SCROLL ")
    });
    tmux.keys(&["?"]);
    tmux.keys(&["-l", "top-line"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_screen("the search's answer", |s| {
        status_line(s).contains("found: top-line")
    });
    assert!(
        !status_line(&screen).contains("not found"),
        "the marker 300,000 lines up was not found: {screen}"
    );
    assert!(screen.contains("deep-top-line"), "{screen}");
}

/// The `SCROLL 12/240` indicator of a status line: the cursor's line and
/// how many lines the mode shows.
fn indicator(screen: &str) -> Option<(u64, u64)> {
    let line = status_line(screen);
    let rest = &line[line.find("[SCROLL ")? + "[SCROLL ".len()..];
    let (pos, rest) = rest.split_once('/')?;
    let total = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    Some((pos.parse().ok()?, total.parse().ok()?))
}

#[test]
fn scroll_mode_comes_back_after_a_live_upgrade_and_a_crash() {
    let ptyd = Ptyd::start();
    let (_a, b) = two_panes(&ptyd);
    let mut c = ptyd.connect();
    numbered_lines(&mut c, &b);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    attach(&tmux, &b);

    // A page up, then a search towards older lines.
    prefixed(&tmux, "PPage");
    tmux.wait_screen("older lines in the right pane", |s| {
        indicator(s).is_some() && !region(s, B).contains("line-200.")
    });
    tmux.keys(&["?"]);
    tmux.keys(&["-l", "line-4"]);
    tmux.keys(&["Enter"]);
    tmux.wait_screen("the line found", |s| {
        status_line(s).contains("found: line-4") && !region(s, B).contains("line-150.")
    });
    // A line up from line-49 (the key puts the message away).
    tmux.keys(&["Up"]);
    let before = tmux.wait_screen("the indicator again", |s| indicator(s).is_some());
    let want = (region(&before, B), indicator(&before));

    let out = ptyd.run_cli(&["upgrade"]);
    util::assert_exit(&out, 0);
    // Output meanwhile does not move what scroll mode shows.
    c.type_line(&b, "echo after-''upgrade");
    c.wait_text(&b, "after-upgrade");
    let mut c = ptyd.connect();
    c.ok("server.status", json!({}));
    let screen = tmux.wait_screen("the same lines after the upgrade", |s| {
        (region(s, B), indicator(s)) == want
    });
    assert!(!screen.contains("attach-rc"), "{screen}");
    // The search went along: `n` finds the next older match, line-47.
    tmux.keys(&["n"]);
    tmux.wait_screen("the next match", |s| {
        status_line(s).contains("found: line-4")
    });
    // A selection of line-47 and line-46, to copy after the crash.
    tmux.keys(&["v"]);
    tmux.keys(&["Up"]);
    let (line, total) = want.1.unwrap_or_default();
    let before = tmux.wait_screen("the cursor two lines up", |s| {
        indicator(s) == Some((line - 2, total))
    });
    let want = (region(&before, B), indicator(&before));

    let mut c = ptyd.crash_serving();
    util::eventually("the client back", || {
        let n = c.ok("client.list", json!({}))["clients"]
            .as_array()
            .map_or(0, Vec::len);
        (n == 1).then_some(())
    });
    let screen = tmux.wait_screen("the same lines after the crash", |s| {
        (region(s, B), indicator(s)) == want && !s.contains("connection to the server lost")
    });
    assert!(!screen.contains("attach-rc"), "{screen}");
    // The selection went along too: `y` copies its two lines and leaves.
    tmux.keys(&["y"]);
    tmux.wait_screen("the live pane", |s| {
        region(s, B).contains("after-upgrade") && indicator(s).is_none()
    });
    assert_eq!(show_buffer(&tmux), "line-46.\nline-47.");
}
