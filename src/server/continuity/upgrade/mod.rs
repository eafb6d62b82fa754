//! The live upgrade, both sides. docs/design/upgrade.md draws
//! the sequence and every rollback edge; this folder implements it:
//!
//! - `machine.rs`: the old side's sequence as a pure state machine,
//!   `on(step, input) -> (step, actions)`; each step carries its own data.
//! - this file: the old side's entry points from the loop (a request or
//!   SIGHUP, the channel's readiness, the new process's exit, the deadline,
//!   a finished save, a stop) and the driver that feeds them to the machine
//!   and executes its actions. Nothing here blocks.
//! - `export.rs`: the old side's actions: probe, start the new server,
//!   pre-copy, pause and capture the manifest, send fd batches, commit.
//! - `rollback.rs`: rollback, take-back, and the resume, deregister and
//!   register helpers both use; the release after probation.
//! - `import/`: the new side, run sequentially before it serves.
//! - `convert.rs`: every conversion between server state and manifest.
//! - `error.rs`: why a step failed, by the kind the sequence decides on.
//!
//! `handoff/` is the wire format only (messages, manifest, fd names, fd
//! batches, fault points).
//!
//! ```text
//! Probing -> Starting -> Saving -> Precopying -> Transferring -> Importing -> Committing -> Probation -> Done
//!    \           \          \          \              \              \             \            \
//!     `-----------`----------`----------`--------------`--------------`-------------`-> Rollback  `-> TakeBack
//! ```
//!
//! Until `committed` arrives nothing is lost by a rollback: the old server
//! kept every fd, and while paused it neither read nor wrote any of them.
//! After it, the new server serves; the old keeps its paused copies for a
//! probation window and takes everything back if the new one dies in it.

pub(in crate::server) mod convert;
mod error;
mod export;
pub mod import;
mod machine;
mod rollback;

use crate::handoff::fdpass;
use crate::handoff::manifest::{Control, Phase};
use crate::model::PaneId;
use crate::protocol::methods::{self, ExitStatus};
use crate::protocol::{ErrorCode, RpcError};
use crate::server::clients::connection::ConnId;
use crate::server::timers::TimerKind;
use crate::server::{Server, UPGRADE};
use error::{UpgradeError, UpgradeErrorKind};
use machine::{Action, Input, Step};
use mio::unix::SourceFd;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// After the handoff socket closed before the commit, how long to wait
/// for the new process's exit status before rolling back without it.
const CHANNEL_LOST_GRACE: Duration = Duration::from_secs(1);
/// Default deadline for everything before the commit point.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// After the commit the old server keeps its paused copies this long, and
/// takes everything back if the new server dies meanwhile.
pub const PROBATION: Duration = Duration::from_secs(2);

pub enum Upgrade {
    Idle,
    Active(Box<Active>),
}

impl Upgrade {
    /// The new server's pid (or the probe's), to recognise its exit.
    pub fn child_pid(&self) -> Option<i32> {
        match self {
            Upgrade::Active(a) => Some(a.child.pid as i32),
            Upgrade::Idle => None,
        }
    }
}

/// The probe or the new server: our child, known by pid. It is never
/// waited for: the loop's SIGCHLD handler reaps it (`reap_any_child`) like
/// every other child, so a child that lingers can never stall the loop.
/// Until `reaped`, the pid is still ours (an unreaped child's pid cannot be
/// reused), so it is safe to signal.
pub(in crate::server) struct UpgradeChild {
    pid: u32,
    reaped: bool,
}

impl UpgradeChild {
    fn spawned(child: std::process::Child) -> UpgradeChild {
        // Dropping a `std::process::Child` neither waits nor kills.
        UpgradeChild {
            pid: child.id(),
            reaped: false,
        }
    }

    /// SIGKILL unless already reaped; the loop reaps it when it dies.
    fn kill(&self) {
        if !self.reaped {
            let _ = crate::sys::kill(self.pid as i32, crate::sys::SIGKILL);
        }
    }
}

