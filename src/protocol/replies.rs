//! Typed replies: what the server answers, as structs a client reads
//! (`Deserialize`) and the server builds (`Serialize`) where it has them.
//! Members that carry nested reports the client only passes through stay
//! `Value`. Readers ignore members they do not know, so a server may add
//! members without breaking older clients of the same protocol version.

use crate::model::{CommandSpec, Direction, PaneId, RestorePolicy, TabId, WorkspaceId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `hello`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HelloReply {
    pub protocol: u32,
    pub server_version: String,
    pub pid: u32,
}

/// `server.status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    pub server_version: String,
    pub protocol: u32,
    pub namespace: String,
    pub socket: PathBuf,
    pub started_unix_ms: u64,
    pub uptime_ms: u64,
    pub panes: usize,
    pub running_panes: usize,
    /// Attached clients (`client.list` lists them).
    pub clients: usize,
    /// Open connections other than the one asking (attached clients, event
    /// subscribers, parked requests, idle ones).
    #[serde(default)]
    pub connections: usize,
    pub event_seq: u64,
    /// Bytes of event JSON the ring holds (at most 8 MiB).
    #[serde(default)]
    pub event_ring_bytes: usize,
    /// Passes over pane output the loop ended early, since it started, to
    /// serve a client that connected or sent something meanwhile.
    #[serde(default)]
    pub pane_passes_cut: u64,
    pub generation: u64,
    /// The running upgrade, if any (see docs/protocol.md).
    pub upgrade: Value,
    /// The last upgrade's report or failure.
    pub last_upgrade: Value,
    pub workspaces: usize,
    pub tabs: usize,
    /// Saving: enabled, revisions, last save and error, the restore report.
    pub persistence: Value,
    /// The config file's path, the values in force and its problems.
    pub config: Value,
    /// The keeper (its pid, checkpoints written, the last crash
    /// recovery); null without one.
    #[serde(default)]
    pub keeper: Value,
    /// Log lines the serving process could not write to its stderr (a
    /// closed pipe, a full disk), and why the first could not.
    #[serde(default)]
    pub stderr_write_failures: u64,
    #[serde(default)]
    pub stderr_write_error: Option<String>,
    /// The socket and lock made again after the runtime directory was
    /// removed: how often, the last time, and why it cannot be now (null
    /// on Windows).
    #[serde(default)]
    pub runtime_dir: Value,
    /// The input all connections hold unhandled (unfinished lines and
    /// frames), the budget for it and how many were refused over it.
    #[serde(default)]
    pub client_input: Value,
    /// All panes' history bytes (`stored_bytes`, `raw_bytes`) and
    /// `scrollback_total_bytes` (`total_bytes_limit`); null from a server
    /// before them.
    #[serde(default)]
    pub history: Value,
}

/// `server.save`: once the snapshot of `revision` is on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    pub path: PathBuf,
    pub revision: u64,
}

/// `workspace.create`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkspaceCreated {
    pub id: WorkspaceId,
    pub name: String,
}

/// A pane's state in its info.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaneStateName {
    Running,
    Exited,
    /// Not started: restored with policy `hold`, or its start failed.
    Held,
}

/// How a pane's process ended, in pane info, `pane.exited` events, waits
/// and EXIT frames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// `exited`, `killed`, `timeout`, `idle_timeout`, ...
    #[serde(default = "exited")]
    pub reason: String,
    /// The code, or 128 + the signal.
    #[serde(default)]
    pub shell_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_name: Option<String>,
}

fn exited() -> String {
    "exited".into()
}

impl ExitInfo {
    /// "code 3", "killed by SIGTERM after ptyd kill", "killed by SIGTERM
    /// at its --timeout": for people.
    pub fn describe(&self) -> String {
        let what = match (&self.code, &self.signal_name) {
            (Some(code), _) => format!("code {code}"),
            (None, Some(name)) => format!("killed by {name}"),
            (None, None) => "unknown status".to_string(),
        };
        let why = match self.reason.as_str() {
            "exited" => "",
            "killed" => " after ptyd kill",
            "timeout" => " at its --timeout",
            "idle_timeout" => " at its --idle-timeout",
            other => return format!("{what} ({other})"),
        };
        format!("{what}{why}")
    }
}

