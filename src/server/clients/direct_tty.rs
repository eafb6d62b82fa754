//! Direct output (Unix): an attached client may pass its terminal to the
//! server (a `TTY` frame with the fd attached by `SCM_RIGHTS`), which then
//! writes the pane's output straight to it instead of sending OUTPUT frames
//! for the client to copy there: one process woken and one socket copy
//! less per output byte (tmux's client passes its tty the same
//! way). Keys still come through the client.
//!
//! A connection's terminal is in one of three states ([`Direct`]):
//! `Off` (frames on the socket), `Held` (the offer was taken and
//! `DIRECT_ON` queued on the socket; output collects here, unwritten,
//! until the client answers `DIRECT_ACK`, which it sends once it has
//! written every frame before `DIRECT_ON`: so no byte the server writes
//! overtakes one the client still had to write) and `On` (the queue is
//! written to the terminal as it takes it). Back to `Off` is the server's
//! decision alone and always safe (`Connection::leave_direct`): what the
//! terminal has not taken goes back onto the socket as an OUTPUT frame
//! after a `DIRECT_OFF` frame, and the fd is closed, so every later byte
//! comes through the client again, behind everything the server wrote.
//!
//! Keys (`KEYS_ON`, once `On`): the client stops reading its terminal and
//! the server reads the keys from the same fd ([`Keys`]), writing them to
//! the pane in the turn it reads them (`server/clients/tty_keys.rs`): one process
//! woken and one socket copy less per keystroke, as for output. The server
//! stops at the client's prefix key and hands what it read from there on
//! back (`KEYS_OFF`); every way out of direct output hands the keys back
//! first.
//!
//! Per OS: what the connection code asks of this module, `Direct` with
//! its methods, `TtyOut`, `PassedFd`, `receive` and the server's
//! `direct_frame` and `on_tty_ready`, `direct_tty_windows.rs` provides
//! too, never on (no console handle can be passed over a named pipe), so
//! the callers have no per-OS branch. What only this file and
//! `tty_keys.rs` call (the offer's check, the keys' reading) it leaves
//! out; `tty_keys_windows.rs` stands in for the latter.

use super::connection::{ConnId, Connection, Polls};
use crate::protocol::frame::{self, ClientFrame};
use crate::server::Server;
use crate::transport::listener::Stream;
use mio::{Interest, Token};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

/// Room for fds in each read of a connection: a client passes one at a
/// time (its terminal); a few more are received only to be closed at
/// once rather than cut off by the kernel unseen.
const FDS_PER_READ: usize = 4;

/// An fd a client passed with its bytes (`SCM_RIGHTS`), kept until a
/// `TTY` frame claims it.
pub type PassedFd = OwnedFd;

/// One read of a connection's socket: `recvmsg` with room for a few fds,
/// received close-on-exec and owned, so whatever fds a client sends are
/// closed unless a frame claims them: one is kept for a `TTY` frame
/// (`pending`), the others, and all of a read the kernel cut short
/// (`MSG_CTRUNC`), are closed at once and counted in `refused`.
pub fn receive(
    stream: &mut Stream,
    buf: &mut [u8],
    pending: &mut Option<PassedFd>,
    refused: &mut usize,
) -> io::Result<usize> {
    let got = crate::sys::recv_with_fds(&*stream, buf, FDS_PER_READ)?;
    if got.truncated {
        *refused += got.fds.len().max(1);
    } else {
        for fd in got.fds {
            if pending.is_none() {
                *pending = Some(fd);
            } else {
                *refused += 1;
            }
        }
    }
    Ok(got.len)
}

/// Where a connection's terminal output goes (see the module docs).
#[derive(Default)]
pub enum Direct {
    #[default]
    Off,
    Held(TtyOut),
    On(TtyOut),
}

