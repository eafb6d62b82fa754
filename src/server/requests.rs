//! Request dispatch: one JSON line in, one handler, one response (or a parked
//! wait, or the switch to attached mode). Bad input of any kind gets an error
//! that says what is wrong and leaves the connection usable.

use super::Server;
use super::clients::connection::ConnId;
use super::panes::pane::ExitReason;
use super::waits::{Wait, WaitCondition};
use crate::model::PaneId;
use crate::protocol::events::Event;
use crate::protocol::methods::{self, Request};
use crate::protocol::replies::{HelloReply, Status};
use crate::protocol::{ErrorCode, PROTOCOL_VERSION, RpcError, SERVER_VERSION};
use serde_json::{Value, json};
use std::time::Duration;

/// Bytes of old-size output read before a resize: more than the kernel
/// holds for a PTY, so one read takes it all.
const PANE_RESIZE_DRAIN: usize = 1024 * 1024;

type Outcome = Result<Option<Value>, RpcError>;

/// One scope's variables (`environment`): `None` marks one to be removed
/// from new processes' environment.
#[derive(Debug, Default)]
pub(super) struct Environment {
    vars: std::collections::BTreeMap<String, Option<String>>,
    hidden: std::collections::BTreeSet<String>,
}

/// Bounds of what `environment` keeps.
const MAX_ENV_NAME: usize = 256;
const MAX_ENV_VALUE: usize = 64 * 1024;
const MAX_ENV_VARS: usize = 1024;
const MAX_ENV_SCOPES: usize = 4096;

/// A typed reply (`protocol::replies`) as the handler's outcome.
pub(super) fn reply<T: serde::Serialize>(value: &T) -> Outcome {
    serde_json::to_value(value)
        .map(Some)
        .map_err(|e| RpcError::new(ErrorCode::Internal, format!("encoding the reply: {e}")))
}

/// `result`, or a `too_large` error when its reply would pass
/// [`protocol::MAX_REPLY_BYTES`]: the message names the size, the limit and
/// how to ask for less.
fn within_reply_limit(method: &str, result: Value) -> Result<Value, RpcError> {
    let size = serde_json::to_vec(&result).map_or(0, |v| v.len());
    if size + 64 <= crate::protocol::MAX_REPLY_BYTES {
        return Ok(result);
    }
    let hint = match method {
        "pane.capture" => "capture a range with start/end (or without ansi)",
        _ => "ask for less at a time",
    };
    let mib = |n: usize| format!("{:.1} MiB", n as f64 / f64::from(1 << 20));
    Err(RpcError::new(
        ErrorCode::TooLarge,
        format!(
            "{method} reply of {} exceeds the {} reply limit: {hint}",
            mib(size),
            mib(crate::protocol::MAX_REPLY_BYTES)
        ),
    ))
}

impl Server {
    pub(super) fn handle_line(&mut self, conn: ConnId, line: &[u8]) {
        let Some((id, request)) = crate::protocol::parse_request_line(line) else {
            return;
        };
        let outcome = request.and_then(|request| {
            let method = request.method();
            let result = self.dispatch(conn, &id, request)?;
            Ok(result.map(|result| (method, result)))
        });
        match outcome {
            Ok(Some((method, result))) => {
                let result = within_reply_limit(method, result);
                self.respond(conn, &id, result)
            }
            Ok(None) => {}
            Err(err) => self.respond(conn, &id, Err(err)),
        }
    }

