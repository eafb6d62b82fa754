//! Events pushed to subscribers (`events.subscribe`) as `{"event": {...}}`
//! lines: one enum, serialized with its `type` beside its members, which the
//! server emits and a client can read back. docs/protocol.md lists them.
//!
//! To add an event: a variant here (its `rename` is the wire `type`), a row
//! in docs/protocol.md's table, and `Server::emit(Event::...)` where it
//! happens. Adding one is compatible; renaming or changing members is not
//! (bump `PROTOCOL_VERSION`).

use crate::model::{PaneId, TabId, WorkspaceId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// `info` as `pane.list` reports the pane.
    #[serde(rename = "pane.created")]
    PaneCreated { pane: PaneId, info: Value },
    /// `exit`: `{"reason", "code" | "signal", "shell_code"}`.
    #[serde(rename = "pane.exited")]
    PaneExited { pane: PaneId, exit: Value },
    #[serde(rename = "pane.resized")]
    PaneResized { pane: PaneId, cols: u16, rows: u16 },
    #[serde(rename = "pane.removed")]
    PaneRemoved { pane: PaneId },
    #[serde(rename = "pane.respawned")]
    PaneRespawned { pane: PaneId, info: Value },
    #[serde(rename = "pane.renamed")]
    PaneRenamed { pane: PaneId, name: String },
    /// OSC 0/2.
    #[serde(rename = "pane.title")]
    PaneTitle { pane: PaneId, title: String },
    /// At most one per read batch.
    #[serde(rename = "pane.bell")]
    PaneBell { pane: PaneId },
    /// OSC 7.
    #[serde(rename = "pane.cwd")]
    PaneCwd { pane: PaneId, cwd: String },
    /// OSC 133;A.
    #[serde(rename = "pane.prompt")]
    PanePrompt { pane: PaneId },
    /// OSC 133;C.
    #[serde(rename = "pane.command_started")]
    PaneCommandStarted { pane: PaneId },
    /// OSC 133;D, with the exit code if the shell gave one.
    #[serde(rename = "pane.command_finished")]
    PaneCommandFinished { pane: PaneId, exit: Option<i32> },
    #[serde(rename = "workspace.created")]
    WorkspaceCreated {
        workspace: WorkspaceId,
        name: String,
    },
    #[serde(rename = "workspace.removed")]
    WorkspaceRemoved { workspace: WorkspaceId },
    #[serde(rename = "workspace.renamed")]
    WorkspaceRenamed {
        workspace: WorkspaceId,
        name: String,
    },
    /// The active workspace changed (`null`: none is left).
    #[serde(rename = "workspace.selected")]
    WorkspaceSelected { workspace: Option<WorkspaceId> },
    /// A tab opened, with what `tab.layout` reports of it.
    #[serde(rename = "tab.created")]
    TabCreated {
        tab: TabId,
        workspace: WorkspaceId,
        name: String,
        layout: Value,
        focus: PaneId,
        zoom: Option<PaneId>,
    },
    #[serde(rename = "tab.renamed")]
    TabRenamed { tab: TabId, name: String },
    /// A tab's layout, focus or zoom changed (a split, a pane removed,
    /// moved or swapped, a layout selected, a split resized, a zoom, a
    /// focus): the whole of each as `tree` reports them.
    #[serde(rename = "tab.layout")]
    TabLayout {
        tab: TabId,
        layout: Value,
        focus: PaneId,
        zoom: Option<PaneId>,
    },
    /// A tab closed (its last pane went, or it was removed).
    #[serde(rename = "tab.removed")]
    TabRemoved { tab: TabId, workspace: WorkspaceId },
    /// A workspace's active tab changed (`null`: it has no tab left).
    #[serde(rename = "tab.selected")]
    TabSelected {
        workspace: WorkspaceId,
        tab: Option<TabId>,
    },
    /// The start-up restore's report (as `server.status` shows it under
    /// `persistence.restore`): `found`, `file`, `unix_ms`, `panes`,
    /// `outcomes` (per pane, the first 100: `pane`, `name`, `policy`,
    /// `outcome`, and `held_reason` when held), `outcome_counts`,
    /// `repairs`, `took_ms`.
    #[serde(rename = "server.restored")]
    ServerRestored {
        #[serde(flatten)]
        report: Map<String, Value>,
    },
    #[serde(rename = "server.snapshot_set_aside")]
    ServerSnapshotSetAside { reason: String, backup: String },
    #[serde(rename = "server.save_failed")]
    ServerSaveFailed { error: String },
    /// The upgrade report, as `server.upgrade` answers it.
    #[serde(rename = "server.upgraded")]
    ServerUpgraded {
        #[serde(flatten)]
        report: Map<String, Value>,
    },
    #[serde(rename = "server.upgrade_failed")]
    ServerUpgradeFailed { reason: String, phase: String },
    /// `ptyd config reload`: what of the file was ignored, and the keys
    /// whose values changed.
    #[serde(rename = "server.config_reloaded")]
    ServerConfigReloaded {
        problems: Vec<String>,
        changed: Vec<String>,
    },
    /// The server is shutting down (`server.stop`, SIGTERM, SIGINT).
    #[serde(rename = "server.stopping")]
    ServerStopping {},
    /// `client` is the connection's number in this server; `pid` the
    /// client's process if the OS reports it.
    #[serde(rename = "client.attached")]
    ClientAttached {
        pane: PaneId,
        client: usize,
        pid: Option<i32>,
        read_only: bool,
    },
    #[serde(rename = "client.detached")]
    ClientDetached {
        pane: PaneId,
        client: usize,
        reason: String,
    },
    /// Events were lost: `from..=to` dropped from the ring before this
    /// subscriber asked for them, or (without a range) the subscriber read
    /// too slowly and is disconnected.
    #[serde(rename = "gap")]
    Gap {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<u64>,
        message: String,
    },
}

