//! What a pane says of itself: its info and exit as JSON, and its history
//! as text.

use super::*;

impl Pane {
    /// The status and reason of an exited pane.
    pub fn exit_state(&self) -> Option<(ExitStatus, ExitReason)> {
        match &self.state {
            PaneState::Exited { status, reason, .. } => Some((*status, *reason)),
            _ => None,
        }
    }

    pub fn exit_json(&self) -> Value {
        match &self.state {
            PaneState::Exited { status, reason, .. } => exit_status_json(*status, *reason),
            _ => Value::Null,
        }
    }

    fn state_name(&self) -> &'static str {
        match self.state {
            PaneState::Running { .. } => "running",
            PaneState::Exited { .. } => "exited",
            PaneState::Held { .. } => "held",
        }
    }

    /// The pane as `pane.list` and `pane.create` report it.
    pub fn info(&self, attached_clients: usize) -> Value {
        json!({
            "id": self.public_id(),
            "name": self.name,
            "pid": self.child().map(|c| c.pid),
            "sid": self.child().map(|c| c.sid),
            "start_token": self.child().and_then(|c| c.start_token),
            "cols": self.cols,
            "rows": self.rows,
            "cwd": self.cwd,
            "command": self.command,
            "env": self.env,
            "state": self.state_name(),
            "exit": self.exit_json(),
            "held_reason": match &self.state { PaneState::Held { reason } => Some(reason.as_str()), _ => None },
            "restore": self.restore,
            "resume": self.resume,
            "title": self.screen.title(),
            "prompts_seen": self.prompts_seen,
            "commands_finished": self.commands_finished,
            "last_command_exit": self.last_command_exit,
            "shell_integration": self.shell_integration,
            "shell_injected": self.shell_injected.map(crate::shell::Shell::name),
            "output_bytes": self.output.total(),
            "history_bytes": {
                "stored": self.screen.history_stored_bytes(),
                "raw": self.screen.history_raw_bytes(),
                "heap": self.screen.scrollback_memory_bytes(),
            },
            "created_unix_ms": self.created_unix_ms,
            "attached_clients": attached_clients,
        })
    }

    /// Scrollback and screen as lines with SGR sequences: what the history
    /// file keeps and a restore injects back. Only the newest lines are
    /// rendered, enough to hold `at_least` bytes of text when the history
    /// has them (the file keeps its last `HISTORY_MAX_BYTES`): rendering a
    /// million-line history whole, on the loop, held every client's input
    /// for a second or more. The text is the end of the whole history's.
    pub fn history_text(&self, at_least: usize) -> String {
        let held = self.screen.scrollback_len();
        // Doubling: at most twice the lines the bound needs are rendered.
        let mut lines = 4096.min(held);
        loop {
            let text = self.history_text_of(lines);
            if text.len() >= at_least || lines >= held {
                return text;
            }
            lines = lines.saturating_mul(2).min(held);
        }
    }

    /// The newest `lines` lines of history and the screen, as
    /// `history_text` renders them.
    fn history_text_of(&self, lines: usize) -> String {
        let opts = CaptureOptions {
            start: Some(-(lines as i64)),
            end: None,
            escapes: true,
            join: false,
        };
        let capture = self.screen.capture(&opts);
        let last = capture
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        let mut out = String::new();
        for line in &capture.lines[..last] {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// Shows restored text as if it had just been printed, above what the
    /// new process will print: its last lines on the screen, the rest in
    /// the scrollback.
    pub fn print_history(&mut self, text: &str) {
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        self.screen.print_lines(&lines);
    }
}

impl ExitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::Exited => "exited",
            ExitReason::Killed => "killed",
            ExitReason::Timeout => "timeout",
            ExitReason::IdleTimeout => "idle_timeout",
        }
    }

    pub fn parse(s: &str) -> Option<ExitReason> {
        [
            ExitReason::Exited,
            ExitReason::Killed,
            ExitReason::Timeout,
            ExitReason::IdleTimeout,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

pub fn exit_status_json(status: ExitStatus, reason: ExitReason) -> Value {
    let mut v = json!({ "reason": reason, "shell_code": status.shell_code() });
    match status {
        ExitStatus::Code(c) => v["code"] = json!(c),
        ExitStatus::Signal(s) => {
            v["signal"] = json!(s);
            v["signal_name"] = json!(signal_name(s));
        }
    }
    v
}

pub fn signal_name(sig: i32) -> String {
    crate::sys::signal_name(sig)
}
