//! The on-disk snapshot: a versioned DTO kept apart from the in-memory types,
//! so the server can change its structs freely and a file written by any
//! earlier version still loads. docs/snapshot.md documents the format.
//!
//! Loading is two-stage: the `version` read alone (newer than ours:
//! refused), then the current [`Snapshot`] struct, which reads every older
//! version too (see `parse`). Turning that into a live tree (validation,
//! repair of broken parts) is `restore.rs`'s job.

use crate::model::{CommandSpec, Direction, RestorePolicy};
use crate::workspace::layout::MAX_SPLIT_DEPTH;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Bump when the format changes, teach `parse` the previous version (a
/// defaulted member where that is enough), and add a fixture in
/// `fixtures/session/`.
pub const SNAPSHOT_VERSION: u32 = 2;

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
    /// The last event number given out (version 2 on): the next server's
    /// events go on from it. Absent from the snapshot an older build puts
    /// in its upgrade manifest (the manifest has `event_last_seq` of its
    /// own), so it defaults rather than failing that upgrade.
    #[serde(default)]
    pub event: u64,
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
#[serde(from = "TabWire")]
pub struct TabRecord {
    pub id: String,
    pub name: String,
    pub workspace: String,
    pub layout: LayoutRecord,
    pub focus: String,
    pub zoom: Option<String>,
    /// Set when the file's layout nested more than
    /// [`MAX_SPLIT_DEPTH`] splits (this many): `layout` then holds the
    /// same panes laid out again evenly, and the restore lists a repair.
    /// Never written.
    #[serde(skip)]
    pub layout_rebuilt_from: Option<usize>,
}

/// A tab as the file spells it; its layout read by [`LayoutWire`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TabWire {
    id: String,
    name: String,
    workspace: String,
    layout: LayoutWire,
    focus: String,
    zoom: Option<String>,
}

impl From<TabWire> for TabRecord {
    fn from(t: TabWire) -> TabRecord {
        TabRecord {
            id: t.id,
            name: t.name,
            workspace: t.workspace,
            layout: t.layout.layout,
            focus: t.focus,
            zoom: t.zoom,
            layout_rebuilt_from: t.layout.rebuilt_from,
        }
    }
}

/// A layout read without recursing deeper than a bound, whatever the input.
///
/// A layout nests two JSON levels per split, and serde_json refuses a
/// document nested over 128 levels: read as part of the file, one deep tab
/// (~62 splits) made the whole file unreadable. So the layout is captured
/// as raw text (serde_json skips a value with an explicit stack, at any
/// depth) and parsed on its own with a fresh depth budget. A layout that
/// still nests too deep for that, or more than [`MAX_SPLIT_DEPTH`] splits
/// (written by a version without the cap), keeps its panes in order,
/// found by [`layout_leaves`] without recursion, laid out again evenly.
struct LayoutWire {
    layout: LayoutRecord,
    rebuilt_from: Option<usize>,
}

impl<'de> Deserialize<'de> for LayoutWire {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        decode_layout(raw.get()).map_err(serde::de::Error::custom)
    }
}

fn decode_layout(text: &str) -> Result<LayoutWire, String> {
    let (leaves, depth) = match serde_json::from_str::<LayoutRecord>(text) {
        Ok(layout) => {
            let depth = layout.depth();
            if depth <= MAX_SPLIT_DEPTH {
                return Ok(LayoutWire {
                    layout,
                    rebuilt_from: None,
                });
            }
            (layout.leaves(), depth)
        }
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => layout_leaves(text)?,
        Err(e) => return Err(format!("layout: {e}")),
    };
    if leaves.is_empty() {
        return Err("layout: no pane in a layout too deep to read".into());
    }
    Ok(LayoutWire {
        layout: even_layout(&leaves, Direction::Horizontal),
        rebuilt_from: Some(depth),
    })
}

