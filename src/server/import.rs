//! The new side of a live upgrade: `ptyd server` started with
//! `PTYD_HANDOFF_FD`. It runs its part of the sequence before entering the
//! loop, so plain blocking calls with deadlines are right here: it serves
//! nothing until it commits.
//!
//! hello → pre-copy (terminals, events; decoded and acked before the
//! pause) → manifest (memfd) → fd batches, each acked → validate and
//! rebuild, register every source (reading nothing yet) → imported → wait
//! for commit → catch up, announce on the lineage pipe → committed → answer
//! the upgrade caller → serve. Nothing after the fds needs the old server,
//! so if it vanishes meanwhile this side serves instead of dying with it.

use super::connection::{ConnId, Connection};
use super::pane::Pane;
use super::{LISTENER, Server, Source};
use crate::handoff::fdpass;
use crate::handoff::manifest::{Control, HANDOFF_VERSION, Manifest, Phase};
use crate::handoff::{HANDOFF_FD_ENV, fault};
use crate::paths::NamespacePaths;
use crate::persist::snapshot::{LayoutRecord, Snapshot, parse_id};
use crate::workspace::layout::Layout;
use crate::workspace::{Tab, Tree, Workspace};
use mio::Interest;
use mio::unix::SourceFd;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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

/// Runs the import and then serves.
pub fn run(fd: RawFd, paths: NamespacePaths) -> Result<(), String> {
    super::ignore_sigxfsz();
    crate::reaper::become_subreaper();
    // SAFETY: fstat on an fd number we were told is ours; checked before use.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_mode & libc::S_IFMT) != libc::S_IFSOCK {
        return Err(format!(
            "{HANDOFF_FD_ENV}={fd} is not a socket; this mode is only for `ptyd upgrade`"
        ));
    }
    // SAFETY: the old server handed this fd to us alone.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = crate::sys::set_cloexec(sock.as_raw_fd());
    let fault_spec = fault::from_env();
    let fault = fault_spec.as_deref();
    // SAFETY: single-threaded here; nothing else reads the environment.
    unsafe { std::env::remove_var(fault::FAULT_ENV) };

    fault::check(fault, "new-before-hello");
    let hello = Control::Hello {
        handoff_version: HANDOFF_VERSION,
        server_version: crate::protocol::SERVER_VERSION.to_string(),
        pid: std::process::id(),
    };
    fdpass::send_message(&sock, &hello, &[]).map_err(|e| format!("sending hello: {e}"))?;

    // The pre-copy comes before the pause: decoding it, and building the
    // server shell (poll, signals, disk thread, log) around the listener
    // and lock it carries, is time the old server still serves.
    let (msg, fds) = recv(&sock)?;
    let Control::Precopy {
        bytes,
        ids,
        batches,
    } = msg
    else {
        return Err(format!("expected the pre-copy, got {msg:?}"));
    };
    let (memfd, named) = split_fds("pre-copy", ids, fds)?;
    let mut named: HashMap<String, OwnedFd> = named.collect();
    for seq in 1..=batches {
        let batch = fdpass::recv_batch_timeout(&sock, STEP_TIMEOUT)
            .map_err(|e| format!("receiving the pre-copy's fd batch {seq}: {e}"))?;
        if batch.seq != seq {
            return Err(format!(
                "pre-copy fd batch {} arrived, expected {seq}",
                batch.seq
            ));
        }
        for (id, fd) in batch.fds {
            if named.insert(id.clone(), fd).is_some() {
                return Err(format!("the pre-copy carried fd {id:?} twice"));
            }
        }
    }
    let data = read_memfd(memfd, bytes)?;
    let decoded: crate::handoff::manifest::Precopy =
        serde_json::from_slice(&data).map_err(|e| format!("decoding the pre-copy: {e}"))?;
    drop(data);
    let mut precopy: HashMap<u64, (u64, crate::term::Terminal)> = decoded
        .screens
        .into_iter()
        .map(|(id, changes, t)| (id, (changes, t)))
        .collect();
    let precopied_events = (decoded.event_last_seq, decoded.event_ring);
    let mut shell = assemble_shell(&mut named, paths.clone())?;
    let prebuilt = prebuild_panes(&mut shell, decoded.panes, &mut precopy, &mut named)?;
    fdpass::send_message(&sock, &Control::PrecopyAck, &[])
        .map_err(|e| format!("acking the pre-copy: {e}"))?;
    spin_until_readable(&sock, BLACKOUT_SPIN);
    let (msg, fds) = recv(&sock)?;
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
    let mut first_batch = Some(named.collect::<Vec<_>>());
    let manifest = read_manifest(memfd, bytes)?;
    fault::check(fault, "new-after-manifest");
    if manifest.handoff_version != HANDOFF_VERSION {
        return abort(
            &sock,
            format!(
                "manifest version {} is not ours ({HANDOFF_VERSION})",
                manifest.handoff_version
            ),
        );
    }
    if manifest.namespace != paths.namespace {
        return abort(
            &sock,
            format!(
                "manifest is for namespace {:?}, not {:?}",
                manifest.namespace, paths.namespace
            ),
        );
    }
    if manifest.fd_ids.len() != fd_count as usize {
        return abort(&sock, "the manifest's fd list and count disagree".into());
    }

    let mut received: HashMap<String, OwnedFd> = HashMap::new();
    // A set, not `fd_ids.contains`: that is quadratic, ~8 ms of blackout
    // at 1000 panes (2000 fds).
    let expected: HashSet<&str> = manifest.fd_ids.iter().map(String::as_str).collect();
    let mut seq = 0u32;
    while received.len() < manifest.fd_ids.len() || first_batch.is_some() {
        let batch = match first_batch.take() {
            Some(fds) => fdpass::Batch { seq: 0, fds },
            None => {
                spin_until_readable(&sock, BLACKOUT_SPIN);
                fdpass::recv_batch_timeout(&sock, STEP_TIMEOUT)
                    .map_err(|e| format!("receiving fd batch {seq}: {e}"))?
            }
        };
        if batch.seq != seq {
            return abort(
                &sock,
                format!("fd batch {} arrived, expected {seq}", batch.seq),
            );
        }
        for (id, fd) in batch.fds {
            if !expected.contains(id.as_str()) || received.insert(id.clone(), fd).is_some() {
                return abort(
                    &sock,
                    format!("fd {id:?} is not in the manifest or came twice"),
                );
            }
        }
        fdpass::send_message(&sock, &Control::BatchAck { seq }, &[])
            .map_err(|e| format!("acking batch {seq}: {e}"))?;
        seq += 1;
        fault::check(fault, "new-mid-batches");
    }

    let imported_from = crate::sys::monotonic_usec();
    let mut server = match rebuild(
        manifest,
        &mut received,
        &mut precopy,
        precopied_events,
        shell,
        prebuilt,
    )
    .and_then(|mut s| s.register_sources().map(|()| s))
    {
        Ok(s) => s,
        Err(e) => return abort(&sock, e),
    };
    fault::check(fault, "new-before-imported");
    let go = fdpass::send_message(&sock, &Control::Imported, &[])
        .map_err(|e| e.to_string())
        .and_then(|()| recv(&sock));
    match go {
        Ok((Control::Commit, _)) => {}
        Ok((Control::Abort { reason }, _)) => {
            return Err(format!("the old server aborted the upgrade: {reason}"));
        }
        Ok((other, _)) => return Err(format!("expected commit, got {other:?}")),
        // Everything is here and the old server is gone (or silent past
        // the step deadline): serving is the only way nothing is lost.
        Err(e) => server.log.log(
            "takeover",
            &format!("the old server vanished after the transfer ({e}); taking over"),
        ),
    }
    fault::check(fault, "new-before-committed");
    let commit_from = crate::sys::monotonic_usec();
    server.go_live()?;
    let live_at = crate::sys::monotonic_usec();
    let blackout_us = live_at.saturating_sub(pause_started_mono_us);
    let _ = fdpass::send_message(&sock, &Control::Committed { blackout_us }, &[]);
    fault::check(fault, "new-after-committed");
    let mut phases = timings;
    for (name, from, to) in [
        ("capture", pause_started_mono_us, manifest_at),
        ("transfer", manifest_at, imported_from),
        ("import", imported_from, commit_from),
        ("commit", commit_from, live_at),
    ] {
        phases.push(Phase {
            name: name.into(),
            us: to.saturating_sub(from),
        });
    }
    // Every fd message, the pre-copy's (before the pause) included.
    server.report_upgrade(phases, blackout_us, 1 + batches + seq);
    crate::service::notify::ready(&format!(
        "serving {} panes (generation {})",
        server.panes.len(),
        server.generation
    ));
    // Out to the caller before the old side hears it was answered: if we
    // die in probation from here on, the old side must not answer again.
    server.flush_conns();
    let _ = fdpass::send_message(&sock, &Control::Answered, &[]);
    // The old side keeps the channel through its probation; its close tells
    // us it let go for good.
    let _ = crate::sys::set_nonblocking_cloexec(sock.as_raw_fd());
    let _ = server.poll.registry().register(
        &mut SourceFd(&sock.as_raw_fd()),
        super::PREDECESSOR,
        Interest::READABLE,
    );
    server.predecessor = Some(sock);
    server.serve()
}

