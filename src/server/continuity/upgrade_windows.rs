//! Windows' upgrade: the restore path only.
//!
//! A live upgrade hands every pane's terminal to the new server (the PTY
//! masters over `SCM_RIGHTS`, `upgrade/` on Unix). A pseudo console
//! cannot be handed to another process: it belongs to the conhost the
//! server started, and the pane's process tree is in the server's Job
//! Object. So `server.upgrade` on Windows takes the restore path, as
//! `--mode restore` does on Unix: answer the caller, stop as `ptyd stop`
//! would (the snapshot is saved first; attached clients are told the
//! server stopped, so they reconnect), and start the new binary, which
//! restores the panes from the snapshot by their restore plans. Unix
//! execs the new binary in the same process; Windows has no exec, so the
//! new server is a new process (its pid is in the report) that waits for
//! this one to exit before claiming the namespace
//! (`start_windows.rs`, [`PREDECESSOR_ENV`]). `--mode live` is refused
//! with that reason.

use crate::protocol::methods::{self, ExitStatus};
use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;
use crate::server::clients::connection::ConnId;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Names the old server's pid to a server started by a restore-mode
/// upgrade: it waits for that process to end before it claims the
/// namespace (the old one still holds it while it answers and saves).
pub const PREDECESSOR_ENV: &str = "PTYD_UPGRADE_PREDECESSOR";
/// Bounds of the config's upgrade settings (live upgrades only; kept so
/// the config reads the same on every OS).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const PROBATION: Duration = Duration::from_secs(2);

/// No upgrade is ever in flight here: the restore path finishes within
/// the request that starts it.
pub enum Upgrade {
    Idle,
}

impl Upgrade {
    pub fn child_pid(&self) -> Option<i32> {
        None
    }
}

impl Server {
    /// `server.upgrade` (`caller` is `None` only for SIGHUP, which
    /// Windows does not send).
    pub(in crate::server) fn start_upgrade(
        &mut self,
        caller: Option<(ConnId, Value)>,
        req: methods::Upgrade,
    ) {
        match self.restart_as(&req) {
            Ok((pid, binary)) => {
                let reply = json!({
                    "mode": "restore",
                    "pid": pid,
                    "binary": binary,
                    "from": {
                        "pid": std::process::id(),
                        "version": crate::protocol::SERVER_VERSION,
                        "binary": self.exe_path,
                    },
                    "panes": self.panes.len(),
                    "message": "the session was saved; the new binary started as a new process and restores it",
                });
                if let Some((conn, rpc_id)) = &caller {
                    self.respond(*conn, rpc_id, Ok(reply));
                }
                self.log.log(
                    "upgrade_restore",
                    &format!("restarting as {binary} (pid {pid}) with a restore"),
                );
                self.shutdown(crate::server::Ending::Restart);
                // The answer and the stop notices are queued on the pipes;
                // they leave before the process does (`drain_before_exit`).
                self.drain_before_exit(Duration::from_secs(2));
                std::process::exit(0);
            }
            Err(e) => {
                self.log.log("upgrade_refused", &e.0.message);
                if let Some((conn, rpc_id)) = caller {
                    self.respond(conn, &rpc_id, Err(e));
                }
            }
        }
    }

    /// Checks the request and starts the new binary, waiting for us.
    fn restart_as(&mut self, req: &methods::Upgrade) -> Result<(u32, String), RpcError> {
        match req.mode.as_deref() {
            None | Some("restore") => {}
            Some("live") => {
                return Err(RpcError::new(
                    ErrorCode::InvalidParams,
                    "a live upgrade is not possible on Windows: a pane's pseudo console cannot be \
                     handed to another process; use --mode restore (the session is saved and the \
                     new server restores every pane by its restore plan)",
                ));
            }
            Some(mode) => {
                return Err(RpcError::new(
                    ErrorCode::InvalidParams,
                    format!("mode {mode:?}: use \"restore\" (Windows has no live upgrade)"),
                ));
            }
        }
        if req.fault.is_some() {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "fault points belong to the live upgrade, which Windows does not have",
            ));
        }
        let binary = match &req.binary {
            Some(b) => std::path::absolute(b).unwrap_or_else(|_| b.into()),
            None => self.exe_path.clone(),
        };
        if !binary.is_file() {
            let what = if req.binary.is_some() {
                "check the path given to --binary"
            } else {
                "the binary this server was started from is gone: pass the new one with --binary PATH"
            };
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("no binary at {}; {what}", binary.display()),
            ));
        }
        let child = std::process::Command::new(&binary)
            .args(["-L", &self.paths.namespace, "server"])
            .env(PREDECESSOR_ENV, std::process::id().to_string())
            .env_remove(crate::protocol::READY_FD_ENV)
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    format!("cannot start {}: {e}", binary.display()),
                )
            })?;
        // Not waited for: it outlives us.
        Ok((child.id(), binary.display().to_string()))
    }

    /// Polls until every connection's queued output is written (or
    /// `limit` passes): a pipe write completes in the background, and a
    /// process that exits first cancels it.
    fn drain_before_exit(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut events = mio::Events::with_capacity(64);
        while Instant::now() < deadline && self.conns.values().any(|c| c.queued() > 0) {
            let _ = self.poll.poll(&mut events, Some(Duration::from_millis(20)));
            for conn in self.conns.values_mut() {
                conn.write_ready();
                let _ = conn.flush();
            }
        }
    }

    pub(in crate::server) fn upgrade_on_sighup(&mut self) {}

    pub(in crate::server) fn on_upgrade_readable(&mut self) {}

    pub(in crate::server) fn on_predecessor_readable(&mut self) {}

    pub(in crate::server) fn upgrade_after_save(&mut self) {}

    pub(in crate::server) fn on_upgrade_timer(&mut self, _now: Instant) {}

    pub(in crate::server) fn on_upgrade_child_exit(&mut self, _status: ExitStatus) {}

    pub(in crate::server) fn stop_during_upgrade(&mut self) {}

    pub(in crate::server) fn on_pidfd(&mut self, _id: u64) {}

    /// A server started by an upgrade answers its caller after probation;
    /// a restore-mode successor has no caller.
    pub(in crate::server) fn answer_upgrade_caller(&mut self, _probation: &str) {}

    /// `server.status`'s view of an upgrade in flight: never one.
    pub(in crate::server) fn upgrade_status(&self) -> Value {
        Value::Null
    }
}
