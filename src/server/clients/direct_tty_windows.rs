//! Direct output on Windows: never on. A named pipe carries no handle
//! for the client to pass its console with, so there is no terminal for
//! the server to write to: every output byte goes as an OUTPUT frame.
//!
//! The stand-in keeps the shape of `direct_tty.rs` so the connection
//! code has no per-OS branch: [`Direct`] is always `Off` (takes no
//! output, holds nothing, reads no keys), [`TtyOut`] and [`PassedFd`]
//! have no values, and the handshake's frames (`TTY`, `DIRECT_ACK`,
//! `DIRECT_PAUSE`) are ignored as frames of unknown kind are.

use super::connection::{ConnId, Polls};
use crate::protocol::frame::ClientFrame;
use crate::server::Server;
use crate::transport::listener::Stream;
use std::io::{self, Read};

/// Where a connection's terminal output goes: always the socket.
#[derive(Default)]
pub enum Direct {
    #[default]
    Off,
}

/// A client's terminal as the server writes to it: none on Windows.
pub enum TtyOut {}

/// An fd a client passed: none can come over a named pipe.
pub enum PassedFd {}

/// One read of a connection's pipe; nothing but bytes comes with it.
pub fn receive(
    stream: &mut Stream,
    buf: &mut [u8],
    _pending: &mut Option<PassedFd>,
    _refused: &mut usize,
) -> io::Result<usize> {
    stream.read(buf)
}

impl TtyOut {
    pub fn unwritten(&self) -> &[u8] {
        match *self {}
    }

    pub fn deregister(&mut self, _polls: Polls<'_>) {
        match *self {}
    }
}

impl Direct {
    /// Never: output always goes to the socket.
    pub fn takes_output(&self) -> bool {
        false
    }

    /// Never: no terminal is written to.
    pub fn is_on(&self) -> bool {
        false
    }

    /// Nothing is queued for a terminal.
    pub fn queued(&self) -> usize {
        0
    }

    /// Nothing is held by a terminal.
    pub fn unread(&self) -> usize {
        0
    }

    /// Never called with direct output off; drops the bytes if it were.
    pub fn push(&mut self, _bytes: &[u8]) {}

    /// Nothing was written: there is no terminal.
    pub fn write(&mut self) -> bool {
        false
    }

    pub fn write_ready(&mut self) {}

    /// No write can fail.
    pub fn failure(&self) -> Option<&str> {
        None
    }

    /// Nothing to register.
    pub fn sync_registration(&mut self, _polls: Polls<'_>, _awaits_catch_up: bool) {}

    /// Never: keys always come as INPUT frames.
    pub fn reads_keys(&self) -> bool {
        false
    }

    /// No keys are held in a terminal.
    pub fn release_held_keys(&mut self) -> bool {
        false
    }

    /// No keys were read here.
    pub fn drop_keys(&mut self) -> bool {
        false
    }

    /// Already `Off`: no terminal to hand over.
    pub fn take(&mut self) -> Option<TtyOut> {
        None
    }
}

impl Server {
    /// The direct-output handshake's frames are ignored: no terminal can
    /// be offered.
    pub(in crate::server) fn direct_frame(&mut self, _conn: ConnId, _frame: ClientFrame) {}

    /// Never called: no terminal is registered with the poll.
    pub(in crate::server) fn on_tty_ready(&mut self, _id: ConnId, _event: &mio::event::Event) {}
}
