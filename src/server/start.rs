//! Starting a server on Unix: take over from a keeper or the service
//! manager's fd store if they passed us fds, or import a live upgrade;
//! else claim the namespace (the `flock`, then the socket, bound or
//! adopted from systemd), fork the keeper, assemble the server, restore
//! the snapshot, and serve. `start_windows.rs` is Windows' counterpart.

use super::{Server, ServerOptions, StartError, listener, upgrade};
use crate::paths::NamespacePaths;
use crate::persist;
use crate::protocol::READY_FD_ENV;
use mio::Interest;
use mio::net::UnixListener;
use std::io::Write;

/// Runs a server in the foreground until it is stopped.
pub fn run(opts: ServerOptions) -> Result<(), StartError> {
    // First: the keeper resumed or adopted below writes files too, and
    // under a low `ulimit -f` its checkpoints and our rings, snapshots
    // and history would fail (the panes' programs get the user's limit).
    ignore_sigxfsz();
    let _ = crate::sys::raise_fsize_limit();
    become_keeper_if_asked(&opts.paths);
    // The fds a parent named in our environment are taken (and the
    // variables removed, so no child of ours inherits them) now, while this
    // is the only thread: the disk writer starts in `Server::assemble`.
    // The old server put this fd number there for us alone, and it is
    // adopted only if it is a socket.
    let handoff =
        crate::sys::take_inherited_fd(crate::handoff::HANDOFF_FD_ENV, crate::sys::FdKind::Socket);
    if let Some(sock) = handoff.map_err(|e| format!("{e}; this mode is only for `ptyd upgrade`"))? {
        // Before the first fd arrives: a replacement the keeper starts
        // comes with the usual soft limit, and takes every pane's fds.
        let _ = crate::sys::raise_fd_limit();
        return Ok(upgrade::import::run(sock, opts.paths).map_err(String::from)?);
    }
    // A crash loop's model-less fallback: the keeper sends the panes' fds
    // it holds, taken now (their count is the keeper's fd budget).
    // The keeper named this socket for us alone.
    let adopting = crate::sys::take_inherited_fd(
        crate::server::continuity::keeper::ADOPT_FD_ENV,
        crate::sys::FdKind::Socket,
    )
    .ok()
    .flatten()
    .map(|sock| {
        let _ = crate::sys::raise_fd_limit();
        crate::server::continuity::keeper_link::receive_adopted(&sock)
    });
    // The spawning client (the pipe) and our previous image (the
    // lineage) named these for us alone.
    let ready = crate::sys::take_inherited_fd(READY_FD_ENV, crate::sys::FdKind::Pipe)
        .ok()
        .flatten();
    let lineage = crate::server::continuity::keeper::lineage_from_env();
    let paths = opts.paths;
    crate::server::continuity::keeper::become_subreaper();
    let claimed = claim_namespace(&paths, lineage, ready.as_ref())?;
    // Temp files of a server killed mid-save; we hold the lock now.
    persist::atomic::remove_stale_temps(&paths.state_dir);
    persist::atomic::remove_stale_temps(&persist::history_dir(&paths.state_dir));
    let bound = claimed.bound;
    let listener = UnixListener::from_std(bound.listener);
    let poll = mio::Poll::new().map_err(|e| format!("creating poll: {e}"))?;
    let mut server = Server::assemble(
        poll,
        paths,
        listener,
        (bound.dev, bound.ino),
        claimed.lock,
        opts.history,
    )?;
    server
        .poll
        .registry()
        .register(&mut server.listener, super::LISTENER, Interest::READABLE)
        .map_err(|e| format!("registering listener: {e}"))?;
    server.log.log(
        "started",
        &format!(
            "ptyd {} serving namespace {:?} on {} ({})",
            crate::protocol::SERVER_VERSION,
            server.paths.namespace,
            bound.path.display(),
            claimed.how
        ),
    );
    // Non-blocking: the loop must never wait on the keeper (an fd
    // inherited across an exec comes blocking).
    if let Some(l) = &claimed.lineage {
        let _ = crate::sys::set_nonblocking_cloexec(std::os::fd::AsRawFd::as_raw_fd(l));
    }
    server.lineage = claimed.lineage;
    server.take_up_panes(
        opts.restore,
        opts.hold_reruns,
        adopting,
        claimed.namespace_fds,
    );
    // Past every generation the keeper started or saw (a crash loop's
    // fresh start), whatever the snapshot says.
    server.generation = server
        .generation
        .max(crate::server::continuity::keeper::generation_floor());
    signal_ready(ready);
    crate::service::notify::ready(&format!("serving {} panes", server.panes.len()));
    Ok(server.serve()?)
}

