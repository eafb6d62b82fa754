//! The new side of a live upgrade: `ptyd server` started with
//! `PTYD_HANDOFF_FD`. It runs its part of the sequence before entering the
//! loop, so plain blocking calls with deadlines are right here: it serves
//! nothing until it commits.
//!
//! Its phases, one function each: hello → receive the pre-copy
//! (terminals, panes, events, the listener and lock; decoded, the server
//! shell and every pane built and registered before the pause) → receive
//! the manifest (memfd) → import the fd batches, each acked → rebuild and
//! register every source (reading nothing yet) → imported → the commit
//! handshake → catch up, announce on the lineage pipe → committed → answer
//! the upgrade caller → serve. Nothing after the fds needs the old server,
//! so if it vanishes meanwhile this side serves instead of dying with it.

mod precopy;
mod rebuild;

use super::convert;
use super::error::{UpgradeError, UpgradeErrorKind};
use crate::handoff::fault;
use crate::handoff::fd_name::FdName;
use crate::handoff::fdpass;
use crate::handoff::manifest::{
    Control, HANDOFF_VERSION, HistoryRef, Manifest, PaneRuntime, Phase, PrecopyHead, PrecopyPane,
};
use crate::model::PaneId;
use crate::paths::NamespacePaths;
use crate::persist::snapshot::PaneRecord;
use crate::protocol::events::Event;
use crate::server::clients::connection::ConnId;
use crate::server::panes::pane::Pane;
use crate::server::{LISTENER, Server, Source};
use crate::term::Terminal;
use mio::Interest;
use mio::unix::SourceFd;
use precopy::{Progress, apply_delta, receive_precopy};
use rebuild::rebuild;
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long the new side waits for each message of the old one. The old
/// side's own deadline (10 s by default) is what normally ends a stuck
/// upgrade; this only keeps an orphaned new process from waiting forever.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// From the pre-copy ack on, the old side pauses at once and everything
/// it sends next is inside the blackout: for this long we poll for it
/// without sleeping, since a sleeping process woken on a busy machine may
/// wait milliseconds for a CPU. Longer captures fall back to sleeping.
const BLACKOUT_SPIN: Duration = Duration::from_millis(50);
/// How often a long pre-copy or import tells the old side it progresses.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Pre-copied terminals by pane id, with their change counts.
type Screens = HashMap<u64, (u64, Terminal)>;

/// What the pre-copy built ahead of the pause.
struct Prepared {
    /// The server around the listener and lock, with nothing of the state.
    shell: Server,
    /// Every pre-copied pane's terminal change count as pre-copied; the
    /// panes themselves, built and registered, are in `shell.panes`.
    prebuilt: HashMap<u64, u64>,
    /// The event log as pre-copied: last sequence number and ring.
    events: (u64, Vec<serde_json::Value>),
    /// A crash checkpoint's last event number reached (see
    /// `PrecopyHead::events_reached`).
    events_reached: Option<u64>,
    /// Fd batches the pre-copy took besides its own message.
    batches: u32,
    /// The pre-copy memfd's size, for the report.
    bytes: u64,
}

/// The manifest as received, with its first fd batch.
struct Received {
    manifest: Manifest,
    first_batch: Vec<(FdName, OwnedFd)>,
    timings: Vec<Phase>,
    pause_started_mono_us: u64,
    manifest_at: u64,
    /// The manifest memfd's size, for the report.
    bytes: u64,
}

/// How much the old server's memfds held: the pre-copy (before the pause)
/// and the manifest (inside the blackout).
struct HandoffSizes {
    precopy: u64,
    manifest: u64,
}

