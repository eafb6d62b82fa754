//! Every conversion between the server's state and the handoff's DTOs
//! (`handoff::manifest`), both ways, in one place: a field added to the
//! manifest is written and read here (ARCHITECTURE.md, "How to add a
//! manifest field"). The old side calls the `*_runtime` and `capture_*`
//! functions; the new side the `*_from_runtime` and `apply_*` ones.

use super::error::UpgradeError;
use crate::handoff::fd_name::FdName;
use crate::handoff::manifest::{
    AckRuntime, AttachRuntime, Caller, ConnRuntime, HANDOFF_VERSION, Manifest, PaneRuntime,
    ProcessRuntime, WaitRuntime,
};
use crate::model::PaneId;
use crate::persist::snapshot::PaneRecord;
use crate::pty::{ChildProcess, PtyMaster};
use crate::server::clients::connection::{Attachment, ConnId, ConnMode, Connection};
use crate::server::panes::pane::{Carried, ExitReason, Pane, PaneSetup, PaneState, PendingAck};
use crate::server::waits::{Wait, WaitCondition};
use crate::server::{Server, Source};
use crate::sys::PeerCred;
use crate::term::{TermConfig, Terminal};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Milliseconds from `now` until `at` (0 if passed).
fn ms_until(at: Instant, now: Instant) -> u64 {
    at.saturating_duration_since(now).as_millis() as u64
}

// --- panes ------------------------------------------------------------------

/// A pane as the pre-copy carried it: its record and runtime state encoded
/// with the times relative to "now" zeroed, the instants behind them, and
/// its fds (the same numbers in the same run are the same open files).
pub struct PaneDraft {
    pub bytes: Vec<u8>,
    pub times: PaneTimes,
    pub fds: Vec<(FdName, RawFd)>,
}

pub type PaneTimes = (Instant, Option<Instant>, Option<Instant>);

pub fn pane_times(p: &Pane) -> PaneTimes {
    (p.last_output(), p.timeout_at(), p.kill_deadline())
}

/// A pane's fds as named for the handoff; for a running process of our own
/// a pidfd is opened (once per upgrade, kept in `opened`).
pub fn pane_fds(
    pane: &Pane,
    opened: &mut HashMap<PaneId, OwnedFd>,
) -> Result<Vec<(FdName, RawFd)>, UpgradeError> {
    let id = pane.id();
    let mut fds = Vec::with_capacity(2);
    if let Some(m) = pane.fds().master() {
        fds.push((FdName::Pty(id), m.raw_fd()));
    }
    if let Some(m) = pane.fds().hung_up_master() {
        fds.push((FdName::PtyHangup(id), m.raw_fd()));
    }
    if let PaneState::Running { child, .. } = *pane.state() {
        let fd = match (pane.fds().pidfd(), opened.get(&pane.public_id())) {
            (Some(fd), _) | (None, Some(fd)) => fd.as_raw_fd(),
            (None, None) => {
                let fd = crate::sys::pidfd_open(child.pid).map_err(|e| {
                    let what = format!(
                        "opening a pidfd for pane {} (pid {})",
                        pane.public_id(),
                        child.pid
                    );
                    UpgradeError::io(&what, e)
                })?;
                let raw = fd.as_raw_fd();
                opened.insert(pane.public_id(), fd);
                raw
            }
        };
        fds.push((FdName::Pidfd(id), fd));
    }
    if let Some(ring) = pane.ring() {
        fds.push((FdName::Ring(id), ring.fd().as_raw_fd()));
    }
    Ok(fds)
}

/// Gives `pane` its fds from `fds`, by name, none registered yet; a pidfd
/// gets a token.
pub fn attach_pane_fds(server: &mut Server, pane: &mut Pane, fds: &mut HashMap<FdName, OwnedFd>) {
    let id = pane.id();
    let master = fds.remove(&FdName::Pty(id)).map(PtyMaster::from_fd);
    let hung_up = fds.remove(&FdName::PtyHangup(id)).map(PtyMaster::from_fd);
    let pidfd = fds
        .remove(&FdName::Pidfd(id))
        .map(|fd| (fd, server.alloc_token(Source::Pidfd(id))));
    pane.fds_mut().adopt(master, hung_up, pidfd);
    // A ring that cannot be mapped is replaced by a fresh one when the
    // pane is next handed to the keeper.
    if let Some(ring) = fds
        .remove(&FdName::Ring(id))
        .and_then(|fd| super::super::output_ring::OutputRing::adopt(fd).ok())
    {
        pane.set_ring(ring);
    }
}