/// Polls `sock` without sleeping until it is readable or `spin` passed,
/// yielding the CPU to anything else runnable on it meanwhile.
/// The fds of a message that carries a memfd and then one fd per id:
/// the memfd and the named rest, or an error if the counts disagree.
fn split_fds(
    what: &str,
    ids: Vec<String>,
    fds: Vec<OwnedFd>,
) -> Result<(OwnedFd, impl Iterator<Item = (String, OwnedFd)>), String> {
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
    let (data, fds) = fdpass::recv_message(sock).map_err(|e| e.to_string())?;
    let msg = serde_json::from_slice(&data)
        .map_err(|e| format!("bad message from the old server: {e}"))?;
    Ok((msg, fds))
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

fn read_manifest(memfd: OwnedFd, bytes: u64) -> Result<Manifest, String> {
    let data = read_memfd(memfd, bytes)?;
    serde_json::from_slice(&data).map_err(|e| format!("decoding the manifest: {e}"))
}

/// The whole content of a memfd the old side wrote, checked against the
/// size it announced.
fn read_memfd(memfd: OwnedFd, bytes: u64) -> Result<Vec<u8>, String> {
    let mut file = std::fs::File::from(memfd);
    let mut data = Vec::with_capacity(bytes as usize);
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
    named: &mut HashMap<String, OwnedFd>,
    paths: NamespacePaths,
) -> Result<Server, String> {
    let mut take = |id: &str| {
        named
            .remove(id)
            .ok_or_else(|| format!("the pre-copy carried no {id:?} fd"))
    };
    let listener = std::os::unix::net::UnixListener::from(take("listener")?);
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listener: {e}"))?;
    let lock = super::listener::InstanceLock::from_fd(take("lock")?);
    // The socket's identity and the history setting come with the manifest.
    Server::assemble(
        paths,
        mio::net::UnixListener::from_std(listener),
        (0, 0),
        lock,
        false,
    )
}

/// Builds every pre-copied pane ahead of the pause, with its terminal,
/// token and fds, registered (nothing is read before we serve), but
/// without input acks (a pane with acks always travels again). Keyed by
/// pane id, with the terminal's change count as pre-copied. Every fd in
/// `named` must belong to one of them.
fn prebuild_panes(
    shell: &mut Server,
    panes: Vec<(
        crate::persist::snapshot::PaneRecord,
        crate::handoff::manifest::PaneRuntime,
    )>,
    precopy: &mut HashMap<u64, (u64, crate::term::Terminal)>,
    named: &mut HashMap<String, OwnedFd>,
) -> Result<HashMap<u64, (u64, Pane)>, String> {
    let now = Instant::now();
    let no_conns = HashMap::new();
    let mut out = HashMap::with_capacity(panes.len());
    for (rec, rt) in panes {
        let (id, changes) = (rt.id, rt.screen_changes);
        let token = shell.alloc_token(Source::Pane(id));
        let mut pane = Pane::import(rec, rt, token, now, &no_conns, precopy)?;
        attach_pane_fds(shell, &mut pane, named);
        register_pane(shell, &pane)?;
        out.insert(id, (changes, pane));
    }
    if let Some(id) = named.keys().next() {
        return Err(format!("the pre-copy carried an unexpected fd {id:?}"));
    }
    Ok(out)
}

/// Gives `pane` its fds from `fds`, by name.
fn attach_pane_fds(server: &mut Server, pane: &mut Pane, fds: &mut HashMap<String, OwnedFd>) {
    let id = pane.id;
    pane.master = fds
        .remove(&format!("pty:p{id}"))
        .map(crate::pty::PtyMaster::from_fd);
    pane.hung_up_master = fds
        .remove(&format!("ptyhup:p{id}"))
        .map(crate::pty::PtyMaster::from_fd);
    if let Some(pidfd) = fds.remove(&format!("pidfd:p{id}")) {
        pane.pidfd_token = Some(server.alloc_token(Source::Pidfd(id)));
        pane.pidfd = Some(pidfd);
    }
}

fn register_pane(server: &Server, pane: &Pane) -> Result<(), String> {
    let registry = server.poll.registry();
    if let Some(m) = &pane.master {
        registry
            .register(
                &mut SourceFd(&m.raw_fd()),
                pane.token,
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| format!("registering pane {}: {e}", pane.public_id()))?;
    }
    if let (Some(fd), Some(token)) = (&pane.pidfd, pane.pidfd_token) {
        registry
            .register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)
            .map_err(|e| format!("registering pane {}'s pidfd: {e}", pane.public_id()))?;
    }
    Ok(())
}

