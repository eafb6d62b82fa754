//! Windows' stand-in for `keeper_link/`: there is no keeper.
//!
//! On Unix a keeper process holds every pane's PTY master, a pidfd of its
//! process and an output ring across a crash of the serving process, so a
//! replacement takes the panes over (`keeper/`). Windows cannot do this:
//! a pseudo console belongs to the conhost the server started and cannot
//! be handed to another process, so a server that dies loses its panes
//! (their Job Objects end the process trees) and the next one restarts
//! them from the last snapshot by their restore plans. The server calls
//! the same methods on both OSes; here they do nothing, the channel type
//! has no values, and so has the ring type (no pane ever gets a ring).

use crate::server::Server;
use std::time::Instant;

/// A channel to a keeper or an upgrade's predecessor: none can exist.
pub enum Channel {}

/// The keeper link's state: nothing to hold but the figures
/// `server.status` reads.
#[derive(Default)]
pub struct KeeperLink {
    pub info: serde_json::Value,
}

impl KeeperLink {
    pub fn mark_dirty(&mut self) {}

    pub fn mark_urgent(&mut self) {}
}

/// A pane's fds handed over by a keeper: none can exist.
pub enum AdoptedPane {}

impl AdoptedPane {
    pub fn is_process(&self, _pid: Option<i32>, _start_token: Option<u64>) -> bool {
        match *self {}
    }

    pub fn size(&self) -> Option<(u16, u16)> {
        match *self {}
    }
}

impl Server {
    pub(in crate::server) fn adopt_pane(
        &mut self,
        _id: u64,
        held: AdoptedPane,
    ) -> Result<(), String> {
        match held {}
    }
}

/// A pane's output ring for a keeper: no values, so `Pane::ring` is
/// always `None` and the code reading through one is unreachable.
pub enum OutputRing {}

impl OutputRing {
    pub fn capacity(&self) -> usize {
        match *self {}
    }

    pub fn written(&self) -> u64 {
        match *self {}
    }

    pub fn reserve(&mut self, _max: usize) -> &mut [u8] {
        match *self {}
    }

    pub fn commit(&mut self, _n: usize) {
        match *self {}
    }

    pub fn last(&self, _n: usize) -> &[u8] {
        match *self {}
    }

    pub fn take_pending(&mut self) -> usize {
        match *self {}
    }

    pub fn since(&self, _from: u64) -> (Vec<u8>, bool) {
        match *self {}
    }

    pub fn release_before(&mut self, _at: u64) {
        match *self {}
    }
}

/// A server released to a successor (a live upgrade, which Windows does
/// not have) would exit here.
pub(in crate::server) fn after_release(server: Server, _new_pid: u32) -> Result<(), String> {
    drop(server);
    Ok(())
}

impl Server {
    pub(in crate::server) fn keeper_serving(&mut self, _namespace_fds: bool, _settled: bool) {}

    pub(in crate::server) fn keeper_track_pane(&mut self, _id: u64) {}

    pub(in crate::server) fn keeper_forget_pane(&mut self, _id: u64) {}

    pub(in crate::server) fn keeper_drain(&mut self) {}

    /// For `server.status`: no keeper.
    pub(in crate::server) fn keeper_status(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// No keeper: nothing to hold a pane's fds but the server.
    pub(in crate::server) fn check_keeper_fds_for_pane(
        &self,
    ) -> Result<(), crate::protocol::RpcError> {
        Ok(())
    }

    pub(in crate::server) fn keeper_forward_exit(
        &mut self,
        _pid: i32,
        _exit: crate::sys::ProcessExit,
    ) {
    }

    pub(in crate::server) fn keeper_stopping(&mut self) {}

    pub(in crate::server) fn keeper_tick(&mut self, _now: Instant) {}

    pub(in crate::server) fn keeper_event_logged(&mut self) {}
}
