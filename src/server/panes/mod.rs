//! The panes: what runs in each PTY and everything the server keeps of it.
//!
//! A pane ([`pane::Pane`]) is one PTY, the process tree in it, its screen,
//! the input waiting to be written to it and its recent output as text
//! (`output_log`). Its fds (`fds`) are the only way into the loop's poll
//! for it; a pane is created and its process (re)started in `spawn`, its
//! output read and its input written in `io`, and its end (kills, the
//! exit, the reaping) handled in `exit`.
//!
//! Invariants:
//! - a pane id is never reused within a server's life;
//! - a pane's fds leave the poll before they close ([`fds::PaneFds`]
//!   checks it), and every process start goes through
//!   `Server::start_pane`, where the fd is registered;
//! - a pane's exit is reported once, whether the SIGCHLD handler reaped it
//!   (our child) or a pidfd told (a process an earlier server started).
//!
//! Per OS: `fds.rs` (Unix: the master, the hung-up master, a pidfd, each
//! polled) and `fds_windows.rs` (a pseudo console whose pipes cannot be
//! polled: the pane's threads wake the loop through `pty::PaneWakes`)
//! are swapped whole and keep the same methods, so the pane code above
//! them is the same on both OSes.

pub(super) mod environment;
pub(super) mod exit;
#[cfg_attr(windows, path = "fds_windows.rs")]
pub(super) mod fds;
pub(super) mod io;
pub(super) mod output_log;
pub(super) mod pane;
pub(super) mod spawn;

use pane::{Pane, PaneState};
use std::collections::BTreeMap;

/// Every pane of the server by id, and the counter that names the next.
pub(super) struct Panes {
    map: BTreeMap<u64, Box<Pane>>,
    /// Public pane ids are never reused within a server's life: the
    /// counter only goes forward (restores and upgrades raise it to what
    /// the last server reached).
    next_id: u64,
}

impl Panes {
    pub(super) fn new() -> Panes {
        Panes {
            map: BTreeMap::new(),
            next_id: 1,
        }
    }

    pub(super) fn get(&self, id: &u64) -> Option<&Pane> {
        self.map.get(id).map(|p| &**p)
    }

    pub(super) fn get_mut(&mut self, id: &u64) -> Option<&mut Pane> {
        self.map.get_mut(id).map(|p| &mut **p)
    }

    pub(super) fn contains_key(&self, id: &u64) -> bool {
        self.map.contains_key(id)
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// The ids in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &u64> {
        self.map.keys()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Pane> {
        self.map.values().map(|p| &**p)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Pane> {
        self.map.values_mut().map(|p| &mut **p)
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&u64, &mut Pane)> {
        self.map.iter_mut().map(|(id, p)| (id, &mut **p))
    }

    /// Adds a pane under its id, replacing one of the same id (a pane
    /// rebuilt in place by a live upgrade's delta).
    pub(super) fn insert(&mut self, id: u64, pane: Box<Pane>) -> Option<Box<Pane>> {
        debug_assert_eq!(id, pane.id(), "a pane filed under another id");
        self.map.insert(id, pane)
    }

    pub(super) fn remove(&mut self, id: &u64) -> Option<Box<Pane>> {
        self.map.remove(id)
    }

    /// The id the next new pane gets.
    pub(super) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Moves the counter on to `next`, never back.
    pub(super) fn advance_next_id(&mut self, next: u64) {
        self.next_id = self.next_id.max(next);
    }

    /// Takes the counter a previous server reached (a live upgrade's
    /// manifest), as it is.
    pub(super) fn set_next_id(&mut self, next: u64) {
        self.next_id = next;
    }

    /// The session of every pane whose process runs.
    pub(super) fn running_sessions(&self) -> Vec<i32> {
        self.values()
            .filter_map(|p| match *p.state() {
                PaneState::Running { child, .. } => Some(child.sid),
                _ => None,
            })
            .collect()
    }

    /// Lets go of every pane's fds, out of `registry` first (`shutdown`
    /// and `release` on purpose; `Drop for Server` for one dropped
    /// without either).
    pub(super) fn close_all_fds(&mut self, registry: &mio::Registry) {
        for pane in self.values_mut() {
            pane.close_fds(registry);
        }
    }
}

impl std::ops::Index<&u64> for Panes {
    type Output = Pane;

    /// The pane with this id; panics if there is none (callers checked).
    fn index(&self, id: &u64) -> &Pane {
        &self.map[id]
    }
}