    /// Runs one method. `Ok(None)` means the handler answers later (a parked
    /// wait, an input ack) or has already answered (attach).
    fn dispatch(&mut self, conn: ConnId, rpc_id: &Value, request: Request) -> Outcome {
        match request {
            Request::Hello(req) => self.hello(req),
            Request::ServerStatus(_) => reply(&self.status(conn)),
            Request::ServerUpgrade(req) => {
                self.start_upgrade(Some((conn, rpc_id.clone())), req);
                Ok(None)
            }
            Request::ServerConfigReload(_) => Ok(Some(self.reload_config())),
            Request::ServerSave(_) => self.save_now(conn, rpc_id),
            Request::Tree(_) => Ok(Some(self.tree_json())),
            Request::WorkspaceCreate(req) => self.workspace_create(req),
            Request::WorkspaceRename(req) => self.workspace_rename(req),
            Request::WorkspaceRemove(req) => self.workspace_remove(req),
            Request::TabRename(req) => self.tab_rename(req),
            Request::TabRemove(req) => self.tab_remove(req),
            Request::TabSelect(req) => self.tab_select(req),
            Request::TabSelectLayout(req) => self.tab_select_layout(req),
            Request::PaneSwap(req) => self.pane_swap(req),
            Request::PaneResizeSplit(req) => self.pane_resize_split(req),
            Request::PaneZoom(req) => self.pane_zoom(req),
            Request::PaneBreak(req) => self.pane_break(req),
            Request::PaneFocus(req) => {
                let id = self.resolve_target(&req.target)?;
                self.pane_focus(id, req.client)
            }
            Request::PaneSetResume(req) => self.set_resume(req),
            Request::PaneRename(req) => self.pane_rename(req),
            Request::PaneRespawn(req) => {
                let id = self.resolve_target(&req.target)?;
                self.respawn(id)
            }
            Request::ServerStop(_) => self.server_stop(conn),
            Request::PaneCreate(req) => self.pane_create(conn, req),
            Request::PaneList(_) => self.pane_list(),
            Request::PaneInput(req) => self.pane_input(conn, rpc_id, req),
            Request::PaneResize(req) => self.pane_resize(req),
            Request::PaneCapture(req) => self.pane_capture(req),
            Request::PaneHistory(req) => self.pane_history(req),
            Request::PaneKill(req) => self.pane_kill(req),
            Request::PaneRemove(req) => self.pane_remove(req),
            Request::PaneWait(req) => self.pane_wait(conn, rpc_id, req),
            Request::EventsSubscribe(req) => self.events_subscribe(conn, rpc_id, req),
            Request::Attach(req) => {
                self.attach(conn, rpc_id, req)?;
                Ok(None)
            }
            Request::ClientList(req) => self.client_list(req).map(Some),
            Request::ClientDetach(req) => self.client_detach(req).map(Some),
            Request::Environment(req) => self.environment(req).map(Some),
        }
    }

    /// `server.stop`: the loop stops once this turn is done; the caller hears
    /// when the server is gone.
    fn server_stop(&mut self, conn: ConnId) -> Outcome {
        self.log.log("stopping", "server.stop requested");
        self.stopping = true;
        self.stop_callers.push(conn);
        Ok(Some(json!({})))
    }

    /// `pane.list`: every pane's info.
    fn pane_list(&self) -> Outcome {
        let panes: Vec<Value> = self
            .panes
            .values()
            .map(|p| p.info(self.attached_count(p.id())))
            .collect();
        Ok(Some(json!({ "panes": panes })))
    }