/// Lets go of a pre-built pane's fds (out of the poll first: epoll tracks
/// the open file, which the old side and the blackout's copies still hold).
fn drop_pane_fds(server: &mut Server, pane: &mut Pane) {
    let registry = server.poll.registry();
    if let Some(m) = pane.master.take() {
        let _ = registry.deregister(&mut SourceFd(&m.raw_fd()));
    }
    if let Some(fd) = pane.pidfd.take() {
        let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
    }
    drop(pane.hung_up_master.take());
    if let Some(token) = pane.pidfd_token.take() {
        server.sources.remove(&token);
    }
}

/// Fills the server shell in from the manifest and the received fds.
fn rebuild(
    m: Manifest,
    fds: &mut HashMap<String, OwnedFd>,
    precopy: &mut HashMap<u64, (u64, crate::term::Terminal)>,
    precopied_events: (u64, Vec<serde_json::Value>),
    mut server: Server,
    mut prebuilt: HashMap<u64, (u64, Pane)>,
) -> Result<Server, String> {
    let mut take = |id: &str| fds.remove(id).ok_or_else(|| format!("fd {id:?} missing"));
    let lineage = take("lineage").ok();
    server.socket_dev_ino = (m.socket_dev, m.socket_ino);
    server.persist.history = m.history;
    server.generation = m.generation;
    server.lineage = lineage;
    server.started_unix_ms = m.started_unix_ms;
    server.exe_path = std::path::PathBuf::from(&m.exe_path);
    server.next_wait_id = m.next_wait_id;
    server.events = match (m.events_after, precopied_events) {
        (None, _) => super::events::EventLog::from_parts(m.event_last_seq, m.event_ring),
        (Some(after), (seq, ring)) if after == seq => {
            let mut log = super::events::EventLog::from_parts(seq, ring);
            log.extend(m.event_last_seq, m.event_ring);
            log
        }
        (Some(after), _) => {
            return Err(format!(
                "the manifest continues the events after {after}, which the pre-copy did not carry"
            ));
        }
    };
    server.persist.revision = m.persist_revision;
    server.tree = tree_from_snapshot(&m.snapshot, &m.unchanged_panes)?;
    server.next_pane_id = m.snapshot.counters.pane;
    let now = Instant::now();

    // Connections first: panes' acks and waits refer to them.
    let mut conn_map: HashMap<usize, ConnId> = HashMap::new();
    for rt in m.conns {
        let old_id = rt.id;
        let stream = std::os::unix::net::UnixStream::from(take(&format!("conn:{old_id}"))?);
        stream
            .set_nonblocking(true)
            .map_err(|e| format!("connection {old_id}: {e}"))?;
        let token = mio::Token(server.next_token);
        server.next_token += 1;
        let conn = Connection::import(rt, token, mio::net::UnixStream::from_std(stream), now)?;
        server.sources.insert(token, Source::Conn(token.0));
        server.conns.insert(token.0, conn);
        conn_map.insert(old_id, token.0);
    }
    let mut records: HashMap<u64, crate::persist::snapshot::PaneRecord> = HashMap::new();
    for rec in m.snapshot.panes {
        let id = parse_id('p', &rec.id).ok_or_else(|| format!("bad pane id {:?}", rec.id))?;
        records.insert(id, rec);
    }
    for rt in m.panes {
        let id = rt.id;
        let rec = records
            .remove(&id)
            .ok_or_else(|| format!("pane p{id} has no record"))?;
        // Changed since the pre-copy: built again, with the pre-copied
        // terminal if that did not change.
        let token = match prebuilt.remove(&id) {
            Some((changes, mut pane)) => {
                drop_pane_fds(&mut server, &mut pane);
                precopy.insert(id, (changes, pane.screen));
                pane.token
            }
            None => server.alloc_token(Source::Pane(id)),
        };
        let mut pane = Pane::import(rec, rt, token, now, &conn_map, precopy)?;
        attach_pane_fds(&mut server, &mut pane, fds);
        register_pane(&server, &pane)?;
        server.panes.insert(id, pane);
    }
    if let Some((id, _)) = records.into_iter().next() {
        return Err(format!("pane p{id} has a record but no runtime state"));
    }
    for id in m.unchanged_panes {
        let (_, pane) = prebuilt
            .remove(&id)
            .ok_or_else(|| format!("pane p{id} is named unchanged but was not pre-copied"))?;
        if server.panes.insert(id, pane).is_some() {
            return Err(format!("pane p{id} is both changed and unchanged"));
        }
    }
    // Removed since the pre-copy.
    for (_, mut pane) in prebuilt.into_values() {
        drop_pane_fds(&mut server, &mut pane);
        server.sources.remove(&pane.token);
    }
    for w in m.waits {
        let Some(conn) = conn_map.get(&w.conn) else {
            continue;
        };
        server.import_wait(*conn, w, now)?;
    }
    server.upgrade_caller = m
        .caller
        .and_then(|c| conn_map.get(&c.conn).map(|conn| (*conn, c.rpc_id)));
    if !fds.is_empty() {
        return Err(format!(
            "unexpected fds: {:?}",
            fds.keys().collect::<Vec<_>>()
        ));
    }
    Ok(server)
}

