//! Typed params of every method. Each struct's doc names the method and the
//! reply it gets. Unknown fields are refused so a typo is an error, not a
//! silently ignored option.

pub use crate::persist::snapshot::RestorePolicy;
pub use crate::workspace::layout::Direction;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `hello`: `{"protocol": 1}` → `{"protocol", "server_version", "pid"}`, or
/// `version_mismatch` naming both versions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: u32,
    #[serde(default)]
    pub client: Option<String>,
}

/// Params of methods that take none (`server.status`, `server.stop`,
/// `pane.list`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// The program a pane runs. `argv` is exec'd exactly as given; `shell` is one
/// string run by `$SHELL -c` (else `/bin/sh -c`). Never both; neither means
/// the user's login shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandSpec {
    Argv(Vec<String>),
    Shell(String),
    LoginShell,
}

/// `pane.create` → the new pane's info (as in `pane.list`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PaneCreate {
    pub name: Option<String>,
    pub argv: Option<Vec<String>>,
    pub shell: Option<String>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
    /// Kill the pane after this many ms of wall-clock time.
    pub timeout_ms: Option<u64>,
    /// Kill the pane after this many ms without output.
    pub idle_timeout_ms: Option<u64>,
    /// Switch this connection to attached mode on the new pane right after
    /// the response, before any output is read: nothing is missed and no
    /// redraw is needed. Used by `ptyd new` and `ptyd run`.
    #[serde(default)]
    pub attach: bool,
    /// With `attach`: never type into or resize the pane.
    #[serde(default)]
    pub read_only: bool,
    /// What a reboot does with this pane when it has no `resume`
    /// (default `hold` for commands; shells always get a fresh shell).
    pub restore: Option<RestorePolicy>,
    /// A shell command that resumes this pane's work after a reboot.
    pub resume: Option<String>,
    /// Open the pane in a new tab of this workspace (id `w2` or name);
    /// default: the `main` workspace.
    pub workspace: Option<String>,
    /// Name of the new tab (default: the pane's name or program).
    pub tab_name: Option<String>,
    /// Instead of a new tab, split this pane (a target) and put the new
    /// pane beside it.
    pub split: Option<String>,
    pub direction: Option<Direction>,
    /// Share of the split given to the existing pane, in (0, 1); default 0.5.
    pub ratio: Option<f32>,
    /// `false`: start an interactive bash, zsh or fish without ptyd's shell
    /// integration (default: on, unless the config turns it off).
    pub shell_integration: Option<bool>,
}

/// `server.upgrade` → the upgrade report (phases with durations, blackout,
/// panes, clients and fds moved, old and new pid, generation), answered by
/// the *new* server once it serves; or an error from the old one, which then
/// keeps serving as before. See docs/protocol.md.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Upgrade {
    /// The new binary (default: the path this server was started from).
    pub binary: Option<String>,
    /// Deadline for everything up to the commit point (default 10000).
    pub timeout_ms: Option<u64>,
    /// For tests only: `STEP:ACTION` fault injection (see `handoff::fault`).
    pub fault: Option<String>,
    /// `live` (default) or `restore`: save, stop and restart as the new
    /// binary, which restores the session from the snapshot.
    pub mode: Option<String>,
}

/// `pane.set_resume` → pane info. `resume: null` clears it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneSetResume {
    pub target: String,
    pub resume: Option<String>,
}

/// `workspace.create` → `{"id": "w2", "name": ...}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCreate {
    pub name: String,
}

/// `workspace.rename`, `tab.rename` → `{}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    pub target: String,
    pub name: String,
}

/// `workspace.remove`, `tab.remove` → `{}`. Refused while a pane in it is
/// running unless `force`, which kills them (SIGKILL); every pane in it is
/// removed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveTree {
    pub target: String,
    #[serde(default)]
    pub force: bool,
}

/// Params naming one pane: `pane.capture` etc. extend this with more fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub target: String,
}

/// `pane.remove` → `{}`. A running pane is refused (`pane_running`) unless
/// `force`, which SIGKILLs its session first.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneRemove {
    pub target: String,
    #[serde(default)]
    pub force: bool,
}

