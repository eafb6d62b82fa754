//! The old side's upgrade sequence as a pure state machine: [`on`] takes
//! the current [`Step`] and one [`Input`] (a control message from the new
//! side, the new process exiting, the deadline passing, a save finishing,
//! a stop request, or the result of an action) and returns the next step
//! and the [`Action`]s the server executes. No I/O happens here, so the
//! tests below drive every edge of docs/design/upgrade.md's diagram
//! without a process.
//!
//! Each step carries the data that exists only in it: the probe's output
//! while probing, what the pre-copy carried while waiting for its ack, the
//! fd batches and their acks while transferring. Resources the server
//! must close (the child, the channel, the memfd) stay in `Active`.
//!
//! An action that fails feeds [`Input::Failed`] back (the rest of that
//! batch of actions is skipped); an action that produces data feeds it
//! back too ([`Input::Spawned`], [`Input::PrecopySent`], ...), so every
//! change of step is made here.

use super::convert::PaneDraft;
use crate::handoff::fd_name::FdName;
use crate::handoff::manifest::{Control, HANDOFF_VERSION};
use crate::model::PaneId;
use std::collections::HashMap;
use std::os::fd::RawFd;

/// Fd batches sent ahead of their acks: at most 4 x 252 fds in flight,
/// below the default RLIMIT_NOFILE that bounds them per user.
pub const BATCH_WINDOW: usize = 4;
/// The most a version probe may print.
const PROBE_OUTPUT_LIMIT: usize = 64 * 1024;

/// What the pre-copy carried, kept until the pause compares against it.
#[derive(Default)]
pub struct Precopied {
    /// Each terminal's change count as pre-copied, by pane id.
    pub screens: HashMap<PaneId, u64>,
    /// The last event sequence number the pre-copy carried.
    pub events: u64,
    /// Each pane as pre-copied (panes with input acks are not).
    pub drafts: HashMap<PaneId, PaneDraft>,
}

/// The fds of the blackout in batches: batch 0 rode with the manifest;
/// `next` is the first not sent, `acked` counts those the new side
/// confirmed (in order).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Transfer {
    pub batches: Vec<Vec<(FdName, RawFd)>>,
    pub next: usize,
    pub acked: usize,
}

pub enum Step {
    /// Running `BINARY version --json`, reading its stdout.
    Probing {
        output: Vec<u8>,
        /// `--mode restore`: the probe decides whether to restart in place.
        restore: bool,
        /// For messages.
        binary: String,
    },
    /// The new server is starting; waiting for its `hello`, which must
    /// name the handoff version its probe did.
    Starting { child: u32, handoff: u32 },
    /// Flushing the snapshot before the pre-copy.
    Saving,
    /// The pre-copy went out, still serving; waiting for its ack.
    Precopying(Precopied),
    /// The panes changed since the pre-copy are held and went again (the
    /// delta), still serving; waiting for its ack.
    Settling(Precopied),
    /// Paused; fd batches going out, a few ahead of the acks.
    Transferring(Transfer),
    /// Every fd batch sent; waiting for the last acks and `imported`.
    Importing(Transfer),
    /// `commit` sent; waiting for `committed`.
    Committing,
    /// Committed: the new server serves; we keep paused copies until the
    /// window ends, and take everything back if it dies meanwhile.
    Probation {
        /// The new server answered the upgrade's caller itself.
        answered: bool,
    },
    /// Rolled back, taken back, restarting in place, or handed over.
    Done,
}

impl Step {
    /// Before the commit point: the deadline is a stall limit then.
    pub fn before_commit(&self) -> bool {
        !matches!(self, Step::Probation { .. } | Step::Done)
    }

    /// The phase name in reports and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Probing { .. } => "preflight",
            Step::Starting { .. } => "prepare",
            Step::Saving => "save",
            Step::Precopying(_) => "precopy",
            Step::Settling(_) => "settle",
            Step::Transferring(_) => "transfer",
            Step::Importing(_) => "import",
            Step::Committing => "commit",
            Step::Probation { .. } => "probation",
            Step::Done => "done",
        }
    }

    /// What this step waits for, for the message when it never comes.
    fn awaits(&self) -> String {
        match self {
            Step::Probing { binary, .. } => {
                format!("the version probe `{binary} version --json` did not finish")
            }
            Step::Starting { child, .. } => {
                format!("the new server (pid {child}) did not say hello")
            }
            Step::Saving => "the snapshot save before the handoff did not finish".into(),
            Step::Precopying(_) => "the new server did not take the pre-copy".into(),
            Step::Settling(_) => "the new server did not take the busy panes sent again".into(),
            Step::Transferring(_) | Step::Importing(_) => {
                "the new server did not import the handed-over fds".into()
            }
            Step::Committing => "the new server did not confirm the commit".into(),
            Step::Probation { .. } | Step::Done => "the upgrade did not end".into(),
        }
    }
}

