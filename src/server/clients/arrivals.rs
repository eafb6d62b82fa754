//! Whether a client connected or sent something since the loop last asked:
//! checked between slices of pane output, so that a keystroke or a new
//! connection ends the loop's pass over flooding panes early (it then polls
//! and serves them) instead of waiting out the pass's time budget.
//!
//! A second poll instance of its own watches the listener and every
//! connection for readable edges. It is only ever asked "anything new?"
//! with a zero timeout and never dispatches: epoll (and kqueue) keep a
//! separate ready list per instance, so what it reports is still reported
//! to the loop's own poll, which serves it. Edges, not levels: a
//! connection left readable on purpose (its input held while its pane's
//! input is full, or on the backlog past its read budget) ends no pass
//! until its client sends more. An edge already served by the loop's poll
//! (it arrived while no pane was being read) ends at most one later pass
//! early: one extra turn per message, which costs a poll.
//!
//! Per OS: on Windows, whose named pipes have no fd to watch,
//! `arrivals_windows.rs` stands in with the same methods: nothing is
//! watched, [`Arrivals::any`] is always false and no pass ends early.

use super::connection::{ConnId, Connection};
use crate::transport::listener::Listener;
use std::collections::HashMap;

/// Watches for arrivals; see the module doc.
pub struct Arrivals {
    /// None without a poll instance (out of fds): nothing is watched and
    /// the loop reads panes for their full budget, as it would without this.
    watch: Option<Watch>,
}

struct Watch {
    poll: mio::Poll,
    events: mio::Events,
    /// The listener is in the set.
    listener: bool,
    /// Connections with an id (a token) below this are in the set (or were,
    /// and closed: the kernel drops a closed fd from it).
    conns_below: usize,
}

impl Arrivals {
    /// A watch with nothing in it yet (`watch_new`).
    pub fn new() -> Arrivals {
        let watch = mio::Poll::new().ok().map(|poll| Watch {
            poll,
            events: mio::Events::with_capacity(64),
            listener: false,
            conns_below: 0,
        });
        Arrivals { watch }
    }

    /// Adds the listener (once) and the connections accepted or adopted
    /// since the last call: those with an id from `conns_below` up to
    /// `next_token` (ids are tokens, handed out in increasing order).
    pub fn watch_new(
        &mut self,
        listener: &Listener,
        conns: &HashMap<ConnId, Connection>,
        next_token: usize,
    ) {
        use mio::unix::SourceFd;
        use std::os::fd::AsRawFd;
        let Some(w) = &mut self.watch else {
            return;
        };
        // A failed registration only means no early end for that fd.
        if !w.listener {
            w.listener = true;
            let _ = w.poll.registry().register(
                &mut SourceFd(&listener.as_raw_fd()),
                mio::Token(0),
                mio::Interest::READABLE,
            );
        }
        if w.conns_below == next_token {
            return;
        }
        for (id, conn) in conns {
            if (w.conns_below..next_token).contains(id) {
                let _ = w.poll.registry().register(
                    &mut SourceFd(&conn.stream.as_raw_fd()),
                    mio::Token(1),
                    mio::Interest::READABLE,
                );
            }
        }
        w.conns_below = next_token;
    }

    /// Takes a listener being replaced out of the watch (the keeper's copy
    /// keeps it open, so closing ours would not); the next `watch_new`
    /// adds its successor.
    pub fn forget_listener(&mut self, listener: &Listener) {
        use std::os::fd::AsRawFd;
        let Some(w) = &mut self.watch else {
            return;
        };
        let _ = w
            .poll
            .registry()
            .deregister(&mut mio::unix::SourceFd(&listener.as_raw_fd()));
        w.listener = false;
    }

    /// The watch's own registry, for sources that come and go (a client's
    /// terminal while the server reads its keys: `direct_tty.rs`), which
    /// register and deregister themselves under a non-zero token.
    pub fn registry(&self) -> Option<&mio::Registry> {
        self.watch.as_ref().map(|w| w.poll.registry())
    }

    /// Whether a connection arrived or a client sent something since the
    /// last call (a zero-timeout poll: never blocks).
    pub fn any(&mut self) -> bool {
        let Some(w) = &mut self.watch else {
            return false;
        };
        w.poll
            .poll(&mut w.events, Some(std::time::Duration::ZERO))
            .is_ok_and(|()| !w.events.is_empty())
    }
}