    /// `pane.resize`: the pane and its PTY to a size in range.
    fn pane_resize(&mut self, req: methods::PaneResize) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        let (cols, rows) = crate::pty::resize_size(req.cols, req.rows)
            .map_err(|e| RpcError::new(ErrorCode::InvalidParams, e))?;
        self.resize_pane(id, cols, rows);
        Ok(Some(self.pane_info(id)))
    }

    /// `pane.capture`: lines of the screen and scrollback, as text or with
    /// escapes.
    fn pane_capture(&self, req: methods::PaneCapture) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        let pane = &self.panes[&id];
        let screen = pane.screen();
        let screen_start = screen.scrollback_pushed();
        let history = screen.scrollback_len() as i64;
        let rows = i64::from(screen.size().1);
        // From the numbering the request asked for to today's (0 = the
        // screen's top row now); lines keep their numbers as output
        // arrives, so the shift is all that changes between two parts.
        let shift = req
            .origin
            .map_or(0, |o| o.min(i64::MAX as u64) as i64 - screen_start as i64);
        let start = req.start.map(|n| n.saturating_add(shift));
        let mut end = req
            .end
            .map_or(rows - 1, |n| n.saturating_add(shift))
            .clamp(-history, rows - 1);
        if req.join && req.origin.is_some() {
            // A part ends with a whole line: on past every row autowrap
            // continued.
            let wraps = |n: i64| {
                let h = screen.history_lines((screen_start as i64 + n).max(0) as u64, 1, false);
                h.wrapped.first() == Some(&true)
            };
            while end < rows - 1 && wraps(end) {
                end += 1;
            }
        }
        let opts = crate::term::CaptureOptions {
            start,
            end: Some(end),
            escapes: req.ansi,
            join: req.join,
        };
        let capture = screen.capture(&opts);
        let mut reply = serde_json::to_value(&capture).unwrap_or(Value::Null);
        reply["pane"] = json!(pane.public_id());
        reply["text"] = json!(capture.lines.join("\n"));
        reply["scrollback_lines"] = json!(screen.scrollback_len());
        reply["first_line"] = json!(capture.first_line - shift);
        reply["last_line"] = json!(end - shift);
        reply["screen_start"] = json!(screen_start);
        Ok(Some(reply))
    }

    /// `pane.history`: history lines by number, at most
    /// `MAX_HISTORY_COUNT` a request.
    fn pane_history(&self, req: methods::PaneHistory) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        if req.count > methods::MAX_HISTORY_COUNT {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!(
                    "\"count\" is {}; at most {} lines per request",
                    req.count,
                    methods::MAX_HISTORY_COUNT
                ),
            ));
        }
        let pane = &self.panes[&id];
        let screen = pane.screen();
        let start = req.start.unwrap_or(screen.scrollback_pushed());
        let lines = screen.history_lines(start, req.count as usize, req.ansi);
        let mut reply = serde_json::to_value(&lines).unwrap_or(Value::Null);
        let (cols, rows) = screen.size();
        reply["pane"] = json!(pane.public_id());
        reply["end"] = json!(lines.screen_start + u64::from(rows));
        reply["cols"] = json!(cols);
        reply["rows"] = json!(rows);
        Ok(Some(reply))
    }

    /// `pane.kill`: one signal, or the HUP-TERM-KILL ladder.
    fn pane_kill(&mut self, req: methods::PaneKill) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        let signal = match &req.signal {
            Some(name) => Some(parse_signal(name)?),
            None => None,
        };
        let grace = req
            .grace_ms
            .map_or(super::defaults::KILL_GRACE, Duration::from_millis);
        let running = self.panes[&id].is_running();
        match signal {
            Some(signal) => self.kill_pane(id, signal, grace, ExitReason::Killed),
            None => self.kill_pane_ladder(id, grace),
        }
        let signal = signal.unwrap_or(crate::sys::SIGHUP);
        Ok(Some(json!({
            "pane": PaneId::new(id),
            "signal": signal,
            "signalled": running,
            "grace_ms": grace.as_millis() as u64,
        })))
    }

    /// `pane.remove`: a running pane only with `force` (killed first).
    fn pane_remove(&mut self, req: methods::PaneRemove) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        if self.panes[&id].is_running() {
            if !req.force {
                return Err(RpcError::new(
                    ErrorCode::PaneRunning,
                    format!(
                        "pane {} is still running; kill it first or pass \"force\": true",
                        PaneId::new(id)
                    ),
                ));
            }
            self.kill_pane(id, crate::sys::SIGKILL, Duration::ZERO, ExitReason::Killed);
        }
        self.remove_pane(id);
        Ok(Some(json!({ "pane": PaneId::new(id) })))
    }

    /// `events.subscribe`: the reply, then the events since `since` as the
    /// client reads, then each new one.
    fn events_subscribe(
        &mut self,
        conn: ConnId,
        rpc_id: &Value,
        req: methods::Subscribe,
    ) -> Outcome {
        let last = self.events.last_seq();
        let beyond = req.since.and_then(|since| self.events.gap_beyond(since));
        let since = req.since.unwrap_or(last).min(last);
        self.respond(conn, rpc_id, Ok(json!({ "seq": last })));
        if let Some(c) = self.conns.get_mut(&conn) {
            if let Some(gap) = beyond {
                let _ = c.queue(&crate::protocol::event_line(&gap));
            }
            // Queued as the client reads (`replay.rs`), so a long
            // replay never overflows its queue.
            c.subscribed = true;
            c.replay_after = Some(since);
            super::clients::replay::continue_replay(c, &self.events);
        }
        Ok(None)
    }

    /// `environment`: a scope's variables, changed first as asked; every
    /// name, value and scope bounded, so what a client can make the
    /// server hold stays small.
    fn environment(&mut self, req: methods::Environment) -> Result<Value, RpcError> {
        let bad = |what: String| RpcError::new(ErrorCode::InvalidParams, what);
        let scope_ok = req.scope == "global"
            || req
                .scope
                .strip_prefix('w')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !scope_ok {
            return Err(bad(format!(
                "environment: scope {:?} is neither \"global\" nor a workspace id (w3)",
                req.scope
            )));
        }
        for (name, value) in &req.set {
            if name.is_empty() || name.len() > MAX_ENV_NAME || name.contains(['=', '\0']) {
                return Err(bad(format!(
                    "environment: {name:?} is no variable name (1-{MAX_ENV_NAME} bytes, no '=' or NUL)"
                )));
            }
            if value
                .as_ref()
                .is_some_and(|v| v.len() > MAX_ENV_VALUE || v.contains('\0'))
            {
                return Err(bad(format!(
                    "environment: the value of {name} is longer than {MAX_ENV_VALUE} bytes or holds a NUL"
                )));
            }
        }
        let scopes = self.environment.len();
        let env = self.environment.entry(req.scope.clone()).or_default();
        for name in &req.unset {
            env.vars.remove(name);
            env.hidden.remove(name);
        }
        let grown = req
            .set
            .keys()
            .filter(|n| !env.vars.contains_key(*n))
            .count();
        if env.vars.len() + grown > MAX_ENV_VARS || scopes > MAX_ENV_SCOPES {
            return Err(RpcError::new(
                ErrorCode::TooLarge,
                format!(
                    "environment: at most {MAX_ENV_VARS} variables in each of at most {MAX_ENV_SCOPES} scopes are kept; unset some first"
                ),
            ));
        }
        for (name, value) in req.set {
            if req.hidden {
                env.hidden.insert(name.clone());
            } else {
                env.hidden.remove(&name);
            }
            env.vars.insert(name, value);
        }
        let reply = json!({ "environment": env.vars, "hidden": env.hidden });
        if env.vars.is_empty() {
            self.environment.remove(&req.scope);
        }
        Ok(reply)
    }

    fn hello(&mut self, req: methods::Hello) -> Outcome {
        if req.protocol != PROTOCOL_VERSION {
            return Err(RpcError::new(
                ErrorCode::VersionMismatch,
                format!(
                    "client speaks protocol {}, this server (ptyd {SERVER_VERSION}, pid {}) speaks protocol {PROTOCOL_VERSION}; use a client of the same version, or replace the server with `ptyd stop` and start it again",
                    req.protocol,
                    std::process::id()
                ),
            ));
        }
        reply(&HelloReply {
            protocol: PROTOCOL_VERSION,
            server_version: SERVER_VERSION.into(),
            pid: std::process::id(),
        })
    }

    /// `server.status`, as seen by connection `asking` (which it does not
    /// count among the connections).
    fn status(&self, asking: ConnId) -> Status {
        let (stderr_write_failures, stderr_write_error) = crate::service::journal::write_failures();
        Status {
            pid: std::process::id(),
            server_version: SERVER_VERSION.into(),
            protocol: PROTOCOL_VERSION,
            namespace: self.paths.namespace.clone(),
            socket: crate::transport::address(&self.paths),
            started_unix_ms: self.started_unix_ms,
            uptime_ms: self.started.elapsed().as_millis() as u64,
            panes: self.panes.len(),
            running_panes: self.panes.values().filter(|p| p.is_running()).count(),
            clients: self.conns.values().filter(|c| c.is_attached()).count(),
            connections: self.conns.keys().filter(|id| **id != asking).count(),
            event_seq: self.events.last_seq(),
            event_ring_bytes: self.events.bytes(),
            pane_passes_cut: self.pane_turn.passes_cut(),
            generation: self.generation,
            upgrade: self.upgrade_status(),
            last_upgrade: self.last_upgrade.clone(),
            workspaces: self.tree.workspaces.len(),
            tabs: self.tree.tabs.len(),
            persistence: self.persist.status(),
            config: self.config_status(),
            keeper: self.keeper_status(),
            stderr_write_failures,
            stderr_write_error,
            runtime_dir: self.rebinds.status(),
            client_input: self.client_input_status(),
            history: self.history_status(),
        }
    }

    pub(super) fn attached_count(&self, pane: u64) -> usize {
        self.conns.values().filter(|c| c.attached_to(pane)).count()
    }

    pub(super) fn pane_info(&self, id: u64) -> Value {
        self.panes
            .get(&id)
            .map_or(Value::Null, |p| p.info(self.attached_count(id)))
    }

    /// Finds a pane by id (`p3`, or `3`) or by name.
    pub(super) fn resolve_target(&self, target: &str) -> Result<u64, RpcError> {
        // `p3`, or the bare number as a convenience for typing.
        let by_id = target
            .parse::<PaneId>()
            .ok()
            .or_else(|| target.parse::<u64>().ok().map(PaneId::new));
        if let Some(id) = by_id.map(PaneId::get) {
            if self.panes.contains_key(&id) {
                return Ok(id);
            }
            return Err(RpcError::new(
                ErrorCode::NotFound,
                format!("no pane {target:?}; `ptyd ls` lists panes"),
            ));
        }
        let mut named = self.panes.values().filter(|p| p.name() == Some(target));
        match (named.next(), named.next()) {
            (Some(pane), None) => Ok(pane.id()),
            (Some(_), Some(_)) => Err(RpcError::new(
                ErrorCode::Ambiguous,
                format!("several panes are named {target:?}; use the pane id instead"),
            )),
            (None, _) => Err(RpcError::new(
                ErrorCode::NotFound,
                format!("no pane {target:?}; `ptyd ls` lists panes"),
            )),
        }
    }

    fn pane_input(&mut self, conn: ConnId, rpc_id: &Value, req: methods::PaneInput) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        let pane = self.panes.get_mut(&id).expect("resolved");
        if let Some(why) = pane.held_reason() {
            return Err(RpcError::new(
                ErrorCode::PaneExited,
                format!(
                    "pane {} is held (no process) and takes no input: {why}",
                    pane.public_id()
                ),
            ));
        }
        if !pane.is_running() || pane.fds().master().is_none() {
            return Err(RpcError::new(
                ErrorCode::PaneExited,
                format!(
                    "pane {} has exited and takes no input; `ptyd ls` shows its exit status",
                    pane.public_id()
                ),
            ));
        }
        // Encoded now, for the modes the program has set by now: keys it
        // reads after switching modes are what it asked for then.
        if req.data.is_none() && req.keys.is_empty() {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "pane.input needs \"data\" (text) and/or \"keys\" (key names)",
            ));
        }
        let data = req.data.unwrap_or_default();
        let modes = pane.screen().modes();
        let mut bytes = if req.paste && modes.bracketed_paste {
            crate::keys::bracketed_paste(data.as_bytes())
        } else {
            data.into_bytes()
        };
        let keys = crate::keys::encode_all(&req.keys, crate::keys::KeyModes::of(&modes))
            .map_err(|msg| RpcError::new(ErrorCode::InvalidParams, msg))?;
        bytes.extend(keys);
        let (end_offset, duplicate) =
            match req.request_id.as_deref().and_then(|r| pane.seen_request(r)) {
                Some(end) => (end, true),
                None => {
                    let end = pane
                        .queue_input(&bytes)
                        .map_err(|msg| RpcError::new(ErrorCode::InputOverflow, msg))?;
                    if let Some(request_id) = req.request_id {
                        pane.remember_request(request_id, end);
                    }
                    (end, false)
                }
            };
        pane.add_ack(super::panes::pane::PendingAck {
            conn,
            rpc_id: rpc_id.clone(),
            end_offset,
            duplicate,
        });
        self.flush_pane_input(id);
        Ok(None)
    }

    pub(super) fn resize_pane(&mut self, id: u64, cols: u16, rows: u16) {
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        if (pane.cols(), pane.rows()) == (cols, rows) {
            return;
        }
        // Output still in the PTY was written for the old size, before the
        // program could learn of the new one: it goes into the screen at
        // that size. Read after the resize, a scroll region vim set for 24
        // rows stayed on the 40-row screen after vim exited, and the shell
        // scrolled inside it. Not when the kernel already holds another
        // size (a takeover after a crash): that output may be for it.
        let old_size_in_kernel = pane.fds().kernel_size_is((pane.cols(), pane.rows()));
        if old_size_in_kernel && !pane.held_for_upgrade() {
            self.read_pane(id, PANE_RESIZE_DRAIN, None);
        }
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        if let Err(e) = pane.resize(cols, rows) {
            let msg = format!("resizing pane {}: {e}", pane.public_id());
            self.log.log("resize_failed", &msg);
            return;
        }
        self.mark_dirty();
        // Urgent: a crash before the next checkpoint would bring the pane
        // back at its old size, its program drawing for the new one (the
        // replacement also takes the size the kernel holds, see
        // `replay_rings`, but output printed between the resize and the
        // crash was replayed into the old size).
        self.keeper.mark_urgent();
        self.refresh_views(id);
        self.emit(Event::PaneResized {
            pane: PaneId::new(id),
            cols,
            rows,
        });
    }

    fn pane_wait(&mut self, conn: ConnId, rpc_id: &Value, req: methods::PaneWait) -> Outcome {
        let id = self.resolve_target(&req.target)?;
        let pane = &self.panes[&id];
        let mut conditions = Vec::new();
        if req.exit {
            conditions.push(WaitCondition::Exit);
        }
        let text_only = |set: bool, name: &str| {
            if set {
                Err(RpcError::new(
                    ErrorCode::InvalidParams,
                    format!("\"{name}\" goes with \"text\" only"),
                ))
            } else {
                Ok(())
            }
        };
        if let Some(text) = req.text.clone() {
            conditions.push(WaitCondition::Text(text_wait(pane, text, &req)?));
        } else {
            text_only(req.regex, "regex")?;
            text_only(req.include_screen, "include_screen")?;
            text_only(req.after_output.is_some(), "after_output")?;
            text_only(req.skip_lines.is_some(), "skip_lines")?;
            text_only(req.after_command_start, "after_command_start")?;
        }
        if let Some(ms) = req.idle_ms {
            conditions.push(WaitCondition::Idle(Duration::from_millis(ms)));
        }
        if (req.prompt || req.command_finished)
            && pane.prompts_seen() == 0
            && pane.commands_finished() == 0
            && pane.shell_injected().is_none()
        {
            let why = if !pane.is_running() {
                "has exited"
            } else if !pane.shell_integration() {
                "was started with shell integration off"
            } else if !self.config.shell_integration {
                "runs without shell integration (shell_integration = false in config.toml)"
            } else {
                "does not run a shell ptyd starts with shell integration (bash, zsh or fish with no script or -c)"
            };
            return Err(RpcError::new(
                ErrorCode::NoShellIntegration,
                format!(
                    "pane {} has shown no shell-integration marks (OSC 133) and {why}, so a prompt or command wait would never end: start the shell with shell integration (`ptyd new -- bash`), or run `eval \"$(ptyd shell-init bash)\"` (or zsh, fish) in it, or wait for text (`ptyd wait --text`)",
                    pane.public_id()
                ),
            ));
        }
        if req.prompt {
            conditions.push(WaitCondition::Prompt(
                req.after.unwrap_or(pane.prompts_seen()),
            ));
        }
        if req.command_finished {
            conditions.push(WaitCondition::CommandFinished(
                req.after.unwrap_or(pane.commands_finished()),
            ));
        }
        let condition = match conditions.pop() {
            Some(WaitCondition::Text(t)) if t.text.is_empty() => None,
            Some(c) if conditions.is_empty() => Some(c),
            _ => None,
        }
        .ok_or_else(|| {
            RpcError::new(
                ErrorCode::InvalidParams,
                "pane.wait takes exactly one of \"exit\": true, \"text\": \"...\" (non-empty), \"idle_ms\": N, \"prompt\": true or \"command_finished\": true",
            )
        })?;
        let wait = Wait {
            conn,
            rpc_id: rpc_id.clone(),
            pane: id,
            condition,
            deadline: None,
            seen_pushed: 0,
        };
        self.park_wait(wait, req.timeout_ms.map(Duration::from_millis));
        Ok(None)
    }

    pub(super) fn remove_pane(&mut self, id: u64) {
        let payload = json!({ "reason": "pane_removed", "pane": PaneId::new(id), "message": "the pane was removed" });
        self.end_attachments(id, &payload);
        self.fail_waits_on_remove(id);
        if let Some(mut pane) = self.panes.remove(&id) {
            // Every fd out of the poll, then closed: the pidfd of an
            // inherited process too, whose open file the previous
            // generation may still hold (closing our fd alone would leave
            // it polled under a token nobody owns).
            if let Some(pidfd_token) = pane.close_fds(self.poll.registry()) {
                self.sources.remove(&pidfd_token);
            }
            self.sources.remove(&pane.token());
            // The keeper's copies too, so the pane hangs up now.
            self.keeper_forget_pane(id);
            for ack in pane.take_acks() {
                let err = RpcError::new(
                    ErrorCode::NotFound,
                    format!(
                        "pane {} was removed before this input was written",
                        PaneId::new(id)
                    ),
                );
                self.respond(ack.conn, &ack.rpc_id, Err(err));
            }
        }
        self.edit_tree(|t| t.remove_pane(PaneId::new(id)));
        self.mark_dirty();
        self.emit(Event::PaneRemoved {
            pane: PaneId::new(id),
        });
    }
}

