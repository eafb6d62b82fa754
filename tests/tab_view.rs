//! The tab view through the real binary, tmux as the outer terminal: a
//! tab's panes drawn side by side in their rectangles, each PTY sized to
//! its rectangle, borders and the status line where they belong; the keys
//! under the prefix; a key bound to nothing; the layout worked out again
//! when the outer window is resized; clients on different tabs at
//! different sizes; the view coming back after a live upgrade and after
//! the serving process is killed; and a keystroke's echo going out while
//! the client has frames it has not read.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Ptyd, Tmux, shell_quote};

fn ptyd_cmd(args: &str) -> String {
    format!("{} {args}", shell_quote(util::PTYD))
}

/// A pane running a plain shell with a short prompt.
fn shell(ptyd: &Ptyd, extra: serde_json::Value) -> String {
    let mut params = json!({ "argv": ["/bin/sh"], "env": { "PS1": "$ " } });
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    ptyd.create(params)["id"].as_str().unwrap().to_string()
}

/// `p1 | (p2 over p3)`: the tab the tests look at.
fn three_panes(ptyd: &Ptyd) -> (String, String, String) {
    let a = shell(ptyd, json!({ "tab_name": "work" }));
    let b = shell(ptyd, json!({ "split": a, "direction": "horizontal" }));
    let c = shell(ptyd, json!({ "split": b, "direction": "vertical" }));
    (a, b, c)
}

/// The text of `rect` (x, y, cols, rows) on a captured screen.
fn region(screen: &str, (x, y, cols, rows): (usize, usize, usize, usize)) -> Vec<String> {
    screen
        .lines()
        .skip(y)
        .take(rows)
        .map(|l| l.chars().skip(x).take(cols).collect::<String>())
        .collect()
}

fn column(screen: &str, x: usize, rows: std::ops::Range<usize>) -> String {
    screen
        .lines()
        .skip(rows.start)
        .take(rows.len())
        .map(|l| l.chars().nth(x).unwrap_or(' '))
        .collect()
}

/// Attaches the outer terminal of `tmux` to `target` (a tab view) and
/// waits for its status line.
fn attach(tmux: &Tmux, ptyd: &Ptyd, target: &str) {
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    tmux.type_line(&ptyd_cmd(&format!("attach {target}; echo attach-''rc=$?")));
    tmux.wait_screen("the status line", |s| s.contains("[main]"));
}

/// Each pane prints its marker and its PTY's size.
fn mark_and_size(c: &mut util::Conn, panes: &[&str]) {
    for p in panes {
        c.type_line(p, &format!("clear; echo MARK-{p}; stty size"));
    }
}

const P1: (usize, usize, usize, usize) = (0, 0, 60, 39);
const P2: (usize, usize, usize, usize) = (61, 0, 59, 19);
const P3: (usize, usize, usize, usize) = (61, 20, 59, 19);

#[test]
fn three_panes_are_drawn_in_their_rectangles_at_their_sizes() {
    let ptyd = Ptyd::start();
    let (a, b, cc) = three_panes(&ptyd);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &a);
    let mut c = ptyd.connect();
    mark_and_size(&mut c, &[&a, &b, &cc]);
    let screen = tmux.wait_screen("three markers and sizes", |s| {
        s.contains(&format!("MARK-{cc}")) && s.matches("19 59").count() == 2
    });
    let r1 = region(&screen, P1).join("\n");
    let r2 = region(&screen, P2).join("\n");
    let r3 = region(&screen, P3).join("\n");
    assert!(
        r1.contains(&format!("MARK-{a}")) && r1.contains("39 60"),
        "{screen}"
    );
    assert!(
        r2.contains(&format!("MARK-{b}")) && r2.contains("19 59"),
        "{screen}"
    );
    assert!(
        r3.contains(&format!("MARK-{cc}")) && r3.contains("19 59"),
        "{screen}"
    );
    // The PTYs themselves, as the server reports them.
    for (p, size) in [(&a, (60, 39)), (&b, (59, 19)), (&cc, (59, 19))] {
        let info = c.pane(p);
        assert_eq!(
            (info["cols"].as_u64(), info["rows"].as_u64()),
            (Some(size.0), Some(size.1)),
            "{p}"
        );
    }
    // Borders: one column between p1 and the rest, one row between p2 and p3.
    assert_eq!(
        column(&screen, 60, 0..39),
        "│".repeat(19) + "├" + &"│".repeat(19)
    );
    let divider = &screen
        .lines()
        .nth(19)
        .unwrap()
        .chars()
        .skip(61)
        .collect::<String>();
    assert_eq!(divider.trim_end(), "─".repeat(59), "{screen}");
    // The status line: workspace, the tab by number and name, and the
    // pane attached to, which the view is focused on.
    let status = screen.lines().nth(39).unwrap();
    assert!(status.starts_with("[main] 0:work*"), "{status:?}");
    assert!(status.ends_with(&format!("\"{a} /bin/sh\"")), "{status:?}");
}