pub enum Input {
    /// Bytes the version probe printed.
    ProbeOutput(Vec<u8>),
    /// The version probe closed its output.
    ProbeEnded,
    /// The new server was started (the result of [`Action::SpawnNewServer`]),
    /// speaking `handoff` (as its probe said).
    Spawned { child: u32, handoff: u32 },
    /// A control message from the new side.
    Msg(Control),
    /// The new side sent something that is not a control message.
    BadMessage(String),
    /// The handoff socket failed or closed.
    ChannelLost(String),
    /// No save is in flight any more (or none was needed).
    SaveFinished,
    /// The pre-copy went out (the result of [`Action::SendPrecopy`]).
    PrecopySent(Precopied),
    /// The delta went out, or none was needed (`sent` false): the result
    /// of [`Action::SendDelta`], with the pre-copy brought up to date.
    DeltaSent { precopied: Precopied, sent: bool },
    /// The manifest and batch 0 went out (the result of [`Action::Pause`]).
    ManifestSent(Transfer),
    /// Batches before `next` are sent (the result of [`Action::SendBatches`]).
    BatchesSent { next: usize },
    /// An action failed.
    Failed(String),
    /// The new process exited: `clean` for code 0; `what` says how.
    ChildExited { clean: bool, what: String },
    /// No progress for `took_ms` (the stall limit) before the commit, or
    /// probation is over.
    Deadline { took_ms: u128 },
    /// SIGTERM or SIGINT while the upgrade runs.
    Stop,
}

