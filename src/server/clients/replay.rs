//! Replaying the event ring to a subscriber at the pace it reads.
//!
//! `events.subscribe {since}` may ask for more than a client's output queue
//! holds (the ring keeps up to 8 MiB; the queue 4 MiB). Rather than queue it
//! all, or drop what does not fit, the connection keeps a cursor: the
//! replay is queued a slice at a time as the socket drains, and live events
//! wait in the ring until the replay reaches them, so the subscriber sees
//! every event once, in order. Events the ring drops before the replay gets
//! to them are announced with a `gap` naming their range.

use super::connection::Connection;
use crate::protocol::event_line;
use crate::server::events::EventLog;

/// A replay refills a subscriber's queue while it holds less than this.
pub const REPLAY_REFILL_BELOW: usize = 1 << 20;

/// Queues the next events of `conn`'s replay, if one is under way, until its
/// queue holds [`REPLAY_REFILL_BELOW`] bytes or the replay has caught up;
/// from then on the connection gets live events as they happen.
pub fn continue_replay(conn: &mut Connection, log: &EventLog) {
    let Some(mut after) = conn.replay_after else {
        return;
    };
    if conn.closing.is_some() {
        conn.replay_after = None;
        return;
    }
    if let Some(gap) = log.gap_after(after) {
        if !conn.queue(&event_line(&gap)) {
            return;
        }
        after = log.oldest_seq() - 1;
    }
    while conn.queued() < REPLAY_REFILL_BELOW {
        let Some(event) = after.checked_add(1).and_then(|next| log.get(next)) else {
            conn.replay_after = None;
            return;
        };
        if !conn.queue(&event_line(event)) {
            if conn.queued() > 0 {
                break;
            }
            // Larger than a whole queue: it can never be sent. Say so in
            // its place rather than stall the replay on it.
            let seq = after + 1;
            let gap = serde_json::json!({
                "type": "gap", "from": seq, "to": seq,
                "message": "this event is larger than a client's output queue and cannot be replayed",
            });
            if !conn.queue(&event_line(&gap)) {
                break;
            }
        }
        after += 1;
    }
    conn.replay_after = Some(after);
}
