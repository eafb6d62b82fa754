//! The client's side of direct output (Unix; the server's is
//! `server/direct_tty.rs`): the attach client passes the server its
//! terminal, and the server writes the pane's output straight to it, so
//! output no longer wakes this process. Keys still go through it.
//!
//! The handshake keeps every byte in order. The offer (`TTY`, the fd
//! attached) is answered `DIRECT_ON` (or `DIRECT_OFF` if refused); this
//! client answers `DIRECT_ACK` only after writing every frame before
//! `DIRECT_ON`, and the server writes nothing to the terminal before that
//! answer. Before drawing on the terminal itself (the scroll mode) or
//! giving it back (detach, exit), a client the server writes to asks it to
//! stop (`DIRECT_PAUSE`, or DETACH) and waits, bounded, for `DIRECT_OFF`
//! (the server sends it before any output of its own after that). A
//! server that never answers an offer (older than direct output) costs
//! one bounded wait at most, and no offer again on that connection.
//!
//! Keys (`KEYS_ON`): once the server writes to the terminal and said it
//! can read it too (`DIRECT_ON`'s `keys`), this client stops reading its
//! terminal whenever it is back to plain typing (no prefix key pending),
//! after every byte it read went out in INPUT frames, and hands the keys
//! over. The server gives them back (`KEYS_OFF`) at the prefix key, with
//! the bytes from there on, which this client handles as typed first;
//! and whenever direct output ends. The caller then reads its terminal
//! again.

use super::{ClientError, FrameReader, TerminalOutput, poll_readable, send_frame};
use crate::client::BatchEnd;
use crate::protocol::frame;
use serde_json::Value;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

/// How long the client waits for the server to stop writing to its
/// terminal (or to answer an offer) before it goes on anyway.
const SETTLE_FOR: Duration = Duration::from_secs(1);

/// Where the client's terminal stands with the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The client writes the output (OUTPUT frames).
    Off,
    /// An offer went out, not answered yet: the server cannot write
    /// before our `DIRECT_ACK`.
    Offered(Instant),
    /// Acknowledged: the server writes to the terminal.
    On,
}

pub(super) struct DirectOutput {
    /// Offers are made at all (stdout is a terminal, not turned off).
    wanted: bool,
    /// The keys may be handed over at all: not a read-only client, and
    /// stdin is the terminal offered.
    keys_wanted: bool,
    /// The prefix key, which the server stops reading at.
    prefix: u8,
    /// The server said it can read the keys (`DIRECT_ON`'s `keys`) and
    /// did not refuse them since.
    server_keys: bool,
    /// The server reads the keys: this client does not read its terminal
    /// until `KEYS_OFF`.
    keys_given: bool,
    /// The server gave the keys back because the pane took none of its
    /// input for a while (`stalled`): they are handed over again only
    /// after this client sent an INPUT frame (which the server handles
    /// first, once the pane has room), not at once and again and again.
    keys_after_input: bool,
    /// The terminal opened afresh for the server (its own open file
    /// description: the `O_NONBLOCK` the server sets must not reach our
    /// stdout's, which the user's shell shares). Opened once, offered on
    /// every connection.
    tty: Option<OwnedFd>,
    state: State,
}

/// What the caller does when a settle ended with the attachment.
pub(super) enum Settled {
    /// The server writes to the terminal no more (or is gone).
    Done,
    /// The attachment ended meanwhile: the EXIT frame's payload.
    Exit(Value),
}

impl DirectOutput {
    /// `wanted`: the options allow it; the environment may still say no
    /// (`PTYD_ATTACH_DIRECT=0`), and stdout must be a terminal.
    pub(super) fn new(wanted: bool, read_only: bool, prefix: u8) -> DirectOutput {
        let env_off = std::env::var("PTYD_ATTACH_DIRECT").is_ok_and(|v| v == "0");
        let is_tty = std::io::IsTerminal::is_terminal(&io::stdout());
        // Keys come from stdin: the terminal offered must be that one.
        let stdin_same = is_tty && same_terminal();
        DirectOutput {
            wanted: wanted && !env_off && is_tty,
            keys_wanted: !read_only && stdin_same,
            prefix,
            server_keys: false,
            keys_given: false,
            keys_after_input: false,
            tty: None,
            state: State::Off,
        }
    }

