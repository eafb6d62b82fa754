//! One client connection: its socket, what it has sent that we have not
//! handled yet, and what we owe it. The loop never blocks on a client: output
//! goes to a bounded queue flushed when the socket is writable. A pane stops
//! being read while one of its lossless (`when_behind: pause`) attached
//! clients is over [`OUTPUT_HIGH_WATER`] (flow control, as a terminal that
//! stops reading blocks the program); a client that then takes nothing for
//! [`STALL_LIMIT`], or lets the queue overflow, is disconnected with a reason.
//! A `when_behind: redraw` client never holds its pane: once it is
//! [`Connection::behind`] it gets no more raw output, and a redraw once it
//! has [`Connection::caught_up`] (`attach.rs`).

use crate::protocol::frame;
use crate::protocol::methods::WhenBehind;
use crate::sys::PeerCred;
use crate::transport::listener::Stream;
use mio::Token;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// Output owed to one client beyond which it is judged too slow.
pub const MAX_OUTPUT_QUEUE: usize = 4 << 20;
/// Output queued for an attached client above which its pane is paused.
pub const OUTPUT_HIGH_WATER: usize = 1 << 20;
/// A paused pane is read again once all its clients are at or below this.
pub const OUTPUT_LOW_WATER: usize = 256 << 10;
/// How long a client may hold its pane paused without taking any output.
pub const STALL_LIMIT: Duration = Duration::from_secs(10);
/// A client that asked to be redrawn when it falls behind
/// (`when_behind: redraw`) is behind once this many bytes per cell of its
/// screen are queued for it: it is then sent no more raw output until it
/// has caught up, and gets a redraw instead. tmux 3.x's figure
/// (`TTY_BLOCK_START`): a plain-text screenful is about 1 byte per cell
/// and a coloured one a few, so this is a few screenfuls, which its
/// socket's own buffer (some 200 KiB) comes on top of. Smaller, a client
/// that falls behind for a moment (descheduled on a busy machine) would
/// skip output it could have shown; larger, it would show output further
/// behind the pane before skipping to its screen.
const BEHIND_BYTES_PER_CELL: usize = 8;
/// At least one slice of pane output (`panes::io::PANE_READ_BUDGET`), so a
/// small client is not judged behind by the one slice it was just given.
const BEHIND_MIN: usize = 64 << 10;
/// At most what pauses a pane for a lossless client: a 1000x500 client
/// would otherwise be allowed 4 MB, the whole queue.
const BEHIND_MAX: usize = OUTPUT_HIGH_WATER;
/// A client that fell behind has caught up once at most one byte per 8
/// cells is queued (tmux's `TTY_BLOCK_STOP`): nearly all of its backlog
/// is in its socket, so the redraw it is sent now reaches it next.
const CAUGHT_UP_CELLS_PER_BYTE: usize = 8;

/// Input buffer capacity a connection keeps between requests.
const INBUF_KEEP: usize = 64 << 10;

pub type ConnId = usize;

/// The loop's poll and the arrivals watch (`arrivals.rs`; none without
/// one), which a terminal whose keys the server reads is in too
/// (`direct_tty.rs`).
#[derive(Clone, Copy)]
pub struct Polls<'a> {
    pub main: &'a mio::Registry,
    pub arrivals: Option<&'a mio::Registry>,
}

impl<'a> Polls<'a> {
    pub fn of(poll: &'a mio::Poll, arrivals: &'a super::arrivals::Arrivals) -> Polls<'a> {
        Polls {
            main: poll.registry(),
            arrivals: arrivals.registry(),
        }
    }
}

/// What the connection is doing: exchanging JSON lines, or attached to a pane
/// and exchanging binary frames.
#[derive(Debug)]
pub enum ConnMode {
    Rpc,
    Attached(Attachment),
}