/// One event as a subscriber receives it: its sequence number (none on a
/// `gap`) and the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logged {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(flatten)]
    pub event: Event,
}

impl Event {
    /// The event as a JSON object with its `type`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_keep_their_wire_shape() {
        let cases = [
            (
                Event::PaneExited {
                    pane: PaneId::new(2),
                    exit: json!({ "reason": "exited", "code": 0, "shell_code": 0 }),
                },
                json!({ "type": "pane.exited", "pane": "p2", "exit": { "reason": "exited", "code": 0, "shell_code": 0 } }),
            ),
            (
                Event::PaneCommandFinished {
                    pane: PaneId::new(1),
                    exit: None,
                },
                json!({ "type": "pane.command_finished", "pane": "p1", "exit": null }),
            ),
            (
                Event::ServerStopping {},
                json!({ "type": "server.stopping" }),
            ),
            (
                Event::ServerRestored {
                    report: json!({ "found": true, "panes": 2 })
                        .as_object()
                        .unwrap()
                        .clone(),
                },
                json!({ "type": "server.restored", "found": true, "panes": 2 }),
            ),
            (
                Event::Gap {
                    from: None,
                    to: None,
                    message: "m".into(),
                },
                json!({ "type": "gap", "message": "m" }),
            ),
            (
                Event::TabLayout {
                    tab: TabId::new(2),
                    layout: json!({ "pane": "p4" }),
                    focus: PaneId::new(4),
                    zoom: None,
                },
                json!({ "type": "tab.layout", "tab": "t2", "layout": { "pane": "p4" }, "focus": "p4", "zoom": null }),
            ),
            (
                Event::TabSelected {
                    workspace: WorkspaceId::new(1),
                    tab: Some(TabId::new(3)),
                },
                json!({ "type": "tab.selected", "workspace": "w1", "tab": "t3" }),
            ),
            (
                Event::ClientAttached {
                    pane: PaneId::new(3),
                    client: 7,
                    pid: None,
                    read_only: false,
                },
                json!({ "type": "client.attached", "pane": "p3", "client": 7, "pid": null, "read_only": false }),
            ),
        ];
        for (event, wire) in cases {
            assert_eq!(event.to_value(), wire);
            let logged: Logged = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(logged.event, event);
            let mut with_seq = wire;
            with_seq["seq"] = json!(9);
            let logged: Logged = serde_json::from_value(with_seq).unwrap();
            assert_eq!(logged.seq, Some(9));
        }
    }
}
