//! What a server started by a live upgrade knows of its predecessor,
//! from the manifest to the end of the predecessor's probation.
//!
//! The sequence, on the new side: the import reads where the server came
//! from and which `server.upgrade` request to answer; the commit stamps
//! when it began to serve; the predecessor's channel stays open through
//! its probation, in which it may still take everything back, so no new
//! upgrade may start; its close (or a stop) ends the probation, and only
//! then is the caller answered, with how probation ended. A server that
//! was not started by an upgrade has an empty `Succession`.

use super::keeper_link::Channel;
use crate::server::clients::connection::ConnId;
use serde_json::Value;
use std::time::Instant;

#[derive(Default)]
pub(in crate::server) struct Succession {
    /// The server taken over from (pid, version, binary), for the report;
    /// `Null` on a server no upgrade started.
    from: Value,
    /// The `server.upgrade` request to answer once probation ends.
    caller: Option<(ConnId, Value)>,
    /// When this server committed (probation's length in the report).
    committed_at: Option<Instant>,
    /// The predecessor's channel, open while its probation lasts.
    predecessor: Option<Channel>,
}

impl Succession {
    /// The manifest named the server taken over from.
    pub(in crate::server) fn took_over_from(&mut self, from: Value) {
        self.from = from;
    }

    pub(in crate::server) fn from(&self) -> &Value {
        &self.from
    }

    /// The import found the connection of the `server.upgrade` request.
    pub(in crate::server) fn set_caller(&mut self, caller: Option<(ConnId, Value)>) {
        self.caller = caller;
    }

    pub(in crate::server) fn committed(&mut self, at: Instant) {
        self.committed_at = Some(at);
    }

    /// The predecessor's probation begins: its channel is watched.
    pub(in crate::server) fn watch(&mut self, predecessor: Channel) {
        self.predecessor = Some(predecessor);
    }

    /// While the predecessor may still take everything back.
    pub(in crate::server) fn in_probation(&self) -> bool {
        self.predecessor.is_some()
    }

    pub(in crate::server) fn predecessor(&self) -> Option<&Channel> {
        self.predecessor.as_ref()
    }

    /// The predecessor let go: its channel, to deregister and close.
    pub(in crate::server) fn end_probation(&mut self) -> Option<Channel> {
        self.predecessor.take()
    }

    /// The caller to answer, once, and how long probation lasted in ms
    /// (0 if this server never committed).
    pub(in crate::server) fn take_caller(&mut self) -> Option<(ConnId, Value, u64)> {
        let (conn, rpc_id) = self.caller.take()?;
        let probation_ms = self
            .committed_at
            .map_or(0, |at| at.elapsed().as_millis() as u64);
        Some((conn, rpc_id, probation_ms))
    }
}
