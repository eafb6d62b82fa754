//! Parked `pane.wait` requests. A wait costs no thread: it is a record the
//! loop checks when something relevant happens (output, exit, a timer), and
//! answers exactly once. A closed connection drops its waits.

use super::Server;
use super::clients::connection::ConnId;
use super::panes::Panes;
use super::timers::TimerKind;
use crate::model::PaneId;
use crate::protocol::{ErrorCode, RpcError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub enum WaitCondition {
    /// The pane's process exits.
    Exit,
    /// The text (or a regex match) appears in new output, or on the screen.
    Text(TextWait),
    /// No output for this long.
    Idle(Duration),
    /// A shell prompt (OSC 133;A) beyond the first `n` the pane has shown.
    Prompt(u64),
    /// A finished command (OSC 133;D) beyond the first `n`.
    CommandFinished(u64),
}

/// A text wait: what to find and from where in the pane's output log
/// (`output_log.rs`).
#[derive(Debug)]
pub struct TextWait {
    pub text: String,
    /// Set when `text` is a regular expression (compiled once).
    pub regex: Option<regex::Regex>,
    /// Also match text on the screen (the screen when the wait starts, and
    /// lines that scroll off later), not only new output.
    pub include_screen: bool,
    /// Text position in the output log where a match may start.
    pub from: u64,
    /// Line feeds still to pass (from `from`) before matching starts: the
    /// echo of typed lines.
    pub skip_lines: u64,
    /// Matching starts after the next command-start mark (OSC 133;C) from
    /// `from`: the output of the command typed (shell integration).
    pub after_command_start: bool,
    /// Text position up to which output was searched without a match.
    pub scanned: u64,
}

impl TextWait {
    /// Advances over new output; true on a match.
    fn search(&mut self, log: &super::panes::output_log::OutputLog) -> bool {
        if self.after_command_start {
            match log.command_start_from(self.from) {
                Some(mark) => {
                    self.from = mark;
                    self.after_command_start = false;
                }
                None => {
                    self.scanned = log.end();
                    return false;
                }
            }
        }
        let (start, text) = log.text_from(self.from);
        self.from = start;
        let mut text = text;
        while self.skip_lines > 0 {
            match text.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.skip_lines -= 1;
                    self.from += i as u64 + 1;
                    text = &text[i + 1..];
                }
                None => {
                    self.scanned = log.end();
                    return false;
                }
            }
        }
        // Resume where the last search stopped: for a literal, far enough
        // back to catch a match that straddles the old end; for a regex,
        // from the start of the line the old end is in.
        let scanned = self.scanned.clamp(self.from, log.end());
        let resume = (scanned - self.from) as usize;
        let back = match &self.regex {
            Some(_) => text[..resume]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1),
            None => resume.saturating_sub(self.text.len().saturating_sub(1)),
        };
        self.scanned = log.end();
        let hay = String::from_utf8_lossy(&text[back..]);
        match &self.regex {
            Some(re) => re.is_match(&hay),
            None => hay.contains(self.text.as_str()),
        }
    }

    /// Whether the screen (and lines scrolled off since `seen_pushed`)
    /// shows it.
    fn on_screen(&self, screen: &crate::term::Terminal, seen_pushed: u64) -> bool {
        let scrolled = screen.scrollback_pushed().saturating_sub(seen_pushed);
        let scrolled = scrolled.min(screen.scrollback_len() as u64) as i64;
        let start = if scrolled > 0 { Some(-scrolled) } else { None };
        // Joined, so text that autowrap split across rows matches.
        let opts = crate::term::CaptureOptions {
            start,
            end: None,
            escapes: false,
            join: true,
        };
        let shown = screen.capture(&opts).lines.join("\n");
        match &self.regex {
            Some(re) => re.is_match(&shown),
            None => shown.contains(self.text.as_str()),
        }
    }
}

#[derive(Debug)]
pub struct Wait {
    pub conn: ConnId,
    pub rpc_id: Value,
    pub pane: u64,
    pub condition: WaitCondition,
    /// When the wait times out (kept so a live upgrade can carry it).
    pub deadline: Option<Instant>,
    /// For text waits: the pane's scrollback push count when last checked,
    /// so text that scrolled off between two checks is still seen.
    pub seen_pushed: u64,
}

/// The answer a wait gets now, or `None` if it must keep waiting. Text
/// waits advance their search position.
fn outcome(panes: &Panes, wait: &mut Wait, now: Instant) -> Option<Result<Value, RpcError>> {
    let Some(pane) = panes.get(&wait.pane) else {
        return Some(Err(RpcError::new(
            ErrorCode::NotFound,
            format!("pane p{} was removed", wait.pane),
        )));
    };
    let exited = !pane.is_running();
    match &mut wait.condition {
        WaitCondition::Exit => match pane.held_reason() {
            // No process to wait for, and "exited" with no status would
            // hide why: say it is held and what to do.
            Some(why) => Some(Ok(json!({ "reason": "held", "held_reason": why }))),
            None => exited.then(|| Ok(json!({ "reason": "exited", "exit": pane.exit_json() }))),
        },
        WaitCondition::Text(text) => {
            let found = text.search(pane.output())
                || (text.include_screen && text.on_screen(pane.screen(), wait.seen_pushed));
            if found {
                Some(Ok(json!({ "reason": "text" })))
            } else if exited {
                let state = match pane.held_reason() {
                    Some(why) => format!("is held (no process: {why})"),
                    None => "exited".to_string(),
                };
                Some(Err(RpcError::new(
                    ErrorCode::PaneExited,
                    format!(
                        "pane {} {state} without showing {:?}",
                        pane.public_id(),
                        text.text
                    ),
                )))
            } else {
                None
            }
        }
        WaitCondition::Idle(idle) => (now.saturating_duration_since(pane.last_output()) >= *idle)
            .then(|| Ok(json!({ "reason": "idle" }))),
        WaitCondition::Prompt(after) if pane.prompts_seen() > *after => Some(Ok(
            json!({ "reason": "prompt", "prompts_seen": pane.prompts_seen() }),
        )),
        WaitCondition::CommandFinished(after) if pane.commands_finished() > *after => {
            Some(Ok(json!({
                "reason": "command_finished",
                "exit": pane.last_command_exit(),
                "commands_finished": pane.commands_finished(),
            })))
        }
        WaitCondition::Prompt(_) | WaitCondition::CommandFinished(_) => exited.then(|| {
            Err(RpcError::new(
                ErrorCode::PaneExited,
                format!(
                    "pane {} exited before the shell-integration mark",
                    pane.public_id()
                ),
            ))
        }),
    }
}

