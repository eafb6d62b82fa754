//! Connection I/O: accepting (peer uid checked), reading requests and
//! frames at most a budget per wakeup, dispatching each complete line or
//! frame, queueing responses and events, flushing, and closing.

use super::connection::{ConnId, ConnMode, Connection, Polls, ReadOutcome};
use crate::protocol::events::Event;
use crate::protocol::{self, frame};
use crate::server::timers::TimerKind;
use crate::server::{Server, Source};
use mio::Token;
use std::io;
use std::time::{Duration, Instant};

/// Request bytes taken from one client per wakeup.
const CONN_READ_BUDGET: usize = 256 * 1024;
/// How long a connection we are closing gets to take its last output.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

impl Server {
    pub(in crate::server) fn accept_all(&mut self) {
        loop {
            let stream = match crate::transport::listener::accept(
                &mut self.listener,
                self.poll.registry(),
            ) {
                Ok(stream) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    // EMFILE and friends: the listener will not be reported
                    // ready again for the clients left pending, so a timer
                    // retries (`fd_budget.rs`), without spinning.
                    self.on_accept_starved(&e);
                    return;
                }
            };
            self.on_accept_fed();
            self.admit(stream);
        }
    }

    /// Serves an accepted connection if its peer is our uid.
    pub(in crate::server) fn admit(&mut self, mut stream: crate::transport::listener::Stream) {
        let Some(peer) = self.peer_of(&stream) else {
            return;
        };
        let token = Token(self.next_token);
        // Readable edges only on Unix: writable ones are asked for once a
        // write finds the socket full (`Connection::sync_write_interest`).
        if let Err(e) =
            crate::transport::listener::register_conn(self.poll.registry(), &mut stream, token)
        {
            self.log
                .log("accept_failed", &format!("registering a connection: {e}"));
            return;
        }
        self.alloc_token(Source::Conn(token.0));
        let mut conn = Connection::new(token, stream, peer);
        conn.note_registered(!crate::transport::listener::WRITE_INTEREST_FOLLOWS_OUTPUT);
        self.conns.insert(token.0, conn);
    }

    /// The peer of an accepted connection, if it is our user (else logged).
    pub(in crate::server) fn peer_of(
        &mut self,
        stream: &crate::transport::listener::Stream,
    ) -> Option<crate::sys::PeerCred> {
        match crate::transport::listener::peer_of(stream) {
            Ok(peer) => Some(peer),
            Err(why) => {
                self.log.log("accept_refused", &why);
                None
            }
        }
    }

    /// A connection is ready to read (or hung up). Writes wait for the
    /// flush pass; a writable socket is only noted for it.
    pub(in crate::server) fn on_conn_ready(&mut self, id: ConnId, event: &mio::event::Event) {
        if event.is_writable()
            && let Some(conn) = self.conns.get_mut(&id)
        {
            conn.write_ready();
        }
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            // EPOLLHUP: the peer closed both ways, not just its writing side.
            let hung_up = event.is_write_closed() || event.is_error();
            self.read_conn(id, hung_up);
        }
    }

    pub(in crate::server) fn read_conn(&mut self, id: ConnId, hung_up: bool) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        // Held input: the socket is left unread until the pane takes it,
        // so a client typing faster than its program reads is slowed down
        // by its own socket filling up (`attach.rs`).
        if conn.attachment().is_some_and(|a| a.input_held.is_some()) {
            return;
        }
        let limit = match conn.mode {
            ConnMode::Rpc => protocol::MAX_LINE_BYTES + 1,
            ConnMode::Attached(_) => frame::MAX_FRAME_PAYLOAD + frame::HEADER_LEN,
        };
        let outcome = conn.read_some(CONN_READ_BUDGET, limit);
        if conn.refused_fds > 0 {
            let n = std::mem::take(&mut conn.refused_fds);
            self.log.log(
                "fds_refused",
                &format!(
                    "client {id} sent {n} fd(s) beyond the one a frame may claim (or cut off by \
                     the kernel); closed them"
                ),
            );
        }
        self.handle_input_buffer(id);
        self.enforce_client_input_budget(id);
        match outcome {
            ReadOutcome::Drained => {}
            ReadOutcome::Budget => self.backlog.push_back(Source::Conn(id)),
            ReadOutcome::Closed => {
                let mut was_attached = false;
                if let Some(conn) = self.conns.get_mut(&id) {
                    // Answer what was asked before the peer shut its side, then close.
                    conn.inbuf.clear();
                    // Its terminal is its user's again at once: not one
                    // more byte from us (the client may have restored it).
                    conn.leave_direct(Polls::of(&self.poll, &self.arrivals), "closed", false);
                    if let Some(pane) = conn.attached_pane() {
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
                ConnMode::Attached(_) => match frame::decode(rest) {
                    Ok(Some((f, used))) => {
                        let f = frame::ClientFrame::of(&f);
                        if let frame::ClientFrame::Input(payload) = f
                            && self.hold_input(id, payload.len())
                        {
                            break;
                        }
                        start += used;
                        self.handle_frame(id, f);
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
                ConnMode::Attached(_) => 0,
            };
            conn.release_idle_inbuf();
        }
    }

    /// Marks a connection to be closed once its queued output is written.
    pub(in crate::server) fn close_after_flush(&mut self, id: ConnId) {
        if let Some(conn) = self.conns.get_mut(&id)
            && conn.closing.is_none()
        {
            conn.closing = Some(Instant::now() + CLOSE_GRACE);
            self.timers
                .add(Instant::now() + CLOSE_GRACE, TimerKind::ConnClose(id));
        }
    }

    /// A closing connection's grace period ended: close it even if its
    /// output is not all out.
    pub(in crate::server) fn on_close_deadline(&mut self, id: ConnId, now: Instant) {
        if self
            .conns
            .get(&id)
            .is_some_and(|c| c.closing.is_some_and(|at| at <= now))
        {
            self.close_conn(id);
        }
    }

    /// Writes out what connections have queued, without the rest of
    /// `flush_conns` (closing finished connections, resuming paused panes),
    /// which runs at the end of the turn and sees a failed write again.
    pub(in crate::server) fn flush_queued_output(&mut self) {
        if self.serving.is_paused() {
            return;
        }
        self.render_stale_views();
        self.write_queued();
    }

    pub(in crate::server) fn flush_conns(&mut self) {
        // While paused the connections may already belong to the new server:
        // not a byte may go out from here.
        if self.serving.is_paused() {
            return;
        }
        self.render_stale_views();
        let now = Instant::now();
        let mut dead = Vec::new();
        let polls = Polls::of(&self.poll, &self.arrivals);
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
            conn.sync_write_interest(polls);
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
        self.draw_caught_up_views();
        self.resume_paused_panes();
    }

    /// A `when_behind: redraw` client that was too far behind to be drawn
    /// (`render_stale_views`) may have caught up in the flush just made:
    /// it is drawn and flushed now, since nothing else may wake the loop
    /// for it (its socket is watched for room only while output waits).
    fn draw_caught_up_views(&mut self) {
        let due = self.stale_views
            && self.conns.values().any(|c| {
                c.attachment()
                    .is_some_and(|a| a.view.stale && a.view.redraws_when_behind())
                    && c.caught_up()
            });
        if !due {
            return;
        }
        self.render_stale_views();
        self.write_queued();
    }

    /// Writes what every connection has queued, as far as its socket
    /// takes it. A failed write is seen again by a later `flush_conns`.
    fn write_queued(&mut self) {
        let polls = Polls::of(&self.poll, &self.arrivals);
        for conn in self.conns.values_mut() {
            if conn.queued() > 0 {
                let _ = conn.flush();
                conn.sync_write_interest(polls);
            }
        }
    }

    pub(in crate::server) fn close_conn(&mut self, id: ConnId) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.sources.remove(&conn.token);
        if let Some(mut tty) = conn.direct.take() {
            tty.deregister(Polls::of(&self.poll, &self.arrivals));
        }
        if let Some(token) = conn.tty_token {
            self.sources.remove(&token);
        }
        if let Some(pane) = conn.attached_pane() {
            self.note_detached(id, pane, "connection closed");
        }
        self.waits.retain(|_, w| w.conn != id);
    }

    /// Sends a response line, disconnecting a client that stopped reading.
    pub(in crate::server) fn respond(
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
                .any(|p| p.pending_acks().iter().any(|a| a.conn == id))
    }

    /// Records an event and pushes it to subscribers.
    pub(in crate::server) fn emit(&mut self, event: Event) {
        let line = protocol::event_line(self.events.push(&event));
        self.keeper_event_logged();
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
}