/// Why the old server lets go for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandOver {
    /// Probation ended with the new server serving.
    ProbationOver,
    /// The new server exited cleanly in probation: a requested stop.
    NewServerStopped,
    /// We were asked to stop in probation: pass it on to the new server.
    StopRequested,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Record the time since the last phase ended under this name.
    FinishPhase(&'static str),
    /// Start the new binary (which said it is ptyd `version`, speaking
    /// `handoff` and reading ours) on a fresh socketpair; feeds `Spawned`.
    SpawnNewServer { version: String, handoff: u32 },
    /// `--mode restore`: answer, save, stop and exec the new binary here.
    RestartInPlace,
    /// The peer's uid (SO_PEERCRED) must be ours.
    CheckPeer,
    /// A fault point (tests only).
    Fault(&'static str),
    /// Flush the snapshot; feeds `SaveFinished` when none is in flight.
    Save,
    /// Copy every terminal and pane ahead; feeds `PrecopySent`.
    SendPrecopy,
    /// Hold the panes changed since the pre-copy and send them again;
    /// feeds `DeltaSent`.
    SendDelta(Precopied),
    /// The blackout starts: pause, capture against what was pre-copied,
    /// send the manifest with batch 0; feeds `ManifestSent`.
    Pause(Precopied),
    /// Send batches `from..to` (those after `acked` may wait for room);
    /// feeds `BatchesSent`.
    SendBatches {
        from: usize,
        to: usize,
        acked: usize,
    },
    /// Tell the new side to go live.
    SendCommit,
    /// The commit point passed: sources out of the poll, probation starts.
    Committed { blackout_us: u64 },
    /// Take the handoff socket out of the poll.
    DeregisterChannel,
    /// Log something that changes nothing.
    Log(&'static str, String),
    /// Before the commit: kill the new process, serve on, answer the
    /// caller with the cause. Ends the attempt.
    Rollback { reason: String, phase: &'static str },
    /// In probation, the new server died: register everything again and
    /// serve on. Ends the attempt.
    TakeBack { reason: String, answer_caller: bool },
    /// Let go for good: the loop ends and the server releases its copies.
    HandOver(HandOver),
}

impl std::fmt::Debug for Precopied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Precopied({} panes)", self.screens.len())
    }
}

impl PartialEq for Precopied {
    /// Only for the tests' comparisons of actions.
    fn eq(&self, other: &Precopied) -> bool {
        self.screens == other.screens && self.events == other.events
    }
}

impl Eq for Precopied {}

fn rollback(step: &Step, reason: String) -> (Step, Vec<Action>) {
    let phase = step.name();
    (Step::Done, vec![Action::Rollback { reason, phase }])
}

/// The next batches to send, if the window has room: up to
/// [`BATCH_WINDOW`] ahead of the acks.
fn send_more(t: &Transfer) -> Option<Action> {
    let to = t.batches.len().min(t.acked + BATCH_WINDOW);
    (t.next < to).then_some(Action::SendBatches {
        from: t.next,
        to,
        acked: t.acked,
    })
}

/// Transferring becomes Importing once every batch went out.
fn transfer_step(t: Transfer, was_importing: bool) -> Step {
    if was_importing || t.next == t.batches.len() {
        Step::Importing(t)
    } else {
        Step::Transferring(t)
    }
}

/// One edge of the sequence: the step after `input`, and what to do.
pub fn on(step: Step, input: Input) -> (Step, Vec<Action>) {
    match step {
        Step::Done => (Step::Done, vec![]),
        Step::Probing {
            output,
            restore,
            binary,
        } => on_probing(output, restore, binary, input),
        Step::Starting { child, handoff } => on_starting(child, handoff, input),
        Step::Saving => on_saving(input),
        Step::Precopying(p) => on_precopying(p, input),
        Step::Settling(p) => on_settling(p, input),
        Step::Transferring(t) => on_transfer(t, false, input),
        Step::Importing(t) => on_transfer(t, true, input),
        Step::Committing => match input {
            Input::Msg(Control::Committed { blackout_us }) => (
                Step::Probation { answered: false },
                vec![Action::Committed { blackout_us }],
            ),
            input => before_commit(Step::Committing, input),
        },
        Step::Probation { answered } => on_probation(answered, input),
    }
}

fn on_probing(output: Vec<u8>, restore: bool, binary: String, input: Input) -> (Step, Vec<Action>) {
    let mut step = Step::Probing {
        output,
        restore,
        binary,
    };
    match input {
        Input::ProbeOutput(bytes) => {
            let Step::Probing { output, .. } = &mut step else {
                return (step, vec![]);
            };
            if output.len() >= PROBE_OUTPUT_LIMIT {
                return rollback(&step, "the version probe printed too much".into());
            }
            output.extend_from_slice(&bytes);
            (step, vec![])
        }
        Input::ProbeEnded => match step {
            Step::Probing {
                output,
                restore,
                binary,
            } => after_probe(output, restore, binary),
            step => (step, vec![]),
        },
        // The probe's own exit; its output decides.
        Input::ChildExited { .. } => (step, vec![]),
        Input::Spawned { child, handoff } => (Step::Starting { child, handoff }, vec![]),
        input => before_commit(step, input),
    }
}

fn on_starting(child: u32, handoff: u32, input: Input) -> (Step, Vec<Action>) {
    let step = Step::Starting { child, handoff };
    match input {
        Input::Msg(Control::Hello {
            handoff_version,
            server_version,
            pid,
        }) => {
            if handoff_version != handoff || pid != child {
                let why = format!(
                    "the new server (pid {pid}, ptyd {server_version}) is not the process we started or speaks handoff version {handoff_version}"
                );
                return rollback(&step, why);
            }
            (
                Step::Saving,
                vec![
                    Action::CheckPeer,
                    Action::FinishPhase("prepare"),
                    Action::Fault("old-after-hello"),
                    Action::Save,
                ],
            )
        }
        input => before_commit(step, input),
    }
}

fn on_saving(input: Input) -> (Step, Vec<Action>) {
    match input {
        Input::SaveFinished => (
            Step::Saving,
            vec![Action::FinishPhase("save"), Action::SendPrecopy],
        ),
        Input::PrecopySent(p) => (Step::Precopying(p), vec![]),
        input => before_commit(Step::Saving, input),
    }
}

fn on_precopying(p: Precopied, input: Input) -> (Step, Vec<Action>) {
    match input {
        Input::Msg(Control::PrecopyAck) => (
            Step::Settling(Precopied::default()),
            vec![Action::FinishPhase("precopy"), Action::SendDelta(p)],
        ),
        input => before_commit(Step::Precopying(p), input),
    }
}

/// Settling: the delta's result, then its ack; the pause follows.
fn on_settling(p: Precopied, input: Input) -> (Step, Vec<Action>) {
    let pause = |p| {
        (
            Step::Transferring(Transfer::default()),
            vec![Action::FinishPhase("settle"), Action::Pause(p)],
        )
    };
    match input {
        Input::DeltaSent {
            precopied,
            sent: true,
        } => (Step::Settling(precopied), vec![]),
        Input::DeltaSent {
            precopied,
            sent: false,
        } => pause(precopied),
        Input::Msg(Control::DeltaAck) => pause(p),
        input => before_commit(Step::Settling(p), input),
    }
}

/// Transferring and Importing: batches going out and acked, then
/// `imported` once every batch was acked.
fn on_transfer(mut t: Transfer, importing: bool, input: Input) -> (Step, Vec<Action>) {
    match input {
        // The manifest went out (Transferring starts with no batches).
        Input::ManifestSent(sent) if !importing && t.batches.is_empty() => {
            let actions = send_more(&sent).into_iter().collect();
            (transfer_step(sent, false), actions)
        }
        Input::BatchesSent { next } if next >= t.next && next <= t.batches.len() => {
            t.next = next;
            (transfer_step(t, importing), vec![])
        }
        Input::Msg(Control::BatchAck { seq }) => on_batch_ack(t, importing, seq),
        Input::Msg(Control::Imported) if importing && t.acked == t.batches.len() => {
            (Step::Committing, vec![Action::SendCommit])
        }
        input => before_commit(transfer_step(t, importing), input),
    }
}

/// Every other edge before the commit point: a save finishing changes
/// nothing; anything else rolls back.
fn before_commit(step: Step, input: Input) -> (Step, Vec<Action>) {
    let why = match input {
        // Saves finish in every step; only Saving waits for one.
        Input::SaveFinished => return (step, vec![]),
        // The new side is working; the driver pushed the deadline back.
        Input::Msg(Control::Progress) => return (step, vec![]),
        Input::Msg(Control::Abort { reason }) => format!("the new server gave up: {reason}"),
        Input::Msg(msg) => format!("unexpected {msg:?} in phase {}", step.name()),
        Input::BadMessage(e) => format!("the new server sent a bad message: {e}"),
        Input::ChannelLost(e) => {
            format!(
                "the new server's channel failed in phase {}: {e}",
                step.name()
            )
        }
        Input::ChildExited { what, .. } => {
            format!("the new server {what} in phase {}", step.name())
        }
        Input::Deadline { took_ms } => format!(
            "{} within {took_ms} ms without progress (phase {}); on a slow machine give it longer (`ptyd upgrade --timeout 30s`, or upgrade_timeout_ms in config.toml); a binary that never answers is not a working ptyd server",
            step.awaits(),
            step.name()
        ),
        Input::Stop => "the server was asked to stop".into(),
        Input::Failed(e) => e,
        // A result in a step that did not ask for it: a bug here, and
        // before the commit a rollback loses nothing.
        input => format!("internal: {} in phase {}", input.name(), step.name()),
    };
    rollback(&step, why)
}

/// The new side confirmed batch `seq`: only the next unacked one that
/// was sent is acceptable. The window moves on.
fn on_batch_ack(mut t: Transfer, importing: bool, seq: u32) -> (Step, Vec<Action>) {
    if seq as usize != t.acked || t.acked >= t.next {
        let step = transfer_step(t, importing);
        let why = format!(
            "unexpected BatchAck {{ seq: {seq} }} in phase {}",
            step.name()
        );
        return rollback(&step, why);
    }
    t.acked += 1;
    let mut actions = Vec::new();
    if t.acked == t.batches.len() {
        actions.push(Action::Fault("old-after-transfer"));
    }
    actions.extend(send_more(&t));
    (transfer_step(t, importing), actions)
}

impl Input {
    fn name(&self) -> &'static str {
        match self {
            Input::ProbeOutput(_) => "probe output",
            Input::ProbeEnded => "probe end",
            Input::Spawned { .. } => "spawned",
            Input::Msg(_) => "message",
            Input::BadMessage(_) => "bad message",
            Input::ChannelLost(_) => "channel lost",
            Input::SaveFinished => "save finished",
            Input::PrecopySent(_) => "pre-copy sent",
            Input::DeltaSent { .. } => "delta sent",
            Input::ManifestSent(_) => "manifest sent",
            Input::BatchesSent { .. } => "batches sent",
            Input::Failed(_) => "failure",
            Input::ChildExited { .. } => "child exit",
            Input::Deadline { .. } => "deadline",
            Input::Stop => "stop",
        }
    }
}

