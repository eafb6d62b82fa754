//! What a package ships besides the binary: the man page renders with
//! man(1), and the shell completions work in their shells (bash for real,
//! completing commands, option values and the running server's panes; zsh
//! and fish parsed when installed). That the shipped files are current is
//! checked by the unit tests beside their generators (`PTYD_BLESS=1 cargo
//! test --lib` regenerates them).

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use std::path::Path;
use std::process::Command;
use util::{Dirs, PTYD, Ptyd};

fn shipped(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn man_page_renders() {
    if !have("man") {
        println!("skipped: man(1) is not installed (Debian package man-db)");
        return;
    }
    let out = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(shipped("packaging/man/ptyd.1"))
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "man failed: {stderr}");
    assert!(stderr.trim().is_empty(), "roff warnings: {stderr}");
    assert!(text.contains("ptyd - keeps terminals alive"), "{text}");
    for section in ["SYNOPSIS", "COMMANDS", "SYSTEMD", "FILES", "ENVIRONMENT"] {
        assert!(text.contains(section), "no {section} in\n{text}");
    }
    // Option names survive roff as plain ASCII, so they can be searched for.
    assert!(text.contains("--detach-key KEY"), "{text}");

    // `ptyd manpage` prints the same page.
    let out = Command::new(PTYD).arg("manpage").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(shipped("packaging/man/ptyd.1")).unwrap()
    );
}

/// Completes `words` (the last one being completed) with the shipped bash
/// script in a real bash, with this build's ptyd first in PATH.
fn bash_complete(dirs: &Dirs, namespace: &str, words: &[&str]) -> Vec<String> {
    let script = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); _ptyd; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        shipped("packaging/completions/ptyd.bash").display(),
        words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let bin_dir = Path::new(PTYD).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The test's private environment (namespace, directories), in bash.
    let template = dirs.command(namespace);
    let mut bash = Command::new("bash");
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => bash.env(k, v),
            None => bash.env_remove(k),
        };
    }
    let out = bash
        .args(["--norc", "--noprofile", "-c", &script])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    words.sort();
    words.dedup();
    words
}

#[test]
fn bash_completes_commands_options_and_panes() {
    let dirs = Dirs::new();
    let none = |words: &[&str]| bash_complete(&dirs, "nothing-runs", words);
    assert_eq!(
        none(&["ptyd", "se"]),
        ["select-layout", "send", "server", "service"]
    );
    assert_eq!(
        none(&["ptyd", "new", "--restore", ""]),
        ["hold", "rerun", "shell"]
    );
    assert_eq!(none(&["ptyd", "-L", "x", "kill", "--s"]), ["--signal"]);
    assert_eq!(none(&["ptyd", "completions", ""]), ["bash", "fish", "zsh"]);
    // An option's value is skipped when counting arguments: no second TARGET.
    assert!(none(&["ptyd", "kill", "--grace", "10", "p1", ""]).is_empty());

    // Completing a pane never starts a server.
    assert!(none(&["ptyd", "attach", ""]).is_empty());
    assert!(
        !dirs.socket("nothing-runs").exists(),
        "completion started a server"
    );

    // Panes come from the running server.
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["new", "-d", "-n", "builder", "--", "sleep", "1000"]);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        bash_complete(&ptyd.dirs, &ptyd.namespace, &["ptyd", "attach", ""]),
        [id.clone(), "builder".to_string()]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(
        bash_complete(&ptyd.dirs, &ptyd.namespace, &["ptyd", "new", "-s", "bu"]),
        ["builder"]
    );
}

#[test]
fn zsh_and_fish_scripts_parse() {
    for (shell, file) in [("zsh", "_ptyd"), ("fish", "ptyd.fish")] {
        if !have(shell) {
            println!("skipped: {shell} is not installed, its script goes unparsed");
            continue;
        }
        let out = Command::new(shell)
            .arg("-n")
            .arg(shipped(&format!("packaging/completions/{file}")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell} -n: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Completes `line` with the shipped fish script in a real fish.
fn fish_complete(dirs: &Dirs, namespace: &str, line: &str) -> Vec<String> {
    let template = dirs.command(namespace);
    let mut fish = Command::new("fish");
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => fish.env(k, v),
            None => fish.env_remove(k),
        };
    }
    let bin_dir = Path::new(PTYD).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!(
        "source {}; complete -C '{line}'",
        shipped("packaging/completions/ptyd.fish").display()
    );
    let out = fish
        .args(["--no-config", "-c", &script])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .filter(|w| !w.is_empty())
        .collect();
    words.sort();
    words
}

#[test]
fn fish_completes_commands_options_and_panes() {
    if !have("fish") {
        println!("skipped: fish is not installed (Debian package fish)");
        return;
    }
    let dirs = Dirs::new();
    let none = |line: &str| fish_complete(&dirs, "nothing-runs", line);
    assert_eq!(
        none("ptyd se"),
        ["select-layout", "send", "server", "service"]
    );
    assert_eq!(none("ptyd new --restore "), ["hold", "rerun", "shell"]);
    assert_eq!(none("ptyd kill --s"), ["--signal"]);
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["new", "-d", "-n", "builder", "--", "sleep", "1000"]);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut want = vec![id, "builder".to_string()];
    want.sort();
    assert_eq!(
        fish_complete(&ptyd.dirs, &ptyd.namespace, "ptyd attach "),
        want
    );
}
