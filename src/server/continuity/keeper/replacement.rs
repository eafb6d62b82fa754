//! Replacing a serving process that died: a fresh server started, and the
//! old side of the live upgrade's handoff played to it from the last
//! checkpoint, or (a crash loop's fallback) the panes' bare fds handed
//! to a model-less server.

use super::*;

impl Keeper {
    /// The serving process died without a stop: start a replacement and
    /// hand it everything. False if there is nothing left to serve (asked
    /// to stop meanwhile).
    pub(super) fn recover(&mut self) -> bool {
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
                let named: std::collections::HashSet<PaneId> =
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
        let mut cmd = self.replacement_command(&server_end, why, generation);
        cmd.env(ADOPT_FD_ENV, theirs.as_raw_fd().to_string())
            .env_remove(crate::handoff::fault::FAULT_ENV);
        if let Some(fault) = std::env::var_os(ADOPT_FAULT_ENV) {
            cmd.env(crate::handoff::fault::FAULT_ENV, fault);
        }
        sys::inherit_fd_on_exec(&mut cmd, theirs.as_raw_fd());
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
        let mut ids: Vec<&PaneId> = self.panes.keys().collect();
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
                "ptyd keeper: letting pane {id} go (pid {}): {command}",
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
        let child = self
            .replacement_command(&server_end, why, generation)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.exe.display()))?;
        drop(server_end);
        self.channel = keeper_end;
        self.servers.insert(child.id() as i32);
        Ok(child.id() as i32)
    }

    /// `ptyd server` for this namespace as a replacement: the lineage
    /// channel's end inherited and named, why it starts and its
    /// generation, the user's starting limits; never a ready pipe.
    fn replacement_command(
        &self,
        server_end: &OwnedFd,
        why: &str,
        generation: u64,
    ) -> std::process::Command {
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
        cmd
    }
}

/// Sends an adopting server every held pane's master, pidfd and ring: a
/// header, then the batches. A pane without a master or a pidfd (its
/// process was gone before this keeper held it) is not sent: there is
/// nothing to adopt.
fn send_held(sock: &OwnedFd, panes: &HashMap<PaneId, PaneHeld>) -> Result<(), String> {
    let mut ids: Vec<PaneId> = panes.keys().copied().collect();
    ids.sort_unstable();
    let mut named: Vec<(FdName, RawFd)> = Vec::new();
    for id in ids {
        let held = &panes[&id];
        let (Some(master), Some(pidfd)) = (&held.master, &held.pidfd) else {
            continue;
        };
        named.push((FdName::Pty(id.get()), master.as_raw_fd()));
        named.push((FdName::Pidfd(id.get()), pidfd.as_raw_fd()));
        if let Some(ring) = &held.ring {
            named.push((FdName::Ring(id.get()), ring.as_raw_fd()));
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

fn pane_of(id: &FdName) -> Option<PaneId> {
    match *id {
        FdName::Pty(p) | FdName::PtyHangup(p) | FdName::Pidfd(p) | FdName::Ring(p) => {
            Some(PaneId::new(p))
        }
        _ => None,
    }
}

/// The old side of the handoff, played from a checkpoint: hello → the
/// pre-copy (with the held fds it names) → ack → the manifest (with the
/// new channel as `lineage`) → batch ack → imported → commit → committed.
fn relay(
    sock: &OwnedFd,
    cp: &Checkpoint,
    panes: &HashMap<PaneId, PaneHeld>,
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