/// Encodes a pane's record and runtime state into `buf` for comparison:
/// the relative times move with the clock, so they are zeroed here and
/// compared as instants (`pane_times`) instead.
pub fn draft_bytes(
    buf: &mut Vec<u8>,
    record: &PaneRecord,
    rt: &mut PaneRuntime<&Terminal>,
) -> Result<(), UpgradeError> {
    let saved = (rt.idle_ms, rt.timeout_in_ms, rt.kill_escalate_in_ms);
    rt.idle_ms = 0;
    rt.timeout_in_ms = rt.timeout_in_ms.map(|_| 0);
    rt.kill_escalate_in_ms = rt.kill_escalate_in_ms.map(|_| 0);
    buf.clear();
    let encoded = serde_json::to_writer(&mut *buf, &(record, &*rt));
    (rt.idle_ms, rt.timeout_in_ms, rt.kill_escalate_in_ms) = saved;
    encoded.map_err(|e| UpgradeError::encode(&format!("encoding pane {}", PaneId::new(rt.id)), e))
}

/// A pane's runtime state for a live upgrade (its structural part travels
/// as its snapshot record). `precopied` is the change count of the
/// terminal copy the new server already has, if any: an unchanged
/// terminal is not sent again.
pub fn pane_runtime(p: &Pane, now: Instant, precopied: Option<u64>) -> PaneRuntime<&Terminal> {
    let process = match p.state() {
        PaneState::Running { child: c, .. } => ProcessRuntime::Running {
            pid: c.pid,
            sid: c.sid,
            start_token: c.start_token,
        },
        PaneState::Exited {
            child: c,
            status,
            reason,
            ..
        } => ProcessRuntime::Exited {
            pid: c.pid,
            sid: c.sid,
            start_token: c.start_token,
            status: *status,
            reason: reason.as_str().to_string(),
        },
        PaneState::Held { reason } => ProcessRuntime::Held {
            reason: reason.clone(),
        },
    };
    let (input, written_total, recent_requests) = p.input_state();
    PaneRuntime {
        id: p.id(),
        created_unix_ms: p.created_unix_ms(),
        process,
        run: p.run(),
        kill_reason: p.kill_reason().map(|r| r.as_str().to_string()),
        kill_escalate_in_ms: p.kill_deadline().map(|at| ms_until(at, now)),
        screen: (precopied != Some(p.screen().changes())).then_some(p.screen()),
        screen_changes: p.screen().changes(),
        idle_ms: now.saturating_duration_since(p.last_output()).as_millis() as u64,
        timeout_in_ms: p.timeout_at().map(|at| ms_until(at, now)),
        idle_timeout_ms: p.idle_timeout().map(|d| d.as_millis() as u64),
        input: input.to_vec(),
        written_total,
        acks: p
            .pending_acks()
            .iter()
            .map(|a| AckRuntime {
                conn: a.conn,
                rpc_id: a.rpc_id.clone(),
                end_offset: a.end_offset,
                duplicate: a.duplicate,
            })
            .collect(),
        recent_requests,
        history_dirty: p.history_dirty(),
        prompts_seen: p.prompts_seen(),
        commands_finished: p.commands_finished(),
        last_command_exit: p.last_command_exit(),
        output_bytes: p.output().total(),
        shell_injected: p.shell_injected().map(|s| s.name().to_string()),
        history: None,
        client_env: p.client_env().cloned(),
    }
}

fn process_from_runtime(id: PaneId, process: ProcessRuntime) -> Result<PaneState, UpgradeError> {
    Ok(match process {
        ProcessRuntime::Running {
            pid,
            sid,
            start_token,
        } => PaneState::Running {
            child: ChildProcess {
                pid,
                sid,
                start_token,
            },
            // Carried beside the process (`Pane::carried_over`).
            kill: None,
        },
        ProcessRuntime::Exited {
            pid,
            sid,
            start_token,
            status,
            reason,
        } => PaneState::Exited {
            child: ChildProcess {
                pid,
                sid,
                start_token,
            },
            status,
            reason: ExitReason::parse(&reason).ok_or_else(|| {
                UpgradeError::refused(format!("pane {id}: unknown exit reason {reason:?}"))
            })?,
            escalate_at: None,
        },
        ProcessRuntime::Held { reason } => PaneState::Held { reason },
    })
}

