//! Params of the methods that change the workspace tree: workspaces, tabs,
//! layouts, and a pane's place in them.

use super::is_false;
use serde::{Deserialize, Serialize};

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