/// An attempt in flight: the machine's step, and the resources the server
/// holds for it (closed or killed by a rollback).
pub struct Active {
    step: Step,
    /// The probe while probing, then the new server.
    child: UpgradeChild,
    /// The probe's stdout while probing, then our end of the handoff socket.
    channel: OwnedFd,
    binary: PathBuf,
    caller: Option<(ConnId, Value)>,
    fault: Option<String>,
    /// Before the commit: when the attempt is given up, `stall` after the
    /// last sign of progress (a message from the new side, a step done).
    /// In probation: when probation ends.
    deadline: Instant,
    stall: Duration,
    step_started: Instant,
    timings: Vec<Phase>,
    /// The manifest's memfd, kept open until the new side has its copy.
    memfd: Option<OwnedFd>,
    /// Pidfds we opened for our own children's panes, by pane id.
    opened_pidfds: HashMap<PaneId, OwnedFd>,
    new_version: String,
    /// The handoff socket failed or closed before the commit: the cause is
    /// almost always the new process exiting, whose status (and its
    /// `abort` reason, if it sent one) says more than the closed socket,
    /// so the rollback waits briefly for that exit.
    channel_lost: Option<String>,
    /// The reason the new side gave in an `abort` message.
    abort_reason: Option<String>,
    /// What this server was when the request came, for the report.
    from: Origin,
}

/// The serving process before an upgrade, named in every report.
#[derive(Clone)]
pub(in crate::server) struct Origin {
    pub pid: u32,
    pub version: String,
    pub binary: PathBuf,
}

impl Server {
    /// `server.upgrade`, or SIGHUP (`caller` is then `None`).
    pub(in crate::server) fn start_upgrade(
        &mut self,
        caller: Option<(ConnId, Value)>,
        req: methods::Upgrade,
    ) {
        if let Err(e) = self.preflight(caller.clone(), req) {
            self.log.log("upgrade_refused", &e.0.message);
            if let Some((conn, rpc_id)) = caller {
                self.respond(conn, &rpc_id, Err(e));
            }
        }
    }

    /// SIGHUP: upgrade to the binary at our own path, or, while an
    /// upgrade runs or the previous one's probation lasts, once that is
    /// over (a second reload waits rather than fails).
    pub(in crate::server) fn upgrade_on_sighup(&mut self) {
        if matches!(self.upgrade, Upgrade::Active(_)) || self.succession.in_probation() {
            self.log.log(
                "upgrade_queued",
                "SIGHUP during an upgrade or its probation; upgrading once that is over",
            );
            self.sighup_pending = true;
            return;
        }
        self.start_upgrade(None, methods::Upgrade::default());
    }

    /// The upgrade or probation that held a SIGHUP back is over: run it
    /// (here if we serve on, else in the new server, which got it from us).
    fn run_pending_sighup(&mut self) {
        if std::mem::take(&mut self.sighup_pending) {
            self.upgrade_on_sighup();
        }
    }

