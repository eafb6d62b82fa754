//! The server-wide event log: every notable change gets the next sequence
//! number and stays in a bounded ring, so a subscriber can ask for "all after
//! N" and miss nothing between checking state and subscribing. A subscriber
//! that asks for events already dropped from the ring gets an explicit `gap`.
//!
//! The ring is bounded by count and by bytes (an event's size is its JSON
//! text): a title can be 64 KiB, so 10,000 of them would otherwise hold
//! 640 MiB. The oldest events go first.

use crate::protocol::events::Event;
use serde_json::{Value, json};
use std::collections::VecDeque;

/// Events kept for late subscribers.
pub const EVENT_RING_CAPACITY: usize = 10_000;
/// Bytes of event JSON kept for late subscribers.
pub const EVENT_RING_BYTES: usize = 8 << 20;

#[derive(Debug)]
pub struct EventLog {
    /// Each event with the size of its JSON text, oldest first; their
    /// sequence numbers are consecutive, ending at `last_seq`.
    ring: VecDeque<(Value, usize)>,
    /// The sum of the sizes in `ring`.
    bytes: usize,
    /// Sequence number of the newest event; 0 before the first.
    last_seq: u64,
}

impl EventLog {
    pub fn new() -> EventLog {
        EventLog {
            ring: VecDeque::with_capacity(256),
            bytes: 0,
            last_seq: 0,
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Sequence number of the oldest event held (`last_seq + 1` when none).
    pub fn oldest_seq(&self) -> u64 {
        self.last_seq
            .saturating_add(1)
            .saturating_sub(self.ring.len() as u64)
    }

    /// Bytes of event JSON held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The event numbered `seq`, if the ring still holds it.
    pub fn get(&self, seq: u64) -> Option<&Value> {
        let index = seq.checked_sub(self.oldest_seq())?;
        self.ring.get(usize::try_from(index).ok()?).map(|(e, _)| e)
    }

    /// The retained events, oldest first, for a live upgrade.
    pub fn ring(&self) -> Vec<Value> {
        self.ring.iter().map(|(e, _)| e.clone()).collect()
    }

    /// Every event after `seq`, if the ring still holds all of them.
    pub fn after(&self, seq: u64) -> Option<Vec<Value>> {
        let count = self.last_seq.checked_sub(seq)?;
        if count > self.ring.len() as u64 {
            return None;
        }
        Some(
            self.ring
                .range(self.ring.len() - count as usize..)
                .map(|(e, _)| e.clone())
                .collect(),
        )
    }

    /// Adds events a previous server logged after the ones this log holds.
    pub fn extend(&mut self, last_seq: u64, events: Vec<Value>) {
        for event in events {
            self.keep(event);
        }
        self.last_seq = last_seq;
    }

    /// Rebuilds the log a previous server handed over.
    pub fn from_parts(last_seq: u64, ring: Vec<Value>) -> EventLog {
        let mut log = EventLog::new();
        log.extend(last_seq, ring);
        log
    }

    /// Appends to the ring, dropping the oldest events beyond the bounds.
    fn keep(&mut self, event: Value) {
        let size = serde_json::to_vec(&event).map_or(0, |v| v.len());
        self.ring.push_back((event, size));
        self.bytes += size;
        while self.ring.len() > EVENT_RING_CAPACITY
            || (self.bytes > EVENT_RING_BYTES && self.ring.len() > 1)
        {
            if let Some((_, dropped)) = self.ring.pop_front() {
                self.bytes -= dropped;
            }
        }
    }

    /// Records `event` and returns it as logged, with its `seq`.
    pub fn push(&mut self, event: &Event) -> &Value {
        self.last_seq += 1;
        let mut event = event.to_value();
        event["seq"] = json!(self.last_seq);
        self.keep(event);
        &self.ring.back().expect("just pushed").0
    }

    /// The `gap` event a subscriber resuming after `since` gets when the
    /// ring no longer holds the events that follow it.
    pub fn gap_after(&self, since: u64) -> Option<Value> {
        let oldest = self.oldest_seq();
        // `since < last_seq` first: a client may send u64::MAX.
        (since < self.last_seq && since + 1 < oldest).then(|| {
            Event::Gap {
                from: Some(since + 1),
                to: Some(oldest - 1),
                message: "events in this range were dropped from the server's ring; re-read state with pane.list".into(),
            }
            .to_value()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_and_reports_gaps() {
        let mut log = EventLog::new();
        for _ in 0..EVENT_RING_CAPACITY + 5 {
            log.push(&Event::PaneBell {
                pane: crate::model::PaneId::new(1),
            });
        }
        let tail = log.after(log.last_seq() - 2).unwrap();
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[0]["seq"], log.last_seq() - 1);
        let gap = log.gap_after(0).unwrap();
        assert_eq!((&gap["from"], &gap["to"]), (&json!(1), &json!(5)));
        assert_eq!(log.get(6).unwrap()["seq"], 6);
        assert!(log.gap_after(5).is_none());
        assert!(log.gap_after(u64::MAX).is_none());
    }

    #[test]
    fn the_ring_is_bounded_by_bytes() {
        let mut log = EventLog::new();
        let title = "t".repeat(60_000);
        for _ in 0..1000 {
            log.push(&Event::PaneTitle {
                pane: crate::model::PaneId::new(1),
                title: title.clone(),
            });
        }
        assert!(log.bytes() <= EVENT_RING_BYTES, "{}", log.bytes());
        assert!(log.ring.len() < 200, "{}", log.ring.len());
        let oldest = log.oldest_seq();
        assert_eq!(log.get(oldest).unwrap()["seq"], oldest);
        assert!(log.get(oldest - 1).is_none());
        assert_eq!(log.gap_after(0).unwrap()["to"], oldest - 1);
    }
}