/// An attached client: the pane it is attached to (a tab view's focused
/// pane), its terminal's size, and everything that exists only while it is
/// attached, so leaving frame mode drops it all at once.
#[derive(Debug)]
pub struct Attachment {
    pub pane: u64,
    pub read_only: bool,
    pub cols: u16,
    pub rows: u16,
    /// When it attached (wall clock, for `client.list`).
    pub since_unix_ms: u64,
    /// The server's activity stamp of this client's last attach,
    /// keystroke or resize; the highest sets its pane's size under the
    /// `latest` window-size policy.
    pub active: u64,
    /// An INPUT frame waits in `inbuf` for room in its pane's pending
    /// input, and the socket is not read meanwhile (back-pressure,
    /// `attach.rs`). The pane's `written_total` when that was last checked,
    /// and when: an `InputStall` timer armed for an earlier hold finds a
    /// later instant here and leaves it to its own timer.
    pub input_held: Option<(u64, Instant)>,
    /// How the pane is shown (see `View`).
    pub view: View,
}

impl Attachment {
    /// A client attaching now to `pane` at `cols` x `rows`, with activity
    /// stamp `active` (0 for a read-only client: it never sets a size).
    pub fn new(pane: u64, read_only: bool, (cols, rows): (u16, u16), active: u64) -> Attachment {
        Attachment {
            pane,
            read_only,
            cols,
            rows,
            since_unix_ms: crate::clock::unix_ms(),
            active,
            input_held: None,
            view: View::default(),
        }
    }
}

/// How an attached client is shown its pane. A client whose terminal is
/// the pane's size gets the pane's output as it comes (byte for byte, the
/// cheapest and most faithful). Any other size gets views drawn from the
/// terminal model at its own size (clipped or padded), at most one per
/// loop turn: raw bytes meant for another width would wrap into garbage.
#[derive(Debug, Default)]
pub struct View {
    /// The client keeps its terminal on the alternate screen while
    /// attached: it is never sent a screen switch (a pane's own switch
    /// reaches it as a redraw of the screen now active).
    pub flat: bool,
    /// Drawn from the model (`Some`) rather than forwarded; what it last
    /// sent.
    pub cache: Option<crate::term::ViewCache>,
    /// The pane changed since the client's last view (or a forwarded chunk
    /// could not be sent as it was): draw one before the next flush.
    pub stale: bool,
    /// What the client asked for when it falls behind: `Pause` holds its
    /// pane (flow control); `Redraw` drops output it cannot take and draws
    /// the screen once it has caught up (`Connection::behind`,
    /// `Connection::caught_up`).
    pub when_behind: WhenBehind,
    /// Raw output was withheld from this client (it fell behind) since it
    /// was last drawn: its terminal may be on either screen, so its redraw
    /// starts by leaving the alternate one.
    pub cut_off: bool,
    /// The client shows a whole tab (`tab_view.rs`) rather than one pane.
    pub tab: Option<Box<super::tab_view::TabView>>,
}

impl View {
    /// The client is redrawn rather than waited for when it falls behind.
    pub fn redraws_when_behind(&self) -> bool {
        self.when_behind == WhenBehind::Redraw
    }
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

/// An output queue drained to empty keeps up to this much capacity.
const OUT_KEEP: usize = 1 << 20;

pub struct Connection {
    pub token: Token,
    pub stream: Stream,
    pub peer: PeerCred,
    pub mode: ConnMode,
    /// Receives pushed events.
    pub subscribed: bool,
    /// While an `events.subscribe {since}` replay is under way: the last
    /// event queued (`server/replay.rs`). Live events wait in the ring.
    pub replay_after: Option<u64>,
    /// Bytes received and not yet handled (a partial line or frame).
    pub inbuf: Vec<u8>,
    /// In JSON mode: how many bytes at the start of `inbuf` are known to
    /// hold no newline, so the next read scans only what it added.
    pub line_scanned: usize,
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
    /// The peer shut its writing side while answers were still owed to it.
    pub half_closed: bool,
    /// The last time the socket took output or nothing was owed.
    pub last_progress: Instant,
    /// The last write found the socket full: nothing is tried again until
    /// poll reports it writable (`write_ready`). Each flush pass (two per
    /// loop turn) otherwise cost a failed `sendto` while a client that fell
    /// behind was catching up.
    write_blocked: bool,
    /// The socket is registered for writable edges as well as readable
    /// ones. Only needed while output waits for room (`write_blocked`):
    /// every read the client makes raises a writable edge, so a keystroke's
    /// echo woke the loop a third time for nothing.
    write_interest: bool,
    /// Where terminal output goes: the socket, or the client's terminal
    /// itself (`direct_tty.rs`; always the socket on Windows).
    pub direct: super::direct_tty::Direct,
    /// The token of this connection's terminal, once it offered one
    /// (kept for the connection's life, so offers do not use up tokens).
    pub tty_token: Option<Token>,
    /// An fd the client sent and no frame claimed yet (at most one: more
    /// are closed as they come); a `TTY` frame takes it.
    pub pending_fd: Option<super::direct_tty::PassedFd>,
    /// Fds received beyond the one kept, or cut off by the kernel
    /// (`MSG_CTRUNC`), since the server last logged it.
    pub refused_fds: usize,
}

impl Connection {
    pub fn new(token: Token, stream: Stream, peer: PeerCred) -> Connection {
        Connection {
            token,
            stream,
            peer,
            mode: ConnMode::Rpc,
            subscribed: false,
            replay_after: None,
            inbuf: Vec::new(),
            line_scanned: 0,
            out: Vec::new(),
            out_pos: 0,
            msg_ends: VecDeque::new(),
            msg_start: 0,
            closing: None,
            half_closed: false,
            last_progress: Instant::now(),
            write_blocked: false,
            write_interest: true,
            direct: super::direct_tty::Direct::Off,
            tty_token: None,
            pending_fd: None,
            refused_fds: 0,
        }
    }

