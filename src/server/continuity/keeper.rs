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

use crate::handoff::fd_name::FdName;
use crate::handoff::fdpass;
use crate::handoff::manifest::Control;
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
/// # Safety
///
/// As [`crate::sys::take_inherited_fd`]: no other thread may be running,
/// and only our previous image (a restore-mode upgrade) names the fd.
pub unsafe fn lineage_from_env() -> Option<OwnedFd> {
    // SAFETY: the caller's guarantees are the ones this call needs.
    unsafe { crate::sys::take_inherited_fd(LINEAGE_FD_ENV, crate::sys::FdKind::Socket) }
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
    // SAFETY: the disk thread, the only other thread by now, never reads
    // the environment.
    unsafe { std::env::remove_var(GENERATION_ENV) };
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
    panes: HashMap<u64, PaneHeld>,
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

type SavedPane = (u64, Option<RawFd>, Option<RawFd>, Option<RawFd>);

/// A keeper's state across its re-exec: fd numbers (kept open by the exec)
/// and plain values.
#[derive(Serialize, Deserialize)]
struct Saved {
    protocol: u8,
    channel: RawFd,
    current: i32,
    namespace: String,
    exe: String,
    listener: Option<RawFd>,
    lock: Option<RawFd>,
    /// (pane, master, pidfd, ring).
    panes: Vec<SavedPane>,
    checkpoint: Option<(RawFd, u64, RawFd, u64, Vec<FdName>)>,
    /// The checkpoint's history log and handoff version (absent from
    /// keepers before the log: no log, version 4).
    #[serde(default)]
    checkpoint_log: Option<RawFd>,
    #[serde(default = "handoff_before_the_log")]
    checkpoint_handoff: u32,
    stopping: bool,
    servers: Vec<i32>,
    loop_count: usize,
    /// The checkpoint's description for systemd's fd store, if made.
    #[serde(default)]
    checkpoint_info: Option<RawFd>,
    /// The highest generation seen (absent from older keepers: 0).
    #[serde(default)]
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

    /// A keeper from the fds systemd's fd store passed back at start
    /// (`fd_store::take_passed`): the previous keeper was killed, and its
    /// panes are taken over as after a server crash (no server runs: the
    /// channel's other end is closed, so the loop starts the replacement
    /// at once). `None` if what was passed cannot be served (no
    /// checkpoint, no listener or lock, another namespace).
    pub fn adopt(mut fds: HashMap<String, OwnedFd>, namespace: String) -> Result<Keeper, String> {
        use crate::service::fd_store::name;
        let info = fds
            .remove(&name("checkpoint"))
            .ok_or("no checkpoint among them")?;
        let mut text = String::new();
        let mut file = std::fs::File::from(info.try_clone().map_err(|e| e.to_string())?);
        std::io::Seek::rewind(&mut file).map_err(|e| e.to_string())?;
        file.read_to_string(&mut text).map_err(|e| e.to_string())?;
        let stored: StoredCheckpoint = serde_json::from_str(&text)
            .map_err(|e| format!("the checkpoint's description: {e}"))?;
        if stored.namespace != namespace {
            return Err(format!(
                "they are namespace {:?}'s, not {namespace:?}'s",
                stored.namespace
            ));
        }
        let log = fds.remove(&name("history-log"));
        let mut take = |what: &str| {
            fds.remove(&name(what))
                .ok_or_else(|| format!("no {what} among them"))
        };
        let (precopy, manifest) = (take("precopy")?, take("manifest")?);
        // A server that outlived the keeper (a generation after an
        // upgrade: no parent-death signal) would serve beside ours: it
        // goes first (its pid and start token, so never another process).
        if let Some((pid, token)) = stored.server
            && sys::process_start_token(pid) == Some(token)
        {
            crate::service::journal::write_line(&format!(
                "ptyd keeper: ending server pid {pid}, which outlived the killed keeper"
            ));
            let _ = sys::kill(pid, sys::SIGKILL);
            let until = Instant::now() + STOP_REAP_LIMIT;
            while sys::process_start_token(pid) == Some(token)
                && !sys::process_ended(pid)
                && Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let (listener, lock) = (take("listener")?, take("lock")?);
        let (keeper_end, server_end) =
            channel().map_err(|e| format!("creating the channel: {e}"))?;
        drop(server_end);
        let mut k = Keeper::new(keeper_end, 0, namespace, Some(listener), Some(lock));
        k.servers.clear();
        k.checkpoint = Some(Checkpoint {
            precopy,
            precopy_bytes: stored.precopy_bytes,
            manifest,
            manifest_bytes: stored.manifest_bytes,
            ids: stored.ids,
            log,
            handoff: stored.handoff,
            info: Some(info),
        });
        for (fd_name, fd) in fds {
            let Some((kind, pane)) = fd_name
                .strip_prefix(crate::service::fd_store::PREFIX)
                .and_then(|rest| rest.rsplit_once('-'))
                .and_then(|(kind, id)| Some((kind.to_string(), id.parse::<u64>().ok()?)))
            else {
                continue;
            };
            let held = k.panes.entry(pane).or_default();
            match kind.as_str() {
                "master" => held.master = Some(fd),
                "pidfd" => held.pidfd = Some(fd),
                "ring" => held.ring = Some(fd),
                _ => {}
            }
        }
        k.adopted = Some(format!(
            "the keeper was killed; took {} panes over from systemd's fd store",
            k.panes.len()
        ));
        let mut store = crate::service::fd_store::FdStore::from_env();
        if let Some(store) = &mut store {
            store.adopted(&k.stored_fds_owned());
        }
        k.store = store;
        Ok(k)
    }

    /// Everything held, by its name in the fd store.
    fn stored_fds(&self) -> Vec<(String, RawFd)> {
        use crate::service::fd_store::name;
        let mut out = Vec::new();
        for (id, held) in &self.panes {
            for (what, fd) in [
                ("master", &held.master),
                ("pidfd", &held.pidfd),
                ("ring", &held.ring),
            ] {
                if let Some(fd) = fd {
                    out.push((name(&format!("{what}-{id}")), fd.as_raw_fd()));
                }
            }
        }
        for (what, fd) in [("listener", &self.listener), ("lock", &self.lock)] {
            if let Some(fd) = fd {
                out.push((name(what), fd.as_raw_fd()));
            }
        }
        if let Some(cp) = &self.checkpoint
            && let Some(info) = &cp.info
        {
            out.push((name("precopy"), cp.precopy.as_raw_fd()));
            out.push((name("manifest"), cp.manifest.as_raw_fd()));
            out.push((name("checkpoint"), info.as_raw_fd()));
            if let Some(log) = &cp.log {
                out.push((name("history-log"), log.as_raw_fd()));
            }
        }
        out
    }

    fn stored_fds_owned(&self) -> HashMap<String, OwnedFd> {
        self.stored_fds()
            .into_iter()
            .filter_map(|(n, fd)| Some((n, sys::dup_raw(fd).ok()?)))
            .collect()
    }

    /// Makes systemd's fd store (if any) hold what we hold.
    fn store_sync(&mut self) {
        if self.store.is_none() {
            return;
        }
        let wanted = self.stored_fds();
        if let Some(store) = &mut self.store {
            store.sync(&wanted);
        }
    }

    /// The keeper a re-executed image continues as, if this process is
    /// one (`STATE_FD_ENV`); called first thing by `ptyd server`.
    ///
    /// # Safety
    ///
    /// No other thread may run; only our previous image names these fds.
    pub unsafe fn resume_from_env() -> Option<Keeper> {
        let raw = std::env::var(STATE_FD_ENV).ok()?;
        // SAFETY: the caller's guarantees.
        unsafe { std::env::remove_var(STATE_FD_ENV) };
        let adopt = |fd: RawFd| -> OwnedFd {
            let _ = sys::set_cloexec(fd);
            // SAFETY: our previous image kept this fd open for us alone
            // (it named it in the state), and nothing else owns it here.
            unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
        };
        let state_fd = adopt(raw.parse().ok()?);
        let mut text = String::new();
        let mut file = std::fs::File::from(state_fd);
        std::io::Seek::rewind(&mut file).ok()?;
        file.read_to_string(&mut text).ok()?;
        let saved: Saved = serde_json::from_str(&text).ok()?;
        let opt = |fd: Option<RawFd>| fd.map(adopt);
        let mut k = Keeper::new(
            adopt(saved.channel),
            saved.current,
            saved.namespace,
            opt(saved.listener),
            opt(saved.lock),
        );
        k.exe = PathBuf::from(saved.exe);
        for (id, master, pidfd, ring) in saved.panes {
            let held = PaneHeld {
                master: opt(master),
                pidfd: opt(pidfd),
                ring: opt(ring),
            };
            k.panes.insert(id, held);
        }
        let info = opt(saved.checkpoint_info);
        let log = opt(saved.checkpoint_log);
        k.checkpoint = saved.checkpoint.map(|(p, pb, m, mb, ids)| Checkpoint {
            precopy: adopt(p),
            precopy_bytes: pb,
            manifest: adopt(m),
            manifest_bytes: mb,
            ids,
            log,
            handoff: saved.checkpoint_handoff,
            info,
        });
        k.stopping = saved.stopping;
        k.servers = saved.servers.into_iter().collect();
        k.loop_count = saved.loop_count;
        k.generation = saved.generation;
        Some(k)
    }

    /// Re-executes this process into `exe` (same pid: the service's main
    /// pid stays; children stay ours; `PR_SET_CHILD_SUBREAPER` survives
    /// the exec), keeping every fd, so no old code lingers after an
    /// upgrade. Returns only if the exec failed, with why.
    fn reexec(&mut self, exe: &std::path::Path) -> String {
        let raw = |fd: &Option<OwnedFd>| fd.as_ref().map(AsRawFd::as_raw_fd);
        let saved = Saved {
            protocol: PROTOCOL,
            channel: self.channel.as_raw_fd(),
            current: self.current,
            namespace: self.namespace.clone(),
            exe: exe.to_string_lossy().into_owned(),
            listener: raw(&self.listener),
            lock: raw(&self.lock),
            panes: self
                .panes
                .iter()
                .map(|(id, h)| (*id, raw(&h.master), raw(&h.pidfd), raw(&h.ring)))
                .collect(),
            checkpoint: self.checkpoint.as_ref().map(|c| {
                (
                    c.precopy.as_raw_fd(),
                    c.precopy_bytes,
                    c.manifest.as_raw_fd(),
                    c.manifest_bytes,
                    c.ids.clone(),
                )
            }),
            checkpoint_log: self
                .checkpoint
                .as_ref()
                .and_then(|c| c.log.as_ref())
                .map(AsRawFd::as_raw_fd),
            checkpoint_handoff: self
                .checkpoint
                .as_ref()
                .map_or(handoff_before_the_log(), |c| c.handoff),
            stopping: self.stopping,
            servers: self.servers.iter().copied().collect(),
            loop_count: self.loop_count,
            generation: self.generation,
            checkpoint_info: self
                .checkpoint
                .as_ref()
                .and_then(|c| c.info.as_ref())
                .map(AsRawFd::as_raw_fd),
        };
        let Ok(json) = serde_json::to_vec(&saved) else {
            return "encoding the keeper's state".into();
        };
        let state = match sys::anonymous_file(c"ptyd-keeper-state", &json) {
            Ok(fd) => fd,
            Err(e) => return format!("writing the keeper's state: {e}"),
        };
        let mut keep: Vec<RawFd> = vec![state.as_raw_fd(), self.channel.as_raw_fd()];
        keep.extend(saved.listener);
        keep.extend(saved.lock);
        for (_, m, p, r) in &saved.panes {
            keep.extend([*m, *p, *r].into_iter().flatten());
        }
        if let Some((p, _, m, _, _)) = &saved.checkpoint {
            keep.extend([*p, *m]);
        }
        keep.extend(saved.checkpoint_info);
        keep.extend(saved.checkpoint_log);
        for fd in &keep {
            let _ = sys::clear_cloexec(*fd);
        }
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["-L", &self.namespace, "server"])
            .env(STATE_FD_ENV, state.as_raw_fd().to_string())
            .env_remove(crate::protocol::READY_FD_ENV);
        // The new image raises the limit again and remembers this one.
        sys::starting_limits_on_exec(&mut cmd);
        let err = cmd.exec();
        let _ = sys::raise_fd_limit();
        let _ = sys::raise_fsize_limit();
        // Still us: the fds go back to close-on-exec (a pane must never
        // inherit them), and we keep running the old code.
        for fd in &keep {
            let _ = sys::set_cloexec(*fd);
        }
        format!("exec {}: {err}", exe.display())
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
                self.panes.insert(pane, held);
            }
            ToKeeper::PaneGone { pane } => {
                self.panes.remove(&pane);
            }
            ToKeeper::Panes { panes } => {
                let keep: std::collections::HashSet<u64> = panes.into_iter().collect();
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
                let msg = ToServer::Exited { pid, code, signal };
                let mut data = vec![PROTOCOL];
                let _ = serde_json::to_writer(&mut data, &msg);
                if self.exits.len() >= 4096 {
                    self.exits.pop_front();
                }
                self.exits.push_back(data);
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
            let msg = ToServer::Exited { pid, code, signal };
            let mut data = vec![PROTOCOL];
            let _ = serde_json::to_writer(&mut data, &msg);
            // Bounded: a server that never reads loses the oldest.
            if self.exits.len() >= 4096 {
                self.exits.pop_front();
            }
            self.exits.push_back(data);
        }
        self.send_exits();
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

    /// The serving process died without a stop: start a replacement and
    /// hand it everything. False if there is nothing left to serve (asked
    /// to stop meanwhile).
    fn recover(&mut self) -> bool {
        let dead = self.current;
        // It is our child, or was re-parented to us as an orphan (none for
        // a keeper that adopted the fd store: the server died with the
        // previous keeper).
        let status = match self.adopted {
            Some(_) => None,
            None => self.status.take().or_else(|| sys::wait_child(dead)),
        };
        self.reap();
        let why = match (status, self.adopted.take()) {
            (_, Some(why)) => why,
            (Some(ProcessExit::Signal(s)), _) => format!("server pid {dead} killed by signal {s}"),
            (Some(ProcessExit::Code(c)), _) => format!("server pid {dead} exited with code {c}"),
            (None, _) => format!("server pid {dead} vanished"),
        };
        let looping = self.started_at.is_some();
        self.loop_count = if looping { self.loop_count + 1 } else { 0 };
        loop {
            let attempt = self.loop_count;
            if attempt > 0 {
                // A crash loop: back off (never spin), keeping every fd.
                let delay = Duration::from_millis(100u64 << attempt.min(6));
                crate::service::journal::write_line(&format!(
                    "ptyd keeper: crash loop ({attempt} replacement(s) died before serving); retrying in {} ms",
                    delay.as_millis()
                ));
                if !self.sleep(delay) {
                    return false;
                }
            }
            self.started_at = Some(Instant::now());
            let start = Start::for_attempt(attempt, self.checkpoint.is_some());
            crate::service::journal::write_line(&format!(
                "ptyd keeper: {why}; starting a replacement ({})",
                match start {
                    Start::Checkpoint => "restoring the checkpoint",
                    Start::Adopt if attempt < CRASH_LOOP_LIMIT => {
                        "from the snapshot on disk, adopting the panes' processes: no checkpoint yet"
                    }
                    Start::Adopt => {
                        "without the checkpoint that may be what crashes it: from the snapshot on disk, adopting the panes' processes"
                    }
                    Start::Plain => {
                        "from the snapshot on disk, letting the panes go: servers without the checkpoint died too"
                    }
                }
            ));
            if start == Start::Plain {
                self.list_let_go();
            }
            match self.replace(&why, start) {
                Ok(pid) => {
                    self.current = pid;
                    return true;
                }
                Err(e) => {
                    crate::service::journal::write_line(&format!(
                        "ptyd keeper: the replacement failed: {e}"
                    ));
                    self.loop_count += 1;
                }
            }
        }
    }

    /// Sleeps, still reaping; false as soon as asked to terminate (there
    /// is no server to pass SIGTERM on to: `on_signals` would take the
    /// request and the back-off would sleep on).
    fn sleep(&mut self, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if self.term.load(Ordering::SeqCst) {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            let wake_fd = self.wake.as_ref().map_or(-1, |w| w.as_raw_fd());
            let _ = sys::poll_readable(&[wake_fd], Some(until - now));
            if let Some(w) = &self.wake {
                let mut buf = [0u8; 64];
                while matches!((&*w).read(&mut buf), Ok(k) if k > 0) {}
            }
            self.reap();
        }
    }

    /// Starts a server and plays the old side of the handoff from the
    /// checkpoint, or starts one that restores the snapshot from disk and
    /// adopts the panes' processes (`Start::Adopt`), or a plain one (the
    /// panes' fds are let go then). Returns its pid.
    fn replace(&mut self, why: &str, start: Start) -> Result<i32, String> {
        let (keeper_end, server_end) =
            channel().map_err(|e| format!("creating the channel: {e}"))?;
        let generation = self.next_generation();
        let checkpoint = match start {
            Start::Checkpoint => self.checkpoint.as_ref(),
            Start::Adopt => return self.start_adopting(why, keeper_end, server_end, generation),
            Start::Plain => None,
        };
        let Some(cp) = checkpoint else {
            return self.start_plain(why, keeper_end, server_end, generation);
        };
        let (ours, theirs) = sys::seqpacket_pair(false)
            .map_err(|e| format!("creating the handoff socketpair: {e}"))?;
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(["-L", &self.namespace, "server"])
            .env(
                crate::handoff::HANDOFF_FD_ENV,
                theirs.as_raw_fd().to_string(),
            )
            .env(RECOVERY_ENV, why)
            .env(GENERATION_ENV, generation.to_string())
            // The checkpoint is in the handoff version of the server that
            // wrote it (the replacement assumes 2 when not told).
            .env(crate::handoff::manifest::SPEAKS_ENV, cp.handoff.to_string())
            .env_remove(crate::protocol::READY_FD_ENV)
            .env_remove(crate::handoff::fault::FAULT_ENV)
            .stdin(std::process::Stdio::null());
        if let Some(fault) = std::env::var_os(REPLACEMENT_FAULT_ENV) {
            cmd.env(crate::handoff::fault::FAULT_ENV, fault);
        }
        sys::inherit_fd_on_exec(&mut cmd, theirs.as_raw_fd());
        sys::starting_limits_on_exec(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.exe.display()))?;
        drop(theirs);
        let pid = child.id() as i32;
        self.servers.insert(pid);
        match relay(
            &ours,
            cp,
            &self.panes,
            [&self.listener, &self.lock],
            &server_end,
        ) {
            Ok(()) => {
                drop(server_end);
                self.channel = keeper_end;
                // Panes created after the checkpoint are not in the new
                // server's model: it cannot serve them, so let them go.
                let named: std::collections::HashSet<u64> =
                    cp.ids.iter().filter_map(pane_of).collect();
                self.panes.retain(|id, _| named.contains(id));
                // Closing the handoff socket ends the new server's
                // "predecessor" wait at once.
                drop(ours);
                Ok(pid)
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// A generation number no server of ours had: each replacement gets
    /// its own, so two processes are never the same generation.
    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// The crash loop's fallback: a server without the checkpoint (the one
    /// thing the replacements that died shared), which restores the
    /// snapshot on disk and adopts the running processes from the fds we
    /// send it. We keep our copies (a crash of this one hands them on
    /// again); it says which it adopted (`panes`), and we let go of the
    /// others then.
    fn start_adopting(
        &mut self,
        why: &str,
        keeper_end: OwnedFd,
        server_end: OwnedFd,
        generation: u64,
    ) -> Result<i32, String> {
        let (ours, theirs) = sys::seqpacket_pair(true)
            .map_err(|e| format!("creating the adoption socketpair: {e}"))?;
        // The namespace must be free for it to claim, and the checkpoint
        // may be what killed the others: a crash of this server before
        // its first checkpoint adopts again rather than loop on it.
        self.listener = None;
        self.lock = None;
        self.checkpoint = None;
        let fd = server_end.as_raw_fd();
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(["-L", &self.namespace, "server"])
            .env(LINEAGE_FD_ENV, fd.to_string())
            .env(ADOPT_FD_ENV, theirs.as_raw_fd().to_string())
            .env(RECOVERY_ENV, why)
            .env(GENERATION_ENV, generation.to_string())
            .env_remove(crate::protocol::READY_FD_ENV)
            .env_remove(crate::handoff::fault::FAULT_ENV)
            .stdin(std::process::Stdio::null());
        if let Some(fault) = std::env::var_os(ADOPT_FAULT_ENV) {
            cmd.env(crate::handoff::fault::FAULT_ENV, fault);
        }
        sys::inherit_fd_on_exec(&mut cmd, fd);
        sys::inherit_fd_on_exec(&mut cmd, theirs.as_raw_fd());
        sys::starting_limits_on_exec(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.exe.display()))?;
        drop(theirs);
        drop(server_end);
        let pid = child.id() as i32;
        self.servers.insert(pid);
        self.channel = keeper_end;
        if let Err(e) = send_held(&ours, &self.panes) {
            let _ = child.kill();
            let _ = child.wait();
            self.servers.remove(&pid);
            return Err(e);
        }
        Ok(pid)
    }

    /// Before the panes are let go for good: which, on stderr (the
    /// journal), so that the user can find what was lost.
    fn list_let_go(&self) {
        let mut ids: Vec<&u64> = self.panes.keys().collect();
        ids.sort();
        for id in ids {
            let pid = self.panes[id].pidfd.as_ref().and_then(sys::pidfd_pid);
            let command = pid
                .and_then(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
                .map(|c| {
                    let words: Vec<String> = c
                        .split(|b| *b == 0)
                        .filter(|w| !w.is_empty())
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect();
                    crate::validate::excerpt(&words.join(" "), 200).to_string()
                })
                .unwrap_or_default();
            crate::service::journal::write_line(&format!(
                "ptyd keeper: letting pane {} go (pid {}): {command}",
                crate::model::PaneId::new(*id),
                pid.map_or("unknown".to_string(), |p| p.to_string()),
            ));
        }
    }

    fn start_plain(
        &mut self,
        why: &str,
        keeper_end: OwnedFd,
        server_end: OwnedFd,
        generation: u64,
    ) -> Result<i32, String> {
        // The namespace must be free for it to claim.
        self.panes.clear();
        self.listener = None;
        self.lock = None;
        self.checkpoint = None;
        let fd = server_end.as_raw_fd();
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(["-L", &self.namespace, "server"])
            .env(LINEAGE_FD_ENV, fd.to_string())
            .env(RECOVERY_ENV, why)
            .env(GENERATION_ENV, generation.to_string())
            .env_remove(crate::protocol::READY_FD_ENV)
            .stdin(std::process::Stdio::null());
        sys::inherit_fd_on_exec(&mut cmd, fd);
        sys::starting_limits_on_exec(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.exe.display()))?;
        drop(server_end);
        self.channel = keeper_end;
        self.servers.insert(child.id() as i32);
        Ok(child.id() as i32)
    }
}

/// Sends an adopting server every held pane's master, pidfd and ring: a
/// header, then the batches. A pane without a master or a pidfd (its
/// process was gone before this keeper held it) is not sent: there is
/// nothing to adopt.
fn send_held(sock: &OwnedFd, panes: &HashMap<u64, PaneHeld>) -> Result<(), String> {
    let mut ids: Vec<u64> = panes.keys().copied().collect();
    ids.sort_unstable();
    let mut named: Vec<(FdName, RawFd)> = Vec::new();
    for id in ids {
        let held = &panes[&id];
        let (Some(master), Some(pidfd)) = (&held.master, &held.pidfd) else {
            continue;
        };
        named.push((FdName::Pty(id), master.as_raw_fd()));
        named.push((FdName::Pidfd(id), pidfd.as_raw_fd()));
        if let Some(ring) = &held.ring {
            named.push((FdName::Ring(id), ring.as_raw_fd()));
        }
    }
    let batches: Vec<&[(FdName, RawFd)]> = named.chunks(fdpass::MAX_FDS_PER_BATCH).collect();
    let header = AdoptHeader {
        batches: batches.len() as u32,
    };
    send_nonblocking(sock, "the adoption header", || {
        fdpass::send_message(sock, &header, &[])
    })?;
    for (seq, batch) in batches.iter().enumerate() {
        send_nonblocking(sock, &format!("fd batch {seq}"), || {
            fdpass::send_batch(sock, seq as u32, batch)
        })?;
    }
    Ok(())
}

/// Sends on a non-blocking socket, waiting for room at most
/// `RELAY_STEP_TIMEOUT`: a server that reads nothing must not hold the
/// keeper (and its SIGTERM) for good.
fn send_nonblocking(
    sock: &OwnedFd,
    what: &str,
    mut send: impl FnMut() -> io::Result<()>,
) -> Result<(), String> {
    let until = Instant::now() + RELAY_STEP_TIMEOUT;
    loop {
        match send() {
            Ok(()) => return Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                let now = Instant::now();
                if now >= until {
                    return Err(format!(
                        "sending {what}: the model-less server read nothing for {} s",
                        RELAY_STEP_TIMEOUT.as_secs()
                    ));
                }
                let _ = sys::poll_writable(sock, until - now);
            }
            Err(e) => return Err(format!("sending {what}: {e}")),
        }
    }
}

fn pane_of(id: &FdName) -> Option<u64> {
    match *id {
        FdName::Pty(p) | FdName::PtyHangup(p) | FdName::Pidfd(p) | FdName::Ring(p) => Some(p),
        _ => None,
    }
}

/// The old side of the handoff, played from a checkpoint: hello → the
/// pre-copy (with the held fds it names) → ack → the manifest (with the
/// new channel as `lineage`) → batch ack → imported → commit → committed.
fn relay(
    sock: &OwnedFd,
    cp: &Checkpoint,
    panes: &HashMap<u64, PaneHeld>,
    [listener, lock]: [&Option<OwnedFd>; 2],
    lineage: &OwnedFd,
) -> Result<(), String> {
    match recv(sock)? {
        // A replacement older than the checkpoint's writer (the binary of
        // a server taken back after a newer one checkpointed) cannot read
        // it: said here, rather than a model decoded without its history.
        Control::Hello {
            handoff_version,
            server_version,
            ..
        } if handoff_version < cp.handoff => {
            return Err(format!(
                "the replacement (ptyd {server_version}) reads handoff versions up to {handoff_version}, the checkpoint is in version {}",
                cp.handoff
            ));
        }
        Control::Hello { .. } => {}
        other => return Err(format!("expected hello, got {other:?}")),
    }
    let mut named: Vec<(FdName, RawFd)> = Vec::new();
    for (id, fd) in [(FdName::Listener, listener), (FdName::Lock, lock)] {
        let fd = fd.as_ref().ok_or("the keeper holds no listener or lock")?;
        named.push((id, fd.as_raw_fd()));
    }
    if let Some(log) = &cp.log {
        named.push((FdName::HistoryLog, log.as_raw_fd()));
    }
    for id in &cp.ids {
        let held = pane_of(id).and_then(|p| panes.get(&p));
        let fd = held.and_then(|h| match id {
            FdName::Pty(_) | FdName::PtyHangup(_) => h.master.as_ref(),
            FdName::Pidfd(_) => h.pidfd.as_ref(),
            FdName::Ring(_) => h.ring.as_ref(),
            _ => None,
        });
        // A pane whose fds we no longer hold comes back without them.
        if let Some(fd) = fd {
            named.push((*id, fd.as_raw_fd()));
        }
    }
    let first = named.len().min(fdpass::MAX_FDS_PER_BATCH - 1);
    let rest: Vec<&[(FdName, RawFd)]> = named[first..].chunks(fdpass::MAX_FDS_PER_BATCH).collect();
    let msg = Control::Precopy {
        bytes: cp.precopy_bytes,
        ids: named[..first].iter().map(|(id, _)| *id).collect(),
        batches: rest.len() as u32,
    };
    let fds: Vec<RawFd> = std::iter::once(cp.precopy.as_raw_fd())
        .chain(named[..first].iter().map(|(_, fd)| *fd))
        .collect();
    fdpass::send_message(sock, &msg, &fds).map_err(|e| format!("sending the pre-copy: {e}"))?;
    for (i, batch) in rest.iter().enumerate() {
        fdpass::send_batch(sock, i as u32 + 1, batch)
            .map_err(|e| format!("sending fd batch {}: {e}", i + 1))?;
    }
    expect(sock, |m| matches!(m, Control::PrecopyAck), "precopy_ack")?;
    let msg = Control::Manifest {
        bytes: cp.manifest_bytes,
        fd_count: 1,
        ids: vec![FdName::Lineage],
        timings: Vec::new(),
        pause_started_mono_us: sys::monotonic_usec(),
    };
    fdpass::send_message(sock, &msg, &[cp.manifest.as_raw_fd(), lineage.as_raw_fd()])
        .map_err(|e| format!("sending the manifest: {e}"))?;
    expect(
        sock,
        |m| matches!(m, Control::BatchAck { seq: 0 }),
        "batch_ack 0",
    )?;
    expect(sock, |m| matches!(m, Control::Imported), "imported")?;
    fdpass::send_message(sock, &Control::Commit, &[]).map_err(|e| format!("commit: {e}"))?;
    expect(
        sock,
        |m| matches!(m, Control::Committed { .. }),
        "committed",
    )?;
    Ok(())
}

fn expect(sock: &OwnedFd, ok: impl Fn(&Control) -> bool, what: &str) -> Result<(), String> {
    let msg = recv(sock)?;
    if ok(&msg) {
        Ok(())
    } else {
        Err(format!("expected {what}, got {msg:?}"))
    }
}

/// The replacement's next message, skipping its `progress` reports: the
/// step timeout is for a replacement that says nothing at all.
fn recv(sock: &OwnedFd) -> Result<Control, String> {
    loop {
        if !fdpass::wait_readable(sock, RELAY_STEP_TIMEOUT) {
            return Err(format!(
                "no word from the replacement in {} s",
                RELAY_STEP_TIMEOUT.as_secs()
            ));
        }
        let (data, _fds) = fdpass::recv_message(sock).map_err(|e| e.to_string())?;
        match serde_json::from_slice(&data) {
            Ok(Control::Progress) => continue,
            Ok(msg) => return Ok(msg),
            Err(e) => return Err(format!("bad message from the replacement: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint(handoff: u32) -> Checkpoint {
        let file = |name| sys::anonymous_file(name, b"{}").unwrap();
        Checkpoint {
            precopy: file(c"test-precopy"),
            precopy_bytes: 2,
            manifest: file(c"test-manifest"),
            manifest_bytes: 2,
            ids: Vec::new(),
            log: None,
            handoff,
            info: None,
        }
    }

    /// The replacement's side: says hello in `version`, then reads what
    /// comes until the keeper hangs up.
    fn replacement(sock: OwnedFd, version: u32) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let hello = Control::Hello {
                handoff_version: version,
                server_version: "0.0.1".into(),
                pid: 1,
            };
            fdpass::send_message(&sock, &hello, &[]).unwrap();
            while fdpass::wait_readable(&sock, Duration::from_secs(5))
                && fdpass::recv_message(&sock).is_ok_and(|(data, _)| !data.is_empty())
            {}
        })
    }

    /// A checkpoint in a handoff version the replacement does not read
    /// (written by a newer server than the binary started) is refused at
    /// its hello, saying why, before anything is sent.
    #[test]
    fn a_replacement_older_than_the_checkpoint_is_refused_at_hello() {
        let (ours, theirs) = sys::seqpacket_pair(false).unwrap();
        let (lineage, _other) = channel().unwrap();
        let peer = replacement(theirs, 4);
        let err = relay(
            &ours,
            &checkpoint(5),
            &HashMap::new(),
            [&None, &None],
            &lineage,
        )
        .unwrap_err();
        assert!(err.contains("reads handoff versions up to 4"), "{err}");
        assert!(err.contains("version 5"), "{err}");
        drop(ours);
        peer.join().unwrap();
    }

    /// A checkpoint from before the history log (no `handoff`: version 4)
    /// still goes to a replacement of today.
    #[test]
    fn a_checkpoint_without_a_version_is_version_4_and_readable() {
        let msg = r#"{"msg":"checkpoint","precopy_bytes":1,"manifest_bytes":2,"ids":[]}"#;
        let Ok(ToKeeper::Checkpoint { handoff, .. }) = serde_json::from_str(msg) else {
            panic!("not decoded as a checkpoint");
        };
        assert_eq!(handoff, 4);
        assert!(crate::handoff::manifest::accepts(handoff));
        // Past the hello: what fails next is the missing listener, not
        // the version.
        let (ours, theirs) = sys::seqpacket_pair(false).unwrap();
        let (lineage, _other) = channel().unwrap();
        let peer = replacement(theirs, crate::handoff::manifest::HANDOFF_VERSION);
        let err = relay(
            &ours,
            &checkpoint(handoff),
            &HashMap::new(),
            [&None, &None],
            &lineage,
        )
        .unwrap_err();
        assert!(err.contains("no listener"), "{err}");
        drop(ours);
        peer.join().unwrap();
    }
}
