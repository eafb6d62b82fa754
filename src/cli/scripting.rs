//! The commands scripts and agents drive panes with: `send` (text, keys,
//! pastes, then optionally a race-free wait for what the input caused),
//! `wait`, and `shell-init`.
//!
//! A wait started by `send` begins from the input's acknowledgement (its
//! `commands_finished` and `output_bytes` counters), so a program that
//! answers before the wait request arrives is never missed. CLI waits have
//! a default timeout (`wait_timeout_ms` of config.toml, else
//! `server::config::DEFAULT_WAIT_TIMEOUT`, 30 s) so a script never hangs
//! silently; one that passes exits 124.

use super::args::Parsed;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::client::Client;
use crate::protocol::methods::{self, Request};
use crate::protocol::replies::InputAck;
use serde_json::{Value, json};
use std::io::Read;
use std::time::Duration;

/// A wait's `--timeout DUR`, else the config's `wait_timeout_ms`, else
/// 30 s; `None` (no timeout) for `0`.
fn wait_timeout(a: &Parsed) -> Result<Option<u64>, CliError> {
    let ms = match a.millis("timeout")? {
        Some(ms) => ms,
        None => crate::server::config::load().0.wait_timeout.as_millis() as u64,
    };
    Ok((ms > 0).then_some(ms))
}

/// Runs a `pane.wait`. A timeout is an error with exit code 124 (as
/// timeout(1)'s) whose message says how to wait longer.
fn run_wait(client: &mut Client, wait: methods::PaneWait) -> Result<Value, CliError> {
    let timeout = wait.timeout_ms;
    client.request(&Request::PaneWait(wait)).map_err(|e| {
        let timed_out = e.refused("timeout");
        let mut err = CliError::from(e);
        if timed_out {
            let after = timeout.map_or(String::new(), |ms| format!(" ({ms} ms)"));
            err.message = format!(
                "{}{after}; --timeout sets another limit, 0 for none",
                err.message
            );
        }
        err
    })
}

pub fn send(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let (mut words, mut keys) = a.operands_split_at("keys")?;
    // TARGET is `-t TARGET`, else the first word.
    let target = match a.value("target")? {
        Some(t) => t,
        None if !words.is_empty() => words.remove(0),
        None if !keys.is_empty() => keys.remove(0),
        None => a.need_target()?,
    };
    let enter = a.flag("enter");
    let submit = a.flag("submit");
    let paste = a.flag("paste");
    let in_keys = a.flag("keys");
    let wait_finished = a.flag("wait");
    let wait_for = a.value("wait-for")?;
    let regex = a.flag("regex");
    let request_id = a.value("request-id")?;
    let timeout = wait_timeout(a)?;
    let as_json = a.flag("json");
    if wait_finished && wait_for.is_some() {
        return Err(CliError::usage("give --wait or --wait-for TEXT, not both"));
    }
    if regex && wait_for.is_none() {
        return Err(CliError::usage("--regex goes with --wait-for"));
    }
    if submit && (enter || in_keys) {
        return Err(CliError::usage(
            "--submit presses Enter itself: give it TEXT, without --enter or --keys",
        ));
    }
    let data = text_to_send(&words)?;
    // An Enter typed right behind a paste is dropped by some programs (it
    // arrives while they still handle the paste): it goes as its own write.
    let separate_enter = enter && paste;
    if enter && !separate_enter {
        keys.push("Enter".into());
    }
    if submit && data.is_empty() {
        return Err(CliError::usage("--submit needs TEXT (or - for stdin)"));
    }
    if data.is_empty() && keys.is_empty() && !separate_enter {
        return Err(CliError::usage(
            "nothing to send: give TEXT (or - for stdin), --keys KEY..., and/or --enter",
        ));
    }
    let mut client = connect(g)?;
    if wait_finished {
        require_marks(&mut client, &target)?;
    }
    // Lines the shell will echo before what the input causes.
    let typed_lines = data.matches(['\r', '\n']).count()
        + keys.iter().filter(|k| is_enter(k)).count()
        + usize::from(separate_enter || submit);
    let ack = input(
        &mut client,
        methods::PaneInput {
            target: target.clone(),
            data: Some(data.clone()),
            keys,
            paste,
            request_id: request_id.clone(),
        },
    )?;
    let mut acks = vec![ack.clone()];
    if separate_enter {
        acks.push(input(
            &mut client,
            methods::PaneInput {
                target: target.clone(),
                data: None,
                keys: vec!["Enter".into()],
                paste: false,
                request_id: request_id.map(|id| format!("{id}:enter")),
            },
        )?);
    }
    let mut report = json!({ "acks": acks });
    if submit {
        report["submit"] = confirm_submit(&mut client, &target, &data, &ack)?;
    }
    let code = if wait_finished {
        let wait = methods::PaneWait {
            command_finished: true,
            after: Some(ack.commands_finished),
            timeout_ms: timeout,
            ..methods::PaneWait::new(target)
        };
        let done = run_wait(&mut client, wait)?;
        let code = done["exit"].as_i64().unwrap_or(0) as i32;
        report["wait"] = done;
        code
    } else if let Some(text) = wait_for {
        let wait = methods::PaneWait {
            text: Some(text),
            regex,
            after_output: Some(ack.output_bytes),
            skip_lines: Some(typed_lines as u64),
            after_command_start: true,
            timeout_ms: timeout,
            ..methods::PaneWait::new(target)
        };
        report["wait"] = run_wait(&mut client, wait)?;
        0
    } else {
        0
    };
    if as_json {
        print_json(&report);
    }
    Ok(code)
}

