//! Driving panes from scripts through the real binary and real shells:
//! shell integration injected into bash, zsh and fish with the user's own
//! rc files in place, `send --wait` returning the command's exit code,
//! waits that fail fast instead of hanging and never match the past or the
//! typed command's echo, keys encoded for the pane's modes, stdin and
//! bracketed pastes sent byte for byte, durations with units.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use util::{Ptyd, assert_exit, stderr, stdout};

/// Writes `content` to `rel` under the test's HOME.
fn home_file(ptyd: &Ptyd, rel: &str, content: &str) {
    let path = ptyd.dirs.home.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap_or_else(|e| panic!("writing {rel}: {e}"));
}

fn home_text(ptyd: &Ptyd, rel: &str) -> String {
    std::fs::read_to_string(ptyd.dirs.home.join(rel)).unwrap_or_default()
}

/// `ptyd new -d ARGS`, returning the pane id.
fn new_pane(ptyd: &Ptyd, args: &[&str]) -> String {
    let home = ptyd.dirs.home.to_str().unwrap().to_string();
    let mut full = vec!["new", "-d", "-c", &home];
    full.extend_from_slice(args);
    let out = ptyd.run_cli(&full);
    assert_exit(&out, 0);
    stdout(&out).trim().to_string()
}

fn have(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A stock Debian-like home: `.profile` sources `.bashrc`, which sets a
/// prompt, a PROMPT_COMMAND string and a DEBUG trap, each leaving a trace.
const BASHRC: &str = r#"
PS1='mine:\w> '
PROMPT_COMMAND='echo pc >> ~/prompt_command.log'
trap 'echo x >> ~/debug_trap.log' DEBUG
"#;
const PROFILE: &str = r#"
if [ -n "$BASH_VERSION" ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
export FROM_PROFILE=yes
"#;

#[test]
fn bash_login_shell_reports_exit_codes_and_keeps_the_users_hooks() {
    let ptyd = Ptyd::start();
    home_file(&ptyd, ".bashrc", BASHRC);
    home_file(&ptyd, ".profile", PROFILE);
    let id = new_pane(&ptyd, &["-n", "sh", "--", "bash", "-l"]);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "(exit 7)"]);
    assert_exit(&out, 7);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "true"]);
    assert_exit(&out, 0);
    // The profile chain ran (login emulated), the user's prompt is there.
    let out = ptyd.run_cli(&[
        "send",
        "sh",
        "--enter",
        "--wait-for",
        "profile=yes",
        "echo",
        "profile=$FROM_PROFILE",
    ]);
    assert_exit(&out, 0);
    let mut c = ptyd.connect();
    let screen = c.capture(&id);
    assert!(
        screen.contains("mine:~> "),
        "the user's PS1 is gone:\n{screen}"
    );
    // The user's PROMPT_COMMAND and DEBUG trap still run.
    assert!(home_text(&ptyd, "prompt_command.log").lines().count() >= 4);
    assert!(home_text(&ptyd, "debug_trap.log").lines().count() >= 4);
    let info = c.pane(&id);
    assert_eq!(info["shell_injected"], "bash", "{info}");
    assert_eq!(info["last_command_exit"], 0, "{info}");
    // Nothing of ptyd's is left in the user's environment.
    let out = ptyd.run_cli(&[
        "send",
        "sh",
        "--enter",
        "--wait-for",
        "vars:.",
        "echo",
        "vars:${PTYD_BASH_LOGIN}.",
    ]);
    assert_exit(&out, 0);
}

#[test]
fn bash_prompt_command_arrays_compose() {
    let ptyd = Ptyd::start();
    home_file(
        &ptyd,
        ".bashrc",
        "user_hook() { echo hook >> ~/array_hook.log; }\nPROMPT_COMMAND=(user_hook)\nPS1='arr$ '\n",
    );
    new_pane(&ptyd, &["-n", "sh", "--", "bash"]);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "true"]);
    assert_exit(&out, 0);
    assert!(home_text(&ptyd, "array_hook.log").lines().count() >= 2);
}