/// `pane.input` → `{"written": N}` once the bytes are in the PTY. A repeated
/// `request_id` is acknowledged again (`"duplicate": true`) without writing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneInput {
    pub target: String,
    /// Text written as it is. At least one of `data` and `keys` is given.
    pub data: Option<String>,
    /// Key names (tmux's: `C-c`, `Enter`, `Up`, `F5`, `M-x`, ...), encoded
    /// for the pane's current modes and written after `data`.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Wrap `data` in bracketed-paste markers if the program enabled them
    /// (mode 2004); otherwise it is written as it is.
    #[serde(default)]
    pub paste: bool,
    pub request_id: Option<String>,
}

/// `pane.resize` → the pane's info. Sizes are clamped to 2..=1000 columns
/// and 1..=500 rows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneResize {
    pub target: String,
    pub cols: u32,
    pub rows: u32,
}

/// `pane.capture` → `{"pane", "text", "lines", "wrapped", "first_line",
/// "cols", "rows", "cursor", "modes", "title", "cwd", "scrollback_lines"}`. Lines are numbered
/// as in `tmux capture-pane -S/-E`: 0 is the top visible row, negative lines
/// are scrollback (-1 the newest); ranges are clamped to what exists.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneCapture {
    pub target: String,
    /// Keep SGR escape sequences in the text.
    #[serde(default)]
    pub ansi: bool,
    /// First line (default 0, the top of the screen).
    pub start: Option<i64>,
    /// Last line, inclusive (default: the last visible row).
    pub end: Option<i64>,
    /// Join lines continued by autowrap (`tmux capture-pane -J`).
    #[serde(default)]
    pub join: bool,
}

/// `pane.kill` → `{}` at once; the exit arrives as a `pane.exited` event.
/// Sends `signal` (default SIGTERM) to every process of the pane's session,
/// then SIGKILL after `grace_ms` (default 3000). Killing an exited pane is a
/// no-op.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneKill {
    pub target: String,
    pub signal: Option<String>,
    pub grace_ms: Option<u64>,
}

/// `pane.wait` → `{"reason": "exited" | "text" | "idle" | "prompt" |
/// "command_finished", ...}` when a condition holds, or the error `timeout`.
/// Exactly one of `exit`, `text`, `idle_ms`, `prompt`, `command_finished`
/// must be given. The last two wait for an OSC 133 mark (shell
/// integration) beyond `after`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneWait {
    pub target: String,
    #[serde(default)]
    pub exit: bool,
    #[serde(default)]
    pub prompt: bool,
    #[serde(default)]
    pub command_finished: bool,
    /// With `prompt` / `command_finished`: wait for a mark beyond this
    /// count (`prompts_seen` / `commands_finished` from pane info or a
    /// `pane.input` ack); default: the count when the wait starts. Passing
    /// the ack's count closes the race between typing and waiting.
    pub after: Option<u64>,
    /// Text to find in the pane's output. By default only output that
    /// arrives after the wait starts (or after `after_output`) counts.
    pub text: Option<String>,
    /// `text` is a regular expression (Rust `regex` syntax), matched within
    /// a line.
    #[serde(default)]
    pub regex: bool,
    /// Also match what the screen shows when the wait starts (and lines
    /// that scroll off while it waits).
    #[serde(default)]
    pub include_screen: bool,
    /// With `text`: match only output after this output byte count
    /// (`output_bytes` from a `pane.input` ack); default: the count when
    /// the wait starts.
    pub after_output: Option<u64>,
    /// With `text`: ignore output up to and including this many line feeds
    /// (the shell's echo of the lines just typed).
    pub skip_lines: Option<u64>,
    /// With `text`: match only output after the next command-start mark
    /// (OSC 133;C) from the start point, i.e. the output of the command
    /// just typed, never its echo. On a pane that has no shell integration
    /// (no mark seen, none injected) `skip_lines` applies instead.
    #[serde(default)]
    pub after_command_start: bool,
    pub idle_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
}

/// `events.subscribe` → `{"seq": last}`; then every event with a sequence
/// number above `since` (default: the current one) is pushed as an
/// `{"event": ...}` line.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Subscribe {
    pub since: Option<u64>,
}

/// `attach` → `{"pane", "framing": "ptyd-frames-1"}`, then the connection
/// carries binary frames (see `frame`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attach {
    pub target: String,
    #[serde(default)]
    pub read_only: bool,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
}

/// Exit status of a pane's process, kept until the pane is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// The shell's convention: the code, or 128 + signal.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}
