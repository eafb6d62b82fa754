//! Typed params of every method, and [`Request`], the one list of methods
//! that the server parses and the client builds. Each struct's doc names the
//! method and the reply it gets (typed in `replies` where a client reads
//! it). Unknown fields are refused so a typo is an error, not a silently
//! ignored option. Params serialize without the fields left out (`None`,
//! `false`), so a request a client builds is the minimal JSON the docs show.

use super::{ErrorCode, RpcError};
use crate::model::{Direction, RestorePolicy};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `hello`: `{"protocol": 1}` → `{"protocol", "server_version", "pid"}`, or
/// `version_mismatch` naming both versions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Params of methods that take none (`server.status`, `server.stop`,
/// `pane.list`).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

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

/// `server.upgrade` → the upgrade report (phases with durations, blackout,
/// panes, clients and fds moved, old and new pid, generation), answered by
/// the *new* server once it serves; or an error from the old one, which then
/// keeps serving as before. See docs/protocol.md.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Upgrade {
    /// The new binary (default: the path this server was started from).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// Deadline for everything up to the commit point (default 10000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// For tests only: `STEP:ACTION` fault injection (see `handoff::fault`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// `live` (default) or `restore`: save, stop and restart as the new
    /// binary, which restores the session from the snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// `pane.set_resume` → pane info. `resume: null` clears it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneSetResume {
    pub target: String,
    pub resume: Option<String>,
}

/// `workspace.create` → `{"id": "w2", "name": ...}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCreate {
    pub name: String,
}

/// `workspace.rename`, `tab.rename` → `{}`; `pane.rename` → pane info.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    pub target: String,
    pub name: String,
}

/// `workspace.remove`, `tab.remove` → `{}`. Refused while a pane in it is
/// running unless `force`, which kills them (SIGKILL); every pane in it is
/// removed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveTree {
    pub target: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
}

/// `tab.select` → the tab (as `tree` shows it, with its `workspace`):
/// makes it its workspace's active tab and that workspace the active one.
/// Exactly one of `target` (a tab id `t3`, a tab name, or a pane, whose
/// tab is meant), `index` (the tab's place in its workspace, from 0) and
/// `step` (tabs after the active one, negative for before, wrapping).
/// `workspace` (id or name) says whose tabs `index` and `step` count;
/// default: the active workspace.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TabSelect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// `tab.select_layout` → the tab: rebuilds its layout from its panes in
/// their order as one of tmux's layouts (`even-horizontal`,
/// `even-vertical`, `main-horizontal`, `main-vertical`, `tiled`), or
/// `next` / `previous` of that cycle (tmux's `next-layout`). `target`: a
/// tab or a pane of it (default: the active tab).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectLayout {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub layout: String,
}

/// `pane.swap` → `{"tabs": [...]}` (the one or two tabs changed): the two
/// panes exchange places, in one tab or across two.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneSwap {
    pub target: String,
    pub other: String,
}

/// `pane.resize_split` → the tab, with `moved` (cells the border moved;
/// fewer than asked, or 0, where a pane would fall below 2x1). Moves the
/// border of the split nearest above the pane (default: the active tab's
/// focus) that lies across `direction` (`left`, `right`, `up`, `down`)
/// by `cells` (default 1) that way. `cols`/`rows` is the tab's size that
/// cells count in (default: what its panes' sizes add up to).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeSplit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub direction: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cells: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
}

/// `pane.zoom` → the tab: the pane (default: the active tab's focus)
/// fills its tab, and is focused; `zoom: false` unzooms, absent toggles.
/// A tab of one pane stays unzoomed. With `client` (a number from
/// `client.list`), that client's view alone zooms (the pane defaults to
/// its focus) and the tab's default stays.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PaneZoom {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zoom: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<usize>,
}

/// `pane.break` → the new tab: the pane (default: the active tab's
/// focus) leaves its tab for a new tab after it, named `name` (default:
/// the pane's name or program), which becomes active.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PaneBreak {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
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

