//! The ptyd server: one thread, one mio loop, all state.
//!
//! `run` claims the namespace (lock, then socket), builds the [`Server`] and
//! hands it to the loop in `event_loop`. Requests are handled in `requests`,
//! attached connections in `attach`, parked `pane.wait`s in `waits`.

mod attach;
pub mod config;
mod conn_io;
mod connection;
mod defaults;
mod diagnostics;
mod event_loop;
mod events;
mod fd_budget;
pub(crate) mod fuzzing;
mod history_log;
mod keeper_link;
mod line_budget;
mod listener;
mod output_log;
mod output_ring;
mod pane;
mod pane_exit;
mod pane_fds;
mod pane_io;
mod persistence;
mod replay;
mod requests;
mod restore;
mod resume_rules;
mod serving;
mod spawn;
mod timers;
mod upgrade;
mod waits;
mod workspaces;

use crate::paths::NamespacePaths;
use crate::persist;
use connection::{ConnId, ConnMode, Connection};
use diagnostics::Diagnostics;
use events::EventLog;
use mio::net::UnixListener;
use mio::{Interest, Poll, Token};
use pane::Pane;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::time::Instant;
use timers::Timers;
use waits::Wait;

const LISTENER: Token = Token(0);
const SIGNALS: Token = Token(1);
/// Woken by the disk thread when a save finished.
const DISK: Token = Token(2);
/// The handoff socket (or version probe) of a live upgrade.
const UPGRADE: Token = Token(3);
/// A server started by an upgrade: the channel to its predecessor, open
/// until the predecessor's probation ends.
const PREDECESSOR: Token = Token(4);
const FIRST_DYNAMIC_TOKEN: usize = 5;

use crate::protocol::READY_FD_ENV;

pub struct ServerOptions {
    pub paths: NamespacePaths,
    /// Write per-pane history files with the snapshot.
    pub history: bool,
    /// Restore from the snapshot at start-up (else start empty and leave
    /// the file alone until the first save replaces it).
    pub restore: bool,
    /// Hold panes whose restore policy is `rerun` instead of running them:
    /// a server a client command started in the background (`ptyd ls`
    /// after a reboot) must not re-run commands as a side effect.
    pub hold_reruns: bool,
}

/// Who a dynamic token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Pane(u64),
    Conn(ConnId),
    /// The pidfd of a pane's process inherited from an earlier generation.
    Pidfd(u64),
}

/// All mutable state the loop owns. Nothing else touches it.
pub struct Server {
    poll: Poll,
    listener: UnixListener,
    signals: Signals,
    paths: NamespacePaths,
    socket_dev_ino: (u64, u64),
    /// The flock on it is our claim on the namespace; a live upgrade hands
    /// it on with the fd.
    lock: listener::InstanceLock,
    panes: BTreeMap<u64, Pane>,
    conns: HashMap<ConnId, Connection>,
    sources: HashMap<Token, Source>,
    next_token: usize,
    /// Public pane ids are never reused within a server's life.
    next_pane_id: u64,
    next_wait_id: u64,
    events: EventLog,
    timers: Timers,
    waits: BTreeMap<u64, Wait>,
    log: Diagnostics,
    started: Instant,
    started_unix_ms: u64,
    /// Sources that stopped reading at their per-wakeup budget with data
    /// left. Edge-triggered polling will not report them again, so the loop
    /// revisits them before sleeping.
    backlog: VecDeque<Source>,
    /// Until when this turn of the loop may read pane output; past it,
    /// ready panes wait on the backlog for the next turn, so the listener
    /// and the connections are served every few milliseconds however many
    /// panes flood (`pane_io::PANE_TURN_BUDGET`).
    pane_turn_until: Instant,
    /// Set by SIGTERM, SIGINT or `server.stop`.
    stopping: bool,
    tree: crate::workspace::Tree,
    persist: persistence::Persistence,
    /// Bumped by each live upgrade; fences snapshot writes.
    generation: u64,
    /// The binary `server.upgrade` starts by default.
    exe_path: std::path::PathBuf,
    /// The live upgrade in progress, if any (`upgrade/`).
    upgrade: upgrade::Upgrade,
    /// The servers' end of the keeper channel (see `keeper`), once there
    /// is one.
    lineage: Option<std::os::fd::OwnedFd>,
    /// The keeper's end of a channel this server made because it has no
    /// keeper (its fork failed): it becomes one after its first handoff.
    lineage_reader: Option<std::os::fd::OwnedFd>,
    /// Whether we serve our sources, or an upgrade paused them, handed
    /// them over (probation) or released them (`serving.rs`).
    serving: serving::Serving,
    /// Figures of the last upgrade, for `server.status`.
    last_upgrade: serde_json::Value,
    /// On a server started by an upgrade: the server it took over from
    /// (pid, version, binary), for the report.
    upgraded_from: serde_json::Value,
    /// On a server started by an upgrade: the `server.upgrade` request to
    /// answer once it serves.
    upgrade_caller: Option<(ConnId, serde_json::Value)>,
    /// On a server started by an upgrade: when it committed (probation's
    /// length in the report).
    committed_at: Option<std::time::Instant>,
    /// While the previous generation is in probation it may still take
    /// everything back, so no new upgrade may start: this is its channel.
    predecessor: Option<std::os::fd::OwnedFd>,
    /// A SIGHUP (`systemctl reload`, the reaper forwarding one) came while
    /// an upgrade ran or its probation lasted: run it once that is over.
    sighup_pending: bool,
    /// The user's config file as read at start-up or by the last
    /// `server.config.reload` (`config.rs`).
    config: config::UserConfig,
    /// What of it was ignored and why, for `server.status`.
    config_problems: Vec<String>,
    /// The shell-integration scripts, written at start-up (`crate::shell`);
    /// `None` if they could not be (logged).
    shell: Option<crate::shell::Installed>,
    /// The channel to the keeper (`lineage`): its queue and checkpoints.
    keeper: keeper_link::KeeperLink,
    /// What the last crash recovery did, for `server.status`.
    last_recovery: serde_json::Value,
    /// The fd limit, the reserve fd and a starved listener's state
    /// (`fd_budget.rs`).
    fds: fd_budget::FdBudget,
    /// Panes some attached client's input is held for (`attach.rs`); may
    /// name panes whose clients were released or left since.
    input_held_for: std::collections::BTreeSet<u64>,
    /// Some attached client's view is stale (`Connection::view`): drawn
    /// before the next flush.
    stale_views: bool,
    /// The buffer a pane's output is forwarded through (`read_pane`),
    /// kept between reads: a fresh one grew by doubling, copying each
    /// slice of output several times over.
    forward: Vec<u8>,
}