fn status_line(screen: &str) -> String {
    screen.lines().last().unwrap_or("").to_string()
}

/// The prefix, then `key` (a tmux key name).
fn prefixed(tmux: &Tmux, key: &str) {
    tmux.keys(&["C-\\"]);
    tmux.keys(&[key]);
}

#[test]
fn every_binding_changes_what_is_seen_and_an_unbound_key_only_says_so() {
    let ptyd = Ptyd::start();
    let (a, b, cc) = three_panes(&ptyd);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &a);
    let mut c = ptyd.connect();
    let focused = |p: &str| {
        let want = format!("\"{p} ");
        move |s: &str| status_line(s).contains(&want)
    };
    // Focus moves: right, down, then the next pane in order (back to p1).
    prefixed(&tmux, "Right");
    tmux.wait_screen("the focus on the right pane", focused(&b));
    prefixed(&tmux, "Down");
    tmux.wait_screen("the focus below", focused(&cc));
    prefixed(&tmux, "o");
    tmux.wait_screen("the focus on the next pane", focused(&a));
    // Keys go to the focused pane.
    tmux.type_line("echo typed-''here");
    let screen = tmux.wait_screen("the echo", |s| s.contains("typed-here"));
    assert!(
        region(&screen, P1).join("\n").contains("typed-here"),
        "{screen}"
    );
    // A key bound to nothing: said so, still attached, nothing typed.
    prefixed(&tmux, "q");
    tmux.wait_screen("the message", |s| {
        status_line(s).contains("no binding for C-\\ q")
    });
    tmux.type_line("echo still-''attached");
    let screen = tmux.wait_screen("the view still there", |s| s.contains("still-attached"));
    assert!(!screen.contains("attach-rc"), "{screen}");
    // Zoom: the pane fills the tab, its PTY too; and back.
    prefixed(&tmux, "z");
    tmux.wait_screen("the zoom", |s| status_line(s).contains("[ZOOM]"));
    c.type_line(&a, "clear; stty size");
    tmux.wait_screen("the zoomed size", |s| s.contains("39 120"));
    prefixed(&tmux, "z");
    tmux.wait_screen("the layout back", |s| {
        column(s, 60, 0..39) == "│".repeat(19) + "├" + &"│".repeat(19)
    });
    // Resize: the border moves right, the pane grows.
    prefixed(&tmux, "C-Right");
    util::eventually("p1 wider", || {
        let cols = c.pane(&a)["cols"].as_u64().unwrap_or(0);
        if cols > 60 {
            Ok(())
        } else {
            Err(format!("{cols} columns"))
        }
    });
    // Split side by side: a fourth pane, focused.
    prefixed(&tmux, "%");
    let p4 = util::eventually("a fourth pane", || {
        let panes = c.panes();
        match panes.len() {
            4 => Ok(panes[3]["id"].as_str().unwrap().to_string()),
            n => Err(format!("{n} panes")),
        }
    });
    tmux.wait_screen("the new pane focused", focused(&p4));
    // Close it: asked first; `y` kills it.
    prefixed(&tmux, "x");
    tmux.wait_screen("the question", |s| {
        status_line(s).contains(&format!("kill pane {p4}? (y/n)"))
    });
    tmux.keys(&["y"]);
    util::eventually("the pane removed", || {
        let n = c.panes().len();
        if n == 3 {
            Ok(())
        } else {
            Err(format!("{n} panes"))
        }
    });
    tmux.wait_screen("the focus back in the tab", |s| {
        !status_line(s).contains(&p4)
    });
    // A new tab, shown; then the previous, the next, by number.
    prefixed(&tmux, "c");
    tmux.wait_screen("a second tab, current", |s| {
        status_line(s).starts_with("[main] 0:work 1:")
            && status_line(s).contains('*')
            && !status_line(s).contains("work*")
    });
    prefixed(&tmux, "p");
    tmux.wait_screen("the first tab", |s| {
        status_line(s).starts_with("[main] 0:work*")
    });
    prefixed(&tmux, "n");
    tmux.wait_screen("the second tab", |s| !status_line(s).contains("work*"));
    // Rename it.
    prefixed(&tmux, ",");
    tmux.wait_screen("the prompt", |s| status_line(s).contains("(rename tab)"));
    tmux.type_line("logs");
    tmux.wait_screen("the new name", |s| status_line(s).contains("1:logs*"));
    prefixed(&tmux, "0");
    tmux.wait_screen("tab 0", |s| {
        status_line(s).starts_with("[main] 0:work* 1:logs")
    });
    // The key list, put away by any key.
    prefixed(&tmux, "?");
    tmux.wait_screen("the key list", |s| {
        s.contains("split-right") && s.contains("detach")
    });
    tmux.keys(&["Space"]);
    tmux.wait_screen("the key list gone", |s| !s.contains("split-right"));
    // Detach ends the attach command with 0.
    prefixed(&tmux, "d");
    tmux.wait_screen("the outer shell", |s| s.contains("attach-rc=0"));
}

