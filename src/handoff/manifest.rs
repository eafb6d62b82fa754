//! What travels from the old server to the new one: the manifest (a JSON
//! document in a memfd, passed as an fd) and the control messages of the
//! handoff sequence. Types here are DTOs, apart from the server's in-memory
//! types, so two binaries of different builds agree on them as long as
//! [`HANDOFF_VERSION`] matches.

use super::fd_name::FdName;
use crate::persist::snapshot::Snapshot;
use crate::protocol::methods::ExitStatus;
use crate::term::Terminal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Bump when anything in this file, or the serialized form of
/// `term::Terminal` or `persist::snapshot::Snapshot`, changes
/// incompatibly. Old and new servers refuse each other at preflight when
/// they differ.
pub const HANDOFF_VERSION: u32 = 7;

/// The oldest handoff version this build still reads as the new side
/// (docs/protocol.md, "Version skew": N-1 live once there is one). Printed
/// by `version --json` as `handoff_accepts`, so an older server can tell
/// it may hand over to this build although the versions differ.
///
/// Version 4 packs a connection's message ends (`ConnRuntime::msg_ends`)
/// into base64 instead of a JSON array of numbers; it still reads version
/// 3's array. Version 5 may leave a terminal's history lines out of its
/// encoding, in the history log (`FdName::HistoryLog`,
/// `PaneRuntime::history`); it still reads lines inside the encoding.
/// Version 6 leaves a screen's tab stops out of its encoding while they
/// are the default every-8 (`term::screen::Screen::tabs`); it still reads
/// the array, and version 5 does not read their absence. Version 7 keeps a
/// history's compressed blocks in the history log as they are
/// (`HistoryRef::blocks`), the lines in them no longer as lines; it still
/// reads a log of lines only, and version 6 would not find the blocks'.
pub const HANDOFF_ACCEPTS_FROM: u32 = 3;

/// Set by the old side for the new one: the handoff version it speaks.
/// Builds before this variable speak version 2.
pub const SPEAKS_ENV: &str = "PTYD_HANDOFF_SPEAKS";

/// Whether this build, as the new side, reads handoff version `v`.
pub fn accepts(v: u32) -> bool {
    (HANDOFF_ACCEPTS_FROM..=HANDOFF_VERSION).contains(&v)
}

/// Control messages on the handoff socket, in sequence order. See
/// ARCHITECTURE.md ("The live upgrade") and docs/design/upgrade.md for
/// the state machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum Control {
    /// new → old, first: who the new server is.
    Hello {
        handoff_version: u32,
        server_version: String,
        pid: u32,
    },
    /// old → new, before the pause: a memfd holding the pre-copy as JSON
    /// lines ([`PrecopyHead`], then one [`PrecopyPane`] per pane), every
    /// terminal model, pane and the event ring as they are now, then
    /// the fds named by `ids`: `listener` and `lock` (they never change;
    /// with them the new side builds its server shell ahead) and the fds
    /// of the pre-copied panes, continued in `batches` fd batches (seq 1..)
    /// sent right after, unacked. Decoded while the old server still
    /// serves, so the pause only carries what changed.
    Precopy {
        bytes: u64,
        ids: Vec<FdName>,
        batches: u32,
    },
    /// new → old: the pre-copied terminals are decoded.
    PrecopyAck,
    /// old → new, before the pause, after `precopy_ack` (only if a pane
    /// changed since the pre-copy): a memfd holding one [`PrecopyPane`]
    /// line per pane that changed, each held by the old side (its output
    /// no longer read, so it cannot change again before the pause). The
    /// new side rebuilds them around the fds it already has.
    Delta { bytes: u64 },
    /// new → old: the delta is applied.
    DeltaAck,
    /// new → old, any time before `imported`: still working (decoding,
    /// building panes). The old side's deadline counts from the last sign
    /// of progress, so a slow import under load is not a stall.
    Progress,
    /// old → new: the memfd holding the manifest JSON, then fd batch 0
    /// (named by `ids`) in the same message, so that up to 251 fds the
    /// whole transfer is one message and one wakeup; later batches follow
    /// without waiting. Carries the old side's phase timings so far and
    /// when (CLOCK_MONOTONIC, system-wide) it paused.
    Manifest {
        bytes: u64,
        fd_count: u32,
        ids: Vec<FdName>,
        timings: Vec<Phase>,
        pause_started_mono_us: u64,
    },
    /// new → old: one fd batch was received and checked.
    BatchAck { seq: u32 },
    /// new → old: every fd is in, the state rebuilt and every source
    /// registered; nothing read yet.
    Imported,
    /// old → new: go live. The old side has checked everything it could.
    Commit,
    /// new → old: serving. The commit point.
    Committed { blackout_us: u64 },
    /// new → old, in probation: the upgrade's caller got its answer from
    /// the new server, so a take-back must not answer it again.
    Answered,
    /// either way: giving up, with the reason.
    Abort { reason: String },
}