/// The tree of a live server's snapshot, taken as it is: unlike a restore
/// from disk there is nothing to repair, and any inconsistency aborts.
/// `more_panes` exist besides those with a record in the snapshot.
fn tree_from_snapshot(snap: &Snapshot, more_panes: &[u64]) -> Result<Tree, String> {
    let mut tree = Tree::new();
    let bad = |what: &str| format!("manifest snapshot: bad {what}");
    for ws in &snap.workspaces {
        let id = parse_id('w', &ws.id).ok_or_else(|| bad("workspace id"))?;
        let tabs = ws
            .tabs
            .iter()
            .map(|t| parse_id('t', t).ok_or_else(|| bad("tab id")))
            .collect::<Result<_, _>>()?;
        let active_tab = ws
            .active_tab
            .as_deref()
            .map(|t| parse_id('t', t).ok_or_else(|| bad("tab id")))
            .transpose()?;
        tree.workspaces.insert(
            id,
            Workspace {
                id,
                name: ws.name.clone(),
                tabs,
                active_tab,
            },
        );
    }
    for tab in &snap.tabs {
        let id = parse_id('t', &tab.id).ok_or_else(|| bad("tab id"))?;
        let workspace = parse_id('w', &tab.workspace).ok_or_else(|| bad("workspace id"))?;
        let focus = parse_id('p', &tab.focus).ok_or_else(|| bad("focus"))?;
        let zoom = tab
            .zoom
            .as_deref()
            .map(|z| parse_id('p', z).ok_or_else(|| bad("zoom")))
            .transpose()?;
        let layout = layout_from(&tab.layout).ok_or_else(|| bad("layout"))?;
        tree.tabs.insert(
            id,
            Tab {
                id,
                name: tab.name.clone(),
                workspace,
                layout,
                focus,
                zoom,
            },
        );
    }
    tree.active_workspace = snap
        .active_workspace
        .as_deref()
        .and_then(|w| parse_id('w', w));
    tree.next_workspace_id = snap.counters.workspace;
    tree.next_tab_id = snap.counters.tab;
    let panes: std::collections::HashSet<u64> = snap
        .panes
        .iter()
        .filter_map(|p| parse_id('p', &p.id))
        .chain(more_panes.iter().copied())
        .collect();
    tree.check(|p| panes.contains(&p))?;
    Ok(tree)
}

