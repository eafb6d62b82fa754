//! Pane I/O: reading a pane's output (paced for slow attached clients,
//! at most a budget per wakeup), feeding its screen and forwarding to
//! attached clients, the end of output (EIO), turning what the screen
//! noticed into events, and writing pending input with its acks.

use super::pane::OutputRead;
use crate::model::PaneId;
use crate::protocol::events::Event;
use crate::server::clients::connection::{
    ConnId, OUTPUT_HIGH_WATER, OUTPUT_LOW_WATER, STALL_LIMIT,
};
use crate::server::timers::TimerKind;
use crate::server::{Server, Source};
use crate::term::TermEvent;
use std::time::{Duration, Instant};

/// Output bytes taken from one pane per wakeup, so a flooding pane cannot
/// starve the others or the clients. Not smaller: 16 KiB slices while a
/// client typed were measured to make the echo beside a flood
/// slower at the median (twice, on 2 cores): the loop no longer read the
/// flooding PTY dry, so it never slept, and the scheduler then treated it
/// as the CPU hog it had become.
const PANE_READ_BUDGET: usize = 64 * 1024;
/// Time each of the loop's two passes (ready panes, then the backlog) may
/// spend reading pane output per turn: the rest waits on the backlog
/// (first in line there), so the loop polls at least every twice this,
/// however many panes flood. A connection or a keystroke waits less: its
/// arrival ends the pass (`ARRIVAL_CHECK_EVERY`).
pub(in crate::server) const PANE_TURN_BUDGET: Duration = Duration::from_millis(3);
/// How long the loop waits for the echo of a key an attached client typed
/// before it goes back to the busy panes on the backlog. Meanwhile it
/// sleeps in `poll` instead of feeding a flood: the typed-into program gets
/// the CPU the loop would have taken, and its echo is read and sent the
/// moment it comes, not after another pane's slice.
/// The wait ends early when the pane prints; a program
/// that prints nothing for a key costs the flood this much. Still needed
/// with the arrival check (which watches clients, not panes): without it
/// the echo beside a flood took about twice as long at the median.
pub(in crate::server) const ECHO_WAIT: Duration = Duration::from_millis(2);
/// Time spent reading pane output between two checks for a client that
/// connected or sent something meanwhile (`arrivals.rs`): one arriving
/// ends the turn's pane reading there, so the loop polls and serves it at
/// once instead of after the rest of the turn's `PANE_TURN_BUDGET`. The
/// check is one zero-timeout poll, made after the first read past this
/// (a read returns at most ~4 KiB): every few reads of plain text on an
/// idle machine, after every read on a busy one, where a read and its
/// feeding take longer than this in wall time (measured beside a flood on
/// 2 loaded cores: ~200 us per read, and a key waited a median ~590 us for
/// the check when it came every 16 KiB instead).
pub(in crate::server) const ARRIVAL_CHECK_EVERY: Duration = Duration::from_micros(100);
/// Capacity of the forwarding buffer kept between reads (a slice's worth
/// and what the model adds to it).
const FORWARD_KEEP: usize = 2 * PANE_READ_BUDGET;
/// Output drained from a pane when its process exits, so the exit is
/// reported after the output the process wrote before it.
pub(in crate::server) const EXIT_DRAIN_BUDGET: usize = 1 << 20;
/// How often the clients holding a paused pane are checked for progress.
const STALL_CHECK: Duration = Duration::from_secs(1);

impl Server {
    /// A pane's master is ready: write pending input if it is writable,
    /// read output if it is readable (or hung up) and the pane is not on
    /// the backlog already: the backlog pass of this same turn reads it,
    /// and reading it here too would give a flooding pane two slices per
    /// turn, each delaying every keystroke behind it.
    pub(in crate::server) fn on_pane_ready(&mut self, id: u64, event: &mio::event::Event) {
        if event.is_writable() {
            self.flush_pane_input(id);
        }
        let backlogged = self.panes.get(&id).is_some_and(|p| p.is_backlogged());
        if !backlogged && (event.is_readable() || event.is_read_closed() || event.is_error()) {
            self.read_pane_paced(id);
        }
    }

    /// Panes whose backend woke the loop (`pty::PaneWakes`: Windows, whose
    /// pseudo consoles cannot be polled; they share the loop's `WAKE`): each is treated as a readable
    /// and writable master, and an exit the backend saw is reported after
    /// the output read before it (on Unix SIGCHLD reports exits).
    pub(in crate::server) fn on_panes_woken(&mut self) {
        // Paused for a live upgrade (Unix, whose panes never wake this
        // way): nothing to take.
        if self.serving.is_paused() {
            return;
        }
        for id in self.pane_wakes.take_ready() {
            self.flush_pane_input(id);
            if !self.panes.get(&id).is_some_and(|p| p.is_backlogged()) {
                self.read_pane_paced(id);
            }
            let exit = self
                .panes
                .get(&id)
                .filter(|p| p.is_running())
                .and_then(|p| p.fds().master().or(p.fds().hung_up_master()))
                .and_then(crate::pty::PtyMaster::exit_code);
            if let Some(code) = exit {
                self.on_pane_exit(id, crate::protocol::methods::ExitStatus::Code(code as i32));
            }
        }
    }