/// The client's terminal, as the server writes to it.
pub struct TtyOut {
    /// Our copy of the open file description the client opened for us
    /// (never its stdout's: `O_NONBLOCK` set here must not reach the
    /// shell that shares the terminal).
    fd: OwnedFd,
    /// The token it is registered under while it is full.
    token: Token,
    /// Output not written yet: `queue[pos..]`.
    queue: Vec<u8>,
    pos: usize,
    /// The last write found the terminal full: nothing is tried again
    /// until poll reports it writable.
    blocked: bool,
    /// What it is registered for: writable edges only while blocked, or
    /// while a redraw client waits to catch up (a terminal raises one
    /// every time its reader takes some, which would wake the loop for
    /// nothing); readable ones while the server reads its keys.
    registered: Option<Interest>,
    /// The fd was opened for reading too: the keys may be read from it.
    readable: bool,
    /// The server reads the client's keys (`KEYS_ON` came).
    keys: Option<Keys>,
    /// In the arrivals watch (`arrivals.rs`) for readable edges, so a key
    /// ends a pass over flooding panes as a frame from a client does.
    in_arrivals: bool,
    /// A write failed (`EIO`: the terminal went away): the server leaves
    /// direct output at the next chance (`Connection::sync_write_interest`).
    failed: Option<String>,
}

/// The client's keys, while the server reads them.
pub struct Keys {
    /// The client's prefix (detach) key: reading stops there.
    pub prefix: u8,
    /// The pane's pending input had no room: the terminal is not read
    /// until it has (`Server::release_held_input`). The pane's
    /// `written_total` when that was last checked, and when.
    pub held: Option<(u64, Instant)>,
}

/// What one read of the terminal's keys gave.
pub enum KeyRead {
    Bytes(usize),
    /// Nothing to read now (`EAGAIN`).
    Dry,
    /// End of file or an error: the terminal is gone (or not ours to read).
    Failed(String),
}

/// An output queue drained to empty keeps up to this much capacity.
const QUEUE_KEEP: usize = 1 << 20;

impl TtyOut {
    pub fn new(fd: OwnedFd, token: Token, readable: bool) -> TtyOut {
        TtyOut {
            fd,
            token,
            queue: Vec::new(),
            pos: 0,
            blocked: false,
            registered: None,
            readable,
            keys: None,
            in_arrivals: false,
            failed: None,
        }
    }

    pub fn queued(&self) -> usize {
        self.queue.len() - self.pos
    }

    /// What the terminal has not taken, for the socket path to carry on.
    pub fn unwritten(&self) -> &[u8] {
        &self.queue[self.pos..]
    }

    /// Writes what the terminal takes. Returns whether any byte went out.
    fn write(&mut self) -> bool {
        let mut progress = false;
        while self.pos < self.queue.len() && !self.blocked && self.failed.is_none() {
            match nix::unistd::write(&self.fd, &self.queue[self.pos..]) {
                Ok(0) => self.failed = Some("the terminal took no bytes".into()),
                Ok(n) => {
                    self.pos += n;
                    progress = true;
                }
                Err(nix::errno::Errno::EAGAIN) => self.blocked = true,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => self.failed = Some(format!("writing to the terminal: {e}")),
            }
        }
        if self.pos == self.queue.len() {
            self.queue.clear();
            self.pos = 0;
            if self.queue.capacity() > QUEUE_KEEP {
                self.queue = Vec::new();
            }
        } else if self.pos > (1 << 16) && self.pos * 2 > self.queue.len() {
            self.queue.drain(..self.pos);
            self.pos = 0;
        }
        progress
    }

    fn source_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Registered for exactly `want` (nothing: out of the poll).
    fn register(&mut self, registry: &mio::Registry, want: Option<Interest>) {
        if want == self.registered {
            return;
        }
        let fd = self.source_fd();
        let mut source = mio::unix::SourceFd(&fd);
        match (self.registered, want) {
            // Registering reports the terminal at once if it has room (or
            // keys) already, so no edge is missed.
            (None, Some(interest)) => {
                if registry.register(&mut source, self.token, interest).is_ok() {
                    self.registered = want;
                }
            }
            (Some(_), Some(interest)) => {
                if registry
                    .reregister(&mut source, self.token, interest)
                    .is_ok()
                {
                    self.registered = want;
                }
            }
            // Before the fd closes: epoll watches the open file, which the
            // client still holds, so a closed fd would stay registered.
            _ => {
                let _ = registry.deregister(&mut source);
                self.registered = None;
            }
        }
    }