/// Runs the import and then serves.
/// `sock` is the channel the old server handed us (checked to be a socket).
pub fn run(sock: OwnedFd, paths: NamespacePaths) -> Result<(), UpgradeError> {
    crate::server::start::ignore_sigxfsz();
    crate::server::continuity::keeper::become_subreaper();
    let fault_spec = fault::from_env();
    let fault = fault_spec.as_deref();
    say_hello(&sock, fault)?;
    let mut progress = Progress::new();
    let Prepared {
        mut shell,
        mut prebuilt,
        events,
        events_reached,
        batches: precopy_batches,
        bytes: precopy_bytes,
    } = match receive_precopy(&sock, paths.clone(), &mut progress) {
        Ok(prepared) => prepared,
        // Said to the old side, whose message would otherwise be only
        // "the peer closed the handoff socket".
        Err(e) => return abort(&sock, UpgradeError::rebuild(e)),
    };
    fdpass::send_message(&sock, &Control::PrecopyAck, &[])
        .map_err(|e| UpgradeError::channel("acking the pre-copy", e))?;
    let mut screens = Screens::new();
    let received = match receive_deltas(
        &sock,
        &paths,
        fault,
        (&mut shell, &mut prebuilt),
        &mut progress,
    ) {
        Ok(received) => received,
        Err(e) => return abort(&sock, e),
    };
    let (timings, pause_started, manifest_at) = (
        received.timings,
        received.pause_started_mono_us,
        received.manifest_at,
    );
    let sizes = HandoffSizes {
        precopy: precopy_bytes,
        manifest: received.bytes,
    };
    let manifest = received.manifest;
    let recovery = manifest.recovery.clone();
    let (mut fds, batches) = match import_fds(&sock, &manifest, received.first_batch, fault) {
        Ok(got) => got,
        Err(e) => return abort(&sock, e),
    };
    let imported_from = crate::sys::monotonic_usec();
    let mut server = match rebuild(manifest, &mut fds, shell, prebuilt, &mut screens, events)
        .and_then(|mut s| s.register_sources().map(|()| s))
    {
        Ok(s) => s,
        Err(e) => return abort(&sock, UpgradeError::rebuild(e)),
    };
    if server.lineage.is_none() {
        server.keeper.drop_screens();
    }
    fault::check(fault, "new-before-imported");
    commit_handshake(&sock, &mut server)?;
    if let Some(recovery) = &recovery {
        server.recover_from_checkpoint(recovery, events_reached);
    }
    fault::check(fault, "new-before-committed");
    let commit_from = crate::sys::monotonic_usec();
    server.go_live();
    let live_at = crate::sys::monotonic_usec();
    let blackout_us = live_at.saturating_sub(pause_started);
    let _ = fdpass::send_message(&sock, &Control::Committed { blackout_us }, &[]);
    fault::check(fault, "new-after-committed");
    let mut phases = timings;
    phases.extend(
        [
            ("capture", pause_started, manifest_at),
            ("transfer", manifest_at, imported_from),
            ("import", imported_from, commit_from),
            ("commit", commit_from, live_at),
        ]
        .map(|(name, from, to)| Phase {
            name: name.into(),
            us: to.saturating_sub(from),
        }),
    );
    // Every fd message, the pre-copy's (before the pause) included.
    if recovery.is_none() {
        server.report_upgrade(phases, blackout_us, 1 + precopy_batches + batches, sizes);
    }
    serve_after_commit(server, sock).map_err(UpgradeError::rebuild)
}

