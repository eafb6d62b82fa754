//! The tab view's `:` prompt, `w` chooser and pane titles, and `ptyd
//! split` from a plain shell, through the real binary with tmux as the
//! outer terminal: a command typed at the prompt changes what is seen, a
//! bad one says why on the message line and the client stays; the
//! chooser moves the view to another tab and workspace; titles appear in
//! the border rows at their panes' columns, follow a title change and come
//! and go with `config reload`; `ptyd split` outside any pane splits the
//! focus of the attached client's view, not the tree's active tab.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Ptyd, Tmux, shell_quote};

/// A pane running a plain shell with a short prompt.
fn shell(ptyd: &Ptyd, extra: serde_json::Value) -> String {
    let mut params = json!({ "argv": ["/bin/sh"], "env": { "PS1": "$ " } });
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    ptyd.create(params)["id"].as_str().unwrap().to_string()
}

/// Attaches the outer terminal to `target` and waits for the status line.
fn attach(tmux: &Tmux, target: &str) {
    tmux.type_line(&format!(
        "{} attach {target}; echo attach-''rc=$?",
        shell_quote(util::PTYD)
    ));
    tmux.wait_screen("the status line", |s| s.contains("[main]"));
}

fn status_line(screen: &str) -> String {
    screen.lines().last().unwrap_or("").to_string()
}

fn prefixed(tmux: &Tmux, key: &str) {
    tmux.keys(&["C-\\"]);
    tmux.keys(&[key]);
}

/// The prefix, `:`, then `line` and Enter.
fn command(tmux: &Tmux, line: &str) {
    prefixed(tmux, ":");
    tmux.wait_screen("the prompt", |s| status_line(s).starts_with(':'));
    tmux.type_line(line);
}

fn pane_count(c: &mut util::Conn, n: usize) {
    util::eventually(format!("{n} panes"), || match c.panes().len() {
        m if m == n => Ok(()),
        m => Err(format!("{m} panes")),
    });
}

