//! Which environment a pane's process starts with (docs/design/environment.md):
//! its creating client's (else the server's), less what ptyd defines or
//! must not leak, with the `update_environment` values of the last client
//! that attached where the creator's may be stale, then ptyd's own
//! variables and the pane's `env` on top.

use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;
use std::collections::BTreeMap;
use std::ffi::OsString;

/// A client environment without what a pane never takes from one
/// (`pty::inherits_env`): what a pane keeps for its respawns.
pub fn filtered(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(k, _)| crate::pty::inherits_env(k.as_ref()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Server {
    /// Checks a request's client environment (`invalid_params` naming the
    /// problem).
    pub(in crate::server) fn check_client_env(
        env: Option<&BTreeMap<String, String>>,
    ) -> Result<(), RpcError> {
        match env {
            Some(env) => crate::environment::check(env)
                .map_err(|e| RpcError::new(ErrorCode::InvalidParams, format!("client_env: {e}"))),
            None => Ok(()),
        }
    }

    /// Whether a client runs inside one of this server's panes: its
    /// `update_environment` values are then those the pane started with,
    /// older than the last attaching client's.
    pub(in crate::server) fn env_from_own_pane(&self, env: &BTreeMap<String, String>) -> bool {
        env.get("PTYD_SOCKET")
            .is_some_and(|s| std::path::Path::new(s) == self.paths.socket())
    }

    /// An attaching client's environment: from outside this server's
    /// panes, its values of `update_environment` (and the absence of the
    /// others) become what panes started afterwards get.
    pub(in crate::server) fn note_attaching_env(&mut self, env: Option<&BTreeMap<String, String>>) {
        let Some(env) = env else { return };
        if self.env_from_own_pane(env) || crate::environment::check(env).is_err() {
            return;
        }
        let fresh = (self.config.update_environment.iter())
            .filter_map(|name| Some((name.clone(), env.get(name)?.clone())))
            .collect();
        self.attach_env = Some(fresh);
    }

    /// The variables a pane's process starts with before ptyd's own: its
    /// creator's environment, else the server's, both filtered; `refresh`
    /// (a start the creator's environment is not fresh for) replaces the
    /// `update_environment` variables with the last attaching client's.
    pub(in crate::server) fn base_env(
        &self,
        client: Option<&BTreeMap<String, String>>,
        refresh: bool,
    ) -> BTreeMap<OsString, OsString> {
        let mut env: BTreeMap<OsString, OsString> = match client {
            Some(client) => (client.iter())
                .filter(|(k, _)| crate::pty::inherits_env(k.as_ref()))
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            None => std::env::vars_os()
                .filter(|(k, _)| crate::pty::inherits_env(k))
                .collect(),
        };
        if let (true, Some(fresh)) = (refresh, &self.attach_env) {
            for name in &self.config.update_environment {
                match fresh.get(name) {
                    Some(value) => env.insert(name.into(), value.into()),
                    // tmux's rule: a listed variable the client lacks is
                    // removed, not left at a value from another login.
                    None => env.remove(OsString::from(name).as_os_str()),
                };
            }
        }
        env
    }
}
