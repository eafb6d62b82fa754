//! Input an attached client typed that its pane has no room for: held in
//! the connection's buffer (the socket not read meanwhile) until the
//! pane's program takes some, and the attachment ended, saying how much
//! was not delivered, if it takes none for [`INPUT_STALL`].

use super::connection::{ConnId, ConnMode};
use crate::protocol::frame::{self, ClientFrame};
use crate::server::panes::pane::MAX_PENDING_INPUT;
use crate::server::timers::TimerKind;
use crate::server::{Server, Source};
use serde_json::json;
use std::time::{Duration, Instant};

/// How long an attached client's input may be held (see
/// `Server::hold_input`) while its pane's program reads none of its input.
pub const INPUT_STALL: Duration = Duration::from_secs(5);

/// The payload bytes of the whole INPUT frames in `buf`.
fn input_bytes(mut buf: &[u8]) -> usize {
    let mut n = 0;
    while let Ok(Some((f, used))) = frame::decode(buf) {
        if let ClientFrame::Input(payload) = ClientFrame::of(&f) {
            n += payload.len();
        }
        buf = &buf[used..];
    }
    n
}

impl Server {
    /// Whether an INPUT frame of `len` bytes from attached client `conn`
    /// must wait: its pane's pending input has no room for it. The frame
    /// then stays in the connection's buffer and the socket is not read
    /// (back-pressure: the client's writes block, as a terminal's do when
    /// its program reads slowly) until the pane has taken half of what was
    /// pending, or, if the program reads nothing for [`INPUT_STALL`], the
    /// attachment ends with EXIT `input_overflow` (a stopped program must
    /// not freeze its client forever; typed bytes are never dropped
    /// silently).
    pub(in crate::server) fn hold_input(&mut self, conn: ConnId, len: usize) -> bool {
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        let Some(pane) = c.attachment().filter(|a| !a.read_only).map(|a| a.pane) else {
            return false;
        };
        let Some(p) = self.panes.get(&pane) else {
            return false;
        };
        if !p.is_running() || p.pending_input() + len <= MAX_PENDING_INPUT {
            return false;
        }
        let written = p.written_total();
        if let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.attachment_mut())
            && a.input_held.is_none()
        {
            let now = Instant::now();
            a.input_held = Some((written, now));
            self.input_held_for.insert(pane);
            self.timers
                .add(now + INPUT_STALL, TimerKind::InputStall(conn));
        }
        true
    }

    /// Pane `pane` has room for input again: its held clients are read
    /// again (through the backlog, since their readiness was not acted on).
    pub(in crate::server) fn release_held_input(&mut self, pane: u64) {
        self.input_held_for.remove(&pane);
        for (id, c) in &mut self.conns {
            let Some(a) = c.attachment_mut().filter(|a| a.pane == pane) else {
                continue;
            };
            if a.input_held.take().is_some() {
                self.backlog.push_back(Source::Conn(*id));
            }
            // Keys left in a client's terminal for want of room.
            if c.direct.release_held_keys() {
                self.backlog.push_back(Source::Tty(*id));
            }
        }
    }

    /// An attached client's input has been held for [`INPUT_STALL`]: if its
    /// pane's program read some input meanwhile, wait on; if it read
    /// nothing, end the attachment saying how much was not delivered.
    pub(in crate::server) fn check_input_stall(&mut self, conn: ConnId, now: Instant) {
        self.check_keys_stall(conn, now);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        // Split borrows: the held input is in `inbuf`, the hold in the mode.
        let ConnMode::Attached(a) = &mut c.mode else {
            return;
        };
        let inbuf = &mut c.inbuf;
        let (pane, Some((held_at, since))) = (a.pane, a.input_held) else {
            return;
        };
        if now.duration_since(since) < INPUT_STALL {
            return;
        }
        let Some(p) = self.panes.get(&pane) else {
            a.input_held = None;
            self.backlog.push_back(Source::Conn(conn));
            return;
        };
        if p.written_total() > held_at {
            a.input_held = Some((p.written_total(), now));
            self.timers
                .add(now + INPUT_STALL, TimerKind::InputStall(conn));
            return;
        }
        let undelivered = input_bytes(inbuf);
        a.input_held = None;
        inbuf.clear();
        let message = format!(
            "pane {} has {} bytes of input not yet read by its program (limit {MAX_PENDING_INPUT}) \
             and it read none of it for {} s; {undelivered} typed bytes were not delivered, so the \
             attachment ended. Reattach with `ptyd attach {}` once the program reads its input",
            p.public_id(),
            p.pending_input(),
            INPUT_STALL.as_secs(),
            p.public_id()
        );
        self.log.log("input_dropped", &message);
        let exit = json!({ "reason": "input_overflow", "message": message });
        self.end_attachment(conn, &exit, false);
    }
}