#[test]
fn a_resized_outer_window_lays_the_tab_out_again() {
    let ptyd = Ptyd::start();
    let (a, b, cc) = three_panes(&ptyd);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &a);
    let mut c = ptyd.connect();
    util::eventually("p1 at 60x39", || {
        let p = c.pane(&a);
        (p["cols"] == 60 && p["rows"] == 39).then_some(())
    });
    tmux.run(&["resize-window", "-t", "main", "-x", "100", "-y", "30"]);
    // 99 columns split in two: 50 | border | 49; 28 rows: 14 / border / 14.
    for (p, size) in [(&a, (50, 29)), (&b, (49, 14)), (&cc, (49, 14))] {
        util::eventually(format!("{p} at {size:?}"), || {
            let info = c.pane(p);
            let got = (
                info["cols"].as_u64().unwrap_or(0),
                info["rows"].as_u64().unwrap_or(0),
            );
            if got == size {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        });
    }
    mark_and_size(&mut c, &[&a]);
    let screen = tmux.wait_screen("the new layout", |s| {
        s.contains("29 50") && column(s, 50, 0..29) == "│".repeat(14) + "├" + &"│".repeat(14)
    });
    assert!(
        status_line(&screen).starts_with("[main] 0:work*"),
        "{screen}"
    );
    assert_eq!(screen.lines().count(), 30, "{screen}");
}