fn layout_from(rec: &LayoutRecord) -> Option<Layout> {
    match rec {
        LayoutRecord::Pane(id) => parse_id('p', id).map(Layout::Pane),
        LayoutRecord::Split {
            direction,
            ratio,
            first,
            second,
        } => Some(Layout::Split {
            direction: *direction,
            ratio: *ratio,
            first: Box::new(layout_from(first)?),
            second: Box::new(layout_from(second)?),
        }),
    }
}

impl Server {
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
    /// edges), and tell the reaper we are current.
    fn go_live(&mut self) -> Result<(), String> {
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
        if let Some(l) = &self.lineage {
            crate::reaper::announce(l);
        }
        self.mark_dirty();
        Ok(())
    }

    fn rearm_pane_timers(&mut self, id: u64, now: Instant) {
        use super::timers::TimerKind;
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        if let Some(at) = pane.timeout_at {
            self.timers.add(at, TimerKind::PaneTimeout(id, pane.run));
        }
        if let Some(idle) = pane.idle_timeout {
            self.timers.add(
                (pane.last_output + idle).max(now),
                TimerKind::PaneIdle(id, pane.run),
            );
        }
        if let Some(at) = pane.kill_deadline {
            self.timers.add(at, TimerKind::KillEscalate(id, pane.run));
        }
    }