/// The probe's verdict: restart in place (`--mode restore`), start the
/// new server, or refuse with nothing touched [R0].
fn after_probe(output: Vec<u8>, restore: bool, binary: String) -> (Step, Vec<Action>) {
    let verdict = probe_verdict(&output, restore, &binary);
    let step = Step::Probing {
        output: Vec::new(),
        restore,
        binary,
    };
    match verdict {
        Ok(Action::RestartInPlace) => (Step::Done, vec![Action::RestartInPlace]),
        Ok(spawn) => (step, vec![Action::FinishPhase("preflight"), spawn]),
        Err(why) => rollback(&step, why),
    }
}

fn probe_verdict(output: &[u8], restore: bool, binary: &str) -> Result<Action, String> {
    let probe: serde_json::Value = serde_json::from_slice(output).unwrap_or_default();
    if restore {
        let theirs = probe["snapshot_version"].as_u64();
        let ours = u64::from(crate::persist::snapshot::SNAPSHOT_VERSION);
        if theirs.is_some_and(|v| v >= ours) {
            return Ok(Action::RestartInPlace);
        }
        return Err(format!(
            "{binary} reads snapshot version {}, older than this server's {ours}; it could not restore the session",
            theirs.map_or("unknown".to_string(), |v| v.to_string())
        ));
    }
    let theirs = probe["handoff_version"].as_u64();
    let version = probe["server_version"].as_str().unwrap_or("unknown");
    // A newer build may still read ours (N-1): it says so.
    let ours = u64::from(HANDOFF_VERSION);
    let reads_ours = probe["handoff_accepts"]
        .as_array()
        .and_then(|r| Some((r.first()?.as_u64()?, r.get(1)?.as_u64()?)))
        .is_some_and(|(from, to)| from <= ours && ours <= to);
    match theirs {
        Some(v) if v == ours || reads_ours => Ok(Action::SpawnNewServer {
            version: version.to_string(),
            handoff: v as u32,
        }),
        Some(v) => Err(format!(
            "{binary} (ptyd {version}) speaks handoff version {v}, this server (ptyd {}) speaks {HANDOFF_VERSION}; use `ptyd upgrade --mode restore`, or a compatible binary",
            crate::protocol::SERVER_VERSION
        )),
        None => Err(format!(
            "{binary} did not answer `version --json` as a ptyd binary does"
        )),
    }
}

