//! A pane: one PTY, the process tree in it, its screen, and the input waiting
//! to be written to it.
//!
//! Lifecycle: `Held` (no process: restored with the `hold` policy, or its
//! start failed) or `Running` until the process we started is reaped, then
//! `Exited` with its status and the reason (normal exit, kill request,
//! watchdog). `respawn` takes `Held` or `Exited` back to `Running` with a new
//! PTY. The master fd may end earlier (EIO: every slave fd closed) or later (a
//! background process still holds the slave) than the process; the two are
//! tracked apart (the fds and their poll registration in
//! [`PaneFds`](super::fds::PaneFds)). The pane and its exit status stay
//! until removed.
//!
//! The fields are private: every change is a method named for it.
//! `start` (`Held` or `Exited` → `Running`: a new run on a new master),
//! `hold` (no process), `mark_exited` (`Running` → `Exited`), `start_kill`
//! (a kill in progress: its reason and escalation deadline); within a run
//! `read_output`/`end_output`, `queue_input`/`flush_input` with their acks,
//! `resize`, `move_to`, `note_prompt`, `note_command_finished`, output
//! pausing for slow clients, and the history file's dirty flag.

mod info;
mod input;
mod output;

pub use info::signal_name;

use super::fds::PaneFds;
use crate::model::{CommandSpec, PaneId, RestorePolicy};
use crate::protocol::methods::ExitStatus;
use crate::pty::{ChildProcess, PtyMaster};
use crate::server::clients::connection::ConnId;
use crate::term::{CaptureOptions, TermConfig, TermEvent, Terminal};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Input accepted for a pane and not yet written to its PTY.
pub const MAX_PENDING_INPUT: usize = 1 << 20;
/// `request_id`s remembered per pane for deduplicating retried input.
pub const REQUEST_ID_MEMORY: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The process ended on its own.
    Exited,
    /// `pane.kill` (or `pane.remove --force`) ended it.
    Killed,
    /// The wall-clock watchdog (`timeout_ms`) fired.
    Timeout,
    /// The idle watchdog (`idle_timeout_ms`) fired.
    IdleTimeout,
}

#[derive(Debug, Clone)]
pub enum PaneState {
    Running {
        child: ChildProcess,
        /// A kill under way, if one was asked for.
        kill: Option<Kill>,
    },
    Exited {
        child: ChildProcess,
        status: ExitStatus,
        /// The kill's reason if the process was killed, else `Exited`.
        reason: ExitReason,
        /// A kill's escalation outlives the exit: what is left of the
        /// session (background jobs) still gets SIGKILL at its deadline.
        escalate_at: Option<Instant>,
    },
    Held {
        reason: String,
    },
}

/// A pane's output as its attached clients' pace allows: paused while
/// one is too far behind (the loop reads it again once they catch up),
/// with a `PaneStall` check pending from the pause until it fires once
/// the pane reads again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientPace {
    /// Read; no stall check pending.
    Reading,
    /// Not read; a stall check is pending.
    Paused,
    /// Read again; the stall check set at the pause has not fired yet.
    ResumedCheckPending,
}

/// A kill in progress on a running pane (`Pane::start_kill`).
#[derive(Debug, Clone, Copy)]
pub struct Kill {
    /// Why, as the first kill request said.
    pub reason: ExitReason,
    /// When it escalates to SIGKILL (its timer's deadline, kept so a live
    /// upgrade can carry it).
    pub escalate_at: Instant,
}

/// An input request waiting for its bytes to reach the PTY.
#[derive(Debug)]
pub struct PendingAck {
    pub conn: ConnId,
    pub rpc_id: Value,
    /// Acked once `written_total` reaches this.
    pub end_offset: u64,
    pub duplicate: bool,
}

