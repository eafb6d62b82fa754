//! The loop: poll with the nearest deadline as timeout, dispatch readiness by
//! token to short handlers, then a post-pass that flushes clients and closes
//! finished connections. Nothing here blocks: every fd is non-blocking, every
//! read has a per-wakeup budget, every queue a bound.

use super::connection::{
    ConnId, ConnMode, Connection, OUTPUT_HIGH_WATER, OUTPUT_LOW_WATER, ReadOutcome, STALL_LIMIT,
};
use super::pane::{ExitReason, PaneState};
use super::timers::TimerKind;
use super::{DISK, LISTENER, PREDECESSOR, SIGNALS, Server, Source, UPGRADE};
use crate::protocol::methods::ExitStatus;
use crate::protocol::{self, frame};
use crate::term::TermEvent;
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use std::io;
use std::time::{Duration, Instant};

/// Output bytes taken from one pane per wakeup, so a flooding pane cannot
/// starve the others or the clients.
const PANE_READ_BUDGET: usize = 64 * 1024;
/// Output drained from a pane when its process exits, so the exit is
/// reported after the output the process wrote before it.
const EXIT_DRAIN_BUDGET: usize = 1 << 20;
/// Request bytes taken from one client per wakeup.
const CONN_READ_BUDGET: usize = 256 * 1024;
/// How long a connection we are closing gets to take its last output.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How often the clients holding a paused pane are checked for progress.
const STALL_CHECK: Duration = Duration::from_secs(1);

impl Server {
    pub(super) fn run_loop(&mut self) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        while !self.stopping {
            let timeout = if self.backlog.is_empty() {
                self.timers.poll_timeout(Instant::now())
            } else {
                Some(Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll failed: {e}"));
            }
            for event in events.iter() {
                // An earlier event of this batch may have paused us for an
                // upgrade: from then on the listener, the panes and the
                // connections may already be the new server's, and a byte
                // read here would be lost to it (the manifest is written).
                // Only the upgrade's own sources are still ours.
                if self.serving.is_paused()
                    && !matches!(event.token(), SIGNALS | DISK | UPGRADE | PREDECESSOR)
                {
                    continue;
                }
                match event.token() {
                    LISTENER => self.accept_all(),
                    SIGNALS => self.on_signals(),
                    DISK => self.on_save_results(),
                    UPGRADE => self.on_upgrade_readable(),
                    PREDECESSOR => self.on_predecessor_readable(),
                    token => match self.sources.get(&token).copied() {
                        Some(Source::Pane(id)) => {
                            if event.is_writable() {
                                self.flush_pane_input(id);
                            }
                            if event.is_readable() || event.is_read_closed() || event.is_error() {
                                self.read_pane_paced(id);
                            }
                        }
                        Some(Source::Conn(id))
                            if event.is_readable()
                                || event.is_read_closed()
                                || event.is_error() =>
                        {
                            // EPOLLHUP: the peer closed both ways, not just
                            // its writing side.
                            let hung_up = event.is_write_closed() || event.is_error();
                            self.read_conn(id, hung_up);
                        }
                        Some(Source::Conn(_)) => {}
                        Some(Source::Pidfd(id)) => self.on_pidfd(id),
                        None => {}
                    },
                }
            }
            let mut backlog = std::mem::take(&mut self.backlog);
            if self.serving.is_paused() {
                // The same while paused; a rollback puts every pane and
                // connection back on the backlog.
                backlog.clear();
            }
            for source in backlog {
                match source {
                    Source::Pane(id) => self.read_pane_paced(id),
                    Source::Conn(id) => self.read_conn(id, false),
                    Source::Pidfd(id) => self.on_pidfd(id),
                }
            }
            self.fire_timers();
            self.flush_conns();
        }
        Ok(())
    }

    pub(super) fn alloc_token(&mut self, source: Source) -> Token {
        let token = Token(self.next_token);
        self.next_token += 1;
        self.sources.insert(token, source);
        token
    }