#[cfg(test)]
mod describe_tests {
    use super::ExitInfo;

    #[test]
    fn exits_read_as_sentences() {
        let exit = |reason: &str, code: Option<i32>, signal: Option<&str>| ExitInfo {
            reason: reason.into(),
            shell_code: 0,
            code,
            signal: None,
            signal_name: signal.map(String::from),
        };
        assert_eq!(exit("exited", Some(3), None).describe(), "code 3");
        assert_eq!(
            exit("killed", None, Some("SIGTERM")).describe(),
            "killed by SIGTERM after ptyd kill"
        );
        assert_eq!(
            exit("timeout", None, Some("SIGKILL")).describe(),
            "killed by SIGKILL at its --timeout"
        );
        assert_eq!(
            exit("exited", None, Some("SIGSEGV")).describe(),
            "killed by SIGSEGV"
        );
    }
}

/// A pane as `pane.list`, `pane.create`, `pane.resize`, ... report it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaneInfo {
    pub id: PaneId,
    pub name: Option<String>,
    pub pid: Option<i32>,
    pub sid: Option<i32>,
    pub start_token: Option<u64>,
    pub cols: u16,
    pub rows: u16,
    pub cwd: PathBuf,
    pub command: CommandSpec,
    pub env: BTreeMap<String, String>,
    pub state: PaneStateName,
    pub exit: Option<ExitInfo>,
    pub held_reason: Option<String>,
    pub restore: RestorePolicy,
    pub resume: Option<String>,
    pub title: String,
    pub prompts_seen: u64,
    pub commands_finished: u64,
    pub last_command_exit: Option<i32>,
    /// Whether shells started here get ptyd's shell integration.
    pub shell_integration: bool,
    /// `bash`, `zsh` or `fish` if the current process got it injected.
    pub shell_injected: Option<String>,
    /// Bytes the pane's programs have written so far.
    pub output_bytes: u64,
    pub created_unix_ms: u64,
    pub attached_clients: usize,
}

/// `pane.list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaneList {
    pub panes: Vec<PaneInfo>,
}

/// `pane.input`, once the bytes are in the PTY: the pane's shell-mark
/// counters at that moment (for `pane.wait`'s `after`) and its output byte
/// count (for `pane.wait`'s `after_output`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InputAck {
    pub written: bool,
    pub duplicate: bool,
    pub prompts_seen: u64,
    pub commands_finished: u64,
    pub output_bytes: u64,
}

/// One attached client, as `client.list` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientInfo {
    /// The connection's number in this server (as in `client.*` events).
    pub client: usize,
    pub pane: PaneId,
    /// The client's terminal size (what it asked for; the pane's own size
    /// follows the `window_size` policy).
    pub cols: u16,
    pub rows: u16,
    pub read_only: bool,
    pub since_unix_ms: u64,
    /// The client's process, from `SO_PEERCRED`, if the OS reports it.
    pub pid: Option<i32>,
    /// Whether it is its pane's most recently active client (it typed,
    /// resized or attached last): the one `detach --others` keeps.
    pub latest: bool,
    /// What the client asked for when it falls behind (`attach`'s
    /// `when_behind`).
    #[serde(default)]
    pub when_behind: super::methods::WhenBehind,
    /// The server writes the pane's output to the client's terminal
    /// itself (the client passed it: frame mode's direct output), rather
    /// than sending it OUTPUT frames.
    #[serde(default)]
    pub direct: bool,
    /// The server reads the client's keys from that terminal itself (the
    /// client handed them over), rather than receiving INPUT frames.
    #[serde(default)]
    pub keys: bool,
    /// A tab-view client's own view (`pane` is its focus); absent for a
    /// single-pane client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ClientView>,
}