/// A pane. Its fields change only through the methods below, named for
/// the transition they make (`start`, `mark_exited`, `start_kill`,
/// `note_output`, ...), so the state machine in the module doc cannot be
/// bypassed from another file.
pub struct Pane {
    id: u64,
    name: Option<String>,
    command: CommandSpec,
    cwd: PathBuf,
    env: BTreeMap<String, String>,
    /// The creating client's environment, filtered; `None`: the server's.
    /// Memory only: a snapshot never holds it.
    client_env: Option<BTreeMap<String, String>>,
    cols: u16,
    rows: u16,
    created_unix_ms: u64,
    /// The PTY master (until output ends), the hung-up master and an
    /// inherited process's pidfd, each with its poll registration.
    fds: PaneFds,
    state: PaneState,
    /// Counts starts; timers for one run must not act on the next.
    run: u64,
    restore: RestorePolicy,
    resume: Option<String>,
    /// Output arrived since the history file was last written.
    history_dirty: bool,
    /// Shell-integration marks seen (OSC 133 A and D), so a wait can ask for
    /// "a mark after the N-th" without racing the shell.
    prompts_seen: u64,
    commands_finished: u64,
    last_command_exit: Option<i32>,
    /// The terminal model: screen, scrollback, modes, title. Boxed: the
    /// server's map holds panes inline in B-tree nodes, which are about
    /// half empty, so every byte of a pane costs about two (776 of its
    /// 1456 bytes were the terminal).
    screen: Box<Terminal>,
    /// Whether an interactive bash, zsh or fish started here gets ptyd's
    /// shell integration (`crate::shell`); off when created with
    /// `shell_integration: false`.
    shell_integration: bool,
    /// The shell this run's process got the integration injected into
    /// (`None`: not a shell ptyd recognised, or opted out).
    shell_injected: Option<crate::shell::Shell>,
    /// Output as plain text and its byte count, for text waits.
    output: super::output_log::OutputLog,
    last_output: Instant,
    timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    /// When the wall-clock watchdog fires, kept so a live upgrade can carry
    /// it.
    timeout_at: Option<Instant>,
    /// Whether attached clients too far behind keep its output unread.
    pace: ClientPace,
    /// Not read until a live upgrade commits or rolls back: it changed
    /// since the pre-copy and was sent again whole, so it must not change
    /// before the pause (its program blocks on the full PTY meanwhile).
    upgrade_hold: bool,
    /// On the loop's backlog after stopping at its read budget: the
    /// backlog pass reads it, so its readiness events do not too (a
    /// flooding pane gets one slice per turn, not two).
    backlogged: bool,
    input: Vec<u8>,
    input_pos: usize,
    written_total: u64,
    pending_acks: Vec<PendingAck>,
    recent_requests: HashMap<String, u64>,
    recent_order: VecDeque<String>,
    /// Every byte read, also in shared memory the keeper holds, for a
    /// replacement server to replay after a crash (`output_ring.rs`).
    ring: Option<crate::server::continuity::output_ring::OutputRing>,
    /// The ring's position at the last crash checkpoint: a pane is not
    /// read further while a whole ring's worth past it is unsaved.
    ring_saved: u64,
    /// The ring's position this process's screen has taken in. Another
    /// server may write on after it (the same memfd travels in an
    /// upgrade): if that server dies in its probation, what it read is
    /// here for us to take in (`catch_up_ring`).
    ring_fed: u64,
}

/// What one `Pane::read_output` call got.
pub struct OutputRead {
    /// Bytes read (and fed to the screen).
    pub taken: usize,
    /// The budget ran out with output perhaps left.
    pub more: bool,
    /// Output ended: end of file or EIO, every slave fd closed.
    pub ended: bool,
}

