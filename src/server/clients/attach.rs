//! Attached connections: the switch from JSON lines to frames, the redraw a
//! new client gets, input and resizes from clients, and the EXIT frame that
//! always ends an attachment so a client knows not to reconnect.
//!
//! Size policy is the config's `window_size`, as tmux's `window-size`:
//! `latest` (the default: the pane takes the size of the client that last
//! attached, typed or resized), `smallest` or `largest` (of every client
//! that may resize). It is applied again whenever a client attaches,
//! types, resizes or leaves, so the size follows the remaining clients.
//! Read-only clients never type or resize the pane, and do not count.
//! A client whose size differs from the pane's is shown views drawn from
//! the terminal model at its own size (`connection::View`), never raw
//! output meant for another width.
//!
//! Also here: detaching the other clients of a pane (`attach -d`). The
//! client list and `client.detach` are in `client_requests.rs`, input held
//! for a pane with no room for it in `held_input.rs`.

use super::connection::{Attachment, ConnId, ConnMode, View};
use crate::model::PaneId;
use crate::protocol::events::Event;
use crate::protocol::frame::{self, ClientFrame};
use crate::protocol::methods;
use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;
use crate::server::config::WindowSize;
use crate::server::panes::Panes;
use serde_json::{Value, json};
use std::time::Instant;

/// Most bytes of history printed for an attaching client (its newest
/// lines); the client's output queue holds 4 MiB.
const HISTORY_REPLAY_BYTES: usize = 2 << 20;
/// History goes out in frames of this size (a frame holds 1 MiB at most).
const HISTORY_FRAME_BYTES: usize = 256 << 10;