#[test]
fn two_clients_show_different_tabs_at_their_own_sizes() {
    let ptyd = Ptyd::start();
    let (a, _b, _c) = three_panes(&ptyd);
    let d = shell(&ptyd, json!({ "tab_name": "other" }));
    let big = Tmux::outer_session(&ptyd, 120, 40);
    let small = Tmux::outer_session(&ptyd, 80, 24);
    attach(&big, &ptyd, &a);
    attach(&small, &ptyd, &d);
    let mut c = ptyd.connect();
    mark_and_size(&mut c, &[&a, &d]);
    let screen = small.wait_screen("the other tab", |s| {
        s.contains(&format!("MARK-{d}")) && s.contains("23 80")
    });
    // The other tab printed meanwhile: marked with activity.
    assert!(
        status_line(&screen).starts_with("[main] 0:work# 1:other*"),
        "{screen}"
    );
    assert!(!screen.contains('│'), "one pane, no border: {screen}");
    let screen = big.wait_screen("the work tab", |s| {
        s.contains(&format!("MARK-{a}")) && s.contains("39 60")
    });
    assert!(
        status_line(&screen).starts_with("[main] 0:work* 1:other#"),
        "{screen}"
    );
    assert_eq!(
        column(&screen, 60, 0..39),
        "│".repeat(19) + "├" + &"│".repeat(19)
    );
    // Switching one client's tab leaves the other where it is.
    prefixed(&small, "0");
    small.wait_screen("the work tab on the small client", |s| {
        status_line(s).starts_with("[main] 0:work*")
    });
    c.type_line(&d, "echo only-''in-d");
    c.wait_text(&d, "only-in-d");
    prefixed(&big, "1");
    big.wait_screen("the other tab on the big client", |s| {
        s.contains("only-in-d")
    });
}

