//! Typed params of every method, and [`Request`], the one list of methods
//! that the server parses and the client builds. Each struct's doc names the
//! method and the reply it gets (typed in `replies` where a client reads
//! it). Unknown fields are refused so a typo is an error, not a silently
//! ignored option. Params serialize without the fields left out (`None`,
//! `false`), so a request a client builds is the minimal JSON the docs show.

use super::{ErrorCode, RpcError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

mod client_params;
mod pane_params;
mod tree_params;

pub use client_params::*;
pub use pane_params::*;
pub use tree_params::*;

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
/// To add a method: a params struct in the file for its area (its doc
/// names the reply), a variant here and its name in [`Request::parse`] and
/// [`Request::method`], a match arm in `server::requests::dispatch`, a
/// section in docs/protocol.md, and a reply struct in `replies` if a client
/// reads it.
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
    use crate::model::{Direction, RestorePolicy};
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
