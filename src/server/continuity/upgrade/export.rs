//! The old side's actions, in sequence order: preflight and the version
//! probe, starting the new server, the pre-copy, the pause with the
//! manifest, the fd batches, and what the commit and the end of probation
//! change. The machine (`machine.rs`) decides when each runs; these only
//! do it, and report failures ([`UpgradeError`]) for its rollback edges.

use super::convert::{self, Capture, PaneDraft};
use super::error::{UpgradeError, UpgradeErrorKind};
use super::machine::{HandOver, Precopied, Step, Transfer};
use super::{Active, Origin, Upgrade, UpgradeChild, internal, register_channel};
use crate::handoff::fd_name::FdName;
use crate::handoff::fdpass::{self, MAX_FDS_PER_BATCH};
use crate::handoff::manifest::{self, Control};
use crate::handoff::{HANDOFF_FD_ENV, fault};
use crate::model::PaneId;
use crate::protocol::methods;
use crate::protocol::{ErrorCode, RpcError};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::server::Server;
use crate::server::clients::connection::ConnId;

impl Server {
    /// Checks a `server.upgrade` request and starts the version probe:
    /// every refusal here is [R0], nothing touched.
    pub(super) fn preflight(
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
        let fault =
            fault::accept(req.fault).map_err(|e| RpcError::new(ErrorCode::InvalidParams, e))?;
        if self.succession.in_probation() {
            return Err(RpcError::new(
                ErrorCode::Busy,
                format!(
                    "the previous server is still in its probation after the last upgrade (at most {} ms); try again in a moment",
                    self.config.upgrade_probation.as_millis()
                ),
            ));
        }
        let binary = match &req.binary {
            Some(b) => std::path::absolute(b).unwrap_or_else(|_| PathBuf::from(b)),
            None => self.exe_path.clone(),
        };
        if !binary.is_file() {
            let what = if req.binary.is_some() {
                "check the path given to --binary"
            } else {
                "the binary this server was started from is gone: pass the new one with --binary PATH"
            };
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("no binary at {}; {what}", binary.display()),
            ));
        }
        let (child, read_end) = self.start_probe(&binary)?;
        let timeout = req
            .timeout_ms
            .map_or(self.config.upgrade_timeout, Duration::from_millis);
        let now = Instant::now();
        self.arm_upgrade_timer(now + timeout);
        self.log.log(
            "upgrade_started",
            &format!("upgrading to {}", binary.display()),
        );
        crate::service::notify::reloading();
        self.upgrade = Upgrade::Active(Box::new(Active {
            step: Step::Probing {
                output: Vec::new(),
                restore: req.mode.as_deref() == Some("restore"),
                binary: binary.display().to_string(),
            },
            child: UpgradeChild::spawned(child),
            channel: read_end,
            binary,
            caller,
            fault,
            deadline: now + timeout,
            stall: timeout,
            step_started: now,
            timings: Vec::new(),
            memfd: None,
            opened_pidfds: HashMap::new(),
            new_version: String::new(),
            channel_lost: None,
            abort_reason: None,
            from: Origin {
                pid: std::process::id(),
                version: crate::protocol::SERVER_VERSION.to_string(),
                binary: self.exe_path.clone(),
            },
        }));
        Ok(())
    }

    /// Runs `BINARY version --json` with its stdout on a pipe whose read
    /// end is in our poll.
    fn start_probe(
        &mut self,
        binary: &PathBuf,
    ) -> Result<(std::process::Child, OwnedFd), RpcError> {
        let (read_end, write_end) =
            nix::unistd::pipe().map_err(|e| internal(format!("creating pipe: {e}")))?;
        crate::sys::set_nonblocking_cloexec(read_end.as_raw_fd())
            .map_err(|e| internal(e.to_string()))?;
        // The probe gets the write end as its stdout only: an inherited
        // extra copy would keep the pipe open after the probe closed its
        // output (and in whatever it leaves running), so its end would
        // never be seen. Only the loop's thread spawns, so no child can
        // inherit it between pipe() and here.
        crate::sys::set_cloexec(write_end.as_raw_fd()).map_err(|e| internal(e.to_string()))?;
        let child = std::process::Command::new(binary)
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
        register_channel(self, &read_end)
            .map_err(|e| internal(format!("registering the probe: {e}")))?;
        Ok((child, read_end))
    }

    /// `--mode restore`, the fallback where a live handoff is impossible:
    /// answer the caller, stop as `ptyd stop` would (the snapshot is saved
    /// first), then exec the new binary in this very process. It keeps our
    /// pid (a service manager sees no change of main process) and restores
    /// the panes from the snapshot, restarting or resuming them.
    pub(super) fn restart_in_place(&mut self) {
        let Upgrade::Active(a) = std::mem::replace(&mut self.upgrade, Upgrade::Idle) else {
            return;
        };
        let reply = json!({
            "mode": "restore",
            "pid": std::process::id(),
            "binary": a.binary,
            "from": { "pid": a.from.pid, "version": a.from.version, "binary": a.from.binary },
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
        self.shutdown(crate::server::Ending::Restart);
        let mut cmd = std::process::Command::new(&a.binary);
        cmd.args(["-L", &self.paths.namespace, "server"])
            .env_remove(crate::protocol::READY_FD_ENV);
        // A socket systemd passed stays systemd's: the new binary gets the
        // very same one, as systemd passes it (fd 3), instead of binding a
        // new file over the socket unit's path.
        let activated = self.socket_dev_ino == crate::transport::listener::NOT_OURS;
        if activated {
            crate::service::activation::pass_on_exec(&mut cmd, self.listener.as_raw_fd());
        }
        // The keeper, if any, must keep seeing this process as current.
        // Held until the exec (which keeps it; a failed exec exits).
        let mut _moved = None;
        if let Some(l) = &self.lineage {
            let mut fd = l.as_raw_fd();
            if activated && fd == 3 {
                // To a free number >= 4, so fd 3 can take the listener.
                if let Ok(moved) = crate::sys::dup_at_least(fd, 4) {
                    fd = moved.as_raw_fd();
                    _moved = Some(moved);
                }
            }
            // So the exec keeps it.
            let _ = crate::sys::clear_cloexec(fd);
            cmd.env(
                crate::server::continuity::keeper::LINEAGE_FD_ENV,
                fd.to_string(),
            );
        }
        let err = cmd.exec();
        self.log.log(
            "upgrade_restore_failed",
            &format!("exec {}: {err}", a.binary.display()),
        );
        std::process::exit(1);
    }

    /// Starts the new binary in import mode on a fresh SEQPACKET socketpair
    /// and returns its pid. No filesystem rendezvous, no token: only our
    /// child has the other end.
    pub(super) fn spawn_new_server(&mut self) -> Result<u32, UpgradeError> {
        let (ours, theirs) = crate::sys::seqpacket_pair(true)
            .map_err(|e| UpgradeError::io("creating the handoff socketpair", e))?;
        let theirs_fd = theirs.as_raw_fd();
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Err(UpgradeError::not_in_progress());
        };
        let mut cmd = std::process::Command::new(&a.binary);
        cmd.args(["-L", &self.paths.namespace, "server"])
            .env(HANDOFF_FD_ENV, theirs_fd.to_string())
            .env(
                crate::handoff::manifest::SPEAKS_ENV,
                crate::handoff::manifest::HANDOFF_VERSION.to_string(),
            )
            .env_remove(crate::protocol::READY_FD_ENV)
            .stdin(std::process::Stdio::null());
        match &a.fault {
            Some(f) => cmd.env(fault::FAULT_ENV, f),
            None => cmd.env_remove(fault::FAULT_ENV),
        };
        // Exactly this one fd survives the exec, blocking on the new side
        // (it runs its import sequentially).
        crate::sys::inherit_fd_on_exec(&mut cmd, theirs_fd);
        // The probe, if it still runs, was killed when its output ended;
        // the loop reaps it (its pid no longer ours to recognise).
        a.child = UpgradeChild::spawned(
            cmd.spawn()
                .map_err(|e| UpgradeError::io(&format!("starting {}", a.binary.display()), e))?,
        );
        drop(theirs);
        a.channel = ours;
        let pid = a.child.pid;
        let Upgrade::Active(a) = &self.upgrade else {
            return Err(UpgradeError::not_in_progress());
        };
        register_channel(self, &a.channel)
            .map_err(|e| UpgradeError::io("registering the handoff socket", e))?;
        Ok(pid)
    }

    /// Pre-copy, as VM live migration does: every terminal model, pane and
    /// the event ring go over while the server still serves, with the
    /// panes' fds; the pause then carries only what changed since. Most
    /// panes are idle during an upgrade, so the blackout stops growing with
    /// scrollback.
    pub(super) fn send_precopy(&mut self) -> Result<Precopied, UpgradeError> {
        let mut opened = match &mut self.upgrade {
            Upgrade::Active(a) => std::mem::take(&mut a.opened_pidfds),
            Upgrade::Idle => return Err(UpgradeError::not_in_progress()),
        };
        let encoded = self.encode_precopy(&mut opened);
        if let Upgrade::Active(a) = &mut self.upgrade {
            a.opened_pidfds = opened;
        }
        let (bytes, precopied, pane_fds) = encoded?;
        let mut named = vec![
            (FdName::Listener, self.listener.as_raw_fd()),
            (FdName::Lock, self.lock.raw_fd()),
        ];
        named.extend(pane_fds);
        self.send_precopy_message(&bytes, &named)?;
        Ok(precopied)
    }

    /// The pre-copy's memfd content (JSON lines: the head, then one line
    /// per pane with its terminal), what it carried, and the panes' fds.
    /// Panes waiting for input acks name connections, whose ids the new
    /// side maps only at the pause, so those get no draft: they always
    /// travel again.
    #[allow(clippy::type_complexity)]
    fn encode_precopy(
        &mut self,
        opened: &mut HashMap<PaneId, OwnedFd>,
    ) -> Result<(Vec<u8>, Precopied, Vec<(FdName, RawFd)>), UpgradeError> {
        let now = Instant::now();
        let history = self.persist.history;
        let head = manifest::PrecopyHead {
            event_last_seq: self.events.last_seq(),
            event_ring: self.events.ring(),
            panes: self.panes.len() as u64,
            events_reached: None,
        };
        let mut out = serde_json::to_vec(&head)
            .map_err(|e| UpgradeError::encode("encoding the pre-copy", e))?;
        out.push(b'\n');
        let mut precopied = Precopied {
            events: self.events.last_seq(),
            ..Precopied::default()
        };
        let mut fd_list = Vec::new();
        for p in self.panes.values() {
            let record = crate::server::persistence::pane_record(p, history);
            let mut rt = convert::pane_runtime(p, now, Some(p.screen().changes()));
            if p.pending_acks().is_empty() {
                let mut bytes = Vec::new();
                convert::draft_bytes(&mut bytes, &record, &mut rt)?;
                let times = convert::pane_times(p);
                let fds = convert::pane_fds(p, opened)?;
                fd_list.extend(fds.iter().copied());
                precopied
                    .drafts
                    .insert(p.public_id(), PaneDraft { bytes, times, fds });
            }
            precopied
                .screens
                .insert(p.public_id(), p.screen().changes());
            if self.lineage.is_some() {
                // With a keeper, the checkpoints' encoding: the terminal
                // without its history lines (an idle pane's is encoded
                // already), which are in the history log, handed over
                // with the pre-copy (only lines new since the last
                // checkpoint are written to it now).
                let (screen, history) = self
                    .keeper
                    .screen_json(p.id(), p.screen())
                    .map_err(keeper_screen_error)?;
                let mut rt = rt.with_screen(Some(screen));
                rt.history = history;
                encode_line(&mut out, &(record, rt))?;
            } else {
                rt.screen = Some(p.screen());
                encode_line(&mut out, &(record, rt))?;
            }
        }
        if self.lineage.is_some()
            && let Some(fd) = self.keeper.log_fd()
        {
            fd_list.push((FdName::HistoryLog, fd));
        }
        Ok((out, precopied, fd_list))
    }

    /// Settling, between the pre-copy's ack and the pause: every pane that
    /// changed since the pre-copy is sent again whole while the server
    /// still serves, and every pane is held (its output is no longer read,
    /// so its program blocks on a full PTY, as with a terminal that stopped
    /// reading); `pre` is brought up to date. The pause then finds those panes unchanged,
    /// so the blackout carries no terminal, however busy the panes are.
    /// Returns whether a delta went out (none if nothing changed).
    pub(super) fn send_delta(
        &mut self,
        mut pre: Precopied,
    ) -> Result<(Precopied, bool), UpgradeError> {
        let now = Instant::now();
        let history = self.persist.history;
        let mut opened = match &mut self.upgrade {
            Upgrade::Active(a) => std::mem::take(&mut a.opened_pidfds),
            Upgrade::Idle => return Err(UpgradeError::not_in_progress()),
        };
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut held = Vec::new();
        let mut result = Ok(());
        for p in self.panes.values() {
            let Some(draft) = pre.drafts.get(&p.public_id()) else {
                continue;
            };
            let record = crate::server::persistence::pane_record(p, history);
            let precopied = pre.screens.get(&p.public_id()).copied();
            let mut rt = convert::pane_runtime(p, now, precopied);
            let fds = match convert::pane_fds(p, &mut opened) {
                Ok(fds) => fds,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            // A pane with acks now, or other fds, travels in the blackout.
            if !p.pending_acks().is_empty() || fds != draft.fds {
                continue;
            }
            let times = convert::pane_times(p);
            // The draft leaves the terminal out (its change count is in).
            let screen = rt.screen.take();
            if let Err(e) = convert::draft_bytes(&mut buf, &record, &mut rt) {
                result = Err(e);
                break;
            }
            rt.screen = screen;
            if rt.screen.is_none() && times == draft.times && buf == draft.bytes {
                continue;
            }
            let changes = p.screen().changes();
            let encoded = if self.lineage.is_some() && rt.screen.is_some() {
                // As in the pre-copy: lines in the history log.
                self.keeper
                    .screen_json(p.id(), p.screen())
                    .map_err(keeper_screen_error)
                    .and_then(|(screen, history)| {
                        let mut rt = rt.with_screen(Some(screen));
                        rt.history = history;
                        encode_line(&mut out, &(record, rt))
                    })
            } else {
                encode_line(&mut out, &(record, rt))
            };
            if let Err(e) = encoded {
                result = Err(e);
                break;
            }
            held.push(p.id());
            pre.screens.insert(p.public_id(), changes);
            pre.drafts.insert(
                p.public_id(),
                PaneDraft {
                    bytes: std::mem::take(&mut buf),
                    times,
                    fds,
                },
            );
        }
        if let Upgrade::Active(a) = &mut self.upgrade {
            a.opened_pidfds = opened;
        }
        result?;
        if held.is_empty() {
            return Ok((pre, false));
        }
        // Every pane the pre-copy carried is held until the pause, not
        // only those sent again: one not read since the pre-copy (waiting
        // on the backlog behind busier ones: the loop reads panes for a
        // bounded time per turn) would otherwise be read during the settle
        // and travel whole inside the blackout. What they print meanwhile
        // waits in their PTYs for the new server, as the held ones' does.
        for p in self.panes.values_mut() {
            if pre.drafts.contains_key(&p.public_id()) {
                p.hold_for_upgrade();
            }
        }
        let memfd = write_memfd(&out)?;
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Err(UpgradeError::not_in_progress());
        };
        let msg = Control::Delta {
            bytes: out.len() as u64,
        };
        fdpass::send_message(&a.channel, &msg, &[memfd.as_raw_fd()])
            .map_err(|e| UpgradeError::channel("sending the pre-copy's delta", e))?;
        Ok((pre, true))
    }

    /// The pre-copy's message: the memfd and the first fds, the rest in
    /// batches right after, unacked (before the pause a failure here only
    /// fails the upgrade).
    fn send_precopy_message(
        &mut self,
        bytes: &[u8],
        named: &[(FdName, RawFd)],
    ) -> Result<(), UpgradeError> {
        let memfd = write_memfd(bytes)?;
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Err(UpgradeError::not_in_progress());
        };
        let first = named.len().min(MAX_FDS_PER_BATCH - 1);
        let rest: Vec<&[(FdName, RawFd)]> = named[first..].chunks(MAX_FDS_PER_BATCH).collect();
        let msg = Control::Precopy {
            bytes: bytes.len() as u64,
            ids: named[..first].iter().map(|(id, _)| *id).collect(),
            batches: rest.len() as u32,
        };
        let fds: Vec<RawFd> = std::iter::once(memfd.as_raw_fd())
            .chain(named[..first].iter().map(|(_, fd)| *fd))
            .collect();
        fdpass::send_message(&a.channel, &msg, &fds)
            .map_err(|e| UpgradeError::channel("sending the pre-copy", e))?;
        for (i, batch) in rest.iter().enumerate() {
            fdpass::send_batch(&a.channel, i as u32 + 1, batch).map_err(|e| {
                UpgradeError::channel(&format!("sending the pre-copy's fd batch {}", i + 1), e)
            })?;
        }
        Ok(())
    }

    /// The blackout starts here: the loop stops acting on every source, the
    /// state is captured into the manifest against what the pre-copy
    /// carried, and the manifest goes out with the first fd batch.
    pub(super) fn pause_and_send_manifest(
        &mut self,
        pre: Precopied,
    ) -> Result<Transfer, UpgradeError> {
        let pause_started_mono_us = crate::sys::monotonic_usec();
        // The new server gets socket-path connections only: a client's
        // terminal (direct output) is not handed over. What it had not
        // taken goes onto the socket behind DIRECT_OFF, which also asks
        // the client to offer its terminal again (to whichever server
        // serves it next: the new one, or this one after a rollback).
        #[cfg(unix)]
        self.leave_direct_all("upgrade");
        // Last chance for queued output to leave while it is still ours.
        self.flush_conns();
        self.serving
            .pause()
            .map_err(|e| UpgradeError::new(UpgradeErrorKind::Sequence, e))?;
        // Nothing leaves the poll here: the loop ignores every source but
        // the upgrade's own while paused, and epoll_ctl on every fd would
        // cost the blackout ~2 us a source. They leave after the commit.
        let mut fds = self.blackout_fds()?;
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        let (binary, caller, mut opened) = match &mut self.upgrade {
            Upgrade::Active(a) => (
                a.binary.clone(),
                a.caller.clone(),
                std::mem::take(&mut a.opened_pidfds),
            ),
            Upgrade::Idle => return Err(UpgradeError::not_in_progress()),
        };
        let captured = self.capture(pre, conns, &binary, caller, &mut fds, &mut opened);
        if let Upgrade::Active(a) = &mut self.upgrade {
            a.opened_pidfds = opened;
        }
        self.send_manifest(&captured?, fds, pause_started_mono_us)
    }

    /// The blackout's server-wide fds: the lineage pipe (made now by a
    /// first generation's first upgrade) and every connection. The listener
    /// and the lock went with the pre-copy.
    fn blackout_fds(&mut self) -> Result<Vec<(FdName, RawFd)>, UpgradeError> {
        let mut fds = Vec::new();
        if self.lineage.is_none() {
            // First upgrade of a first generation that has no keeper (its
            // fork failed): we become the keeper, holding our children.
            let (reader, writer) = crate::server::continuity::keeper::channel()
                .map_err(|e| UpgradeError::io("creating the keeper channel", e))?;
            self.lineage_reader = Some(reader);
            self.lineage = Some(writer);
        }
        if let Some(l) = &self.lineage {
            fds.push((FdName::Lineage, l.as_raw_fd()));
        }
        for (id, conn) in &self.conns {
            fds.push((FdName::Conn(*id), conn.stream.as_raw_fd()));
        }
        Ok(fds)
    }

    /// Encodes the manifest: only the panes that changed since the
    /// pre-copy travel (an idle pane costs the blackout an encoding and a
    /// comparison here, and nothing on the new side), and only the events
    /// after it. Adds the changed panes' fds to `fds`.
    fn capture(
        &self,
        pre: Precopied,
        conns: Vec<ConnId>,
        binary: &std::path::Path,
        caller: Option<(ConnId, Value)>,
        fds: &mut Vec<(FdName, RawFd)>,
        opened: &mut HashMap<PaneId, OwnedFd>,
    ) -> Result<Vec<u8>, UpgradeError> {
        let now = Instant::now();
        let history = self.persist.history;
        let (mut records, mut runtimes, mut unchanged_panes) = (Vec::new(), Vec::new(), Vec::new());
        let mut buf = Vec::new();
        for p in self.panes.values() {
            let record = crate::server::persistence::pane_record(p, history);
            let mut rt = convert::pane_runtime(p, now, pre.screens.get(&p.public_id()).copied());
            let pfds = convert::pane_fds(p, opened)?;
            let same = rt.screen.is_none()
                && p.pending_acks().is_empty()
                && match pre.drafts.get(&p.public_id()) {
                    Some(d) if d.times == convert::pane_times(p) && d.fds == pfds => {
                        convert::draft_bytes(&mut buf, &record, &mut rt)?;
                        buf == d.bytes
                    }
                    _ => false,
                };
            if same {
                unchanged_panes.push(p.id());
            } else {
                records.push(record);
                runtimes.push(rt);
                fds.extend(pfds);
            }
        }
        // Events are never changed once logged: only those after the
        // pre-copy travel now (all of them if the ring dropped some since).
        let (event_ring, events_after) = match self.events.after(pre.events) {
            Some(tail) => (tail, Some(pre.events)),
            None => (self.events.ring(), None),
        };
        let capture = Capture {
            records,
            runtimes,
            unchanged_panes,
            conns,
            event_ring,
            events_after,
            binary,
            caller,
            fd_ids: fds.iter().map(|(id, _)| *id).collect(),
        };
        let manifest = self.capture_manifest(capture, now);
        serde_json::to_vec(&manifest).map_err(|e| UpgradeError::encode("encoding the manifest", e))
    }

    /// Sends the manifest's memfd with batch 0 (one fd short of a full
    /// batch) in one message; later batches follow through the machine.
    fn send_manifest(
        &mut self,
        bytes: &[u8],
        fds: Vec<(FdName, RawFd)>,
        pause_started_mono_us: u64,
    ) -> Result<Transfer, UpgradeError> {
        let memfd = write_memfd(bytes)?;
        let Upgrade::Active(a) = &mut self.upgrade else {
            return Err(UpgradeError::not_in_progress());
        };
        let first = fds.len().min(MAX_FDS_PER_BATCH - 1);
        let msg = Control::Manifest {
            bytes: bytes.len() as u64,
            fd_count: fds.len() as u32,
            ids: fds[..first].iter().map(|(id, _)| *id).collect(),
            timings: a.timings.clone(),
            pause_started_mono_us,
        };
        let carried: Vec<RawFd> = std::iter::once(memfd.as_raw_fd())
            .chain(fds[..first].iter().map(|(_, fd)| *fd))
            .collect();
        fdpass::send_message(&a.channel, &msg, &carried)
            .map_err(|e| UpgradeError::channel("sending the manifest", e))?;
        a.memfd = Some(memfd);
        let batches = std::iter::once(&fds[..first])
            .chain(fds[first..].chunks(MAX_FDS_PER_BATCH))
            .map(<[_]>::to_vec)
            .collect();
        Ok(Transfer {
            batches,
            next: 1,
            acked: 0,
        })
    }

    /// Sends fd batches `from..to` (the machine keeps them up to its window
    /// ahead of the acks: each round trip inside the blackout costs two
    /// wakeups, and on a busy machine each wakeup may wait for a CPU).
    /// Returns the first batch not sent.
    pub(super) fn send_batches(
        &mut self,
        from: usize,
        to: usize,
        acked: usize,
    ) -> Result<usize, UpgradeError> {
        let Upgrade::Active(a) = &self.upgrade else {
            return Err(UpgradeError::not_in_progress());
        };
        let (Step::Transferring(t) | Step::Importing(t)) = &a.step else {
            return Err(UpgradeError::new(
                UpgradeErrorKind::Sequence,
                format!("fd batches to send in phase {}", a.step.name()),
            ));
        };
        for seq in from..to.min(t.batches.len()) {
            match fdpass::send_batch(&a.channel, seq as u32, &t.batches[seq]) {
                Ok(()) => {}
                // A full socket buffer, or the kernel's per-user limit on
                // fds in flight (ETOOMANYREFS): an ack will make room.
                Err(e)
                    if seq > acked
                        && (e.kind() == std::io::ErrorKind::WouldBlock
                            || crate::sys::is_too_many_refs(&e)) =>
                {
                    return Ok(seq);
                }
                Err(e) => return Err(UpgradeError::channel(&format!("sending fd batch {seq}"), e)),
            }
        }
        Ok(to.min(t.batches.len()))
    }

    /// The commit point has passed: the new server serves.
    pub(super) fn on_committed(&mut self, blackout_us: u64) {
        let Upgrade::Active(a) = &mut self.upgrade else {
            return;
        };
        let probation = self.config.upgrade_probation;
        a.deadline = Instant::now() + probation;
        let (deadline, pid) = (a.deadline, a.child.pid);
        let msg = format!(
            "handed over to pid {pid} (ptyd {}); blackout {blackout_us} us; probation {} ms",
            a.new_version,
            probation.as_millis()
        );
        self.arm_upgrade_timer(deadline);
        self.serving.hand_over(pid);
        // Out of the poll now that the blackout is over: the new server
        // reads these, and every edge would wake us for nothing during
        // probation. `release` closes only what left the poll first.
        self.deregister_all();
        self.log.log("upgrade_committed", &msg);
    }

    /// Probation ended, the new server stopped, or we were asked to stop
    /// in probation: let go for good (the loop ends; `release` follows).
    pub(super) fn hand_over(&mut self, why: HandOver) {
        let Upgrade::Active(a) = &self.upgrade else {
            return;
        };
        let pid = a.child.pid;
        match why {
            // A reload that came meanwhile is the new server's to run: it
            // holds it back until our channel closes.
            HandOver::ProbationOver if std::mem::take(&mut self.sighup_pending) => {
                // Our child, not reaped yet (its exit would have ended this).
                let _ = crate::sys::kill(pid as i32, crate::sys::SIGHUP);
            }
            HandOver::ProbationOver => {}
            HandOver::NewServerStopped => {
                let msg =
                    format!("the new server (pid {pid}) stopped during probation; stopping too");
                self.log.log("upgrade_released", &msg);
            }
            HandOver::StopRequested => {
                // Our child, not reaped yet (its exit would have ended
                // this), so the pid is still its own.
                let _ = crate::sys::kill(pid as i32, crate::sys::SIGTERM);
            }
        }
        self.serving.release();
        self.stopping = true;
    }
}

/// Appends `value` as one JSON line (serde_json escapes every newline
/// inside strings, so a line is one value).
fn encode_line(out: &mut Vec<u8>, value: &impl serde::Serialize) -> Result<(), UpgradeError> {
    serde_json::to_writer(&mut *out, value)
        .map_err(|e| UpgradeError::encode("encoding the pre-copy", e))?;
    out.push(b'\n');
    Ok(())
}

/// An anonymous file holding `bytes`, to pass as one fd.
/// (A memfd on Linux; see `sys::anonymous_file` for elsewhere.)
fn write_memfd(bytes: &[u8]) -> Result<OwnedFd, UpgradeError> {
    crate::sys::anonymous_file(c"ptyd-manifest", bytes)
        .map_err(|e| UpgradeError::io("writing the manifest", e))
}

/// The keeper link's encoding of a terminal without its history lines
/// failed; its message is already whole.
fn keeper_screen_error(message: String) -> UpgradeError {
    UpgradeError::new(UpgradeErrorKind::Encode, message)
}