/// `events.subscribe` → `{"seq": last}`; then every event with a sequence
/// number above `since` (default: the current one) is pushed as an
/// `{"event": ...}` line.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Subscribe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

/// `attach` → `{"pane", "framing": "ptyd-frames-1"}`, then the connection
/// carries binary frames (see `frame`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attach {
    pub target: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Lines of the pane's history to print before the redraw, so they
    /// land in the client terminal's own scrollback (0 or absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<u32>,
    /// The client keeps its terminal on the alternate screen: send it no
    /// screen switches.
    #[serde(default, skip_serializing_if = "is_false")]
    pub alt_screen: bool,
    /// The pane the client runs in (its `PTYD_PANE_ID`, when its
    /// `PTYD_SOCKET` is this server's): attaching to it is refused
    /// (`self_attach`), it would feed its own output back to itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_pane: Option<String>,
    /// Detach every other client of the pane (`ptyd attach -d`, tmux's
    /// `attach -d`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub detach_others: bool,
    /// What the server does when this client cannot take output as fast
    /// as the pane prints (default `pause`: lossless).
    #[serde(default, skip_serializing_if = "WhenBehind::is_pause")]
    pub when_behind: WhenBehind,
    /// Show the target's whole tab (its panes side by side, a status line,
    /// keys under the prefix) instead of the one pane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ViewSpec>,
    /// The attaching client's environment: the server keeps its values of
    /// the config's `update_environment` names for panes created afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_env: Option<BTreeMap<String, String>>,
}

/// The tab view an attachment asks for: the target's tab, focused on the
/// target; or, for a client coming back (after a crash of the serving
/// process), the view its last `VIEW` frame told it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tab: Option<crate::model::TabId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<crate::model::PaneId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zoom: Option<bool>,
    /// The client's prefix key, as a byte (default 28, Ctrl-\).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<u8>,
    /// The client's scroll mode, as its last `VIEW` frame told it (only
    /// with `tab`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scroll: Option<ScrollSpec>,
}

/// A tab-view client's scroll mode over a pane of its tab, told in `VIEW`
/// and handed back in `attach`'s `view` (a live upgrade carries it too):
/// the lines it shows (`start..end`, numbered as `pane.history` numbers
/// them), the line on its top row and the cursor's, the selection, the
/// last search and one being typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrollSpec {
    pub pane: crate::model::PaneId,
    pub start: u64,
    pub end: u64,
    pub top: u64,
    pub cursor: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<SearchSpec>,
}

/// A scroll mode's selection: from `anchor` to `head` (`[line, column]`,
/// both included), whole lines when `lines`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionSpec {
    pub anchor: (u64, u16),
    pub head: (u64, u16),
    pub lines: bool,
}

/// A scroll mode's search: its text, and whether it goes towards older
/// lines (`?`) or newer ones (`/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSpec {
    pub text: String,
    pub back: bool,
}

/// What happens when an attached client falls behind its pane's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenBehind {
    /// The pane waits for the client (its program blocks, as on a terminal
    /// that stops reading): the client gets every byte.
    #[default]
    Pause,
    /// The pane never waits: output the client could not take is replaced
    /// by a redraw of the screen once it has caught up (tmux's way).
    Redraw,
}

impl WhenBehind {
    pub fn is_pause(&self) -> bool {
        *self == WhenBehind::Pause
    }
}

/// `client.list` → `{"clients": [...]}`: the attached clients (see
/// `replies::ClientInfo`), optionally only those of one pane.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClientList {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// `client.detach` → `{"detached": [client numbers]}`. Exactly one of
/// `target` (the clients of that pane), `client` (one client by number)
/// and `all` (every attached client); `others` turns `target` into "all
/// but its most recently active client" and `client` into "every other
/// client of its pane".
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClientDetach {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<usize>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub all: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub others: bool,
}

