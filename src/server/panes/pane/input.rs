//! A pane's input path: bytes accepted and not yet written to its PTY
//! (bounded), retried requests recognised by id, and the acks that wait
//! for their bytes to be written.

use super::*;

impl Pane {
    /// Input bytes written to the PTY so far in this pane's life.
    pub fn written_total(&self) -> u64 {
        self.written_total
    }

    pub fn pending_input(&self) -> usize {
        self.input.len() - self.input_pos
    }

    /// Queues input bytes and returns the offset at which they are all
    /// written. Fails if the pending input would pass its limit.
    pub fn queue_input(&mut self, bytes: &[u8]) -> Result<u64, String> {
        if self.pending_input() + bytes.len() > MAX_PENDING_INPUT {
            return Err(format!(
                "pane {} has {} bytes of input not yet read by its program (limit {MAX_PENDING_INPUT}); wait and retry",
                self.public_id(),
                self.pending_input()
            ));
        }
        self.input.extend_from_slice(bytes);
        Ok(self.written_total + self.pending_input() as u64)
    }

    /// Answers to terminal queries jump no queue but must not pass the limit
    /// either; past it they are dropped (the program asked too much).
    pub fn queue_reply(&mut self, bytes: &[u8]) {
        if self.pending_input() + bytes.len() <= MAX_PENDING_INPUT {
            self.input.extend_from_slice(bytes);
        }
    }

    /// The end offset of an earlier input with this request id, if known.
    pub fn seen_request(&self, request_id: &str) -> Option<u64> {
        self.recent_requests.get(request_id).copied()
    }

    pub fn remember_request(&mut self, request_id: String, end_offset: u64) {
        if self.recent_order.len() == REQUEST_ID_MEMORY
            && let Some(old) = self.recent_order.pop_front()
        {
            self.recent_requests.remove(&old);
        }
        self.recent_requests.insert(request_id.clone(), end_offset);
        self.recent_order.push_back(request_id);
    }

    /// Writes pending input until the PTY is full.
    pub fn flush_input(&mut self) -> io::Result<()> {
        let Some(master) = self.fds.master() else {
            return Ok(());
        };
        while self.input_pos < self.input.len() {
            match master.write(&self.input[self.input_pos..]) {
                Ok(n) => {
                    self.input_pos += n;
                    self.written_total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.input_pos == self.input.len() {
            self.input.clear();
            // A paste grew it (up to the 1 MiB pending limit): written
            // now, so its memory goes back rather than stay with the pane
            // (up to 64 KiB of every pane that was pasted into once, when
            // the bound was 64 KiB; typing needs a few bytes).
            if self.input.capacity() > 4096 {
                self.input = Vec::new();
            }
            self.input_pos = 0;
        } else if self.input_pos >= 64 * 1024 && self.input_pos * 2 >= self.input.len() {
            // Input kept arriving before the buffer ever emptied (a paste
            // paced by the program): drop what is written, or the buffer
            // grows by everything ever typed (100 MB pasted held 100 MB).
            // At least half is gone, so the copy costs at most what it frees.
            self.input.drain(..self.input_pos);
            self.input_pos = 0;
        }
        Ok(())
    }

    /// Drops input that can no longer be written (the pane exited).
    pub fn discard_input(&mut self) {
        self.input.clear();
        self.input_pos = 0;
    }

    /// Output ended: the master leaves the poll, and is closed unless the
    /// process still runs (see `PaneFds::end_output`).
    /// The master is watched for room (writable edges) only while input
    /// waits for it (`PaneFds::watch_writable`).
    pub fn watch_input_room(&mut self, registry: &mio::Registry) {
        let want = self.pending_input() > 0;
        self.fds.watch_writable(registry, want);
    }

    /// An input request waits for its bytes to reach the PTY.
    pub fn add_ack(&mut self, ack: PendingAck) {
        self.pending_acks.push(ack);
    }

    /// The acks whose bytes are all written now.
    pub fn take_written_acks(&mut self) -> Vec<PendingAck> {
        let written = self.written_total;
        let mut done = Vec::new();
        self.pending_acks.retain_mut(|ack| {
            if ack.end_offset <= written {
                done.push(PendingAck {
                    conn: ack.conn,
                    rpc_id: std::mem::take(&mut ack.rpc_id),
                    end_offset: ack.end_offset,
                    duplicate: ack.duplicate,
                });
                false
            } else {
                true
            }
        });
        done
    }

    /// Every ack still waiting, for a pane being removed.
    pub fn take_acks(&mut self) -> Vec<PendingAck> {
        std::mem::take(&mut self.pending_acks)
    }

    /// What a live upgrade carries of the input path: the input accepted
    /// and not yet written, the total written so far, and the remembered
    /// request ids with their end offsets, oldest first.
    pub fn input_state(&self) -> (&[u8], u64, Vec<(String, u64)>) {
        let recent = self
            .recent_order
            .iter()
            .filter_map(|r| self.recent_requests.get(r).map(|end| (r.clone(), *end)))
            .collect();
        (&self.input[self.input_pos..], self.written_total, recent)
    }

    /// The input path as a live upgrade carried it (see `input_state`).
    pub fn restore_input_state(
        &mut self,
        input: Vec<u8>,
        written_total: u64,
        recent: Vec<(String, u64)>,
    ) {
        self.input = input;
        self.input_pos = 0;
        self.written_total = written_total;
        for (request, end) in recent {
            self.remember_request(request, end);
        }
    }
}
