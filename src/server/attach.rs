//! Attached connections: the switch from JSON lines to frames, the redraw a
//! new client gets, input and resizes from clients, and the EXIT frame that
//! always ends an attachment so a client knows not to reconnect.
//!
//! Size policy is tmux's `latest`: the pane takes the size of the client that
//! last resized or typed. Read-only clients never type or resize the pane.
//! A client whose size differs from the pane's is shown views drawn from
//! the terminal model at its own size (`connection::View`), never raw
//! output meant for another width.

use super::Server;
use super::connection::{ConnId, ConnMode, View};
use crate::model::PaneId;
use crate::protocol::events::Event;
use crate::protocol::frame;
use crate::protocol::methods;
use crate::protocol::{ErrorCode, RpcError};
use serde_json::{Value, json};

/// Most bytes of history printed for an attaching client (its newest
/// lines); the client's output queue holds 4 MiB.
const HISTORY_REPLAY_BYTES: usize = 2 << 20;
/// History goes out in frames of this size (a frame holds 1 MiB at most).
const HISTORY_FRAME_BYTES: usize = 256 << 10;

impl Server {
    pub(super) fn attach(
        &mut self,
        conn: ConnId,
        rpc_id: &Value,
        req: methods::Attach,
    ) -> Result<(), RpcError> {
        let id = self.resolve_target(&req.target)?;
        if let Some(from) = &req.from_pane
            && self.resolve_target(from).ok() == Some(id)
        {
            return Err(RpcError::new(
                ErrorCode::SelfAttach,
                format!(
                    "pane {} is the pane this client runs in: attaching to it would feed its \
                     output back into itself; attach from another terminal",
                    PaneId::new(id)
                ),
            ));
        }
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
        // History first, on the client's main screen (a client on its
        // alternate screen has no scrollback to put it in).
        let history = match req.history {
            Some(n) if n > 0 && !req.alt_screen => {
                pane.screen()
                    .history_replay(n as usize, HISTORY_REPLAY_BYTES, rows)
            }
            _ => Vec::new(),
        };
        let mut cache = None;
        let redraw = if (pane.cols(), pane.rows()) != (cols, rows) {
            let mut view = crate::term::ViewCache::default();
            let bytes = pane.screen().view_update(cols, rows, &mut view);
            cache = Some(view);
            bytes
        } else if req.alt_screen {
            pane.screen().redraw_flat(cols, rows)
        } else {
            pane.screen().redraw(cols, rows)
        };
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
        c.view = View {
            flat: req.alt_screen,
            cache,
            stale: false,
        };
        for chunk in history.chunks(HISTORY_FRAME_BYTES) {
            if !c.queue_frame(frame::server::OUTPUT, chunk) {
                return Ok(());
            }
        }
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

    /// Output of `pane` read just now, for its attached clients: forwarded
    /// as it is to a client of the pane's size, unless the screen switched
    /// and the client must not see switches (`View::flat`); every other
    /// client's view is marked stale and drawn from the model before the
    /// next flush.
    pub(super) fn broadcast_output(&mut self, pane: u64, bytes: &[u8], switched: bool) {
        let Some(size) = self.panes.get(&pane).map(|p| (p.cols(), p.rows())) else {
            return;
        };
        let mut too_slow = Vec::new();
        for (id, conn) in &mut self.conns {
            let ConnMode::Attached {
                pane: p,
                cols,
                rows,
                ..
            } = conn.mode
            else {
                continue;
            };
            if p != pane || conn.closing.is_some() {
                continue;
            }
            let raw = (cols, rows) == size
                && conn.view.cache.is_none()
                && !conn.view.stale
                && !(switched && conn.view.flat);
            if !raw {
                conn.view.stale = true;
                self.stale_views = true;
            } else if !conn.queue_frame(frame::server::OUTPUT, bytes) {
                too_slow.push(*id);
            }
        }
        for id in too_slow {
            self.drop_too_slow(id);
        }
    }

    pub(super) fn drop_too_slow(&mut self, id: ConnId) {
        self.log.log(
            "client_too_slow",
            &format!(
                "client {id} fell {} MiB behind; disconnected",
                super::connection::MAX_OUTPUT_QUEUE >> 20
            ),
        );
        let payload = json!({
            "reason": "too_slow",
            "message": "disconnected: this client read output too slowly and its queue filled; reattach to resume"
        });
        self.end_attachment(id, &payload, true);
    }

    /// Draws every stale view from its pane's model: clients of another
    /// size than their pane get an update at their own size (only the rows
    /// that changed); a client of the pane's size gets a full redraw and
    /// is forwarded raw output again from then on. Called before output is
    /// flushed, so a flood of output costs one view per loop turn.
    pub(super) fn render_stale_views(&mut self) {
        if !std::mem::take(&mut self.stale_views) {
            return;
        }
        let mut too_slow = Vec::new();
        for (id, conn) in &mut self.conns {
            if !conn.view.stale {
                continue;
            }
            conn.view.stale = false;
            let ConnMode::Attached {
                pane, cols, rows, ..
            } = conn.mode
            else {
                continue;
            };
            let Some(p) = self.panes.get(&pane) else {
                continue;
            };
            let bytes = if (p.cols(), p.rows()) != (cols, rows) {
                let cache = conn.view.cache.get_or_insert_with(Default::default);
                p.screen().view_update(cols, rows, cache)
            } else {
                // Back to forwarding: a full redraw first, from the main
                // screen (where a fresh client starts) unless the client
                // never switches.
                let was_view = conn.view.cache.take().is_some();
                if conn.view.flat {
                    p.screen().redraw_flat(cols, rows)
                } else {
                    let mut out = Vec::new();
                    if was_view {
                        out.extend_from_slice(b"\x1b[?1049l");
                    }
                    out.extend(p.screen().redraw(cols, rows));
                    out
                }
            };
            if !bytes.is_empty() && !conn.queue_frame(frame::server::OUTPUT, &bytes) {
                too_slow.push(*id);
            }
        }
        for id in too_slow {
            self.drop_too_slow(id);
        }
    }

    /// After the pane's or a client's size changed: clients whose size now
    /// differs from the pane's are drawn from the model, a client whose
    /// size now matches gets a redraw and raw output again.
    pub(super) fn refresh_views(&mut self, pane: u64) {
        let Some(size) = self.panes.get(&pane).map(|p| (p.cols(), p.rows())) else {
            return;
        };
        for conn in self.conns.values_mut() {
            let ConnMode::Attached {
                pane: p,
                cols,
                rows,
                ..
            } = conn.mode
            else {
                continue;
            };
            if p == pane && ((cols, rows) != size || conn.view.cache.is_some()) {
                conn.view.stale = true;
                self.stale_views = true;
            }
        }
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
            frame::client::RESIZE => {
                if let Some((c_cols, c_rows)) = frame::parse_resize(payload) {
                    let (c_cols, c_rows) =
                        crate::pty::clamp_size(u32::from(c_cols), u32::from(c_rows));
                    c.mode = ConnMode::Attached {
                        pane,
                        read_only,
                        cols: c_cols,
                        rows: c_rows,
                    };
                    // A read-only client's size is its own view's, never
                    // the pane's.
                    if !read_only {
                        self.resize_pane(pane, c_cols, c_rows);
                    }
                    self.refresh_views(pane);
                }
            }
            frame::client::DETACH => {
                let payload = json!({ "reason": "detached", "message": "detached" });
                self.end_attachment(conn, &payload, false);
            }
            frame::client::REDRAW => {
                c.view.cache = None;
                c.view.stale = true;
                self.stale_views = true;
            }
            // Unknown kinds, and input from read-only clients, are ignored:
            // frames are forward-compatible by design.
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