    pub fn attachment(&self) -> Option<&Attachment> {
        match &self.mode {
            ConnMode::Attached(a) => Some(a),
            ConnMode::Rpc => None,
        }
    }

    pub fn attachment_mut(&mut self) -> Option<&mut Attachment> {
        match &mut self.mode {
            ConnMode::Attached(a) => Some(a),
            ConnMode::Rpc => None,
        }
    }

    pub fn is_attached(&self) -> bool {
        matches!(self.mode, ConnMode::Attached(_))
    }

    /// The pane an attached client is attached to.
    pub fn attached_pane(&self) -> Option<u64> {
        self.attachment().map(|a| a.pane)
    }

    /// Attached to `pane`.
    pub fn attached_to(&self, pane: u64) -> bool {
        self.attached_pane() == Some(pane)
    }

    /// The tab an attached client shows, if it shows one.
    pub fn tab_view(&self) -> Option<&super::tab_view::TabView> {
        self.attachment()?.view.tab.as_deref()
    }

    pub fn tab_view_mut(&mut self) -> Option<&mut super::tab_view::TabView> {
        self.attachment_mut()?.view.tab.as_deref_mut()
    }

    /// The socket was registered (again) with these interests.
    pub fn note_registered(&mut self, writable: bool) {
        self.write_interest = writable;
    }

    /// Registers for writable edges while output waits for room, or a
    /// redraw client's socket is to drain before it is drawn again
    /// (`awaits_catch_up`: the kernel reports the socket writable as the
    /// client reads the last of it), and stops when it has gone out (see
    /// `write_interest`). Registering for them reports the socket at once
    /// if it drained meanwhile, so no edge is missed. A failed
    /// re-registration leaves the interests as they were.
    pub fn sync_write_interest(&mut self, polls: Polls<'_>) {
        let registry = polls.main;
        if let Some(why) = self.direct.failure() {
            let reason = format!("write_failed: {why}");
            self.leave_direct(polls, &reason, true);
        }
        // Asked once: with a stale view it costs the unread-bytes ioctls.
        let awaits = self.awaits_catch_up();
        self.direct.sync_registration(polls, awaits);
        if !crate::transport::listener::WRITE_INTEREST_FOLLOWS_OUTPUT {
            return;
        }
        // A direct client's catching up is its terminal's, not its socket's.
        let want = self.write_blocked || (awaits && !self.is_direct());
        if want == self.write_interest {
            return;
        }
        let interest = if want {
            mio::Interest::READABLE | mio::Interest::WRITABLE
        } else {
            mio::Interest::READABLE
        };
        if registry
            .reregister(&mut self.stream, self.token, interest)
            .is_ok()
        {
            self.write_interest = want;
        }
    }