/// `environment` → `{"environment": {"NAME": "value", "GONE": null},
/// "hidden": ["NAME"]}`: the variables kept for a scope, after applying
/// `set` (a value, or `null`: to be removed from new processes'
/// environment, tmux's `set-environment -r`; with `hidden`, those are
/// marked hidden, tmux's `-h`, else unmarked) and `unset` (forgotten).
/// Kept in the serving
/// process's memory only, never written anywhere: the tmux front's
/// `set-environment` / `show-environment`.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// `global`, or a workspace id (`w3`).
    pub scope: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, Option<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub hidden: bool,
}

/// Every method with its params: what a client sends (serialized as
/// `{"method": ..., "params": ...}`, the request id added by the client) and
/// what the server dispatches on after [`Request::parse`].
///
/// To add a method: a params struct above (its doc names the reply), a
/// variant here and its name in [`Request::parse`] and [`Request::method`],
/// a match arm in `server::requests::dispatch`, a section in
/// docs/protocol.md, and a reply struct in `replies` if a client reads it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "method", content = "params")]
pub enum Request {
    #[serde(rename = "hello")]
    Hello(Hello),
    #[serde(rename = "server.status")]
    ServerStatus(NoParams),
    #[serde(rename = "server.upgrade")]
    ServerUpgrade(Upgrade),
    #[serde(rename = "server.save")]
    ServerSave(NoParams),
    /// Answered with the reload's report (docs/protocol.md).
    #[serde(rename = "server.config.reload")]
    ServerConfigReload(NoParams),
    #[serde(rename = "server.stop")]
    ServerStop(NoParams),
    #[serde(rename = "tree")]
    Tree(NoParams),
    #[serde(rename = "workspace.create")]
    WorkspaceCreate(WorkspaceCreate),
    #[serde(rename = "workspace.rename")]
    WorkspaceRename(Rename),
    #[serde(rename = "workspace.remove")]
    WorkspaceRemove(RemoveTree),
    #[serde(rename = "tab.rename")]
    TabRename(Rename),
    #[serde(rename = "tab.remove")]
    TabRemove(RemoveTree),
    #[serde(rename = "tab.select")]
    TabSelect(TabSelect),
    #[serde(rename = "tab.select_layout")]
    TabSelectLayout(SelectLayout),
    #[serde(rename = "pane.swap")]
    PaneSwap(PaneSwap),
    #[serde(rename = "pane.resize_split")]
    PaneResizeSplit(ResizeSplit),
    #[serde(rename = "pane.zoom")]
    PaneZoom(PaneZoom),
    #[serde(rename = "pane.break")]
    PaneBreak(PaneBreak),
    #[serde(rename = "pane.create")]
    PaneCreate(PaneCreate),
    #[serde(rename = "pane.list")]
    PaneList(NoParams),
    #[serde(rename = "pane.focus")]
    PaneFocus(PaneFocus),
    #[serde(rename = "pane.respawn")]
    PaneRespawn(Target),
    #[serde(rename = "pane.set_resume")]
    PaneSetResume(PaneSetResume),
    #[serde(rename = "pane.rename")]
    PaneRename(Rename),
    #[serde(rename = "pane.input")]
    PaneInput(PaneInput),
    #[serde(rename = "pane.resize")]
    PaneResize(PaneResize),
    #[serde(rename = "pane.capture")]
    PaneCapture(PaneCapture),
    #[serde(rename = "pane.history")]
    PaneHistory(PaneHistory),
    #[serde(rename = "pane.kill")]
    PaneKill(PaneKill),
    #[serde(rename = "pane.remove")]
    PaneRemove(PaneRemove),
    #[serde(rename = "pane.wait")]
    PaneWait(PaneWait),
    #[serde(rename = "events.subscribe")]
    EventsSubscribe(Subscribe),
    #[serde(rename = "attach")]
    Attach(Attach),
    #[serde(rename = "client.list")]
    ClientList(ClientList),
    #[serde(rename = "client.detach")]
    ClientDetach(ClientDetach),
    #[serde(rename = "environment")]
    Environment(Environment),
}

