//! Direct output (Unix): an attached client may pass its terminal to the
//! server (a `TTY` frame with the fd attached by `SCM_RIGHTS`), which then
//! writes the pane's output straight to it instead of sending OUTPUT frames
//! for the client to copy there: one process woken and one socket copy
//! less per output byte (issue 18; tmux's client passes its tty the same
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

use mio::Token;
use std::os::fd::{AsRawFd, OwnedFd};

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
    /// Registered for writable edges (only while blocked, or while a
    /// redraw client waits to catch up): a terminal raises one every time
    /// its reader takes some, which would wake the loop for nothing.
    registered: bool,
    /// A write failed (`EIO`: the terminal went away): the server leaves
    /// direct output at the next chance (`Connection::sync_write_interest`).
    failed: Option<String>,
}

/// An output queue drained to empty keeps up to this much capacity.
const QUEUE_KEEP: usize = 1 << 20;

impl TtyOut {
    pub fn new(fd: OwnedFd, token: Token) -> TtyOut {
        TtyOut {
            fd,
            token,
            queue: Vec::new(),
            pos: 0,
            blocked: false,
            registered: false,
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

    /// Registered for writable edges exactly while `want`.
    fn register(&mut self, registry: &mio::Registry, want: bool) {
        if want == self.registered {
            return;
        }
        let fd = self.source_fd();
        let mut source = mio::unix::SourceFd(&fd);
        if want {
            // Registering reports the terminal at once if it has room
            // already, so no edge is missed.
            if registry
                .register(&mut source, self.token, mio::Interest::WRITABLE)
                .is_ok()
            {
                self.registered = true;
            }
        } else {
            // Before the fd closes: epoll watches the open file, which the
            // client still holds, so a closed fd would stay registered.
            let _ = registry.deregister(&mut source);
            self.registered = false;
        }
    }

    /// Out of the poll, for good (the fd is about to be closed).
    pub fn deregister(&mut self, registry: &mio::Registry) {
        self.register(registry, false);
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
    /// has taken its backlog).
    pub fn sync_registration(&mut self, registry: &mio::Registry, awaits_catch_up: bool) {
        if let Direct::On(t) = self {
            let want = (t.blocked && t.pos < t.queue.len()) || awaits_catch_up;
            t.register(registry, want);
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
/// client opened for us, not its stdout's). The reason it is refused
/// otherwise; the fd is then closed by being dropped.
pub fn check_offered(fd: OwnedFd) -> Result<OwnedFd, String> {
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
    Ok(fd)
}