    /// Reads a pane's output unless one of its attached clients is over the
    /// high-water mark: then the pane is paused instead, so its program
    /// blocks on a full PTY as it would with a terminal that stops reading,
    /// until `flush_conns` sees the clients catch up. (The drain at exit does
    /// not pause: the exit must come after all output.)
    pub(in crate::server) fn read_pane_paced(&mut self, id: u64) {
        // Held for a live upgrade: read again after a rollback (the backlog).
        if self.panes.get(&id).is_some_and(|p| p.held_for_upgrade()) {
            return;
        }
        // Past the turn's time for output, or another pane's echo is
        // awaited: this one waits on the backlog.
        let echo_first = self.pane_turn.awaits_echo_of_other(id);
        if echo_first || self.pane_turn_spent() || self.arrival_ends_turn() {
            if let Some(pane) = self.panes.get_mut(&id)
                && pane.enter_backlog()
            {
                self.backlog.push_back(Source::Pane(id));
            }
            return;
        }
        if self.attached_output_over(id, OUTPUT_HIGH_WATER) {
            if let Some(pane) = self.panes.get_mut(&id)
                && pane.pause_output()
            {
                self.timers
                    .add(Instant::now() + STALL_CHECK, TimerKind::PaneStall(id));
            }
            return;
        }
        self.read_pane(id, PANE_READ_BUDGET, Some(self.pane_turn.until()));
    }

    /// This turn's time for pane output is used up (`PANE_TURN_BUDGET`),
    /// or a client arrived meanwhile (`arrival_ends_turn`).
    pub(in crate::server) fn pane_turn_spent(&self) -> bool {
        self.pane_turn.spent()
    }

    /// Whether a client connected or sent something meanwhile: then the
    /// turn's pane reading ends here (`PaneTurn::arrival_ends`).
    fn arrival_ends_turn(&mut self) -> bool {
        self.pane_turn.arrival_ends(&mut self.arrivals)
    }

    /// Whether a lossless client attached to `pane` has more than `limit`
    /// bytes queued (a `when_behind: redraw` client never holds its pane).
    fn attached_output_over(&self, pane: u64, limit: usize) -> bool {
        self.conns
            .values()
            .any(|c| c.paces(pane) && c.queued() > limit)
    }

    /// Reads paused panes again whose clients have caught up (or left).
    pub(in crate::server) fn resume_paused_panes(&mut self) {
        let paused: Vec<u64> = self
            .panes
            .values()
            .filter(|p| p.output_paused())
            .map(|p| p.id())
            .collect();
        for id in paused {
            if !self.attached_output_over(id, OUTPUT_LOW_WATER)
                && let Some(pane) = self.panes.get_mut(&id)
            {
                pane.resume_output();
                self.backlog.push_back(Source::Pane(id));
            }
        }
    }

