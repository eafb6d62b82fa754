//! Starting a server on Windows: claim the namespace (a named mutex, then
//! the pipe's first instance: `transport::windows::claim_namespace`),
//! assemble the server, restore the snapshot, and serve. `start.rs` is the
//! Unix counterpart; what Windows has none of:
//!
//! - no keeper to fork and no crash takeover: a pseudo console cannot be
//!   handed to another process (`keeperless.rs`), so a server that dies
//!   loses its panes and the next one restores them from the snapshot;
//! - no live-upgrade import: a restore-mode upgrade starts this binary as
//!   a new process, which waits here for its predecessor to exit
//!   (`upgrade_windows.rs`);
//! - no socket activation or fd store (systemd's).

use super::continuity::upgrade::PREDECESSOR_ENV;
use super::{LISTENER, Server, ServerOptions, StartError, listener};
use crate::persist;
use std::time::Duration;

/// How long a server started by an upgrade waits for the old one to exit
/// (it saves and tells its clients first).
const PREDECESSOR_WAIT: Duration = Duration::from_secs(30);

/// Runs a server in the foreground until it is stopped.
pub fn run(opts: ServerOptions) -> Result<(), StartError> {
    if let Some(pid) = std::env::var(PREDECESSOR_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    {
        crate::sys::remove_env(PREDECESSOR_ENV);
        crate::sys::wait_for_exit(pid, PREDECESSOR_WAIT);
    }
    let paths = opts.paths;
    paths.prepare_runtime_dir().map_err(|e| e.to_string())?;
    let poll = mio::Poll::new().map_err(|e| format!("creating poll: {e}"))?;
    let claim =
        crate::transport::windows::claim_namespace(poll.registry(), &paths.namespace, LISTENER)
            .map_err(|e| StartError {
                already_served: e.kind() == std::io::ErrorKind::AddrInUse,
                message: e.to_string(),
            })?;
    // Before serving: a server that will not trust its state directory
    // must not be found serving an empty session.
    paths.prepare_state_dir().map_err(|e| e.to_string())?;
    // Temp files of a server killed mid-save; we hold the lock now.
    persist::atomic::remove_stale_temps(&paths.state_dir);
    persist::atomic::remove_stale_temps(&persist::history_dir(&paths.state_dir));
    let pipe = claim.listener.name().to_string();
    let lock = listener::InstanceLock::new(claim.lock);
    let mut server = Server::assemble(poll, paths, claim.listener, (0, 0), lock, opts.history)?;
    server.log.log(
        "started",
        &format!(
            "ptyd {} serving namespace {:?} on {pipe}",
            crate::protocol::SERVER_VERSION,
            server.paths.namespace,
        ),
    );
    if opts.restore {
        server.restore_from_disk(opts.hold_reruns);
    }
    Ok(server.serve()?)
}