    /// Poll reported the socket writable (or the loop lost track of its
    /// edges, as after a paused upgrade): the next flush writes again.
    pub fn write_ready(&mut self) {
        self.write_blocked = false;
    }

    /// Output owed to the client: on its socket, and (direct output) for
    /// its terminal.
    pub fn queued(&self) -> usize {
        self.socket_queued() + self.tty_queued()
    }

    fn socket_queued(&self) -> usize {
        self.out.len() - self.out_pos
    }

    fn tty_queued(&self) -> usize {
        self.direct.queued()
    }

    /// The server writes this client's output to its terminal itself
    /// (direct output, acknowledged by the client).
    pub fn writes_terminal(&self) -> bool {
        self.direct.is_on()
    }

    /// The server reads this client's keys from its terminal itself
    /// (`KEYS_ON`; held for room in the pane's input or not).
    pub fn reads_keys(&self) -> bool {
        self.direct.reads_keys()
    }

    /// Output goes straight to the client's terminal (or is held for it
    /// until the client acknowledges: `direct_tty.rs`).
    pub fn is_direct(&self) -> bool {
        self.direct.takes_output()
    }

    /// Cells of an attached client's screen (0 if not attached).
    fn cells(&self) -> usize {
        self.attachment()
            .map_or(0, |a| usize::from(a.cols) * usize::from(a.rows))
    }

    /// Output written to the socket that the client has not read yet
    /// (where the OS tells: `sys::socket_unread`).
    fn unread(&self) -> usize {
        let socket = crate::sys::socket_unread(&self.stream).unwrap_or(0);
        // Direct: and what its terminal holds (the socket may still hold
        // frames from before the switch).
        if self.direct.takes_output() {
            return socket + self.direct.unread();
        }
        socket
    }

    /// The client has not taken more output than a redraw client may fall
    /// behind by ([`BEHIND_BYTES_PER_CELL`]): what is queued here, and what
    /// its socket holds unread. Counting only the queue would let it fall
    /// the socket's buffer (some 200 KiB) further behind first: tmux counts
    /// what its terminal has not taken, and so does this.
    pub fn behind(&self) -> bool {
        let limit = (self.cells() * BEHIND_BYTES_PER_CELL).clamp(BEHIND_MIN, BEHIND_MAX);
        self.queued() > limit || self.queued() + self.unread() > limit
    }

    /// Little enough is owed to a client that fell behind, queued or in its
    /// socket, for it to be drawn again ([`CAUGHT_UP_CELLS_PER_BYTE`]).
    pub fn caught_up(&self) -> bool {
        let limit = self.cells() / CAUGHT_UP_CELLS_PER_BYTE;
        self.queued() <= limit && self.queued() + self.unread() <= limit
    }

    /// A redraw client's view waits for it to catch up (`caught_up`).
    fn awaits_catch_up(&self) -> bool {
        self.attachment()
            .is_some_and(|a| a.view.stale && a.view.redraws_when_behind())
            && !self.caught_up()
    }

