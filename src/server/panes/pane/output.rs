//! A pane's output path: reads from the PTY into its screen, pausing for
//! slow clients, the loop's backlog, and the raw-output ring the keeper
//! holds for crash recovery.

use super::*;

impl Pane {
    /// Reads output until the PTY is empty, output ends, `budget` bytes
    /// were taken or the clock passed `until`, feeding the screen; `forward`
    /// gets what attached clients are sent (the output minus the queries the
    /// screen answers itself). The clock is looked at after each read: a
    /// slice of output that is slow to feed (`yes`: a scroll per two bytes)
    /// stops there instead of holding the loop for the whole byte budget.
    pub fn read_output(
        &mut self,
        budget: usize,
        until: Option<Instant>,
        forward: &mut Vec<u8>,
    ) -> OutputRead {
        let mut read = OutputRead {
            taken: 0,
            more: false,
            ended: false,
        };
        let Some(master) = self.fds.master() else {
            return read;
        };
        let mut buf = [0u8; 16 * 1024];
        loop {
            // A full ring waits for the next checkpoint: the PTY holds
            // what does not fit, so nothing is lost to a crash meanwhile.
            let room = match &self.ring {
                Some(r) => (r.capacity() as u64)
                    .saturating_sub(r.written() - self.ring_saved)
                    .min(buf.len() as u64) as usize,
                None => buf.len(),
            };
            if room == 0 {
                read.more = true;
                break;
            }
            // Straight into the ring where there is one (see
            // `OutputRing::reserve`: nothing read is lost to a crash).
            let result = match &mut self.ring {
                Some(ring) => {
                    let result = master.read(ring.reserve(room));
                    ring.commit(*result.as_ref().unwrap_or(&0));
                    result
                }
                None => master.read(&mut buf[..room]),
            };
            match result {
                Ok(0) => {
                    read.ended = true;
                    break;
                }
                Ok(n) => {
                    let data = match &self.ring {
                        Some(ring) => ring.last(n),
                        None => &buf[..n],
                    };
                    // The model hands the log the text it decodes, so
                    // each byte is looked at once.
                    self.screen.feed_logged(data, forward, &mut self.output);
                    self.output.fed(n);
                    if let Some(ring) = &self.ring {
                        self.ring_fed = ring.written();
                    }
                    read.taken += n;
                    if read.taken >= budget || until.is_some_and(|t| Instant::now() >= t) {
                        read.more = true;
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EIO: every slave fd is closed. See the PtyMaster::read doc.
                Err(_) => {
                    read.ended = true;
                    break;
                }
            }
        }
        if read.taken > 0 {
            self.last_output = Instant::now();
            self.history_dirty = true;
        }
        read
    }

    pub fn end_output(&mut self, registry: &mio::Registry) {
        let running = self.is_running();
        self.fds.end_output(registry, running);
    }

    /// Queues the screen's answers to terminal queries as input; whether
    /// there were any.
    pub fn answer_queries(&mut self) -> bool {
        let replies = self.screen.take_replies();
        if replies.is_empty() {
            return false;
        }
        self.queue_reply(&replies);
        true
    }

    /// What the screen noticed since last asked (title, bell, marks, cwd).
    pub fn take_term_events(&mut self) -> Vec<TermEvent> {
        self.screen.take_events()
    }

    /// Stops reading output until the attached clients catch up. Returns
    /// whether a stall check must be armed (none is pending).
    pub fn pause_output(&mut self) -> bool {
        std::mem::replace(&mut self.pace, ClientPace::Paused) == ClientPace::Reading
    }

    /// Reads output again.
    pub fn resume_output(&mut self) {
        if self.pace == ClientPace::Paused {
            self.pace = ClientPace::ResumedCheckPending;
        }
    }

    /// Marks the pane as on the backlog; returns whether it was not yet
    /// (then the caller puts it there).
    pub fn enter_backlog(&mut self) -> bool {
        !std::mem::replace(&mut self.backlogged, true)
    }

    /// Taken off the backlog (to be read, or dropped while paused).
    pub fn leave_backlog(&mut self) {
        self.backlogged = false;
    }

    pub fn is_backlogged(&self) -> bool {
        self.backlogged
    }

    /// The stall check fired: whether the pane is still paused (and the
    /// check goes on); if not, no check is pending any more.
    pub fn stall_check_due(&mut self) -> bool {
        if self.pace == ClientPace::ResumedCheckPending {
            self.pace = ClientPace::Reading;
        }
        self.pace == ClientPace::Paused
    }

    pub fn ring(&self) -> Option<&crate::server::continuity::output_ring::OutputRing> {
        self.ring.as_ref()
    }

    pub fn set_ring(&mut self, ring: crate::server::continuity::output_ring::OutputRing) {
        self.ring_saved = ring.written();
        self.ring_fed = ring.written();
        self.ring = Some(ring);
    }

    /// No keeper to checkpoint for: the ring would only hold reads back.
    pub fn drop_ring(&mut self) {
        self.ring = None;
    }

    /// The ring, for a pane rebuilt around it (a live upgrade's delta).
    pub fn take_ring(&mut self) -> Option<crate::server::continuity::output_ring::OutputRing> {
        self.ring.take()
    }

    /// After a crash: commits a read the dead server never committed.
    pub fn take_ring_pending(&mut self) {
        if let Some(ring) = &mut self.ring {
            ring.take_pending();
        }
    }

    /// Taking back from a successor that died in its probation: what it
    /// read from the shared ring since we paused goes into our screen
    /// (nothing is forwarded: every connection is closed at a take-back,
    /// and its answers to terminal queries were sent already). Returns the
    /// bytes taken in and whether they were all still in the ring (false:
    /// it went round; the scrollback is marked where output is missing).
    pub fn catch_up_ring(&mut self) -> Option<(usize, bool)> {
        let ring = self.ring.as_mut()?;
        // A read the successor made but never committed.
        ring.take_pending();
        let (bytes, complete) = ring.since(self.ring_fed);
        self.ring_fed = ring.written();
        if !complete {
            let line = format!(
                "\r\n\x1b[0m--- ptyd: output lost when an upgrade was taken back at {} ---\r\n",
                crate::clock::hh_mm_ss_utc(crate::clock::unix_ms())
            );
            self.replay_output(line.as_bytes());
        }
        self.replay_output(&bytes);
        Some((bytes.len(), complete))
    }

    /// A crash replacement replayed the ring up to its end.
    pub fn ring_fed_to_end(&mut self) {
        if let Some(ring) = &self.ring {
            self.ring_fed = ring.written();
        }
    }

    /// The keeper holds a checkpoint that covers the ring up to `at`: the
    /// ring's memory before it can go (never past what was fed).
    pub fn release_ring_before(&mut self, at: u64) {
        if let Some(ring) = &mut self.ring {
            ring.release_before(at.min(self.ring_fed));
        }
    }

    /// A checkpoint recorded the ring up to `at`.
    pub fn ring_saved_at(&mut self, at: u64) {
        self.ring_saved = at;
    }

    /// Bytes in the ring not covered by a checkpoint, and its capacity.
    pub fn ring_unsaved(&self) -> Option<(u64, u64)> {
        self.ring
            .as_ref()
            .map(|r| (r.written() - self.ring_saved, r.capacity() as u64))
    }

    /// Output a crash replacement recovered from the ring: into the
    /// model as if read now (nothing is forwarded: no client is
    /// attached yet).
    pub fn replay_output(&mut self, bytes: &[u8]) {
        let mut forward = Vec::new();
        self.screen
            .feed_logged(bytes, &mut forward, &mut self.output);
        self.output.fed(bytes.len());
        // The dead server answered these queries, or the program gave up
        // on them: answering again would type into the program.
        let _ = self.screen.take_replies();
        self.history_dirty = true;
    }
}