/// The first line of the pre-copy: the event ring as it is (events never
/// change once logged, so the manifest then carries only later ones) and
/// how many pane lines follow.
#[derive(Debug, Serialize, Deserialize)]
pub struct PrecopyHead {
    pub event_last_seq: u64,
    pub event_ring: Vec<Value>,
    pub panes: u64,
    /// In a crash checkpoint (`server/continuity/keeper_link/`): the last event
    /// number the server reached, rewritten in place as events are logged
    /// after the checkpoint (whose ring then ends before it). A
    /// replacement numbers on after it. Absent in an upgrade's pre-copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_reached: Option<u64>,
}

/// One line of the pre-copy (or of a delta): a pane's record and runtime
/// state, its terminal model in `screen` (in a delta, `None` if the
/// terminal did not change), for the new side to build the pane ahead. The
/// manifest then lists the panes that did not change since in
/// `unchanged_panes`. One line per pane (JSON escapes every newline in a
/// string), so the new side decodes and builds pane by pane, reporting
/// progress.
pub type PrecopyPane<S = Terminal> = (crate::persist::snapshot::PaneRecord, PaneRuntime<S>);

/// One timed phase of an upgrade, for reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub us: u64,
}

/// `S` is the terminal as carried: `&Terminal` when the old side writes
/// (no copy of the screens), `Terminal` when the new side reads.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest<S = Terminal> {
    pub handoff_version: u32,
    pub from_version: String,
    pub from_pid: u32,
    /// The old server's own binary, for the upgrade report (absent from
    /// builds before it was added; additions like this one need no
    /// version bump: unknown members are ignored, missing ones default).
    #[serde(default)]
    pub from_binary: Option<String>,
    /// Generation of the new server (the old one's plus one).
    pub generation: u64,
    pub namespace: String,
    /// The structure, as a snapshot would save it, with the records of
    /// the panes in `panes` only.
    pub snapshot: Snapshot,
    /// The panes that changed since the pre-copy (or came after it).
    pub panes: Vec<PaneRuntime<S>>,
    /// The panes whose record and runtime state are exactly as the
    /// pre-copy carried them: the new side uses what it built from that.
    pub unchanged_panes: Vec<u64>,
    pub conns: Vec<ConnRuntime>,
    pub waits: Vec<WaitRuntime>,
    pub event_last_seq: u64,
    /// The retained events, oldest first; with `events_after`, only those
    /// after that sequence number, the pre-copy having carried the rest.
    pub event_ring: Vec<Value>,
    pub events_after: Option<u64>,
    pub persist_revision: u64,
    pub history: bool,
    pub started_unix_ms: u64,
    pub socket_dev: u64,
    pub socket_ino: u64,
    /// The binary path upgrades resolve against (`--binary` default).
    pub exe_path: String,
    pub next_wait_id: u64,
    /// The `server.upgrade` request to answer once committed.
    pub caller: Option<Caller>,
    /// Every fd id the batches carry, so the new side can check it got them
    /// all: `lineage`, `conn:N`, `pty:pN`, `ptyhup:pN`, `pidfd:pN` (the
    /// listener and the lock came with the pre-copy).
    pub fd_ids: Vec<FdName>,
    /// Only in a crash checkpoint (`server/continuity/keeper_link/`): what a
    /// replacement replays. Older binaries ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// The last attaching client's `update_environment` values
    /// (`server/panes/environment.rs`), memory only like `client_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_env: Option<BTreeMap<String, String>>,
}

