//! A pane: one PTY, the process tree in it, its screen, and the input waiting
//! to be written to it.
//!
//! Lifecycle: `Held` (no process: restored with the `hold` policy, or its
//! start failed) or `Running` until the process we started is reaped, then
//! `Exited` with its status and the reason (normal exit, kill request,
//! watchdog). `respawn` takes `Held` or `Exited` back to `Running` with a new
//! PTY. The master fd may end earlier (EIO: every slave fd closed) or later (a
//! background process still holds the slave) than the process; the two are
//! tracked apart. The pane and its exit status stay until removed.

use super::connection::ConnId;
use crate::persist::snapshot::RestorePolicy;
use crate::protocol::methods::{CommandSpec, ExitStatus};
use crate::pty::{ChildProcess, PtyMaster};
use crate::term::{CaptureOptions, TermConfig, Terminal};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Input accepted for a pane and not yet written to its PTY.
pub const MAX_PENDING_INPUT: usize = 1 << 20;
/// `request_id`s remembered per pane for deduplicating retried input.
pub const REQUEST_ID_MEMORY: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The process ended on its own.
    Exited,
    /// `pane.kill` (or `pane.remove --force`) ended it.
    Killed,
    /// The wall-clock watchdog (`timeout_ms`) fired.
    Timeout,
    /// The idle watchdog (`idle_timeout_ms`) fired.
    IdleTimeout,
}

#[derive(Debug, Clone)]
pub enum PaneState {
    Running(ChildProcess),
    Exited {
        child: ChildProcess,
        status: ExitStatus,
        reason: ExitReason,
    },
    Held {
        reason: String,
    },
}

/// An input request waiting for its bytes to reach the PTY.
#[derive(Debug)]
pub struct PendingAck {
    pub conn: ConnId,
    pub rpc_id: Value,
    /// Acked once `written_total` reaches this.
    pub end_offset: u64,
    pub duplicate: bool,
}

pub struct Pane {
    pub id: u64,
    pub name: Option<String>,
    pub command: CommandSpec,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    pub cols: u16,
    pub rows: u16,
    pub created_unix_ms: u64,
    /// `None` once output has ended and the fd is closed.
    pub master: Option<PtyMaster>,
    /// The master after output ended (EIO) while the process still runs,
    /// kept open until it is reaped. Closing it hangs up the terminal, and
    /// the kernel's SIGHUP would kill a process that closed its stdio and is
    /// about to exit normally (GNU tools do), falsifying its exit status.
    pub hung_up_master: Option<PtyMaster>,
    pub token: mio::Token,
    pub state: PaneState,
    /// Counts starts; timers for one run must not act on the next.
    pub run: u64,
    pub restore: RestorePolicy,
    pub resume: Option<String>,
    /// Output arrived since the history file was last written.
    pub history_dirty: bool,
    /// Shell-integration marks seen (OSC 133 A and D), so a wait can ask for
    /// "a mark after the N-th" without racing the shell.
    pub prompts_seen: u64,
    pub commands_finished: u64,
    pub last_command_exit: Option<i32>,
    /// The terminal model: screen, scrollback, modes, title.
    pub screen: Terminal,
    pub last_output: Instant,
    pub timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    /// Set by the first kill request: why the pane is being killed.
    pub kill_reason: Option<ExitReason>,
    /// When a kill in progress escalates to SIGKILL (its timer's deadline,
    /// kept so a live upgrade can carry it).
    pub kill_deadline: Option<Instant>,
    /// For a process spawned by an earlier server generation (not our
    /// child, so no SIGCHLD for it): a pidfd that polls readable on its exit
    /// and reports the status (`pty::pidfd`).
    pub pidfd: Option<std::os::fd::OwnedFd>,
    pub pidfd_token: Option<mio::Token>,
    /// When the wall-clock watchdog fires, for the same reason.
    pub timeout_at: Option<Instant>,
    /// Not read while an attached client is too far behind; the loop reads
    /// it again once they catch up.
    pub output_paused: bool,
    /// A `PaneStall` timer is pending for this pane.
    pub stall_timer: bool,
    input: Vec<u8>,
    input_pos: usize,
    written_total: u64,
    pub pending_acks: Vec<PendingAck>,
    recent_requests: HashMap<String, u64>,
    recent_order: VecDeque<String>,
}

/// Everything needed to construct a pane besides its fds.
pub struct PaneSetup {
    pub id: u64,
    pub name: Option<String>,
    pub command: CommandSpec,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    pub cols: u16,
    pub rows: u16,
    pub timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub restore: RestorePolicy,
    pub resume: Option<String>,
    /// Scrollback limits and reported colours of the terminal model.
    pub term: TermConfig,
}

impl Pane {
    /// A pane with no process yet (`Held`); `start` gives it one.
    pub fn new(setup: PaneSetup, token: mio::Token, held_reason: String) -> Pane {
        let screen = Terminal::new(setup.cols, setup.rows, setup.term.clone());
        Pane::with_screen(setup, token, held_reason, screen)
    }

