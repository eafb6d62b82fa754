//! One budget for the unfinished request lines of all connections together.
//!
//! Each connection may hold a partial line of up to 1 MiB (the request line
//! limit), which alone would let a few hundred idle connections cost
//! hundreds of megabytes. Past [`PARTIAL_LINES_BUDGET`] in total, the
//! connection holding the largest partial line is refused with `too_large`
//! and closed, so the cost falls on whoever holds the most.

use super::connection::{ConnId, ConnMode};
use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;

/// Bytes of unfinished request lines all connections may hold together.
pub const PARTIAL_LINES_BUDGET: usize = 64 << 20;

/// A partial line below this never triggers the (O(connections)) check.
const CHECK_ABOVE: usize = 64 << 10;

impl Server {
    /// After `id` read input: if it holds a sizeable partial line and all
    /// connections together are over [`PARTIAL_LINES_BUDGET`], refuses the
    /// connection with the largest partial line.
    pub(in crate::server) fn enforce_partial_line_budget(&mut self, id: ConnId) {
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        if conn.inbuf.len() < CHECK_ABOVE || conn.mode != ConnMode::Rpc {
            return;
        }
        let mut total = 0;
        let mut largest: Option<(ConnId, usize)> = None;
        for (cid, c) in &self.conns {
            if c.mode != ConnMode::Rpc || c.closing.is_some() {
                continue;
            }
            // Capacity: the memory held, whatever part of it is in use.
            total += c.inbuf.capacity();
            if largest.is_none_or(|(_, len)| c.inbuf.len() > len) {
                largest = Some((*cid, c.inbuf.len()));
            }
        }
        if total <= PARTIAL_LINES_BUDGET {
            return;
        }
        let Some((victim, len)) = largest else {
            return;
        };
        let message = format!(
            "connections hold {} MiB of unfinished request lines, over the server's {} MiB \
             budget; this connection's ({} KiB) is the largest, so it is closed. Send each \
             request as one complete line",
            total >> 20,
            PARTIAL_LINES_BUDGET >> 20,
            len >> 10
        );
        self.log.log("partial_lines_over_budget", &message);
        if let Some(c) = self.conns.get_mut(&victim) {
            c.inbuf = Vec::new();
            c.line_scanned = 0;
        }
        self.respond(
            victim,
            &serde_json::Value::Null,
            Err(RpcError::new(ErrorCode::TooLarge, message)),
        );
        self.close_after_flush(victim);
    }
}
