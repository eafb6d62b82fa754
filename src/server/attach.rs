//! Attached connections: the switch from JSON lines to frames, the redraw a
//! new client gets, input and resizes from clients, and the EXIT frame that
//! always ends an attachment so a client knows not to reconnect.
//!
//! Size policy is tmux's `latest`: the pane takes the size of the client that
//! last resized or typed. Read-only clients never type or resize.

use super::Server;
use super::connection::{ConnId, ConnMode};
use crate::model::PaneId;
use crate::protocol::events::Event;
use crate::protocol::frame;
use crate::protocol::methods;
use crate::protocol::{ErrorCode, RpcError};
use serde_json::{Value, json};

impl Server {
    pub(super) fn attach(
        &mut self,
        conn: ConnId,
        rpc_id: &Value,
        req: methods::Attach,
    ) -> Result<(), RpcError> {
        let id = self.resolve_target(&req.target)?;
        let Some(c) = self.conns.get(&conn) else {
            return Ok(());
        };
        if !matches!(c.mode, ConnMode::Rpc) {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "this connection is already attached",
            ));
        }
        let pane = &self.panes[&id];
        let (cols, rows) = match (req.cols, req.rows) {
            (Some(c), Some(r)) => crate::pty::clamp_size(u32::from(c), u32::from(r)),
            _ => (pane.cols(), pane.rows()),
        };
        let public_id = pane.public_id();
        // From the response on, the connection carries frames only: event
        // lines (the resize below emits one) would corrupt the stream.
        if let Some(c) = self.conns.get_mut(&conn) {
            c.subscribed = false;
            c.replay_after = None;
        }
        self.respond(
            conn,
            rpc_id,
            Ok(json!({ "pane": public_id, "framing": "ptyd-frames-1" })),
        );
        if !req.read_only {
            self.resize_pane(id, cols, rows);
        }
        let pane = &self.panes[&id];
        let redraw = pane.screen().redraw(pane.cols(), pane.rows());
        let exited = (!pane.is_running()).then(|| pane.exit_json());
        let Some(c) = self.conns.get_mut(&conn) else {
            return Ok(());
        };
        c.mode = ConnMode::Attached {
            pane: id,
            read_only: req.read_only,
            cols,
            rows,
        };
        if !c.queue_frame(frame::server::OUTPUT, &redraw) {
            return Ok(());
        }
        let peer_pid = c.peer.pid;
        if let Some(exit) = exited {
            let payload = json!({ "reason": "pane_exited", "pane": public_id, "exit": exit });
            self.end_attachment(conn, &payload, false);
            return Ok(());
        }
        self.emit(Event::ClientAttached {
            pane: public_id,
            client: conn,
            pid: peer_pid,
            read_only: req.read_only,
        });
        Ok(())
    }

    pub(super) fn handle_frame(&mut self, conn: ConnId, kind: u8, payload: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let ConnMode::Attached {
            pane,
            read_only,
            cols,
            rows,
        } = c.mode
        else {
            return;
        };
        match kind {
            frame::client::INPUT if !read_only && !payload.is_empty() => {
                // Typing makes this client the size-setter (tmux's `latest`).
                self.resize_pane(pane, cols, rows);
                let Some(p) = self.panes.get_mut(&pane) else {
                    return;
                };
                if !p.is_running() {
                    return;
                }
                if let Err(msg) = p.queue_input(payload) {
                    // Dropping typed bytes unannounced would leave the user
                    // believing they arrived: end the attachment saying so.
                    let message = format!(
                        "{msg}; {} typed bytes were not delivered, so the attachment ended. \
                         Reattach with `ptyd attach {}` once the program reads its input",
                        payload.len(),
                        p.public_id()
                    );
                    self.log.log("input_dropped", &message);
                    let exit = json!({ "reason": "input_overflow", "message": message });
                    self.end_attachment(conn, &exit, false);
                    return;
                }
                self.flush_pane_input(pane);
            }
            frame::client::RESIZE if !read_only => {
                if let Some((c_cols, c_rows)) = frame::parse_resize(payload) {
                    let (c_cols, c_rows) =
                        crate::pty::clamp_size(u32::from(c_cols), u32::from(c_rows));
                    c.mode = ConnMode::Attached {
                        pane,
                        read_only,
                        cols: c_cols,
                        rows: c_rows,
                    };
                    self.resize_pane(pane, c_cols, c_rows);
                }
            }
            frame::client::DETACH => {
                let payload = json!({ "reason": "detached", "message": "detached" });
                self.end_attachment(conn, &payload, false);
            }
            // Unknown kinds, and input or resizes from read-only clients, are
            // ignored: frames are forward-compatible by design.
            _ => {}
        }
    }

    /// Ends every attachment to `pane` with an EXIT frame.
    pub(super) fn end_attachments(&mut self, pane: u64, payload: &Value) {
        let ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.mode, ConnMode::Attached { pane: p, .. } if p == pane))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.end_attachment(id, payload, false);
        }
    }

    /// Sends the final EXIT frame and closes the connection once it is
    /// written. With `drop_queue`, output still queued is discarded first
    /// (the client is too slow to ever take it).
    pub(super) fn end_attachment(&mut self, conn: ConnId, payload: &Value, drop_queue: bool) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let ConnMode::Attached { pane, .. } = c.mode else {
            return;
        };
        let body = serde_json::to_vec(payload).unwrap_or_default();
        let mut exit_frame = Vec::new();
        frame::encode(frame::server::EXIT, &body, &mut exit_frame);
        if drop_queue || !c.queue(&exit_frame) {
            c.replace_queue(&exit_frame);
        }
        c.mode = ConnMode::Rpc;
        self.close_after_flush(conn);
        let reason = payload["reason"].as_str().unwrap_or("detached").to_string();
        self.note_detached(conn, pane, &reason);
    }

    pub(super) fn note_detached(&mut self, conn: ConnId, pane: u64, reason: &str) {
        self.emit(Event::ClientDetached {
            pane: PaneId::new(pane),
            client: conn,
            reason: reason.to_string(),
        });
    }
}
