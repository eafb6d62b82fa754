//! The keeper's own restarts: re-executing itself into a new binary
//! (after an upgrade) with everything it holds, and a keeper started after
//! one was killed taking its fds back from systemd's fd store.

use super::*;

type SavedPane = (u64, Option<RawFd>, Option<RawFd>, Option<RawFd>);

/// A keeper's state across its re-exec: fd numbers (kept open by the exec)
/// and plain values.
#[derive(Serialize, Deserialize)]
struct Saved {
    protocol: u8,
    channel: RawFd,
    current: i32,
    namespace: String,
    exe: String,
    listener: Option<RawFd>,
    lock: Option<RawFd>,
    /// (pane, master, pidfd, ring).
    panes: Vec<SavedPane>,
    checkpoint: Option<(RawFd, u64, RawFd, u64, Vec<FdName>)>,
    /// The checkpoint's history log and handoff version (absent from
    /// keepers before the log: no log, version 4).
    #[serde(default)]
    checkpoint_log: Option<RawFd>,
    #[serde(default = "handoff_before_the_log")]
    checkpoint_handoff: u32,
    stopping: bool,
    servers: Vec<i32>,
    loop_count: usize,
    /// The checkpoint's description for systemd's fd store, if made.
    #[serde(default)]
    checkpoint_info: Option<RawFd>,
    /// The highest generation seen (absent from older keepers: 0).
    #[serde(default)]
    generation: u64,
}