/// Rebuilds a pane from its snapshot record and runtime state. `conn_map`
/// turns the old server's connection ids into ours; an unsent terminal is
/// taken from `precopy` if its change count matches.
pub fn pane_from_runtime(
    rec: PaneRecord,
    rt: PaneRuntime,
    token: mio::Token,
    now: Instant,
    conn_map: &HashMap<usize, ConnId>,
    precopy: &mut HashMap<u64, (u64, Terminal)>,
) -> Result<Pane, UpgradeError> {
    let setup = PaneSetup {
        id: rt.id,
        name: rec.name,
        command: rec.command,
        cwd: PathBuf::from(rec.cwd),
        env: rec.env,
        client_env: rt.client_env.clone(),
        cols: rec.cols,
        rows: rec.rows,
        timeout: None,
        idle_timeout: rt.idle_timeout_ms.map(Duration::from_millis),
        restore: rec.restore,
        resume: rec.resume,
        // Unused: the transferred screen keeps its own.
        term: TermConfig::default(),
        shell_integration: !rec.no_shell_integration,
    };
    // The terminal first: a throwaway one from `Pane::new` would cost
    // the blackout an allocation and a drop per pane.
    let screen = match rt.screen {
        Some(screen) => screen,
        None => match precopy.remove(&rt.id) {
            Some((changes, screen)) if changes == rt.screen_changes => screen,
            _ => {
                return Err(UpgradeError::refused(format!(
                    "pane {}: its terminal was neither sent nor pre-copied",
                    PaneId::new(rt.id)
                )));
            }
        },
    };
    let carried = Carried {
        state: process_from_runtime(PaneId::new(rt.id), rt.process)?,
        created_unix_ms: rt.created_unix_ms,
        run: rt.run,
        kill_reason: rt.kill_reason.as_deref().and_then(ExitReason::parse),
        kill_deadline: rt
            .kill_escalate_in_ms
            .map(|ms| now + Duration::from_millis(ms)),
        last_output: now
            .checked_sub(Duration::from_millis(rt.idle_ms))
            .unwrap_or(now),
        timeout_at: rt.timeout_in_ms.map(|ms| now + Duration::from_millis(ms)),
        pending_acks: rt
            .acks
            .into_iter()
            .filter_map(|a| {
                conn_map.get(&a.conn).map(|conn| PendingAck {
                    conn: *conn,
                    rpc_id: a.rpc_id,
                    end_offset: a.end_offset,
                    duplicate: a.duplicate,
                })
            })
            .collect(),
        history_dirty: rt.history_dirty,
        prompts_seen: rt.prompts_seen,
        commands_finished: rt.commands_finished,
        last_command_exit: rt.last_command_exit,
        output_bytes: rt.output_bytes,
        shell_injected: rt
            .shell_injected
            .as_deref()
            .and_then(|s| crate::shell::Shell::from_program(s.as_ref())),
    };
    let mut pane = Pane::carried_over(setup, token, screen, carried);
    pane.restore_input_state(rt.input, rt.written_total, rt.recent_requests);
    Ok(pane)
}

// --- connections and waits --------------------------------------------------

/// A connection's state for a live upgrade. Output is carried from the
/// start of the message being written, with how much of it already went
/// out, so the new server continues the stream byte for byte.
pub fn conn_runtime(c: &Connection, id: ConnId, now: Instant) -> ConnRuntime {
    let (out, written, msg_ends) = c.output_state();
    ConnRuntime {
        id,
        peer_uid: c.peer.uid,
        peer_pid: c.peer.pid,
        attached: c.attachment().map(|a| AttachRuntime {
            pane: a.pane,
            read_only: a.read_only,
            cols: a.cols,
            rows: a.rows,
            since_unix_ms: a.since_unix_ms,
            active: a.active,
            flat: a.view.flat,
            when_behind: a.view.when_behind,
            stale: a.view.stale,
            tab: a.view.tab.as_ref().map(|v| v.tab),
            prefix: a.view.tab.as_ref().map(|v| v.prefix),
            zoom: a.view.tab.as_ref().map(|v| v.zoom),
            scroll: a.view.tab.as_ref().and_then(|v| v.scroll.spec()),
        }),
        subscribed: c.subscribed,
        replay_after: c.replay_after,
        inbuf: c.inbuf.clone(),
        out: out.to_vec(),
        written,
        msg_ends,
        closing_in_ms: c.closing.map(|at| ms_until(at, now)),
    }
}