/// Runs a server in the foreground until it is stopped.
pub fn run(opts: ServerOptions) -> Result<(), StartError> {
    // A keeper re-executing itself into this binary (after an upgrade)
    // continues here, holding everything it held.
    // SAFETY: no other thread runs yet; only our previous image (the
    // keeper) names these fds.
    if let Some(keeper) = unsafe { crate::keeper::Keeper::resume_from_env() } {
        std::process::exit(keeper.run());
    }
    // A keeper killed under systemd left its fds in the unit's fd store
    // (`service/fd_store.rs`), passed back to us now: become the keeper
    // and take its panes over.
    // SAFETY: still the only thread; LISTEN_PID names us for these fds.
    let stored = unsafe { crate::service::fd_store::take_passed() };
    if !stored.is_empty() {
        let count = stored.len();
        match crate::keeper::Keeper::adopt(stored, opts.paths.namespace.clone()) {
            Ok(keeper) => {
                // SAFETY: still the only thread.
                unsafe { crate::service::fd_store::forget_passed() };
                std::process::exit(keeper.run());
            }
            Err(e) => {
                // Let the store go too: its copy of the lock would keep
                // the namespace from us.
                eprintln!(
                    "ptyd: systemd passed {count} fds of a killed keeper, which cannot be taken over ({e}); starting afresh"
                );
                if let Some(mut store) = crate::service::fd_store::FdStore::from_env() {
                    store.forget_all();
                }
            }
        }
    }
    // The fds a parent named in our environment are taken (and the
    // variables removed, so no child of ours inherits them) now, while this
    // is the only thread: the disk writer starts in `Server::assemble`.
    // SAFETY: no other thread runs yet; the old server put this fd number
    // there for us alone, and it is adopted only if it is a socket.
    let handoff = unsafe {
        crate::sys::take_inherited_fd(crate::handoff::HANDOFF_FD_ENV, crate::sys::FdKind::Socket)
    };
    if let Some(sock) = handoff.map_err(|e| format!("{e}; this mode is only for `ptyd upgrade`"))? {
        return Ok(upgrade::import::run(sock, opts.paths)?);
    }
    // SAFETY: as above: still the only thread; the spawning client (the
    // pipe) and our previous image (the lineage) named these for us alone.
    let (ready, lineage) = unsafe {
        (
            crate::sys::take_inherited_fd(READY_FD_ENV, crate::sys::FdKind::Pipe)
                .ok()
                .flatten(),
            crate::keeper::lineage_from_env(),
        )
    };
    let paths = opts.paths;
    ignore_sigxfsz();
    crate::keeper::become_subreaper();
    paths.prepare_runtime_dir().map_err(|e| e.to_string())?;
    let lock = listener::lock_namespace(&paths).map_err(|e| StartError {
        already_served: e.kind() == std::io::ErrorKind::AddrInUse,
        message: e.to_string(),
    })?;
    // Before binding: a server that will not trust its state directory
    // must not be found serving an empty session.
    paths.prepare_state_dir().map_err(|e| e.to_string())?;
    let activated = listener::adopt_socket(&paths).map_err(|e| e.to_string())?;
    let how = if activated.is_some() {
        "adopted from systemd"
    } else {
        "bound"
    };
    let bound = match activated {
        Some(bound) => bound,
        None => listener::bind_socket(&paths).map_err(|e| e.to_string())?,
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
        None if std::env::var_os(crate::keeper::NO_KEEPER_ENV).is_some() => None,
        None => fork_keeper(
            &paths,
            std::os::fd::AsRawFd::as_raw_fd(&bound.listener),
            &lock,
            ready.as_ref(),
        )?,
    };
    // Temp files of a server killed mid-save; we hold the lock now.
    persist::atomic::remove_stale_temps(&paths.state_dir);
    persist::atomic::remove_stale_temps(&persist::history_dir(&paths.state_dir));
    let listener = UnixListener::from_std(bound.listener);
    let mut server = Server::assemble(paths, listener, (bound.dev, bound.ino), lock, opts.history)?;
    server
        .poll
        .registry()
        .register(&mut server.listener, LISTENER, Interest::READABLE)
        .map_err(|e| format!("registering listener: {e}"))?;
    server.log.log(
        "started",
        &format!(
            "ptyd {} serving namespace {:?} on {} ({how})",
            crate::protocol::SERVER_VERSION,
            server.paths.namespace,
            bound.path.display()
        ),
    );
    // Non-blocking: the loop must never wait on the keeper (an fd
    // inherited across an exec comes blocking).
    if let Some(l) = &lineage {
        let _ = crate::sys::set_nonblocking_cloexec(std::os::fd::AsRawFd::as_raw_fd(l));
    }
    server.lineage = lineage;
    server.keeper_serving(namespace_fds, true);
    if let Ok(why) = std::env::var(crate::keeper::RECOVERY_ENV) {
        // SAFETY: the disk thread never reads the environment.
        unsafe { std::env::remove_var(crate::keeper::RECOVERY_ENV) };
        server.log.log(
            "recovered",
            &format!("{why}; the keeper's crash loop gave up on its checkpoint: started from the snapshot on disk"),
        );
        server.last_recovery = serde_json::json!({ "reason": why, "from": "snapshot" });
    }
    if opts.restore {
        server.restore_from_disk(opts.hold_reruns);
    }
    signal_ready(ready);
    crate::service::notify::ready(&format!("serving {} panes", server.panes.len()));
    Ok(server.serve()?)
}

