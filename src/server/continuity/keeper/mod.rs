//! The keeper: the process `ptyd server` starts as, which forks the
//! serving process and stays behind, small, for the service's whole life.
//!
//! Why: if the serving process dies (SIGKILL, a crash, the OOM killer),
//! every PTY master it held would close and every pane would get SIGHUP.
//! The keeper holds a duplicate of everything a new server needs to take
//! over: each pane's master, pidfd and raw-output ring (sent by the server
//! as it creates the pane, closed when the server says the pane is
//! removed, so a removed pane still hangs up then), the listener and the
//! namespace lock, and the server's latest checkpoint (a pre-copy and a
//! manifest, the live upgrade's own formats, in memfds). When the channel
//! from the servers reaches EOF without a `stopping` first, the keeper
//! starts a fresh server and plays the old side of the live upgrade's
//! handoff from the checkpoint (`recover`): the new server imports as it
//! would in an upgrade, then replays each pane's ring since the
//! checkpoint. Same pids, no SIGHUP, and the listener never closes, so
//! clients wait in its backlog.
//!
//! It is also the subreaper of every generation and their panes (the
//! kernel re-parents orphans to the nearest subreaper ancestor), keeps
//! the service's main PID stable, forwards SIGTERM and SIGHUP to the
//! current server, and exits with the last server's code once every
//! generation has closed the channel after a stop.
//!
//! The channel is an `AF_UNIX` `SOCK_SEQPACKET` socketpair: the keeper
//! holds one end, every generation a duplicate of the other (handed on in
//! each upgrade, named `lineage`). Each message is one datagram: a
//! protocol version byte, then a JSON [`ToKeeper`], with fds attached.

mod replacement;
mod restart;

use crate::handoff::fd_name::FdName;
use crate::handoff::fdpass;
use crate::handoff::manifest::Control;
use crate::model::PaneId;
use crate::sys::{self, ProcessExit};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The first byte of every message on the channel. A keeper refuses (logs
/// and ignores) messages of another version.
pub const PROTOCOL: u8 = 1;

/// Names the channel end a server keeps across an exec (`upgrade --mode
/// restore` restarts in place).
pub const LINEAGE_FD_ENV: &str = "PTYD_LINEAGE_FD";
/// Set (to anything) for `ptyd server`: no keeper is forked (the server
/// serves alone, as before there was one: no crash recovery, no output
/// rings or checkpoints). For the benchmark's baseline.
pub const NO_KEEPER_ENV: &str = "PTYD_NO_KEEPER";
/// Names the memfd holding a re-executing keeper's state (`reexec`).
pub const STATE_FD_ENV: &str = "PTYD_KEEPER_STATE_FD";
/// Set by the keeper for a server it starts after a crash: why.
pub const RECOVERY_ENV: &str = "PTYD_RECOVERED_FROM";
/// Set by the keeper for a server it starts: the lowest generation number
/// it may take, one past every generation the keeper has seen serve or
/// started (a crash loop's replacements each get one of their own).
pub const GENERATION_ENV: &str = "PTYD_GENERATION_AT_LEAST";
/// Set by the keeper for a model-less server (a crash loop's fallback):
/// names a socket on which the keeper sends the panes' fds it holds
/// ([`AdoptHeader`], then `fdpass` batches of `pty`, `pidfd` and `ring`
/// fds), for the server to adopt the running processes into the panes of
/// the snapshot on disk.
pub const ADOPT_FD_ENV: &str = "PTYD_ADOPT_FD";
/// Consecutive failed replacements after which the keeper starts a server
/// without the checkpoint that may be what kills it (a model-less one,
/// which adopts the panes' processes), and as many again of those after
/// which it lets the panes go and starts a plain server. A replacement
/// fails when it dies before it serves (before its `serving` message): one
/// that served, however briefly, was no crash loop, and killing it again
/// and again (an OOM killer, a user) must never cost the checkpoint.
pub const CRASH_LOOP_LIMIT: usize = 3;
/// For tests: `STEP:ACTION` for the replacements the keeper starts (as
/// `PTYD_FAULT` for an upgrade's new side; a no-op in release builds).
const REPLACEMENT_FAULT_ENV: &str = "PTYD_REPLACEMENT_FAULT";
/// For tests: `PTYD_FAULT` for the model-less servers the keeper starts
/// (`adopt-before-serving:exit` makes each die before it serves).
const ADOPT_FAULT_ENV: &str = "PTYD_ADOPT_FAULT";

/// The first message on an adopting server's socket: how many `fdpass`
/// batches of held fds follow (numbered from 0).
#[derive(Debug, Serialize, Deserialize)]
pub struct AdoptHeader {
    pub batches: u32,
}

/// How a replacement is started.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Start {
    /// Plays the handoff from the checkpoint: the model and every pane.
    Checkpoint,
    /// The snapshot on disk, the panes' fds adopted: no model state.
    Adopt,
    /// The snapshot on disk, the panes let go.
    Plain,
}

