//! Params of the `pane.*` methods that act on one pane: create, input,
//! capture, history, kill, wait and the rest.

use super::{WhenBehind, is_false};
use crate::model::{Direction, RestorePolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `pane.create` → the new pane's info (as in `pane.list`).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PaneCreate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The creating client's environment (`environment::of_this_process`):
    /// the pane's process starts with it instead of the server's. Kept in
    /// memory only, never in a snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_env: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Kill the pane after this many ms of wall-clock time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Kill the pane after this many ms without output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// Switch this connection to attached mode on the new pane right after
    /// the response, before any output is read: nothing is missed and no
    /// redraw is needed. Used by `ptyd new` and `ptyd run`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub attach: bool,
    /// With `attach`: never type into or resize the pane.
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
    /// With `attach`: the client keeps its terminal on the alternate
    /// screen (as `attach`'s `alt_screen`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub alt_screen: bool,
    /// With `attach`: as `attach`'s `when_behind`.
    #[serde(default, skip_serializing_if = "WhenBehind::is_pause")]
    pub when_behind: WhenBehind,
    /// What a reboot does with this pane when it has no `resume`
    /// (default `hold` for commands; shells always get a fresh shell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestorePolicy>,
    /// A shell command that resumes this pane's work after a reboot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// Open the pane in a new tab of this workspace (id `w2` or name);
    /// default: the `main` workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Name of the new tab (default: the pane's name or program).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tab_name: Option<String>,
    /// Instead of a new tab, split this pane (a target) and put the new
    /// pane beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Share of the split given to the existing pane, in (0, 1); default 0.5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f32>,
    /// `false`: start an interactive bash, zsh or fish without ptyd's shell
    /// integration (default: on, unless the config turns it off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell_integration: Option<bool>,
}

/// `pane.set_resume` → pane info. `resume: null` clears it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneSetResume {
    pub target: String,
    pub resume: Option<String>,
}

/// Params naming one pane: `pane.capture` etc. extend this with more fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub target: String,
}

/// `pane.focus` → `{}`: the pane becomes the focus of the tab-view
/// clients of its workspace and its tab's default; with `client` (a number
/// from `client.list`), of that client alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneFocus {
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<usize>,
}

/// `pane.remove` → `{}`. A running pane is refused (`pane_running`) unless
/// `force`, which SIGKILLs its session first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneRemove {
    pub target: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
}

/// `pane.input` → `{"written": true, "duplicate", "prompts_seen",
/// "commands_finished"}` once the bytes are in the PTY. A repeated
/// `request_id` is acknowledged again (`"duplicate": true`) without writing.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneInput {
    pub target: String,
    /// Text written as it is. At least one of `data` and `keys` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Key names (tmux's: `C-c`, `Enter`, `Up`, `F5`, `M-x`, ...), encoded
    /// for the pane's current modes and written after `data`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// Wrap `data` in bracketed-paste markers if the program enabled them
    /// (mode 2004); otherwise it is written as it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paste: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `pane.resize` → the pane's info. Sizes are clamped to 2..=1000 columns
/// and 1..=500 rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneResize {
    pub target: String,
    pub cols: u32,
    pub rows: u32,
}

/// `pane.capture` → `{"pane", "text", "lines", "wrapped", "first_line",
/// "last_line", "screen_start", "cols", "rows", "cursor", "modes", "title",
/// "cwd", "scrollback_lines"}`. Lines are numbered
/// as in `tmux capture-pane -S/-E`: 0 is the top visible row, negative lines
/// are scrollback (-1 the newest); ranges are clamped to what exists.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneCapture {
    pub target: String,
    /// Keep SGR escape sequences in the text.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ansi: bool,
    /// First line (default 0, the top of the screen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    /// Last line, inclusive (default: the last visible row).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
    /// Join lines continued by autowrap (`tmux capture-pane -J`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub join: bool,
    /// Number `start` and `end` from this line instead of the screen's top
    /// row now: a `screen_start` of an earlier reply, so the parts of a
    /// capture too long for one reply line up while output arrives.
    /// With `join`, a part never ends inside a line autowrap continued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<u64>,
}

/// `pane.history` → `term::HistoryLines` plus `pane`, `end`, `cols`,
/// `rows`: a range of the pane's lines (history, then the screen's rows)
/// numbered from the first line the pane ever pushed into history, so a
/// client paging back through history (the attach client's scroll mode)
/// asks for what it shows, a page at a time, and a line keeps its number
/// while output arrives.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneHistory {
    pub target: String,
    /// First line; absent: the screen's first row. Clamped to what exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// Lines wanted, at most [`MAX_HISTORY_COUNT`].
    pub count: u32,
    /// Keep SGR escape sequences in the text.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ansi: bool,
}

/// Most lines one `pane.history` returns.
pub const MAX_HISTORY_COUNT: u32 = 1000;

/// `pane.kill` → `{}` at once; the exit arrives as a `pane.exited` event.
/// Sends `signal` to every process of the pane's session, then SIGKILL
/// after `grace_ms` (default 3000); without `signal`, SIGHUP, SIGTERM
/// halfway through the grace period, then SIGKILL. Killing an exited pane
/// is a no-op.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneKill {
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
}

/// `pane.wait` → `{"reason": "exited" | "text" | "idle" | "prompt" |
/// "command_finished", ...}` when a condition holds, or the error `timeout`.
/// Exactly one of `exit`, `text`, `idle_ms`, `prompt`, `command_finished`
/// must be given. The last two wait for an OSC 133 mark (shell
/// integration) beyond `after`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneWait {
    pub target: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub exit: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub prompt: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub command_finished: bool,
    /// With `prompt` / `command_finished`: wait for a mark beyond this
    /// count (`prompts_seen` / `commands_finished` from pane info or a
    /// `pane.input` ack); default: the count when the wait starts. Passing
    /// the ack's count closes the race between typing and waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Text to find in the pane's output. By default only output that
    /// arrives after the wait starts (or after `after_output`) counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `text` is a regular expression (Rust `regex` syntax), matched within
    /// a line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
    /// Also match what the screen shows when the wait starts (and lines
    /// that scroll off while it waits).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_screen: bool,
    /// With `text`: match only output after this output byte count
    /// (`output_bytes` from a `pane.input` ack); default: the count when
    /// the wait starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_output: Option<u64>,
    /// With `text`: ignore output up to and including this many line feeds
    /// (the shell's echo of the lines just typed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_lines: Option<u64>,
    /// With `text`: match only output after the next command-start mark
    /// (OSC 133;C) from the start point, i.e. the output of the command
    /// just typed, never its echo. On a pane that has no shell integration
    /// (no mark seen, none injected) `skip_lines` applies instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_command_start: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl PaneWait {
    /// A wait on `target` with no condition yet: set exactly one.
    pub fn new(target: String) -> PaneWait {
        PaneWait {
            target,
            exit: false,
            prompt: false,
            command_finished: false,
            after: None,
            text: None,
            regex: false,
            include_screen: false,
            after_output: None,
            skip_lines: None,
            after_command_start: false,
            idle_ms: None,
            timeout_ms: None,
        }
    }
}