impl Server {
    pub(in crate::server) fn attach(
        &mut self,
        conn: ConnId,
        rpc_id: &Value,
        req: methods::Attach,
    ) -> Result<(), RpcError> {
        let id = self.resolve_target(&req.target)?;
        self.note_attaching_env(req.client_env.as_ref());
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
        if c.is_attached() {
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
        if req.detach_others {
            let others = self.clients_of(id);
            let payload = json!({
                "reason": "detached",
                "message": format!("detached: another client attached to {public_id} with -d"),
            });
            for other in others {
                self.end_attachment(other, &payload, false);
            }
        }
        // Attached before the size policy runs, so it counts this client.
        self.begin_attachment(
            conn,
            id,
            req.read_only,
            (cols, rows),
            req.alt_screen,
            req.when_behind,
        );
        // A pane that cannot run is said so and the attachment ends, as
        // the single-pane path does (below), rather than shown blank.
        let runs = self
            .panes
            .get(&id)
            .is_some_and(|p| p.is_running() && p.held_reason().is_none());
        if let Some(spec) = req.view.as_ref().filter(|_| runs) {
            let asked = spec.tab.filter(|t| self.tree.tabs.contains_key(t));
            if let Some(tab) = asked.or_else(|| self.tree.tab_of(PaneId::new(id))) {
                let (focus, zoom) = match asked {
                    Some(_) => (spec.focus, spec.zoom),
                    None => (Some(PaneId::new(id)), None),
                };
                let prefix = spec.prefix.unwrap_or(0x1c);
                self.start_tab_view(conn, tab, focus, zoom, prefix);
                if let Some(scroll) = spec.scroll.as_ref().filter(|_| asked.is_some()) {
                    self.resume_scroll(conn, scroll);
                }
                let peer_pid = self.conns.get(&conn).and_then(|c| c.peer.pid);
                self.emit(Event::ClientAttached {
                    pane: public_id,
                    client: conn,
                    pid: peer_pid,
                    read_only: req.read_only,
                });
                return Ok(());
            }
        }
        self.attach_pane_only(conn, id, &req, (cols, rows));
        Ok(())
    }

    /// The rest of an `attach` to a single pane (`--pane-only`): the size
    /// policy, the pane's history and screen, and the EXIT frame at once
    /// for a pane that cannot run.
    fn attach_pane_only(
        &mut self,
        conn: ConnId,
        id: u64,
        req: &methods::Attach,
        (cols, rows): (u16, u16),
    ) {
        let public_id = self.panes[&id].public_id();
        if !req.read_only {
            // An exited pane keeps the size its program last had: its
            // screen is a record, not a terminal anyone draws on.
            if self.panes[&id].is_running() {
                self.apply_size_policy(id);
            }
            // The pane a bare `ptyd attach` comes back to.
            self.edit_tree(|t| t.focus(PaneId::new(id)));
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
        let ended = match pane.held_reason() {
            Some(why) => Some(json!({
                "reason": "pane_held",
                "pane": public_id,
                "held_reason": why,
                "message": format!("pane {public_id} is held (no process): {why}"),
            })),
            None => (!pane.is_running()).then(
                || json!({ "reason": "pane_exited", "pane": public_id, "exit": pane.exit_json() }),
            ),
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(a) = c.attachment_mut() {
            a.view.cache = cache;
        }
        for chunk in history.chunks(HISTORY_FRAME_BYTES) {
            if !c.queue_frame(frame::server::OUTPUT, chunk) {
                return;
            }
        }
        if !c.queue_frame(frame::server::OUTPUT, &redraw) {
            return;
        }
        let peer_pid = c.peer.pid;
        if let Some(payload) = ended {
            self.end_attachment(conn, &payload, false);
            return;
        }
        self.emit(Event::ClientAttached {
            pane: public_id,
            client: conn,
            pid: peer_pid,
            read_only: req.read_only,
        });
    }

    /// Puts connection `conn` in frame mode, attached to `pane` at its
    /// terminal's size: the one place an attachment starts (`attach`, and
    /// `pane.create` with `attach`). No event lines go to it from here on:
    /// they would corrupt the frames. A watcher (`read_only`) never types
    /// or resizes, so it is never the latest.
    pub(in crate::server) fn begin_attachment(
        &mut self,
        conn: ConnId,
        pane: u64,
        read_only: bool,
        size: (u16, u16),
        flat: bool,
        when_behind: methods::WhenBehind,
    ) {
        let active = if read_only { 0 } else { self.next_activity() };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let mut a = Attachment::new(pane, read_only, size, active);
        a.view = View {
            flat,
            when_behind,
            ..View::default()
        };
        c.mode = ConnMode::Attached(a);
        c.subscribed = false;
        c.replay_after = None;
    }

    /// Output of `pane` read just now, for its attached clients: forwarded
    /// as it is to a client of the pane's size, unless the screen switched
    /// and the client must not see switches (`View::flat`), or the client
    /// asked to be redrawn when it falls behind and is (`Connection::behind`:
    /// the pane never waits for it); every other client's view is marked
    /// stale and drawn from the model before the next flush, or, for a
    /// client that fell behind, once it has caught up.
    pub(in crate::server) fn broadcast_output(&mut self, pane: u64, bytes: &[u8], switched: bool) {
        let Some(size) = self.panes.get(&pane).map(|p| (p.cols(), p.rows())) else {
            return;
        };
        if self.conns.values().any(|c| c.tab_view().is_some()) {
            self.note_view_output(pane);
        }
        let mut too_slow = Vec::new();
        for (id, conn) in &mut self.conns {
            let closing = conn.closing.is_some();
            let Some(a) = conn.attachment() else {
                continue;
            };
            if a.pane != pane || closing || a.view.tab.is_some() {
                continue;
            }
            let v = &a.view;
            let raw =
                (a.cols, a.rows) == size && v.cache.is_none() && !v.stale && !(switched && v.flat);
            let cut_off = raw && v.redraws_when_behind() && conn.behind();
            if cut_off || !raw {
                if let Some(a) = conn.attachment_mut() {
                    a.view.cut_off |= cut_off;
                    a.view.stale = true;
                }
                self.stale_views = true;
            } else if !conn.queue_frame(frame::server::OUTPUT, bytes) {
                too_slow.push(*id);
            }
        }
        for id in too_slow {
            self.drop_too_slow(id);
        }
    }

    pub(in crate::server) fn drop_too_slow(&mut self, id: ConnId) {
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
    /// flushed, so a flood of output costs one view per loop turn. A
    /// `when_behind: redraw` client that has not caught up yet is not
    /// drawn: a view every turn would refill the queue it is behind on.
    /// Its view stays stale (and `stale_views` set) until a flush drains
    /// it (`flush_conns` then draws it at once); a tab view's echo goes
    /// meanwhile, its pane alone (`draw_tab_view`).
    pub(in crate::server) fn render_stale_views(&mut self) {
        self.sync_views();
        if !std::mem::take(&mut self.stale_views) {
            return;
        }
        let mut too_slow = Vec::new();
        let mut deferred = false;
        let mut tab_views = Vec::new();
        for (id, conn) in &mut self.conns {
            let Some(v) = conn.attachment().map(|a| &a.view) else {
                continue;
            };
            if !v.stale {
                continue;
            }
            if v.redraws_when_behind() && !conn.caught_up() {
                // A keystroke's echo does not wait for the client to take
                // the frames ahead of it: the focused pane alone (a few
                // bytes) goes right behind them, unless the client is so
                // far behind that it is cut off. The rest of the view
                // waits, as it would.
                if v.tab.as_ref().is_some_and(|t| t.echo_due()) && !conn.behind() {
                    tab_views.push((*id, true));
                }
                deferred = true;
                continue;
            }
            if v.tab.is_some() {
                tab_views.push((*id, false));
                continue;
            }
            let Some(bytes) = conn
                .attachment_mut()
                .and_then(|a| draw_view(a, &self.panes))
            else {
                continue;
            };
            if !bytes.is_empty() && !conn.queue_frame(frame::server::OUTPUT, &bytes) {
                too_slow.push(*id);
            }
        }
        let now = Instant::now();
        for (id, backlogged) in tab_views {
            let Some(bytes) = self.draw_tab_view(id, now, backlogged) else {
                continue;
            };
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            if bytes
                .chunks(frame::MAX_FRAME_PAYLOAD)
                .any(|chunk| !c.queue_frame(frame::server::OUTPUT, chunk))
            {
                too_slow.push(id);
            }
        }
        self.stale_views |= deferred;
        for id in too_slow {
            self.drop_too_slow(id);
        }
    }

    /// A tab view's frame or message timer: views are looked at again.
    pub(in crate::server) fn wake_views(&mut self) {
        for a in self.conns.values_mut().filter_map(|c| c.attachment_mut()) {
            if a.view.tab.is_some() {
                a.view.stale = true;
                self.stale_views = true;
            }
        }
    }

    /// After the pane's or a client's size changed: clients whose size now
    /// differs from the pane's are drawn from the model, a client whose
    /// size now matches gets a redraw and raw output again.
    pub(in crate::server) fn refresh_views(&mut self, pane: u64) {
        let Some(size) = self.panes.get(&pane).map(|p| (p.cols(), p.rows())) else {
            return;
        };
        for a in self.conns.values_mut().filter_map(|c| c.attachment_mut()) {
            if a.pane == pane && ((a.cols, a.rows) != size || a.view.cache.is_some()) {
                a.view.stale = true;
                self.stale_views = true;
            }
        }
    }

    pub(in crate::server) fn handle_frame(&mut self, conn: ConnId, frame: ClientFrame) {
        if matches!(
            frame,
            ClientFrame::Tty | ClientFrame::DirectAck | ClientFrame::DirectPause
        ) {
            self.direct_frame(conn, frame);
            return;
        }
        if let ClientFrame::KeysOn(payload) = frame {
            self.keys_on(conn, payload);
            return;
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(a) = c.attachment_mut() else {
            return;
        };
        let (pane, read_only) = (a.pane, a.read_only);
        if a.view.tab.is_some() {
            match frame {
                ClientFrame::Input(payload) => {
                    self.view_keys(conn, payload);
                    return;
                }
                ClientFrame::Redraw => {
                    self.view_redraw(conn);
                    return;
                }
                _ => {}
            }
        }
        match frame {
            ClientFrame::Input(payload) if !read_only && !payload.is_empty() => {
                if let Err((msg, public_id)) = self.type_into(conn, pane, payload) {
                    // Dropping typed bytes unannounced would leave the user
                    // believing they arrived: end the attachment saying so.
                    let message = format!(
                        "{msg}; {} typed bytes were not delivered, so the attachment ended. \
                         Reattach with `ptyd attach {public_id}` once the program reads its input",
                        payload.len(),
                    );
                    self.log.log("input_dropped", &message);
                    let exit = json!({ "reason": "input_overflow", "message": message });
                    self.end_attachment(conn, &exit, false);
                }
            }
            ClientFrame::Resize(Some((c_cols, c_rows))) => {
                let (c_cols, c_rows) = crate::pty::clamp_size(u32::from(c_cols), u32::from(c_rows));
                (a.cols, a.rows) = (c_cols, c_rows);
                // A read-only client's size is its own view's, never
                // the pane's.
                if !read_only {
                    let active = self.next_activity();
                    if let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.attachment_mut()) {
                        a.active = active;
                    }
                    self.apply_size_policy(pane);
                }
                self.refresh_views(pane);
            }
            ClientFrame::Detach => {
                let payload = json!({ "reason": "detached", "message": "detached" });
                self.end_attachment(conn, &payload, false);
            }
            ClientFrame::Redraw => {
                a.view.cache = None;
                a.view.stale = true;
                self.stale_views = true;
            }
            // Unknown kinds, and input from read-only clients, are ignored:
            // frames are forward-compatible by design.
            _ => {}
        }
    }

    /// Bytes attached client `conn` typed (an INPUT frame, or keys the
    /// server read from its terminal: `tty_keys.rs`) go to `pane`, written
    /// to its PTY in this same turn as far as it takes them. Typing makes
    /// the client the latest (the size-setter under `latest`). Dropped if
    /// the pane's process is not running; an error (the message, the
    /// pane's public id) if its pending input has no room.
    pub(in crate::server) fn type_into(
        &mut self,
        conn: ConnId,
        pane: u64,
        bytes: &[u8],
    ) -> Result<(), (String, String)> {
        // Nothing to re-evaluate if it already was the latest.
        if !self.is_latest(conn, pane) {
            let active = self.next_activity();
            if let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.attachment_mut()) {
                a.active = active;
            }
            self.apply_size_policy(pane);
        }
        let Some(p) = self.panes.get_mut(&pane) else {
            return Ok(());
        };
        if !p.is_running() {
            return Ok(());
        }
        if let Err(msg) = p.queue_input(bytes) {
            return Err((msg, p.public_id().to_string()));
        }
        self.flush_pane_input(pane);
        // Its echo goes ahead of the busy panes on the backlog (unless the
        // pane is one of them: its echo is behind its own output anyway).
        if self
            .panes
            .get(&pane)
            .is_some_and(|p| p.pending_input() == 0 && !p.is_backlogged())
        {
            self.pane_turn
                .expect_echo(pane, Instant::now() + crate::server::panes::io::ECHO_WAIT);
        }
        Ok(())
    }

    /// Ends every attachment to `pane` with an EXIT frame.
    /// Clients showing its tab go on showing it, told on their message
    /// line.
    pub(in crate::server) fn end_attachments(&mut self, pane: u64, payload: &Value) {
        let why = match payload["reason"].as_str() {
            Some("pane_exited") => format!(
                "pane {} exited: {}",
                PaneId::new(pane),
                crate::client::attach::describe_exit(&payload["exit"])
            ),
            _ => payload["message"]
                .as_str()
                .unwrap_or("the pane ended")
                .to_string(),
        };
        self.note_view_pane_ended(pane, &why);
        let ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.attached_to(pane) && c.tab_view().is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.end_attachment(id, payload, false);
        }
    }

    /// Sends the final EXIT frame and closes the connection once it is
    /// written. With `drop_queue`, output still queued is discarded first
    /// (the client is too slow to ever take it).
    pub(in crate::server) fn end_attachment(
        &mut self,
        conn: ConnId,
        payload: &Value,
        drop_queue: bool,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(pane) = c.attached_pane() else {
            return;
        };
        // Nothing goes to the client's terminal but through the client
        // from here on: `DIRECT_OFF` and what its terminal had not taken
        // go before the EXIT frame.
        c.leave_direct(
            super::connection::Polls::of(&self.poll, &self.arrivals),
            "ending",
            !drop_queue,
        );
        // A view owed a drawing (a client that fell behind, or of another
        // size, when the pane's last output came) is drawn now, whether it
        // caught up or not: nothing will be sent after the EXIT frame.
        if !drop_queue
            && let Some(a) = c.attachment_mut()
            && a.view.stale
            && a.view.tab.is_none()
            && let Some(bytes) = draw_view(a, &self.panes)
        {
            // A queue too full for it gets the EXIT frame alone (below).
            let _ = c.queue_frame(frame::server::OUTPUT, &bytes);
        }
        // A detached client names what it leaves.
        let mut payload = payload.clone();
        if payload["reason"] == "detached" {
            payload["pane"] = json!(PaneId::new(pane));
            if let Some(view) = c.tab_view() {
                payload["tab"] = json!(view.tab);
            }
        }
        let payload = &payload;
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

    /// After a client left `pane` (its connection is no longer attached):
    /// announces it and lets the remaining clients set the size.
    pub(in crate::server) fn note_detached(&mut self, conn: ConnId, pane: u64, reason: &str) {
        self.emit(Event::ClientDetached {
            pane: PaneId::new(pane),
            client: conn,
            reason: reason.to_string(),
        });
        // Not for a pane that ended: its clients are being let go one by
        // one, and its last screen must not be reflowed meanwhile.
        if !self.stopping && self.panes.get(&pane).is_some_and(|p| p.is_running()) {
            self.apply_size_policy(pane);
        }
    }

    /// The connections attached to `pane`, by number.
    pub(in crate::server) fn clients_of(&self, pane: u64) -> Vec<ConnId> {
        let mut ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.attached_to(pane))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A stamp above every attached client's: activity order survives a
    /// live upgrade because the stamps travel with the connections.
    pub(in crate::server) fn next_activity(&self) -> u64 {
        (self.conns.values())
            .filter_map(|c| c.attachment().map(|a| a.active))
            .max()
            .unwrap_or(0)
            + 1
    }

    /// The most recently active client of `pane` (attached, typed or
    /// resized last), read-only clients included.
    pub(super) fn latest_client(&self, pane: u64) -> Option<ConnId> {
        self.conns
            .iter()
            .filter_map(|(id, c)| c.attachment().map(|a| (id, a)))
            .filter(|(_, a)| a.pane == pane)
            .max_by_key(|(id, a)| (a.active, **id))
            .map(|(id, _)| *id)
    }

    fn is_latest(&self, conn: ConnId, pane: u64) -> bool {
        self.latest_client(pane) == Some(conn)
    }

    /// Sets `pane`'s size from its clients that may resize, per the
    /// `window_size` policy; with none left, the size stays.
    /// A pane of a tab some client shows is sized by that tab's layout
    /// (`tab_view.rs`), whatever its single-pane clients' sizes.
    pub(in crate::server) fn apply_size_policy(&mut self, pane: u64) {
        if let Some(tab) = self.viewed_tab_of(pane) {
            self.relayout_tab(tab);
            return;
        }
        let sizes: Vec<(u64, u16, u16)> = self
            .conns
            .values()
            .filter_map(|c| c.attachment())
            .filter(|a| a.view.tab.is_none() && a.pane == pane && !a.read_only)
            .map(|a| (a.active, a.cols, a.rows))
            .collect();
        if let Some((cols, rows)) = pick_size(self.config.window_size, &sizes) {
            self.resize_pane(pane, cols, rows);
        }
    }
}

/// The size `policy` gives clients of `(activity, cols, rows)`; `None`
/// for none.
pub(in crate::server) fn pick_size(
    policy: WindowSize,
    sizes: &[(u64, u16, u16)],
) -> Option<(u16, u16)> {
    match policy {
        WindowSize::Latest => sizes
            .iter()
            .max_by_key(|(active, ..)| *active)
            .map(|&(_, c, r)| (c, r)),
        WindowSize::Smallest => sizes
            .iter()
            .map(|&(_, c, _)| c)
            .min()
            .zip(sizes.iter().map(|&(.., r)| r).min()),
        WindowSize::Largest => sizes
            .iter()
            .map(|&(_, c, _)| c)
            .max()
            .zip(sizes.iter().map(|&(.., r)| r).max()),
    }
}

/// Brings `conn`'s stale view up to date from its pane's model and marks
/// it fresh: a client of another size than the pane gets an update at its
/// own size (only the rows that changed); a client of the pane's size a
/// full redraw, after which it is forwarded raw output again. `None` if
/// its pane is gone.
fn draw_view(a: &mut Attachment, panes: &Panes) -> Option<Vec<u8>> {
    a.view.stale = false;
    let (pane, cols, rows) = (a.pane, a.cols, a.rows);
    let p = panes.get(&pane)?;
    Some(if (p.cols(), p.rows()) != (cols, rows) {
        let cache = a.view.cache.get_or_insert_with(Default::default);
        p.screen().view_update(cols, rows, cache)
    } else {
        // Back to forwarding: a full redraw first, from the main screen
        // (where a fresh client starts) unless the client never switches.
        // A client cut off from raw output may have been left on either
        // screen, as a view may.
        let was_view = a.view.cache.take().is_some();
        let cut_off = std::mem::take(&mut a.view.cut_off);
        if a.view.flat {
            p.screen().redraw_flat(cols, rows)
        } else {
            let mut out = Vec::new();
            if was_view || cut_off {
                out.extend_from_slice(b"\x1b[?1049l");
            }
            out.extend(p.screen().redraw(cols, rows));
            out
        }
    })
}
