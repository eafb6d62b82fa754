//! Windows' `fds.rs`: a pane's pseudo console.
//!
//! A pseudo console's pipes cannot be polled (`pty/windows.rs`), so
//! nothing here is registered: the pane's threads wake the loop through
//! `pty::PaneWakes` (token `PANES`), which `spawn.rs` hands the backend
//! for each pane. What stays is the shape of the Unix holder, so the pane
//! code is the same on both OSes:
//!
//! - the **master** until output ends;
//! - the **hung-up master**: after output ended while the process still
//!   runs (a console whose programs closed their output), kept so that a
//!   kill still reaches the pane's Job Object; closed once the exit is
//!   known. Closing a master closes its job, whose kill-on-close limit
//!   ends whatever still runs in the pane.
//!
//! There are no pidfds (no pane outlives its server on Windows) and so no
//! second token.

use crate::pty::PtyMaster;
use mio::{Registry, Token};
use std::io;

/// A pane's master and hung-up master (see the module doc).
#[derive(Debug)]
pub struct PaneFds {
    /// The pane's token, for its whole life (its sources map entry).
    token: Token,
    master: Option<PtyMaster>,
    hung_up: Option<PtyMaster>,
}

impl PaneFds {
    pub fn new(token: Token) -> PaneFds {
        PaneFds {
            token,
            master: None,
            hung_up: None,
        }
    }

    pub fn token(&self) -> Token {
        self.token
    }

    /// The master, until output ends.
    /// Always: ConPTY keeps no size to ask, and no takeover after a crash
    /// (where the kernel may hold another size) exists here.
    pub fn kernel_size_is(&self, _size: (u16, u16)) -> bool {
        true
    }

    pub fn master(&self) -> Option<&PtyMaster> {
        self.master.as_ref()
    }

    pub fn hung_up_master(&self) -> Option<&PtyMaster> {
        self.hung_up.as_ref()
    }

    /// How many masters are open.
    pub fn pollable(&self) -> usize {
        self.master.is_some() as usize
    }

    /// A new run's master; whatever is left of the last run closes.
    pub fn start(&mut self, _registry: &Registry, master: PtyMaster) -> io::Result<()> {
        self.hung_up = None;
        self.master = Some(master);
        Ok(())
    }

    /// Output ended: while the process runs the master stays as the
    /// hung-up master (a kill still needs its job); else it closes.
    /// Nothing is polled here (panes wake the loop through the backend).
    pub fn watch_writable(&mut self, _registry: &Registry, _want: bool) {}

    pub fn end_output(&mut self, _registry: &Registry, process_running: bool) {
        if let Some(master) = self.master.take()
            && process_running
        {
            self.hung_up = Some(master);
        }
    }

    /// The process exited: the pseudo console hangs up, so its output
    /// ends once what it still holds is read (the reader then reports
    /// `Ok(0)` and `end_output` follows); a hung-up master closes.
    pub fn process_ended(&mut self) {
        if let Some(master) = &self.master {
            master.hang_up();
        }
        self.hung_up = None;
    }

    /// Releases everything. No second token exists to return.
    pub fn close(&mut self, _registry: &Registry) -> Option<Token> {
        self.master = None;
        self.hung_up = None;
        None
    }
}
