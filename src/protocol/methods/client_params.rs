//! Params of the methods a client uses to follow the server: events,
//! attach (with the view and scroll mode it hands back), the client list.

use super::is_false;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
