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

use super::convert;
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
pub fn run(sock: OwnedFd, paths: NamespacePaths) -> Result<(), String> {
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
        Err(e) => return abort(&sock, e),
    };
    fdpass::send_message(&sock, &Control::PrecopyAck, &[])
        .map_err(|e| format!("acking the pre-copy: {e}"))?;
    let mut screens = Screens::new();
    let received = match receive_deltas(
        &sock,
        &paths,
        fault,
        (&mut shell, &mut prebuilt),
        &mut progress,
    ) {
        Ok(received) => received,
        Err(Failure::Abort(e)) => return abort(&sock, e),
        Err(Failure::Plain(e)) => return Err(e),
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
        Err(Failure::Abort(e)) => return abort(&sock, e),
        Err(Failure::Plain(e)) => return Err(e),
    };
    let imported_from = crate::sys::monotonic_usec();
    let mut server = match rebuild(manifest, &mut fds, shell, prebuilt, &mut screens, events)
        .and_then(|mut s| s.register_sources().map(|()| s))
    {
        Ok(s) => s,
        Err(e) => return abort(&sock, e),
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
    serve_after_commit(server, sock)
}

/// The hello to the old side, once the fault points and the handoff
/// version it speaks are taken from the environment (builds before the
/// variable speak 2); refused (and the old side told) when this build
/// cannot read that version.
fn say_hello(sock: &OwnedFd, fault: Option<&str>) -> Result<(), String> {
    let speaks = std::env::var(crate::handoff::manifest::SPEAKS_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(2);
    // SAFETY: single-threaded here; nothing else reads the environment.
    unsafe {
        std::env::remove_var(fault::FAULT_ENV);
        std::env::remove_var(crate::handoff::manifest::SPEAKS_ENV);
    }

    fault::check(fault, "new-before-hello");
    let hello = Control::Hello {
        handoff_version: HANDOFF_VERSION,
        server_version: crate::protocol::SERVER_VERSION.to_string(),
        pid: std::process::id(),
    };
    fdpass::send_message(sock, &hello, &[]).map_err(|e| format!("sending hello: {e}"))?;
    if !crate::handoff::manifest::accepts(speaks) {
        return abort(
            sock,
            format!(
                "the old server speaks handoff version {speaks}, this build reads {}..={HANDOFF_VERSION}; use `ptyd upgrade --mode restore`",
                crate::handoff::manifest::HANDOFF_ACCEPTS_FROM
            ),
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
) -> Result<Received, Failure> {
    loop {
        spin_until_readable(sock, BLACKOUT_SPIN);
        match recv(sock).map_err(Failure::Plain)? {
            (Control::Delta { bytes }, fds) => {
                let Some(memfd) = fds.into_iter().next() else {
                    return Err(Failure::Abort(
                        "the delta message carried no fd".to_string(),
                    ));
                };
                read_memfd(memfd, bytes)
                    .and_then(|data| apply_delta(shell, prebuilt, &data, sock, progress))
                    .map_err(Failure::Abort)?;
                fdpass::send_message(sock, &Control::DeltaAck, &[])
                    .map_err(|e| Failure::Plain(format!("acking the delta: {e}")))?;
            }
            (msg, fds) => return receive_manifest(paths, fault, msg, fds).map_err(Failure::Abort),
        }
    }
}

/// The pre-copy comes before the pause: decoding it, and building the
/// server shell (poll, signals, disk thread, log) around the listener and
/// lock it carries and every pane with its fds, is time the old server
/// still serves.
fn receive_precopy(
    sock: &OwnedFd,
    paths: NamespacePaths,
    progress: &mut Progress,
) -> Result<Prepared, String> {
    let (msg, fds) = recv(sock).map_err(|e| format!("receiving the pre-copy: {e}"))?;
    let Control::Precopy {
        bytes,
        ids,
        batches,
    } = msg
    else {
        return Err(format!("expected the pre-copy, got {msg:?}"));
    };
    let (memfd, named) = split_fds("pre-copy", ids, fds)?;
    let mut named: HashMap<FdName, OwnedFd> = named.collect();
    for seq in 1..=batches {
        let batch = fdpass::recv_batch_timeout::<FdName>(sock, STEP_TIMEOUT).map_err(|e| {
            format!(
                "receiving the pre-copy's fd batch {seq}: {}",
                with_fd_hint(&e)
            )
        })?;
        if batch.seq != seq {
            return Err(format!(
                "pre-copy fd batch {} arrived, expected {seq}",
                batch.seq
            ));
        }
        for (id, fd) in batch.fds {
            if named.insert(id, fd).is_some() {
                return Err(format!("the pre-copy carried fd {id} twice"));
            }
        }
    }
    let data = read_memfd(memfd, bytes)?;
    progress.tick(sock);
    let mut lines = json_lines(&data);
    let head: PrecopyHead = match lines.next() {
        Some(line) => {
            serde_json::from_slice(line).map_err(|e| format!("decoding the pre-copy: {e}"))?
        }
        None => return Err("the pre-copy is empty".into()),
    };
    let events = (head.event_last_seq, head.event_ring);
    let events_reached = head.events_reached;
    // The history log the panes' lines are in (a server before it sends
    // none: the lines are in each terminal's encoding).
    let log = named.remove(&FdName::HistoryLog).map(std::fs::File::from);
    let mut shell = assemble_shell(&mut named, paths)?;
    if let Some(log) = &log {
        let copy = log
            .try_clone()
            .map_err(|e| format!("keeping the history log: {e}"))?;
        shell.keeper.adopt_log(copy);
    }
    // Pane by pane, so a big pre-copy under load keeps reporting progress.
    let now = Instant::now();
    let mut prebuilt = HashMap::with_capacity(head.panes as usize);
    for line in lines {
        let mut decoded = decode_pane_line(line, log.as_ref())
            .map_err(|e| format!("decoding the pre-copy: {e}"))?;
        let (id, changes) = (decoded.rt.id, decoded.rt.screen_changes);
        let (raw, history) = (decoded.raw.take(), decoded.history.take());
        prebuild_pane(&mut shell, decoded.rec, decoded.rt, now, &mut named)?;
        seed_checkpoint_cache(&mut shell, id, raw, history);
        prebuilt.insert(id, changes);
        progress.tick(sock);
    }
    if let Some(id) = named.keys().next() {
        return Err(format!(
            "the pre-copy carried an unexpected fd {:?}",
            id.to_string()
        ));
    }
    Ok(Prepared {
        shell,
        prebuilt,
        events,
        events_reached,
        batches,
        bytes,
    })
}

/// A pre-copy or delta line, decoded.
struct DecodedPane {
    rec: PaneRecord,
    /// With its terminal, history lines put back from the log.
    rt: PaneRuntime,
    /// The terminal's JSON as it came (for the checkpoint cache: see
    /// `seed_checkpoint_cache`).
    raw: Option<Box<RawValue>>,
    /// Where its history lines are in the log, and each chunk's line count.
    history: Option<(HistoryRef, Vec<u32>)>,
}

/// A pre-copy or delta line: the pane's record and runtime state with its
/// terminal decoded, its history lines read from the history log `log`
/// where the encoding left them out.
fn decode_pane_line(line: &[u8], log: Option<&std::fs::File>) -> Result<DecodedPane, String> {
    let (rec, mut rt): PrecopyPane<Box<RawValue>> =
        serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let raw = rt.screen.take();
    let mut screen = match &raw {
        Some(raw) => Some(serde_json::from_str::<Terminal>(raw.get()).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut history = None;
    if let (Some(reference), Some(term)) = (rt.history.take(), &mut screen) {
        let log = log.ok_or_else(|| {
            format!(
                "pane {}'s history lines are in a history log that did not come",
                PaneId::new(rt.id)
            )
        })?;
        let (lines, counts) = super::super::history_log::read_lines(log, &reference)
            .map_err(|e| format!("pane {}: {e}", PaneId::new(rt.id)))?;
        term.restore_history(lines);
        history = Some((reference, counts));
    }
    Ok(DecodedPane {
        rec,
        rt: rt.with_screen(screen),
        raw,
        history,
    })
}

/// The old server's encoding of a pane's terminal, kept as the first entry
/// of the crash checkpoints' cache (`KeeperLink::screen_json`), and its
/// history lines' place in the log: without them, the first checkpoint
/// after an upgrade encodes every terminal and every history line again in
/// one loop turn (a stall of a second at 1,000 panes). Only a terminal
/// nothing changed since it was decoded (its count is still 0) is what the
/// old encoding says.
fn seed_checkpoint_cache(
    shell: &mut Server,
    id: u64,
    raw: Option<Box<RawValue>>,
    history: Option<(HistoryRef, Vec<u32>)>,
) {
    if let (Some(raw), Some(pane)) = (raw, shell.panes.get(&id))
        && pane.screen().changes() == 0
    {
        let history = history.as_ref().map(|(r, c)| (r, c.as_slice()));
        shell.keeper.seed_screen(id, pane.screen(), raw, history);
    }
}

/// The non-empty lines of a JSON-lines memfd.
fn json_lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|&b| b == b'\n').filter(|l| !l.is_empty())
}

/// The delta: the panes that changed since the pre-copy (the old side
/// holds them now), rebuilt around the fds and token their pre-built
/// versions have (registered already, so nothing changes in the poll);
/// a terminal not sent again is the pre-built one.
fn apply_delta(
    shell: &mut Server,
    prebuilt: &mut HashMap<u64, u64>,
    data: &[u8],
    sock: &OwnedFd,
    progress: &mut Progress,
) -> Result<(), String> {
    let now = Instant::now();
    let no_conns = HashMap::new();
    let mut screens = Screens::new();
    let log = shell.keeper.log_file();
    for line in json_lines(data) {
        let DecodedPane {
            rec,
            rt,
            raw,
            history,
        } = decode_pane_line(line, log.as_ref()).map_err(|e| format!("decoding the delta: {e}"))?;
        let id = rt.id;
        let (Some(changes), Some(mut old)) = (prebuilt.get(&id).copied(), shell.panes.remove(&id))
        else {
            return Err(format!(
                "the delta carries pane {}, which was not pre-copied",
                PaneId::new(id)
            ));
        };
        let fds = old.take_fds();
        let ring = old.take_ring();
        let token = old.token();
        screens.insert(id, (changes, old.into_screen()));
        let new_changes = rt.screen_changes;
        let mut pane = convert::pane_from_runtime(rec, rt, token, now, &no_conns, &mut screens)?;
        screens.clear();
        pane.put_fds(fds);
        // The same shared output ring (nobody reads the pane now: the old
        // side holds it, we read only after the commit), so what we read
        // is where a take-back or a crash replacement looks for it.
        if let Some(ring) = ring {
            pane.set_ring(ring);
        }
        shell.panes.insert(id, Box::new(pane));
        seed_checkpoint_cache(shell, id, raw, history);
        prebuilt.insert(id, new_changes);
        progress.tick(sock);
    }
    Ok(())
}

/// Tells the old side we are still working, at most every
/// [`PROGRESS_EVERY`]: its deadline counts from the last sign of progress.
struct Progress {
    last: Instant,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            last: Instant::now(),
        }
    }

    fn tick(&mut self, sock: &OwnedFd) {
        if self.last.elapsed() >= PROGRESS_EVERY {
            self.last = Instant::now();
            let _ = fdpass::send_message(sock, &Control::Progress, &[]);
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
) -> Result<Received, String> {
    let Control::Manifest {
        bytes,
        fd_count,
        ids,
        timings,
        pause_started_mono_us,
    } = msg
    else {
        return Err(format!("expected the manifest, got {msg:?}"));
    };
    // Both processes read the same system-wide CLOCK_MONOTONIC.
    let manifest_at = crate::sys::monotonic_usec();
    let (memfd, named) = split_fds("manifest", ids, fds)?;
    let first_batch = named.collect();
    let data = read_memfd(memfd, bytes)?;
    let manifest: Manifest =
        serde_json::from_slice(&data).map_err(|e| format!("decoding the manifest: {e}"))?;
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
        return Err(reason);
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

/// An error of the new side: `Abort` also tells the old side why.
enum Failure {
    Abort(String),
    Plain(String),
}

/// Receives every fd batch of the blackout (batch 0 came with the
/// manifest), each checked against the manifest's list and acked. Returns
/// the fds by name and how many batches there were.
fn import_fds(
    sock: &OwnedFd,
    manifest: &Manifest,
    first_batch: Vec<(FdName, OwnedFd)>,
    fault: Option<&str>,
) -> Result<(HashMap<FdName, OwnedFd>, u32), Failure> {
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
                    Failure::Plain(format!("receiving fd batch {seq}: {}", with_fd_hint(&e)))
                })?
            }
        };
        if batch.seq != seq {
            let why = format!("fd batch {} arrived, expected {seq}", batch.seq);
            return Err(Failure::Abort(why));
        }
        for (id, fd) in batch.fds {
            if !expected.contains(&id) || received.insert(id, fd).is_some() {
                let why = format!(
                    "fd {:?} is not in the manifest or came twice",
                    id.to_string()
                );
                return Err(Failure::Abort(why));
            }
        }
        fdpass::send_message(sock, &Control::BatchAck { seq }, &[])
            .map_err(|e| Failure::Plain(format!("acking batch {seq}: {e}")))?;
        seq += 1;
        fault::check(fault, "new-mid-batches");
    }
    Ok((received, seq))
}

