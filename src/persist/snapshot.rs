//! The on-disk snapshot: a versioned DTO kept apart from the in-memory types,
//! so the server can change its structs freely and a file written by any
//! earlier version still loads. docs/snapshot.md documents the format.
//!
//! Loading is two-stage: the file to a `serde_json::Value`, its `version`
//! checked (newer than ours: refused; older: migrated step by step), then the
//! current [`Snapshot`] struct. Turning that into a live tree (validation,
//! repair of broken parts) is `restore.rs`'s job.

use crate::model::{CommandSpec, Direction, RestorePolicy};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Bump when the format changes, and add a migration from the previous
/// version to [`migrate`] with a fixture in `fixtures/session/`.
pub const SNAPSHOT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub version: u32,
    pub server_version: String,
    pub written_unix_ms: u64,
    /// Structural revision this file was written from; only grows.
    pub revision: u64,
    /// Server generation (bumped by each live upgrade) that wrote it.
    pub generation: u64,
    pub counters: Counters,
    pub active_workspace: Option<String>,
    pub workspaces: Vec<WorkspaceRecord>,
    pub tabs: Vec<TabRecord>,
    pub panes: Vec<PaneRecord>,
}

/// Next ids to hand out. Restored as they are (or raised above the ids in
/// use), so an id is never reused across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    pub workspace: u64,
    pub tab: u64,
    pub pane: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceRecord {
    pub id: String,
    pub name: String,
    pub tabs: Vec<String>,
    pub active_tab: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TabRecord {
    pub id: String,
    pub name: String,
    pub workspace: String,
    pub layout: LayoutRecord,
    pub focus: String,
    pub zoom: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LayoutRecord {
    Pane(String),
    Split {
        direction: Direction,
        ratio: f32,
        first: Box<LayoutRecord>,
        second: Box<LayoutRecord>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneRecord {
    pub id: String,
    pub name: Option<String>,
    pub cwd: String,
    pub command: CommandSpec,
    pub env: BTreeMap<String, String>,
    pub cols: u16,
    pub rows: u16,
    pub restore: RestorePolicy,
    /// A shell command that resumes what ran here (e.g. an agent's
    /// `--resume <id>`); wins over `restore`.
    pub resume: Option<String>,
    /// History file name under `history/`, if one was written.
    pub history: Option<String>,
    /// For diagnostics only: the process that ran when this was written.
    pub pid: Option<i32>,
    pub start_token: Option<u64>,
    /// `true` when the pane was created without shell integration
    /// (`pane.create` `shell_integration: false`). Written only then, so
    /// files of panes with the default stay readable by older versions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_shell_integration: bool,
}

/// Why a snapshot file could not be used.
#[derive(Debug, PartialEq)]
pub enum LoadError {
    /// Not JSON, or not a snapshot of any known shape.
    Corrupt(String),
    /// Written by a newer ptyd; we must not touch it.
    Newer { found: u64 },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Corrupt(why) => write!(f, "the snapshot is corrupt ({why})"),
            LoadError::Newer { found } => write!(
                f,
                "the snapshot is version {found}, newer than this ptyd understands (version {SNAPSHOT_VERSION}); it was written by a newer ptyd"
            ),
        }
    }
}

/// Parses a snapshot file, migrating older versions.
pub fn parse(bytes: &[u8]) -> Result<Snapshot, LoadError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| LoadError::Corrupt(format!("not JSON: {e}")))?;
    let version = value
        .get("version")
        .and_then(Value::as_u64)
        .ok_or_else(|| LoadError::Corrupt("no numeric \"version\"".into()))?;
    if version > u64::from(SNAPSHOT_VERSION) {
        return Err(LoadError::Newer { found: version });
    }
    let value = migrate(value, version)?;
    serde_json::from_value(value).map_err(|e| LoadError::Corrupt(e.to_string()))
}

/// Brings a snapshot of an older `version` up to [`SNAPSHOT_VERSION`], one
/// version at a time. Version 1 is the first, so there is nothing to do yet;
/// version 2 adds `if version == 1 { value = v1_to_v2(value)?; }` here.
fn migrate(value: Value, version: u64) -> Result<Value, LoadError> {
    if version == 0 {
        return Err(LoadError::Corrupt("version 0 does not exist".into()));
    }
    Ok(value)
}

pub fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(snapshot).unwrap_or_default();
    out.push(b'\n');
    out
}