/// Rebuilds a connection handed over by the previous server.
pub fn conn_from_runtime(
    rt: ConnRuntime,
    token: mio::Token,
    stream: mio::net::UnixStream,
    now: Instant,
) -> Result<Connection, UpgradeError> {
    let peer = PeerCred {
        uid: rt.peer_uid,
        pid: rt.peer_pid,
    };
    let mut conn = Connection::new(token, stream, peer);
    conn.restore_output_state(rt.out, rt.written, rt.msg_ends)
        .map_err(|e| UpgradeError::refused(format!("connection {}: {e}", rt.id)))?;
    if let Some(rt) = &rt.attached {
        let mut a = Attachment::new(rt.pane, rt.read_only, (rt.cols, rt.rows), rt.active);
        a.since_unix_ms = rt.since_unix_ms;
        a.view.flat = rt.flat;
        a.view.when_behind = rt.when_behind;
        // Drawn from the model at the first flush (the caller marks
        // `stale_views`); it may have been cut off from raw output.
        a.view.stale = rt.stale;
        a.view.cut_off = rt.stale;
        if let Some(tab) = rt.tab {
            let prefix = rt.prefix.unwrap_or(0x1c);
            // The attached pane is the view's focus.
            let focus = crate::model::PaneId::new(rt.pane);
            let mut view = crate::server::clients::tab_view::TabView::new(
                tab,
                focus,
                rt.zoom.unwrap_or(false),
                prefix,
            );
            if let Some(scroll) = &rt.scroll {
                view.scroll.resume(scroll);
            }
            a.view.tab = Some(Box::new(view));
            a.view.stale = true;
        }
        conn.mode = ConnMode::Attached(a);
    }
    conn.subscribed = rt.subscribed;
    conn.replay_after = rt.replay_after;
    conn.inbuf = rt.inbuf;
    conn.closing = rt.closing_in_ms.map(|ms| now + Duration::from_millis(ms));
    Ok(conn)
}

pub fn wait_runtime(w: &Wait, now: Instant) -> WaitRuntime {
    use WaitCondition as C;
    let (mut regex, mut include_screen, mut after_command_start) = (false, false, false);
    let (kind, text, n) = match &w.condition {
        C::Exit => ("exit", None, 0),
        C::Text(t) => {
            regex = t.regex.is_some();
            include_screen = t.include_screen;
            after_command_start = t.after_command_start;
            ("text", Some(t.text.clone()), t.skip_lines)
        }
        C::Idle(d) => ("idle", None, d.as_millis() as u64),
        C::Prompt(n) => ("prompt", None, *n),
        C::CommandFinished(n) => ("command_finished", None, *n),
    };
    WaitRuntime {
        conn: w.conn,
        rpc_id: w.rpc_id.clone(),
        pane: w.pane,
        kind: kind.into(),
        text,
        n,
        regex,
        include_screen,
        after_command_start,
        timeout_in_ms: w.deadline.map(|d| ms_until(d, now)),
    }
}

/// A parked wait handed over, for `conn` (ours), with its timeout left.
pub fn wait_from_runtime(
    w: WaitRuntime,
    conn: ConnId,
) -> Result<(Wait, Option<Duration>), UpgradeError> {
    use WaitCondition as C;
    let condition = match w.kind.as_str() {
        "exit" => C::Exit,
        "text" => {
            let text = w.text.unwrap_or_default();
            let regex = w
                .regex
                .then(|| crate::server::requests::wait_regex(&text))
                .transpose()
                .map_err(|e| UpgradeError::refused(format!("a parked wait's regex: {e}")))?;
            // A handed-over pane's output log starts empty at position 0,
            // so the wait goes on with the output that follows: what the
            // old server read was searched already.
            C::Text(crate::server::waits::TextWait {
                text,
                regex,
                include_screen: w.include_screen,
                from: 0,
                skip_lines: w.n,
                after_command_start: w.after_command_start,
                scanned: 0,
            })
        }
        "idle" => C::Idle(Duration::from_millis(w.n)),
        "prompt" => C::Prompt(w.n),
        "command_finished" => C::CommandFinished(w.n),
        other => {
            return Err(UpgradeError::refused(format!(
                "unknown wait kind {other:?}"
            )));
        }
    };
    let wait = Wait {
        conn,
        rpc_id: w.rpc_id,
        pane: w.pane,
        condition,
        deadline: None,
        seen_pushed: 0,
    };
    Ok((wait, w.timeout_in_ms.map(Duration::from_millis)))
}