/// TEXT: the words joined by spaces, or with `-` all of stdin.
fn text_to_send(words: &[String]) -> Result<String, CliError> {
    if words != ["-"] {
        return Ok(words.join(" "));
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::usage(format!("reading stdin: {e}")))?;
    String::from_utf8(bytes).map_err(|_| {
        CliError::usage("stdin is not UTF-8 text; ptyd send takes text (use --keys for keys)")
    })
}

/// Types one input and returns its acknowledgement.
fn input(client: &mut Client, input: methods::PaneInput) -> Result<InputAck, CliError> {
    Ok(client.request_as(&Request::PaneInput(input))?)
}

/// How long `--submit` waits for the program to react to each Enter.
const SUBMIT_CONFIRM: Duration = Duration::from_millis(1500);
/// Enters `--submit` tries before it gives up.
const SUBMIT_ATTEMPTS: usize = 3;

/// `send --submit`, after the text went in: waits until the program shows
/// it (its echo, or else a moment of quiet after whatever it drew), then
/// presses Enter and confirms the program took it (it printed something
/// after the Enter: the input line cleared, output began, a new prompt),
/// pressing Enter again up to [`SUBMIT_ATTEMPTS`] times. Agent CLIs drop
/// an Enter that arrives while they still handle a paste; tmux `send-keys`
/// users retry by hand. Returns the report; fails (exit 1) when no Enter
/// was taken.
fn confirm_submit(
    client: &mut Client,
    target: &str,
    data: &str,
    ack: &InputAck,
) -> Result<Value, CliError> {
    let limit = Some(SUBMIT_CONFIRM.as_millis() as u64);
    let wait = |text: Option<String>, after_output: Option<u64>| methods::PaneWait {
        text,
        after_output,
        timeout_ms: limit,
        ..methods::PaneWait::new(target.to_string())
    };
    // The echo: the end of the last line typed (a TUI may wrap or
    // abbreviate the rest).
    let last_line = data
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let chars: Vec<char> = last_line.trim().chars().collect();
    let probe: String = chars[chars.len().saturating_sub(16)..].iter().collect();
    let echo_seen = !probe.is_empty()
        && client
            .request(&Request::PaneWait(wait(
                Some(probe),
                Some(ack.output_bytes),
            )))
            .is_ok();
    // Let the program finish drawing what the text caused.
    let _ = client.request(&Request::PaneWait(methods::PaneWait {
        idle_ms: Some(100),
        ..wait(None, None)
    }));
    for attempt in 1..=SUBMIT_ATTEMPTS {
        let enter = input(
            client,
            methods::PaneInput {
                target: target.to_string(),
                data: None,
                keys: vec!["Enter".into()],
                paste: false,
                request_id: None,
            },
        )?;
        // Anything visible after the Enter (not its bare line feed).
        let reacted = client.request(&Request::PaneWait(methods::PaneWait {
            regex: true,
            ..wait(Some("\\S".into()), Some(enter.output_bytes))
        }));
        match reacted {
            Ok(_) => {
                return Ok(json!({ "echo_seen": echo_seen, "enter_attempts": attempt,
                                  "confirmed": true }));
            }
            Err(e) if e.refused("timeout") => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CliError::failure(format!(
        "pane {target} showed nothing after {SUBMIT_ATTEMPTS} Enters ({} ms each); the text {} typed",
        SUBMIT_CONFIRM.as_millis(),
        if echo_seen {
            "was"
        } else {
            "may not have been"
        }
    )))
}

fn is_enter(key: &str) -> bool {
    let base = key.rsplit('-').next().unwrap_or(key);
    ["enter", "cr", "return"].contains(&base.to_ascii_lowercase().as_str()) || key == "C-m"
}

/// Fails before anything is typed when the pane's shell cannot report the
/// command finishing (the server would refuse the wait after the input).
fn require_marks(client: &mut Client, target: &str) -> Result<(), CliError> {
    let wait = methods::PaneWait {
        command_finished: true,
        timeout_ms: Some(0),
        ..methods::PaneWait::new(target.to_string())
    };
    match client.request(&Request::PaneWait(wait)) {
        Err(e) if e.refused("no_shell_integration") => Err(e.into()),
        // Answered (or timed out at once): the pane can report marks.
        _ => Ok(()),
    }
}

pub fn wait(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let count = |long: &str| {
        a.value_as(long, |s| {
            s.parse()
                .map_err(|_| CliError::usage(format!("--{long} takes a whole number, got {s:?}")))
        })
    };
    let mut wait = methods::PaneWait {
        exit: a.flag("exit"),
        text: a.value("text")?,
        regex: a.flag("regex"),
        include_screen: a.flag("screen"),
        after_output: count("after-output")?,
        after: count("after")?,
        idle_ms: a.millis("idle")?,
        prompt: a.flag("prompt"),
        command_finished: a.flag("command-finished"),
        ..methods::PaneWait::new(a.need_target()?)
    };
    let as_json = a.flag("json");
    let timeout = wait_timeout(a)?;
    let target_name = wait.target.clone();
    wait.timeout_ms = timeout;
    let want_exit = wait.exit;
    let result = run_wait(&mut connect(g)?, wait)?;
    if as_json {
        print_json(&result);
    }
    if want_exit && result["reason"] == "held" {
        // Nothing ran, so there is no code to pass on: say why.
        if !as_json {
            eprintln!(
                "ptyd: pane {} is held (no process): {}",
                target_name,
                result["held_reason"].as_str().unwrap_or("")
            );
        }
        return Ok(1);
    }
    if want_exit {
        return Ok(result["exit"]["shell_code"].as_i64().unwrap_or(1) as i32);
    }
    Ok(0)
}

pub fn shell_init(_: &Global, a: &Parsed) -> Result<i32, CliError> {
    let shell = a.operands()?.into_iter().next();
    let name = shell.ok_or_else(|| CliError::usage("usage: ptyd shell-init bash|zsh|fish"))?;
    let shell = crate::shell::Shell::from_program(name.as_ref())
        .filter(|_| !name.contains('/'))
        .ok_or_else(|| {
            CliError::usage(format!(
                "no shell integration for {name:?}; there is one for bash, zsh and fish"
            ))
        })?;
    print!("{}", shell.hooks());
    Ok(0)
}