/// The attached clients' numbers, lowest first.
fn client_ids(c: &mut util::Conn) -> Vec<u64> {
    let list = c.ok("client.list", json!({}));
    list["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["client"].as_u64().unwrap())
        .collect()
}

/// Where the outer terminal's cursor is.
fn cursor(tmux: &Tmux) -> (usize, usize) {
    let at = tmux.run(&["display", "-p", "-t", "main", "#{cursor_x} #{cursor_y}"]);
    let mut it = at.split_whitespace().map(|n| n.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// The pane the status line names as focused.
fn focus_shown(screen: &str) -> String {
    let status = status_line(screen);
    let title = status.rsplit('"').nth(1).unwrap_or("");
    title.split(' ').next().unwrap_or("").to_string()
}

fn inside((x, y, cols, rows): (usize, usize, usize, usize), (cx, cy): (usize, usize)) -> bool {
    (x..x + cols).contains(&cx) && (y..y + rows).contains(&cy)
}

/// The border column right of p1, unzoomed.
const P1_BORDER: &str = "│││││││││││││││││││├│││││││││││││││││││";

/// Two outer terminals attached to the tab view of `target`, a
/// connection, and the two clients' numbers.
fn two_clients(ptyd: &Ptyd, target: &str) -> (Tmux, Tmux, util::Conn, u64, u64) {
    let one = Tmux::outer_session(ptyd, 120, 40);
    let two = Tmux::outer_session(ptyd, 120, 40);
    let mut c = ptyd.connect();
    attach(&one, ptyd, target);
    let first = client_ids(&mut c)[0];
    attach(&two, ptyd, target);
    let second = *client_ids(&mut c).iter().find(|id| **id != first).unwrap();
    (one, two, c, first, second)
}

/// `ptyd ARGS`, naming a client that shows no tab, fails saying so.
fn refused_for_no_view(ptyd: &Ptyd, args: &[&str]) {
    let out = ptyd.run_cli(args);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client 999 shows no tab"), "{err}");
}

#[test]
fn two_clients_of_one_tab_each_have_their_own_focus_and_zoom() {
    let ptyd = Ptyd::start();
    let (a, b, cc) = three_panes(&ptyd);
    let (one, two, mut c, first, second) = two_clients(&ptyd, &a);
    let border = P1_BORDER;

    // One client's key moves its focus, mark and cursor only.
    prefixed(&one, "Right");
    one.wait_screen("the first client's focus on p2", |s| focus_shown(s) == b);
    util::eventually("the first client's cursor in p2", || {
        inside(P2, cursor(&one)).then_some(())
    });
    let screen = two.screen();
    assert_eq!(focus_shown(&screen), a, "{screen}");
    assert!(inside(P1, cursor(&two)), "{:?}", cursor(&two));

    // Its zoom leaves the other's layout drawn, and the panes their size.
    prefixed(&one, "z");
    let zoomed = one.wait_screen("the first client zoomed", |s| {
        status_line(s).contains("ZOOM") && !s.contains('│')
    });
    assert_eq!(focus_shown(&zoomed), b, "{zoomed}");
    let screen = two.screen();
    assert_eq!(column(&screen, 60, 0..39), border, "{screen}");
    assert!(!status_line(&screen).contains("ZOOM"), "{screen}");
    for (p, size) in [(&a, (60, 39)), (&b, (59, 19)), (&cc, (59, 19))] {
        let info = c.pane(p);
        let got = (info["cols"].as_u64(), info["rows"].as_u64());
        assert_eq!(got, (Some(size.0), Some(size.1)), "{p}");
    }
    let views: Vec<(u64, String, bool)> = c.ok("client.list", json!({}))["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let zoom = v["view"]["zoom"].as_bool().unwrap();
            (
                v["client"].as_u64().unwrap(),
                v["pane"].as_str().unwrap().to_string(),
                zoom,
            )
        })
        .collect();
    assert!(views.contains(&(first, b.clone(), true)), "{views:?}");
    assert!(views.contains(&(second, a.clone(), false)), "{views:?}");

    // `ptyd focus --client` moves that client alone.
    let out = ptyd.run_cli(&["focus", &cc, "--client", &second.to_string()]);
    util::assert_exit(&out, 0);
    two.wait_screen("the second client's focus on p3", |s| focus_shown(s) == cc);
    util::eventually("the second client's cursor in p3", || {
        inside(P3, cursor(&two)).then_some(())
    });
    let screen = one.screen();
    assert_eq!(focus_shown(&screen), b, "{screen}");
    assert!(status_line(&screen).contains("ZOOM"), "{screen}");

    // Plain `ptyd focus` moves every client of the workspace; the zoomed
    // one stays zoomed, on the pane it now focuses.
    let out = ptyd.run_cli(&["focus", &a]);
    util::assert_exit(&out, 0);
    two.wait_screen("the second client's focus on p1", |s| focus_shown(s) == a);
    one.wait_screen("the first client's focus on p1, zoomed", |s| {
        focus_shown(s) == a && status_line(s).contains("ZOOM")
    });
    let screen = two.screen();
    assert_eq!(column(&screen, 60, 0..39), border, "{screen}");

    // A client that is not a tab view is said so.
    refused_for_no_view(&ptyd, &["focus", &a, "--client", "999"]);
}

#[test]
fn zoom_with_a_client_zooms_that_clients_view_alone() {
    let ptyd = Ptyd::start();
    let (a, _b, cc) = three_panes(&ptyd);
    let (one, two, _c, first, second) = two_clients(&ptyd, &a);
    let border = P1_BORDER;
    let zoom = |args: &[&str]| {
        let mut all = vec!["zoom", "--json"];
        all.extend_from_slice(args);
        let out = ptyd.run_cli(&all);
        util::assert_exit(&out, 0);
        let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        reply["zoom"].clone()
    };

    // Without a target: the client's own focus, p1; the tab's zoom stays.
    let tab_zoom = zoom(&["--client", &second.to_string()]);
    assert_eq!(tab_zoom, serde_json::Value::Null);
    let screen = two.wait_screen("the second client zoomed on p1", |s| {
        status_line(s).contains("ZOOM") && !s.contains('│')
    });
    assert_eq!(focus_shown(&screen), a, "{screen}");
    let screen = one.screen();
    assert_eq!(column(&screen, 60, 0..39), border, "{screen}");
    assert!(!status_line(&screen).contains("ZOOM"), "{screen}");

    // A target: that client shows it zoomed, the other stays on p1.
    let tab_zoom = zoom(&[&cc, "--client", &first.to_string(), "--on"]);
    assert_eq!(tab_zoom, serde_json::Value::Null);
    let screen = one.wait_screen("the first client zoomed on p3", |s| {
        status_line(s).contains("ZOOM") && !s.contains('│')
    });
    assert_eq!(focus_shown(&screen), cc, "{screen}");
    let screen = two.screen();
    assert!(status_line(&screen).contains("ZOOM"), "{screen}");
    assert_eq!(focus_shown(&screen), a, "{screen}");

    // Toggled again, the second client alone comes out of its zoom.
    zoom(&["--client", &second.to_string()]);
    let screen = two.wait_screen("the second client unzoomed", |s| {
        column(s, 60, 0..39) == border && !status_line(s).contains("ZOOM")
    });
    assert_eq!(focus_shown(&screen), a, "{screen}");
    assert!(status_line(&one.screen()).contains("ZOOM"));

    // A client that is not a tab view is said so.
    refused_for_no_view(&ptyd, &["zoom", "--client", "999"]);
}

/// The status line's focus and the border column of the view, as seen.
fn view_of(screen: &str) -> (String, String) {
    (focus_shown(screen), column(screen, 60, 0..39))
}

#[test]
fn a_split_view_comes_back_after_a_live_upgrade_and_a_crash() {
    let ptyd = Ptyd::start();
    let (a, b, _c) = three_panes(&ptyd);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    let other = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &a);
    attach(&other, &ptyd, &a);
    // Two clients of the tab: one focused on p2, the other zoomed on p1.
    prefixed(&tmux, "Right");
    let before = tmux.wait_screen("the focus on p2", |s| {
        status_line(s).contains(&format!("\"{b} "))
    });
    let want = view_of(&before);
    prefixed(&other, "z");
    let zoomed = other.wait_screen("the other client zoomed on p1", |s| {
        status_line(s).contains("ZOOM") && focus_shown(s) == a
    });
    let other_want = view_of(&zoomed);
    assert_ne!(other_want.1, want.1, "{zoomed}");

    let out = ptyd.run_cli(&["upgrade"]);
    util::assert_exit(&out, 0);
    let mut c = ptyd.connect();
    c.type_line(&b, "echo after-''upgrade");
    let screen = tmux.wait_screen("output after the upgrade", |s| s.contains("after-upgrade"));
    assert_eq!(view_of(&screen), want, "{screen}");
    assert!(
        region(&screen, P2).join("\n").contains("after-upgrade"),
        "{screen}"
    );
    c.type_line(&a, "echo other-''after-upgrade");
    let screen = other.wait_screen("output after the upgrade on the other client", |s| {
        s.contains("other-after-upgrade")
    });
    assert_eq!(view_of(&screen), other_want, "{screen}");
    assert!(status_line(&screen).contains("ZOOM"), "{screen}");
    // The keys still reach the view's bindings.
    prefixed(&tmux, "Down");
    let moved = tmux.wait_screen("the focus moved down", |s| {
        !status_line(s).contains(&format!("\"{b} "))
    });
    let want = view_of(&moved);
    assert_ne!(want.0, b);

    let mut c = ptyd.crash_serving();
    util::eventually("both clients back", || {
        let n = c.ok("client.list", json!({}))["clients"]
            .as_array()
            .map_or(0, Vec::len);
        (n == 2).then_some(())
    });
    c.type_line(&want.0, "echo after-''crash");
    let screen = tmux.wait_screen("output after the crash", |s| {
        s.contains("after-crash") && !s.contains("connection to the server lost")
    });
    assert_eq!(view_of(&screen), want, "{screen}");
    assert!(
        region(&screen, P3).join("\n").contains("after-crash"),
        "{screen}"
    );
    c.type_line(&a, "echo other-''after-crash");
    let screen = other.wait_screen("output after the crash on the other client", |s| {
        s.contains("other-after-crash") && !s.contains("connection to the server lost")
    });
    assert_eq!(view_of(&screen), other_want, "{screen}");
    assert!(status_line(&screen).contains("ZOOM"), "{screen}");
}

fn write_config(ptyd: &Ptyd, text: &str) {
    let dir = ptyd.dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

#[test]
fn keys_and_the_status_line_come_from_the_config_and_apply_at_reload() {
    let ptyd = Ptyd::start();
    let (a, _b, _c) = three_panes(&ptyd);
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &a);
    write_config(
        &ptyd,
        "status = \"top\"\n[keys]\n\"|\" = \"split-right\"\n\"%\" = \"none\"\n",
    );
    util::assert_exit(&ptyd.run_cli(&["config", "reload"]), 0);
    tmux.wait_screen("the status line on top", |s| {
        s.lines()
            .next()
            .is_some_and(|l| l.starts_with("[main] 0:work*"))
    });
    let mut c = ptyd.connect();
    prefixed(&tmux, "%");
    tmux.wait_screen("% unbound", |s| {
        s.lines()
            .next()
            .is_some_and(|l| l.contains("no binding for C-\\ %"))
    });
    assert_eq!(c.panes().len(), 3);
    prefixed(&tmux, "|");
    util::eventually("the split bound to |", || {
        let n = c.panes().len();
        if n == 4 {
            Ok(())
        } else {
            Err(format!("{n} panes"))
        }
    });
    // A binding that names no action is found by `config check`.
    write_config(&ptyd, "[keys]\n\"q\" = \"explode\"\n");
    let out = ptyd.run_cli(&["config", "check"]);
    util::assert_exit(&out, 1);
    let said = util::stdout(&out) + &util::stderr(&out);
    assert!(
        said.contains("explode") && said.contains("split-right"),
        "{said}"
    );
}

#[test]
fn scroll_mode_and_read_only_work_inside_the_view() {
    let ptyd = Ptyd::start();
    let (a, b, _c) = three_panes(&ptyd);
    let mut c = ptyd.connect();
    c.type_line(&b, "for i in $(seq 1 200); do echo line-$i.; done");
    c.wait_text(&b, "line-200.");
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &b);
    // The scroll mode in the focused pane's rectangle, its history; `q`
    // back.
    prefixed(&tmux, "[");
    tmux.wait_screen("the scroll mode", |s| status_line(s).contains("[SCROLL "));
    tmux.keys(&["PPage"]);
    tmux.wait_screen("a page up", |s| {
        let r = region(s, P2).join("\n");
        r.contains("line-170.") && !r.contains("line-200.")
    });
    tmux.keys(&["q"]);
    tmux.wait_screen("the view again", |s| {
        !status_line(s).contains("SCROLL") && status_line(s).starts_with("[main] 0:work*")
    });
    // A read-only client: shown so, its keys change nothing.
    let watcher = Tmux::outer_session(&ptyd, 100, 30);
    watcher.type_line(&ptyd_cmd(&format!("attach --read-only {a}")));
    watcher.wait_screen("the read-only view", |s| {
        status_line(s).contains("[READ-ONLY]")
    });
    watcher.type_line("echo not-''typed");
    prefixed(&watcher, "%");
    watcher.wait_screen("the refusal", |s| status_line(s).contains("read-only"));
    assert_eq!(c.panes().len(), 3);
    assert!(!c.capture(&a).contains("not-typed"));
    // It moves its own focus (a, b, then c), never the tab's default.
    let default =
        |c: &mut util::Conn| c.ok("tree", json!({}))["workspaces"][0]["tabs"][0]["focus"].clone();
    let before = default(&mut c);
    prefixed(&watcher, "o");
    prefixed(&watcher, "o");
    util::eventually("the read-only client's own focus on the third pane", || {
        let list = c.ok("client.list", json!({}));
        let watching = list["clients"]
            .as_array()?
            .iter()
            .find(|v| v["read_only"] == true)?;
        (watching["pane"] == json!(_c)).then_some(())
    });
    assert_eq!(default(&mut c), before);
}

