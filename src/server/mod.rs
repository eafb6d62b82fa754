//! The ptyd server: one thread, one mio loop, all state.
//!
//! `run` (`start.rs`) claims the namespace (lock, then socket), builds the
//! [`Server`] and hands it to the loop in `event_loop`. Requests are
//! dispatched in `requests`, parked `pane.wait`s answered in `waits`.
//! What this folder holds at its top is where the subsystems meet: the
//! loop, the dispatch, the timers and the event log. The subsystems have
//! a folder each:
//!
//! - `panes/`: the panes, their fds, output and input, spawn and exit;
//! - `clients/`: the connections, attachments and a client's terminal;
//! - `continuity/`: what keeps panes alive across processes (the keeper,
//!   its link, the rings, the live upgrade);
//! - `persistence/`: the snapshot, when it is saved and what a start-up
//!   restores from it.
//!
//! The server's side of the transport (the listener) is in `transport/`
//! beside the client's; the fuzz targets' entry points into the server
//! are in `src/fuzzing/server.rs`, compiled here as `server::fuzzing` so
//! they reach the parsers this module keeps private.
//!
//! Windows (docs/design/windows.md) swaps whole modules, never lines:
//! `start_windows.rs` here (the named mutex and pipe instead of `flock`
//! and socket, no keeper to fork), `transport/listener_windows.rs` (pipe
//! instances for the socket), `panes/fds_windows.rs` (panes woken through
//! `pty::PaneWakes` instead of polled fds), `clients/direct_tty_windows.rs`
//! and `clients/tty_keys_windows.rs` (a client's terminal is never passed
//! to the server), and in `continuity/` the one
//! stand-in for the keeper and the live upgrade (its `mod.rs` says the
//! contract). What serves only the live upgrade and the keeper (pane and
//! connection state carried across, paused serving, rings) is built on
//! Windows but unused there, hence the `dead_code` allowance for that
//! target.

#![cfg_attr(windows, allow(dead_code))]

pub mod config;
mod defaults;
mod diagnostics;
mod event_loop;
mod events;
mod fd_budget;
#[cfg(unix)]
#[path = "../fuzzing/server.rs"]
pub(crate) mod fuzzing;
mod history_budget;
mod pane_turn;
mod requests;
#[cfg_attr(windows, path = "start_windows.rs")]
mod start;
mod timers;
mod waits;
mod workspaces;

// The subsystems, one folder each; each folder's `mod.rs` says what it
// owns and, where Windows has a stand-in, the contract both sides keep.
mod clients;
mod continuity;
mod panes;
mod persistence;
#[cfg_attr(windows, path = "rebind_windows.rs")]
mod rebind;

pub use start::run;

use crate::paths::NamespacePaths;
use crate::persist;
use crate::transport::listener;
use clients::arrivals;
use clients::connection::{ConnId, Connection};
use continuity::{keeper_link, serving, succession, upgrade};
use diagnostics::Diagnostics;
use events::EventLog;
use mio::{Poll, Token};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;
use timers::Timers;
use waits::Wait;

const LISTENER: Token = Token(0);
const SIGNALS: Token = Token(1);
/// The loop's one `mio::Waker` (mio allows one per poll): woken by the
/// disk thread when a save finished, and on Windows by the panes' threads
/// (`pty::PaneWakes`) and the console control handler (`sys::Signals`).
const WAKE: Token = Token(2);
/// The handoff socket (or version probe) of a live upgrade.
const UPGRADE: Token = Token(3);
/// A server started by an upgrade: the channel to its predecessor, open
/// until the predecessor's probation ends.
const PREDECESSOR: Token = Token(4);
const FIRST_DYNAMIC_TOKEN: usize = 5;

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
    /// A client's terminal the server writes to directly (`direct_tty.rs`),
    /// registered while it is full (never on Windows).
    Tty(ConnId),
}