/// Reports `imported` and waits for the old side's `commit`: the decision
/// to go live stays with the server that can still roll back.
fn commit_handshake(sock: &OwnedFd, server: &mut Server) -> Result<(), String> {
    let go = fdpass::send_message(sock, &Control::Imported, &[])
        .map_err(|e| e.to_string())
        .and_then(|()| recv(sock));
    match go {
        Ok((Control::Commit, _)) => Ok(()),
        Ok((Control::Abort { reason }, _)) => {
            Err(format!("the old server aborted the upgrade: {reason}"))
        }
        Ok((other, _)) => Err(format!("expected commit, got {other:?}")),
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
) -> Result<(OwnedFd, impl Iterator<Item = (FdName, OwnedFd)>), String> {
    if fds.len() != ids.len() + 1 {
        return Err(format!(
            "the {what} message names {} fds but carries {}",
            ids.len() + 1,
            fds.len()
        ));
    }
    let mut fds = fds.into_iter();
    let memfd = fds
        .next()
        .ok_or_else(|| format!("the {what} message carried no fd"))?;
    Ok((memfd, ids.into_iter().zip(fds)))
}

fn spin_until_readable(sock: &OwnedFd, spin: Duration) {
    let until = Instant::now() + spin;
    while !fdpass::wait_readable(sock, Duration::ZERO) && Instant::now() < until {
        std::thread::yield_now();
    }
}

fn recv(sock: &OwnedFd) -> Result<(Control, Vec<OwnedFd>), String> {
    if !fdpass::wait_readable(sock, STEP_TIMEOUT) {
        return Err(format!(
            "no word from the old server in {} s",
            STEP_TIMEOUT.as_secs()
        ));
    }
    let (data, fds) = fdpass::recv_message(sock).map_err(|e| with_fd_hint(&e))?;
    let msg = serde_json::from_slice(&data)
        .map_err(|e| format!("bad message from the old server: {e}"))?;
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

fn abort(sock: &OwnedFd, reason: String) -> Result<(), String> {
    let _ = fdpass::send_message(
        sock,
        &Control::Abort {
            reason: reason.clone(),
        },
        &[],
    );
    Err(reason)
}

/// The whole content of a memfd the old side wrote, checked against the
/// size it announced before anything is allocated: the size is a number
/// from the peer, and `with_capacity` of a huge one aborts the process.
pub(in crate::server) fn read_memfd(memfd: OwnedFd, bytes: u64) -> Result<Vec<u8>, String> {
    let mut file = std::fs::File::from(memfd);
    let size = file
        .metadata()
        .map_err(|e| format!("reading the manifest: {e}"))?
        .len();
    if size != bytes {
        return Err(format!("the manifest has {size} bytes, {bytes} announced"));
    }
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::io::Seek::rewind(&mut file).map_err(|e| format!("reading the manifest: {e}"))?;
    std::io::Read::read_to_end(&mut file, &mut data)
        .map_err(|e| format!("reading the manifest: {e}"))?;
    if data.len() as u64 != bytes {
        return Err(format!(
            "the manifest has {} bytes, {bytes} announced",
            data.len()
        ));
    }
    Ok(data)
}

/// The server around the listener and lock the pre-copy carried, with
/// nothing of the state yet: `rebuild` fills it in from the manifest.
fn assemble_shell(
    named: &mut HashMap<FdName, OwnedFd>,
    paths: NamespacePaths,
) -> Result<Server, String> {
    let mut take = |id: FdName| {
        named
            .remove(&id)
            .ok_or_else(|| format!("the pre-copy carried no {:?} fd", id.to_string()))
    };
    let listener = std::os::unix::net::UnixListener::from(take(FdName::Listener)?);
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listener: {e}"))?;
    let lock = crate::transport::listener::InstanceLock::from_fd(take(FdName::Lock)?);
    // The socket's identity and the history setting come with the manifest.
    Server::assemble(
        mio::Poll::new().map_err(|e| format!("creating poll: {e}"))?,
        paths,
        mio::net::UnixListener::from_std(listener),
        (0, 0),
        lock,
        false,
    )
}

/// Builds a pre-copied pane ahead of the pause, with its terminal, token
/// and fds, registered (nothing is read before we serve), but without
/// input acks (a pane with acks always travels again), into the shell's
/// panes (which owns its fds, whatever happens next). Every fd of the
/// pre-copy must belong to one of them.
fn prebuild_pane(
    shell: &mut Server,
    rec: PaneRecord,
    rt: PaneRuntime,
    now: Instant,
    named: &mut HashMap<FdName, OwnedFd>,
) -> Result<(), String> {
    let id = rt.id;
    if shell.panes.contains_key(&id) {
        return Err(format!(
            "the pre-copy carried pane {} twice",
            PaneId::new(id)
        ));
    }
    let token = shell.alloc_token(Source::Pane(id));
    let mut pane =
        convert::pane_from_runtime(rec, rt, token, now, &HashMap::new(), &mut Screens::new())?;
    convert::attach_pane_fds(shell, &mut pane, named);
    register_pane(shell, &mut pane)?;
    shell.panes.insert(id, Box::new(pane));
    Ok(())
}

fn register_pane(server: &Server, pane: &mut Pane) -> Result<(), String> {
    pane.fds_mut()
        .register(server.poll.registry())
        .map_err(|e| format!("registering pane {}: {e}", pane.public_id()))
}

/// Lets go of a pre-built pane's fds (out of the poll first: epoll tracks
/// the open file, which the old side and the blackout's copies still hold).
fn drop_pane_fds(server: &mut Server, pane: &mut Pane) {
    if let Some(token) = pane.close_fds(server.poll.registry()) {
        server.sources.remove(&token);
    }
}

/// Fills the server shell in from the manifest and the received fds.
fn rebuild(
    mut m: Manifest,
    fds: &mut HashMap<FdName, OwnedFd>,
    mut server: Server,
    mut prebuilt: HashMap<u64, u64>,
    screens: &mut Screens,
    events: (u64, Vec<serde_json::Value>),
) -> Result<Server, String> {
    server.lineage = fds.remove(&FdName::Lineage);
    server.apply_manifest_state(&mut m, events)?;
    let now = Instant::now();
    // Connections first: panes' acks and waits refer to them.
    let conn_map = import_conns(&mut server, std::mem::take(&mut m.conns), fds, now)?;
    let records = std::mem::take(&mut m.snapshot.panes);
    let runtimes = std::mem::take(&mut m.panes);
    let mut ctx = PaneImport {
        fds,
        prebuilt: &mut prebuilt,
        screens,
        conn_map: &conn_map,
        now,
    };
    import_changed_panes(&mut server, records, runtimes, &mut ctx)?;
    adopt_unchanged_panes(&mut server, &m.unchanged_panes, prebuilt)?;
    for w in m.waits {
        let Some(conn) = conn_map.get(&w.conn) else {
            continue;
        };
        let (wait, timeout) = convert::wait_from_runtime(w, *conn)?;
        server.park_wait(wait, timeout);
    }
    server.succession.set_caller(
        m.caller
            .and_then(|c| conn_map.get(&c.conn).map(|conn| (*conn, c.rpc_id))),
    );
    if !fds.is_empty() {
        let names: Vec<String> = fds.keys().map(FdName::to_string).collect();
        return Err(format!("unexpected fds: {names:?}"));
    }
    Ok(server)
}

/// Every handed-over connection with its socket; returns the map from the
/// old server's connection ids to ours.
fn import_conns(
    server: &mut Server,
    conns: Vec<crate::handoff::manifest::ConnRuntime>,
    fds: &mut HashMap<FdName, OwnedFd>,
    now: Instant,
) -> Result<HashMap<usize, ConnId>, String> {
    let mut conn_map = HashMap::new();
    for rt in conns {
        let old_id = rt.id;
        let fd = fds
            .remove(&FdName::Conn(old_id))
            .ok_or_else(|| format!("fd {:?} missing", FdName::Conn(old_id).to_string()))?;
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream
            .set_nonblocking(true)
            .map_err(|e| format!("connection {old_id}: {e}"))?;
        let token = mio::Token(server.next_token);
        server.next_token += 1;
        let stream = mio::net::UnixStream::from_std(stream);
        // A server whose zoom was the tab's carried none per client: the
        // view takes its tab's (the tree is in already).
        let tab_zoom = (rt.attached.as_ref())
            .filter(|a| a.zoom.is_none())
            .and_then(|a| server.tree.tabs.get(&a.tab?))
            .map(|t| t.zoom.is_some());
        let mut conn = convert::conn_from_runtime(rt, token, stream, now)?;
        if let (Some(zoom), Some(v)) = (tab_zoom, conn.tab_view_mut()) {
            v.zoom = zoom;
        }
        server.stale_views |= conn.attachment().is_some_and(|a| a.view.stale);
        server.sources.insert(token, Source::Conn(token.0));
        server.conns.insert(token.0, conn);
        conn_map.insert(old_id, token.0);
    }
    Ok(conn_map)
}

/// What building the changed panes draws on.
struct PaneImport<'a> {
    fds: &'a mut HashMap<FdName, OwnedFd>,
    prebuilt: &'a mut HashMap<u64, u64>,
    screens: &'a mut Screens,
    conn_map: &'a HashMap<usize, ConnId>,
    now: Instant,
}

/// The panes that changed since the pre-copy (or came after it), built
/// again from the manifest, with the pre-copied terminal if that did not
/// change; their pre-built versions let go of their fds.
fn import_changed_panes(
    server: &mut Server,
    records: Vec<PaneRecord>,
    runtimes: Vec<PaneRuntime>,
    ctx: &mut PaneImport,
) -> Result<(), String> {
    let mut by_id: HashMap<u64, PaneRecord> = crate::persist::tree::pane_records_strict(records)
        .map_err(|e| format!("manifest snapshot: {e}"))?
        .into_iter()
        .map(|(id, rec)| (id.get(), rec))
        .collect();
    for rt in runtimes {
        let id = rt.id;
        let rec = by_id
            .remove(&id)
            .ok_or_else(|| format!("pane {} has no record", PaneId::new(id)))?;
        let token = match ctx
            .prebuilt
            .remove(&id)
            .and_then(|changes| Some((changes, server.panes.remove(&id)?)))
        {
            Some((changes, mut pane)) => {
                drop_pane_fds(server, &mut pane);
                let token = pane.token();
                ctx.screens.insert(id, (changes, pane.into_screen()));
                token
            }
            None => server.alloc_token(Source::Pane(id)),
        };
        let mut pane =
            convert::pane_from_runtime(rec, rt, token, ctx.now, ctx.conn_map, ctx.screens)?;
        convert::attach_pane_fds(server, &mut pane, ctx.fds);
        register_pane(server, &mut pane)?;
        server.panes.insert(id, Box::new(pane));
    }
    if let Some((id, _)) = by_id.into_iter().next() {
        return Err(format!(
            "pane {} has a record but no runtime state",
            PaneId::new(id)
        ));
    }
    Ok(())
}

/// The panes named unchanged stay as pre-built (in `server.panes` since
/// the pre-copy); pre-built panes left over were removed since the
/// pre-copy, and let go of their fds.
fn adopt_unchanged_panes(
    server: &mut Server,
    unchanged: &[u64],
    mut prebuilt: HashMap<u64, u64>,
) -> Result<(), String> {
    for &id in unchanged {
        if prebuilt.remove(&id).is_none() {
            return Err(format!(
                "pane {} is named unchanged but was not pre-copied",
                PaneId::new(id)
            ));
        }
    }
    for id in prebuilt.into_keys() {
        if let Some(mut pane) = server.panes.remove(&id) {
            drop_pane_fds(server, &mut pane);
            server.sources.remove(&pane.token());
        }
    }
    Ok(())
}

impl Server {
    /// A keeper started us after a crash (`continuity::keeper`): what the
    /// dead server read since its checkpoint is in the rings.
    fn recover_from_checkpoint(
        &mut self,
        recovery: &crate::handoff::manifest::Recovery,
        events_reached: Option<u64>,
    ) {
        let why = std::env::var(crate::server::continuity::keeper::RECOVERY_ENV)
            .unwrap_or_else(|_| "the server died".into());
        // SAFETY: the disk thread never reads the environment.
        unsafe { std::env::remove_var(crate::server::continuity::keeper::RECOVERY_ENV) };
        // A new process, so a new generation: the checkpoint carries the
        // dead one's, and the keeper knows the replacements it started.
        self.generation =
            (self.generation + 1).max(crate::server::continuity::keeper::generation_floor());
        self.replay_rings(recovery, &why);
        self.number_on_after(events_reached);
    }

    /// Puts the listener and the connections in our poll before the
    /// commit (the panes are registered as they are built: unchanged ones
    /// before the pause), so that the commit itself does not pay an
    /// epoll_ctl per fd. Nothing is read until the loop runs (after
    /// `go_live`), and an edge raised meanwhile waits in the epoll's ready
    /// list: registering reports current readiness too.
    fn register_sources(&mut self) -> Result<(), String> {
        let registry = self.poll.registry();
        registry
            .register(&mut self.listener, LISTENER, Interest::READABLE)
            .map_err(|e| format!("registering the listener: {e}"))?;
        for conn in self.conns.values_mut() {
            registry
                .register(
                    &mut conn.stream,
                    conn.token,
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| format!("registering a connection: {e}"))?;
        }
        Ok(())
    }

    /// The commit: catch up on what arrived during the blackout (every
    /// source goes on the backlog, since the old server may have consumed
    /// edges), and tell the keeper we are current.
    fn go_live(&mut self) {
        let now = Instant::now();
        let panes: Vec<u64> = self.panes.keys().copied().collect();
        for id in &panes {
            self.rearm_pane_timers(*id, now);
        }
        self.backlog
            .extend(panes.iter().map(|id| Source::Pane(*id)));
        self.backlog
            .extend(self.conns.keys().map(|id| Source::Conn(*id)));
        for id in panes {
            self.flush_pane_input(id);
            // An inherited process may have exited during the blackout.
            self.on_pidfd(id);
        }
        // Not settled: the old server may still take everything back.
        self.keeper_serving(false, false);
        self.mark_dirty();
    }

    fn rearm_pane_timers(&mut self, id: u64, now: Instant) {
        use crate::server::timers::TimerKind;
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        if let Some(at) = pane.timeout_at() {
            self.timers.add(at, TimerKind::PaneTimeout(id, pane.run()));
        }
        if let Some(idle) = pane.idle_timeout() {
            self.timers.add(
                (pane.last_output() + idle).max(now),
                TimerKind::PaneIdle(id, pane.run()),
            );
        }
        if let Some(at) = pane.kill_deadline() {
            self.timers.add(at, TimerKind::KillEscalate(id, pane.run()));
        }
    }

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
            err.contains("2 bytes, 18446744073709551615 announced"),
            "{err}"
        );
        let memfd = crate::sys::anonymous_file(c"test", b"{}").unwrap();
        assert_eq!(super::read_memfd(memfd, 2).unwrap(), b"{}");
    }
}