    /// In the arrivals watch exactly while the keys are read here.
    fn watch_arrivals(&mut self, arrivals: Option<&mio::Registry>) {
        let want = self.keys.is_some();
        let Some(arrivals) = arrivals else {
            return;
        };
        if want == self.in_arrivals {
            return;
        }
        let fd = self.source_fd();
        let mut source = mio::unix::SourceFd(&fd);
        if want {
            if arrivals
                .register(&mut source, Token(1), Interest::READABLE)
                .is_ok()
            {
                self.in_arrivals = true;
            }
        } else {
            let _ = arrivals.deregister(&mut source);
            self.in_arrivals = false;
        }
    }

    /// Out of both polls, for good (the fd is about to be closed).
    pub fn deregister(&mut self, polls: Polls<'_>) {
        self.keys = None;
        self.register(polls.main, None);
        self.watch_arrivals(polls.arrivals);
    }

    /// One read of the keys, into `buf`.
    fn read_keys(&mut self, buf: &mut [u8]) -> KeyRead {
        loop {
            return match nix::unistd::read(&self.fd, buf) {
                Ok(0) => KeyRead::Failed("end of file".into()),
                Ok(n) => KeyRead::Bytes(n),
                Err(nix::errno::Errno::EAGAIN) => KeyRead::Dry,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => KeyRead::Failed(e.to_string()),
            };
        }
    }
}

impl Direct {
    /// Output goes to the terminal's queue, not the socket.
    pub fn takes_output(&self) -> bool {
        !matches!(self, Direct::Off)
    }

    /// The server writes to the terminal (the client acknowledged).
    pub fn is_on(&self) -> bool {
        matches!(self, Direct::On(_))
    }

    fn tty(&self) -> Option<&TtyOut> {
        match self {
            Direct::Off => None,
            Direct::Held(t) | Direct::On(t) => Some(t),
        }
    }

    fn tty_mut(&mut self) -> Option<&mut TtyOut> {
        match self {
            Direct::Off => None,
            Direct::Held(t) | Direct::On(t) => Some(t),
        }
    }

    pub fn queued(&self) -> usize {
        self.tty().map_or(0, TtyOut::queued)
    }

    /// What the terminal holds that its reader has not taken yet
    /// (`TIOCOUTQ`; a PTY's side reports 0: its buffer is small and a
    /// full one blocks our writes instead).
    pub fn unread(&self) -> usize {
        self.tty()
            .and_then(|t| crate::sys::socket_unread(&t.fd))
            .unwrap_or(0)
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if let Some(t) = self.tty_mut() {
            t.queue.extend_from_slice(bytes);
        }
    }

    /// The client acknowledged `DIRECT_ON`: writing may start.
    pub fn acknowledge(&mut self) {
        if let Direct::Held(_) = self
            && let Direct::Held(t) = std::mem::take(self)
        {
            *self = Direct::On(t);
        }
    }

    /// Writes what the terminal takes (only once on). Whether any byte
    /// went out.
    pub fn write(&mut self) -> bool {
        match self {
            Direct::On(t) => t.write(),
            _ => false,
        }
    }

    /// Poll reported the terminal writable.
    pub fn write_ready(&mut self) {
        if let Some(t) = self.tty_mut() {
            t.blocked = false;
        }
    }

    /// Why a write failed, if one did.
    pub fn failure(&self) -> Option<&str> {
        self.tty().and_then(|t| t.failed.as_deref())
    }

