//! The old side of a live upgrade, as a state machine driven by the loop:
//! nothing here blocks. ARCHITECTURE.md ("Live upgrade") draws the states
//! and every rollback edge.
//!
//! ```text
//! Idle -> Probing -> Starting -> Saving -> Precopying -> Transferring -> Importing -> Committing -> Probation -> (released)
//!            \          \           \          \             \              \             \
//!             `----------`-----------`----------`-------------`--------------`-> rollback: kill the new
//!                                                                              process, resume serving
//! ```
//!
//! Until `Committed` arrives nothing is lost by a rollback: the old server
//! kept every fd, and while paused it neither read nor wrote any of them.
//! After it, the new server serves; the old keeps its paused copies for a
//! probation window and takes everything back if the new one dies in it.

use super::connection::ConnId;
use super::timers::TimerKind;
use super::{LISTENER, Server, Source, UPGRADE};
use crate::handoff::fdpass::{self, MAX_FDS_PER_BATCH};
use crate::handoff::manifest::{self, Caller, Control, HANDOFF_VERSION, Manifest, Phase};
use crate::handoff::{HANDOFF_FD_ENV, fault};
use crate::protocol::methods::{self, ExitStatus};
use crate::protocol::{ErrorCode, RpcError};
use mio::Interest;
use mio::unix::SourceFd;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Default deadline for everything before the commit point.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// After the commit the old server keeps its paused copies this long, and
/// takes everything back if the new server dies meanwhile.
pub const PROBATION: Duration = Duration::from_secs(2);
/// Fd batches sent ahead of their acks: at most 4 x 252 fds in flight,
/// below the default RLIMIT_NOFILE that bounds them per user.
const BATCH_WINDOW: usize = 4;

pub enum Upgrade {
    Idle,
    Active(Box<Active>),
}

impl Upgrade {
    /// The new server's pid (or the probe's), to recognise its exit.
    pub fn child_pid(&self) -> Option<i32> {
        match self {
            Upgrade::Active(a) => Some(a.child.id() as i32),
            Upgrade::Idle => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Running `BINARY version --json`, reading its stdout.
    Probing,
    /// The new server is starting; waiting for its `hello`.
    Starting,
    /// Flushing the snapshot before pausing.
    Saving,
    /// Terminal models copied ahead, still serving; waiting for the new
    /// side to have decoded them.
    Precopying,
    /// Paused; fd batches going out, a few ahead of the acks.
    Transferring,
    /// Every fd sent; waiting for the new side's `imported`.
    Importing,
    /// `commit` sent; waiting for `committed`.
    Committing,
    /// Committed; keeping paused copies until the window ends.
    Probation,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Probing => "preflight",
            Step::Starting => "prepare",
            Step::Saving => "save",
            Step::Precopying => "precopy",
            Step::Transferring => "transfer",
            Step::Importing => "import",
            Step::Committing => "commit",
            Step::Probation => "probation",
        }
    }
}

pub struct Active {
    step: Step,
    child: std::process::Child,
    /// The probe's stdout while probing, then our end of the handoff socket.
    channel: OwnedFd,
    probe_output: Vec<u8>,
    binary: PathBuf,
    caller: Option<(ConnId, Value)>,
    fault: Option<String>,
    deadline: Instant,
    step_started: Instant,
    timings: Vec<Phase>,
    /// The fd batches; `next_batch` is the first not sent, `acked` counts
    /// those the new side confirmed.
    batches: Vec<Vec<(String, RawFd)>>,
    next_batch: usize,
    acked: usize,
    /// Kept open until the new side has its copies.
    memfd: Option<OwnedFd>,
    /// Pidfds we opened for our own children's panes, by pane id.
    opened_pidfds: HashMap<u64, OwnedFd>,
    new_version: String,
    /// `--mode restore`: save, stop, and exec the new binary in this
    /// process, which restores from the snapshot (no handoff).
    restore_mode: bool,
    /// The loop already reaped the child: its pid must not be signalled.
    child_reaped: bool,
    /// Change counts of the terminals the new side got in the pre-copy.
    precopied: HashMap<u64, u64>,
    /// The last event sequence number the pre-copy carried.
    events_precopied: Option<u64>,
    /// What the pre-copy carried of each pane, to tell at the pause which
    /// ones the new side already has right.
    pane_drafts: HashMap<u64, PaneDraft>,
}

/// A pane as the pre-copy carried it: its record and runtime state encoded
/// with the times relative to "now" zeroed, the instants behind them, and
/// its fds (the same numbers in the same run are the same open files).
struct PaneDraft {
    bytes: Vec<u8>,
    times: PaneTimes,
    fds: Vec<(String, RawFd)>,
}

/// A pane's fds as named for the handoff; for a running process of our own
/// a pidfd is opened (once per upgrade, kept in `opened`).
fn pane_fds(
    pane: &super::pane::Pane,
    opened: &mut HashMap<u64, OwnedFd>,
) -> Result<Vec<(String, RawFd)>, String> {
    let id = pane.public_id();
    let mut fds = Vec::with_capacity(2);
    if let Some(m) = &pane.master {
        fds.push((format!("pty:{id}"), m.raw_fd()));
    }
    if let Some(m) = &pane.hung_up_master {
        fds.push((format!("ptyhup:{id}"), m.raw_fd()));
    }
    if let super::pane::PaneState::Running(child) = pane.state {
        let fd = match (&pane.pidfd, opened.get(&pane.id)) {
            (Some(fd), _) | (None, Some(fd)) => fd.as_raw_fd(),
            (None, None) => {
                let fd = crate::pty::pidfd::open(child.pid).map_err(|e| {
                    format!("opening a pidfd for pane {id} (pid {}): {e}", child.pid)
                })?;
                let raw = fd.as_raw_fd();
                opened.insert(pane.id, fd);
                raw
            }
        };
        fds.push((format!("pidfd:{id}"), fd));
    }
    Ok(fds)
}