/// Checks the waits `select` picks and returns the answered ones.
fn ready_waits(
    panes: &Panes,
    waits: &mut BTreeMap<u64, Wait>,
    now: Instant,
    select: impl Fn(&Wait) -> bool,
) -> Vec<(u64, Result<Value, RpcError>)> {
    waits
        .iter_mut()
        .filter(|(_, w)| select(w))
        .filter_map(|(id, w)| outcome(panes, w, now).map(|o| (*id, o)))
        .collect()
}

impl Server {
    /// Answers at once if the condition already holds, else parks the wait.
    pub(super) fn park_wait(&mut self, mut wait: Wait, timeout: Option<Duration>) {
        if let Some(outcome) = outcome(&self.panes, &mut wait, Instant::now()) {
            self.respond(wait.conn, &wait.rpc_id, outcome);
            return;
        }
        let id = self.next_wait_id;
        self.next_wait_id += 1;
        if let Some(pane) = self.panes.get(&wait.pane) {
            wait.seen_pushed = pane.screen().scrollback_pushed();
        }
        if let Some(timeout) = timeout {
            wait.deadline = Some(Instant::now() + timeout);
            self.timers
                .add(Instant::now() + timeout, TimerKind::WaitTimeout(id));
        }
        if let WaitCondition::Idle(idle) = wait.condition
            && let Some(pane) = self.panes.get(&wait.pane)
        {
            self.timers
                .add(pane.last_output() + idle, TimerKind::WaitIdle(id));
        }
        self.waits.insert(id, wait);
    }

    fn finish_wait(&mut self, id: u64, outcome: Result<Value, RpcError>) {
        if let Some(wait) = self.waits.remove(&id) {
            self.respond(wait.conn, &wait.rpc_id, outcome);
        }
    }

    /// Re-checks every wait on `pane` (after output or exit).
    fn recheck_waits(&mut self, pane: u64, only_text: bool) {
        let now = Instant::now();
        let ready = ready_waits(&self.panes, &mut self.waits, now, |w| {
            w.pane == pane && (!only_text || matches!(w.condition, WaitCondition::Text(_)))
        });
        for (id, outcome) in ready {
            self.finish_wait(id, outcome);
        }
        if let Some(pushed) = self
            .panes
            .get(&pane)
            .map(|p| p.screen().scrollback_pushed())
        {
            for w in self.waits.values_mut().filter(|w| w.pane == pane) {
                w.seen_pushed = pushed;
            }
        }
    }

    pub(super) fn check_text_waits(&mut self, pane: u64) {
        if self
            .waits
            .values()
            .any(|w| w.pane == pane && matches!(w.condition, WaitCondition::Text(_)))
        {
            self.recheck_waits(pane, true);
        }
    }

    /// A shell-integration mark arrived: re-check the waits on marks.
    pub(super) fn on_shell_mark(&mut self, pane: u64) {
        let now = Instant::now();
        let ready = ready_waits(&self.panes, &mut self.waits, now, |w| {
            w.pane == pane
                && matches!(
                    w.condition,
                    WaitCondition::Prompt(_) | WaitCondition::CommandFinished(_)
                )
        });
        for (id, outcome) in ready {
            self.finish_wait(id, outcome);
        }
    }

    pub(super) fn resolve_waits_on_exit(&mut self, pane: u64) {
        self.recheck_waits(pane, false);
    }

    /// A removed pane fails its waits with `not_found`.
    pub(super) fn fail_waits_on_remove(&mut self, pane: u64) {
        let ids: Vec<u64> = self
            .waits
            .iter()
            .filter(|(_, w)| w.pane == pane)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let err = RpcError::new(
                ErrorCode::NotFound,
                format!("pane {} was removed while waiting", PaneId::new(pane)),
            );
            self.finish_wait(id, Err(err));
        }
    }

    pub(super) fn on_wait_timeout(&mut self, id: u64) {
        let err = RpcError::new(
            ErrorCode::Timeout,
            "the wait timed out before its condition held",
        );
        self.finish_wait(id, Err(err));
    }

    pub(super) fn check_idle_wait(&mut self, id: u64, now: Instant) {
        let Some(wait) = self.waits.get_mut(&id) else {
            return;
        };
        if let Some(outcome) = outcome(&self.panes, wait, now) {
            self.finish_wait(id, outcome);
        } else if let (WaitCondition::Idle(idle), Some(pane)) =
            (&wait.condition, self.panes.get(&wait.pane))
        {
            let due = pane.last_output() + *idle;
            self.timers.add(due, TimerKind::WaitIdle(id));
        }
    }
}