impl Start {
    /// For the `attempt`-th replacement in a row (from 0).
    fn for_attempt(attempt: usize, has_checkpoint: bool) -> Start {
        match attempt {
            a if a < CRASH_LOOP_LIMIT && has_checkpoint => Start::Checkpoint,
            a if a < 2 * CRASH_LOOP_LIMIT => Start::Adopt,
            _ => Start::Plain,
        }
    }
}
/// Per message of the relay; a replacement that says nothing this long
/// is killed and counted as a failure.
const RELAY_STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stopped keeper waits for its children to exit (reaping them)
/// before it exits itself.
const STOP_REAP_LIMIT: Duration = Duration::from_secs(2);

/// What a server tells the keeper.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToKeeper {
    /// "I am current now." fds: the listener, the lock. A keeper of
    /// another version (or whose binary was replaced) re-executes itself
    /// into `exe`, but only once `settled`.
    Serving {
        pid: u32,
        exe: String,
        #[serde(default)]
        version: String,
        /// False from a new server still in its probation: the old one
        /// may yet take everything back, and a keeper that had already
        /// become the new binary would then run code that just failed
        /// (a binary that dies at start would take the keeper with it).
        /// The new server says it again, settled, once the old one let
        /// go. Absent (older servers) means settled.
        #[serde(default = "settled_by_default")]
        settled: bool,
        /// Its generation number (absent from older servers: 0).
        #[serde(default)]
        generation: u64,
    },
    /// A pane's fds, in the order of `kinds`; replaces what was held for
    /// that pane (a respawn sends its new master).
    Pane { pane: u64, kinds: Vec<HeldKind> },
    /// The pane was removed: close its fds now.
    PaneGone { pane: u64 },
    /// These are all the panes there are (after a take-back): close the
    /// fds of any other.
    Panes { panes: Vec<u64> },
    /// The latest checkpoint. fds: the pre-copy memfd, the manifest
    /// memfd, and the history log (`server/continuity/history_log.rs`) if the
    /// pre-copy refers to it. `ids` names the pre-copy's fds the keeper
    /// supplies. `handoff`: the handoff version the pre-copy is in (a
    /// replacement that reads no such version is refused); absent from
    /// servers before the history log, which wrote version 4.
    Checkpoint {
        precopy_bytes: u64,
        manifest_bytes: u64,
        ids: Vec<FdName>,
        #[serde(default = "handoff_before_the_log")]
        handoff: u32,
    },
    /// A clean stop: let go of everything; the EOF that follows is no
    /// crash.
    Stopping,
    /// A child of a server that no longer serves (paused or in its
    /// probation after an upgrade) exited: pass it on to the current
    /// server as the keeper's own reaped exits are, since the pidfd cannot
    /// tell (Linux before 6.15) and the reaper's copy ends with it.
    Exited {
        pid: i32,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

fn settled_by_default() -> bool {
    true
}

/// The handoff version of checkpoints that do not say (servers before the
/// history log).
fn handoff_before_the_log() -> u32 {
    4
}

/// What the keeper tells the current server.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToServer {
    /// A child of the keeper exited (a pane's process, re-parented to it
    /// when the generation that spawned it went): how, for the server to
    /// report exactly as for its own children where pidfds cannot tell
    /// (Linux before 6.15). Followed by a SIGCHLD to wake the server.
    Exited {
        pid: i32,
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// Who the keeper is: its version and binary, and why it could not
    /// re-execute itself into the current server's binary, if it could not
    /// (it keeps running the old code then), for `server.status`.
    Keeper {
        pid: u32,
        version: String,
        exe: String,
        reexec_error: Option<String>,
        /// Its soft `RLIMIT_NOFILE` (absent from keepers before they
        /// raised it): the server refuses a pane the keeper could not hold.
        #[serde(default)]
        fd_limit: Option<u64>,
    },
}

/// Decodes one message from the keeper; `None` for another version or
/// bad JSON.
pub fn decode_to_server(data: &[u8]) -> Option<ToServer> {
    match data.split_first() {
        Some((&PROTOCOL, json)) => serde_json::from_slice(json).ok(),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldKind {
    Master,
    Pidfd,
    Ring,
}

/// Encodes one message: the version byte, then the JSON.
pub fn encode(msg: &ToKeeper) -> Vec<u8> {
    let mut data = vec![PROTOCOL];
    // Plain data of our own types: serializing cannot fail.
    let _ = serde_json::to_writer(&mut data, msg);
    data
}

/// Adopts the channel end named in the environment, if any.
///
/// On the main thread, as [`crate::sys::take_inherited_fd`]; only our
/// previous image (a restore-mode upgrade) names the fd.
pub fn lineage_from_env() -> Option<OwnedFd> {
    crate::sys::take_inherited_fd(LINEAGE_FD_ENV, crate::sys::FdKind::Socket)
        .ok()
        .flatten()
}

/// Creates the channel: (keeper's end, the servers' end), both
/// non-blocking (the loop sends on one; the keeper polls the other and
/// never waits on a server that does not read) and close-on-exec.
pub fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::sys::seqpacket_pair(true)
}

/// Marks this process as the subreaper of its descendants.
pub fn become_subreaper() {
    let _ = crate::sys::become_child_subreaper();
}

#[derive(Default)]
struct PaneHeld {
    master: Option<OwnedFd>,
    pidfd: Option<OwnedFd>,
    ring: Option<OwnedFd>,
}

struct Checkpoint {
    precopy: OwnedFd,
    precopy_bytes: u64,
    manifest: OwnedFd,
    manifest_bytes: u64,
    ids: Vec<FdName>,
    /// The history log the pre-copy's panes refer to, if any.
    log: Option<OwnedFd>,
    /// The handoff version the pre-copy is in.
    handoff: u32,
    /// What a keeper adopting the checkpoint from systemd's fd store
    /// needs besides the two memfds ([`StoredCheckpoint`]), in a memfd of
    /// its own; made only when there is a store.
    info: Option<OwnedFd>,
}

/// The checkpoint's description in systemd's fd store.
#[derive(Serialize, Deserialize)]
struct StoredCheckpoint {
    namespace: String,
    /// The server serving then, and its start token: a later generation
    /// (not the keeper's first child, so not killed with it) may outlive
    /// the keeper, and must not serve beside the replacement.
    #[serde(default)]
    server: Option<(i32, u64)>,
    precopy_bytes: u64,
    manifest_bytes: u64,
    ids: Vec<FdName>,
    #[serde(default = "handoff_before_the_log")]
    handoff: u32,
}

/// The lowest generation number the keeper allows a server it started
/// (`GENERATION_ENV`), taken out of the environment so no pane inherits
/// it; 0 for a server the keeper did not start.
pub fn generation_floor() -> u64 {
    let floor = std::env::var(GENERATION_ENV)
        .ok()
        .and_then(|g| g.parse().ok())
        .unwrap_or(0);
    crate::sys::remove_env(GENERATION_ENV);
    floor
}

/// Everything the keeper holds.
pub struct Keeper {
    channel: OwnedFd,
    current: i32,
    namespace: String,
    exe: PathBuf,
    listener: Option<OwnedFd>,
    lock: Option<OwnedFd>,
    panes: HashMap<PaneId, PaneHeld>,
    checkpoint: Option<Checkpoint>,
    stopping: bool,
    status: Option<ProcessExit>,
    /// Replacements in a row that died before they served.
    loop_count: usize,
    /// When the current replacement was started; none once it serves (or
    /// for a server that is no replacement).
    started_at: Option<Instant>,
    term: Arc<AtomicBool>,
    hup: Arc<AtomicBool>,
    wake: Option<std::os::unix::net::UnixStream>,
    /// Every server pid seen (their exits are not pane exits).
    servers: std::collections::HashSet<i32>,
    /// Pane exits not yet sent to the server (the channel was full).
    exits: std::collections::VecDeque<Vec<u8>>,
    /// Why the last re-exec failed, if it did.
    reexec_error: Option<String>,
    /// systemd's fd store, when the unit has one: a copy of everything
    /// held, for a keeper started after this one is killed.
    store: Option<crate::service::fd_store::FdStore>,
    /// Set for a keeper that took its fds from systemd's fd store: why
    /// there is no server (the previous keeper died with it).
    adopted: Option<String>,
    /// The highest generation number a server said it serves as or the
    /// keeper gave one it started: the next it starts gets a higher one.
    generation: u64,
}

impl Keeper {
    /// A keeper around its end of the channel; `current` is the server.
    /// `listener` and `lock` are the fork's copies (the server's `serving`
    /// message replaces them).
    pub fn new(
        channel: OwnedFd,
        current: i32,
        namespace: String,
        listener: Option<OwnedFd>,
        lock: Option<OwnedFd>,
    ) -> Keeper {
        Keeper {
            channel,
            current,
            namespace,
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
            listener,
            lock,
            panes: HashMap::new(),
            checkpoint: None,
            stopping: false,
            status: None,
            loop_count: 0,
            started_at: None,
            term: Arc::new(AtomicBool::new(false)),
            hup: Arc::new(AtomicBool::new(false)),
            wake: None,
            servers: [current].into_iter().collect(),
            exits: std::collections::VecDeque::new(),
            reexec_error: None,
            store: None,
            adopted: None,
            generation: 0,
        }
    }

    /// Tells the current server who we are (for `server.status`).
    fn announce(&mut self) {
        let msg = ToServer::Keeper {
            pid: std::process::id(),
            version: crate::protocol::SERVER_VERSION.to_string(),
            exe: std::env::current_exe()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            reexec_error: self.reexec_error.clone(),
            fd_limit: sys::fd_limit().ok(),
        };
        let mut data = vec![PROTOCOL];
        let _ = serde_json::to_writer(&mut data, &msg);
        self.exits.push_back(data);
        self.send_exits();
    }

    /// Runs until the last generation is gone after a stop. Returns the
    /// exit code for this process: the last server's.
    pub fn run(mut self) -> i32 {
        // It holds three fds per pane (master, pidfd, ring): at the usual
        // soft limit of 1024 a crash of the serving process with a few
        // hundred panes could not be recovered (EMFILE). The servers it
        // starts get the starting limit back, and raise it themselves.
        let _ = sys::raise_fd_limit();
        // A terminal's Ctrl-C reaches the whole process group: the server
        // stops on it; the keeper must stay to reap.
        let _ = sys::ignore_signal(sys::SIGINT);
        let Ok((wake_read, wake_write)) = std::os::unix::net::UnixStream::pair() else {
            return 1;
        };
        let _ = wake_read.set_nonblocking(true);
        let _ = wake_write.set_nonblocking(true);
        // The flags first: a handler's actions run in order, and the wake
        // must find the flag already set.
        let _ = signal_hook::flag::register(sys::SIGTERM, Arc::clone(&self.term));
        let _ = signal_hook::flag::register(sys::SIGHUP, Arc::clone(&self.hup));
        for sig in [sys::SIGCHLD, sys::SIGTERM, sys::SIGHUP] {
            if let Ok(w) = wake_write.try_clone() {
                let _ = signal_hook::low_level::pipe::register_raw(sig, OwnedFd::from(w));
            }
        }
        self.wake = Some(wake_read);
        if self.store.is_none() {
            self.store = crate::service::fd_store::FdStore::from_env();
        }
        self.store_sync();
        self.reap();
        self.announce();
        loop {
            let wake_fd = self.wake.as_ref().map_or(-1, |w| w.as_raw_fd());
            // Exits the channel had no room for are retried now and then.
            let timeout = (!self.exits.is_empty()).then_some(Duration::from_millis(50));
            let Ok(ready) = sys::poll_readable(&[self.channel.as_raw_fd(), wake_fd], timeout)
            else {
                continue;
            };
            self.send_exits();
            if ready[1] {
                self.on_signals();
            }
            if ready[0] && !self.on_channel() {
                // A replacement that died before it served is retried
                // (backing off) although it took the listener and the lock
                // with it: the panes' fds may still be with us.
                if self.stopping || (self.listener.is_none() && self.started_at.is_none()) {
                    break;
                }
                // No clean stop came: the serving process is gone.
                let served = self.recover();
                self.store_sync();
                if !served {
                    // Terminated in a crash loop's back-off: a stop, so
                    // the panes hang up now and are reaped below.
                    self.panes.clear();
                    break;
                }
            }
        }
        self.finish()
    }

    fn on_signals(&mut self) {
        if let Some(w) = &self.wake {
            let mut buf = [0u8; 64];
            while matches!((&*w).read(&mut buf), Ok(k) if k > 0) {}
        }
        self.reap();
        if self.term.swap(false, Ordering::SeqCst) {
            let _ = sys::kill(self.current, sys::SIGTERM);
        }
        if self.hup.swap(false, Ordering::SeqCst) {
            let _ = sys::kill(self.current, sys::SIGHUP);
        }
    }

    /// Handles one message; false at EOF (every server end closed).
    fn on_channel(&mut self) -> bool {
        let mut data = vec![0u8; 64 * 1024];
        let received = match sys::recv_with_fds(&self.channel, &mut data, fdpass::MAX_FDS_PER_BATCH)
        {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        };
        if received.len == 0 {
            return false;
        }
        if received.truncated || data[0] != PROTOCOL {
            crate::service::journal::write_line(&format!(
                "ptyd keeper: ignoring a message of protocol {} (ours is {PROTOCOL}) or truncated",
                data[0]
            ));
            return true;
        }
        let msg: ToKeeper = match serde_json::from_slice(&data[1..received.len]) {
            Ok(m) => m,
            Err(e) => {
                crate::service::journal::write_line(&format!(
                    "ptyd keeper: ignoring a bad message: {e}"
                ));
                return true;
            }
        };
        self.apply(msg, received.fds);
        self.store_sync();
        true
    }

    fn apply(&mut self, msg: ToKeeper, fds: Vec<OwnedFd>) {
        let mut fds = fds.into_iter();
        match msg {
            ToKeeper::Serving {
                pid,
                exe,
                version,
                settled,
                generation,
            } => {
                self.generation = self.generation.max(generation);
                self.current = pid as i32;
                self.servers.insert(self.current);
                // It serves: no longer a replacement that may be looping.
                self.started_at = None;
                self.status = None;
                self.stopping = false;
                if !exe.is_empty() {
                    self.exe = PathBuf::from(exe);
                }
                if let (Some(l), Some(k)) = (fds.next(), fds.next()) {
                    self.listener = Some(l);
                    self.lock = Some(k);
                }
                // A store the unit gained since we started (a drop-in,
                // then `systemctl reload`) is asked for again here.
                if settled && self.store.is_none() {
                    self.store = crate::service::fd_store::FdStore::from_env();
                    self.store_sync();
                }
                if settled && self.runs_other_code_than(&version) {
                    let exe = self.exe.clone();
                    self.reexec_error = Some(self.reexec(&exe));
                    crate::service::journal::write_line(&format!(
                        "ptyd keeper: could not re-execute into {}: {}; running on with ptyd {}",
                        exe.display(),
                        self.reexec_error.as_deref().unwrap_or(""),
                        crate::protocol::SERVER_VERSION
                    ));
                }
                self.announce();
            }
            ToKeeper::Pane { pane, kinds } => {
                let mut held = PaneHeld::default();
                for (kind, fd) in kinds.into_iter().zip(fds) {
                    match kind {
                        HeldKind::Master => held.master = Some(fd),
                        HeldKind::Pidfd => held.pidfd = Some(fd),
                        HeldKind::Ring => held.ring = Some(fd),
                    }
                }
                self.panes.insert(PaneId::new(pane), held);
            }
            ToKeeper::PaneGone { pane } => {
                self.panes.remove(&PaneId::new(pane));
            }
            ToKeeper::Panes { panes } => {
                let keep: std::collections::HashSet<PaneId> =
                    panes.into_iter().map(PaneId::new).collect();
                self.panes.retain(|id, _| keep.contains(id));
            }
            ToKeeper::Checkpoint {
                precopy_bytes,
                manifest_bytes,
                ids,
                handoff,
            } => {
                if let (Some(precopy), Some(manifest)) = (fds.next(), fds.next()) {
                    let log = fds.next();
                    // Described for a keeper that adopts it from the store.
                    let info = self.store.as_ref().and_then(|_| {
                        let stored = StoredCheckpoint {
                            namespace: self.namespace.clone(),
                            server: sys::process_start_token(self.current)
                                .map(|t| (self.current, t)),
                            precopy_bytes,
                            manifest_bytes,
                            ids: ids.clone(),
                            handoff,
                        };
                        let json = serde_json::to_vec(&stored).ok()?;
                        sys::anonymous_file(c"ptyd-keeper-checkpoint", &json).ok()
                    });
                    self.checkpoint = Some(Checkpoint {
                        precopy,
                        precopy_bytes,
                        manifest,
                        manifest_bytes,
                        ids,
                        log,
                        handoff,
                        info,
                    });
                }
            }
            ToKeeper::Exited { pid, code, signal } => {
                self.queue_exit(pid, code, signal);
                self.send_exits();
            }
            ToKeeper::Stopping => {
                // The server hangs up its panes and releases the namespace:
                // our copies must not keep either alive.
                self.stopping = true;
                self.panes.clear();
                self.checkpoint = None;
                self.listener = None;
                self.lock = None;
            }
        }
    }

    /// Whether the current server's binary is other code than ours:
    /// another version, another path, or ours replaced on disk.
    fn runs_other_code_than(&self, version: &str) -> bool {
        if version.is_empty() {
            return false;
        }
        let own = std::fs::read_link("/proc/self/exe").unwrap_or_default();
        let replaced = own.to_string_lossy().ends_with(" (deleted)");
        let same_path = std::fs::canonicalize(&self.exe)
            .ok()
            .zip(std::env::current_exe().ok())
            .is_some_and(|(a, b)| a == b);
        version != crate::protocol::SERVER_VERSION || replaced || !same_path
    }

    /// Reaps every exited child, keeping the status of the current server
    /// and passing a pane process's on to it.
    fn reap(&mut self) {
        while let Some((pid, exit)) = sys::reap_any_child() {
            if pid == self.current {
                self.status = Some(exit);
            }
            if self.servers.remove(&pid) || self.stopping {
                continue;
            }
            let (code, signal) = match exit {
                ProcessExit::Code(c) => (Some(c), None),
                ProcessExit::Signal(s) => (None, Some(s)),
            };
            self.queue_exit(pid, code, signal);
        }
        self.send_exits();
    }

    /// Queues an exit for the server. Bounded: a server that never reads
    /// loses the oldest.
    fn queue_exit(&mut self, pid: i32, code: Option<i32>, signal: Option<i32>) {
        let msg = ToServer::Exited { pid, code, signal };
        let mut data = vec![PROTOCOL];
        let _ = serde_json::to_writer(&mut data, &msg);
        if self.exits.len() >= 4096 {
            self.exits.pop_front();
        }
        self.exits.push_back(data);
    }

    /// Sends the queued exits, then wakes the server with a SIGCHLD.
    fn send_exits(&mut self) {
        let mut sent = false;
        while let Some(data) = self.exits.front() {
            match sys::send_with_fds(&self.channel, data, &[]) {
                Ok(_) => {
                    self.exits.pop_front();
                    sent = true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Full (retried), or no server (a replacement gets none
                // of them: its pidfds report what they can).
                _ => break,
            }
        }
        if sent {
            let _ = sys::kill(self.current, sys::SIGCHLD);
        }
    }

    /// After a stop: the last server's exit status, once its children
    /// (the panes it hung up) are reaped too, within a bound.
    fn finish(mut self) -> i32 {
        if self.status.is_none() {
            self.status = sys::wait_child(self.current);
        }
        self.reap();
        let until = Instant::now() + STOP_REAP_LIMIT;
        while sys::has_children() && Instant::now() < until {
            let wake_fd = self.wake.as_ref().map_or(-1, |w| w.as_raw_fd());
            let _ = sys::poll_readable(&[wake_fd], Some(Duration::from_millis(20)));
            self.on_signals();
        }
        match self.status {
            Some(ProcessExit::Code(code)) => code,
            Some(ProcessExit::Signal(sig)) => 128 + sig,
            None => 0,
        }
    }
}