type PaneTimes = (Instant, Option<Instant>, Option<Instant>);

fn pane_times(p: &super::pane::Pane) -> PaneTimes {
    (p.last_output, p.timeout_at, p.kill_deadline)
}

/// Encodes a pane's record and runtime state into `buf` for comparison:
/// the relative times move with the clock, so they are zeroed here and
/// compared as instants (`pane_times`) instead.
fn draft_bytes(
    buf: &mut Vec<u8>,
    record: &crate::persist::snapshot::PaneRecord,
    rt: &mut manifest::PaneRuntime<&crate::term::Terminal>,
) -> Result<(), String> {
    let saved = (rt.idle_ms, rt.timeout_in_ms, rt.kill_escalate_in_ms);
    rt.idle_ms = 0;
    rt.timeout_in_ms = rt.timeout_in_ms.map(|_| 0);
    rt.kill_escalate_in_ms = rt.kill_escalate_in_ms.map(|_| 0);
    buf.clear();
    let encoded = serde_json::to_writer(&mut *buf, &(record, &*rt));
    (rt.idle_ms, rt.timeout_in_ms, rt.kill_escalate_in_ms) = saved;
    encoded.map_err(|e| format!("encoding pane p{}: {e}", rt.id))
}

impl Server {
    /// `server.upgrade`, or SIGHUP (`caller` is then `None`).
    pub(super) fn start_upgrade(&mut self, caller: Option<(ConnId, Value)>, req: methods::Upgrade) {
        let outcome = self.preflight(caller.clone(), req);
        if let Err(e) = outcome {
            self.log.log("upgrade_refused", &e.0.message);
            if let Some((conn, rpc_id)) = caller {
                self.respond(conn, &rpc_id, Err(e));
            }
        }
    }