    /// Registered for writable edges while output waits for room, or
    /// while `awaits_catch_up` (a redraw client drawn once its terminal
    /// has taken its backlog); for readable ones while the keys are read
    /// here.
    pub fn sync_registration(&mut self, polls: Polls<'_>, awaits_catch_up: bool) {
        if let Direct::On(t) = self {
            let write = (t.blocked && t.pos < t.queue.len()) || awaits_catch_up;
            let want = match (t.keys.is_some(), write) {
                (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
                (true, false) => Some(Interest::READABLE),
                (false, true) => Some(Interest::WRITABLE),
                (false, false) => None,
            };
            t.register(polls.main, want);
            t.watch_arrivals(polls.arrivals);
        }
    }

    /// The server can read the keys: direct output is on and the
    /// terminal was opened for reading.
    pub fn can_read_keys(&self) -> bool {
        matches!(self, Direct::On(t) if t.readable)
    }

    /// The keys are read here (held for room or not).
    pub fn reads_keys(&self) -> bool {
        self.keys().is_some()
    }

    /// Keys left in the terminal for want of room in the pane's input may
    /// be read again: whether any were.
    pub fn release_held_keys(&mut self) -> bool {
        self.keys_mut()
            .is_some_and(|keys| keys.held.take().is_some())
    }

    /// The keys, while they are read here.
    pub fn keys(&self) -> Option<&Keys> {
        match self {
            Direct::On(t) => t.keys.as_ref(),
            _ => None,
        }
    }

    pub fn keys_mut(&mut self) -> Option<&mut Keys> {
        match self {
            Direct::On(t) => t.keys.as_mut(),
            _ => None,
        }
    }

    /// The client handed its keys over: they are read from now on
    /// (registered at the next `sync_registration`, which the caller
    /// makes at once so no key waits for the turn's end).
    pub fn take_keys(&mut self, prefix: u8) {
        if let Direct::On(t) = self
            && t.readable
        {
            t.keys = Some(Keys { prefix, held: None });
        }
    }

    /// The keys go back to the client: not read here any more. Whether
    /// they were read here.
    pub fn drop_keys(&mut self) -> bool {
        match self {
            Direct::On(t) => t.keys.take().is_some(),
            _ => false,
        }
    }

    /// One read of the keys (only while they are read here).
    pub fn read_keys(&mut self, buf: &mut [u8]) -> KeyRead {
        match self {
            Direct::On(t) if t.keys.is_some() => t.read_keys(buf),
            _ => KeyRead::Dry,
        }
    }

    /// Back to `Off`, handing over the terminal state (to be deregistered
    /// and dropped by the caller).
    pub fn take(&mut self) -> Option<TtyOut> {
        match std::mem::take(self) {
            Direct::Off => None,
            Direct::Held(t) | Direct::On(t) => Some(t),
        }
    }
}

/// Checks an offered fd is a terminal (a character device that is a tty)
/// and makes it non-blocking (the open file description is the one the
/// client opened for us, not its stdout's); with whether it was opened
/// for reading too (the keys may be read from it). The reason it is
/// refused otherwise; the fd is then closed by being dropped.
pub fn check_offered(fd: OwnedFd) -> Result<(OwnedFd, bool), String> {
    let stat = nix::sys::stat::fstat(&fd).map_err(|e| format!("fstat: {e}"))?;
    let kind =
        nix::sys::stat::SFlag::from_bits_truncate(stat.st_mode) & nix::sys::stat::SFlag::S_IFMT;
    if kind != nix::sys::stat::SFlag::S_IFCHR {
        return Err("not a character device".into());
    }
    if !nix::unistd::isatty(&fd).unwrap_or(false) {
        return Err("not a terminal".into());
    }
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = fcntl(&fd, FcntlArg::F_GETFL).map_err(|e| format!("F_GETFL: {e}"))?;
    let mode = OFlag::from_bits_truncate(flags) & OFlag::O_ACCMODE;
    if mode == OFlag::O_RDONLY {
        return Err("opened read-only".into());
    }
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(&fd, FcntlArg::F_SETFL(flags)).map_err(|e| format!("F_SETFL: {e}"))?;
    // Not the keys of our own controlling terminal (a server started in
    // the background of the terminal it is attached from): reading it
    // from outside its foreground process group would stop the server
    // (SIGTTIN). A server started by a client has none (`setsid`).
    let our_session = nix::unistd::getsid(None).ok();
    let own_terminal =
        our_session.is_some() && nix::sys::termios::tcgetsid(&fd).ok() == our_session;
    Ok((fd, mode == OFlag::O_RDWR && !own_terminal))
}

impl Connection {
    /// Takes an offered terminal (already checked, `direct_tty::check_offered`):
    /// output is held for it from now on, and `DIRECT_ON` queued, saying
    /// whether the keys may be handed over too (`readable`: opened for
    /// reading; never for a read-only client).
    fn hold_direct(&mut self, fd: OwnedFd, token: Token, readable: bool) {
        let read_only = self.attachment().is_some_and(|a| a.read_only);
        let keys = readable && !read_only;
        self.tty_token = Some(token);
        self.direct = Direct::Held(TtyOut::new(fd, token, keys));
        let payload: &[u8] = if keys { br#"{"keys":true}"# } else { b"" };
        self.queue_frame_unbounded(frame::server::DIRECT_ON, payload);
    }
}

impl Server {
    /// The direct-output handshake (`direct_tty.rs`): a `TTY` offer is
    /// taken (output held for the terminal, `DIRECT_ON` queued) or refused
    /// (`DIRECT_OFF`, logged); `DIRECT_ACK` starts the writing; a
    /// `DIRECT_PAUSE` ends it (`DIRECT_OFF`, what the terminal had not
    /// taken sent as OUTPUT after it). Frames out of turn change nothing.
    pub(in crate::server) fn direct_frame(&mut self, conn: ConnId, frame: ClientFrame) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.is_attached() {
            return;
        }
        // The handshake's frames are queued past the output bound (they
        // must not be refused), so a client that keeps offering or pausing
        // without reading its socket would grow its queue without end:
        // past the bound it is dropped as any client that falls behind.
        if c.queued() > super::connection::MAX_OUTPUT_QUEUE {
            self.drop_too_slow(conn);
            return;
        }
        match frame {
            ClientFrame::Tty => {
                let offered = c.pending_fd.take();
                let checked = if c.is_direct() {
                    Err("this client's terminal is already taken".to_string())
                } else if c.closing.is_some() {
                    Err("the attachment is ending".to_string())
                } else {
                    match offered {
                        Some(fd) => check_offered(fd),
                        None => Err("no fd came with the offer".to_string()),
                    }
                };
                let (fd, readable) = match checked {
                    Ok(checked) => checked,
                    Err(why) => {
                        c.queue_direct_off("refused");
                        self.log.log(
                            "direct_refused",
                            &format!("client {conn} offered its terminal: {why}; output stays on the socket"),
                        );
                        return;
                    }
                };
                let token = match c.tty_token {
                    Some(token) => token,
                    None => self.alloc_token(crate::server::Source::Tty(conn)),
                };
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.hold_direct(fd, token, readable);
                }
            }
            ClientFrame::DirectAck => c.direct.acknowledge(),
            _ => c.leave_direct(Polls::of(&self.poll, &self.arrivals), "paused", true),
        }
    }

    /// Every connection back to the socket path (`Connection::leave_direct`).
    pub(in crate::server) fn leave_direct_all(&mut self, reason: &str) {
        let polls = Polls::of(&self.poll, &self.arrivals);
        for conn in self.conns.values_mut() {
            conn.leave_direct(polls, reason, true);
        }
    }

    /// Poll reported a client's terminal: writable (direct output: the
    /// next flush writes to it again), readable (its keys, when the
    /// server reads them: `tty_keys.rs`), or in error (both: whichever
    /// way it failed is seen and handled).
    pub(in crate::server) fn on_tty_ready(&mut self, id: ConnId, event: &mio::event::Event) {
        let error = event.is_error() || event.is_read_closed();
        if (event.is_writable() || error)
            && let Some(conn) = self.conns.get_mut(&id)
        {
            conn.direct.write_ready();
        }
        if event.is_readable() || error {
            self.read_tty_keys(id);
        }
    }
}