/// What one tab-view client shows: its tab, and whether it zoomed its
/// focused pane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientView {
    pub tab: crate::model::TabId,
    pub zoom: bool,
}

/// `client.list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientList {
    pub clients: Vec<ClientInfo>,
}

/// `client.detach`: the clients sent an EXIT frame.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Detached {
    pub detached: Vec<usize>,
}

/// `pane.wait`: which condition held.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum WaitReply {
    /// The process exited (`exit` as in pane info).
    Exited { exit: Option<ExitInfo> },
    /// An exit wait on a held pane (no process: restored with policy
    /// `hold`, or its start failed): why it is held.
    Held { held_reason: String },
    /// The text is on the screen (or scrolled off since the wait began).
    Text {},
    /// No output for `idle_ms`.
    Idle {},
    /// A prompt beyond `after` was shown.
    Prompt { prompts_seen: u64 },
    /// A command beyond `after` finished, with the exit code the shell
    /// reported, if any.
    CommandFinished {
        exit: Option<i32>,
        commands_finished: u64,
    },
}

/// `pane.capture` (the members a client reads; see docs/protocol.md for
/// the rest).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Capture {
    pub pane: PaneId,
    pub lines: Vec<String>,
}

impl Capture {
    /// The lines without the blank rows at the bottom of the screen.
    pub fn trimmed_lines(&self) -> &[String] {
        let last = self
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        &self.lines[..last]
    }
}

/// `tree`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TreeReply {
    pub workspaces: Vec<WorkspaceInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkspaceInfo {
    pub id: WorkspaceId,
    pub name: String,
    pub active: bool,
    pub tabs: Vec<TabInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TabInfo {
    pub id: TabId,
    pub name: String,
    pub active: bool,
    pub focus: PaneId,
    pub zoom: Option<PaneId>,
    pub layout: LayoutNode,
    /// Each pane's info, in layout order (`null` for one that is gone).
    pub panes: Vec<Option<PaneInfo>>,
}

/// A tab's layout: `{"pane": "p1"}` or `{"split": {"direction", "ratio",
/// "first", "second"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutNode {
    Pane(PaneId),
    Split {
        direction: Direction,
        /// As `f64`: the reply carries the stored `f32` widened, digit for
        /// digit as before this type existed.
        ratio: f64,
        first: Box<LayoutNode>,
        second: Box<LayoutNode>,
    },
}

/// `server.upgrade` (the members a client prints; the report has more, see
/// docs/protocol.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpgradeReport {
    pub generation: u64,
    pub new_pid: u32,
    pub server_version: String,
    /// The serving process before the upgrade (absent when the new server
    /// took over from a build that did not send it).
    #[serde(default)]
    pub from: Option<Endpoint>,
    /// The serving process after it.
    #[serde(default)]
    pub to: Option<Endpoint>,
    /// How probation ended: `survived` (the old server let go), `stopped`
    /// (a stop came during it), `unwatched`.
    #[serde(default)]
    pub probation: Option<String>,
    #[serde(default)]
    pub probation_ms: Option<u64>,
    pub phases: Vec<Phase>,
    pub blackout_ms: f64,
    pub panes: usize,
    pub clients: usize,
    pub fds: usize,
    pub fd_batches: usize,
}

/// One side of an upgrade: the serving process, its version and binary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Endpoint {
    pub pid: u32,
    pub version: String,
    #[serde(default)]
    pub binary: Option<String>,
}

impl Endpoint {
    /// `ptyd 0.1.0 (/usr/bin/ptyd, pid 1234)`.
    pub fn describe(&self) -> String {
        match &self.binary {
            Some(b) => format!("ptyd {} ({b}, pid {})", self.version, self.pid),
            None => format!("ptyd {} (pid {})", self.version, self.pid),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub ms: f64,
}

/// `server.upgrade` with `mode: restore`: answered by the old process just
/// before it restarts as the new binary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestartReport {
    pub pid: u32,
    pub binary: String,
    /// The server before the restart.
    #[serde(default)]
    pub from: Option<Endpoint>,
}