/// What a live upgrade carries of a pane besides its setup, screen and
/// input path: the new server rebuilds the pane in this state
/// (`Pane::carried_over`), with every instant relative to its own clock.
pub struct Carried {
    pub state: PaneState,
    pub created_unix_ms: u64,
    pub run: u64,
    pub kill_reason: Option<ExitReason>,
    pub kill_deadline: Option<Instant>,
    pub last_output: Instant,
    pub timeout_at: Option<Instant>,
    pub pending_acks: Vec<PendingAck>,
    pub history_dirty: bool,
    pub prompts_seen: u64,
    pub commands_finished: u64,
    pub last_command_exit: Option<i32>,
    /// The output byte count goes on; the text does not travel (a text
    /// wait handed over searches what follows).
    pub output_bytes: u64,
    pub shell_injected: Option<crate::shell::Shell>,
}

/// Everything needed to construct a pane besides its fds.
pub struct PaneSetup {
    pub id: u64,
    pub name: Option<String>,
    pub command: CommandSpec,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    pub client_env: Option<BTreeMap<String, String>>,
    pub cols: u16,
    pub rows: u16,
    pub timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub restore: RestorePolicy,
    pub resume: Option<String>,
    /// Scrollback limits and reported colours of the terminal model.
    pub term: TermConfig,
    pub shell_integration: bool,
}

impl Pane {
    /// A pane with no process yet (`Held`); `start` gives it one.
    pub fn new(setup: PaneSetup, token: mio::Token, held_reason: String) -> Pane {
        let screen = Terminal::new(setup.cols, setup.rows, setup.term.clone());
        Pane::with_screen(setup, token, held_reason, screen)
    }

    fn with_screen(
        setup: PaneSetup,
        token: mio::Token,
        held_reason: String,
        screen: Terminal,
    ) -> Pane {
        Pane {
            id: setup.id,
            name: setup.name,
            command: setup.command,
            cwd: setup.cwd,
            env: setup.env,
            client_env: setup.client_env,
            cols: setup.cols,
            rows: setup.rows,
            created_unix_ms: crate::clock::unix_ms(),
            fds: PaneFds::new(token),
            state: PaneState::Held {
                reason: held_reason,
            },
            run: 0,
            restore: setup.restore,
            resume: setup.resume,
            // A snapshot names every pane's history file, so the first
            // save after creation must write one even if nothing was printed.
            history_dirty: true,
            prompts_seen: 0,
            commands_finished: 0,
            last_command_exit: None,
            screen: Box::new(screen),
            shell_integration: setup.shell_integration,
            shell_injected: None,
            output: Default::default(),
            last_output: Instant::now(),
            timeout: setup.timeout,
            idle_timeout: setup.idle_timeout,
            timeout_at: None,
            pace: ClientPace::Reading,
            upgrade_hold: false,
            backlogged: false,
            input: Vec::new(),
            input_pos: 0,
            written_total: 0,
            pending_acks: Vec::new(),
            recent_requests: HashMap::new(),
            recent_order: VecDeque::new(),
            ring: None,
            ring_saved: 0,
            ring_fed: 0,
        }
    }

    /// A pane handed over by the previous server generation, in the state
    /// it had there; its fds come next (`PaneFds::adopt`).
    pub fn carried_over(
        setup: PaneSetup,
        token: mio::Token,
        screen: Terminal,
        carried: Carried,
    ) -> Pane {
        let mut pane = Pane::with_screen(setup, token, String::new(), screen);
        pane.state = carried.state;
        match &mut pane.state {
            // Both or neither: `start_kill` sets them together.
            PaneState::Running { kill, .. } => {
                *kill =
                    carried
                        .kill_reason
                        .zip(carried.kill_deadline)
                        .map(|(reason, escalate_at)| Kill {
                            reason,
                            escalate_at,
                        });
            }
            PaneState::Exited { escalate_at, .. } => *escalate_at = carried.kill_deadline,
            PaneState::Held { .. } => {}
        }
        pane.created_unix_ms = carried.created_unix_ms;
        pane.run = carried.run;
        pane.last_output = carried.last_output;
        pane.timeout_at = carried.timeout_at;
        pane.pending_acks = carried.pending_acks;
        pane.history_dirty = carried.history_dirty;
        pane.prompts_seen = carried.prompts_seen;
        pane.commands_finished = carried.commands_finished;
        pane.last_command_exit = carried.last_command_exit;
        pane.output = super::output_log::OutputLog::resume(carried.output_bytes);
        pane.shell_injected = carried.shell_injected;
        pane
    }