#[test]
fn a_click_focuses_a_pane_and_reaches_a_program_that_asked_for_the_mouse() {
    let ptyd = Ptyd::start();
    let (a, b, cc) = three_panes(&ptyd);
    let mut c = ptyd.connect();
    c.type_line(&cc, "printf '\\033[?1000h\\033[?1006h'; stty -echo; cat -v");
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &ptyd, &a);
    let click = |x: u16, y: u16| {
        tmux.keys(&["-l", &format!("\x1b[<0;{x};{y}M\x1b[<0;{x};{y}m")]);
    };
    // In p2 (columns 62-120, rows 1-19, 1-based): focus moves there.
    click(70, 5);
    tmux.wait_screen("the focus on p2", |s| {
        status_line(s).contains(&format!("\"{b} "))
    });
    // In p3, which asked for the mouse: the first click focuses it, the
    // next reaches its program in its own coordinates.
    click(71, 26);
    tmux.wait_screen("the focus on p3", |s| {
        status_line(s).contains(&format!("\"{cc} "))
    });
    click(71, 26);
    // A click on a border or the status line changes nothing.
    click(61, 5);
    click(5, 40);
    // `cat` reads lines: the Enter brings what came before it.
    tmux.type_line("typed-after");
    c.wait_text(&cc, "^[[<0;10;6M^[[<0;10;6mtyped-after");
    assert!(!c.capture(&cc).contains(";5M"), "{}", c.capture(&cc));
}