    pub(super) fn accept_all(&mut self) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(pair) => pair,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: log and try again on the next wakeup
                    // rather than spin.
                    self.log
                        .log("accept_failed", &format!("accepting a connection: {e}"));
                    return;
                }
            };
            let peer = match crate::sys::peer_cred(&stream) {
                Ok(peer) => peer,
                Err(e) => {
                    self.log.log(
                        "accept_refused",
                        &format!("cannot read peer credentials: {e}"),
                    );
                    continue;
                }
            };
            let uid = crate::sys::current_uid();
            if peer.uid != uid {
                self.log.log(
                    "accept_refused",
                    &format!(
                        "refused connection from uid {} (pid {}); this server serves uid {uid} only",
                        peer.uid,
                        peer.pid.map_or("unknown".to_string(), |p| p.to_string())
                    ),
                );
                continue;
            }
            let token = Token(self.next_token);
            if let Err(e) = self.poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            ) {
                self.log
                    .log("accept_failed", &format!("registering a connection: {e}"));
                continue;
            }
            self.alloc_token(Source::Conn(token.0));
            self.conns
                .insert(token.0, Connection::new(token, stream, peer));
        }
    }

    fn on_signals(&mut self) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for signal in pending {
            match signal {
                SIGCHLD => self.reap_children(),
                SIGTERM | SIGINT => {
                    self.log.log(
                        "stopping",
                        &format!("received {}", super::pane::signal_name(signal)),
                    );
                    self.stop_during_upgrade();
                    self.stopping = true;
                }
                // `systemctl reload` (or the reaper forwarding it): upgrade
                // to the binary at our own path.
                SIGHUP => self.start_upgrade(None, crate::protocol::methods::Upgrade::default()),
                _ => {}
            }
        }
    }

    /// Reaps every exited child; SIGCHLD coalesces, so one signal may stand
    /// for many exits.
    pub(super) fn reap_children(&mut self) {
        loop {
            let (pid, status) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => (pid.as_raw(), ExitStatus::Code(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) => {
                    (pid.as_raw(), ExitStatus::Signal(sig as i32))
                }
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(_) => continue,
            };
            if self.upgrade.child_pid() == Some(pid) {
                self.on_upgrade_child_exit(status);
                continue;
            }
            // While paused the manifest already describes this pane as
            // running; the new server learns the exit from the pidfd. Kept
            // for a rollback.
            if let Some((pid, status)) = self.serving.defer_exit(pid, status) {
                self.on_child_exit(pid, status);
            }
        }
    }

    /// A reaped child: if it is a running pane's process, the pane exited.
    pub(super) fn on_child_exit(&mut self, pid: i32, status: ExitStatus) {
        let pane = self
            .panes
            .values()
            .find(|p| p.is_running() && p.child().is_some_and(|c| c.pid == pid))
            .map(|p| p.id);
        if let Some(id) = pane {
            self.on_pane_exit(id, status);
        }
    }

    pub(super) fn on_pane_exit(&mut self, id: u64, status: ExitStatus) {
        self.read_pane(id, EXIT_DRAIN_BUDGET);
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let reason = pane.kill_reason.unwrap_or(ExitReason::Exited);
        let PaneState::Running(child) = pane.state else {
            return;
        };
        pane.state = PaneState::Exited {
            child,
            status,
            reason,
        };
        pane.hung_up_master = None;
        pane.discard_input();
        let unwritten = std::mem::take(&mut pane.pending_acks);
        let exit = pane.exit_json();
        let public_id = pane.public_id();
        for ack in unwritten {
            let err = protocol::RpcError::new(
                protocol::ErrorCode::PaneExited,
                format!("pane {public_id} exited before this input was written"),
            );
            self.respond(ack.conn, &ack.rpc_id, Err(err));
        }
        self.emit(
            "pane.exited",
            serde_json::json!({ "pane": public_id, "exit": exit }),
        );
        self.resolve_waits_on_exit(id);
        let payload =
            serde_json::json!({ "reason": "pane_exited", "pane": public_id, "exit": exit });
        self.end_attachments(id, &payload);
    }

    /// Reads a pane's output unless one of its attached clients is over the
    /// high-water mark: then the pane is paused instead, so its program
    /// blocks on a full PTY as it would with a terminal that stops reading,
    /// until `flush_conns` sees the clients catch up. (The drain at exit does
    /// not pause: the exit must come after all output.)
    fn read_pane_paced(&mut self, id: u64) {
        if self.attached_output_over(id, OUTPUT_HIGH_WATER) {
            if let Some(pane) = self.panes.get_mut(&id) {
                pane.output_paused = true;
                if !pane.stall_timer {
                    pane.stall_timer = true;
                    self.timers
                        .add(Instant::now() + STALL_CHECK, TimerKind::PaneStall(id));
                }
            }
            return;
        }
        self.read_pane(id, PANE_READ_BUDGET);
    }

    /// Whether a client attached to `pane` has more than `limit` bytes queued.
    fn attached_output_over(&self, pane: u64, limit: usize) -> bool {
        self.conns.values().any(|c| {
            matches!(c.mode, ConnMode::Attached { pane: p, .. } if p == pane)
                && c.closing.is_none()
                && c.queued() > limit
        })
    }

    /// Reads paused panes again whose clients have caught up (or left).
    fn resume_paused_panes(&mut self) {
        let paused: Vec<u64> = self
            .panes
            .values()
            .filter(|p| p.output_paused)
            .map(|p| p.id)
            .collect();
        for id in paused {
            if !self.attached_output_over(id, OUTPUT_LOW_WATER)
                && let Some(pane) = self.panes.get_mut(&id)
            {
                pane.output_paused = false;
                self.backlog.push_back(Source::Pane(id));
            }
        }
    }

    /// Disconnects the clients that keep a paused pane paused without taking
    /// any output for [`STALL_LIMIT`]: one stuck client must not freeze the
    /// pane for everyone.
    fn check_stalled_clients(&mut self, pane: u64, now: Instant) {
        let Some(p) = self.panes.get_mut(&pane) else {
            return;
        };
        if !p.output_paused {
            p.stall_timer = false;
            return;
        }
        let stuck: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                matches!(c.mode, ConnMode::Attached { pane: p, .. } if p == pane)
                    && c.closing.is_none()
                    && c.queued() > OUTPUT_LOW_WATER
                    && now.duration_since(c.last_progress) >= STALL_LIMIT
            })
            .map(|(id, _)| *id)
            .collect();
        for id in stuck {
            self.log.log(
                "client_too_slow",
                &format!(
                    "client {id} took no output for {} s while its pane was paused; disconnected",
                    STALL_LIMIT.as_secs()
                ),
            );
            let payload = serde_json::json!({
                "reason": "too_slow",
                "message": "disconnected: this client stopped reading output; reattach to resume"
            });
            self.end_attachment(id, &payload, true);
        }
        self.timers
            .add(now + STALL_CHECK, TimerKind::PaneStall(pane));
    }

    /// Reads a pane's output (at most `budget` bytes), feeds the screen and
    /// forwards to attached clients.
    pub(super) fn read_pane(&mut self, id: u64, budget: usize) {
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let Some(master) = &pane.master else { return };
        let mut buf = [0u8; 16 * 1024];
        let mut forward = Vec::new();
        let mut taken = 0;
        let mut ended = false;
        loop {
            match master.read(&mut buf) {
                Ok(0) => {
                    ended = true;
                    break;
                }
                Ok(n) => {
                    pane.screen.feed(&buf[..n], &mut forward);
                    taken += n;
                    if taken >= budget {
                        self.backlog.push_back(Source::Pane(id));
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EIO: every slave fd is closed. See the PtyMaster::read doc.
                Err(_) => {
                    ended = true;
                    break;
                }
            }
        }
        if taken > 0 {
            pane.last_output = Instant::now();
            pane.history_dirty = true;
        }
        let replies = pane.screen.take_replies();
        if !replies.is_empty() {
            pane.queue_reply(&replies);
        }
        let term_events = pane.screen.take_events();
        if ended && let Some(master) = pane.master.take() {
            // Deregister before closing: epoll tracks the open file
            // description, not the fd number.
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&master.raw_fd()));
            if pane.is_running() {
                pane.hung_up_master = Some(master);
            }
        }
        if !replies.is_empty() {
            self.flush_pane_input(id);
        }
        if !forward.is_empty() {
            self.broadcast_output(id, &forward);
        }
        if taken > 0 {
            self.check_text_waits(id);
        }
        if !term_events.is_empty() {
            self.on_term_events(id, term_events);
        }
    }

    /// Turns what the terminal model noticed into events (and answers waits
    /// on prompts and finished commands).
    fn on_term_events(&mut self, id: u64, term_events: Vec<TermEvent>) {
        let pane_id = format!("p{id}");
        let mut rang = false;
        for event in term_events {
            match event {
                // A program ringing in a loop gets one event per read batch.
                TermEvent::Bell if rang => {}
                TermEvent::Bell => {
                    rang = true;
                    self.emit("pane.bell", serde_json::json!({ "pane": pane_id }));
                }
                TermEvent::Title(title) => {
                    self.emit(
                        "pane.title",
                        serde_json::json!({ "pane": pane_id, "title": title }),
                    );
                }
                TermEvent::Cwd(path) => {
                    let dir = std::path::PathBuf::from(&path);
                    if let Some(pane) = self.panes.get_mut(&id)
                        && dir.is_absolute()
                        && pane.cwd != dir
                    {
                        pane.cwd = dir;
                        self.mark_dirty();
                    }
                    self.emit(
                        "pane.cwd",
                        serde_json::json!({ "pane": pane_id, "cwd": path }),
                    );
                }
                TermEvent::Prompt => {
                    if let Some(pane) = self.panes.get_mut(&id) {
                        pane.prompts_seen += 1;
                    }
                    self.emit("pane.prompt", serde_json::json!({ "pane": pane_id }));
                    self.on_shell_mark(id);
                }
                TermEvent::CommandStart => {
                    self.emit(
                        "pane.command_started",
                        serde_json::json!({ "pane": pane_id }),
                    );
                }
                TermEvent::CommandFinished { exit } => {
                    if let Some(pane) = self.panes.get_mut(&id) {
                        pane.commands_finished += 1;
                        pane.last_command_exit = exit;
                    }
                    self.emit(
                        "pane.command_finished",
                        serde_json::json!({ "pane": pane_id, "exit": exit }),
                    );
                    self.on_shell_mark(id);
                }
            }
        }
    }

    /// Writes pending input to a pane and acknowledges the requests whose
    /// bytes are now all in the PTY.
    pub(super) fn flush_pane_input(&mut self, id: u64) {
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        if let Err(e) = pane.flush_input() {
            // The slave side is gone; the exit will be reported by SIGCHLD.
            pane.discard_input();
            let msg = format!("writing input to pane {}: {e}", pane.public_id());
            self.log.log("input_failed", &msg);
        }
        let written = pane.written_total();
        let (prompts, finished) = (pane.prompts_seen, pane.commands_finished);
        let mut done = Vec::new();
        pane.pending_acks.retain_mut(|ack| {
            if ack.end_offset <= written {
                done.push((ack.conn, std::mem::take(&mut ack.rpc_id), ack.duplicate));
                false
            } else {
                true
            }
        });
        for (conn, rpc_id, duplicate) in done {
            self.respond(
                conn,
                &rpc_id,
                Ok(serde_json::json!({
                    "written": true,
                    "duplicate": duplicate,
                    "prompts_seen": prompts,
                    "commands_finished": finished,
                })),
            );
        }
    }

    fn broadcast_output(&mut self, pane: u64, bytes: &[u8]) {
        let mut too_slow = Vec::new();
        for (id, conn) in &mut self.conns {
            if matches!(conn.mode, ConnMode::Attached { pane: p, .. } if p == pane)
                && conn.closing.is_none()
                && !conn.queue_frame(frame::server::OUTPUT, bytes)
            {
                too_slow.push(*id);
            }
        }
        for id in too_slow {
            self.log.log(
                "client_too_slow",
                &format!(
                    "client {id} fell {} MiB behind; disconnected",
                    super::connection::MAX_OUTPUT_QUEUE >> 20
                ),
            );
            let payload = serde_json::json!({
                "reason": "too_slow",
                "message": "disconnected: this client read output too slowly and its queue filled; reattach to resume"
            });
            self.end_attachment(id, &payload, true);
        }
    }

    fn read_conn(&mut self, id: ConnId, hung_up: bool) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let limit = match conn.mode {
            ConnMode::Rpc => protocol::MAX_LINE_BYTES + 1,
            ConnMode::Attached { .. } => frame::MAX_FRAME_PAYLOAD + frame::HEADER_LEN,
        };
        let outcome = conn.read_some(CONN_READ_BUDGET, limit);
        self.handle_input_buffer(id);
        self.enforce_partial_line_budget(id);
        match outcome {
            ReadOutcome::Drained => {}
            ReadOutcome::Budget => self.backlog.push_back(Source::Conn(id)),
            ReadOutcome::Closed => {
                let mut was_attached = false;
                if let Some(conn) = self.conns.get_mut(&id) {
                    // Answer what was asked before the peer shut its side, then close.
                    conn.inbuf.clear();
                    if let ConnMode::Attached { pane, .. } = conn.mode {
                        was_attached = true;
                        conn.mode = ConnMode::Rpc;
                        self.note_detached(id, pane, "connection closed");
                    }
                }
                // A peer that shut only its writing side (socat and `nc -U` do
                // at the end of their input) still reads: keep the connection
                // until the parked waits and input acks it is owed are sent
                // (`respond` closes it then).
                if hung_up || was_attached || !self.owes_answers(id) {
                    self.close_after_flush(id);
                } else if let Some(conn) = self.conns.get_mut(&id) {
                    conn.half_closed = true;
                }
            }
        }
    }

    /// Handles every complete line or frame received on a connection.
    fn handle_input_buffer(&mut self, id: ConnId) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let buf = std::mem::take(&mut conn.inbuf);
        // How much of a partial line earlier reads already scanned: a line
        // dripped a byte at a time is scanned once, not once per read.
        let mut scanned = std::mem::take(&mut conn.line_scanned);
        let mut start = 0;
        loop {
            let Some(conn) = self.conns.get(&id) else {
                return;
            };
            if conn.closing.is_some() {
                start = buf.len();
                scanned = 0;
                break;
            }
            let rest = &buf[start..];
            match conn.mode {
                ConnMode::Rpc => {
                    let skip = std::mem::take(&mut scanned).min(rest.len());
                    if let Some(nl) = rest[skip..].iter().position(|&b| b == b'\n') {
                        let nl = skip + nl;
                        start += nl + 1;
                        self.handle_line(id, &rest[..nl]);
                    } else {
                        scanned = rest.len();
                        if rest.len() > protocol::MAX_LINE_BYTES {
                            let err = protocol::RpcError::new(
                                protocol::ErrorCode::TooLarge,
                                format!(
                                    "request line over {} bytes; the connection is closed because the next request cannot be found",
                                    protocol::MAX_LINE_BYTES
                                ),
                            );
                            self.respond(id, &serde_json::Value::Null, Err(err));
                            self.close_after_flush(id);
                            start = buf.len();
                        }
                        break;
                    }
                }
                ConnMode::Attached { .. } => match frame::decode(rest) {
                    Ok(Some((f, used))) => {
                        let (kind, payload) = (f.kind, f.payload);
                        start += used;
                        self.handle_frame(id, kind, payload);
                    }
                    Ok(None) => break,
                    Err(frame::DecodeError::TooLarge(len)) => {
                        let payload = serde_json::json!({
                            "reason": "protocol_error",
                            "message": format!("frame of {len} bytes is over the {} byte limit", frame::MAX_FRAME_PAYLOAD)
                        });
                        self.end_attachment(id, &payload, false);
                        start = buf.len();
                        break;
                    }
                },
            }
        }
        if let Some(conn) = self.conns.get_mut(&id) {
            let mut rest = buf;
            rest.drain(..start.min(rest.len()));
            rest.append(&mut conn.inbuf);
            conn.inbuf = rest;
            conn.line_scanned = match conn.mode {
                ConnMode::Rpc => scanned.min(conn.inbuf.len()),
                ConnMode::Attached { .. } => 0,
            };
            conn.release_idle_inbuf();
        }
    }

    /// Marks a connection to be closed once its queued output is written.
    pub(super) fn close_after_flush(&mut self, id: ConnId) {
        if let Some(conn) = self.conns.get_mut(&id)
            && conn.closing.is_none()
        {
            conn.closing = Some(Instant::now() + CLOSE_GRACE);
            self.timers
                .add(Instant::now() + CLOSE_GRACE, TimerKind::ConnClose(id));
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        for timer in self.timers.expired(now) {
            let timer = match timer {
                TimerKind::Upgrade => timer,
                other => match self.serving.defer_timer(other) {
                    Some(timer) => timer,
                    None => continue,
                },
            };
            match timer {
                TimerKind::Upgrade => self.on_upgrade_timer(now),
                TimerKind::PaneTimeout(id, run)
                    if self.panes.get(&id).is_some_and(|p| p.run == run) =>
                {
                    self.kill_pane(
                        id,
                        libc::SIGTERM,
                        super::defaults::KILL_GRACE,
                        ExitReason::Timeout,
                    );
                }
                TimerKind::PaneIdle(id, run)
                    if self.panes.get(&id).is_some_and(|p| p.run == run) =>
                {
                    self.check_idle_watchdog(id, now)
                }
                TimerKind::KillEscalate(id, run) => {
                    // Only the run the kill was for: a respawned pane's new
                    // process is not the one we were asked to kill.
                    if let Some(child) = self
                        .panes
                        .get(&id)
                        .filter(|p| p.run == run)
                        .and_then(|p| p.child())
                    {
                        signal_session(child.sid, libc::SIGKILL);
                    }
                }
                TimerKind::PaneTimeout(..) | TimerKind::PaneIdle(..) => {}
                TimerKind::WaitTimeout(wait) => self.on_wait_timeout(wait),
                TimerKind::WaitIdle(wait) => self.check_idle_wait(wait, now),
                TimerKind::Save => self.on_save_timer(now),
                TimerKind::HistoryTick => self.on_history_tick(),
                TimerKind::PaneStall(id) => self.check_stalled_clients(id, now),
                TimerKind::ConnClose(id) => {
                    if self
                        .conns
                        .get(&id)
                        .is_some_and(|c| c.closing.is_some_and(|at| at <= now))
                    {
                        self.close_conn(id);
                    }
                }
            }
        }
    }

    fn check_idle_watchdog(&mut self, id: u64, now: Instant) {
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        let Some(idle) = pane.idle_timeout else {
            return;
        };
        if !pane.is_running() {
            return;
        }
        let due = pane.last_output + idle;
        if due <= now {
            self.kill_pane(
                id,
                libc::SIGTERM,
                super::defaults::KILL_GRACE,
                ExitReason::IdleTimeout,
            );
        } else {
            self.timers.add(due, TimerKind::PaneIdle(id, pane.run));
        }
    }

    /// Sends `signal` to every process in the pane's session and SIGKILL to
    /// what is left after `grace`. Killing an exited pane does nothing.
    pub(super) fn kill_pane(&mut self, id: u64, signal: i32, grace: Duration, reason: ExitReason) {
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let PaneState::Running(child) = pane.state else {
            return;
        };
        pane.kill_reason.get_or_insert(reason);
        signal_session(child.sid, signal);
        let at = Instant::now() + grace;
        pane.kill_deadline = Some(pane.kill_deadline.map_or(at, |d| d.min(at)));
        self.timers.add(at, TimerKind::KillEscalate(id, pane.run));
    }

    pub(super) fn flush_conns(&mut self) {
        // While paused the connections may already belong to the new server:
        // not a byte may go out from here.
        if self.serving.is_paused() {
            return;
        }
        let now = Instant::now();
        let mut dead = Vec::new();
        for (id, conn) in &mut self.conns {
            let mut failed;
            // A replay refills as the socket takes it: until the socket is
            // full (its writable edge brings us back) or the replay is done.
            loop {
                super::replay::continue_replay(conn, &self.events);
                failed = conn.queued() > 0 && conn.flush().is_err();
                if failed || conn.replay_after.is_none() || conn.queued() > 0 {
                    break;
                }
            }
            let finished = conn
                .closing
                .is_some_and(|at| conn.queued() == 0 || at <= now);
            if failed || finished {
                dead.push(*id);
            }
        }
        for id in dead {
            self.close_conn(id);
        }
        self.resume_paused_panes();
    }

    pub(super) fn close_conn(&mut self, id: ConnId) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.sources.remove(&conn.token);
        if let ConnMode::Attached { pane, .. } = conn.mode {
            self.note_detached(id, pane, "connection closed");
        }
        self.waits.retain(|_, w| w.conn != id);
    }

    /// Sends a response line, disconnecting a client that stopped reading.
    pub(super) fn respond(
        &mut self,
        id: ConnId,
        rpc_id: &serde_json::Value,
        outcome: Result<serde_json::Value, protocol::RpcError>,
    ) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let line = protocol::response_line(rpc_id, outcome);
        if !conn.queue_reply(&line) {
            conn.replace_queue(b"{\"id\":null,\"error\":{\"code\":\"too_large\",\"message\":\"output queue overflow: this client stopped reading; disconnected\"}}\n");
            self.close_after_flush(id);
        } else if conn.half_closed && !self.owes_answers(id) {
            self.close_after_flush(id);
        }
    }

    /// Whether a parked wait or an input ack still owes `id` an answer.
    fn owes_answers(&self, id: ConnId) -> bool {
        self.waits.values().any(|w| w.conn == id)
            || self
                .panes
                .values()
                .any(|p| p.pending_acks.iter().any(|a| a.conn == id))
    }

    /// Records an event and pushes it to subscribers.
    pub(super) fn emit(&mut self, kind: &str, data: serde_json::Value) {
        let line = protocol::event_line(self.events.push(kind, data));
        let mut overflow = Vec::new();
        for (id, conn) in &mut self.conns {
            // A connection still replaying gets this event from the ring.
            let live = conn.subscribed && conn.replay_after.is_none();
            if live && conn.closing.is_none() && !conn.queue(&line) {
                overflow.push(*id);
            }
        }
        for id in overflow {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.replace_queue(b"{\"event\":{\"type\":\"gap\",\"message\":\"subscriber too slow: disconnected; resubscribe with since\"}}\n");
            }
            self.close_after_flush(id);
        }
    }

    /// Tells clients we are going, hangs up the panes, removes our socket.
    pub(super) fn shutdown(&mut self) {
        crate::service::notify::stopping();
        // Save first: the snapshot must describe the panes as they ran,
        // and stopping the server is no reason to forget them.
        self.final_save();
        self.emit("server.stopping", serde_json::json!({}));
        let attached: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.mode, ConnMode::Attached { .. }))
            .map(|(id, _)| *id)
            .collect();
        let payload =
            serde_json::json!({ "reason": "server_exit", "message": "the ptyd server stopped" });
        for id in attached {
            self.end_attachment(id, &payload, false);
        }
        for conn in self.conns.values_mut() {
            let _ = conn.flush();
        }
        // One pass over /proc for all sessions, not one per pane.
        let sids: Vec<i32> = self
            .panes
            .values()
            .filter_map(|p| match p.state {
                PaneState::Running(child) => Some(child.sid),
                _ => None,
            })
            .collect();
        for pid in crate::sys::sessions_members(&sids).into_values().flatten() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGHUP) };
        }
        for pane in self.panes.values_mut() {
            pane.master = None;
        }
        super::listener::unlink_if_ours(
            &self.paths.socket(),
            self.socket_dev_ino.0,
            self.socket_dev_ino.1,
        );
        self.log.log("stopped", "server stopped");
    }
}

/// Signals every process of a pane's session, including children that moved
/// to a process group of their own.
pub(super) fn signal_session(sid: i32, signal: i32) {
    for pid in crate::sys::session_members(sid) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, signal) };
    }
}
