//! `scrollback_total_bytes`: one bound over all panes' histories together,
//! beside each pane's own `scrollback_lines` / `scrollback_bytes` (which
//! its terminal applies as lines arrive).
//!
//! Order: while the total is over the bound, the pane holding the most
//! history bytes (the lower pane id on a tie) gives up its oldest
//! compressed block; its history shows one marker line, at the top, that
//! counts the lines it lost so. A pane whose history has no compressed
//! block left (only its newest, uncompressed lines) is passed over: the
//! bound never takes the last screenfuls of a pane, so it can be exceeded
//! by at most a block or two per pane.

use serde_json::{Value, json};

use super::Server;

/// Blocks `compress_histories` compresses per loop turn: about 128 KiB of
/// lines, a fraction of a millisecond.
const HISTORY_BLOCKS_PER_TURN: usize = 4;

impl Server {
    /// Brings the panes' histories back within `scrollback_total_bytes`
    /// (see the module doc). Cheap when within it: one sum over the panes.
    pub(super) fn enforce_history_budget(&mut self) {
        let budget = self.config.scrollback_total_bytes;
        let mut total = self.history_totals().0;
        if total <= budget {
            return;
        }
        let mut passed_over: Vec<u64> = Vec::new();
        while total > budget {
            let pick = self
                .panes
                .values()
                .filter(|p| !passed_over.contains(&p.id()))
                .map(|p| (p.screen().history_stored_bytes(), std::cmp::Reverse(p.id())))
                .max();
            let Some((_, std::cmp::Reverse(id))) = pick else {
                break;
            };
            match self
                .panes
                .get_mut(&id)
                .and_then(|p| p.drop_oldest_history_block())
            {
                Some(freed) => total = total.saturating_sub(freed),
                None => passed_over.push(id),
            }
        }
    }

    /// Compresses a few blocks of the histories a live upgrade or a crash
    /// recovery put back uncompressed (`Terminal::compress_history`: a
    /// history log of lines only, from handoff version 6 or older; one of
    /// blocks leaves only its hot lines, a block at most), at
    /// most `HISTORY_BLOCKS_PER_TURN` a loop turn so that no turn waits
    /// long. Returns whether some remain (the loop then does not sleep).
    pub(super) fn compress_histories(&mut self) -> bool {
        let mut left = HISTORY_BLOCKS_PER_TURN;
        let mut more = false;
        for pane in self.panes.values_mut() {
            if !pane.screen().history_backlog() {
                continue;
            }
            if left == 0 {
                return true;
            }
            left -= pane.compress_history(left);
            more |= pane.screen().history_backlog();
        }
        more
    }

    /// All panes' history bytes: (stored, raw).
    fn history_totals(&self) -> (usize, usize) {
        self.panes.values().fold((0, 0), |(stored, raw), p| {
            let t = p.screen();
            (
                stored + t.history_stored_bytes(),
                raw + t.history_raw_bytes(),
            )
        })
    }

    /// `server.status`'s `history`: all panes' history bytes, stored and
    /// uncompressed, and the bound.
    pub(super) fn history_status(&self) -> Value {
        let (stored, raw) = self.history_totals();
        json!({
            "stored_bytes": stored,
            "raw_bytes": raw,
            "total_bytes_limit": self.config.scrollback_total_bytes,
        })
    }
}
