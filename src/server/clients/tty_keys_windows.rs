//! Keys from a client's terminal on Windows: never read by the server.
//! The server reads keys only from a terminal it writes to
//! (`direct_tty_windows.rs`: none), so every key comes as an INPUT frame.
//! `KEYS_ON` is ignored as a frame of unknown kind is; the client keeps
//! its keys.

use super::connection::ConnId;
use crate::server::Server;
use std::time::Instant;

impl Server {
    /// Ignored: there is no terminal to read the keys from.
    pub(in crate::server) fn keys_on(&mut self, _conn: ConnId, _payload: &[u8]) {}

    /// Never called: no terminal's keys are on the backlog.
    pub(in crate::server) fn read_tty_keys(&mut self, _conn: ConnId) {}

    /// No keys are held in a terminal, so none can stall.
    pub(in crate::server) fn check_keys_stall(&mut self, _conn: ConnId, _now: Instant) {}
}