    /// The server reads the keys: the caller must not read its terminal.
    pub(super) fn keys_given(&self) -> bool {
        self.keys_given
    }

    /// Hands the keys to the server if it writes to the terminal and can
    /// read it, and they are not there already. The caller calls this
    /// only when back to plain typing: no prefix key pending, no byte read
    /// and not yet sent (every INPUT frame goes out before `KEYS_ON`).
    pub(super) fn give_keys(&mut self, stream: &crate::transport::ClientStream) {
        if self.state != State::On
            || !self.server_keys
            || !self.keys_wanted
            || self.keys_given
            || self.keys_after_input
        {
            return;
        }
        if send_frame(stream, frame::client::KEYS_ON, &[self.prefix]).is_ok() {
            self.keys_given = true;
        }
    }

    /// An INPUT frame went out: keys held back after a stall may be
    /// handed over again (behind it).
    pub(super) fn note_input_sent(&mut self) {
        self.keys_after_input = false;
    }

    /// `KEYS_OFF` came with `reason`: the caller reads its terminal
    /// again, after handling the bytes the frame carried as typed.
    pub(super) fn on_keys_off(&mut self, reason: &str) {
        self.keys_given = false;
        match reason {
            "stalled" => self.keys_after_input = true,
            // Not to be offered again until the next DIRECT_ON says so.
            "refused" => self.server_keys = false,
            _ => {}
        }
    }

    /// Offers the terminal on `stream` (a new connection, or after the
    /// server let go of it), unless an offer or direct output is under
    /// way or offers are off. A failure to open or send turns offers off:
    /// output then stays on the socket, as before.
    pub(super) fn offer(&mut self, stream: &crate::transport::ClientStream) {
        if !self.wanted || self.state != State::Off {
            return;
        }
        if self.tty.is_none() {
            match open_terminal() {
                Ok(fd) => self.tty = Some(fd),
                Err(_) => {
                    self.wanted = false;
                    return;
                }
            }
        }
        let Some(tty) = &self.tty else {
            return;
        };
        let mut msg = Vec::with_capacity(frame::HEADER_LEN);
        frame::encode(frame::client::TTY, &[], &mut msg);
        match crate::sys::send_with_fds(stream, &msg, &[tty.as_raw_fd()]) {
            Ok(n) if n == msg.len() => self.state = State::Offered(Instant::now()),
            Ok(n) => {
                // The fd went with the first bytes; the rest of the frame
                // follows, or the stream is corrupt and the connection
                // ends through its reads.
                use std::io::Write;
                let _ = (&*stream).write_all(&msg[n..]);
                self.state = State::Offered(Instant::now());
            }
            Err(_) => self.wanted = false,
        }
    }

    /// A new connection: nothing of the old one's state holds (the old
    /// server's copy of the terminal went with it: the keys are ours).
    pub(super) fn reset(&mut self) {
        self.state = State::Off;
        self.server_keys = false;
        self.keys_given = false;
        self.keys_after_input = false;
    }

    /// `DIRECT_ON` came, after every frame before it was written: the
    /// server may write from now on. Out of turn (an offer this client
    /// gave up on), it is told to stop instead, so output is not held.
    pub(super) fn on_direct_on(
        &mut self,
        payload: &Value,
        stream: &crate::transport::ClientStream,
    ) {
        if matches!(self.state, State::Offered(_)) {
            let _ = send_frame(stream, frame::client::DIRECT_ACK, &[]);
            self.state = State::On;
            self.server_keys = payload["keys"] == true;
            self.keys_after_input = false;
        } else {
            let _ = send_frame(stream, frame::client::DIRECT_PAUSE, &[]);
        }
    }

    /// `DIRECT_OFF` came: output is on the socket again. The server asks
    /// for a new offer when it let go for its own reasons (a live
    /// upgrade); a refused offer is not repeated.
    pub(super) fn on_direct_off(
        &mut self,
        payload: &Value,
        stream: &crate::transport::ClientStream,
    ) {
        self.state = State::Off;
        // The server hands the keys back before this (`KEYS_OFF`).
        self.keys_given = false;
        self.server_keys = false;
        if payload["reason"] == "upgrade" {
            self.offer(stream);
        } else if payload["reason"] == "refused" {
            self.wanted = false;
        }
    }

