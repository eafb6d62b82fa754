//! The server-wide event log: every notable change gets the next sequence
//! number and stays in a bounded ring, so a subscriber can ask for "all after
//! N" and miss nothing between checking state and subscribing. A subscriber
//! that asks for events already dropped from the ring gets an explicit `gap`.
//!
//! The ring is bounded by count and by bytes (an event's size is its JSON
//! text): a title can be 64 KiB, so 10,000 of them would otherwise hold
//! 640 MiB. The oldest events go first.
//!
//! Events are kept as their JSON text, not as `serde_json::Value`s: a
//! `pane.created` event is about 500 bytes of text but took 4 KB as a tree
//! of maps, which was the biggest share of an idle pane's memory after its
//! terminal (a server with 1000 idle panes held 4 MB of them). The text is
//! what subscribers and checkpoints send anyway.

use crate::protocol::events::Event;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::VecDeque;

/// Events kept for late subscribers.
pub const EVENT_RING_CAPACITY: usize = 10_000;
/// Bytes of event JSON kept for late subscribers.
pub const EVENT_RING_BYTES: usize = 8 << 20;

#[derive(Debug)]
pub struct EventLog {
    /// Each event's JSON text, oldest first; their sequence numbers are
    /// consecutive, ending at `last_seq`.
    ring: VecDeque<Box<RawValue>>,
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
    pub fn get(&self, seq: u64) -> Option<&RawValue> {
        let index = seq.checked_sub(self.oldest_seq())?;
        self.ring.get(usize::try_from(index).ok()?).map(|e| &**e)
    }

    /// The retained events, oldest first, for a live upgrade.
    pub fn ring(&self) -> Vec<Value> {
        self.ring.iter().map(|e| parsed(e)).collect()
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
                .map(|e| parsed(e))
                .collect(),
        )
    }

    /// Adds events a previous server logged after the ones this log holds.
    pub fn extend(&mut self, last_seq: u64, events: Vec<Value>) {
        for event in events {
            self.keep(&event);
        }
        self.last_seq = last_seq;
    }

    /// Rebuilds the log a previous server handed over.
    pub fn from_parts(last_seq: u64, ring: Vec<Value>) -> EventLog {
        let mut log = EventLog::new();
        log.extend(last_seq, ring);
        log
    }

    /// Numbers go on after `seq`, the last one a restored session's server
    /// gave out, so a restarted server reuses none. Only before the first
    /// event of this server (a restore starts the server): the ring must
    /// hold consecutive numbers, and what it held is dropped.
    pub fn continue_after(&mut self, seq: u64) {
        if seq > self.last_seq {
            self.ring.clear();
            self.bytes = 0;
            self.last_seq = seq;
        }
    }

    /// The `gap` a subscriber gets, at once, when it resumes after `since`,
    /// a number this server never gave out: a server before it numbered
    /// that far and ended without saving (a reboot, both of its processes
    /// killed), so those events are lost and this server's numbers go on
    /// from its snapshot's.
    pub fn gap_beyond(&self, since: u64) -> Option<Value> {
        (since > self.last_seq).then(|| {
            Event::Gap {
                from: Some(self.last_seq + 1),
                to: Some(since),
                message: format!(
                    "this server's events are numbered up to {} only: the server that numbered \
                     them up to {since} ended without saving, and its events after {} are lost; \
                     re-read state with pane.list and go on from {}",
                    self.last_seq, self.last_seq, self.last_seq
                ),
            }
            .to_value()
        })
    }

    /// Appends to the ring, dropping the oldest events beyond the bounds.
    fn keep(&mut self, event: &Value) {
        // Written as the `Value` writes itself (keys in order), so the text
        // is what subscribers got when the ring held `Value`s.
        let text = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
        let Ok(event) = RawValue::from_string(text) else {
            return;
        };
        self.bytes += event.get().len();
        self.ring.push_back(event);
        while self.ring.len() > EVENT_RING_CAPACITY
            || (self.bytes > EVENT_RING_BYTES && self.ring.len() > 1)
        {
            if let Some(dropped) = self.ring.pop_front() {
                self.bytes -= dropped.get().len();
            }
        }
        // A burst (a thousand panes created) grew the ring's slots; give
        // them back once it is mostly empty again.
        if self.ring.capacity() > 1024 && self.ring.len() * 4 < self.ring.capacity() {
            self.ring.shrink_to(self.ring.len() * 2);
        }
    }

    /// Records `event` and returns it as logged, with its `seq`.
    pub fn push(&mut self, event: &Event) -> &RawValue {
        self.last_seq += 1;
        let mut event = event.to_value();
        event["seq"] = json!(self.last_seq);
        self.keep(&event);
        self.ring.back().expect("just pushed")
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

/// An event's text as a `Value` (for the live upgrade's manifest). The
/// text was written from a `Value`, so it parses.
fn parsed(event: &RawValue) -> Value {
    serde_json::from_str(event.get()).unwrap_or(Value::Null)
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
        assert_eq!(parsed(log.get(6).unwrap())["seq"], 6);
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
        assert_eq!(parsed(log.get(oldest).unwrap())["seq"], oldest);
        assert!(log.get(oldest - 1).is_none());
        assert_eq!(log.gap_after(0).unwrap()["to"], oldest - 1);
    }
}