/// A key typed while the client has not read the frames before it: its
/// echo is queued right behind them, the focused pane alone, instead of
/// waiting for the client to catch up; the flooding neighbour's changes
/// do wait, and are drawn once the client has read its backlog.
#[test]
fn an_echo_goes_out_while_the_client_has_frames_unread_and_the_rest_follows() {
    let ptyd = Ptyd::start();
    let typed = shell(&ptyd, json!({ "tab_name": "echo" }));
    let flood = shell(&ptyd, json!({ "split": typed, "direction": "horizontal" }));
    let mut ctl = ptyd.connect();
    ctl.wait_text(&typed, "$");
    ctl.wait_text(&flood, "$");
    let (_, mut client) = ptyd
        .connect()
        .attach(json!({ "target": typed, "cols": 80, "rows": 24, "view": {} }));
    let mut output = Vec::new();
    while !String::from_utf8_lossy(&output).contains('$') {
        match client.next_frame() {
            Some((util::OUTPUT, payload)) => output.extend_from_slice(&payload),
            Some((util::EXIT, payload)) => {
                panic!("EXIT: {}", String::from_utf8_lossy(&payload))
            }
            Some(_) => {}
            None => panic!("the stream ended before the first frame"),
        }
    }
    // The neighbour prints far more than a frame, then a mark, while the
    // client reads nothing: the frame it has not read keeps it behind.
    ctl.type_line(&flood, "seq 1 30000; echo FLOOD-''DONE");
    ctl.wait_text(&flood, "FLOOD-DONE");
    client.send(util::INPUT, b"Q");
    // The echo is in the model: its frame was queued in the same turn.
    ctl.wait_text(&typed, "$ Q");
    let mut echo_frame = None;
    while !String::from_utf8_lossy(&output).contains("FLOOD-DONE") {
        match client.next_frame() {
            Some((util::OUTPUT, payload)) => {
                if echo_frame.is_none() && payload.contains(&b'Q') {
                    echo_frame = Some(String::from_utf8_lossy(&payload).into_owned());
                }
                output.extend_from_slice(&payload);
            }
            Some((util::EXIT, payload)) => {
                panic!("EXIT: {}", String::from_utf8_lossy(&payload))
            }
            Some(_) => {}
            None => panic!("the stream ended before the neighbour's output was drawn"),
        }
    }
    let echo_frame = echo_frame.expect("the echo was drawn");
    assert!(
        !echo_frame.contains("FLOOD-DONE") && !echo_frame.contains("30000"),
        "the echo went alone, ahead of the neighbour's changes: {echo_frame:?}"
    );
    client.output = output;
    let screen = client.screen(24, 80);
    assert!(screen.contains("$ Q"), "{screen}");
    assert!(screen.contains("FLOOD-DONE"), "{screen}");
}
