//! One client connection: its socket, what it has sent that we have not
//! handled yet, and what we owe it. The loop never blocks on a client: output
//! goes to a bounded queue flushed when the socket is writable, and a client
//! that lets the queue overflow is disconnected with a reason.

use crate::protocol::frame;
use crate::sys::PeerCred;
use mio::Token;
use mio::net::UnixStream;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::time::Instant;

/// Output owed to one client beyond which it is judged too slow.
pub const MAX_OUTPUT_QUEUE: usize = 4 << 20;

pub type ConnId = usize;

/// What the connection is doing: exchanging JSON lines, or attached to a pane
/// and exchanging binary frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnMode {
    Rpc,
    Attached {
        pane: u64,
        read_only: bool,
        cols: u16,
        rows: u16,
    },
}

/// Why reading a connection stopped.
pub enum ReadOutcome {
    /// Everything available was read.
    Drained,
    /// The per-wakeup budget ran out; more may be waiting.
    Budget,
    /// The peer closed its side (or the socket failed).
    Closed,
}

pub struct Connection {
    pub token: Token,
    pub stream: UnixStream,
    pub peer: PeerCred,
    pub mode: ConnMode,
    /// Receives pushed events.
    pub subscribed: bool,
    /// Bytes received and not yet handled (a partial line or frame).
    pub inbuf: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    /// End offsets in `out` of the queued messages (lines or frames) not yet
    /// fully written, oldest first.
    msg_ends: VecDeque<usize>,
    /// Start offset in `out` of the message `out_pos` is in. Below `out_pos`
    /// when that message is partly written: it must then be finished before
    /// anything else is sent, or the peer's stream is corrupt.
    msg_start: usize,
    /// Set when the connection is to be closed: once its output queue is
    /// flushed, or at this deadline, whichever comes first.
    pub closing: Option<Instant>,
}

impl Connection {
    pub fn new(token: Token, stream: UnixStream, peer: PeerCred) -> Connection {
        Connection {
            token,
            stream,
            peer,
            mode: ConnMode::Rpc,
            subscribed: false,
            inbuf: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            msg_ends: VecDeque::new(),
            msg_start: 0,
            closing: None,
        }
    }

    pub fn queued(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Queues bytes. Returns false, queueing nothing, if that would put the
    /// client over [`MAX_OUTPUT_QUEUE`]: the caller then disconnects it.
    #[must_use]
    pub fn queue(&mut self, bytes: &[u8]) -> bool {
        if self.queued() + bytes.len() > MAX_OUTPUT_QUEUE {
            return false;
        }
        self.out.extend_from_slice(bytes);
        self.msg_ends.push_back(self.out.len());
        true
    }

    pub fn queue_frame(&mut self, kind: u8, payload: &[u8]) -> bool {
        if self.queued() + payload.len() + frame::HEADER_LEN > MAX_OUTPUT_QUEUE {
            return false;
        }
        frame::encode(kind, payload, &mut self.out);
        self.msg_ends.push_back(self.out.len());
        true
    }

    /// Drops whatever is queued and queues `last` instead: the final words to
    /// a client we are about to disconnect. A message already partly written
    /// is kept to its end, so the client can still parse `last`.
    pub fn replace_queue(&mut self, last: &[u8]) {
        let keep = match self.msg_ends.front() {
            Some(&end) if self.msg_start < self.out_pos => end,
            _ => self.out_pos,
        };
        self.out.truncate(keep);
        self.msg_ends.clear();
        if keep > self.out_pos {
            self.msg_ends.push_back(keep);
        }
        self.out.extend_from_slice(last);
        self.msg_ends.push_back(self.out.len());
    }

    /// Writes as much queued output as the socket takes. Errors other than
    /// WouldBlock mean the client is gone.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        while let Some(&end) = self.msg_ends.front()
            && end <= self.out_pos
        {
            self.msg_start = end;
            self.msg_ends.pop_front();
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
            self.msg_ends.clear();
            self.msg_start = 0;
        } else if self.msg_start > (1 << 16) && self.msg_start * 2 > self.out.len() {
            // Keep the message in progress whole: `replace_queue` needs it.
            let cut = self.msg_start;
            self.out.drain(..cut);
            self.out_pos -= cut;
            self.msg_ends.iter_mut().for_each(|end| *end -= cut);
            self.msg_start = 0;
        }
        Ok(())
    }

    /// Reads into `inbuf`, at most `budget` bytes this wakeup, never letting
    /// `inbuf` pass `limit` (the caller handles what is there first).
    pub fn read_some(&mut self, budget: usize, limit: usize) -> ReadOutcome {
        let mut scratch = [0u8; 16 * 1024];
        let mut taken = 0;
        loop {
            if taken >= budget || self.inbuf.len() >= limit {
                return ReadOutcome::Budget;
            }
            let room = scratch.len().min(limit - self.inbuf.len());
            match self.stream.read(&mut scratch[..room]) {
                Ok(0) => return ReadOutcome::Closed,
                Ok(n) => {
                    self.inbuf.extend_from_slice(&scratch[..n]);
                    taken += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Drained,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return ReadOutcome::Closed,
            }
        }
    }
}