/// A text wait from `pane.wait`'s params: from the output after
/// `after_output` (default: now), the regex compiled.
fn text_wait(
    pane: &super::panes::pane::Pane,
    text: String,
    req: &methods::PaneWait,
) -> Result<super::waits::TextWait, RpcError> {
    let invalid = |msg: String| RpcError::new(ErrorCode::InvalidParams, msg);
    let regex = if req.regex {
        Some(
            wait_regex(&text)
                .map_err(|e| invalid(format!("\"text\" is not a valid regex: {e}")))?,
        )
    } else {
        None
    };
    let total = pane.output().total();
    let after = req.after_output.unwrap_or(total);
    let from = pane.output().position_of(after).ok_or_else(|| {
        invalid(format!(
            "after_output {after} is beyond pane {}'s output so far ({total} bytes)",
            pane.public_id()
        ))
    })?;
    // Marks help only if the shell reads the input: not while a command it
    // started (an editor, a REPL, an agent) does, unless that command began
    // after the input.
    let integrated =
        pane.shell_injected().is_some() || pane.prompts_seen() > 0 || pane.commands_finished() > 0;
    let marks = req.after_command_start
        && integrated
        && (!pane.output().command_running() || pane.output().command_start_from(from).is_some());
    Ok(super::waits::TextWait {
        text,
        regex,
        include_screen: req.include_screen,
        from,
        skip_lines: if marks {
            0
        } else {
            req.skip_lines.unwrap_or(0)
        },
        after_command_start: marks,
        scanned: from,
    })
}

/// A text wait's regex, compiled as every wait compiles it (a request's,
/// and one handed over by a live upgrade): multi-line, with a bound on
/// the compiled size so a hostile pattern cannot cost the loop memory.
pub(super) fn wait_regex(text: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(text)
        .multi_line(true)
        .size_limit(1 << 20)
        .build()
}

/// Parses `TERM`, `SIGTERM`, `sigterm` or `15`.
pub fn parse_signal(name: &str) -> Result<i32, RpcError> {
    if let Ok(n) = name.parse::<i32>()
        && crate::sys::signal_exists(n)
    {
        return Ok(n);
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    crate::sys::signal_by_name(&full).ok_or_else(|| {
        RpcError::new(
            ErrorCode::InvalidParams,
            format!("unknown signal {name:?}; use a name like TERM, KILL, INT or a number"),
        )
    })
}