    /// Feeds one input to the machine and executes what it decides, with
    /// the results of those actions fed back in turn. An action that fails
    /// feeds `Failed` and skips the rest of its batch.
    fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let Upgrade::Active(a) = &mut self.upgrade else {
                return;
            };
            let step = std::mem::replace(&mut a.step, Step::Done);
            let before = step.name();
            let progress = matches!(input, Input::Msg(_));
            let (next, actions) = machine::on(step, input);
            let changed = next.name() != before;
            a.step = next;
            // The deadline is for progress, not for size: a message from
            // the new side or a step done pushes it back, so only a stall
            // rolls back, however long a big import takes under load.
            if (progress || changed) && a.step.before_commit() {
                a.deadline = Instant::now() + a.stall;
                let at = a.deadline;
                self.arm_upgrade_timer(at);
            }
            for action in actions {
                match self.execute(action) {
                    Ok(Some(result)) => inputs.push_back(result),
                    Ok(None) => {}
                    Err(e) => {
                        if !self.await_exit_of_vanished_peer(&e.message) {
                            inputs.push_back(Input::Failed(e.message));
                        }
                        break;
                    }
                }
            }
            // After the actions: a `FinishPhase` among them measures the
            // step that just ended.
            if changed && let Upgrade::Active(a) = &mut self.upgrade {
                a.step_started = Instant::now();
            }
        }
        // Rolled back or taken back: a reload held back meanwhile runs now.
        if matches!(self.upgrade, Upgrade::Idle) && !self.succession.in_probation() {
            self.run_pending_sighup();
        }
    }

    /// One action of the machine; `Ok(Some(input))` is its result to feed.
    fn execute(&mut self, action: Action) -> Result<Option<Input>, UpgradeError> {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Ok(None);
        };
        match action {
            Action::FinishPhase(name) => {
                a.timings.push(Phase {
                    name: name.into(),
                    us: a.step_started.elapsed().as_micros() as u64,
                });
                a.step_started = Instant::now();
            }
            Action::SpawnNewServer { version, handoff } => {
                a.new_version = version;
                let child = self.spawn_new_server()?;
                return Ok(Some(Input::Spawned { child, handoff }));
            }
            Action::RestartInPlace => self.restart_in_place(),
            // SO_PEERCRED of a socketpair names its creator (us), so it
            // proves the uid; the pid is the one our own child reports.
            Action::CheckPeer => match crate::sys::peer_cred(&a.channel) {
                Ok(peer) if peer.uid == crate::sys::current_uid() => {}
                _ => {
                    return Err(UpgradeError::new(
                        UpgradeErrorKind::Refused,
                        "the handoff peer's uid is not ours",
                    ));
                }
            },
            Action::Fault(point) => crate::handoff::fault::check(a.fault.as_deref(), point),
            Action::Save => {
                if self.persist.disabled.is_none() {
                    self.mark_dirty();
                    self.start_upgrade_save();
                }
                return Ok(self.save_finished().then_some(Input::SaveFinished));
            }
            Action::SendPrecopy => return self.send_precopy().map(|p| Some(Input::PrecopySent(p))),
            Action::SendDelta(precopied) => {
                let (precopied, sent) = self.send_delta(precopied)?;
                return Ok(Some(Input::DeltaSent { precopied, sent }));
            }
            Action::Pause(precopied) => {
                let transfer = self.pause_and_send_manifest(precopied)?;
                return Ok(Some(Input::ManifestSent(transfer)));
            }
            Action::SendBatches { from, to, acked } => {
                let next = self.send_batches(from, to, acked)?;
                return Ok(Some(Input::BatchesSent { next }));
            }
            Action::SendCommit => fdpass::send_message(&a.channel, &Control::Commit, &[])
                .map_err(|e| UpgradeError::channel("sending commit", e))?,
            Action::Committed { blackout_us } => self.on_committed(blackout_us),
            Action::DeregisterChannel => {
                let _ = self
                    .poll
                    .registry()
                    .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
            }
            Action::Log(kind, msg) => self.log.log(kind, &msg),
            Action::Rollback { reason, phase } => self.rollback(reason, phase),
            Action::TakeBack {
                reason,
                answer_caller,
            } => self.take_back(reason, answer_caller),
            Action::HandOver(why) => self.hand_over(why),
        }
        Ok(None)
    }

    /// The probe's stdout or the handoff socket is readable.
    pub(in crate::server) fn on_upgrade_readable(&mut self) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        if matches!(a.step, Step::Probing { .. }) {
            return self.read_probe();
        }
        loop {
            let Upgrade::Active(a) = &mut self.upgrade else {
                return;
            };
            if a.channel_lost.is_some() {
                return;
            }
            let input = match fdpass::recv_message(&a.channel) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => Input::ChannelLost(e.to_string()),
                // Control messages carry no fds; any that came are closed.
                Ok((data, _fds)) => match serde_json::from_slice::<Control>(&data) {
                    Ok(msg) => Input::Msg(msg),
                    Err(e) => Input::BadMessage(e.to_string()),
                },
            };
            if let Input::Msg(Control::Abort { reason }) = &input {
                a.abort_reason = Some(reason.clone());
            }
            if let Input::ChannelLost(e) = &input
                && self.await_exit_of_vanished_peer(&e.clone())
            {
                return;
            }
            let lost = matches!(input, Input::ChannelLost(_));
            self.feed(input);
            if lost {
                return;
            }
        }
    }

    /// The handoff socket closed, or sending on it failed because the
    /// peer is gone, before the commit: most likely the new process is
    /// exiting, and its exit status (SIGKILL, a code) names the cause
    /// better than "broken pipe" does. Waits for that exit (SIGCHLD), at
    /// most [`CHANNEL_LOST_GRACE`]; `error` is the message if it does not
    /// come. Returns false (nothing deferred) when that does not apply.
    fn await_exit_of_vanished_peer(&mut self, error: &str) -> bool {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return false;
        };
        if !a.step.before_commit() || matches!(a.step, Step::Probing { .. }) || a.child.reaped {
            return false;
        }
        if a.channel_lost.is_some() {
            // Already waiting for the exit: a later failure (a save that
            // finished, then a send) says nothing new.
            return true;
        }
        if !crate::sys::peer_hung_up(a.channel.as_raw_fd()) {
            return false;
        }
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
        a.channel_lost = Some(error.to_string());
        let at = (Instant::now() + CHANNEL_LOST_GRACE).min(a.deadline);
        a.deadline = at;
        self.arm_upgrade_timer(at);
        true
    }

    /// Reads what the version probe printed, until it closes its output.
    /// A probe that closes its output and lingers is killed then (a ptyd
    /// binary exits right after printing); it is never waited for here:
    /// the loop reaps it on SIGCHLD.
    fn read_probe(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            let Upgrade::Active(a) = &mut self.upgrade else {
                return;
            };
            if !matches!(a.step, Step::Probing { .. }) {
                return;
            }
            match nix::unistd::read(&a.channel, &mut buf) {
                Ok(0) => {
                    let _ = self
                        .poll
                        .registry()
                        .deregister(&mut SourceFd(&a.channel.as_raw_fd()));
                    a.child.kill();
                    return self.feed(Input::ProbeEnded);
                }
                Ok(n) => self.feed(Input::ProbeOutput(buf[..n].to_vec())),
                Err(nix::errno::Errno::EAGAIN) => return,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    return self.feed(Input::Failed(format!("reading the version probe: {e}")));
                }
            }
        }
    }

    /// Called after every save result: in the Saving step, a finished save
    /// (or none needed) lets the pre-copy begin.
    pub(in crate::server) fn upgrade_after_save(&mut self) {
        if let Upgrade::Active(a) = &self.upgrade
            && matches!(a.step, Step::Saving)
            && self.save_finished()
        {
            self.feed(Input::SaveFinished);
        }
    }

    fn save_finished(&self) -> bool {
        self.persist.in_flight_revision().is_none()
    }

    pub(in crate::server) fn on_upgrade_timer(&mut self, now: Instant) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        if a.deadline > now {
            return;
        }
        if let Some(e) = a.channel_lost.take() {
            // The new process kept running after closing its end.
            let e = match a.abort_reason.take() {
                Some(reason) => format!("{e}; it said: {reason}"),
                None => e,
            };
            return self.feed(Input::ChannelLost(e));
        }
        let took_ms = a.stall.as_millis();
        self.feed(Input::Deadline { took_ms });
    }

    /// The new process (or the probe) exited.
    pub(in crate::server) fn on_upgrade_child_exit(&mut self, status: ExitStatus) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        a.child.reaped = true;
        if matches!(a.step, Step::Probation { .. }) {
            // Read what it sent before dying (its `Answered` above all):
            // SIGCHLD may be handled before the channel's readiness.
            self.on_upgrade_readable();
        }
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        let mut what = match status {
            ExitStatus::Code(c) => format!("exited with code {c}"),
            ExitStatus::Signal(s) => format!(
                "was killed by {}",
                crate::server::panes::pane::signal_name(s)
            ),
        };
        if let Some(reason) = a.abort_reason.take() {
            what = format!("gave up ({reason}) and {what}");
        } else if a.channel_lost.take().is_some() && matches!(status, ExitStatus::Code(_)) {
            what = format!(
                "{what} (its stderr says why: the journal, or server.stderr in the state directory)"
            );
        }
        let clean = matches!(status, ExitStatus::Code(0));
        self.feed(Input::ChildExited { clean, what });
    }

    /// SIGTERM or SIGINT while an upgrade runs: before the commit, undo it
    /// (the stop then hangs up panes as usual); in probation the new server
    /// owns everything, so pass the stop on to it and let go.
    pub(in crate::server) fn stop_during_upgrade(&mut self) {
        self.feed(Input::Stop);
    }

    /// The previous generation's channel: anything but a message is its
    /// close, the end of its probation.
    pub(in crate::server) fn on_predecessor_readable(&mut self) {
        let Some(sock) = self.succession.predecessor() else {
            return;
        };
        loop {
            match fdpass::recv_message(sock) {
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        if let Some(sock) = self.succession.end_probation() {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&sock.as_raw_fd()));
        }
        // The old server let go: ours is the code to keep.
        self.keeper_serving(false, true);
        self.answer_upgrade_caller("survived");
        self.run_pending_sighup();
    }

    /// `server.status`'s view of an upgrade in flight.
    pub(in crate::server) fn upgrade_status(&self) -> Value {
        match &self.upgrade {
            Upgrade::Idle => Value::Null,
            Upgrade::Active(a) => {
                json!({ "phase": a.step.name(), "binary": a.binary, "new_pid": a.child.pid })
            }
        }
    }

    /// Arms the upgrade's single timer kind for `at`.
    fn arm_upgrade_timer(&mut self, at: Instant) {
        self.timers.add(at, TimerKind::Upgrade);
    }
}

fn internal(message: String) -> RpcError {
    RpcError::new(ErrorCode::Internal, message)
}

/// Registers the upgrade's channel (the probe's output, then the socket).
fn register_channel(server: &Server, fd: &OwnedFd) -> std::io::Result<()> {
    server.poll.registry().register(
        &mut SourceFd(&fd.as_raw_fd()),
        UPGRADE,
        mio::Interest::READABLE,
    )
}