    fn preflight(
        &mut self,
        caller: Option<(ConnId, Value)>,
        req: methods::Upgrade,
    ) -> Result<(), RpcError> {
        if let Upgrade::Active(a) = &self.upgrade {
            return Err(RpcError::new(
                ErrorCode::Busy,
                format!(
                    "an upgrade is already in progress (phase {}); wait for it to finish",
                    a.step.name()
                ),
            ));
        }
        if let Some(mode) = req
            .mode
            .as_deref()
            .filter(|m| *m != "live" && *m != "restore")
        {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("mode {mode:?}: use \"live\" (default) or \"restore\""),
            ));
        }
        if self.predecessor.is_some() {
            return Err(RpcError::new(
                ErrorCode::Busy,
                format!(
                    "the previous server is still in its {} ms probation after the last upgrade; try again in a moment",
                    PROBATION.as_millis()
                ),
            ));
        }
        let binary = match req.binary {
            Some(b) => std::path::absolute(&b).unwrap_or_else(|_| PathBuf::from(&b)),
            None => self.exe_path.clone(),
        };
        if !binary.is_file() {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("no binary at {}; pass --binary PATH", binary.display()),
            ));
        }
        let (read_end, write_end) =
            nix::unistd::pipe().map_err(|e| internal(format!("creating pipe: {e}")))?;
        crate::sys::set_nonblocking_cloexec(read_end.as_raw_fd())
            .map_err(|e| internal(e.to_string()))?;
        let child = std::process::Command::new(&binary)
            .args(["version", "--json"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::from(write_end))
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    format!("cannot run {} for a version probe: {e}", binary.display()),
                )
            })?;
        self.poll
            .registry()
            .register(
                &mut SourceFd(&read_end.as_raw_fd()),
                UPGRADE,
                Interest::READABLE,
            )
            .map_err(|e| internal(format!("registering the probe: {e}")))?;
        let timeout = req
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        let now = Instant::now();
        self.timers.add(now + timeout, TimerKind::Upgrade);
        self.log.log(
            "upgrade_started",
            &format!("upgrading to {}", binary.display()),
        );
        crate::service::notify::reloading();
        self.upgrade = Upgrade::Active(Box::new(Active {
            step: Step::Probing,
            child,
            channel: read_end,
            probe_output: Vec::new(),
            binary,
            caller,
            fault: req.fault,
            deadline: now + timeout,
            step_started: now,
            timings: Vec::new(),
            batches: Vec::new(),
            next_batch: 0,
            acked: 0,
            memfd: None,
            opened_pidfds: HashMap::new(),
            new_version: String::new(),
            restore_mode: req.mode.as_deref() == Some("restore"),
            child_reaped: false,
            precopied: HashMap::new(),
            events_precopied: None,
            pane_drafts: HashMap::new(),
        }));
        Ok(())
    }

    /// The probe's stdout or the handoff socket is readable.
    pub(super) fn on_upgrade_readable(&mut self) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        if a.step == Step::Probing {
            let mut buf = [0u8; 4096];
            loop {
                match nix::unistd::read(&a.channel, &mut buf) {
                    Ok(0) => return self.after_probe(),
                    Ok(n) if a.probe_output.len() < 64 * 1024 => {
                        a.probe_output.extend_from_slice(&buf[..n])
                    }
                    Ok(_) => return self.rollback("the version probe printed too much".into()),
                    Err(nix::errno::Errno::EAGAIN) => return,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return self.rollback(format!("reading the version probe: {e}")),
                }
            }
        }
        loop {
            let Upgrade::Active(a) = &mut self.upgrade else {
                return;
            };
            let (data, fds) = match fdpass::recv_message(&a.channel) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    let step = a.step;
                    return self.channel_lost(step, e);
                }
            };
            drop(fds);
            match serde_json::from_slice::<Control>(&data) {
                Ok(msg) => self.on_control(msg),
                Err(e) => return self.rollback(format!("the new server sent a bad message: {e}")),
            }
        }
    }

    /// The handoff socket failed or closed: before the commit that is a
    /// rollback; in probation the new server's exit (SIGCHLD) decides.
    fn channel_lost(&mut self, step: Step, e: std::io::Error) {
        if step == Step::Probation {
            if let Upgrade::Active(a) = &self.upgrade {
                let _ = self
                    .poll
                    .registry()
                    .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
            }
            return;
        }
        self.rollback(format!(
            "the new server's channel failed in phase {}: {e}",
            step.name()
        ));
    }

    fn after_probe(&mut self) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
        let _ = a.child.wait();
        let probe: Value = serde_json::from_slice(&a.probe_output).unwrap_or(Value::Null);
        if a.restore_mode {
            let theirs = probe["snapshot_version"].as_u64();
            let ours = u64::from(crate::persist::snapshot::SNAPSHOT_VERSION);
            if theirs.is_some_and(|v| v >= ours) {
                return self.restart_in_place();
            }
            let why = format!(
                "{} reads snapshot version {}, older than this server's {ours}; it could not restore the session",
                a.binary.display(),
                theirs.map_or("unknown".to_string(), |v| v.to_string())
            );
            return self.rollback(why);
        }
        let theirs = probe["handoff_version"].as_u64();
        let version = probe["server_version"]
            .as_str()
            .unwrap_or("unknown")
            .to_string();
        if theirs != Some(u64::from(HANDOFF_VERSION)) {
            let why = match theirs {
                Some(v) => format!(
                    "{} (ptyd {version}) speaks handoff version {v}, this server (ptyd {}) speaks {HANDOFF_VERSION}; use `ptyd upgrade --mode restore`, or a compatible binary",
                    a.binary.display(),
                    crate::protocol::SERVER_VERSION
                ),
                None => format!(
                    "{} did not answer `version --json` as a ptyd binary does; nothing was changed",
                    a.binary.display()
                ),
            };
            return self.rollback(why);
        }
        a.new_version = version;
        self.finish_step("preflight");
        if let Err(e) = self.spawn_new_server() {
            self.rollback(e);
        }
    }

    /// `--mode restore`, the fallback where a live handoff is impossible:
    /// answer the caller, stop as `ptyd stop` would (the snapshot is saved
    /// first), then exec the new binary in this very process. It keeps our
    /// pid (a service manager sees no change of main process) and restores
    /// the panes from the snapshot, restarting or resuming them.
    fn restart_in_place(&mut self) {
        let Upgrade::Active(a) = std::mem::replace(&mut self.upgrade, Upgrade::Idle) else {
            return;
        };
        let reply = json!({
            "mode": "restore",
            "pid": std::process::id(),
            "binary": a.binary,
            "panes": self.panes.len(),
            "message": "the session was saved; the new binary starts in this process and restores it",
        });
        if let Some((conn, rpc_id)) = &a.caller {
            self.respond(*conn, rpc_id, Ok(reply));
        }
        self.log.log(
            "upgrade_restore",
            &format!("restarting as {} with a restore", a.binary.display()),
        );
        self.shutdown();
        let mut cmd = std::process::Command::new(&a.binary);
        cmd.args(["-L", &self.paths.namespace, "server"])
            .env_remove(super::READY_FD_ENV);
        // A socket systemd passed stays systemd's: the new binary gets the
        // very same one, as systemd passes it (fd 3), instead of binding a
        // new file over the socket unit's path.
        let activated = self.socket_dev_ino == super::listener::NOT_OURS;
        if activated {
            crate::service::activation::pass_on_exec(&mut cmd, self.listener.as_raw_fd());
        }
        // The reaper, if any, must keep seeing this process as current.
        if let Some(l) = &self.lineage {
            let mut fd = l.as_raw_fd();
            if activated && fd == 3 {
                // SAFETY: duplicating an fd we own to a free number >= 4
                // (without FD_CLOEXEC), so fd 3 can take the listener.
                let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD, 4) };
                if moved >= 0 {
                    fd = moved;
                }
            }
            // SAFETY: clearing FD_CLOEXEC on an fd we own, so exec keeps it.
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
            cmd.env(crate::reaper::LINEAGE_FD_ENV, fd.to_string());
        }
        let err = cmd.exec();
        self.log.log(
            "upgrade_restore_failed",
            &format!("exec {}: {err}", a.binary.display()),
        );
        std::process::exit(1);
    }

    /// Starts the new binary in import mode on a fresh SEQPACKET socketpair.
    /// No filesystem rendezvous, no token: only our child has the other end.
    fn spawn_new_server(&mut self) -> Result<(), String> {
        let (ours, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC | nix::sys::socket::SockFlag::SOCK_NONBLOCK,
        )
        .map_err(|e| format!("creating the handoff socketpair: {e}"))?;
        let theirs_fd = theirs.as_raw_fd();
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Ok(());
        };
        let mut cmd = std::process::Command::new(&a.binary);
        cmd.args(["-L", &self.paths.namespace, "server"])
            .env(HANDOFF_FD_ENV, theirs_fd.to_string())
            .env_remove(super::READY_FD_ENV)
            .stdin(std::process::Stdio::null());
        match &a.fault {
            Some(f) => cmd.env(fault::FAULT_ENV, f),
            None => cmd.env_remove(fault::FAULT_ENV),
        };
        // SAFETY: runs in the forked child before exec; fcntl is
        // async-signal-safe. It lets exactly this one fd survive the exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::fcntl(theirs_fd, libc::F_SETFD, 0);
                // Blocking on the new side: it runs its import sequentially.
                let flags = libc::fcntl(theirs_fd, libc::F_GETFL);
                libc::fcntl(theirs_fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
                Ok(())
            });
        }
        a.child_reaped = false;
        a.child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", a.binary.display()))?;
        drop(theirs);
        a.channel = ours;
        a.step = Step::Starting;
        a.step_started = Instant::now();
        self.poll
            .registry()
            .register(
                &mut SourceFd(&a.channel.as_raw_fd()),
                UPGRADE,
                Interest::READABLE,
            )
            .map_err(|e| format!("registering the handoff socket: {e}"))
    }

    fn on_control(&mut self, msg: Control) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        match (a.step, msg) {
            (
                Step::Starting,
                Control::Hello {
                    handoff_version,
                    server_version,
                    pid,
                },
            ) => {
                if handoff_version != HANDOFF_VERSION || pid != a.child.id() {
                    return self.rollback(format!(
                        "the new server (pid {pid}, ptyd {server_version}) is not the process we started or speaks handoff version {handoff_version}"
                    ));
                }
                // SO_PEERCRED of a socketpair names its creator (us), so it
                // proves the uid; the pid is the one our own child reports.
                match crate::sys::peer_cred(&a.channel) {
                    Ok(peer) if peer.uid == crate::sys::current_uid() => {}
                    _ => return self.rollback("the handoff peer's uid is not ours".into()),
                }
                self.finish_step("prepare");
                fault::check(self.upgrade_fault().as_deref(), "old-after-hello");
                self.set_step(Step::Saving);
                if self.persist.disabled.is_none() {
                    self.mark_dirty();
                    self.start_save();
                }
                self.upgrade_after_save();
            }
            (Step::Precopying, Control::PrecopyAck) => {
                self.finish_step("precopy");
                if let Err(e) = self.pause_and_send_manifest() {
                    self.rollback(e);
                }
            }
            (Step::Transferring | Step::Importing, Control::BatchAck { seq })
                if seq as usize == a.acked && a.acked < a.next_batch =>
            {
                a.acked += 1;
                if a.acked == a.batches.len() {
                    fault::check(a.fault.as_deref(), "old-after-transfer");
                }
                if let Err(e) = self.send_batches() {
                    self.rollback(e);
                }
            }
            (Step::Importing, Control::Imported) if a.acked == a.batches.len() => {
                if let Err(e) = fdpass::send_message(&a.channel, &Control::Commit, &[]) {
                    return self.rollback(format!("sending commit: {e}"));
                }
                self.set_step(Step::Committing);
            }
            (Step::Committing, Control::Committed { blackout_us }) => {
                self.on_committed(blackout_us)
            }
            (Step::Probation, Control::Answered) => a.caller = None,
            (_, Control::Abort { reason }) => {
                self.rollback(format!("the new server gave up: {reason}"))
            }
            (step, msg) => self.rollback(format!("unexpected {msg:?} in phase {}", step.name())),
        }
    }

    fn upgrade_fault(&self) -> Option<String> {
        match &self.upgrade {
            Upgrade::Active(a) => a.fault.clone(),
            Upgrade::Idle => None,
        }
    }

    fn set_step(&mut self, step: Step) {
        if let Upgrade::Active(a) = &mut self.upgrade {
            a.step = step;
            a.step_started = Instant::now();
        }
    }

    fn finish_step(&mut self, name: &str) {
        if let Upgrade::Active(a) = &mut self.upgrade {
            a.timings.push(Phase {
                name: name.into(),
                us: a.step_started.elapsed().as_micros() as u64,
            });
            a.step_started = Instant::now();
        }
    }

    /// Called after every save result: in the Saving step, a finished save
    /// (or none needed) lets the pause begin.
    pub(super) fn upgrade_after_save(&mut self) {
        let Upgrade::Active(a) = &self.upgrade else {
            return;
        };
        if a.step != Step::Saving || self.persist.in_flight_revision().is_some() {
            return;
        }
        self.finish_step("save");
        if let Err(e) = self.send_precopy() {
            self.rollback(e);
        }
    }

    /// Pre-copy, as VM live migration does: every terminal model goes over
    /// while the server still serves; the pause then carries only those that
    /// changed since (their change counts say which). Most panes are idle
    /// during an upgrade, so the blackout stops growing with scrollback.
    fn send_precopy(&mut self) -> Result<(), String> {
        let screens: Vec<(u64, u64, &crate::term::Terminal)> = self
            .panes
            .values()
            .map(|p| (p.id, p.screen.changes(), &p.screen))
            .collect();
        let precopied: HashMap<u64, u64> = screens
            .iter()
            .map(|(id, changes, _)| (*id, *changes))
            .collect();
        // Panes waiting for input acks name connections, whose ids the new
        // side maps only at the pause: those always travel again.
        // Their fds go ahead too: the new side attaches and registers them
        // before the pause, and the blackout carries only changed panes'.
        let now = Instant::now();
        let history = self.persist.history;
        let mut drafts = HashMap::new();
        let mut panes = Vec::with_capacity(self.panes.len());
        let mut pane_fd_list: Vec<(String, RawFd)> = Vec::new();
        let mut opened = match &mut self.upgrade {
            Upgrade::Active(a) => std::mem::take(&mut a.opened_pidfds),
            Upgrade::Idle => return Ok(()),
        };
        for p in self.panes.values() {
            let record = super::persistence::pane_record(p, history);
            let mut rt = p.export(now, Some(p.screen.changes()));
            if p.pending_acks.is_empty() {
                let mut bytes = Vec::new();
                draft_bytes(&mut bytes, &record, &mut rt)?;
                let times = pane_times(p);
                let fds = pane_fds(p, &mut opened)?;
                pane_fd_list.extend(fds.iter().cloned());
                drafts.insert(p.id, PaneDraft { bytes, times, fds });
            }
            panes.push((record, rt));
        }
        if let Upgrade::Active(a) = &mut self.upgrade {
            a.opened_pidfds = opened;
        }
        let precopy = manifest::Precopy {
            screens,
            event_last_seq: self.events.last_seq(),
            event_ring: self.events.ring(),
            panes,
        };
        let bytes =
            serde_json::to_vec(&precopy).map_err(|e| format!("encoding the pre-copy: {e}"))?;
        let events_precopied = self.events.last_seq();
        let memfd = write_memfd(&bytes)?;
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Ok(());
        };
        let mut named: Vec<(String, RawFd)> = vec![
            ("listener".into(), self.listener.as_raw_fd()),
            ("lock".into(), self.lock.raw_fd()),
        ];
        named.extend(pane_fd_list);
        // The first batch rides with the memfd; the rest follow unacked
        // (before the pause, a failure here only fails the upgrade).
        let first = named.len().min(MAX_FDS_PER_BATCH - 1);
        let rest: Vec<&[(String, RawFd)]> = named[first..].chunks(MAX_FDS_PER_BATCH).collect();
        let msg = Control::Precopy {
            bytes: bytes.len() as u64,
            ids: named[..first].iter().map(|(id, _)| id.clone()).collect(),
            batches: rest.len() as u32,
        };
        let fds: Vec<RawFd> = std::iter::once(memfd.as_raw_fd())
            .chain(named[..first].iter().map(|(_, fd)| *fd))
            .collect();
        fdpass::send_message(&a.channel, &msg, &fds)
            .map_err(|e| format!("sending the pre-copy: {e}"))?;
        for (i, batch) in rest.iter().enumerate() {
            fdpass::send_batch(&a.channel, i as u32 + 1, batch)
                .map_err(|e| format!("sending the pre-copy's fd batch {}: {e}", i + 1))?;
        }
        a.precopied = precopied;
        a.events_precopied = Some(events_precopied);
        a.pane_drafts = drafts;
        a.step = Step::Precopying;
        a.step_started = Instant::now();
        Ok(())
    }

    /// The blackout starts here: the loop stops acting on every source, the
    /// state is captured into the manifest, and the fds go out in batches.
    fn pause_and_send_manifest(&mut self) -> Result<(), String> {
        let pause_started_mono_us = crate::sys::monotonic_usec();
        // Last chance for queued output to leave while it is still ours.
        self.flush_conns();
        self.paused = true;
        // Nothing leaves the poll here: the loop ignores every source but
        // the upgrade's own while paused, and epoll_ctl on every fd would
        // cost the blackout ~2 us a source. They leave after the commit.
        let now = Instant::now();
        // The listener and the lock went with the pre-copy.
        let mut fds: Vec<(String, RawFd)> = Vec::new();
        if self.lineage.is_none() {
            // First upgrade of the first generation: we become the reaper.
            let (reader, writer) = crate::reaper::lineage_pipe()
                .map_err(|e| format!("creating the lineage pipe: {e}"))?;
            self.lineage_reader = Some(reader);
            self.lineage = Some(writer);
        }
        if let Some(l) = &self.lineage {
            fds.push(("lineage".into(), l.as_raw_fd()));
        }
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in &conns {
            fds.push((format!("conn:{id}"), self.conns[id].stream.as_raw_fd()));
        }
        let (binary, caller, precopied, events_precopied, drafts, mut opened) =
            match &mut self.upgrade {
                Upgrade::Active(a) => (
                    a.binary.clone(),
                    a.caller.clone(),
                    std::mem::take(&mut a.precopied),
                    a.events_precopied.take(),
                    std::mem::take(&mut a.pane_drafts),
                    std::mem::take(&mut a.opened_pidfds),
                ),
                Upgrade::Idle => return Ok(()),
            };
        // Only the panes that changed since the pre-copy travel now: an
        // idle pane costs the blackout an encoding and a comparison here,
        // and nothing on the new side.
        let history = self.persist.history;
        let mut records = Vec::new();
        let mut runtimes = Vec::new();
        let mut unchanged_panes = Vec::new();
        let mut buf = Vec::new();
        for p in self.panes.values() {
            let record = super::persistence::pane_record(p, history);
            let mut rt = p.export(now, precopied.get(&p.id).copied());
            let pfds = pane_fds(p, &mut opened)?;
            let same = rt.screen.is_none()
                && p.pending_acks.is_empty()
                && match drafts.get(&p.id) {
                    Some(d) if d.times == pane_times(p) && d.fds == pfds => {
                        draft_bytes(&mut buf, &record, &mut rt)?;
                        buf == d.bytes
                    }
                    _ => false,
                };
            if same {
                unchanged_panes.push(p.id);
            } else {
                records.push(record);
                runtimes.push(rt);
                fds.extend(pfds);
            }
        }
        // Events are never changed once logged: only those after the
        // pre-copy travel now (all of them if the ring dropped some since).
        let (event_ring, events_after) = match events_precopied {
            Some(seq) => match self.events.after(seq) {
                Some(tail) => (tail, Some(seq)),
                None => (self.events.ring(), None),
            },
            None => (self.events.ring(), None),
        };
        let manifest = Manifest {
            handoff_version: HANDOFF_VERSION,
            from_version: crate::protocol::SERVER_VERSION.to_string(),
            from_pid: std::process::id(),
            generation: self.generation + 1,
            namespace: self.paths.namespace.clone(),
            snapshot: self.build_snapshot_with(records),
            panes: runtimes,
            unchanged_panes,
            conns: conns
                .iter()
                .map(|id| self.conns[id].export(*id, now))
                .collect(),
            waits: self.waits.values().map(|w| w.export(now)).collect(),
            event_last_seq: self.events.last_seq(),
            event_ring,
            events_after,
            persist_revision: self.persist.revision,
            history: self.persist.history,
            started_unix_ms: self.started_unix_ms,
            socket_dev: self.socket_dev_ino.0,
            socket_ino: self.socket_dev_ino.1,
            exe_path: binary.to_string_lossy().into_owned(),
            next_wait_id: self.next_wait_id,
            caller: caller.map(|(conn, rpc_id)| Caller { conn, rpc_id }),
            fd_ids: fds.iter().map(|(id, _)| id.clone()).collect(),
        };
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Ok(());
        };
        let bytes =
            serde_json::to_vec(&manifest).map_err(|e| format!("encoding the manifest: {e}"))?;
        let memfd = write_memfd(&bytes)?;
        // Batch 0 rides with the memfd, one fd short of a full batch.
        let first = fds.len().min(MAX_FDS_PER_BATCH - 1);
        a.batches = std::iter::once(&fds[..first])
            .chain(fds[first..].chunks(MAX_FDS_PER_BATCH))
            .map(<[_]>::to_vec)
            .collect();
        a.next_batch = 1;
        a.acked = 0;
        a.opened_pidfds = opened;
        let msg = Control::Manifest {
            bytes: bytes.len() as u64,
            fd_count: fds.len() as u32,
            ids: fds[..first].iter().map(|(id, _)| id.clone()).collect(),
            timings: a.timings.clone(),
            pause_started_mono_us,
        };
        let carried: Vec<RawFd> = std::iter::once(memfd.as_raw_fd())
            .chain(fds[..first].iter().map(|(_, fd)| *fd))
            .collect();
        fdpass::send_message(&a.channel, &msg, &carried)
            .map_err(|e| format!("sending the manifest: {e}"))?;
        a.memfd = Some(memfd);
        a.step = Step::Transferring;
        a.step_started = Instant::now();
        self.send_batches()
    }

    /// Sends fd batches up to [`BATCH_WINDOW`] ahead of the acks: each
    /// round trip inside the blackout costs two wakeups, and on a busy
    /// machine each wakeup may wait for a CPU.
    fn send_batches(&mut self) -> Result<(), String> {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Ok(());
        };
        while a.next_batch < a.batches.len() && a.next_batch - a.acked < BATCH_WINDOW {
            let seq = a.next_batch;
            match fdpass::send_batch(&a.channel, seq as u32, &a.batches[seq]) {
                Ok(()) => a.next_batch += 1,
                // A full socket buffer, or the kernel's per-user limit on
                // fds in flight (ETOOMANYREFS): an ack will make room.
                Err(e)
                    if seq > a.acked
                        && (e.kind() == std::io::ErrorKind::WouldBlock
                            || e.raw_os_error() == Some(libc::ETOOMANYREFS)) =>
                {
                    break;
                }
                Err(e) => return Err(format!("sending fd batch {seq}: {e}")),
            }
        }
        if a.step == Step::Transferring && a.next_batch == a.batches.len() {
            a.step = Step::Importing;
            a.step_started = Instant::now();
        }
        Ok(())
    }

    /// The commit point has passed: the new server serves.
    fn on_committed(&mut self, blackout_us: u64) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        a.step = Step::Probation;
        a.deadline = Instant::now() + PROBATION;
        self.timers.add(a.deadline, TimerKind::Upgrade);
        let msg = format!(
            "handed over to pid {} (ptyd {}); blackout {} us; probation {} ms",
            a.child.id(),
            a.new_version,
            blackout_us,
            PROBATION.as_millis()
        );
        // Out of the poll now that the blackout is over: the new server
        // reads these, and every edge would wake us for nothing during
        // probation. `release` closes only what left the poll first.
        self.deregister_all();
        self.log.log("upgrade_committed", &msg);
    }

    pub(super) fn on_upgrade_timer(&mut self, now: Instant) {
        let Upgrade::Active(a) = &self.upgrade else {
            return;
        };
        if a.deadline > now {
            return;
        }
        if a.step == Step::Probation {
            self.handed_over_to = Some(a.child.id());
            self.stopping = true;
            return;
        }
        let (step, took) = (
            a.step.name(),
            a.deadline.saturating_duration_since(a.step_started),
        );
        self.rollback(format!(
            "timed out in phase {step} (after {} ms)",
            took.as_millis()
        ));
    }

    /// The new process (or the probe) exited.
    pub(super) fn on_upgrade_child_exit(&mut self, status: ExitStatus) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        if a.step == Step::Probing {
            return; // the probe; its output decides
        }
        a.child_reaped = true;
        let what = match status {
            ExitStatus::Code(c) => format!("exited with code {c}"),
            ExitStatus::Signal(s) => format!("was killed by {}", super::pane::signal_name(s)),
        };
        if a.step == Step::Probation && matches!(status, ExitStatus::Code(0)) {
            // A clean exit is a requested stop (`server.stop`, SIGTERM): the
            // new server already hung up the panes and removed the socket.
            // Taking back would revive what the user stopped; end here too.
            let msg = format!(
                "the new server (pid {}) stopped during probation; stopping too",
                a.child.id()
            );
            self.log.log("upgrade_released", &msg);
            self.handed_over_to = Some(a.child.id());
            self.stopping = true;
            return;
        }
        if a.step == Step::Probation {
            // Read what it sent before dying (its `Answered` above all):
            // SIGCHLD may be handled before the channel's readiness.
            self.on_upgrade_readable();
            let msg = format!(
                "the new server {what} during probation; took everything back and serving on"
            );
            self.take_back(msg);
        } else {
            let step = a.step.name();
            self.rollback(format!("the new server {what} in phase {step}"));
        }
    }

    /// SIGTERM or SIGINT while an upgrade runs: before the commit, undo it
    /// (the stop then hangs up panes as usual); in probation the new server
    /// owns everything, so pass the stop on to it and let go.
    pub(super) fn stop_during_upgrade(&mut self) {
        let Upgrade::Active(a) = &self.upgrade else {
            return;
        };
        if a.step == Step::Probation {
            let pid = a.child.id();
            // SAFETY: kill has no memory-safety preconditions; our child.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            self.handed_over_to = Some(pid);
        } else {
            self.rollback("the server was asked to stop".into());
        }
    }

    /// Before the commit point: undo everything and serve on.
    fn rollback(&mut self, reason: String) {
        let Upgrade::Active(a) = std::mem::replace(&mut self.upgrade, Upgrade::Idle) else {
            return;
        };
        let mut a = *a;
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
        if !a.child_reaped {
            // SAFETY: kill has no memory-safety preconditions; the pid is our
            // unreaped child, so it cannot have been reused.
            unsafe { libc::kill(a.child.id() as i32, libc::SIGKILL) };
            let _ = a.child.wait();
        }
        drop(a.memfd.take());
        drop(std::mem::take(&mut a.opened_pidfds));
        self.drop_attempt_lineage();
        let was_paused = self.paused;
        if was_paused {
            // Before the commit nothing left the poll.
            self.resume(false);
        }
        let msg = format!(
            "upgrade to {} failed: {reason}; this server (pid {}) keeps serving{}",
            a.binary.display(),
            std::process::id(),
            if was_paused {
                ", everything resumed, nothing lost"
            } else {
                ", nothing was touched"
            }
        );
        self.log.log("upgrade_failed", &msg);
        crate::service::notify::ready(&format!("upgrade failed: {reason}"));
        self.emit(
            "server.upgrade_failed",
            json!({ "reason": reason, "phase": a.step.name() }),
        );
        if let Some((conn, rpc_id)) = a.caller {
            self.respond(
                conn,
                &rpc_id,
                Err(RpcError::new(ErrorCode::UpgradeFailed, msg)),
            );
        }
    }

    /// After the commit point, the new server died in probation: serve again
    /// with our paused copies.
    fn take_back(&mut self, msg: String) {
        let Upgrade::Active(a) = std::mem::replace(&mut self.upgrade, Upgrade::Idle) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
        self.drop_attempt_lineage();
        // The commit took every source out of the poll.
        self.resume(true);
        self.log.log("upgrade_taken_back", &msg);
        self.emit(
            "server.upgrade_failed",
            json!({ "reason": msg, "phase": "probation" }),
        );
        // The new server died before answering the caller (else `Answered`
        // would have cleared it): we owe the answer, or it waits forever.
        if let Some((conn, rpc_id)) = a.caller {
            let msg = format!(
                "upgrade to {} failed: {msg} (this server, pid {})",
                a.binary.display(),
                std::process::id()
            );
            self.respond(
                conn,
                &rpc_id,
                Err(RpcError::new(ErrorCode::UpgradeFailed, msg)),
            );
        }
    }

    /// A first generation serving on after a failed attempt closes the
    /// lineage pipe the attempt's pause made (the next pause makes a fresh
    /// one): nothing of a failed attempt stays open. Later generations keep
    /// the write end they inherited.
    fn drop_attempt_lineage(&mut self) {
        if self.lineage_reader.take().is_some() {
            self.lineage = None;
        }
    }

    /// Takes every source out of the poll, once the new server owns them.
    fn deregister_all(&mut self) {
        let registry = self.poll.registry();
        let _ = registry.deregister(&mut self.listener);
        for conn in self.conns.values_mut() {
            let _ = registry.deregister(&mut conn.stream);
        }
        for pane in self.panes.values() {
            if let Some(m) = &pane.master {
                let _ = registry.deregister(&mut SourceFd(&m.raw_fd()));
            }
            if let Some(fd) = &pane.pidfd {
                let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
            }
        }
    }

    /// Serves again and catches up on what happened meanwhile; `reregister`
    /// when the sources had left the poll (after the commit).
    fn resume(&mut self, reregister: bool) {
        self.paused = false;
        if reregister {
            self.register_all();
        }
        // Edge-triggered: edges that came while paused were consumed by the
        // ignoring loop (or raised none), so every source is read once.
        let panes: Vec<u64> = self.panes.keys().copied().collect();
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        self.backlog
            .extend(panes.iter().map(|id| Source::Pane(*id)));
        self.backlog
            .extend(conns.iter().map(|id| Source::Conn(*id)));
        for id in panes {
            self.flush_pane_input(id);
        }
        for timer in std::mem::take(&mut self.deferred_timers) {
            self.timers.add(Instant::now(), timer);
        }
        for (pid, status) in std::mem::take(&mut self.deferred_exits) {
            self.on_child_exit(pid, status);
        }
        self.accept_all();
    }

    fn register_all(&mut self) {
        let registry = self.poll.registry();
        let _ = registry.register(&mut self.listener, LISTENER, Interest::READABLE);
        for conn in self.conns.values_mut() {
            let _ = registry.register(
                &mut conn.stream,
                conn.token,
                Interest::READABLE | Interest::WRITABLE,
            );
        }
        for pane in self.panes.values() {
            if let Some(m) = &pane.master {
                let _ = registry.register(
                    &mut SourceFd(&m.raw_fd()),
                    pane.token,
                    Interest::READABLE | Interest::WRITABLE,
                );
            }
            if let (Some(fd), Some(token)) = (&pane.pidfd, pane.pidfd_token) {
                let _ =
                    registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE);
            }
        }
    }

    /// After probation: let go of every fd without hanging anything up (the
    /// new server holds the same open files, so no close here is the last).
    pub(super) fn release(&mut self) {
        self.log.log(
            "released",
            "handed everything to the new server; letting go",
        );
        for pane in self.panes.values_mut() {
            drop(pane.master.take());
            drop(pane.hung_up_master.take());
            drop(pane.pidfd.take());
        }
        self.conns.clear();
        drop(self.lineage.take());
        self.upgrade = Upgrade::Idle;
    }

    /// The previous generation's channel: anything but a message is its
    /// close, the end of its probation.
    pub(super) fn on_predecessor_readable(&mut self) {
        let Some(sock) = &self.predecessor else {
            return;
        };
        loop {
            match fdpass::recv_message(sock) {
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        if let Some(sock) = self.predecessor.take() {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&sock.as_raw_fd()));
        }
    }

    /// `server.status`'s view of an upgrade in flight.
    pub(super) fn upgrade_status(&self) -> Value {
        match &self.upgrade {
            Upgrade::Idle => Value::Null,
            Upgrade::Active(a) => {
                json!({ "phase": a.step.name(), "binary": a.binary, "new_pid": a.child.id() })
            }
        }
    }
}

