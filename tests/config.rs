//! The configuration file through the real binary: `ptyd config check`
//! reports each problem with its line and key and exits 1; a server given
//! a file with one bad key keeps the others, and shows the problems in
//! `ptyd status`.

mod util;

use serde_json::json;
use util::{Dirs, Ptyd};

const FILE: &str = "\
# ptyd settings
scrollback_lines = 1234
scrollback_bytes = -5
detach_key = \"C-a\"
";

fn write_config(dirs: &Dirs, name: &str, text: &str) -> std::path::PathBuf {
    let dir = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_reports_lines_and_keys() {
    let dirs = Dirs::new();
    let path = write_config(&dirs, "config.toml", FILE);
    let mut cmd = dirs.command("default");
    cmd.args(["config", "check"]);
    let out = util::run_bounded(cmd, "ptyd config check");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with(&format!("{}:3: scrollback_bytes", path.display())),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with(&format!("{}:4: unknown key \"detach_key\"", path.display())),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 problems"),
        "{out:?}"
    );

    // A good file, named explicitly.
    let good = write_config(&dirs, "good.toml", "scrollback_lines = 10\n");
    let mut cmd = dirs.command("default");
    cmd.args(["config", "check"]).arg(&good);
    let out = util::run_bounded(cmd, "ptyd config check FILE");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with(": ok\n"),
        "{out:?}"
    );
}

#[test]
fn a_server_keeps_the_good_keys_and_shows_the_bad_ones() {
    let dirs = Dirs::new();
    write_config(&dirs, "config.toml", FILE);
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("config"));
    let out = ptyd.run_cli(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["config"]["scrollback_lines"], 1234, "{status}");
    assert_eq!(status["config"]["scrollback_bytes"], 16 << 20, "{status}");
    assert_eq!(status["config"]["problems"].as_array().unwrap().len(), 2);

    let out = ptyd.run_cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("config:     2 problem(s)"), "{text}");
    assert!(text.contains(":4: unknown key \"detach_key\""), "{text}");
}

/// `scrollback_lines` of a pane as `pane.capture` counts them.
fn scrollback_of(c: &mut util::Conn, pane: &str) -> u64 {
    c.ok("pane.capture", json!({ "target": pane }))["scrollback_lines"]
        .as_u64()
        .expect("scrollback_lines")
}

#[test]
fn reload_applies_to_new_panes_and_reports_bad_keys() {
    let dirs = Dirs::new();
    let ptyd = Ptyd::start_in(dirs.clone(), &util::unique_name("reload"));
    let mut events = ptyd.connect();
    events.ok("events.subscribe", json!({}));
    let mut c = ptyd.connect();
    let printer = json!({
        "argv": ["sh", "-c", "seq 1 60; echo TERM=$TERM; exec sleep 1000"],
        "rows": 5,
    });
    let old = c.create(printer.clone())["id"].as_str().unwrap().to_string();
    c.wait_text(&old, "TERM=xterm-256color");
    let old_scrollback = scrollback_of(&mut c, &old);
    assert!(old_scrollback > 50, "{old_scrollback}");

    let path = write_config(
        &dirs,
        "config.toml",
        "scrollback_lines = 10\nbogus = 1\nterm = \"vt100\"\nsave_debounce_ms = 99999\n",
    );
    let out = ptyd.run_cli(&["config", "reload"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = util::stdout(&out);
    assert!(
        stdout.contains("scrollback_lines = 10 (for panes created from now on"),
        "{stdout}"
    );
    assert!(stdout.contains("term = \"vt100\""), "{stdout}");
    assert!(
        stdout.contains(&format!("{}:2: unknown key \"bogus\"", path.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{}:4: save_debounce_ms = 99999 is more than the maximum 60000 (allowed: 0 to 60000)",
            path.display()
        )),
        "{stdout}"
    );
    assert!(
        util::stderr(&out).contains("2 problems") && util::stderr(&out).contains("in force"),
        "{out:?}"
    );
    let event = events.wait_event_type("server.config_reloaded");
    assert_eq!(event["changed"], json!(["scrollback_lines", "term"]));
    assert_eq!(event["problems"].as_array().unwrap().len(), 2);

    // A new pane gets the new limit and TERM; the old one keeps its own.
    let new = c.create(printer)["id"].as_str().unwrap().to_string();
    c.wait_text(&new, "TERM=vt100");
    assert_eq!(scrollback_of(&mut c, &new), 10);
    assert_eq!(scrollback_of(&mut c, &old), old_scrollback);

    let status = ptyd.status_json();
    assert_eq!(status["config"]["scrollback_lines"], 10, "{status}");
    assert_eq!(status["config"]["save_debounce_ms"], 500, "{status}");
    assert_eq!(status["config"]["problems"].as_array().unwrap().len(), 2);
    let text = util::stdout(&ptyd.run_cli(&["status"]));
    assert!(text.contains("config:     2 problem(s)"), "{text}");

    // Fixed: the report says so, exit 0; --json has every key.
    write_config(&dirs, "config.toml", "scrollback_lines = 10\n");
    let out = ptyd.run_cli(&["config", "reload", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["problems"], json!([]));
    let settings = report["settings"].as_array().unwrap();
    let term = settings.iter().find(|s| s["key"] == "term").unwrap();
    assert_eq!(
        *term,
        json!({"key": "term", "value": "xterm-256color", "changed": true, "applies": "new_panes"})
    );
    let rules = settings.iter().find(|s| s["key"] == "resume_rules").unwrap();
    assert_eq!(rules["applies"], "next_restore");
    assert_eq!(settings.len(), 11, "{report}");
    assert!(util::stdout(&ptyd.run_cli(&["status"])).find("config:").is_none());
}

#[test]
fn reload_without_a_server_starts_none() {
    let dirs = Dirs::new();
    let mut cmd = dirs.command(&util::unique_name("noserver"));
    cmd.args(["config", "reload"]);
    let out = util::run_bounded(cmd, "ptyd config reload");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(util::stderr(&out).contains("no ptyd server"), "{out:?}");
}
