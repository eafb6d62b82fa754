//! Whether this server serves its sources, server-wide: the ownership
//! states of ARCHITECTURE.md ("Ownership states") as one value. During a live
//! upgrade every fd moves through `Owned` → `Paused` → `HandedOver` (the
//! commit; probation) → `Released`, or back to `Owned` (rollback, or a
//! take-back in probation). What is deferred while not serving lives in
//! the states that defer it, so an exit cannot be parked while `Owned` and
//! nothing can be released while `Owned`.

use crate::protocol::methods::ExitStatus;

use crate::server::timers::TimerKind;

/// What came due while not serving, caught up on if we serve again.
#[derive(Debug, Default)]
pub struct Deferred {
    /// Children reaped meanwhile (the manifest describes them as running;
    /// the new server learns their exits from the pidfds).
    pub exits: Vec<(i32, ExitStatus)>,
    /// Timers that fired meanwhile.
    pub timers: Vec<TimerKind>,
}

#[derive(Debug, Default)]
pub enum Serving {
    /// Ours: registered and served.
    #[default]
    Owned,
    /// An upgrade's blackout: still registered, but the loop ignores every
    /// source but the upgrade's own, reads nothing, writes nothing.
    Paused(Deferred),
    /// Past the commit point: the new server (`to`) serves; our copies are
    /// out of the poll and kept for a take-back until probation ends.
    HandedOver { to: u32, deferred: Deferred },
    /// Probation is over (or the stop was passed on): the loop ends and
    /// the server lets go of its copies.
    Released { to: u32 },
}

impl Serving {
    /// The loop ignores the readiness of panes, connections and the
    /// listener, and fires no timer but the upgrade's.
    pub fn is_paused(&self) -> bool {
        !matches!(self, Serving::Owned)
    }

    /// Ours and served (no upgrade paused or took our sources).
    pub fn is_owned(&self) -> bool {
        matches!(self, Serving::Owned)
    }

    /// The blackout starts.
    pub fn pause(&mut self) -> Result<(), String> {
        match self {
            Serving::Owned => {
                *self = Serving::Paused(Deferred::default());
                Ok(())
            }
            other => Err(format!("cannot pause while {}", other.name())),
        }
    }

    /// The commit point: `to` serves now.
    pub fn hand_over(&mut self, to: u32) {
        if let Serving::Paused(deferred) = std::mem::take(self) {
            *self = Serving::HandedOver { to, deferred };
        }
    }

    /// Probation is over: let go for good. `None` unless handed over.
    pub fn release(&mut self) -> Option<u32> {
        match *self {
            Serving::HandedOver { to, .. } => {
                *self = Serving::Released { to };
                Some(to)
            }
            _ => None,
        }
    }

    /// Serve again (rollback or take-back): what was deferred, and whether
    /// the sources had left the poll (after the commit). `None` if we
    /// were serving.
    pub fn resume(&mut self) -> Option<(Deferred, bool)> {
        match std::mem::take(self) {
            Serving::Paused(deferred) => Some((deferred, false)),
            Serving::HandedOver { deferred, .. } => Some((deferred, true)),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Parks a reaped exit while not serving; while `Owned` it is handed
    /// back to be processed now.
    pub fn defer_exit(&mut self, pid: i32, status: ExitStatus) -> Option<(i32, ExitStatus)> {
        match self {
            Serving::Paused(d) | Serving::HandedOver { deferred: d, .. } => {
                d.exits.push((pid, status));
                None
            }
            // Released: the new server owns every pane; nothing to do.
            Serving::Released { .. } => None,
            Serving::Owned => Some((pid, status)),
        }
    }

    /// Parks a fired timer while not serving; while `Owned` it is handed
    /// back to be acted on now.
    pub fn defer_timer(&mut self, timer: TimerKind) -> Option<TimerKind> {
        match self {
            Serving::Paused(d) | Serving::HandedOver { deferred: d, .. } => {
                d.timers.push(timer);
                None
            }
            Serving::Released { .. } => None,
            Serving::Owned => Some(timer),
        }
    }

    /// The new server's pid once released to it.
    pub fn released_to(&self) -> Option<u32> {
        match self {
            Serving::Released { to } => Some(*to),
            _ => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Serving::Owned => "owned",
            Serving::Paused(_) => "paused",
            Serving::HandedOver { .. } => "handed over",
            Serving::Released { .. } => "released",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_deferred_or_released_while_owned() {
        let mut s = Serving::Owned;
        assert!(!s.is_paused());
        assert_eq!(
            s.defer_exit(7, ExitStatus::Code(0)),
            Some((7, ExitStatus::Code(0)))
        );
        assert!(s.defer_timer(TimerKind::HistoryTick).is_some());
        assert_eq!(s.release(), None);
        assert!(s.resume().is_none());
        assert!(matches!(s, Serving::Owned));
    }

    #[test]
    fn a_rollback_returns_what_the_pause_deferred() {
        let mut s = Serving::Owned;
        s.pause().unwrap();
        assert!(s.pause().is_err(), "paused twice");
        assert!(s.is_paused());
        assert_eq!(s.defer_exit(7, ExitStatus::Code(1)), None);
        assert_eq!(s.defer_timer(TimerKind::HistoryTick), None);
        assert_eq!(s.release(), None, "released before the commit");
        let (deferred, reregister) = s.resume().unwrap();
        assert_eq!(deferred.exits, vec![(7, ExitStatus::Code(1))]);
        assert_eq!(deferred.timers.len(), 1);
        assert!(!reregister, "before the commit nothing left the poll");
        assert!(matches!(s, Serving::Owned));
    }

    #[test]
    fn a_take_back_reregisters_and_a_release_is_final() {
        let mut s = Serving::Owned;
        s.hand_over(42);
        assert!(matches!(s, Serving::Owned), "handed over without a pause");
        s.pause().unwrap();
        s.defer_exit(7, ExitStatus::Signal(9));
        s.hand_over(42);
        assert!(s.is_paused());
        let (deferred, reregister) = s.resume().unwrap();
        assert_eq!(deferred.exits.len(), 1);
        assert!(reregister, "after the commit the sources left the poll");

        s.pause().unwrap();
        s.hand_over(43);
        assert_eq!(s.release(), Some(43));
        assert_eq!(s.released_to(), Some(43));
        assert!(s.resume().is_none(), "a release is final");
        assert_eq!(s.defer_exit(8, ExitStatus::Code(0)), None);
        assert!(s.is_paused());
    }
}