fn internal(message: String) -> RpcError {
    RpcError::new(ErrorCode::Internal, message)
}

/// An anonymous, sealed-size file holding `bytes`, to pass as one fd.
fn write_memfd(bytes: &[u8]) -> Result<OwnedFd, String> {
    let name = c"ptyd-manifest";
    // SAFETY: memfd_create takes a NUL-terminated name and flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel just created this fd for us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)
        .map_err(|e| format!("writing the manifest: {e}"))?;
    Ok(OwnedFd::from(file))
}

impl super::waits::Wait {
    pub fn export(&self, now: Instant) -> manifest::WaitRuntime {
        use super::waits::WaitCondition as C;
        let (mut regex, mut include_screen, mut after_command_start) = (false, false, false);
        let (kind, text, n) = match &self.condition {
            C::Exit => ("exit", None, 0),
            C::Text(t) => {
                regex = t.regex.is_some();
                include_screen = t.include_screen;
                after_command_start = t.after_command_start;
                ("text", Some(t.text.clone()), t.skip_lines)
            }
            C::Idle(d) => ("idle", None, d.as_millis() as u64),
            C::Prompt(n) => ("prompt", None, *n),
            C::CommandFinished(n) => ("command_finished", None, *n),
        };
        manifest::WaitRuntime {
            conn: self.conn,
            rpc_id: self.rpc_id.clone(),
            pane: self.pane,
            kind: kind.into(),
            text,
            n,
            regex,
            include_screen,
            after_command_start,
            timeout_in_ms: self
                .deadline
                .map(|d| d.saturating_duration_since(now).as_millis() as u64),
        }
    }
}