/// Becomes the keeper, never to return, when this process is one: a
/// keeper re-executing itself into this binary (after an upgrade), or the
/// heir of a keeper killed under systemd. Runs first, while this is the
/// only thread.
fn become_keeper_if_asked(paths: &NamespacePaths) {
    // A keeper re-executing itself continues here, holding everything it
    // held.
    // Only our previous image (the keeper) names these fds.
    if let Some(keeper) = crate::server::continuity::keeper::Keeper::resume_from_env() {
        std::process::exit(keeper.run());
    }
    // A keeper killed under systemd left its fds in the unit's fd store
    // (`service/fd_store.rs`), passed back to us now: become the keeper
    // and take its panes over.
    // LISTEN_PID names us for these fds.
    let stored = crate::service::fd_store::take_passed();
    if stored.is_empty() {
        return;
    }
    let count = stored.len();
    match crate::server::continuity::keeper::Keeper::adopt(stored, paths.namespace.clone()) {
        Ok(keeper) => {
            crate::service::fd_store::forget_passed();
            std::process::exit(keeper.run());
        }
        Err(e) => {
            // Let the store go too: its copy of the lock would keep
            // the namespace from us.
            crate::service::journal::write_line(&format!(
                "ptyd: systemd passed {count} fds of a killed keeper, which cannot be taken over ({e}); starting afresh"
            ));
            if let Some(mut store) = crate::service::fd_store::FdStore::from_env() {
                store.forget_all();
            }
        }
    }
}

/// What [`claim_namespace`] holds for the server.
struct Claimed {
    lock: listener::InstanceLock,
    bound: listener::BoundSocket,
    /// How the socket came: bound, or adopted from systemd.
    how: &'static str,
    /// The channel to the keeper, if there is one.
    lineage: Option<std::os::fd::OwnedFd>,
    /// The channel came from our environment (the keeper let go of the
    /// namespace and gets ours back).
    namespace_fds: bool,
}

/// The namespace made ours: its directories, the lock, the socket, and a
/// keeper (forked here on a first start, unless one is already there).
fn claim_namespace(
    paths: &NamespacePaths,
    lineage: Option<std::os::fd::OwnedFd>,
    ready: Option<&std::os::fd::OwnedFd>,
) -> Result<Claimed, StartError> {
    paths.prepare_runtime_dir().map_err(|e| e.to_string())?;
    let lock = listener::lock_namespace(paths).map_err(|e| StartError {
        already_served: e.kind() == std::io::ErrorKind::AddrInUse,
        message: e.to_string(),
    })?;
    // Before binding: a server that will not trust its state directory
    // must not be found serving an empty session.
    paths.prepare_state_dir().map_err(|e| e.to_string())?;
    let activated = listener::adopt_socket(paths).map_err(|e| e.to_string())?;
    let how = if activated.is_some() {
        "adopted from systemd"
    } else {
        "bound"
    };
    let bound = match activated {
        Some(bound) => bound,
        None => listener::bind_socket(paths).map_err(|e| e.to_string())?,
    };
    // A first start becomes the keeper + the serving process, while this
    // is still the only thread (the disk writer starts in `assemble`).
    // A channel from our environment: the keeper let go of the namespace
    // (a restore-mode exec, a crash loop's fresh start) and gets ours.
    let namespace_fds = lineage.is_some();
    let lineage = match lineage {
        Some(l) => Some(l),
        // The bench's baseline (and a way out should the keeper misbehave):
        // a server alone, no rings, no checkpoints, no crash recovery.
        None if std::env::var_os(crate::server::continuity::keeper::NO_KEEPER_ENV).is_some() => {
            None
        }
        None => fork_keeper(
            paths,
            std::os::fd::AsRawFd::as_raw_fd(&bound.listener),
            &lock,
            ready,
        )?,
    };
    Ok(Claimed {
        lock,
        bound,
        how,
        lineage,
        namespace_fds,
    })
}

