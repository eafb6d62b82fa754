//! After the fds: the server rebuilt from the manifest (connections, the
//! panes that changed since the pre-copy, the ones that did not), every
//! source registered, and the server gone live.

use super::precopy::{drop_pane_fds, register_pane};
use super::*;

impl Server {
    /// A keeper started us after a crash (`continuity::keeper`): what the
    /// dead server read since its checkpoint is in the rings.
    pub(super) fn recover_from_checkpoint(
        &mut self,
        recovery: &crate::handoff::manifest::Recovery,
        events_reached: Option<u64>,
    ) {
        let why = std::env::var(crate::server::continuity::keeper::RECOVERY_ENV)
            .unwrap_or_else(|_| "the server died".into());
        crate::sys::remove_env(crate::server::continuity::keeper::RECOVERY_ENV);
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
    pub(super) fn register_sources(&mut self) -> Result<(), String> {
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
    pub(super) fn go_live(&mut self) {
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
}

/// Fills the server shell in from the manifest and the received fds.
pub(super) fn rebuild(
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