    /// Disconnects the clients that keep a paused pane paused without taking
    /// any output for [`STALL_LIMIT`]: one stuck client must not freeze the
    /// pane for everyone.
    pub(in crate::server) fn check_stalled_clients(&mut self, pane: u64, now: Instant) {
        if !self
            .panes
            .get_mut(&pane)
            .is_some_and(|p| p.stall_check_due())
        {
            return;
        }
        let stuck: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.paces(pane)
                    && c.queued() > OUTPUT_LOW_WATER
                    && now.duration_since(c.last_progress) >= STALL_LIMIT
            })
            .map(|(id, _)| *id)
            .collect();
        for id in stuck {
            self.log.log(
                "client_too_slow",
                &format!(
                    "client {id} took no output for {} s while its pane was paused; disconnected",
                    STALL_LIMIT.as_secs()
                ),
            );
            let payload = serde_json::json!({
                "reason": "too_slow",
                "message": "disconnected: this client stopped reading output; reattach to resume"
            });
            self.end_attachment(id, &payload, true);
        }
        self.timers
            .add(now + STALL_CHECK, TimerKind::PaneStall(pane));
    }

    /// Reads a pane's output (at most `budget` bytes, and no read after
    /// `until`), feeds the screen and forwards to attached clients. At the
    /// end of output the master leaves the poll (`Pane::end_output`). A
    /// paced read (with `until`) also ends early for an arriving client
    /// (`arrival_ends_turn`), leaving the rest for the backlog.
    pub(in crate::server) fn read_pane(&mut self, id: u64, budget: usize, until: Option<Instant>) {
        let Some(pane) = self.panes.get(&id) else {
            return;
        };
        if pane.fds().master().is_none() {
            return;
        }
        let mut forward = std::mem::take(&mut self.forward);
        forward.clear();
        let switches = pane.screen().screen_switches();
        let mut read = OutputRead {
            taken: 0,
            more: false,
            ended: false,
        };
        // A paced read stops at each arrival check, to ask.
        while let Some(pane) = self.panes.get_mut(&id) {
            let slice_until = until.map(|t| t.min(self.pane_turn.next_arrival_check()));
            let got = pane.read_output(budget - read.taken, slice_until, &mut forward);
            read.taken += got.taken;
            read.more = got.more;
            read.ended = got.ended;
            // Stopped by anything but the clock (dry, ended, a full ring,
            // the budget), or out of the turn's time.
            if !got.more
                || got.taken == 0
                || read.taken >= budget
                || until.is_none_or(|t| Instant::now() >= t)
                || self.arrival_ends_turn()
            {
                break;
            }
        }
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let switched = pane.screen().screen_switches() != switches;
        if read.more && pane.enter_backlog() {
            self.backlog.push_back(Source::Pane(id));
        }
        let replied = pane.answer_queries();
        let term_events = pane.take_term_events();
        if read.ended {
            pane.end_output(self.poll.registry());
        }
        if replied {
            self.flush_pane_input(id);
        }
        if !forward.is_empty() {
            self.broadcast_output(id, &forward, switched);
        }
        // Kept for the next read, unless one read made it large.
        if forward.capacity() <= FORWARD_KEEP {
            self.forward = forward;
        }
        if read.taken > 0 {
            self.pane_turn.output_from(id);
            self.keeper.mark_dirty();
            self.check_text_waits(id);
        }
        if !term_events.is_empty() {
            self.on_term_events(id, term_events);
        }
    }

    /// Turns what the terminal model noticed into events (and answers waits
    /// on prompts and finished commands).
    fn on_term_events(&mut self, id: u64, term_events: Vec<TermEvent>) {
        let pane = PaneId::new(id);
        let mut rang = false;
        for event in term_events {
            match event {
                // A program ringing in a loop gets one event per read batch.
                TermEvent::Bell if rang => {}
                TermEvent::Bell => {
                    rang = true;
                    self.emit(Event::PaneBell { pane });
                }
                TermEvent::Title(title) => {
                    self.emit(Event::PaneTitle { pane, title });
                }
                TermEvent::Cwd(path) => {
                    let dir = std::path::PathBuf::from(&path);
                    if dir.is_absolute()
                        && let Some(pane) = self.panes.get_mut(&id)
                        && pane.move_to(dir)
                    {
                        self.mark_dirty();
                    }
                    self.emit(Event::PaneCwd { pane, cwd: path });
                }
                TermEvent::Prompt => {
                    if let Some(pane) = self.panes.get_mut(&id) {
                        pane.note_prompt();
                    }
                    self.emit(Event::PanePrompt { pane });
                    self.on_shell_mark(id);
                }
                TermEvent::CommandStart => {
                    self.emit(Event::PaneCommandStarted { pane });
                }
                TermEvent::CommandFinished { exit } => {
                    if let Some(pane) = self.panes.get_mut(&id) {
                        pane.note_command_finished(exit);
                    }
                    self.emit(Event::PaneCommandFinished { pane, exit });
                    self.on_shell_mark(id);
                }
            }
        }
    }

    /// Writes pending input to a pane and acknowledges the requests whose
    /// bytes are now all in the PTY.
    pub(in crate::server) fn flush_pane_input(&mut self, id: u64) {
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        if let Err(e) = pane.flush_input() {
            // The slave side is gone; the exit will be reported by SIGCHLD.
            pane.discard_input();
            let msg = format!("writing input to pane {}: {e}", pane.public_id());
            self.log.log("input_failed", &msg);
        }
        pane.watch_input_room(self.poll.registry());
        if pane.pending_input() <= super::pane::MAX_PENDING_INPUT / 2
            && self.input_held_for.contains(&id)
        {
            self.release_held_input(id);
        }
        let Some(pane) = self.panes.get_mut(&id) else {
            return;
        };
        let (prompts, finished) = (pane.prompts_seen(), pane.commands_finished());
        let acks = pane.take_written_acks();
        if acks.is_empty() {
            return;
        }
        let output_bytes = pane.output_checkpoint();
        for ack in acks {
            let duplicate = ack.duplicate;
            self.respond(
                ack.conn,
                &ack.rpc_id,
                Ok(serde_json::json!({
                    "written": true,
                    "duplicate": duplicate,
                    "prompts_seen": prompts,
                    "commands_finished": finished,
                    "output_bytes": output_bytes,
                })),
            );
        }
    }
}