/// After the commit point the new server owns everything: nothing it says
/// can roll back any more; only its death takes back [T].
fn on_probation(answered: bool, input: Input) -> (Step, Vec<Action>) {
    let stay = |actions| (Step::Probation { answered }, actions);
    match input {
        Input::Msg(Control::Answered) => (Step::Probation { answered: true }, vec![]),
        Input::Msg(msg) => stay(vec![Action::Log(
            "upgrade_ignored",
            format!("the new server sent {msg:?} in probation; ignored"),
        )]),
        Input::BadMessage(e) => stay(vec![Action::Log(
            "upgrade_ignored",
            format!("the new server sent a bad message in probation ({e}); ignored"),
        )]),
        // Its exit (SIGCHLD) decides, not its channel.
        Input::ChannelLost(_) => stay(vec![Action::DeregisterChannel]),
        // A clean exit is a requested stop (`server.stop`, SIGTERM): the
        // new server already hung up the panes and removed the socket.
        // Taking back would revive what the user stopped; end here too.
        Input::ChildExited { clean: true, .. } => (
            Step::Done,
            vec![Action::HandOver(HandOver::NewServerStopped)],
        ),
        Input::ChildExited { clean: false, what } => (
            Step::Done,
            vec![Action::TakeBack {
                reason: format!(
                    "the new server {what} during probation; took everything back and serving on"
                ),
                answer_caller: !answered,
            }],
        ),
        Input::Deadline { .. } => (Step::Done, vec![Action::HandOver(HandOver::ProbationOver)]),
        Input::Stop => (Step::Done, vec![Action::HandOver(HandOver::StopRequested)]),
        Input::SaveFinished => stay(vec![]),
        other => stay(vec![Action::Log(
            "upgrade_ignored",
            format!("{} in probation; ignored", other.name()),
        )]),
    }
}

#[cfg(test)]
mod tests;