    /// The pane's id as clients see it (`p3`).
    pub fn public_id(&self) -> PaneId {
        PaneId::new(self.id)
    }

    /// Takes a freshly spawned process: the pane is `Running` again, its
    /// master in the poll, with no leftovers of an earlier run (kill reason,
    /// input, acks) and the wall-clock watchdog counting from `now`. If the
    /// master cannot be registered nothing changes but that the pane has no
    /// master; the caller kills the process.
    pub fn start(
        &mut self,
        registry: &mio::Registry,
        master: PtyMaster,
        child: ChildProcess,
        now: Instant,
    ) -> io::Result<()> {
        self.fds.start(registry, master)?;
        self.state = PaneState::Running { child, kill: None };
        self.run += 1;
        self.shell_injected = None;
        self.timeout_at = self.timeout.map(|t| now + t);
        self.last_output = now;
        self.discard_input();
        Ok(())
    }

    /// Running a process that was not started here: its master, adopted
    /// from the keeper by a model-less server (a crash loop's fallback),
    /// is already in `fds`. As after `start`, without a new PTY.
    pub fn adopt_running(&mut self, child: ChildProcess, now: Instant) {
        debug_assert!(!self.is_running(), "adopting into a running pane");
        self.state = PaneState::Running { child, kill: None };
        self.run += 1;
        self.timeout_at = self.timeout.map(|t| now + t);
        self.last_output = now;
    }

    /// No process (restored with the `hold` policy, or its start failed).
    pub fn hold(&mut self, reason: String) {
        debug_assert!(!self.is_running(), "holding a running pane");
        self.state = PaneState::Held { reason };
    }

    /// The process was reaped: `Running` becomes `Exited` with `status`
    /// and the kill reason if one was given. Returns the input acks that
    /// will never be written, or `None` if the pane was not running.
    pub fn mark_exited(&mut self, status: ExitStatus) -> Option<Vec<PendingAck>> {
        let PaneState::Running { child, kill } = self.state else {
            return None;
        };
        self.state = PaneState::Exited {
            child,
            status,
            reason: kill.map_or(ExitReason::Exited, |k| k.reason),
            escalate_at: kill.map(|k| k.escalate_at),
        };
        self.fds.process_ended();
        self.discard_input();
        Some(std::mem::take(&mut self.pending_acks))
    }

    /// A kill begins (or another request joins one in progress): the
    /// first reason stands, the earliest escalation deadline wins. Returns
    /// the process to signal, or `None` if nothing runs.
    pub fn start_kill(&mut self, reason: ExitReason, escalate_at: Instant) -> Option<ChildProcess> {
        let PaneState::Running { child, kill } = &mut self.state else {
            return None;
        };
        *kill = Some(match *kill {
            None => Kill {
                reason,
                escalate_at,
            },
            Some(k) => Kill {
                reason: k.reason,
                escalate_at: k.escalate_at.min(escalate_at),
            },
        });
        Some(*child)
    }

    /// Why the pane has no process, while it is held.
    pub fn held_reason(&self) -> Option<&str> {
        match &self.state {
            PaneState::Held { reason } => Some(reason),
            _ => None,
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(self.state, PaneState::Running { .. })
    }

    /// The process that runs, or ran last.
    pub fn child(&self) -> Option<ChildProcess> {
        match &self.state {
            PaneState::Running { child: c, .. } | PaneState::Exited { child: c, .. } => Some(*c),
            PaneState::Held { .. } => None,
        }
    }

    /// The shell drew a prompt (OSC 133 A).
    pub fn note_prompt(&mut self) {
        self.prompts_seen += 1;
    }

    /// The shell reported a command's end (OSC 133 D).
    pub fn note_command_finished(&mut self, exit: Option<i32>) {
        self.commands_finished += 1;
        self.last_command_exit = exit;
    }

    /// The pane's working directory moved; whether it changed.
    pub fn move_to(&mut self, cwd: PathBuf) -> bool {
        if self.cwd == cwd {
            return false;
        }
        self.cwd = cwd;
        true
    }

    /// Resizes the PTY (the kernel tells the foreground process group) and
    /// the screen. On an error nothing changed.
    pub fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        if let Some(master) = self.fds.master() {
            master.resize(cols, rows)?;
        }
        self.cols = cols;
        self.rows = rows;
        self.screen.resize(cols, rows);
        Ok(())
    }

