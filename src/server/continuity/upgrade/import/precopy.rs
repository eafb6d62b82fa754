//! Before the pause: the pre-copy decoded and the server shell and every
//! pane built and registered around it while the old server still serves,
//! then the deltas the old side sends until it pauses.

use super::*;
use crate::server::continuity::history_log::LogCounts;

/// The pre-copy comes before the pause: decoding it, and building the
/// server shell (poll, signals, disk thread, log) around the listener and
/// lock it carries and every pane with its fds, is time the old server
/// still serves.
pub(super) fn receive_precopy(
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
    /// Where its history lines are in the log, and what was read there.
    history: Option<(HistoryRef, LogCounts)>,
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
        let read = crate::server::continuity::history_log::read_history(log, &reference)
            .map_err(|e| format!("pane {}: {e}", PaneId::new(rt.id)))?;
        term.restore_history(read.blocks, read.lines);
        history = Some((reference, read.counts));
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
    history: Option<(HistoryRef, LogCounts)>,
) {
    if let (Some(raw), Some(pane)) = (raw, shell.panes.get(&id))
        && pane.screen().changes() == 0
    {
        let history = history.as_ref().map(|(r, c)| (r, c));
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
pub(super) fn apply_delta(
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
pub(super) struct Progress {
    last: Instant,
}

impl Progress {
    pub(super) fn new() -> Progress {
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

pub(super) fn register_pane(server: &Server, pane: &mut Pane) -> Result<(), String> {
    pane.fds_mut()
        .register(server.poll.registry())
        .map_err(|e| format!("registering pane {}: {e}", pane.public_id()))
}

/// Lets go of a pre-built pane's fds (out of the poll first: epoll tracks
/// the open file, which the old side and the blackout's copies still hold).
pub(super) fn drop_pane_fds(server: &mut Server, pane: &mut Pane) {
    if let Some(token) = pane.close_fds(server.poll.registry()) {
        server.sources.remove(&token);
    }
}
