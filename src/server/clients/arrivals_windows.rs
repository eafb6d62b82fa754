//! Arrivals on Windows: never watched. Named pipes have no fd a second
//! poll instance could watch, so nothing is, and no pass over flooding
//! panes ends early (`arrivals.rs` says what the Unix side does).

use super::connection::{ConnId, Connection};
use crate::transport::listener::Listener;
use std::collections::HashMap;

/// Watches nothing: named pipes have no fd to poll.
pub struct Arrivals;

impl Arrivals {
    pub fn new() -> Arrivals {
        Arrivals
    }

    /// Nothing to add: nothing is watched.
    pub fn watch_new(
        &mut self,
        _listener: &Listener,
        _conns: &HashMap<ConnId, Connection>,
        _next_token: usize,
    ) {
    }

    pub fn forget_listener(&mut self, _listener: &Listener) {}

    /// No watch, so no registry for a client's terminal to join.
    pub fn registry(&self) -> Option<&mio::Registry> {
        None
    }

    /// Never: no arrival is seen before the loop's own poll.
    pub fn any(&mut self) -> bool {
        false
    }
}