    pub fn set_resume(&mut self, resume: Option<String>) {
        self.resume = resume;
    }

    pub fn rename(&mut self, name: String) {
        self.name = Some(name);
    }

    /// See `Terminal::compress_history`.
    pub fn compress_history(&mut self, max_blocks: usize) -> usize {
        self.screen.compress_history(max_blocks)
    }

    /// See `Terminal::keep_history_in_records`.
    pub fn keep_history_in_records(
        &mut self,
        source: &std::sync::Arc<dyn crate::term::RecordSource>,
        place: impl Fn(usize, u64) -> Option<u64>,
    ) -> usize {
        self.screen.keep_history_in_records(source, place)
    }

    /// See `Terminal::keep_history_in_heap`.
    pub fn keep_history_in_heap(&mut self) {
        self.screen.keep_history_in_heap();
    }

    /// Drops the oldest compressed block of the history for
    /// `scrollback_total_bytes` (`Terminal::drop_oldest_history_block`).
    pub fn drop_oldest_history_block(&mut self) -> Option<usize> {
        let freed = self.screen.drop_oldest_history_block()?;
        self.history_dirty = true;
        Some(freed)
    }

    /// The history file must be written again (output, a failed save, a
    /// save that renders every pane).
    pub fn mark_history_dirty(&mut self) {
        self.history_dirty = true;
    }

    /// The history file was rendered for a save.
    pub fn history_saved(&mut self) {
        self.history_dirty = false;
    }

    /// Stops reading output for a live upgrade (see `upgrade_hold`).
    pub fn hold_for_upgrade(&mut self) {
        self.upgrade_hold = true;
    }

    /// Reads output again after a rolled-back upgrade; whether it was held.
    pub fn release_upgrade_hold(&mut self) -> bool {
        std::mem::replace(&mut self.upgrade_hold, false)
    }

    pub fn held_for_upgrade(&self) -> bool {
        self.upgrade_hold
    }

    /// Takes the fds out, as they are (registered or not), for a pane
    /// rebuilt in place (a live upgrade's delta); `put_fds` gives them to
    /// the rebuilt pane, which keeps the same token.
    pub fn take_fds(&mut self) -> PaneFds {
        let token = self.fds.token();
        std::mem::replace(&mut self.fds, PaneFds::new(token))
    }

    pub fn put_fds(&mut self, fds: PaneFds) {
        debug_assert_eq!(self.fds.pollable(), 0, "fds left open");
        self.fds = fds;
    }

    /// Lets go of every fd, out of the poll first; returns the pidfd's
    /// token if there was one (see `PaneFds::close`).
    pub fn close_fds(&mut self, registry: &mio::Registry) -> Option<mio::Token> {
        self.fds.close(registry)
    }

    /// The terminal model, for a pane rebuilt around it (its fds must be
    /// closed first).
    pub fn into_screen(self) -> Terminal {
        debug_assert_eq!(self.fds.pollable(), 0, "fds left open");
        *self.screen
    }

    /// The fds, for the transitions a live upgrade makes on all of them
    /// together (adopt, register, deregister, close the pidfd).
    pub fn fds_mut(&mut self) -> &mut PaneFds {
        &mut self.fds
    }
}