/// The pane ids of a layout's leaves in order, and how many splits it
/// nests, found by one pass over the JSON text with no recursion: a leaf
/// is the string value of a `"pane"` key.
fn layout_leaves(text: &str) -> Result<(Vec<String>, usize), String> {
    let bytes = text.as_bytes();
    let (mut leaves, mut depth, mut max_depth) = (Vec::new(), 0usize, 0usize);
    let mut last_string: Option<(usize, usize)> = None;
    let mut want_pane = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = (i + 1).min(bytes.len());
                let string = || serde_json::from_str::<String>(&text[start..end]);
                if want_pane {
                    leaves.push(string().map_err(|e| format!("layout: a pane id: {e}"))?);
                    want_pane = false;
                } else {
                    last_string = Some((start, end));
                }
            }
            b':' => {
                want_pane = last_string
                    .take()
                    .is_some_and(|(a, b)| &text[a..b] == "\"pane\"");
            }
            b'{' | b'[' => {
                depth += 1;
                max_depth = max_depth.max(depth);
                last_string = None;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                last_string = None;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => {
                if want_pane {
                    return Err("layout: a pane id that is not a string".into());
                }
                last_string = None;
            }
        }
        i += 1;
    }
    // `{"split": {..., "first": ...}}`: two levels per split, one per leaf.
    Ok((leaves, max_depth.saturating_sub(1) / 2))
}

/// `leaves` side by side and stacked in turn, each an equal share: a tree
/// log2(n) splits deep.
fn even_layout(leaves: &[String], direction: Direction) -> LayoutRecord {
    if let [only] = leaves {
        return LayoutRecord::Pane(only.clone());
    }
    let half = leaves.len() / 2;
    let next = match direction {
        Direction::Horizontal => Direction::Vertical,
        Direction::Vertical => Direction::Horizontal,
    };
    LayoutRecord::Split {
        direction,
        ratio: half as f32 / leaves.len() as f32,
        first: Box::new(even_layout(&leaves[..half], next)),
        second: Box::new(even_layout(&leaves[half..], next)),
    }
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
    /// How the pane's process ended, for a pane that had exited: a restore
    /// keeps it exited with this status rather than running or holding it.
    /// Written only then, as `no_shell_integration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<SavedExit>,
}

/// An exited pane's status (`{"code": 0}` or `{"signal": 15}`) and reason
/// (`exited`, `killed`, `timeout`, `idle_timeout`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedExit {
    pub status: crate::protocol::methods::ExitStatus,
    pub reason: String,
}

impl LayoutRecord {
    /// The most splits above any leaf.
    pub fn depth(&self) -> usize {
        match self {
            LayoutRecord::Pane(_) => 0,
            LayoutRecord::Split { first, second, .. } => 1 + first.depth().max(second.depth()),
        }
    }

    /// The leaves' pane ids, in order.
    pub fn leaves(&self) -> Vec<String> {
        match self {
            LayoutRecord::Pane(id) => vec![id.clone()],
            LayoutRecord::Split { first, second, .. } => {
                let mut out = first.leaves();
                out.extend(second.leaves());
                out
            }
        }
    }
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
    // The version first, skipping the rest (serde_json skips a value
    // without recursing), so a deep layout cannot fail the whole file
    // before `LayoutWire` reads it on its own.
    #[derive(Deserialize)]
    struct Version {
        version: Option<Value>,
    }
    let probe = match serde_json::from_slice::<Version>(bytes) {
        Ok(probe) => probe.version,
        Err(e) if e.is_data() => None,
        Err(e) => return Err(LoadError::Corrupt(format!("not JSON: {e}"))),
    };
    let version = probe
        .as_ref()
        .and_then(Value::as_u64)
        .ok_or_else(|| LoadError::Corrupt("no numeric \"version\"".into()))?;
    if version > u64::from(SNAPSHOT_VERSION) {
        return Err(LoadError::Newer { found: version });
    }
    if version == 0 {
        return Err(LoadError::Corrupt("version 0 does not exist".into()));
    }
    // Version 1 differs only by the event counter it lacks, which reads as
    // 0 (`Counters::event`), so it is read as it is: never through a
    // `Value`, which a deep layout would exhaust.
    let mut snapshot: Snapshot =
        serde_json::from_slice(bytes).map_err(|e| LoadError::Corrupt(e.to_string()))?;
    snapshot.version = SNAPSHOT_VERSION;
    Ok(snapshot)
}

pub fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(snapshot).unwrap_or_default();
    out.push(b'\n');
    out
}
