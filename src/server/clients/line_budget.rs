//! One budget for what all connections together can make the server hold
//! of their input: unfinished request lines, half-sent attach frames of
//! every kind, and an INPUT frame held back while its pane's input is
//! full (`attach.rs`).
//!
//! Each connection may hold up to 1 MiB of it (a request line, or a
//! frame's payload), which alone would let a thousand connections cost a
//! gigabyte. Past [`CLIENT_INPUT_BUDGET`] in total, the connection holding
//! the most is refused (a JSON client with `too_large`, an attached one
//! with EXIT reason `too_large`) and closed, until the total is within the
//! budget again: the cost falls on whoever holds the most.

use super::connection::ConnId;
use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;
use serde_json::{Value, json};

/// Bytes of client input all connections may hold together.
pub const CLIENT_INPUT_BUDGET: usize = 64 << 20;

/// A connection holding less than this never triggers the
/// (O(connections)) check.
const CHECK_ABOVE: usize = 64 << 10;

/// The connections refused for the budget, for `server.status`.
#[derive(Debug, Default)]
pub struct InputBudget {
    refused: u64,
}

impl Server {
    /// After `id` read input: if it holds a sizeable buffer and all
    /// connections together are over [`CLIENT_INPUT_BUDGET`], refuses the
    /// connections holding the most until they are not.
    pub(in crate::server) fn enforce_client_input_budget(&mut self, id: ConnId) {
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        if conn.inbuf.capacity() < CHECK_ABOVE {
            return;
        }
        loop {
            let (total, largest) = self.client_input_held();
            if total <= CLIENT_INPUT_BUDGET {
                return;
            }
            let Some((victim, len)) = largest else {
                return;
            };
            self.refuse_for_budget(victim, total, len);
        }
    }

    /// The input all connections hold (capacity: the memory held, whatever
    /// part of it is in use), and the connection holding the most.
    fn client_input_held(&self) -> (usize, Option<(ConnId, usize)>) {
        let mut total = 0;
        let mut largest: Option<(ConnId, usize)> = None;
        for (cid, c) in &self.conns {
            let held = c.inbuf.capacity();
            total += held;
            if c.closing.is_none() && held > 0 && largest.is_none_or(|(_, most)| held > most) {
                largest = Some((*cid, held));
            }
        }
        (total, largest)
    }

    fn refuse_for_budget(&mut self, victim: ConnId, total: usize, held: usize) {
        let Some(c) = self.conns.get_mut(&victim) else {
            return;
        };
        let attached = c.is_attached();
        let message = format!(
            "connections hold {} MiB of input the server has not handled yet (unfinished \
             request lines and frames), over its {} MiB budget; this connection holds the most \
             ({} KiB), so it is closed. Send each request line and frame whole",
            total >> 20,
            CLIENT_INPUT_BUDGET >> 20,
            held >> 10
        );
        self.log.log("client_input_over_budget", &message);
        // The memory goes now, not when the connection is gone.
        c.inbuf = Vec::new();
        c.line_scanned = 0;
        if let Some(a) = c.attachment_mut() {
            a.input_held = None;
        }
        self.input_budget.refused += 1;
        if attached {
            self.end_attachment(
                victim,
                &json!({ "reason": "too_large", "message": message }),
                false,
            );
        } else {
            self.respond(
                victim,
                &Value::Null,
                Err(RpcError::new(ErrorCode::TooLarge, message)),
            );
        }
        self.close_after_flush(victim);
    }

    /// `server.status` `client_input`.
    pub(in crate::server) fn client_input_status(&self) -> Value {
        let (total, largest) = self.client_input_held();
        json!({
            "bytes": total,
            "largest_bytes": largest.map_or(0, |(_, held)| held),
            "budget_bytes": CLIENT_INPUT_BUDGET,
            "refused": self.input_budget.refused,
        })
    }
}