impl Keeper {
    /// A keeper from the fds systemd's fd store passed back at start
    /// (`fd_store::take_passed`): the previous keeper was killed, and its
    /// panes are taken over as after a server crash (no server runs: the
    /// channel's other end is closed, so the loop starts the replacement
    /// at once). `None` if what was passed cannot be served (no
    /// checkpoint, no listener or lock, another namespace).
    pub fn adopt(mut fds: HashMap<String, OwnedFd>, namespace: String) -> Result<Keeper, String> {
        use crate::service::fd_store::name;
        let info = fds
            .remove(&name("checkpoint"))
            .ok_or("no checkpoint among them")?;
        let mut text = String::new();
        let mut file = std::fs::File::from(info.try_clone().map_err(|e| e.to_string())?);
        std::io::Seek::rewind(&mut file).map_err(|e| e.to_string())?;
        file.read_to_string(&mut text).map_err(|e| e.to_string())?;
        let stored: StoredCheckpoint = serde_json::from_str(&text)
            .map_err(|e| format!("the checkpoint's description: {e}"))?;
        if stored.namespace != namespace {
            return Err(format!(
                "they are namespace {:?}'s, not {namespace:?}'s",
                stored.namespace
            ));
        }
        let log = fds.remove(&name("history-log"));
        let mut take = |what: &str| {
            fds.remove(&name(what))
                .ok_or_else(|| format!("no {what} among them"))
        };
        let (precopy, manifest) = (take("precopy")?, take("manifest")?);
        // A server that outlived the keeper (a generation after an
        // upgrade: no parent-death signal) would serve beside ours: it
        // goes first (its pid and start token, so never another process).
        if let Some((pid, token)) = stored.server
            && sys::process_start_token(pid) == Some(token)
        {
            crate::service::journal::write_line(&format!(
                "ptyd keeper: ending server pid {pid}, which outlived the killed keeper"
            ));
            let _ = sys::kill(pid, sys::SIGKILL);
            let until = Instant::now() + STOP_REAP_LIMIT;
            while sys::process_start_token(pid) == Some(token)
                && !sys::process_ended(pid)
                && Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let (listener, lock) = (take("listener")?, take("lock")?);
        let (keeper_end, server_end) =
            channel().map_err(|e| format!("creating the channel: {e}"))?;
        drop(server_end);
        let mut k = Keeper::new(keeper_end, 0, namespace, Some(listener), Some(lock));
        k.servers.clear();
        k.checkpoint = Some(Checkpoint {
            precopy,
            precopy_bytes: stored.precopy_bytes,
            manifest,
            manifest_bytes: stored.manifest_bytes,
            ids: stored.ids,
            log,
            handoff: stored.handoff,
            info: Some(info),
        });
        for (fd_name, fd) in fds {
            let Some((kind, pane)) = fd_name
                .strip_prefix(crate::service::fd_store::PREFIX)
                .and_then(|rest| rest.rsplit_once('-'))
                .and_then(|(kind, id)| Some((kind.to_string(), id.parse::<u64>().ok()?)))
            else {
                continue;
            };
            let held = k.panes.entry(PaneId::new(pane)).or_default();
            match kind.as_str() {
                "master" => held.master = Some(fd),
                "pidfd" => held.pidfd = Some(fd),
                "ring" => held.ring = Some(fd),
                _ => {}
            }
        }
        k.adopted = Some(format!(
            "the keeper was killed; took {} panes over from systemd's fd store",
            k.panes.len()
        ));
        let mut store = crate::service::fd_store::FdStore::from_env();
        if let Some(store) = &mut store {
            store.adopted(&k.stored_fds_owned());
        }
        k.store = store;
        Ok(k)
    }

    /// Everything held, by its name in the fd store.
    fn stored_fds(&self) -> Vec<(String, RawFd)> {
        use crate::service::fd_store::name;
        let mut out = Vec::new();
        for (id, held) in &self.panes {
            for (what, fd) in [
                ("master", &held.master),
                ("pidfd", &held.pidfd),
                ("ring", &held.ring),
            ] {
                if let Some(fd) = fd {
                    out.push((name(&format!("{what}-{}", id.get())), fd.as_raw_fd()));
                }
            }
        }
        for (what, fd) in [("listener", &self.listener), ("lock", &self.lock)] {
            if let Some(fd) = fd {
                out.push((name(what), fd.as_raw_fd()));
            }
        }
        if let Some(cp) = &self.checkpoint
            && let Some(info) = &cp.info
        {
            out.push((name("precopy"), cp.precopy.as_raw_fd()));
            out.push((name("manifest"), cp.manifest.as_raw_fd()));
            out.push((name("checkpoint"), info.as_raw_fd()));
            if let Some(log) = &cp.log {
                out.push((name("history-log"), log.as_raw_fd()));
            }
        }
        out
    }

    fn stored_fds_owned(&self) -> HashMap<String, OwnedFd> {
        self.stored_fds()
            .into_iter()
            .filter_map(|(n, fd)| Some((n, sys::dup_raw(fd).ok()?)))
            .collect()
    }

    /// Makes systemd's fd store (if any) hold what we hold.
    pub(super) fn store_sync(&mut self) {
        if self.store.is_none() {
            return;
        }
        let wanted = self.stored_fds();
        if let Some(store) = &mut self.store {
            store.sync(&wanted);
        }
    }

    /// The keeper a re-executed image continues as, if this process is
    /// one (`STATE_FD_ENV`); called first thing by `ptyd server`.
    ///
    /// On the main thread at start (`sys/env.rs`); only our previous
    /// image names these fds (`sys::adopt_passed_fd`).
    pub fn resume_from_env() -> Option<Keeper> {
        let raw = std::env::var(STATE_FD_ENV).ok()?;
        sys::remove_env(STATE_FD_ENV);
        // Our previous image kept these fds open for us alone (it named
        // them in the state), and nothing else owns them here.
        let adopt = |fd: RawFd| -> OwnedFd { sys::adopt_passed_fd(fd) };
        let state_fd = adopt(raw.parse().ok()?);
        let mut text = String::new();
        let mut file = std::fs::File::from(state_fd);
        std::io::Seek::rewind(&mut file).ok()?;
        file.read_to_string(&mut text).ok()?;
        let saved: Saved = serde_json::from_str(&text).ok()?;
        let opt = |fd: Option<RawFd>| fd.map(adopt);
        let mut k = Keeper::new(
            adopt(saved.channel),
            saved.current,
            saved.namespace,
            opt(saved.listener),
            opt(saved.lock),
        );
        k.exe = PathBuf::from(saved.exe);
        for (id, master, pidfd, ring) in saved.panes {
            let held = PaneHeld {
                master: opt(master),
                pidfd: opt(pidfd),
                ring: opt(ring),
            };
            k.panes.insert(PaneId::new(id), held);
        }
        let info = opt(saved.checkpoint_info);
        let log = opt(saved.checkpoint_log);
        k.checkpoint = saved.checkpoint.map(|(p, pb, m, mb, ids)| Checkpoint {
            precopy: adopt(p),
            precopy_bytes: pb,
            manifest: adopt(m),
            manifest_bytes: mb,
            ids,
            log,
            handoff: saved.checkpoint_handoff,
            info,
        });
        k.stopping = saved.stopping;
        k.servers = saved.servers.into_iter().collect();
        k.loop_count = saved.loop_count;
        k.generation = saved.generation;
        Some(k)
    }

    /// Re-executes this process into `exe` (same pid: the service's main
    /// pid stays; children stay ours; `PR_SET_CHILD_SUBREAPER` survives
    /// the exec), keeping every fd, so no old code lingers after an
    /// upgrade. Returns only if the exec failed, with why.
    pub(super) fn reexec(&mut self, exe: &std::path::Path) -> String {
        let raw = |fd: &Option<OwnedFd>| fd.as_ref().map(AsRawFd::as_raw_fd);
        let saved = Saved {
            protocol: PROTOCOL,
            channel: self.channel.as_raw_fd(),
            current: self.current,
            namespace: self.namespace.clone(),
            exe: exe.to_string_lossy().into_owned(),
            listener: raw(&self.listener),
            lock: raw(&self.lock),
            panes: self
                .panes
                .iter()
                .map(|(id, h)| (id.get(), raw(&h.master), raw(&h.pidfd), raw(&h.ring)))
                .collect(),
            checkpoint: self.checkpoint.as_ref().map(|c| {
                (
                    c.precopy.as_raw_fd(),
                    c.precopy_bytes,
                    c.manifest.as_raw_fd(),
                    c.manifest_bytes,
                    c.ids.clone(),
                )
            }),
            checkpoint_log: self
                .checkpoint
                .as_ref()
                .and_then(|c| c.log.as_ref())
                .map(AsRawFd::as_raw_fd),
            checkpoint_handoff: self
                .checkpoint
                .as_ref()
                .map_or(handoff_before_the_log(), |c| c.handoff),
            stopping: self.stopping,
            servers: self.servers.iter().copied().collect(),
            loop_count: self.loop_count,
            generation: self.generation,
            checkpoint_info: self
                .checkpoint
                .as_ref()
                .and_then(|c| c.info.as_ref())
                .map(AsRawFd::as_raw_fd),
        };
        let Ok(json) = serde_json::to_vec(&saved) else {
            return "encoding the keeper's state".into();
        };
        let state = match sys::anonymous_file(c"ptyd-keeper-state", &json) {
            Ok(fd) => fd,
            Err(e) => return format!("writing the keeper's state: {e}"),
        };
        let mut keep: Vec<RawFd> = vec![state.as_raw_fd(), self.channel.as_raw_fd()];
        keep.extend(saved.listener);
        keep.extend(saved.lock);
        for (_, m, p, r) in &saved.panes {
            keep.extend([*m, *p, *r].into_iter().flatten());
        }
        if let Some((p, _, m, _, _)) = &saved.checkpoint {
            keep.extend([*p, *m]);
        }
        keep.extend(saved.checkpoint_info);
        keep.extend(saved.checkpoint_log);
        for fd in &keep {
            let _ = sys::clear_cloexec(*fd);
        }
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["-L", &self.namespace, "server"])
            .env(STATE_FD_ENV, state.as_raw_fd().to_string())
            .env_remove(crate::protocol::READY_FD_ENV);
        // The new image raises the limit again and remembers this one.
        sys::starting_limits_on_exec(&mut cmd);
        let err = cmd.exec();
        let _ = sys::raise_fd_limit();
        let _ = sys::raise_fsize_limit();
        // Still us: the fds go back to close-on-exec (a pane must never
        // inherit them), and we keep running the old code.
        for fd in &keep {
            let _ = sys::set_cloexec(*fd);
        }
        format!("exec {}: {err}", exe.display())
    }
}
