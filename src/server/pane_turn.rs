//! How much of one turn of the loop pane output may still take: the
//! turn's time for it, whether a client arrived meanwhile, and the echo of
//! a key the loop waits for before it goes back to busy panes. The loop
//! begins each turn here after its poll; pane reading asks here before and
//! while it reads (`panes/io.rs`).

use super::clients::arrivals::Arrivals;
use super::panes::io::{ARRIVAL_CHECK_EVERY, PANE_TURN_BUDGET};
use std::time::Instant;

pub(super) struct PaneTurn {
    /// Until when this pass may read pane output; past it, ready panes
    /// wait on the backlog for the next turn, so the listener and the
    /// connections are served every few milliseconds however many panes
    /// flood.
    until: Instant,
    /// When pane reading next stops to ask `Arrivals`.
    next_arrival_check: Instant,
    /// An arrival ended this turn's pane reading: the backlog waits for
    /// the next turn, whose poll serves the arrival first.
    arrival_seen: bool,
    /// How many times an arrival ended a turn's pane reading
    /// (`server.status` `pane_passes_cut`).
    passes_cut: u64,
    /// A pane an attached client just typed into, and until when the loop
    /// waits for its echo (`panes::io::ECHO_WAIT`).
    echo_wait: Option<(u64, Instant)>,
}

impl PaneTurn {
    pub(super) fn new(now: Instant) -> PaneTurn {
        PaneTurn {
            until: now,
            next_arrival_check: now,
            arrival_seen: false,
            passes_cut: 0,
            echo_wait: None,
        }
    }

    /// A poll returned at `polled`: it served what ended the last turn's
    /// pane reading and saw whatever else had arrived.
    pub(super) fn begin(&mut self, polled: Instant) {
        self.until = polled + PANE_TURN_BUDGET;
        self.arrival_seen = false;
        self.next_arrival_check = polled + ARRIVAL_CHECK_EVERY;
    }

    /// The backlog's pass gets a budget of its own: were it what the event
    /// pass left, panes ready anew every turn would starve those waiting
    /// there. An arrival seen meanwhile keeps the turn spent.
    pub(super) fn begin_backlog_pass(&mut self, now: Instant) {
        self.until = now + PANE_TURN_BUDGET;
    }

    /// Until when the current pass may read pane output.
    pub(super) fn until(&self) -> Instant {
        self.until
    }

    /// When a paced read must stop next to ask for arrivals.
    pub(super) fn next_arrival_check(&self) -> Instant {
        self.next_arrival_check
    }

    /// This pass's time for pane output is used up, or a client arrived.
    pub(super) fn spent(&self) -> bool {
        self.arrival_seen || Instant::now() >= self.until
    }

    /// Whether a client connected or sent something since the last check,
    /// asked once `ARRIVAL_CHECK_EVERY` has passed since it (or since the
    /// poll): if so, the turn's pane reading ends here.
    pub(super) fn arrival_ends(&mut self, arrivals: &mut Arrivals) -> bool {
        if !self.arrival_seen {
            let now = Instant::now();
            if now >= self.next_arrival_check {
                self.next_arrival_check = now + ARRIVAL_CHECK_EVERY;
                self.arrival_seen = arrivals.any();
                self.passes_cut += u64::from(self.arrival_seen);
            }
        }
        self.arrival_seen
    }

    pub(super) fn passes_cut(&self) -> u64 {
        self.passes_cut
    }

    /// A client typed into `pane`: wait for its echo until `until`.
    pub(super) fn expect_echo(&mut self, pane: u64, until: Instant) {
        self.echo_wait = Some((pane, until));
    }

    /// `pane` printed: an echo awaited from it has come.
    pub(super) fn output_from(&mut self, pane: u64) {
        if self.echo_wait.is_some_and(|(p, _)| p == pane) {
            self.echo_wait = None;
        }
    }

    /// Whether the echo of another pane than `pane` is awaited, so `pane`
    /// waits on the backlog.
    pub(super) fn awaits_echo_of_other(&self, pane: u64) -> bool {
        self.echo_wait.is_some_and(|(p, _)| p != pane)
    }

    /// Until when the loop waits for an echo at `now`, if it does; a wait
    /// that has run out ends here.
    pub(super) fn echo_deadline(&mut self, now: Instant) -> Option<Instant> {
        if self.echo_wait.is_some_and(|(_, until)| until <= now) {
            self.echo_wait = None;
        }
        self.echo_wait.map(|(_, until)| until)
    }

    pub(super) fn awaits_echo(&self) -> bool {
        self.echo_wait.is_some()
    }
}