/// Each pane's output-ring position at the checkpoint, by pane id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recovery {
    pub rings: Vec<(u64, u64)>,
    pub checkpoint_unix_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Caller {
    pub conn: usize,
    pub rpc_id: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessRuntime {
    Running {
        pid: i32,
        sid: i32,
        start_token: Option<u64>,
    },
    Exited {
        pid: i32,
        sid: i32,
        start_token: Option<u64>,
        status: ExitStatus,
        reason: String,
    },
    Held {
        reason: String,
    },
}

/// A pane's state beyond its snapshot record. Members at their default
/// (no kill, timer, pending input, acks or commands) are left out (handoff
/// version 6 on) and read back as the default: they were a third of an
/// idle pane's line in every crash checkpoint.
#[derive(Debug, Serialize, Deserialize)]
pub struct PaneRuntime<S = Terminal> {
    pub id: u64,
    pub created_unix_ms: u64,
    pub process: ProcessRuntime,
    pub run: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub kill_reason: Option<String>,
    /// Milliseconds until SIGKILL of a kill in progress.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kill_escalate_in_ms: Option<u64>,
    /// The terminal model, or `None` when the pre-copied one with the same
    /// `screen_changes` is still exact.
    pub screen: Option<S>,
    pub screen_changes: u64,
    /// Milliseconds since the pane last printed.
    pub idle_ms: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub timeout_in_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub idle_timeout_ms: Option<u64>,
    /// Input accepted and not yet written to the PTY.
    #[serde(with = "b64", default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<u8>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub written_total: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acks: Vec<AckRuntime>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_requests: Vec<(String, u64)>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub history_dirty: bool,
    #[serde(default, skip_serializing_if = "is_default")]
    pub prompts_seen: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub commands_finished: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub last_command_exit: Option<i32>,
    /// Output bytes read so far (the text itself does not travel: waits
    /// parked across the upgrade continue on the output that follows).
    #[serde(default, skip_serializing_if = "is_default")]
    pub output_bytes: u64,
    /// `bash`, `zsh` or `fish` when this run got shell integration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_injected: Option<String>,
    /// Where `screen`'s history lines are when its encoding left them out
    /// (`"lines": []`): in the history log (`FdName::HistoryLog`, see
    /// `server/continuity/history_log.rs`). Absent: they are in `screen` (handoff
    /// version 4 and before, or a history whose lines have no numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryRef>,
    /// The environment of the client that created the pane, for its
    /// respawns: carried here, in memory, because a snapshot on disk never
    /// holds it (docs/design/environment.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_env: Option<BTreeMap<String, String>>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// A pane's history lines in the history log: first its compressed
/// blocks, as records (`blocks`: offset, length, lines packed; oldest
/// first; the first one's oldest `block_skip` lines are gone from the
/// history), then its newest lines, uncompressed: the byte ranges
/// (offset, length) of `chunks`, each line its packed bytes after a
/// 4-byte length, of which the first `skip` lines are gone (evicted, or in
/// a block, since they were written) and the next `lines` are the rest of
/// the history. Handoff version 6 and before have no `blocks`: every line
/// is in `chunks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRef {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<(u64, u64, u32)>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub block_skip: u32,
    pub chunks: Vec<(u64, u64)>,
    pub skip: u64,
    pub lines: u64,
}

impl<S> PaneRuntime<S> {
    /// The same runtime state with another terminal (or its cached
    /// encoding, for a crash checkpoint that re-encodes only changed panes).
    pub fn with_screen<T>(self, screen: Option<T>) -> PaneRuntime<T> {
        PaneRuntime {
            id: self.id,
            created_unix_ms: self.created_unix_ms,
            process: self.process,
            run: self.run,
            kill_reason: self.kill_reason,
            kill_escalate_in_ms: self.kill_escalate_in_ms,
            screen,
            screen_changes: self.screen_changes,
            idle_ms: self.idle_ms,
            timeout_in_ms: self.timeout_in_ms,
            idle_timeout_ms: self.idle_timeout_ms,
            input: self.input,
            written_total: self.written_total,
            acks: self.acks,
            recent_requests: self.recent_requests,
            history_dirty: self.history_dirty,
            prompts_seen: self.prompts_seen,
            commands_finished: self.commands_finished,
            last_command_exit: self.last_command_exit,
            output_bytes: self.output_bytes,
            shell_injected: self.shell_injected,
            history: self.history,
            client_env: self.client_env,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct AckRuntime {
    pub conn: usize,
    pub rpc_id: Value,
    pub end_offset: u64,
    pub duplicate: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ConnRuntime {
    pub id: usize,
    pub peer_uid: u32,
    pub peer_pid: Option<i32>,
    /// `None` for JSON mode, else the attached pane and its settings.
    pub attached: Option<AttachRuntime>,
    pub subscribed: bool,
    /// An event replay under way: the last event queued.
    #[serde(default)]
    pub replay_after: Option<u64>,
    /// Received bytes not yet handled (a partial request or frame).
    #[serde(with = "b64")]
    pub inbuf: Vec<u8>,
    /// Output owed, starting at the beginning of the message being written:
    /// the first `written` bytes of it already went out.
    #[serde(with = "b64")]
    pub out: Vec<u8>,
    pub written: usize,
    /// Where each queued message ends in `out` (packed: see [`ends`]).
    #[serde(with = "ends")]
    pub msg_ends: Vec<usize>,
    pub closing_in_ms: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct AttachRuntime {
    pub pane: u64,
    pub read_only: bool,
    pub cols: u16,
    pub rows: u16,
    /// When the client attached (0 from a server that did not record it).
    #[serde(default)]
    pub since_unix_ms: u64,
    /// Its activity stamp (`Connection::active`).
    #[serde(default)]
    pub active: u64,
    /// The client keeps its terminal on the alternate screen (no screen
    /// switches sent to it).
    #[serde(default)]
    pub flat: bool,
    /// What the client asked for when it falls behind (`pause` from a
    /// server before the choice).
    #[serde(default)]
    pub when_behind: crate::protocol::methods::WhenBehind,
    /// The client's view is owed a redraw (`View::stale`): one that fell
    /// behind must still be drawn once it catches up.
    #[serde(default)]
    pub stale: bool,
    /// The tab a tab-view client shows (`None`: one pane), and its prefix
    /// key; drawn whole by the new server at its first turn.
    #[serde(default)]
    pub tab: Option<crate::model::TabId>,
    #[serde(default)]
    pub prefix: Option<u8>,
    /// A tab-view client zoomed its focused pane (`pane`); `None` from a
    /// server whose zoom was the tab's: the tab's is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zoom: Option<bool>,
    /// Its scroll mode (`None`: none, or one a mouse drag opened, which
    /// ends with the drag); an older server carried none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scroll: Option<crate::protocol::methods::ScrollSpec>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WaitRuntime {
    pub conn: usize,
    pub rpc_id: Value,
    pub pane: u64,
    /// `exit`, `text`, `idle`, `prompt` or `command_finished`.
    pub kind: String,
    pub text: Option<String>,
    /// The count for marks, the idle ms, or the line feeds a text wait
    /// still skips.
    pub n: u64,
    /// Text waits: `text` is a regex; the screen counts too.
    #[serde(default)]
    pub regex: bool,
    #[serde(default)]
    pub include_screen: bool,
    #[serde(default)]
    pub after_command_start: bool,
    pub timeout_in_ms: Option<u64>,
}

/// Bytes as base64 text: JSON arrays of numbers would quadruple them.
pub mod b64 {
    use serde::{Deserialize, Deserializer, Serializer};

    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    /// Each byte's value in [`ALPHABET`], or 255 for a byte not in it: a
    /// table rather than a search, since a client's queued output (up to
    /// megabytes) is decoded inside the blackout.
    const VALUES: [u8; 256] = {
        let mut t = [255u8; 256];
        let mut i = 0;
        while i < 64 {
            t[ALPHABET[i] as usize] = i as u8;
            i += 1;
        }
        t
    };

    pub fn decode(text: &str) -> Option<Vec<u8>> {
        let text = text.trim_end_matches('=');
        let mut out = Vec::with_capacity(text.len() * 3 / 4);
        let mut acc = 0u32;
        let mut bits = 0;
        for c in text.bytes() {
            let v = match VALUES[c as usize] {
                255 => return None,
                v => u32::from(v),
            };
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        Some(out)
    }

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        decode(&text).ok_or_else(|| serde::de::Error::custom("invalid base64"))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn round_trips() {
            for len in 0..70 {
                let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
                assert_eq!(super::decode(&super::encode(&bytes)).unwrap(), bytes);
            }
            assert_eq!(super::encode(b"hi!"), "aGkh");
            assert_eq!(super::encode(b"h"), "aA==");
            assert_eq!(super::decode("aG!h"), None);
        }
    }
}

/// A connection's message ends (increasing offsets into its queued
/// output) as base64 of LEB128 varints, each the distance from the
/// previous end (the first from 0): a never-reading client can have
/// thousands of small messages queued (events, output frames), and as a
/// JSON array of numbers they cost up to 8 bytes each inside the
/// blackout; packed, a message under 128 bytes costs 1.33. The count is
/// bounded by the queue it indexes (every message is at least a byte, and
/// the queue is at most `MAX_OUTPUT_QUEUE` plus one reply).
///
/// Reads version 3's JSON array of numbers as well.
pub mod ends {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn pack(ends: &[usize]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ends.len());
        let mut prev = 0usize;
        for &end in ends {
            // Ends are increasing; one that is not (never produced) packs
            // as 0 and is caught by the receiver's order check.
            let mut gap = end.saturating_sub(prev) as u64;
            prev = end;
            loop {
                let byte = (gap & 0x7f) as u8;
                gap >>= 7;
                if gap == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
        }
        out
    }

    pub fn unpack(bytes: &[u8]) -> Result<Vec<usize>, String> {
        let mut ends = Vec::new();
        let mut end = 0usize;
        let mut gap = 0u64;
        let mut shift = 0u32;
        for &b in bytes {
            // Ten 7-bit groups hold 64 bits; the tenth holds only one.
            if shift > 63 || (shift == 63 && b & 0x7e != 0) {
                return Err("a message end's varint is too long".into());
            }
            gap |= u64::from(b & 0x7f) << shift;
            if b & 0x80 != 0 {
                shift += 7;
                continue;
            }
            end = usize::try_from(gap)
                .ok()
                .and_then(|g| end.checked_add(g))
                .ok_or("a message end overflows")?;
            ends.push(end);
            gap = 0;
            shift = 0;
        }
        if shift != 0 {
            return Err("the message ends stop inside a varint".into());
        }
        Ok(ends)
    }

    pub fn serialize<S: Serializer>(ends: &[usize], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::b64::encode(&pack(ends)))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Carried {
        Packed(String),
        /// Version 3.
        Numbers(Vec<usize>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<usize>, D::Error> {
        match Carried::deserialize(d)? {
            Carried::Numbers(ends) => Ok(ends),
            Carried::Packed(text) => {
                let bytes = super::b64::decode(&text)
                    .ok_or_else(|| serde::de::Error::custom("message ends: invalid base64"))?;
                unpack(&bytes).map_err(serde::de::Error::custom)
            }
        }
    }

    #[cfg(test)]
    mod tests {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Q {
            #[serde(with = "super")]
            ends: Vec<usize>,
        }

        #[test]
        fn round_trip_packed_and_read_version_3_numbers() {
            for ends in [
                vec![],
                vec![0],
                vec![1, 2, 3],
                vec![127, 128, 16_511, 16_512, 4 << 20, (4 << 20) + 300],
                vec![usize::MAX],
            ] {
                let q = Q { ends };
                let text = serde_json::to_string(&q).unwrap();
                assert!(text.contains("\"ends\":\""), "{text}");
                assert_eq!(serde_json::from_str::<Q>(&text).unwrap(), q);
            }
            // Small messages cost about a byte and a third each.
            let many: Vec<usize> = (1..=3000).map(|i| i * 100).collect();
            let text = serde_json::to_string(&Q { ends: many }).unwrap();
            assert!(text.len() < 4100, "{} bytes", text.len());
            let v3: Q = serde_json::from_str(r#"{"ends":[5,9,40]}"#).unwrap();
            assert_eq!(v3.ends, [5, 9, 40]);
        }

        #[test]
        fn malformed_ends_are_errors_not_panics() {
            // A varint cut short, one too long, and a sum past usize.
            assert!(super::unpack(&[0x80]).is_err());
            assert!(super::unpack(&[0xff; 11]).is_err());
            let mut over = super::pack(&[usize::MAX]);
            over.extend(super::pack(&[1]));
            assert!(super::unpack(&over).is_err());
            assert!(serde_json::from_str::<Q>(r#"{"ends":"!!"}"#).is_err());
        }
    }
}

#[cfg(test)]
mod pane_runtime_tests {
    use super::PaneRuntime;
    use serde_json::Value;

    /// A runtime line as version 5 wrote it (every member, as in a crash
    /// checkpoint of an idle pane) and as version 6 writes it (defaults
    /// left out) read the same, and version 6 writes members off their
    /// default.
    #[test]
    fn default_members_are_left_out_and_read_back() {
        let v5 = r#"{"id":1,"created_unix_ms":17,"process":{"running":{"pid":5,"sid":5,"start_token":9}},"run":1,"kill_reason":null,"kill_escalate_in_ms":null,"screen":null,"screen_changes":0,"idle_ms":4,"timeout_in_ms":null,"idle_timeout_ms":null,"input":"","written_total":0,"acks":[],"recent_requests":[],"history_dirty":true,"prompts_seen":0,"commands_finished":0,"last_command_exit":null,"output_bytes":0,"shell_injected":null,"history":{"chunks":[],"skip":0,"lines":0}}"#;
        let old: PaneRuntime<Value> = serde_json::from_str(v5).unwrap();
        let now = serde_json::to_string(&old).unwrap();
        assert!(now.len() * 2 < v5.len(), "{now}");
        assert!(
            !now.contains("kill_reason") && !now.contains("input"),
            "{now}"
        );
        let back: PaneRuntime<Value> = serde_json::from_str(&now).unwrap();
        let full = |r: &PaneRuntime<Value>| {
            serde_json::json!([
                r.id,
                r.created_unix_ms,
                r.run,
                r.kill_reason,
                r.kill_escalate_in_ms,
                r.screen,
                r.screen_changes,
                r.idle_ms,
                r.timeout_in_ms,
                r.idle_timeout_ms,
                r.input,
                r.written_total,
                r.recent_requests,
                r.history_dirty,
                r.prompts_seen,
                r.commands_finished,
                r.last_command_exit,
                r.output_bytes,
                r.shell_injected,
                r.acks.len(),
            ])
        };
        assert_eq!(full(&back), full(&old));
        // Off their default, they travel.
        let mut busy = back;
        busy.kill_reason = Some("user".into());
        busy.timeout_in_ms = Some(5);
        busy.input = b"ls\r".to_vec();
        busy.written_total = 3;
        busy.recent_requests = vec![("r1".into(), 3)];
        busy.prompts_seen = 2;
        busy.last_command_exit = Some(0);
        busy.output_bytes = 10;
        let text = serde_json::to_string(&busy).unwrap();
        let again: PaneRuntime<Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(full(&again), full(&busy), "{text}");
    }
}