/// Read access.
impl Pane {
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    pub fn command(&self) -> &CommandSpec {
        &self.command
    }
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }
    pub fn client_env(&self) -> Option<&BTreeMap<String, String>> {
        self.client_env.as_ref()
    }
    pub fn created_unix_ms(&self) -> u64 {
        self.created_unix_ms
    }
    /// Why the pane is being killed, or was: the kill's reason while it
    /// runs, and after the exit while the kill's escalation is pending.
    pub fn kill_reason(&self) -> Option<ExitReason> {
        match &self.state {
            PaneState::Running { kill, .. } => kill.map(|k| k.reason),
            PaneState::Exited {
                reason,
                escalate_at,
                ..
            } => escalate_at.map(|_| *reason),
            PaneState::Held { .. } => None,
        }
    }
    pub fn cols(&self) -> u16 {
        self.cols
    }
    pub fn rows(&self) -> u16 {
        self.rows
    }
    pub fn fds(&self) -> &PaneFds {
        &self.fds
    }
    /// It holds a master (its program's, or one hung up with output
    /// still to read): it can print, so it needs an output ring.
    pub fn can_print(&self) -> bool {
        self.fds.master().is_some() || self.fds.hung_up_master().is_some()
    }
    pub fn token(&self) -> mio::Token {
        self.fds.token()
    }
    pub fn state(&self) -> &PaneState {
        &self.state
    }
    pub fn run(&self) -> u64 {
        self.run
    }
    pub fn restore(&self) -> RestorePolicy {
        self.restore
    }
    pub fn resume(&self) -> Option<&str> {
        self.resume.as_deref()
    }
    pub fn history_dirty(&self) -> bool {
        self.history_dirty
    }
    pub fn prompts_seen(&self) -> u64 {
        self.prompts_seen
    }
    pub fn shell_integration(&self) -> bool {
        self.shell_integration
    }
    pub fn shell_injected(&self) -> Option<crate::shell::Shell> {
        self.shell_injected
    }
    /// The shell this run was started with the integration loaded into
    /// (right after `start`).
    pub fn set_shell_injected(&mut self, shell: Option<crate::shell::Shell>) {
        self.shell_injected = shell;
    }
    pub fn output(&self) -> &super::output_log::OutputLog {
        &self.output
    }
    /// The output byte count to hand out (in an input ack), made
    /// resolvable to a text position for a later `after_output` wait.
    pub fn output_checkpoint(&mut self) -> u64 {
        self.output.checkpoint()
    }
    pub fn commands_finished(&self) -> u64 {
        self.commands_finished
    }
    pub fn last_command_exit(&self) -> Option<i32> {
        self.last_command_exit
    }
    pub fn screen(&self) -> &Terminal {
        &self.screen
    }
    pub fn last_output(&self) -> Instant {
        self.last_output
    }
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }
    /// When a kill escalates to SIGKILL, if one is under way.
    pub fn kill_deadline(&self) -> Option<Instant> {
        match &self.state {
            PaneState::Running { kill, .. } => kill.map(|k| k.escalate_at),
            PaneState::Exited { escalate_at, .. } => *escalate_at,
            PaneState::Held { .. } => None,
        }
    }
    pub fn timeout_at(&self) -> Option<Instant> {
        self.timeout_at
    }
    pub fn output_paused(&self) -> bool {
        self.pace == ClientPace::Paused
    }
    pub fn pending_acks(&self) -> &[PendingAck] {
        &self.pending_acks
    }
}

impl Pane {
    /// A pane restored from a snapshot that had exited: exited again, with
    /// the process it had (never signalled: no kill of an exited pane
    /// sends anything, and no escalation is pending).
    pub fn restore_exited(&mut self, child: ChildProcess, status: ExitStatus, reason: ExitReason) {
        debug_assert!(!self.is_running(), "restoring a running pane as exited");
        self.state = PaneState::Exited {
            child,
            status,
            reason,
            escalate_at: None,
        };
    }
}
