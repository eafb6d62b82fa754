//! A runtime directory removed under a running server: logind removes
//! `$XDG_RUNTIME_DIR` at logout, tmp cleaners age `/tmp/ptyd-UID`, a user
//! runs `rm -rf`. The listener and the lock stay open on unlinked inodes:
//! the panes run on, but no client can reach them and nothing keeps a
//! second server out. Every `REBIND_CHECK_EVERY`, and at SIGHUP, the
//! server looks whether the socket and the lock at their paths are still
//! the ones it holds, and if not makes them again with the checks of a
//! start: the directories 0700 and ours, the lock taken (or, if a server
//! started meanwhile holds it, said so and tried again at the next
//! check), the socket bound 0600. The keeper gets the new listener and
//! lock, so a crash recovery or an upgrade hands on the new ones.
//!
//! A server that starts while the directory is gone sees its lock file
//! is new and that ptyd processes still hold a removed one
//! (`listener::lock_namespace`): it refuses, naming them.

use super::Server;
use super::timers::TimerKind;
use crate::transport::listener;
use serde_json::{Value, json};
use std::time::Instant;

/// What the checks found, for `server.status` (`runtime_dir`).
#[derive(Debug, Default)]
pub struct Rebinds {
    /// Times the socket or the lock were made again.
    count: u64,
    /// The last time: when, and what was missing.
    last: Option<(u64, String)>,
    /// Why the last attempt failed, while it keeps failing (said in the
    /// log once per distinct reason).
    problem: Option<String>,
}

impl Rebinds {
    pub fn status(&self) -> Value {
        json!({
            "rebinds": self.count,
            "last_rebind": self.last.as_ref().map(|(at, what)| json!({
                "at_unix_ms": at,
                "what": what,
            })),
            "problem": self.problem,
        })
    }
}

impl Server {
    /// Starts the periodic check (once, at start-up).
    pub(super) fn schedule_namespace_check(&mut self) {
        // Tests set a longer period, to see what SIGHUP alone does.
        let every = std::env::var("PTYD_REBIND_CHECK_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(
                listener::REBIND_CHECK_EVERY,
                std::time::Duration::from_millis,
            );
        self.timers
            .add(Instant::now() + every, TimerKind::NamespaceCheck);
    }

    pub(super) fn on_namespace_check_timer(&mut self) {
        self.check_namespace("periodic check");
        self.schedule_namespace_check();
    }

    /// Makes the socket and lock again where they were removed. Not while
    /// an upgrade runs: the listener and lock are in flight then, and the
    /// next check comes soon enough.
    pub(super) fn check_namespace(&mut self, why: &str) {
        if !self.serving.is_owned() || self.upgrade.child_pid().is_some() {
            return;
        }
        let socket_gone = !listener::socket_is_current(&self.paths.socket(), self.socket_dev_ino);
        let lock_gone = !listener::lock_is_current(&self.paths, &self.lock);
        if !socket_gone && !lock_gone {
            if self.rebinds.problem.take().is_some() {
                self.log
                    .log("runtime_dir", "the socket and lock are in place again");
            }
            return;
        }
        let what = match (socket_gone, lock_gone) {
            (true, true) => "socket and lock",
            (true, false) => "socket",
            _ => "lock",
        };
        if let Err(e) = self.rebind(socket_gone, lock_gone) {
            let e = format!("{what} missing ({why}): {e}");
            if self.rebinds.problem.as_ref() != Some(&e) {
                self.log.log("runtime_dir_unusable", &e);
            }
            self.rebinds.problem = Some(e);
            return;
        }
        self.rebinds.problem = None;
        self.rebinds.count += 1;
        let what = format!(
            "the {what} in {} had been removed ({why} found it): made again",
            self.paths.runtime_dir.display()
        );
        self.log.log("runtime_dir_restored", &what);
        self.rebinds.last = Some((crate::clock::unix_ms(), what));
    }

    fn rebind(&mut self, socket_gone: bool, lock_gone: bool) -> Result<(), String> {
        self.paths
            .prepare_runtime_dir()
            .map_err(|e| e.to_string())?;
        if lock_gone {
            // Our old lock keeps no one out any more; it closes here, and
            // the keeper's copy once it has the new one.
            self.lock = listener::relock_namespace(&self.paths).map_err(|e| e.to_string())?;
        }
        if socket_gone {
            let bound = listener::bind_socket(&self.paths).map_err(|e| e.to_string())?;
            // Clients that connected before the path went are still in
            // the old listener's backlog.
            self.accept_all();
            let mut new = mio::net::UnixListener::from_std(bound.listener);
            let registry = self.poll.registry();
            registry
                .register(&mut new, super::LISTENER, mio::Interest::READABLE)
                .map_err(|e| format!("registering the new listener: {e}"))?;
            // Out of both polls by hand: the keeper's copy keeps the old
            // socket open, and with it the registrations.
            let _ = registry.deregister(&mut self.listener);
            self.arrivals.forget_listener(&self.listener);
            self.listener = new;
            self.socket_dev_ino = (bound.dev, bound.ino);
        }
        self.keeper_resend_namespace();
        Ok(())
    }
}
