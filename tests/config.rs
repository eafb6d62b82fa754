//! The configuration file through the real binary: `ptyd config check`
//! reports each problem with its line and key and exits 1; a server given
//! a file with one bad key keeps the others, and shows the problems in
//! `ptyd status`.

mod util;

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