/// The hello to the old side, once the fault points and the handoff
/// version it speaks are taken from the environment (builds before the
/// variable speak 2); refused (and the old side told) when this build
/// cannot read that version.
fn say_hello(sock: &OwnedFd, fault: Option<&str>) -> Result<(), UpgradeError> {
    let speaks = std::env::var(crate::handoff::manifest::SPEAKS_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(2);
    crate::sys::remove_env(fault::FAULT_ENV);
    crate::sys::remove_env(crate::handoff::manifest::SPEAKS_ENV);

    fault::check(fault, "new-before-hello");
    let hello = Control::Hello {
        handoff_version: HANDOFF_VERSION,
        server_version: crate::protocol::SERVER_VERSION.to_string(),
        pid: std::process::id(),
    };
    fdpass::send_message(sock, &hello, &[])
        .map_err(|e| UpgradeError::channel("sending hello", e))?;
    if !crate::handoff::manifest::accepts(speaks) {
        return abort(
            sock,
            UpgradeError::refused(format!(
                "the old server speaks handoff version {speaks}, this build reads {}..={HANDOFF_VERSION}; use `ptyd upgrade --mode restore`",
                crate::handoff::manifest::HANDOFF_ACCEPTS_FROM
            )),
        );
    }
    Ok(())
}

/// The deltas the old side sends while it still serves, each applied to
/// the pre-built server and panes and acked, until the manifest comes.
fn receive_deltas(
    sock: &OwnedFd,
    paths: &NamespacePaths,
    fault: Option<&str>,
    (shell, prebuilt): (&mut Server, &mut HashMap<u64, u64>),
    progress: &mut Progress,
) -> Result<Received, UpgradeError> {
    loop {
        spin_until_readable(sock, BLACKOUT_SPIN);
        match recv(sock)? {
            (Control::Delta { bytes }, fds) => {
                let Some(memfd) = fds.into_iter().next() else {
                    return Err(UpgradeError::refused("the delta message carried no fd"));
                };
                let data = read_memfd(memfd, bytes)?;
                apply_delta(shell, prebuilt, &data, sock, progress)
                    .map_err(UpgradeError::rebuild)?;
                fdpass::send_message(sock, &Control::DeltaAck, &[])
                    .map_err(|e| UpgradeError::channel("acking the delta", e))?;
            }
            (msg, fds) => return receive_manifest(paths, fault, msg, fds),
        }
    }
}

/// The manifest message and its memfd, checked against this server:
/// handoff version and namespace. Inside the blackout from here on.
fn receive_manifest(
    paths: &NamespacePaths,
    fault: Option<&str>,
    msg: Control,
    fds: Vec<OwnedFd>,
) -> Result<Received, UpgradeError> {
    let Control::Manifest {
        bytes,
        fd_count,
        ids,
        timings,
        pause_started_mono_us,
    } = msg
    else {
        return Err(UpgradeError::refused(format!(
            "expected the manifest, got {msg:?}"
        )));
    };
    // Both processes read the same system-wide CLOCK_MONOTONIC.
    let manifest_at = crate::sys::monotonic_usec();
    let (memfd, named) = split_fds("manifest", ids, fds)?;
    let first_batch = named.collect();
    let data = read_memfd(memfd, bytes)?;
    let manifest: Manifest = serde_json::from_slice(&data)
        .map_err(|e| UpgradeError::refused(format!("decoding the manifest: {e}")))?;
    fault::check(fault, "new-after-manifest");
    let refused = if !crate::handoff::manifest::accepts(manifest.handoff_version) {
        Some(format!(
            "the old server speaks handoff version {}, this build reads {}..={HANDOFF_VERSION}; use `ptyd upgrade --mode restore`",
            manifest.handoff_version,
            crate::handoff::manifest::HANDOFF_ACCEPTS_FROM,
        ))
    } else if manifest.namespace != paths.namespace {
        Some(format!(
            "manifest is for namespace {:?}, not {:?}",
            manifest.namespace, paths.namespace
        ))
    } else if manifest.fd_ids.len() != fd_count as usize {
        Some("the manifest's fd list and count disagree".into())
    } else {
        None
    };
    if let Some(reason) = refused {
        return Err(UpgradeError::refused(reason));
    }
    Ok(Received {
        manifest,
        first_batch,
        timings,
        pause_started_mono_us,
        manifest_at,
        bytes,
    })
}

/// Receives every fd batch of the blackout (batch 0 came with the
/// manifest), each checked against the manifest's list and acked. Returns
/// the fds by name and how many batches there were.
fn import_fds(
    sock: &OwnedFd,
    manifest: &Manifest,
    first_batch: Vec<(FdName, OwnedFd)>,
    fault: Option<&str>,
) -> Result<(HashMap<FdName, OwnedFd>, u32), UpgradeError> {
    let mut received: HashMap<FdName, OwnedFd> = HashMap::new();
    // A set, not `fd_ids.contains`: that is quadratic, ~8 ms of blackout
    // at 1000 panes (2000 fds).
    let expected: HashSet<FdName> = manifest.fd_ids.iter().copied().collect();
    let mut first_batch = Some(first_batch);
    let mut seq = 0u32;
    while received.len() < manifest.fd_ids.len() || first_batch.is_some() {
        let batch = match first_batch.take() {
            Some(fds) => fdpass::Batch { seq: 0, fds },
            None => {
                spin_until_readable(sock, BLACKOUT_SPIN);
                fdpass::recv_batch_timeout(sock, STEP_TIMEOUT).map_err(|e| {
                    UpgradeError::channel(&format!("receiving fd batch {seq}"), with_fd_hint(&e))
                })?
            }
        };
        if batch.seq != seq {
            let why = format!("fd batch {} arrived, expected {seq}", batch.seq);
            return Err(UpgradeError::refused(why));
        }
        for (id, fd) in batch.fds {
            if !expected.contains(&id) || received.insert(id, fd).is_some() {
                let why = format!(
                    "fd {:?} is not in the manifest or came twice",
                    id.to_string()
                );
                return Err(UpgradeError::refused(why));
            }
        }
        fdpass::send_message(sock, &Control::BatchAck { seq }, &[])
            .map_err(|e| UpgradeError::channel(&format!("acking batch {seq}"), e))?;
        seq += 1;
        fault::check(fault, "new-mid-batches");
    }
    Ok((received, seq))
}

/// Reports `imported` and waits for the old side's `commit`: the decision
/// to go live stays with the server that can still roll back.
fn commit_handshake(sock: &OwnedFd, server: &mut Server) -> Result<(), UpgradeError> {
    let go = fdpass::send_message(sock, &Control::Imported, &[])
        .map_err(|e| UpgradeError::new(UpgradeErrorKind::Channel, e.to_string()))
        .and_then(|()| recv(sock));
    match go {
        Ok((Control::Commit, _)) => Ok(()),
        Ok((Control::Abort { reason }, _)) => Err(UpgradeError::refused(format!(
            "the old server aborted the upgrade: {reason}"
        ))),
        Ok((other, _)) => Err(UpgradeError::refused(format!(
            "expected commit, got {other:?}"
        ))),
        // Everything is here and the old server is gone (or silent past
        // the step deadline): serving is the only way nothing is lost.
        Err(e) => {
            server.log.log(
                "takeover",
                &format!("the old server vanished after the transfer ({e}); taking over"),
            );
            Ok(())
        }
    }
}

/// Committed: tell systemd, answer the caller, and tell the old side it
/// was answered; keep its channel until its probation ends; serve.
fn serve_after_commit(mut server: Server, sock: OwnedFd) -> Result<(), String> {
    crate::service::notify::ready(&format!(
        "serving {} panes (generation {})",
        server.panes.len(),
        server.generation
    ));
    // The old side keeps the channel through its probation; its close tells
    // us it let go for good, and then the caller hears of our success.
    let _ = crate::sys::set_nonblocking_cloexec(sock.as_raw_fd());
    let registered = server.poll.registry().register(
        &mut SourceFd(&sock.as_raw_fd()),
        crate::server::PREDECESSOR,
        Interest::READABLE,
    );
    if let Err(e) = registered {
        server.log.log(
            "upgrade_probation",
            &format!("cannot watch the old server's probation ({e}); answering now"),
        );
        server.keeper_serving(false, true);
        server.answer_upgrade_caller("unwatched");
        return server.serve();
    }
    server.succession.watch(sock);
    server.serve()
}

/// The fds of a message that carries a memfd and then one fd per id:
/// the memfd and the named rest, or an error if the counts disagree.
fn split_fds(
    what: &str,
    ids: Vec<FdName>,
    fds: Vec<OwnedFd>,
) -> Result<(OwnedFd, impl Iterator<Item = (FdName, OwnedFd)>), UpgradeError> {
    if fds.len() != ids.len() + 1 {
        return Err(UpgradeError::refused(format!(
            "the {what} message names {} fds but carries {}",
            ids.len() + 1,
            fds.len()
        )));
    }
    let mut fds = fds.into_iter();
    let memfd = fds
        .next()
        .ok_or_else(|| UpgradeError::refused(format!("the {what} message carried no fd")))?;
    Ok((memfd, ids.into_iter().zip(fds)))
}

fn spin_until_readable(sock: &OwnedFd, spin: Duration) {
    let until = Instant::now() + spin;
    while !fdpass::wait_readable(sock, Duration::ZERO) && Instant::now() < until {
        std::thread::yield_now();
    }
}

fn recv(sock: &OwnedFd) -> Result<(Control, Vec<OwnedFd>), UpgradeError> {
    if !fdpass::wait_readable(sock, STEP_TIMEOUT) {
        return Err(UpgradeError::new(
            UpgradeErrorKind::Channel,
            format!(
                "no word from the old server in {} s",
                STEP_TIMEOUT.as_secs()
            ),
        ));
    }
    let (data, fds) = fdpass::recv_message(sock)
        .map_err(|e| UpgradeError::new(UpgradeErrorKind::Channel, with_fd_hint(&e)))?;
    let msg = serde_json::from_slice(&data)
        .map_err(|e| UpgradeError::channel("bad message from the old server", e))?;
    Ok((msg, fds))
}

/// A receive error, with what to do when fds could not all be taken.
fn with_fd_hint(e: &std::io::Error) -> String {
    // `fdpass` reports MSG_CTRUNC as truncation: the fds did not fit.
    if e.kind() == std::io::ErrorKind::InvalidData && e.to_string().contains("truncated") {
        format!(
            "{e}: this process could not take every fd sent; raise its open-file limit \
             (`ulimit -n`, or LimitNOFILE= in the service unit)"
        )
    } else {
        e.to_string()
    }
}

/// Gives up: tells the old side why, unless the channel to it is what
/// failed (nobody would hear it).
fn abort(sock: &OwnedFd, e: UpgradeError) -> Result<(), UpgradeError> {
    if e.kind != UpgradeErrorKind::Channel {
        let reason = e.message.clone();
        let _ = fdpass::send_message(sock, &Control::Abort { reason }, &[]);
    }
    Err(e)
}

/// The whole content of a memfd the old side wrote, checked against the
/// size it announced before anything is allocated: the size is a number
/// from the peer, and `with_capacity` of a huge one aborts the process.
pub(in crate::server) fn read_memfd(memfd: OwnedFd, bytes: u64) -> Result<Vec<u8>, UpgradeError> {
    let mut file = std::fs::File::from(memfd);
    let size = file
        .metadata()
        .map_err(|e| UpgradeError::io("reading the manifest", e))?
        .len();
    if size != bytes {
        return Err(UpgradeError::refused(format!(
            "the manifest has {size} bytes, {bytes} announced"
        )));
    }
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::io::Seek::rewind(&mut file).map_err(|e| UpgradeError::io("reading the manifest", e))?;
    std::io::Read::read_to_end(&mut file, &mut data)
        .map_err(|e| UpgradeError::io("reading the manifest", e))?;
    if data.len() as u64 != bytes {
        return Err(UpgradeError::refused(format!(
            "the manifest has {} bytes, {bytes} announced",
            data.len()
        )));
    }
    Ok(data)
}

impl Server {
    fn report_upgrade(
        &mut self,
        phases: Vec<Phase>,
        blackout_us: u64,
        batches: u32,
        sizes: HandoffSizes,
    ) {
        let fds: usize = self.panes.values().map(|p| p.fds().pollable()).sum();
        let report = json!({
            "generation": self.generation,
            "new_pid": std::process::id(),
            "server_version": crate::protocol::SERVER_VERSION,
            "from": self.succession.from(),
            "to": {
                "pid": std::process::id(),
                "version": crate::protocol::SERVER_VERSION,
                "binary": self.exe_path,
            },
            "phases": phases.iter().map(|p| json!({ "name": p.name, "ms": p.us as f64 / 1000.0 })).collect::<Vec<_>>(),
            "blackout_ms": blackout_us as f64 / 1000.0,
            "panes": self.panes.len(),
            "clients": self.conns.len(),
            "fds": fds + self.conns.len() + 3,
            "fd_batches": batches,
            "precopy_bytes": sizes.precopy,
            "manifest_bytes": sizes.manifest,
            "finished_unix_ms": crate::clock::unix_ms(),
        });
        self.log.log(
            "upgraded",
            &format!("generation {} serving; {report}", self.generation),
        );
        self.last_upgrade = report.clone();
        self.succession.committed(Instant::now());
        if let serde_json::Value::Object(members) = report {
            self.emit(Event::ServerUpgraded { report: members });
        }
        // The caller is answered once the old server let go (the end of
        // its probation, `answer_upgrade_caller`): until then it may
        // still take everything back, and success would be premature.
    }

    /// Answers the `server.upgrade` that started us, with the report and
    /// how probation ended: `survived` (the old server let go), or
    /// `stopped` (we were stopped during it).
    pub(in crate::server) fn answer_upgrade_caller(&mut self, probation: &str) {
        let Some((conn, rpc_id, probation_ms)) = self.succession.take_caller() else {
            return;
        };
        let mut report = self.last_upgrade.clone();
        report["probation"] = json!(probation);
        report["probation_ms"] = json!(probation_ms);
        self.last_upgrade = report.clone();
        self.respond(conn, &rpc_id, Ok(report));
    }

    /// A pane's inherited process may have exited: its pidfd says so.
    pub(in crate::server) fn on_pidfd(&mut self, id: u64) {
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        let Some(pidfd) = pane.fds().pidfd() else {
            return;
        };
        let exit = match crate::sys::pidfd_exit_status(pidfd) {
            Ok(Some(exit)) => exit,
            Ok(None) => return,
            Err(e) => {
                let msg = format!("reading the exit of pane {}: {e}", pane.public_id());
                self.log.log("pidfd_failed", &msg);
                return;
            }
        };
        let status = crate::server::panes::exit::exit_status(exit);
        if let Some(pane) = self.panes.get_mut(&id)
            && let Some(token) = pane.fds_mut().close_pidfd(self.poll.registry())
        {
            self.sources.remove(&token);
        }
        self.on_pane_exit(id, status);
    }
}

#[cfg(test)]
mod tests {
    /// Handoff messages: a pre-copy or manifest message
    /// announcing a huge size made the new side reserve that much memory
    /// before reading (an abort at `u64::MAX`); now the size is checked
    /// against the file first.
    #[test]
    fn a_memfd_size_that_is_not_the_files_is_an_error_not_an_allocation() {
        let memfd = crate::sys::anonymous_file(c"test", b"{}").unwrap();
        let err = super::read_memfd(memfd, u64::MAX).unwrap_err();
        assert!(
            err.message
                .contains("2 bytes, 18446744073709551615 announced"),
            "{err}"
        );
        let memfd = crate::sys::anonymous_file(c"test", b"{}").unwrap();
        assert_eq!(super::read_memfd(memfd, 2).unwrap(), b"{}");
    }
}