/// All mutable state the loop owns. Nothing else touches it.
pub struct Server {
    poll: Poll,
    listener: listener::Listener,
    signals: crate::sys::Signals,
    /// The panes' wakes where the backend cannot be polled (Windows).
    pane_wakes: crate::pty::PaneWakes,
    paths: NamespacePaths,
    socket_dev_ino: (u64, u64),
    /// The flock on it is our claim on the namespace; a live upgrade hands
    /// it on with the fd.
    lock: listener::InstanceLock,
    panes: panes::Panes,
    conns: HashMap<ConnId, Connection>,
    sources: HashMap<Token, Source>,
    next_token: usize,
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
    /// What this turn of the loop may still spend on pane output, and the
    /// echo it waits for (`pane_turn.rs`).
    pane_turn: pane_turn::PaneTurn,
    /// Whether a client connected or sent something meanwhile, asked
    /// while pane output is read (`panes::io::ARRIVAL_CHECK_EVERY`).
    arrivals: arrivals::Arrivals,
    /// Set by SIGTERM, SIGINT or `server.stop`.
    stopping: bool,
    /// The connections that asked for the stop: told if the final save
    /// fails, so `ptyd stop` can say so and exit non-zero.
    stop_callers: Vec<ConnId>,
    tree: crate::workspace::Tree,
    /// The commands of the tab views' `:` prompts still running.
    prompt_runs: clients::tab_prompt::Runs,
    persist: persistence::Persistence,
    /// Bumped by each live upgrade; fences snapshot writes.
    generation: u64,
    /// The binary `server.upgrade` starts by default.
    exe_path: std::path::PathBuf,
    /// The live upgrade in progress, if any (`upgrade/`).
    upgrade: upgrade::Upgrade,
    /// The servers' end of the keeper channel (see `keeper`), once there
    /// is one.
    lineage: Option<keeper_link::Channel>,
    /// The keeper's end of a channel this server made because it has no
    /// keeper (its fork failed): it becomes one after its first handoff.
    lineage_reader: Option<keeper_link::Channel>,
    /// Whether we serve our sources, or an upgrade paused them, handed
    /// them over (probation) or released them (`serving.rs`).
    serving: serving::Serving,
    /// Figures of the last upgrade, for `server.status`.
    last_upgrade: serde_json::Value,
    /// On a server started by an upgrade: where it came from, the request
    /// to answer, and the predecessor's probation.
    succession: succession::Succession,
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
    /// While a tab-view client's keys or clicks run: that client. A
    /// change they make to a tab's default focus or zoom moves only its
    /// own view (`tab_view.rs`, `follow_tree`), not the tab's other
    /// clients.
    view_actor: Option<ConnId>,
    /// What the checks of the socket and lock at their paths found
    /// (`rebind.rs`).
    rebinds: rebind::Rebinds,
    /// The connections refused for holding the most input when all
    /// together held too much (`clients/line_budget.rs`).
    input_budget: clients::line_budget::InputBudget,
    /// The buffer a pane's output is forwarded through (`read_pane`),
    /// kept between reads: a fresh one grew by doubling, copying each
    /// slice of output several times over.
    forward: Vec<u8>,
    /// The `update_environment` values of the last client that attached
    /// from outside this server's panes (`panes/environment.rs`); `None`
    /// until one has. Memory only.
    attach_env: Option<BTreeMap<String, String>>,
    /// Variables kept for new processes by scope (`environment`,
    /// requests.rs): in memory only, gone with the serving process.
    environment: std::collections::BTreeMap<String, requests::Environment>,
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

impl Server {
    /// Builds a server around a claimed namespace: the signal source, the
    /// panes' wakes, the disk thread, in `poll` (made by the caller, as
    /// Windows' listener needs it first). Nothing else is registered yet.
    fn assemble(
        poll: Poll,
        paths: NamespacePaths,
        listener: listener::Listener,
        socket_dev_ino: (u64, u64),
        lock: listener::InstanceLock,
        history: bool,
    ) -> Result<Server, String> {
        let mut log = Diagnostics::open(paths.diagnostics());
        let (fds, fd_note) = fd_budget::FdBudget::new();
        if let Some(note) = fd_note {
            log.log("fd_limit", &note);
        }
        // mio allows one waker per poll: the disk thread, the panes'
        // threads and the console handler share it (`WAKE`).
        let waker = std::sync::Arc::new(
            mio::Waker::new(poll.registry(), WAKE)
                .map_err(|e| format!("creating the loop's waker: {e}"))?,
        );
        // Registered before any pane exists, so no child's exit can be missed.
        let signals = crate::sys::Signals::new(poll.registry(), SIGNALS, &waker)
            .map_err(|e| format!("installing signal handlers: {e}"))?;
        let pane_wakes = crate::pty::PaneWakes::new(std::sync::Arc::clone(&waker));
        let prompt_runs = clients::tab_prompt::Runs::new(std::sync::Arc::clone(&waker));
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
            pane_wakes,
            socket_dev_ino,
            lock,
            panes: panes::Panes::new(),
            conns: HashMap::new(),
            sources: HashMap::new(),
            next_token: FIRST_DYNAMIC_TOKEN,
            next_wait_id: 1,
            events: EventLog::new(),
            timers: Timers::default(),
            waits: BTreeMap::new(),
            log,
            started: Instant::now(),
            started_unix_ms: crate::clock::unix_ms(),
            backlog: VecDeque::new(),
            pane_turn: pane_turn::PaneTurn::new(Instant::now()),
            arrivals: arrivals::Arrivals::new(),
            stopping: false,
            stop_callers: Vec::new(),
            tree: crate::workspace::Tree::new(),
            prompt_runs,
            persist: persistence::Persistence::new(Some(writer), history),
            generation: 1,
            paths,
            exe_path,
            upgrade: upgrade::Upgrade::Idle,
            lineage: None,
            lineage_reader: None,
            serving: serving::Serving::Owned,
            last_upgrade: serde_json::Value::Null,
            succession: Default::default(),
            sighup_pending: false,
            config,
            config_problems,
            shell,
            keeper: keeper_link::KeeperLink::default(),
            last_recovery: serde_json::Value::Null,
            fds,
            input_held_for: Default::default(),
            stale_views: false,
            view_actor: None,
            rebinds: Default::default(),
            input_budget: Default::default(),
            forward: Vec::new(),
            attach_env: None,
            environment: Default::default(),
        };
        server.persist.debounce = server.config.save_debounce;
        server.persist.max_delay = server.config.save_max_delay;
        server.timers.add(
            Instant::now() + persistence::HISTORY_INTERVAL,
            timers::TimerKind::HistoryTick,
        );
        server.schedule_namespace_check();
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
            self.shutdown(Ending::Stop);
            return result;
        };
        keeper_link::after_release(self, new_pid)
    }

    /// Tells clients we are going (or, `Ending::Restart`, coming back:
    /// they reconnect), hangs up the panes, removes our socket.
    pub(super) fn shutdown(&mut self, ending: Ending) {
        crate::service::notify::stopping();
        // First, so the keeper lets go of the panes (they hang up) and of
        // the namespace along with us.
        self.keeper_stopping();
        // No client leaving resizes a pane from here on.
        self.stopping = true;
        self.emit(crate::protocol::events::Event::ServerStopping {});
        // Stopped in probation: the upgrade itself went through.
        self.answer_upgrade_caller("stopped");
        let attached: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_attached())
            .map(|(id, _)| *id)
            .collect();
        let payload = match ending {
            Ending::Stop => {
                serde_json::json!({ "reason": "server_exit", "message": "the ptyd server stopped" })
            }
            Ending::Restart => serde_json::json!({
                "reason": "server_restart",
                "message": "the ptyd server restarted",
            }),
        };
        for id in attached {
            self.end_attachment(id, &payload, false);
        }
        // Saved after the last event is numbered (the snapshot keeps the
        // number, for the next server to go on from), before the panes
        // hang up: it must describe them as they ran, and stopping the
        // server is no reason to forget them.
        if let Some(e) = self.final_save() {
            let line = crate::protocol::response_line(
                &serde_json::Value::Null,
                Err(crate::protocol::RpcError::new(
                    crate::protocol::ErrorCode::Internal,
                    format!(
                        "the server stopped, but its final save failed ({e}): the panes' last \
                         state may not be on disk; the diagnostics log has the details"
                    ),
                )),
            );
            for id in std::mem::take(&mut self.stop_callers) {
                if let Some(conn) = self.conns.get_mut(&id) {
                    let _ = conn.queue_reply(&line);
                }
            }
        }
        for conn in self.conns.values_mut() {
            // A last try even where the socket was full: the loop has
            // stopped watching for it to drain.
            conn.write_ready();
            let _ = conn.flush();
        }
        // One pass over /proc for all sessions, not one per pane.
        crate::pty::hang_up_sessions(&self.panes.running_sessions());
        self.panes.close_all_fds(self.poll.registry());
        listener::unlink_if_ours(
            &self.paths.socket(),
            self.socket_dev_ino.0,
            self.socket_dev_ino.1,
        );
        self.log.log("stopped", "server stopped");
    }
}

/// How a server that stops serving ends, for its attached clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// For good (`ptyd stop`, a signal): clients end their attachments.
    Stop,
    /// A restore-mode upgrade: the new binary restores the session from the
    /// snapshot at once, and clients reattach to it.
    Restart,
}

impl Drop for Server {
    /// `shutdown` and `release` let go of every pane's fds on purpose; a
    /// server dropped without either (an import that failed part-way)
    /// still takes them out of its poll first, as `PaneFds` requires.
    fn drop(&mut self) {
        self.panes.close_all_fds(self.poll.registry());
    }
}