/// Forks: the parent becomes the keeper (`crate::keeper`) and never
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
    let (keeper_end, server_end) = match crate::keeper::channel() {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("ptyd: no keeper (creating its channel: {e}); serving without one");
            return Ok(None);
        }
    };
    let dup = |fd: std::os::fd::RawFd| {
        // SAFETY: both fds are open for this call (the caller holds them).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .ok()
    };
    let (held_listener, held_lock) = (dup(listener), dup(lock.raw_fd()));
    let keeper_pid = std::process::id() as i32;
    // SAFETY: only this thread exists (no thread is started before
    // `Server::assemble`), so the child may run ordinary code after fork.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            // Killing the keeper (the service's main pid) ends the server
            // as killing the server did before there was a keeper: the
            // panes hang up. (Only this first generation: a later one is
            // not the keeper's child until its predecessor exits.)
            let _ = crate::sys::die_with_parent(keeper_pid);
            drop(keeper_end);
            drop((held_listener, held_lock));
            Ok(Some(server_end))
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(server_end);
            // The keeper keeps only its own copies: the ready pipe is the
            // server's to answer, and the listener and lock must close
            // with the keeper's copies alone (a stop lets them go).
            let keep: [std::os::fd::RawFd; 3] = [
                keeper_end.as_raw_fd(),
                held_listener.as_ref().map_or(-1, |f| f.as_raw_fd()),
                held_lock.as_ref().map_or(-1, |f| f.as_raw_fd()),
            ];
            for fd in [
                Some(listener),
                Some(lock.raw_fd()),
                ready.map(|r| r.as_raw_fd()),
            ]
            .into_iter()
            .flatten()
            {
                if !keep.contains(&fd) {
                    // SAFETY: these are the caller's fds, which this
                    // process never uses again: it exits below.
                    unsafe { libc::close(fd) };
                }
            }
            let keeper = crate::keeper::Keeper::new(
                keeper_end,
                child.as_raw(),
                paths.namespace.clone(),
                held_listener,
                held_lock,
            );
            std::process::exit(keeper.run())
        }
        Err(e) => {
            eprintln!("ptyd: no keeper (fork: {e}); serving without one");
            Ok(None)
        }
    }
}

