//! The server-wide event log: every notable change gets the next sequence
//! number and stays in a bounded ring, so a subscriber can ask for "all after
//! N" and miss nothing between checking state and subscribing. A subscriber
//! that asks for events already dropped from the ring gets an explicit `gap`.

use crate::protocol::events::Event;
use serde_json::{Value, json};
use std::collections::VecDeque;

/// Events kept for late subscribers.
pub const EVENT_RING_CAPACITY: usize = 10_000;

#[derive(Debug)]
pub struct EventLog {
    ring: VecDeque<Value>,
    /// Sequence number of the newest event; 0 before the first.
    last_seq: u64,
}

impl EventLog {
    pub fn new() -> EventLog {
        EventLog {
            ring: VecDeque::with_capacity(256),
            last_seq: 0,
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The retained events, oldest first, for a live upgrade.
    pub fn ring(&self) -> Vec<Value> {
        self.ring.iter().cloned().collect()
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
                .cloned()
                .collect(),
        )
    }

    /// Adds events a previous server logged after the ones this log holds.
    pub fn extend(&mut self, last_seq: u64, events: Vec<Value>) {
        for event in events {
            if self.ring.len() == EVENT_RING_CAPACITY {
                self.ring.pop_front();
            }
            self.ring.push_back(event);
        }
        self.last_seq = last_seq;
    }

    /// Rebuilds the log a previous server handed over.
    pub fn from_parts(last_seq: u64, ring: Vec<Value>) -> EventLog {
        let mut ring: VecDeque<Value> = ring.into();
        while ring.len() > EVENT_RING_CAPACITY {
            ring.pop_front();
        }
        EventLog { ring, last_seq }
    }

    /// Records `event` and returns it as logged, with its `seq`.
    pub fn push(&mut self, event: &Event) -> &Value {
        self.last_seq += 1;
        let mut event = event.to_value();
        event["seq"] = json!(self.last_seq);
        if self.ring.len() == EVENT_RING_CAPACITY {
            self.ring.pop_front();
        }
        self.ring.push_back(event);
        self.ring.back().expect("just pushed")
    }

    /// Events after `since`, preceded by a `gap` event when some of them were
    /// already dropped from the ring.
    pub fn since(&self, since: u64) -> Vec<Value> {
        let mut out = Vec::new();
        let oldest = self
            .ring
            .front()
            .and_then(|e| e["seq"].as_u64())
            .unwrap_or(self.last_seq + 1);
        // `since < last_seq` first: a client may send u64::MAX.
        if since < self.last_seq && since + 1 < oldest {
            let gap = Event::Gap {
                from: Some(since + 1),
                to: Some(oldest - 1),
                message: "events in this range were dropped from the server's ring; re-read state with pane.list".into(),
            };
            out.push(gap.to_value());
        }
        let skip = since.saturating_sub(oldest.saturating_sub(1)) as usize;
        out.extend(self.ring.iter().skip(skip).cloned());
        out
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
        let tail = log.since(log.last_seq() - 2);
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[0]["seq"], log.last_seq() - 1);
        let from_start = log.since(0);
        assert_eq!(from_start[0]["type"], "gap");
        assert_eq!(from_start[0]["to"], 5);
        assert_eq!(from_start[1]["seq"], 6);
        assert!(log.since(log.last_seq()).is_empty());
    }
}