impl Request {
    /// The second stage of parsing a request: its params into the struct of
    /// its method. `null` params count as `{}`. Errors are `unknown_method`
    /// or `invalid_params` naming the method and the field.
    pub fn parse(method: &str, params: Value) -> Result<Request, RpcError> {
        use Request as R;
        let p = params;
        Ok(match method {
            "hello" => R::Hello(parse_params(method, p)?),
            "server.status" => R::ServerStatus(parse_params(method, p)?),
            "server.upgrade" => R::ServerUpgrade(parse_params(method, p)?),
            "server.save" => R::ServerSave(parse_params(method, p)?),
            "server.config.reload" => R::ServerConfigReload(parse_params(method, p)?),
            "server.stop" => R::ServerStop(parse_params(method, p)?),
            "tree" => R::Tree(parse_params(method, p)?),
            "workspace.create" => R::WorkspaceCreate(parse_params(method, p)?),
            "workspace.rename" => R::WorkspaceRename(parse_params(method, p)?),
            "workspace.remove" => R::WorkspaceRemove(parse_params(method, p)?),
            "tab.rename" => R::TabRename(parse_params(method, p)?),
            "tab.remove" => R::TabRemove(parse_params(method, p)?),
            "tab.select" => R::TabSelect(parse_params(method, p)?),
            "tab.select_layout" => R::TabSelectLayout(parse_params(method, p)?),
            "pane.swap" => R::PaneSwap(parse_params(method, p)?),
            "pane.resize_split" => R::PaneResizeSplit(parse_params(method, p)?),
            "pane.zoom" => R::PaneZoom(parse_params(method, p)?),
            "pane.break" => R::PaneBreak(parse_params(method, p)?),
            "pane.create" => R::PaneCreate(parse_params(method, p)?),
            "pane.list" => R::PaneList(parse_params(method, p)?),
            "pane.focus" => R::PaneFocus(parse_params(method, p)?),
            "pane.respawn" => R::PaneRespawn(parse_params(method, p)?),
            "pane.set_resume" => R::PaneSetResume(parse_params(method, p)?),
            "pane.rename" => R::PaneRename(parse_params(method, p)?),
            "pane.input" => R::PaneInput(parse_params(method, p)?),
            "pane.resize" => R::PaneResize(parse_params(method, p)?),
            "pane.capture" => R::PaneCapture(parse_params(method, p)?),
            "pane.history" => R::PaneHistory(parse_params(method, p)?),
            "pane.kill" => R::PaneKill(parse_params(method, p)?),
            "pane.remove" => R::PaneRemove(parse_params(method, p)?),
            "pane.wait" => R::PaneWait(parse_params(method, p)?),
            "events.subscribe" => R::EventsSubscribe(parse_params(method, p)?),
            "attach" => R::Attach(parse_params(method, p)?),
            "client.list" => R::ClientList(parse_params(method, p)?),
            "client.detach" => R::ClientDetach(parse_params(method, p)?),
            "environment" => R::Environment(parse_params(method, p)?),
            other => {
                return Err(RpcError::new(
                    ErrorCode::UnknownMethod,
                    format!(
                        "unknown method {other:?}; known methods are listed in docs/protocol.md"
                    ),
                ));
            }
        })
    }

    /// The method's name on the wire.
    pub fn method(&self) -> &'static str {
        match self {
            Request::Hello(_) => "hello",
            Request::ServerStatus(_) => "server.status",
            Request::ServerUpgrade(_) => "server.upgrade",
            Request::ServerSave(_) => "server.save",
            Request::ServerConfigReload(_) => "server.config.reload",
            Request::ServerStop(_) => "server.stop",
            Request::Tree(_) => "tree",
            Request::WorkspaceCreate(_) => "workspace.create",
            Request::WorkspaceRename(_) => "workspace.rename",
            Request::WorkspaceRemove(_) => "workspace.remove",
            Request::TabRename(_) => "tab.rename",
            Request::TabRemove(_) => "tab.remove",
            Request::TabSelect(_) => "tab.select",
            Request::TabSelectLayout(_) => "tab.select_layout",
            Request::PaneSwap(_) => "pane.swap",
            Request::PaneResizeSplit(_) => "pane.resize_split",
            Request::PaneZoom(_) => "pane.zoom",
            Request::PaneBreak(_) => "pane.break",
            Request::PaneCreate(_) => "pane.create",
            Request::PaneList(_) => "pane.list",
            Request::PaneFocus(_) => "pane.focus",
            Request::PaneRespawn(_) => "pane.respawn",
            Request::PaneSetResume(_) => "pane.set_resume",
            Request::PaneRename(_) => "pane.rename",
            Request::PaneInput(_) => "pane.input",
            Request::PaneResize(_) => "pane.resize",
            Request::PaneCapture(_) => "pane.capture",
            Request::PaneHistory(_) => "pane.history",
            Request::PaneKill(_) => "pane.kill",
            Request::PaneRemove(_) => "pane.remove",
            Request::PaneWait(_) => "pane.wait",
            Request::EventsSubscribe(_) => "events.subscribe",
            Request::Attach(_) => "attach",
            Request::ClientList(_) => "client.list",
            Request::ClientDetach(_) => "client.detach",
            Request::Environment(_) => "environment",
        }
    }
}