// --- the server as a whole ----------------------------------------------------

/// What the capture decided travels in the blackout's manifest.
pub struct Capture<'a> {
    pub records: Vec<PaneRecord>,
    pub runtimes: Vec<PaneRuntime<&'a Terminal>>,
    pub unchanged_panes: Vec<u64>,
    pub conns: Vec<ConnId>,
    pub event_ring: Vec<serde_json::Value>,
    pub events_after: Option<u64>,
    pub binary: &'a std::path::Path,
    pub caller: Option<(ConnId, serde_json::Value)>,
    pub fd_ids: Vec<FdName>,
}

impl Server {
    /// The manifest of the blackout: the server's own state, plus what
    /// the capture chose of panes, connections and events.
    pub(in crate::server) fn capture_manifest<'a>(
        &'a self,
        c: Capture<'a>,
        now: Instant,
    ) -> Manifest<&'a Terminal> {
        Manifest {
            handoff_version: HANDOFF_VERSION,
            from_version: crate::protocol::SERVER_VERSION.to_string(),
            from_pid: std::process::id(),
            from_binary: Some(self.exe_path.to_string_lossy().into_owned()),
            generation: self.generation + 1,
            namespace: self.paths.namespace.clone(),
            snapshot: self.build_snapshot_with(c.records),
            panes: c.runtimes,
            unchanged_panes: c.unchanged_panes,
            conns: c
                .conns
                .iter()
                .map(|id| conn_runtime(&self.conns[id], *id, now))
                .collect(),
            waits: self.waits.values().map(|w| wait_runtime(w, now)).collect(),
            event_last_seq: self.events.last_seq(),
            event_ring: c.event_ring,
            events_after: c.events_after,
            persist_revision: self.persist.revision,
            history: self.persist.history,
            started_unix_ms: self.started_unix_ms,
            socket_dev: self.socket_dev_ino.0,
            socket_ino: self.socket_dev_ino.1,
            exe_path: c.binary.to_string_lossy().into_owned(),
            next_wait_id: self.next_wait_id,
            caller: c.caller.map(|(conn, rpc_id)| Caller { conn, rpc_id }),
            fd_ids: c.fd_ids,
            recovery: None,
            attach_env: self.attach_env.clone(),
        }
    }

    /// Takes the server-wide part of a manifest: identity, counters, the
    /// event log (continuing the pre-copied one) and the tree. Panes,
    /// connections and waits are left in `m` for the import.
    pub(super) fn apply_manifest_state(
        &mut self,
        m: &mut Manifest,
        precopied_events: (u64, Vec<serde_json::Value>),
    ) -> Result<(), UpgradeError> {
        self.socket_dev_ino = (m.socket_dev, m.socket_ino);
        self.persist.history = m.history;
        self.generation = m.generation;
        self.started_unix_ms = m.started_unix_ms;
        self.exe_path = PathBuf::from(&m.exe_path);
        self.succession.took_over_from(serde_json::json!({
            "pid": m.from_pid,
            "version": m.from_version,
            "binary": m.from_binary,
        }));
        self.next_wait_id = m.next_wait_id;
        self.attach_env = m.attach_env.take();
        let ring = std::mem::take(&mut m.event_ring);
        self.events = match (m.events_after, precopied_events) {
            (None, _) => crate::server::events::EventLog::from_parts(m.event_last_seq, ring),
            (Some(after), (seq, precopied)) if after == seq => {
                let mut log = crate::server::events::EventLog::from_parts(seq, precopied);
                log.extend(m.event_last_seq, ring);
                log
            }
            (Some(after), _) => {
                return Err(UpgradeError::refused(format!(
                    "the manifest continues the events after {after}, which the pre-copy did not carry"
                )));
            }
        };
        self.persist.revision = m.persist_revision;
        self.tree = crate::persist::tree::strict(
            &m.snapshot,
            m.unchanged_panes.iter().map(|&p| PaneId::new(p)),
        )
        .map_err(|e| UpgradeError::refused(format!("manifest snapshot: {e}")))?;
        self.panes.set_next_id(m.snapshot.counters.pane);
        Ok(())
    }
}