#[test]
fn zsh_gets_integration_and_keeps_its_rc_files() {
    if !have("zsh") {
        eprintln!("zsh is not installed (.ci/run installs it); skipped");
        return;
    }
    let ptyd = Ptyd::start();
    home_file(&ptyd, ".zshenv", "export FROM_ZSHENV=yes\n");
    home_file(
        &ptyd,
        ".zshrc",
        "PS1='zsh%# '\nprecmd() { echo pc >> ~/zsh_precmd.log }\nexport FROM_ZSHRC=yes\n",
    );
    let id = new_pane(&ptyd, &["-n", "z", "--", "zsh", "-l"]);
    let out = ptyd.run_cli(&["send", "z", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
    let out = ptyd.run_cli(&[
        "send",
        "z",
        "--enter",
        "--wait-for",
        "env=yes/yes/.",
        "echo",
        "env=$FROM_ZSHENV/$FROM_ZSHRC/$ZDOTDIR.",
    ]);
    assert_exit(&out, 0);
    assert!(home_text(&ptyd, "zsh_precmd.log").lines().count() >= 2);
    assert_eq!(ptyd.connect().pane(&id)["shell_injected"], "zsh");
}

#[test]
fn fish_gets_integration() {
    if !have("fish") {
        eprintln!("fish is not installed (.ci/run installs it); skipped");
        return;
    }
    let ptyd = Ptyd::start();
    // The harness points XDG_CONFIG_HOME at state/config.
    let config = ptyd.dirs.state.join("config/fish");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.fish"),
        "set -g fish_greeting ''\nset -gx FROM_CONFIG yes\n",
    )
    .unwrap();
    new_pane(&ptyd, &["-n", "f", "--", "fish"]);
    let out = ptyd.run_cli(&["send", "f", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
    let out = ptyd.run_cli(&["send", "f", "--wait", "--enter", "true"]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&[
        "send",
        "f",
        "--enter",
        "--wait-for",
        "cfg=yes.",
        "echo",
        "cfg=$FROM_CONFIG.",
    ]);
    assert_exit(&out, 0);
}

#[test]
fn command_waits_without_integration_fail_at_once_and_type_nothing() {
    let ptyd = Ptyd::start();
    home_file(&ptyd, ".bashrc", BASHRC);
    let off = new_pane(
        &ptyd,
        &["-n", "off", "--no-shell-integration", "--", "bash"],
    );
    let plain = new_pane(&ptyd, &["-n", "plain", "--", "sh"]);
    let mut c = ptyd.connect();
    c.wait_text(&off, "mine:~>");
    for target in ["off", "plain"] {
        let started = Instant::now();
        let out = ptyd.run_cli(&["send", target, "--wait", "--enter", "echo typed-$((1+1))"]);
        assert_exit(&out, 1);
        let err = stderr(&out);
        assert!(
            err.contains("no shell-integration marks") && err.contains("ptyd shell-init"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{err}");
        let out = ptyd.run_cli(&["wait", target, "--prompt"]);
        assert_exit(&out, 1);
        assert!(stderr(&out).contains("--text"), "{}", stderr(&out));
    }
    assert!(!c.capture(&off).contains("typed"), "{}", c.capture(&off));
    assert!(
        !c.capture(&plain).contains("typed"),
        "{}",
        c.capture(&plain)
    );
    let info = c.pane(&off);
    assert_eq!(info["shell_integration"], false, "{info}");
    assert_eq!(info["shell_injected"], Value::Null, "{info}");
}

#[test]
fn shell_init_hooks_work_in_a_shell_ptyd_did_not_set_up() {
    let ptyd = Ptyd::start();
    for shell in ["bash", "zsh", "fish"] {
        let out = ptyd.run_cli(&["shell-init", shell]);
        assert_exit(&out, 0);
        assert!(stdout(&out).contains("133;D"), "{shell}: {}", stdout(&out));
    }
    assert_exit(&ptyd.run_cli(&["shell-init", "tcsh"]), 2);
    // --norc: not an interactive start ptyd recognises, so no injection.
    let id = new_pane(&ptyd, &["-n", "norc", "--", "bash", "--norc"]);
    let mut c = ptyd.connect();
    assert_eq!(c.pane(&id)["shell_injected"], Value::Null);
    c.ok("events.subscribe", json!({}));
    let line = format!("eval \"$({} shell-init bash)\"\r", util::PTYD);
    c.input(&id, &line);
    c.wait_event("pane.prompt", &id);
    let out = ptyd.run_cli(&["send", "norc", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
}

#[test]
fn output_waits_skip_the_echo_and_the_past() {
    let ptyd = Ptyd::start();
    new_pane(&ptyd, &["-n", "sh", "--", "bash"]);
    // The echoed command line holds PASS at once; the output a second later.
    let started = Instant::now();
    let out = ptyd.run_cli(&[
        "send",
        "sh",
        "--enter",
        "--wait-for",
        "PASS",
        "--timeout",
        "20s",
        "sleep 1; echo PASS",
    ]);
    assert_exit(&out, 0);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "matched the echo after {:?}",
        started.elapsed()
    );
    // PASS is on the screen now: a new wait does not see it ...
    let out = ptyd.run_cli(&["wait", "sh", "--text", "PASS", "--timeout", "300ms"]);
    assert_exit(&out, 124);
    // ... unless the screen counts.
    let out = ptyd.run_cli(&[
        "wait",
        "sh",
        "--text",
        "PASS",
        "--screen",
        "--timeout",
        "5s",
    ]);
    assert_exit(&out, 0);
    // A regex.
    let out = ptyd.run_cli(&[
        "send",
        "sh",
        "--enter",
        "--wait-for",
        "code=4[0-9]$",
        "--regex",
        "echo code=$((6*7))",
    ]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&["wait", "sh", "--text", "(", "--regex"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("regex"), "{}", stderr(&out));
}

#[test]
fn a_wait_can_start_from_the_sends_output_count() {
    let ptyd = Ptyd::start();
    new_pane(&ptyd, &["-n", "sh", "--", "bash"]);
    let out = ptyd.run_cli(&["send", "sh", "--json", "--enter", "echo AFTER-$((1+1))"]);
    assert_exit(&out, 0);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let from = report["acks"][0]["output_bytes"]
        .as_u64()
        .expect("output_bytes");
    // Make sure the output is there before the next wait starts.
    let out = ptyd.run_cli(&["wait", "sh", "--text", "AFTER-2", "--screen"]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&[
        "wait",
        "sh",
        "--text",
        "AFTER-2",
        "--after-output",
        &from.to_string(),
        "--timeout",
        "5s",
    ]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&["wait", "sh", "--text", "AFTER-2", "--timeout", "300ms"]);
    assert_exit(&out, 124);
}

#[test]
fn control_c_interrupts_a_command_and_the_prompt_returns() {
    let ptyd = Ptyd::start();
    let id = new_pane(&ptyd, &["-n", "sh", "--", "bash"]);
    let mut c = ptyd.connect();
    c.ok("events.subscribe", json!({}));
    // The command says when it runs in the foreground: bash's child takes
    // the terminal before it execs, while the command_started mark comes
    // before the fork, so a C-c right after the mark could reach bash
    // (which ignores it) instead of the command. The typed line's echo
    // shows RUN''NING, so only the command prints RUNNING.
    let out = ptyd.run_cli(&[
        "send",
        "sh",
        "--enter",
        "sh -c \"echo RUN''NING; exec sleep 100\"",
    ]);
    assert_exit(&out, 0);
    c.wait_event("pane.command_started", &id);
    let out = ptyd.run_cli(&[
        "wait",
        "sh",
        "--screen",
        "--text",
        "RUNNING",
        "--timeout",
        "20s",
    ]);
    assert_exit(&out, 0);
    let started = Instant::now();
    let out = ptyd.run_cli(&["send", "sh", "--keys", "C-c", "--wait", "--timeout", "10s"]);
    assert_exit(&out, 130);
    assert!(started.elapsed() < Duration::from_secs(10));
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "true"]);
    assert_exit(&out, 0);
}

/// A pane that records exactly `n` bytes of raw input to `file` after
/// running `setup` (printf of mode switches).
fn recorder(ptyd: &Ptyd, name: &str, setup: &str, file: &Path, n: usize) -> String {
    let script = format!(
        "{setup}stty raw -echo; echo ready; head -c {n} > '{}'; echo recorded; sleep 1000",
        file.display()
    );
    let id = new_pane(ptyd, &["-n", name, "--shell", &script]);
    ptyd.connect().wait_text(&id, "ready");
    id
}

fn wait_recorded(ptyd: &Ptyd, id: &str) {
    let out = ptyd.run_cli(&[
        "wait",
        id,
        "--text",
        "recorded",
        "--screen",
        "--timeout",
        "20s",
    ]);
    assert_exit(&out, 0);
}

#[test]
fn stdin_and_pastes_arrive_byte_for_byte() {
    let ptyd = Ptyd::start();
    let dir = ptyd.dirs.path("rec");
    let text = "tab\there 'quoted' \"double\" $HOME \\ é ✓\nsecond line\n";
    // From stdin, as it is.
    let file = dir.join("stdin.bin");
    let id = recorder(&ptyd, "stdin", "", &file, text.len());
    let mut cmd = ptyd.cli(&["send", &id, "-"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 0);
    wait_recorded(&ptyd, &id);
    assert_eq!(std::fs::read(&file).unwrap(), text.as_bytes());

    // A paste into a program that enabled bracketed paste, then Enter.
    let file = dir.join("paste.bin");
    let framed = format!("\x1b[200~{text}\x1b[201~\r");
    let id = recorder(
        &ptyd,
        "paste",
        "printf '\\033[?2004h'; ",
        &file,
        framed.len(),
    );
    let out = ptyd.run_cli(&["send", &id, "--paste", "--enter", text]);
    assert_exit(&out, 0);
    wait_recorded(&ptyd, &id);
    assert_eq!(std::fs::read(&file).unwrap(), framed.as_bytes());

    // The same paste where the program did not enable it: the text alone.
    let file = dir.join("plain.bin");
    let id = recorder(&ptyd, "plain", "", &file, text.len());
    let out = ptyd.run_cli(&["send", &id, "--paste", text]);
    assert_exit(&out, 0);
    wait_recorded(&ptyd, &id);
    assert_eq!(std::fs::read(&file).unwrap(), text.as_bytes());
}

#[test]
fn keys_follow_the_panes_cursor_key_mode() {
    let ptyd = Ptyd::start();
    let dir = ptyd.dirs.path("keys");
    let normal = dir.join("normal.bin");
    let id = recorder(&ptyd, "normal", "", &normal, 10);
    let out = ptyd.run_cli(&["send", &id, "--keys", "Up", "C-c", "Escape", "F5"]);
    assert_exit(&out, 0);
    wait_recorded(&ptyd, &id);
    assert_eq!(std::fs::read(&normal).unwrap(), b"\x1b[A\x03\x1b\x1b[15~");
    // DECCKM on: application cursor keys.
    let app = dir.join("app.bin");
    let id = recorder(&ptyd, "app", "printf '\\033[?1h'; ", &app, 6);
    let out = ptyd.run_cli(&["send", &id, "--keys", "Up", "Left"]);
    assert_exit(&out, 0);
    wait_recorded(&ptyd, &id);
    assert_eq!(std::fs::read(&app).unwrap(), b"\x1bOA\x1bOD");
    // A name that is no key is refused, and nothing is typed.
    let out = ptyd.run_cli(&["send", &id, "--keys", "Entr"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("unknown key"), "{}", stderr(&out));
}

#[test]
fn durations_take_units() {
    let ptyd = Ptyd::start();
    let id = new_pane(&ptyd, &["--timeout", "1.5s", "--", "sleep", "100"]);
    let started = Instant::now();
    let out = ptyd.run_cli(&["wait", &id, "--exit", "--timeout", "1m"]);
    assert_exit(&out, 128 + 15);
    assert!(started.elapsed() < Duration::from_secs(20));
    let info = ptyd.connect().pane(&id);
    assert_eq!(info["exit"]["reason"], "timeout", "{info}");
    let out = ptyd.run_cli(&["wait", &id, "--exit", "--timeout", "5x"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("500ms"), "{}", stderr(&out));
}

#[test]
fn the_config_turns_shell_integration_off() {
    let dirs = util::Dirs::new();
    let config = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "shell_integration = false\n").unwrap();
    let ptyd = Ptyd::start_in(dirs, &util::unique_name("t"));
    assert_eq!(ptyd.status_json()["config"]["shell_integration"], false);
    let id = new_pane(&ptyd, &["-n", "sh", "--", "bash"]);
    assert_eq!(ptyd.connect().pane(&id)["shell_injected"], Value::Null);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "true"]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("in config.toml"), "{}", stderr(&out));
}

#[test]
fn run_writes_lf_into_a_pipe_and_removes_its_pane_with_rm() {
    let ptyd = Ptyd::start();
    let out = ptyd.run_cli(&["run", "--rm", "-n", "once", "--", "printf", "a\\nb\\rc\\n"]);
    assert_exit(&out, 0);
    // The PTY turned \n into \r\n; a pipe gets \n back, a lone \r stays.
    assert_eq!(out.stdout, b"a\nb\rc\n");
    let mut c = ptyd.connect();
    assert!(c.panes().is_empty(), "{:?}", c.panes());
    let tree = c.ok("tree", json!({}));
    assert_eq!(tree["workspaces"][0]["tabs"], json!([]), "{tree}");
    // A pane its --timeout ended: 124, like a wait that timed out.
    let out = ptyd.run_cli(&["run", "--timeout", "300ms", "--", "sleep", "100"]);
    assert_exit(&out, 124);
}

#[test]
fn rm_exited_prunes_only_exited_panes() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let done = ptyd.create_argv(&["true"]);
    let running = ptyd.create_argv(&["sleep", "100"]);
    c.wait_exit(&done);
    let out = ptyd.run_cli(&["rm", "--exited"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out).trim(), done);
    let ids: Vec<Value> = c.panes().iter().map(|p| p["id"].clone()).collect();
    assert_eq!(ids, vec![json!(running)]);
    assert_exit(&ptyd.run_cli(&["rm", "--exited", &running]), 2);
}

/// Every exit code of the documented scheme (`ptyd --help`, README).
#[test]
fn exit_codes_follow_one_scheme() {
    let ptyd = Ptyd::start();
    let sleeper = ptyd.create_argv(&["sleep", "100"]);
    // 1: ptyd failed (here: no such pane).
    assert_exit(&ptyd.run_cli(&["kill", "nosuch"]), 1);
    // 2: usage, found by the client ...
    assert_exit(&ptyd.run_cli(&["wait"]), 2);
    assert_exit(&ptyd.run_cli(&["send", &sleeper, "--bogus"]), 2);
    // ... or by the server.
    assert_exit(&ptyd.run_cli(&["wait", &sleeper]), 2);
    assert_exit(&ptyd.run_cli(&["kill", &sleeper, "--signal", "FOO"]), 2);
    assert_exit(&ptyd.run_cli(&["upgrade", "--mode", "bogus"]), 2);
    // 124: a wait timed out.
    assert_exit(
        &ptyd.run_cli(&["wait", &sleeper, "--text", "x", "--timeout", "100ms"]),
        124,
    );
    // 127 / 126: the program cannot be found / run, as shells report it.
    assert_exit(&ptyd.run_cli(&["run", "--", "/nonexistent/program"]), 127);
    let dir = ptyd.dirs.path("bin");
    let not_executable = dir.join("script");
    std::fs::write(&not_executable, "#!/bin/sh\necho hi\n").unwrap();
    util::set_mode(&not_executable, 0o644);
    assert_exit(
        &ptyd.run_cli(&["run", "--", not_executable.to_str().unwrap()]),
        126,
    );
    // The program's own code, passed through; 128+N for signal N.
    assert_exit(&ptyd.run_cli(&["run", "--", "sh", "-c", "exit 124"]), 124);
    assert_exit(
        &ptyd.run_cli(&["run", "--shell", "kill -TERM $$"]),
        128 + 15,
    );
    // With --json, errors are JSON on stdout too.
    let out = ptyd.run_cli(&["wait", "nosuch", "--text", "x", "--json"]);
    assert_exit(&out, 1);
    let v: Value = serde_json::from_str(stdout(&out).trim()).expect("a JSON error");
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    assert_eq!(v["error"]["exit_code"], 1, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("nosuch"),
        "{v}"
    );
    let out = ptyd.run_cli(&[
        "wait",
        &sleeper,
        "--text",
        "x",
        "--timeout",
        "50ms",
        "--json",
    ]);
    assert_exit(&out, 124);
    let v: Value = serde_json::from_str(stdout(&out).trim()).expect("a JSON error");
    assert_eq!(v["error"]["code"], "timeout", "{v}");
    // The scheme is in the help.
    let help = stdout(&ptyd.run_cli(&["--help"]));
    for code in ["124", "126", "127", "128+N"] {
        assert!(
            help.contains(code),
            "ptyd --help lacks exit code {code}:\n{help}"
        );
    }
}

#[test]
fn a_panes_opt_out_survives_a_restart() {
    let ptyd = Ptyd::start();
    let (dirs, ns) = (ptyd.dirs.clone(), ptyd.namespace.clone());
    let mut c = ptyd.connect();
    let off = c.create(json!({ "argv": ["sh"], "shell_integration": false }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let on = ptyd.create_argv(&["sh"]);
    c.save();
    let session = std::fs::read_to_string(dirs.session_path(&ns)).unwrap();
    assert_eq!(
        session.matches("no_shell_integration").count(),
        1,
        "{session}"
    );
    drop(c);
    ptyd.stop();
    let ptyd = dirs.start(&ns);
    let mut c = ptyd.connect();
    assert_eq!(c.pane(&off)["shell_integration"], false);
    assert_eq!(c.pane(&on)["shell_integration"], true);
}

/// An agent-like program that drops an Enter arriving within 1 s of the
/// text before it, as agent CLIs drop one inside a paste.
const PICKY_AGENT: &str = r#"
stty raw -echo
printf 'agent> '
buf=; last=0
while IFS= read -rsn1 -d '' c; do
    now=${EPOCHREALTIME/./}
    if [[ $c == $'\r' || $c == $'\n' || -z $c ]]; then
        if (( now - last < 1000000 )); then continue; fi
        printf '\r\nGOT: %s\r\nagent> ' "$buf"
        buf=
    else
        buf+=$c; last=$now; printf '%s' "$c"
    fi
done
"#;

#[test]
fn submit_retries_an_enter_the_program_dropped() {
    let ptyd = Ptyd::start();
    let id = ptyd
        .connect()
        .create(json!({ "argv": ["bash", "-c", PICKY_AGENT] }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    ptyd.connect().wait_text(&id, "agent>");
    let out = ptyd.run_cli(&["send", &id, "--submit", "--json", "fix the bug"]);
    assert_exit(&out, 0);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["submit"]["confirmed"], true, "{report}");
    assert_eq!(report["submit"]["echo_seen"], true, "{report}");
    let screen = ptyd.connect().capture(&id);
    assert_eq!(screen.matches("GOT: fix the bug").count(), 1, "{screen}");
    // The first Enter came too soon after the text and was dropped.
    assert!(
        report["submit"]["enter_attempts"].as_u64().unwrap() >= 2,
        "{report}"
    );
}

/// What prompt frameworks do, in miniature: starship (bash) rebuilds PS1 in
/// PROMPT_COMMAND every prompt, runs a preexec from PS0 and a DEBUG trap.
const STARSHIP_LIKE_BASHRC: &str = r#"
fw_precmd() { local s=$?; PS1="fw[$s]> "; echo precmd >> ~/fw.log; }
fw_preexec() { echo preexec >> ~/fw.log; }
PROMPT_COMMAND="fw_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
PS0='$(fw_preexec)'
trap 'true' DEBUG
"#;

#[test]
fn bash_composes_with_a_prompt_framework() {
    let ptyd = Ptyd::start();
    home_file(&ptyd, ".bashrc", STARSHIP_LIKE_BASHRC);
    let id = new_pane(&ptyd, &["-n", "sh", "--", "bash"]);
    let out = ptyd.run_cli(&["send", "sh", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
    // The framework saw the status too, and its preexec ran.
    let out = ptyd.run_cli(&[
        "wait",
        "sh",
        "--text",
        "fw[1]>",
        "--screen",
        "--timeout",
        "5s",
    ]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&[
        "send",
        "sh",
        "--enter",
        "--wait-for",
        "out-3",
        "echo out-$((1+2))",
    ]);
    assert_exit(&out, 0);
    let log = home_text(&ptyd, "fw.log");
    assert!(log.matches("preexec").count() >= 2, "{log}");
    // The third prompt follows out-3, which the send waited for.
    let mut c = ptyd.connect();
    util::eventually("the third prompt to be seen", || {
        c.pane(&id)["prompts_seen"].as_u64().unwrap() >= 3
    });
}

/// oh-my-zsh style: a theme's precmd rebuilds PROMPT every time, and
/// zsh-syntax-highlighting redraws the command line as it is typed.
#[test]
fn zsh_composes_with_a_theme_and_syntax_highlighting() {
    let highlighting = "/usr/share/zsh-syntax-highlighting/zsh-syntax-highlighting.zsh";
    if !have("zsh") || !Path::new(highlighting).exists() {
        eprintln!(
            "zsh or zsh-syntax-highlighting is not installed (.ci/run installs them); skipped"
        );
        return;
    }
    let ptyd = Ptyd::start();
    home_file(
        &ptyd,
        ".zshrc",
        &format!(
            "theme_precmd() {{ PROMPT=\"theme[%?]%# \" }}\nprecmd_functions+=(theme_precmd)\nsource {highlighting}\n"
        ),
    );
    new_pane(&ptyd, &["-n", "z", "--", "zsh"]);
    let out = ptyd.run_cli(&["send", "z", "--wait", "--enter", "false"]);
    assert_exit(&out, 1);
    let out = ptyd.run_cli(&["send", "z", "--wait", "--enter", "true"]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&[
        "send",
        "z",
        "--enter",
        "--wait-for",
        "hl-3",
        "echo hl-$((1+2))",
    ]);
    assert_exit(&out, 0);
    let out = ptyd.run_cli(&[
        "wait",
        "z",
        "--text",
        "theme[0]",
        "--screen",
        "--timeout",
        "5s",
    ]);
    assert_exit(&out, 0);
}

#[test]
fn a_parked_text_wait_goes_on_after_a_live_upgrade() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["sh", "-c", "read x; echo late-$((40+2)); exec sleep 100"]);
    let wait = c.send(
        "pane.wait",
        json!({ "target": id, "text": "late-4[0-9]$", "regex": true, "timeout_ms": 20000 }),
    );
    // Parked before the upgrade: a later request on the same connection
    // is answered first.
    let status = c.send("server.status", json!({}));
    assert_eq!(c.next_response()["id"], status);
    assert_exit(&ptyd.run_cli(&["upgrade"]), 0);
    ptyd.connect().input(&id, "\r");
    let r = c.response(wait).expect("the wait is answered");
    assert_eq!(r["reason"], "text", "{r}");
}