fn parse_params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_json::from_value(params).map_err(|e| {
        RpcError::new(
            ErrorCode::InvalidParams,
            format!("bad params for {method}: {e}; see docs/protocol.md"),
        )
    })
}

fn is_false(b: &bool) -> bool {
    !*b
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(t: &str) -> Target {
        Target { target: t.into() }
    }

    /// One request of every method: the serialized `method` is the name
    /// `method()` gives, and `parse` reads the params back to the same JSON.
    #[test]
    fn every_request_round_trips_through_its_method_name() {
        let all = vec![
            Request::Hello(Hello {
                protocol: 1,
                client: Some("t".into()),
            }),
            Request::ServerStatus(NoParams {}),
            Request::ServerUpgrade(Upgrade::default()),
            Request::ServerSave(NoParams {}),
            Request::ServerConfigReload(NoParams {}),
            Request::ServerStop(NoParams {}),
            Request::Tree(NoParams {}),
            Request::WorkspaceCreate(WorkspaceCreate { name: "w".into() }),
            Request::WorkspaceRename(Rename {
                target: "w1".into(),
                name: "x".into(),
            }),
            Request::WorkspaceRemove(RemoveTree {
                target: "w1".into(),
                force: true,
            }),
            Request::PaneRename(Rename {
                target: "p1".into(),
                name: "build".into(),
            }),
            Request::TabRename(Rename {
                target: "t1".into(),
                name: "x".into(),
            }),
            Request::TabRemove(RemoveTree {
                target: "t1".into(),
                force: false,
            }),
            Request::TabSelect(TabSelect {
                step: Some(-1),
                workspace: Some("w1".into()),
                ..TabSelect::default()
            }),
            Request::TabSelectLayout(SelectLayout {
                target: None,
                layout: "tiled".into(),
            }),
            Request::PaneSwap(PaneSwap {
                target: "p1".into(),
                other: "p2".into(),
            }),
            Request::PaneResizeSplit(ResizeSplit {
                target: Some("p1".into()),
                direction: "left".into(),
                cells: Some(5),
                cols: Some(120),
                rows: None,
            }),
            Request::PaneZoom(PaneZoom {
                target: None,
                zoom: Some(false),
                client: Some(7),
            }),
            Request::PaneBreak(PaneBreak {
                target: Some("p1".into()),
                name: Some("n".into()),
            }),
            Request::PaneCreate(PaneCreate {
                argv: Some(vec!["sh".into()]),
                direction: Some(Direction::Vertical),
                restore: Some(RestorePolicy::Rerun),
                ..PaneCreate::default()
            }),
            Request::PaneList(NoParams {}),
            Request::PaneFocus(PaneFocus {
                target: "p1".into(),
                client: Some(3),
            }),
            Request::PaneRespawn(target("p1")),
            Request::PaneSetResume(PaneSetResume {
                target: "p1".into(),
                resume: None,
            }),
            Request::PaneInput(PaneInput {
                target: "p1".into(),
                data: Some("x".into()),
                keys: vec!["C-c".into()],
                paste: false,
                request_id: None,
            }),
            Request::PaneResize(PaneResize {
                target: "p1".into(),
                cols: 80,
                rows: 24,
            }),
            Request::PaneCapture(PaneCapture {
                target: "p1".into(),
                ansi: true,
                start: Some(-5),
                end: None,
                join: false,
                origin: None,
            }),
            Request::PaneHistory(PaneHistory {
                target: "p1".into(),
                start: Some(3),
                count: 100,
                ansi: true,
            }),
            Request::PaneKill(PaneKill {
                target: "p1".into(),
                signal: Some("KILL".into()),
                grace_ms: None,
            }),
            Request::PaneRemove(PaneRemove {
                target: "p1".into(),
                force: false,
            }),
            Request::PaneWait(PaneWait {
                exit: true,
                ..PaneWait::new("p1".into())
            }),
            Request::EventsSubscribe(Subscribe { since: Some(3) }),
            Request::Attach(Attach {
                target: "p1".into(),
                read_only: true,
                cols: None,
                rows: None,
                history: Some(100),
                alt_screen: true,
                from_pane: Some("p2".into()),
                detach_others: true,
                when_behind: WhenBehind::Redraw,
                view: Some(ViewSpec {
                    tab: Some(crate::model::TabId::new(2)),
                    focus: Some(crate::model::PaneId::new(3)),
                    zoom: Some(true),
                    prefix: Some(1),
                    scroll: Some(ScrollSpec {
                        pane: crate::model::PaneId::new(3),
                        start: 4,
                        end: 240,
                        top: 100,
                        cursor: 110,
                        selection: Some(SelectionSpec {
                            anchor: (105, 2),
                            head: (110, 7),
                            lines: false,
                        }),
                        search: Some(SearchSpec {
                            text: "line-4".into(),
                            back: true,
                        }),
                        prompt: None,
                    }),
                }),
                client_env: None,
            }),
            Request::ClientList(ClientList {
                target: Some("p1".into()),
            }),
            Request::ClientDetach(ClientDetach {
                target: Some("p1".into()),
                others: true,
                ..ClientDetach::default()
            }),
            Request::Environment(Environment {
                scope: "w2".into(),
                set: [
                    ("A".to_string(), Some("1".to_string())),
                    ("B".to_string(), None),
                ]
                .into_iter()
                .collect(),
                unset: vec!["C".into()],
                hidden: true,
            }),
        ];
        for request in all {
            let wire = serde_json::to_value(&request).unwrap();
            assert_eq!(wire["method"], request.method(), "{wire}");
            let again = Request::parse(request.method(), wire["params"].clone())
                .unwrap_or_else(|e| panic!("{wire}: {e}"));
            assert_eq!(serde_json::to_value(&again).unwrap(), wire);
        }
    }

    #[test]
    fn params_leave_out_what_is_unset() {
        let wire = serde_json::to_value(Request::PaneWait(PaneWait {
            text: Some("$ ".into()),
            ..PaneWait::new("p1".into())
        }))
        .unwrap();
        assert_eq!(
            wire,
            json!({ "method": "pane.wait", "params": { "target": "p1", "text": "$ " } })
        );
        let wire = serde_json::to_value(Request::PaneSetResume(PaneSetResume {
            target: "p1".into(),
            resume: None,
        }))
        .unwrap();
        assert_eq!(wire["params"], json!({ "target": "p1", "resume": null }));
    }

    #[test]
    fn parse_names_unknown_methods_and_bad_params() {
        let err = Request::parse("pane.nope", Value::Null).unwrap_err();
        assert_eq!(err.0.code, ErrorCode::UnknownMethod);
        let err = Request::parse("pane.kill", json!({ "target": "p1", "grace": 5 })).unwrap_err();
        assert_eq!(err.0.code, ErrorCode::InvalidParams);
        assert!(err.0.message.contains("bad params for pane.kill"), "{err}");
        assert!(matches!(
            Request::parse("server.status", Value::Null),
            Ok(Request::ServerStatus(_))
        ));
    }
}