    /// Before the client draws on its terminal itself or gives it back:
    /// sends `kind` (`DIRECT_PAUSE`, or `DETACH`) and, if the server may be
    /// writing to the terminal, waits (at most [`SETTLE_FOR`]) until it
    /// says it stopped. With `DIRECT_PAUSE` the output that comes
    /// meanwhile is written (it belongs before what the client draws);
    /// with DETACH it is dropped. Sends `kind` in every state (DETACH must
    /// go out whatever the terminal's state).
    pub(super) fn settle(
        &mut self,
        reader: &mut FrameReader,
        output: &mut TerminalOutput,
        kind: u8,
    ) -> Result<Settled, ClientError> {
        let wait_until = match self.state {
            State::Off => {
                if kind != frame::client::DIRECT_PAUSE {
                    let _ = send_frame(reader.stream(), kind, &[]);
                }
                return Ok(Settled::Done);
            }
            // The server cannot write before our answer, which will not
            // come now; but for a pause it must not take the terminal
            // after it either: its answer is awaited (an older server
            // never answers: then offers stop for good).
            State::Offered(at) if kind == frame::client::DIRECT_PAUSE => at + SETTLE_FOR,
            State::Offered(_) => {
                let _ = send_frame(reader.stream(), kind, &[]);
                self.state = State::Off;
                self.keys_given = false;
                return Ok(Settled::Done);
            }
            State::On => Instant::now() + SETTLE_FOR,
        };
        let _ = send_frame(reader.stream(), kind, &[]);
        let write = kind == frame::client::DIRECT_PAUSE;
        loop {
            let batch_end = if write {
                output.write_buffered(reader)?
            } else {
                reader.take_output().end
            };
            match batch_end {
                BatchEnd::More => {}
                BatchEnd::Exit(payload) => {
                    self.state = State::Off;
                    self.keys_given = false;
                    return Ok(Settled::Exit(payload));
                }
                // Not acknowledged: the pause sent above makes the
                // server let go again, with DIRECT_OFF.
                BatchEnd::DirectOn(_) => continue,
                // Nothing to draw now: the client is leaving or about to
                // draw its own screen.
                BatchEnd::View(_) | BatchEnd::Scroll(_) => continue,
                // Before the DIRECT_OFF it waits for. A settle comes
                // before the client draws or ends: keys handed back now
                // (only ever with keys given: a terminating signal) end
                // with it, as the bytes after a detach do.
                BatchEnd::KeysOff(..) => {
                    self.keys_given = false;
                    continue;
                }
                BatchEnd::DirectOff(payload) => {
                    self.state = State::Off;
                    self.keys_given = false;
                    if payload["reason"] == "refused" {
                        self.wanted = false;
                    }
                    return Ok(Settled::Done);
                }
                BatchEnd::Oversized => {
                    self.state = State::Off;
                    return Ok(Settled::Done);
                }
            }
            let left = wait_until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if matches!(self.state, State::Offered(_)) {
                    self.wanted = false;
                }
                self.state = State::Off;
                self.keys_given = false;
                return Ok(Settled::Done);
            }
            let ready = poll_readable(&[reader.stream().as_raw_fd()], Some(left))
                .map_err(|e| ClientError::io("waiting for the server", e))?;
            if ready[0] && !matches!(reader.fill(), Ok(true)) {
                // The server is gone, and its copy of the terminal with it.
                self.state = State::Off;
                self.keys_given = false;
                return Ok(Settled::Done);
            }
        }
    }
}

/// The terminal on stdout, opened afresh: for reading (the keys, when
/// the server reads them) and writing, not as a controlling terminal,
/// non-blocking and close-on-exec (std's default).
fn open_terminal() -> io::Result<OwnedFd> {
    let path = nix::unistd::ttyname(io::stdout().as_fd()).map_err(io::Error::from)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)?;
    Ok(file.into())
}

/// Whether stdin is the terminal on stdout (the same device): only then
/// are the keys the server would read from the terminal offered the ones
/// this client reads.
fn same_terminal() -> bool {
    let dev = |fd: std::os::fd::BorrowedFd<'_>| nix::sys::stat::fstat(fd).ok().map(|s| s.st_rdev);
    let stdin = dev(io::stdin().as_fd());
    stdin.is_some() && stdin == dev(io::stdout().as_fd())
}