#[test]
fn the_prompt_runs_ptyd_commands_against_the_focused_pane() {
    let ptyd = Ptyd::start();
    let a = shell(&ptyd, json!({ "tab_name": "work" }));
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    attach(&tmux, &a);
    let mut c = ptyd.connect();
    // `split -v` splits the focused pane: a border row across the screen.
    command(&tmux, "split -v");
    pane_count(&mut c, 2);
    let b = c.panes()[1]["id"].as_str().unwrap().to_string();
    // What it printed (the new pane's id) is on the message line.
    tmux.wait_screen("the stacked split and its id", |s| {
        s.lines().any(|l| l.trim_end() == "─".repeat(100)) && status_line(s).trim_end() == b
    });
    // No TARGET: the focused pane, as inside it.
    command(&tmux, "rename lower");
    util::eventually("the focused pane renamed", || {
        match c.pane(&b)["name"].as_str() {
            Some("lower") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    command(&tmux, "ptyd select-layout even-horizontal");
    tmux.wait_screen("side by side", |s| {
        s.lines().take(29).all(|l| l.chars().nth(50) == Some('│'))
    });
    // An error is shown on the message line; the client stays attached.
    command(&tmux, "kill --bogus");
    tmux.wait_screen("the error", |s| {
        status_line(s).contains("kill: invalid option '--bogus'")
    });
    command(&tmux, "no-such-command 'a b'");
    tmux.wait_screen("the error", |s| {
        status_line(s).contains("unknown command \"no-such-command\"")
    });
    tmux.type_line("echo still-''here");
    let screen = tmux.wait_screen("typing reaches the pane", |s| s.contains("still-here"));
    assert!(!screen.contains("attach-rc"), "{screen}");
    // Output of several lines is shown over the panes until a key.
    command(&tmux, "ls");
    tmux.wait_screen("the listing", |s| {
        s.contains(":ls (any key closes this)") && s.contains("lower")
    });
    tmux.keys(&["Space"]);
    tmux.wait_screen("the listing gone", |s| !s.contains("any key closes"));
    // A tab the command makes current is shown to this client.
    command(&tmux, "tab new -n second");
    tmux.wait_screen("the new tab shown", |s| {
        status_line(s).starts_with("[main] 0:work 1:second*")
    });
    // Up brings back an earlier line; Escape leaves the prompt.
    prefixed(&tmux, ":");
    tmux.keys(&["Up"]);
    tmux.wait_screen("the last line again", |s| {
        status_line(s).starts_with(":tab new -n second")
    });
    tmux.keys(&["Escape"]);
    tmux.wait_screen("the status line back", |s| {
        status_line(s).starts_with("[main]")
    });
    pane_count(&mut c, 3);
}

#[test]
fn the_chooser_moves_the_view_to_another_tab_and_workspace() {
    let ptyd = Ptyd::start();
    let a = shell(&ptyd, json!({ "tab_name": "work" }));
    shell(&ptyd, json!({ "tab_name": "logs" }));
    util::assert_exit(&ptyd.run_cli(&["workspace", "new", "other"]), 0);
    let far = shell(&ptyd, json!({ "workspace": "other", "tab_name": "far" }));
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    attach(&tmux, &a);
    prefixed(&tmux, "w");
    let screen = tmux.wait_screen("the chooser", |s| s.contains("choose (Enter: go"));
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("> ") && l.contains(&a) && l.ends_with('*')),
        "the current pane selected and marked:\n{screen}"
    );
    // Down goes to the next tab; Enter shows it.
    tmux.keys(&["Down"]);
    tmux.wait_screen("the next line selected", |s| {
        s.lines()
            .any(|l| l.starts_with(">") && l.contains("1: logs"))
    });
    tmux.keys(&["Enter"]);
    tmux.wait_screen("the second tab shown", |s| {
        status_line(s).starts_with("[main] 0:work 1:logs*")
    });
    // A filter, then Enter: the other workspace's tab.
    prefixed(&tmux, "w");
    tmux.wait_screen("the chooser", |s| s.contains("choose (Enter: go"));
    tmux.keys(&["/"]);
    tmux.keys(&["-l", "far"]);
    tmux.wait_screen("the filtered list", |s| {
        s.lines()
            .any(|l| l.starts_with("> ") && l.contains("0: far"))
            && !s.contains("logs (")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_screen("the other workspace", |s| {
        status_line(s).starts_with("[other] 0:far*")
            && status_line(s).contains(&format!("\"{far} "))
    });
    // q leaves without moving.
    prefixed(&tmux, "w");
    tmux.wait_screen("the chooser", |s| s.contains("choose (Enter: go"));
    tmux.keys(&["Up"]);
    tmux.keys(&["q"]);
    let screen = tmux.wait_screen("the chooser gone", |s| !s.contains("choose ("));
    assert!(
        status_line(&screen).starts_with("[other] 0:far*"),
        "{screen}"
    );
}

fn write_config(ptyd: &Ptyd, text: &str) {
    let dir = ptyd.dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// The characters of `screen`'s line `y` from column `x` on.
fn from(screen: &str, x: usize, y: usize) -> String {
    screen
        .lines()
        .nth(y)
        .unwrap_or("")
        .chars()
        .skip(x)
        .collect()
}

#[test]
fn pane_titles_sit_in_the_border_rows_and_follow_the_config_and_the_title() {
    let ptyd = Ptyd::start();
    let a = shell(&ptyd, json!({ "tab_name": "work" }));
    let b = shell(&ptyd, json!({ "split": a, "direction": "horizontal" }));
    let cc = shell(&ptyd, json!({ "split": b, "direction": "vertical" }));
    let tmux = Tmux::outer_session(&ptyd, 120, 40);
    attach(&tmux, &a);
    let mut c = ptyd.connect();
    c.type_line(&a, "clear; stty size");
    tmux.wait_screen("the full height", |s| s.contains("39 60"));
    // On at reload: a row above the panes, p3's title in the border above it.
    write_config(&ptyd, "pane_titles = \"top\"\n");
    util::assert_exit(&ptyd.run_cli(&["config", "reload"]), 0);
    let screen = tmux.wait_screen("the titles", |s| {
        from(s, 0, 0).starts_with(&format!("─ *{a} /bin/sh ─"))
    });
    assert!(
        from(&screen, 61, 0).starts_with(&format!("─ {b} /bin/sh ─")),
        "{screen}"
    );
    assert_eq!(from(&screen, 60, 0).chars().next(), Some('┬'), "{screen}");
    let row = screen
        .lines()
        .position(|l| {
            l.chars()
                .skip(61)
                .collect::<String>()
                .starts_with(&format!("─ {cc} "))
        })
        .unwrap_or_else(|| panic!("no title of {cc}:\n{screen}"));
    assert!(
        (15..25).contains(&row),
        "{cc}'s title on row {row}:\n{screen}"
    );
    c.type_line(&a, "clear; stty size");
    tmux.wait_screen("a row shorter", |s| s.contains("38 60"));
    // A title the program sets replaces the command.
    c.type_line(&b, "printf '\\033]2;hello\\007'");
    tmux.wait_screen("the new title", |s| {
        from(s, 61, 0).starts_with(&format!("─ {b} hello ─"))
    });
    // Off again at reload: the row goes back to the panes.
    write_config(&ptyd, "pane_titles = \"off\"\n");
    util::assert_exit(&ptyd.run_cli(&["config", "reload"]), 0);
    tmux.wait_screen("no titles", |s| !s.contains("─ *"));
    c.type_line(&a, "clear; stty size");
    tmux.wait_screen("the full height again", |s| s.contains("39 60"));
    // A value it does not know is named by `config check`.
    write_config(&ptyd, "pane_titles = \"left\"\n");
    let out = ptyd.run_cli(&["config", "check"]);
    util::assert_exit(&out, 1);
    let said = util::stdout(&out) + &util::stderr(&out);
    assert!(said.contains("pane_titles must be"), "{said}");
}

#[test]
fn split_from_a_plain_shell_splits_the_focus_of_the_attached_view() {
    let ptyd = Ptyd::start();
    let a = shell(&ptyd, json!({ "tab_name": "work" }));
    let other = shell(&ptyd, json!({ "tab_name": "other" }));
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    attach(&tmux, &a);
    // The tree's active tab moves elsewhere; the client still shows `work`.
    util::assert_exit(&ptyd.run_cli(&["tab", "select", "1"]), 0);
    let out = ptyd.run_cli(&["split", "-v"]);
    util::assert_exit(&out, 0);
    let new = util::stdout(&out).trim().to_string();
    let mut c = ptyd.connect();
    let tree = c.ok("tree", json!({}));
    let tab_of = |pane: &str| {
        let tabs = tree["workspaces"].as_array().into_iter().flatten();
        tabs.flat_map(|w| w["tabs"].as_array().into_iter().flatten())
            .find(|t| {
                t["panes"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["id"] == pane))
            })
            .map(|t| t["name"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(tab_of(&new).as_deref(), Some("work"), "{tree}");
    assert_eq!(tab_of(&other).as_deref(), Some("other"), "{tree}");
    tmux.wait_screen("the split on screen", |s| {
        s.lines().any(|l| l.trim_end() == "─".repeat(100))
    });
}