impl Server {
    /// The panes a new server starts with: those the keeper's fallback
    /// hands over (`adopting`), else the snapshot's when `restore`; then
    /// the keeper hears that we serve.
    fn take_up_panes(
        &mut self,
        restore: bool,
        hold_reruns: bool,
        adopting: Option<(
            crate::server::persistence::restore::Adoptable,
            Option<String>,
        )>,
        namespace_fds: bool,
    ) {
        let why = std::env::var(crate::server::continuity::keeper::RECOVERY_ENV).ok();
        crate::sys::remove_env(crate::server::continuity::keeper::RECOVERY_ENV);
        match adopting {
            // Serving only once adopted: a model-less server that dies in its
            // restore counts in the keeper's crash loop.
            Some((mut held, error)) => {
                let why = why.unwrap_or_else(|| "the serving process died".to_string());
                self.adopt_held(&why, hold_reruns, &mut held, error);
                crate::handoff::fault::check(
                    crate::handoff::fault::from_env().as_deref(),
                    "adopt-before-serving",
                );
                self.keeper_serving(namespace_fds, true);
                // The keeper lets go of what was not adopted.
                self.keeper_resync();
            }
            None => {
                self.keeper_serving(namespace_fds, true);
                if let Some(why) = why {
                    self.log.log(
                        "recovered",
                        &format!("{why}; the keeper's crash loop gave up on its checkpoint and the panes: started from the snapshot on disk"),
                    );
                    self.last_recovery = serde_json::json!({ "reason": why, "from": "snapshot" });
                }
                if restore {
                    self.restore_from_disk(hold_reruns);
                }
            }
        }
    }
}

/// Forks: the parent becomes the keeper (`continuity::keeper`) and never
/// returns; the child goes on as the serving process with its end of the
/// channel. `None` (with the reason logged to stderr) if the keeper could
/// not be made: the server then serves alone, as the first generation.
fn fork_keeper(
    paths: &NamespacePaths,
    listener: std::os::fd::RawFd,
    lock: &listener::InstanceLock,
    ready: Option<&std::os::fd::OwnedFd>,
) -> Result<Option<std::os::fd::OwnedFd>, String> {
    use std::os::fd::AsRawFd;
    let (keeper_end, server_end) = match crate::server::continuity::keeper::channel() {
        Ok(pair) => pair,
        Err(e) => {
            crate::service::journal::write_line(&format!(
                "ptyd: no keeper (creating its channel: {e}); serving without one"
            ));
            return Ok(None);
        }
    };
    let dup = |fd: std::os::fd::RawFd| crate::sys::dup_raw(fd).ok();
    let (held_listener, held_lock) = (dup(listener), dup(lock.raw_fd()));
    let keeper_pid = std::process::id() as i32;
    // Only this thread exists: no thread is started before
    // `Server::assemble`.
    match crate::sys::fork_single_threaded() {
        Ok(crate::sys::Forked::Child) => {
            // Killing the keeper (the service's main pid) ends the server
            // as killing the server did before there was a keeper: the
            // panes hang up. (Only this first generation: a later one is
            // not the keeper's child until its predecessor exits.)
            let _ = crate::sys::die_with_parent(keeper_pid);
            drop(keeper_end);
            drop((held_listener, held_lock));
            Ok(Some(server_end))
        }
        Ok(crate::sys::Forked::Parent { child }) => {
            drop(server_end);
            // The keeper keeps only its own copies: the ready pipe is the
            // server's to answer, and the listener and lock must close
            // with the keeper's copies alone (a stop lets them go).
            let keep: [std::os::fd::RawFd; 3] = [
                keeper_end.as_raw_fd(),
                held_listener.as_ref().map_or(-1, |f| f.as_raw_fd()),
                held_lock.as_ref().map_or(-1, |f| f.as_raw_fd()),
            ];
            // The caller's fds, which this process never uses again: it
            // exits below.
            crate::sys::close_abandoned(
                [
                    Some(listener),
                    Some(lock.raw_fd()),
                    ready.map(|r| r.as_raw_fd()),
                ]
                .into_iter()
                .flatten()
                .filter(|fd| !keep.contains(fd)),
            );
            let keeper = crate::server::continuity::keeper::Keeper::new(
                keeper_end,
                child,
                paths.namespace.clone(),
                held_listener,
                held_lock,
            );
            std::process::exit(keeper.run())
        }
        Err(e) => {
            crate::service::journal::write_line(&format!(
                "ptyd: no keeper (fork: {e}); serving without one"
            ));
            Ok(None)
        }
    }
}

/// A write past RLIMIT_FSIZE must fail with EFBIG, not kill the server.
pub(super) fn ignore_sigxfsz() {
    let _ = crate::sys::ignore_signal(crate::sys::SIGXFSZ);
}

/// Tells a waiting client (see [`READY_FD_ENV`]) that we accept
/// connections: one byte on the pipe it gave us, which is then closed.
fn signal_ready(pipe: Option<std::os::fd::OwnedFd>) {
    if let Some(pipe) = pipe {
        let _ = std::fs::File::from(pipe).write_all(b"1");
    }
}