    pub fn with_screen(
        setup: PaneSetup,
        token: mio::Token,
        held_reason: String,
        screen: Terminal,
    ) -> Pane {
        Pane {
            id: setup.id,
            name: setup.name,
            command: setup.command,
            cwd: setup.cwd,
            env: setup.env,
            cols: setup.cols,
            rows: setup.rows,
            created_unix_ms: unix_ms(),
            master: None,
            hung_up_master: None,
            token,
            state: PaneState::Held {
                reason: held_reason,
            },
            run: 0,
            restore: setup.restore,
            resume: setup.resume,
            // A snapshot names every pane's history file, so the first
            // save after creation must write one even if nothing was printed.
            history_dirty: true,
            prompts_seen: 0,
            commands_finished: 0,
            last_command_exit: None,
            screen,
            last_output: Instant::now(),
            timeout: setup.timeout,
            idle_timeout: setup.idle_timeout,
            kill_reason: None,
            kill_deadline: None,
            pidfd: None,
            pidfd_token: None,
            timeout_at: None,
            output_paused: false,
            stall_timer: false,
            input: Vec::new(),
            input_pos: 0,
            written_total: 0,
            pending_acks: Vec::new(),
            recent_requests: HashMap::new(),
            recent_order: VecDeque::new(),
        }
    }

    pub fn public_id(&self) -> String {
        format!("p{}", self.id)
    }

    /// Takes a freshly spawned process: the pane is `Running` again, with
    /// no leftovers of an earlier run (kill reason, input, acks).
    pub fn start(&mut self, master: PtyMaster, child: ChildProcess) {
        self.master = Some(master);
        self.state = PaneState::Running(child);
        self.run += 1;
        self.kill_reason = None;
        self.kill_deadline = None;
        self.timeout_at = None;
        self.last_output = Instant::now();
        self.discard_input();
    }

    pub fn is_running(&self) -> bool {
        matches!(self.state, PaneState::Running(_))
    }

    /// The process that runs, or ran last.
    pub fn child(&self) -> Option<ChildProcess> {
        match &self.state {
            PaneState::Running(c) | PaneState::Exited { child: c, .. } => Some(*c),
            PaneState::Held { .. } => None,
        }
    }

    pub fn pending_input(&self) -> usize {
        self.input.len() - self.input_pos
    }

    /// Queues input bytes and returns the offset at which they are all
    /// written. Fails if the pending input would pass its limit.
    pub fn queue_input(&mut self, bytes: &[u8]) -> Result<u64, String> {
        if self.pending_input() + bytes.len() > MAX_PENDING_INPUT {
            return Err(format!(
                "pane {} has {} bytes of input not yet read by its program (limit {MAX_PENDING_INPUT}); wait and retry",
                self.public_id(),
                self.pending_input()
            ));
        }
        self.input.extend_from_slice(bytes);
        Ok(self.written_total + self.pending_input() as u64)
    }

    /// Answers to terminal queries jump no queue but must not pass the limit
    /// either; past it they are dropped (the program asked too much).
    pub fn queue_reply(&mut self, bytes: &[u8]) {
        if self.pending_input() + bytes.len() <= MAX_PENDING_INPUT {
            self.input.extend_from_slice(bytes);
        }
    }

    /// The end offset of an earlier input with this request id, if known.
    pub fn seen_request(&self, request_id: &str) -> Option<u64> {
        self.recent_requests.get(request_id).copied()
    }

    pub fn remember_request(&mut self, request_id: String, end_offset: u64) {
        if self.recent_order.len() == REQUEST_ID_MEMORY
            && let Some(old) = self.recent_order.pop_front()
        {
            self.recent_requests.remove(&old);
        }
        self.recent_requests.insert(request_id.clone(), end_offset);
        self.recent_order.push_back(request_id);
    }

    pub fn written_total(&self) -> u64 {
        self.written_total
    }

    /// Writes pending input until the PTY is full.
    pub fn flush_input(&mut self) -> io::Result<()> {
        let Some(master) = &self.master else {
            return Ok(());
        };
        while self.input_pos < self.input.len() {
            match master.write(&self.input[self.input_pos..]) {
                Ok(n) => {
                    self.input_pos += n;
                    self.written_total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.input_pos == self.input.len() {
            self.input.clear();
            self.input_pos = 0;
        }
        Ok(())
    }

    /// Drops input that can no longer be written (the pane exited).
    pub fn discard_input(&mut self) {
        self.input.clear();
        self.input_pos = 0;
    }

    pub fn exit_json(&self) -> Value {
        match &self.state {
            PaneState::Exited { status, reason, .. } => exit_status_json(*status, *reason),
            _ => Value::Null,
        }
    }

    fn state_name(&self) -> &'static str {
        match self.state {
            PaneState::Running(_) => "running",
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
            "created_unix_ms": self.created_unix_ms,
            "attached_clients": attached_clients,
        })
    }
}

impl Pane {
    /// Scrollback and screen as lines with SGR sequences: what the history
    /// file keeps and a restore injects back.
    pub fn history_text(&self) -> String {
        let opts = CaptureOptions {
            start: Some(-(self.screen.scrollback_len() as i64)),
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

    /// Puts restored text into the scrollback, above what the new process
    /// will print.
    pub fn inject_history(&mut self, text: &str) {
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        self.screen.inject_history(&lines);
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

impl Pane {
    /// What a live upgrade carries of the input path: the input accepted
    /// and not yet written, the total written so far, and the remembered
    /// request ids with their end offsets, oldest first.
    pub fn input_state(&self) -> (&[u8], u64, Vec<(String, u64)>) {
        let recent = self
            .recent_order
            .iter()
            .filter_map(|r| self.recent_requests.get(r).map(|end| (r.clone(), *end)))
            .collect();
        (&self.input[self.input_pos..], self.written_total, recent)
    }

    /// The input path as a live upgrade carried it (see `input_state`).
    pub fn restore_input_state(
        &mut self,
        input: Vec<u8>,
        written_total: u64,
        recent: Vec<(String, u64)>,
    ) {
        self.input = input;
        self.input_pos = 0;
        self.written_total = written_total;
        for (request, end) in recent {
            self.remember_request(request, end);
        }
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
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("SIG{sig}"), |s| s.as_str().to_string())
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