/// Exit code of `ptyd server` when another server already serves the
/// namespace. The systemd unit names it in `RestartPreventExitStatus=`, so
/// a service that finds a server running outside it fails once instead of
/// being restarted until systemd's start limit.
pub const EXIT_ALREADY_SERVED: i32 = 3;

/// Why [`run`] ended with an error.
#[derive(Debug)]
pub struct StartError {
    pub message: String,
    /// Another server holds the namespace ([`EXIT_ALREADY_SERVED`]).
    pub already_served: bool,
}

impl From<String> for StartError {
    fn from(message: String) -> StartError {
        StartError {
            message,
            already_served: false,
        }
    }
}

/// A write past RLIMIT_FSIZE must fail with EFBIG, not kill the server.
fn ignore_sigxfsz() {
    let _ = crate::sys::ignore_signal(crate::sys::SIGXFSZ);
}

impl Server {
    /// Builds a server around a claimed namespace: the poll, the signal
    /// source, the disk thread. Nothing else is registered yet.
    fn assemble(
        paths: NamespacePaths,
        listener: UnixListener,
        socket_dev_ino: (u64, u64),
        lock: listener::InstanceLock,
        history: bool,
    ) -> Result<Server, String> {
        let mut log = Diagnostics::open(paths.diagnostics());
        let (fds, fd_note) = fd_budget::FdBudget::new();
        if let Some(note) = fd_note {
            log.log("fd_limit", &note);
        }
        let poll = Poll::new().map_err(|e| format!("creating poll: {e}"))?;
        // Registered before any pane exists, so no child's exit can be missed.
        let mut signals = Signals::new([SIGCHLD, SIGTERM, SIGINT, SIGHUP])
            .map_err(|e| format!("installing signal handlers: {e}"))?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)
            .map_err(|e| format!("registering signals: {e}"))?;
        let waker = std::sync::Arc::new(
            mio::Waker::new(poll.registry(), DISK)
                .map_err(|e| format!("creating the disk waker: {e}"))?,
        );
        let writer = persist::writer::Writer::spawn(std::sync::Arc::new(move || {
            let _ = waker.wake();
        }))
        .map_err(|e| format!("starting the disk writer thread: {e}"))?;
        // Where upgrades look for the new binary by default: resolved now,
        // while /proc/self/exe still names the file we were started from (a
        // package manager may replace it later; then it reads "(deleted)").
        let exe_path = std::env::current_exe().unwrap_or_else(|_| std::path::PathBuf::from("ptyd"));
        let (config, config_problems) = config::load();
        for problem in &config_problems {
            log.log("config_ignored", problem);
        }
        let shell = match crate::shell::install(&paths.runtime_dir.join("shell")) {
            Ok(installed) => Some(installed),
            Err(e) => {
                log.log(
                    "shell_integration_unavailable",
                    &format!("{e}; shells start without ptyd's shell integration"),
                );
                None
            }
        };
        let mut server = Server {
            poll,
            listener,
            signals,
            socket_dev_ino,
            lock,
            panes: BTreeMap::new(),
            conns: HashMap::new(),
            sources: HashMap::new(),
            next_token: FIRST_DYNAMIC_TOKEN,
            next_pane_id: 1,
            next_wait_id: 1,
            events: EventLog::new(),
            timers: Timers::default(),
            waits: BTreeMap::new(),
            log,
            started: Instant::now(),
            started_unix_ms: crate::clock::unix_ms(),
            backlog: VecDeque::new(),
            pane_turn_until: Instant::now(),
            stopping: false,
            tree: crate::workspace::Tree::new(),
            persist: persistence::Persistence::new(Some(writer), history),
            generation: 1,
            paths,
            exe_path,
            upgrade: upgrade::Upgrade::Idle,
            lineage: None,
            lineage_reader: None,
            serving: serving::Serving::Owned,
            last_upgrade: serde_json::Value::Null,
            upgraded_from: serde_json::Value::Null,
            upgrade_caller: None,
            committed_at: None,
            predecessor: None,
            sighup_pending: false,
            config,
            config_problems,
            shell,
            keeper: keeper_link::KeeperLink::default(),
            last_recovery: serde_json::Value::Null,
            fds,
            input_held_for: Default::default(),
            stale_views: false,
            forward: Vec::new(),
        };
        server.persist.debounce = server.config.save_debounce;
        server.persist.max_delay = server.config.save_max_delay;
        server.timers.add(
            Instant::now() + persistence::HISTORY_INTERVAL,
            timers::TimerKind::HistoryTick,
        );
        Ok(server)
    }

    /// Runs the loop until the server stops or hands over, then finishes
    /// accordingly: a stopped server saves and hangs up; a server that handed
    /// over lets go of everything (the new one owns it all now) and exits,
    /// or, a first generation without a keeper, becomes the keeper.
    fn serve(mut self) -> Result<(), String> {
        // A panic in the loop must still save what it can and tell clients
        // we are gone, so none of them reconnects forever.
        let result =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_loop())) {
                Ok(result) => result,
                Err(_) => Err(
                    "the server loop panicked; saved what it could and told clients".to_string(),
                ),
            };
        let Some(new_pid) = self.serving.released_to() else {
            self.shutdown();
            return result;
        };
        let reader = self.lineage_reader.take();
        let namespace = self.paths.namespace.clone();
        self.release();
        drop(self);
        match reader {
            Some(reader) => {
                // A server that started without a keeper (its fork
                // failed) becomes one now, holding only its children.
                // Everything the server held is freed by now (the panes'
                // models, the connections' queues); the keeper lives on
                // for as long as the service does and needs almost none of
                // it, so the memory goes back rather than stay resident.
                crate::sys::release_free_memory();
                let keeper =
                    crate::keeper::Keeper::new(reader, new_pid as i32, namespace, None, None);
                std::process::exit(keeper.run())
            }
            None => Ok(()),
        }
    }

    /// Tells clients we are going, hangs up the panes, removes our socket.
    pub(super) fn shutdown(&mut self) {
        crate::service::notify::stopping();
        // First, so the keeper lets go of the panes (they hang up) and of
        // the namespace along with us.
        self.keeper_stopping();
        // Save first: the snapshot must describe the panes as they ran,
        // and stopping the server is no reason to forget them.
        self.final_save();
        self.emit(crate::protocol::events::Event::ServerStopping {});
        // Stopped in probation: the upgrade itself went through.
        self.answer_upgrade_caller("stopped");
        let attached: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.mode, ConnMode::Attached { .. }))
            .map(|(id, _)| *id)
            .collect();
        let payload =
            serde_json::json!({ "reason": "server_exit", "message": "the ptyd server stopped" });
        for id in attached {
            self.end_attachment(id, &payload, false);
        }
        for conn in self.conns.values_mut() {
            // A last try even where the socket was full: the loop has
            // stopped watching for it to drain.
            conn.write_ready();
            let _ = conn.flush();
        }
        // One pass over /proc for all sessions, not one per pane.
        let sids: Vec<i32> = self
            .panes
            .values()
            .filter_map(|p| match *p.state() {
                pane::PaneState::Running(child) => Some(child.sid),
                _ => None,
            })
            .collect();
        for pid in crate::sys::sessions_members(&sids).into_values().flatten() {
            let _ = crate::sys::kill(pid, crate::sys::SIGHUP);
        }
        let registry = self.poll.registry();
        for pane in self.panes.values_mut() {
            pane.close_fds(registry);
        }
        listener::unlink_if_ours(
            &self.paths.socket(),
            self.socket_dev_ino.0,
            self.socket_dev_ino.1,
        );
        self.log.log("stopped", "server stopped");
    }
}

impl Drop for Server {
    /// `shutdown` and `release` let go of every pane's fds on purpose; a
    /// server dropped without either (an import that failed part-way)
    /// still takes them out of its poll first, as `PaneFds` requires.
    fn drop(&mut self) {
        let registry = self.poll.registry();
        for pane in self.panes.values_mut() {
            pane.close_fds(registry);
        }
    }
}

/// Tells a waiting client (see [`READY_FD_ENV`]) that we accept
/// connections: one byte on the pipe it gave us, which is then closed.
fn signal_ready(pipe: Option<std::os::fd::OwnedFd>) {
    if let Some(pipe) = pipe {
        let _ = std::fs::File::from(pipe).write_all(b"1");
    }
}