    /// Whether this connection holds `pane`'s output back while it is
    /// behind: attached to it, not closing, and lossless.
    pub fn paces(&self, pane: u64) -> bool {
        self.attachment().is_some_and(|a| {
            a.pane == pane && a.view.tab.is_none() && !a.view.redraws_when_behind()
        }) && self.closing.is_none()
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

    /// Queues a reply line: accepted over [`MAX_OUTPUT_QUEUE`] as long as
    /// the queue was below it (a reply is at most
    /// [`crate::protocol::MAX_REPLY_BYTES`]), so one big answer to a client
    /// that reads is not taken for a client that stopped reading.
    #[must_use]
    pub fn queue_reply(&mut self, bytes: &[u8]) -> bool {
        if self.queued() >= MAX_OUTPUT_QUEUE {
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
        if kind == frame::server::OUTPUT && self.direct.takes_output() {
            self.direct.push(payload);
            return true;
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
        if self.direct.write() {
            self.last_progress = Instant::now();
        }
        if self.queued() == 0 {
            self.last_progress = Instant::now();
        }
        if self.write_blocked {
            return Ok(());
        }
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out_pos += n;
                    self.last_progress = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.write_blocked = true;
                    break;
                }
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
            // A backlog (a client that fell behind, a big reply) grew the
            // queue; once it is drained the memory goes back instead of
            // staying with the connection for good. Below the bound the
            // buffer is kept: a flood fills and drains it all the time.
            if self.out.capacity() > OUT_KEEP {
                self.out = Vec::new();
            }
            self.out_pos = 0;
            self.msg_ends.clear();
            self.msg_ends.shrink_to(64);
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

    /// Gives back the memory of a large line or frame once it is handled:
    /// an idle connection should not keep a megabyte it once needed.
    pub fn release_idle_inbuf(&mut self) {
        if self.inbuf.capacity() > INBUF_KEEP && self.inbuf.len() <= INBUF_KEEP / 2 {
            self.inbuf.shrink_to(INBUF_KEEP / 2);
        }
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
            match self.receive(&mut scratch[..room]) {
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

impl Connection {
    /// One read of the socket, and of any fds that came with it
    /// (`direct_tty::receive`).
    fn receive(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        super::direct_tty::receive(
            &mut self.stream,
            buf,
            &mut self.pending_fd,
            &mut self.refused_fds,
        )
    }

    /// Queues a frame past the output bound: the small frames of the
    /// direct-output handshake, and the output a terminal had not taken
    /// (already counted against the bound), and the tab view's small
    /// VIEW and SCROLL frames, must not be refused.
    pub fn queue_frame_unbounded(&mut self, kind: u8, payload: &[u8]) {
        frame::encode(kind, payload, &mut self.out);
        self.msg_ends.push_back(self.out.len());
    }

    /// Tells the client its terminal is not (or no longer) written to by
    /// the server: `DIRECT_OFF` with `reason`.
    pub fn queue_direct_off(&mut self, reason: &str) {
        let body = serde_json::to_vec(&serde_json::json!({ "reason": reason })).unwrap_or_default();
        self.queue_frame_unbounded(frame::server::DIRECT_OFF, &body);
    }

    /// The keys go back to the client (`KEYS_OFF` with `reason` and the
    /// bytes read and not written to the pane, `rest`), if the server was
    /// reading them. They leave the polls at the next sync
    /// (`sync_write_interest`); nothing reads them meanwhile.
    pub fn give_back_keys(&mut self, reason: &str, rest: &[u8]) {
        if self.direct.drop_keys() {
            let payload = frame::keys_off_payload(reason, rest);
            self.queue_frame_unbounded(frame::server::KEYS_OFF, &payload);
        }
    }

    /// Back to the socket path, whatever the state: the keys handed back
    /// (`KEYS_OFF`) and `DIRECT_OFF` queued, then (with `keep_output`)
    /// what the terminal had not taken as OUTPUT frames, and the
    /// terminal's fd closed. The client writes those frames after
    /// everything the server wrote to its terminal, so order holds.
    /// Nothing to do (and nothing sent) when not direct.
    pub fn leave_direct(&mut self, polls: Polls<'_>, reason: &str, keep_output: bool) {
        self.give_back_keys(reason, &[]);
        let Some(mut tty) = self.direct.take() else {
            return;
        };
        tty.deregister(polls);
        self.queue_direct_off(reason);
        if keep_output {
            for chunk in tty.unwritten().chunks(frame::MAX_FRAME_PAYLOAD) {
                self.queue_frame_unbounded(frame::server::OUTPUT, chunk);
            }
        }
    }

    /// What a live upgrade carries of the output queue: the output owed
    /// from the start of the message being written, how much of it
    /// already went out, and where each queued message ends in it. The new
    /// server continues the stream byte for byte.
    pub fn output_state(&self) -> (&[u8], usize, Vec<usize>) {
        let base = self.msg_start.min(self.out_pos);
        (
            &self.out[base..],
            self.out_pos - base,
            self.msg_ends.iter().map(|end| end - base).collect(),
        )
    }

    /// The output queue as a live upgrade carried it (see `output_state`),
    /// checked: offsets past the output are refused.
    pub fn restore_output_state(
        &mut self,
        out: Vec<u8>,
        written: usize,
        msg_ends: Vec<usize>,
    ) -> Result<(), String> {
        // As `output_state` produces them: message ends in order, none
        // before what was written. Ends out of order or behind `written`
        // would later cut the queue below what was written
        // (`replace_queue`) or underflow an end (`flush`'s compaction).
        let ordered = msg_ends.windows(2).all(|w| w[0] <= w[1]);
        let past_written = msg_ends.first().is_none_or(|&first| first >= written);
        let in_range = msg_ends.last().is_none_or(|&last| last <= out.len());
        if written > out.len() || !ordered || !past_written || !in_range {
            return Err(format!(
                "output bookkeeping out of range ({} bytes, {written} written, {} message ends from {:?} to {:?})",
                out.len(),
                msg_ends.len(),
                msg_ends.first(),
                msg_ends.last()
            ));
        }
        self.out = out;
        self.out_pos = written;
        self.msg_ends = msg_ends.into_iter().collect();
        self.msg_start = 0;
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use mio::net::UnixStream;
    use std::io::Read;

    /// Reads everything the peer has, flushing `conn` as the socket drains.
    fn read_all(conn: &mut Connection, peer: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
        peer.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            // No poll here to report the socket writable again.
            conn.write_ready();
            conn.flush().unwrap();
            match peer.read(&mut buf) {
                Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                _ if conn.queued() == 0 => return got,
                _ => {}
            }
        }
    }

    #[test]
    fn replace_queue_finishes_a_partly_written_frame() {
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let peer_cred = PeerCred { uid: 0, pid: None };
        let mut conn = Connection::new(Token(1), UnixStream::from_std(ours), peer_cred);
        // Bigger than the socket buffer, so the first flush stops mid-frame.
        let big = vec![b'x'; 900 * 1024];
        assert!(conn.queue_frame(frame::server::OUTPUT, &big));
        assert!(conn.queue_frame(frame::server::OUTPUT, b"dropped"));
        conn.flush().unwrap();
        assert!(
            conn.queued() > 0 && conn.out_pos > 0,
            "flush should stop mid-frame"
        );
        let mut exit = Vec::new();
        frame::encode(frame::server::EXIT, b"{}", &mut exit);
        conn.replace_queue(&exit);

        let got = read_all(&mut conn, &mut peer);
        let (first, used) = frame::decode(&got).unwrap().unwrap();
        assert_eq!(
            (first.kind, first.payload.len()),
            (frame::server::OUTPUT, big.len())
        );
        let (last, rest) = frame::decode(&got[used..]).unwrap().unwrap();
        assert_eq!((last.kind, last.payload), (frame::server::EXIT, &b"{}"[..]));
        assert_eq!(used + rest, got.len());
    }

    #[test]
    fn replace_queue_between_messages_drops_them_all() {
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let peer_cred = PeerCred { uid: 0, pid: None };
        let mut conn = Connection::new(Token(1), UnixStream::from_std(ours), peer_cred);
        assert!(conn.queue(b"first\n"));
        conn.flush().unwrap();
        assert!(conn.queue(b"second\n"));
        conn.replace_queue(b"last\n");
        assert_eq!(read_all(&mut conn, &mut peer), b"first\nlast\n");
    }

    /// Fuzzing finding (handoff target): a manifest whose message ends
    /// were out of order or behind what was written passed the check, and
    /// the first `replace_queue` cut the queue below the written position:
    /// `queued` underflowed (a panic in the new server's import).
    #[test]
    fn restored_output_bookkeeping_is_checked_whole() {
        let out = b"{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n{\"id\":4}\n".to_vec();
        let new_conn = || {
            let (ours, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
            let peer_cred = PeerCred { uid: 0, pid: None };
            Connection::new(Token(1), UnixStream::from_std(ours), peer_cred)
        };
        for (written, ends) in [(30, vec![2, 36]), (0, vec![18, 9, 36]), (5, vec![37])] {
            let err = new_conn()
                .restore_output_state(out.clone(), written, ends.clone())
                .unwrap_err();
            assert!(err.contains("out of range"), "{written} {ends:?}: {err}");
        }
        let mut conn = new_conn();
        conn.restore_output_state(out.clone(), 12, vec![18, 27, 36])
            .unwrap();
        conn.replace_queue(b"last\n");
        assert_eq!(conn.queued(), 6 + 5);
    }
}
