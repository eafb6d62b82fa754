//! The configuration file through the real binary: `ptyd config check`
//! reports each problem with its line and key and exits 1; a server given
//! a file with one bad key keeps the others, and shows the problems in
//! `ptyd status`; `ptyd config reload` puts an edit in force for new panes;
//! each key's effect is seen where it acts (the pane's shell and `TERM`, a
//! restart's rerun, an upgrade's deadline and probation).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::json;
use util::{Dirs, Ptyd};

const FILE: &str = "\
# ptyd settings
scrollback_lines = 1234
scrollback_bytes = -5
detach_keys = \"C-a\"
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
        lines[1].starts_with(&format!(
            "{}:4: unknown key \"detach_keys\"",
            path.display()
        )),
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
    assert!(text.contains(":4: unknown key \"detach_keys\""), "{text}");
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
    let old = c.create(printer.clone())["id"]
        .as_str()
        .unwrap()
        .to_string();
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
    let rules = settings
        .iter()
        .find(|s| s["key"] == "resume_rules")
        .unwrap();
    assert_eq!(rules["applies"], "next_restore");
    assert_eq!(settings.len(), 25, "{report}");
    assert!(
        util::stdout(&ptyd.run_cli(&["status"]))
            .find("config:")
            .is_none()
    );
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

/// Lines in a file the panes append to (0 if it does not exist yet).
fn line_count(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[test]
fn shell_term_and_restore_policy_of_new_panes() {
    use std::os::unix::fs::PermissionsExt;
    let dirs = Dirs::new();
    // A shell that says it ran, then is /bin/sh.
    let shell = dirs.path("bin").join("myshell");
    std::fs::write(
        &shell,
        "#!/bin/sh\necho \"myshell[$*]\"\nexec /bin/sh \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    let counts = dirs.path("counts").join("cmd");
    write_config(
        &dirs,
        "config.toml",
        &format!(
            "shell = {:?}\nterm = \"screen-256color\"\nrestore = \"rerun\"\n",
            shell.display().to_string()
        ),
    );
    let ns = util::unique_name("defaults");
    let ptyd = Ptyd::start_in(dirs.clone(), &ns);
    let mut c = ptyd.connect();
    // `ptyd new -d` runs the configured shell as a login shell.
    let out = ptyd.run_cli(&["new", "-d", "--name", "login"]);
    assert!(out.status.success(), "{out:?}");
    c.wait_text("login", "myshell[-l]");
    c.type_line("login", "echo T=$TERM S=$SHELL");
    c.wait_text("login", &format!("T=screen-256color S={}", shell.display()));
    // `--shell` strings run through it too.
    let out = ptyd.run_cli(&[
        "new",
        "-d",
        "--name",
        "str",
        "--shell",
        "echo hi; sleep 1000",
    ]);
    assert!(out.status.success(), "{out:?}");
    c.wait_text("str", "myshell[-c echo hi; sleep 1000]");

    // A command pane created without --restore follows the default.
    let cmd = format!("echo started >> {}; exec sleep 1000", counts.display());
    let info = c.create(json!({ "name": "job", "argv": ["sh", "-c", cmd] }));
    assert_eq!(info["restore"], "rerun", "{info}");
    let held = c.create(json!({ "name": "held", "argv": ["sleep", "1000"], "restore": "hold" }));
    assert_eq!(held["restore"], "hold", "{held}");
    util::eventually("job started", || line_count(&counts) == 1);
    c.save();
    drop(c);
    ptyd.stop();

    let ptyd = Ptyd::start_in(dirs.clone(), &ns);
    let mut c = ptyd.connect();
    util::eventually("job re-ran after the restart", || line_count(&counts) == 2);
    assert_eq!(c.pane("job")["state"], "running");
    assert_eq!(c.pane("held")["state"], "held");
}

#[test]
fn bad_values_name_key_line_and_range() {
    let dirs = Dirs::new();
    let path = write_config(
        &dirs,
        "config.toml",
        "shell = \"sh\"\nterm = \"a b\"\nrestore = \"sometimes\"\nupgrade_timeout_ms = 10\n\
         upgrade_probation_ms = 3000\nsave_max_delay_ms = 700000\n",
    );
    let mut cmd = dirs.command("default");
    cmd.args(["config", "check"]);
    let out = util::run_bounded(cmd, "ptyd config check");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = util::stdout(&out);
    let lines: Vec<&str> = stdout.lines().collect();
    let p = path.display();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert!(
        lines[0].starts_with(&format!("{p}:1: shell = \"sh\" is not an absolute path")),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with(&format!("{p}:2: term = \"a b\" is not a terminal type")),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "{p}:3: restore must be \"hold\", \"rerun\" or \"shell\""
        )),
        "{stdout}"
    );
    assert!(
        lines[3].starts_with(&format!(
            "{p}:4: upgrade_timeout_ms = 10 is less than the minimum 1000 (allowed: 1000 to 600000); using the default 10000"
        )),
        "{stdout}"
    );
    assert!(
        lines[4].starts_with(&format!(
            "{p}:6: save_max_delay_ms = 700000 is more than the maximum"
        )),
        "{stdout}"
    );
}

#[test]
fn the_configured_upgrade_timeout_bounds_an_upgrade() {
    let dirs = Dirs::new();
    write_config(&dirs, "config.toml", "upgrade_timeout_ms = 1000\n");
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("uptimeout"));
    let started = std::time::Instant::now();
    // The new server stalls before it says hello; no --timeout given, so
    // the config's 1 s (not the default 10 s) ends the attempt.
    let out = ptyd.run_cli(&["upgrade", "--fault", "new-before-hello:stall"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(util::stderr(&out).contains("keeps serving"), "{out:?}");
    assert!(took < std::time::Duration::from_secs(8), "took {took:?}");
    assert_eq!(ptyd.status_json()["config"]["upgrade_timeout_ms"], 1000);
}

#[test]
fn the_configured_probation_is_what_the_old_server_keeps() {
    let dirs = Dirs::new();
    write_config(&dirs, "config.toml", "upgrade_probation_ms = 300\n");
    let ns = util::unique_name("probation");
    let ptyd = Ptyd::start_in(dirs.clone(), &ns);
    let out = ptyd.run_cli(&["upgrade"]);
    assert!(out.status.success(), "{out:?}");
    // The old server logs how long it stays ready to take back.
    let log = dirs.state_dir(&ns).join("diagnostics.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("probation 300 ms"), "{text}");
    // And the next upgrade is possible once that is over (the default is
    // 2 s; the test's whole budget is far above either).
    util::eventually("a second upgrade after the probation", || {
        ptyd.run_cli(&["upgrade"]).status.success()
    });
}

/// Fuzzing finding: a resume rule whose command the API would refuse for a
/// pane (`resume` empty or with NUL) was taken as it was and run at
/// restore. `ptyd config check` now reports it, with its line, and the
/// server skips it.
#[test]
fn a_resume_rule_the_api_would_refuse_is_reported_and_skipped() {
    let dirs = Dirs::new();
    let path = write_config(
        &dirs,
        "config.toml",
        "[[resume_rules]]\nprogram = \"x\"\nresume = \"  \"\n\n[[resume_rules]]\nprogram = \"ok\"\nresume = \"ok --continue\"\n",
    );
    let mut cmd = dirs.command("default");
    cmd.args(["config", "check"]);
    let out = util::run_bounded(cmd, "ptyd config check");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = util::stdout(&out);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(
        lines[0].starts_with(&format!(
            "{}:1: resume rule ignored (resume must be a non-empty shell command",
            path.display()
        )),
        "{stdout}"
    );
}