    fn report_upgrade(&mut self, phases: Vec<Phase>, blackout_us: u64, batches: u32) {
        let fds: usize = self
            .panes
            .values()
            .map(|p| p.master.is_some() as usize + p.pidfd.is_some() as usize)
            .sum();
        let report = json!({
            "generation": self.generation,
            "new_pid": std::process::id(),
            "server_version": crate::protocol::SERVER_VERSION,
            "phases": phases.iter().map(|p| json!({ "name": p.name, "ms": p.us as f64 / 1000.0 })).collect::<Vec<_>>(),
            "blackout_ms": blackout_us as f64 / 1000.0,
            "panes": self.panes.len(),
            "clients": self.conns.len(),
            "fds": fds + self.conns.len() + 3,
            "fd_batches": batches,
            "finished_unix_ms": super::pane::unix_ms(),
        });
        self.log.log(
            "upgraded",
            &format!("generation {} serving; {report}", self.generation),
        );
        self.last_upgrade = report.clone();
        self.emit("server.upgraded", report.clone());
        if let Some((conn, rpc_id)) = self.upgrade_caller.take() {
            self.respond(conn, &rpc_id, Ok(report));
        }
    }

    /// A pane's inherited process may have exited: its pidfd says so.
    pub(super) fn on_pidfd(&mut self, id: u64) {
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        let Some(pidfd) = &pane.pidfd else { return };
        let raw = match crate::pty::pidfd::exit_status(pidfd) {
            Ok(Some(raw)) => raw,
            Ok(None) => return,
            Err(e) => {
                let msg = format!("reading the exit of pane {}: {e}", pane.public_id());
                self.log.log("pidfd_failed", &msg);
                return;
            }
        };
        let status = if libc::WIFSIGNALED(raw) {
            crate::protocol::methods::ExitStatus::Signal(libc::WTERMSIG(raw))
        } else {
            crate::protocol::methods::ExitStatus::Code(libc::WEXITSTATUS(raw))
        };
        if let Some(pane) = self.panes.get_mut(&id)
            && let Some(fd) = pane.pidfd.take()
        {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&fd.as_raw_fd()));
            if let Some(token) = pane.pidfd_token.take() {
                self.sources.remove(&token);
            }
        }
        self.on_pane_exit(id, status);
    }

    fn import_wait(
        &mut self,
        conn: ConnId,
        w: crate::handoff::manifest::WaitRuntime,
        now: Instant,
    ) -> Result<(), String> {
        use super::waits::{Wait, WaitCondition as C};
        let condition = match w.kind.as_str() {
            "exit" => C::Exit,
            "text" => {
                let text = w.text.unwrap_or_default();
                let regex = w
                    .regex
                    .then(|| regex::RegexBuilder::new(&text).multi_line(true).build())
                    .transpose()
                    .map_err(|e| format!("a parked wait's regex: {e}"))?;
                // A handed-over pane's output log starts empty at position
                // 0, so the wait goes on with the output that follows: what
                // the old server read was searched already.
                C::Text(super::waits::TextWait {
                    text,
                    regex,
                    include_screen: w.include_screen,
                    from: 0,
                    skip_lines: w.n,
                    after_command_start: w.after_command_start,
                    scanned: 0,
                })
            }
            "idle" => C::Idle(Duration::from_millis(w.n)),
            "prompt" => C::Prompt(w.n),
            "command_finished" => C::CommandFinished(w.n),
            other => return Err(format!("unknown wait kind {other:?}")),
        };
        let timeout = w.timeout_in_ms.map(Duration::from_millis);
        let wait = Wait {
            conn,
            rpc_id: w.rpc_id,
            pane: w.pane,
            condition,
            deadline: None,
            seen_pushed: 0,
        };
        let _ = now;
        self.park_wait(wait, timeout);
        Ok(())
    }
}
