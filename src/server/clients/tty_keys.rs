//! Keys read from a client's terminal (Windows: `tty_keys_windows.rs`,
//! never read). Once the server
//! writes a client's output to its terminal (direct output,
//! `direct_tty.rs`), the client may hand over its keys too (`KEYS_ON`):
//! it stops reading the terminal, after sending every byte it read in
//! INPUT frames before that frame, and the server reads the keys from the
//! same fd and writes them to the pane in the turn it reads them, as
//! tmux's server does. A keystroke's echo then wakes no process but the
//! server and the pane's program.
//!
//! The client keeps its prefix (detach) key: the server stops reading at
//! it and hands what it read from there on back (`KEYS_OFF`, reason
//! `prefix`), for the client to handle as typed first. A client showing a
//! tab (`tab_view.rs`) leaves its prefix to the server: every key is read
//! here and goes through the view's bindings. Every other way
//! the keys leave the server hands them back too: leaving direct output
//! (`Connection::leave_direct`: a pause, the end of the attachment, a
//! live upgrade, a failed write or read), and a pane that reads none of
//! its input for `held_input::INPUT_STALL` (`stalled`), so the prefix key is
//! never out of reach for longer than the socket path leaves it.
//!
//! Back-pressure: the terminal is read only as far as the pane's pending
//! input has room; the rest stays in the terminal's own queue (which then
//! fills, and the user's terminal stops taking keys, as over a bare
//! terminal) until the program has read half of what is pending
//! (`Server::release_held_input`).

use super::connection::{ConnId, Polls};
use crate::protocol::frame;
use crate::server::panes::pane::MAX_PENDING_INPUT;
use crate::server::timers::TimerKind;
use crate::server::{Server, Source};
use std::time::Instant;

/// Key bytes read from one terminal per wakeup (a paste of a megabyte is
/// read over several turns, fair to the other sources).
const KEYS_READ_BUDGET: usize = 64 * 1024;
/// One read's size: a terminal's input queue holds 4 KiB (Linux's
/// `N_TTY_BUF_SIZE`).
const KEYS_READ_CHUNK: usize = 4096;

impl Server {
    /// `KEYS_ON` from attached client `conn` (`payload`: its prefix key):
    /// every earlier INPUT frame is handled (frames are handled in order),
    /// so the keys are read from the terminal from now on. Refused
    /// (`KEYS_OFF` `refused`) unless the server writes to the client's
    /// terminal, opened for reading, for a client that may type.
    pub(in crate::server) fn keys_on(&mut self, conn: ConnId, payload: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        // Answers go past the output bound (they must not be refused): a
        // client that keeps asking without reading its socket is dropped
        // as any client that falls behind, not grown without end.
        if c.queued() > super::connection::MAX_OUTPUT_QUEUE {
            self.drop_too_slow(conn);
            return;
        }
        let typing = c.attachment().is_some_and(|a| !a.read_only);
        let prefix = match payload {
            [prefix] if typing && c.direct.can_read_keys() && c.direct.keys().is_none() => *prefix,
            // A second KEYS_ON while the keys are read here (a confused
            // client): they go back, so that whatever it believes, one
            // side reads the terminal and the other knows it does not.
            _ if c.direct.keys().is_some() => {
                c.give_back_keys("refused", &[]);
                c.sync_write_interest(Polls::of(&self.poll, &self.arrivals));
                return;
            }
            _ => {
                // Not read here: `KEYS_OFF` queued directly (the keys
                // are not the server's to give back).
                let off = frame::keys_off_payload("refused", &[]);
                c.queue_frame_unbounded(frame::server::KEYS_OFF, &off);
                return;
            }
        };
        c.direct.take_keys(prefix);
        // In the polls now, not at the turn's end: a key typed meanwhile
        // raises its edge then (registering reports keys already there).
        c.sync_write_interest(Polls::of(&self.poll, &self.arrivals));
        self.read_tty_keys(conn);
    }

    /// Reads client `conn`'s keys from its terminal while the server has
    /// them, writing them to the pane in this same turn (a crash loses at
    /// most what one turn read and the PTY did not take). Stops at the
    /// prefix key (handed back with what follows it), when the pane's
    /// pending input is full (held until it has room), at
    /// [`KEYS_READ_BUDGET`] (the rest on the backlog) and when the
    /// terminal is dry. A terminal at its end or failing ends direct
    /// output (`read_failed`), handing keys and output back.
    pub(in crate::server) fn read_tty_keys(&mut self, conn: ConnId) {
        if self.serving.is_paused() {
            return;
        }
        let mut buf = [0u8; KEYS_READ_CHUNK];
        let mut taken = 0;
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let Some(pane) = c.attachment().filter(|a| !a.read_only).map(|a| a.pane) else {
                return;
            };
            let Some(keys) = c.direct.keys() else {
                return;
            };
            if keys.held.is_some() || c.closing.is_some() {
                return;
            }
            let prefix = keys.prefix;
            // A pane that is gone or not running takes no keys: they wait
            // in the terminal (its attachment ends with its exit).
            let Some(p) = self.panes.get(&pane).filter(|p| p.is_running()) else {
                return;
            };
            let room = MAX_PENDING_INPUT.saturating_sub(p.pending_input());
            if room == 0 {
                let since = (p.written_total(), Instant::now());
                if let Some(keys) = c.direct.keys_mut() {
                    keys.held = Some(since);
                }
                self.input_held_for.insert(pane);
                self.timers.add(
                    since.1 + super::held_input::INPUT_STALL,
                    TimerKind::InputStall(conn),
                );
                return;
            }
            if taken >= KEYS_READ_BUDGET {
                self.backlog.push_back(Source::Tty(conn));
                return;
            }
            let want = room.min(buf.len());
            let n = match c.direct.read_keys(&mut buf[..want]) {
                super::direct_tty::KeyRead::Bytes(n) => n,
                super::direct_tty::KeyRead::Dry => return,
                super::direct_tty::KeyRead::Failed(why) => {
                    let reason = format!("read_failed: {why}");
                    self.log.log(
                        "direct_ended",
                        &format!("client {conn}'s terminal: {reason}"),
                    );
                    c.leave_direct(Polls::of(&self.poll, &self.arrivals), &reason, true);
                    return;
                }
            };
            taken += n;
            let got = &buf[..n];
            // The tab view's prefix is the server's: every key goes there.
            if self
                .conns
                .get(&conn)
                .is_some_and(|c| c.tab_view().is_some())
            {
                self.view_keys(conn, got);
                continue;
            }
            let at_prefix = got.iter().position(|&b| b == prefix);
            let typed = &got[..at_prefix.unwrap_or(n)];
            if !typed.is_empty() {
                // Fits: at most `room` was read.
                if let Err((msg, _)) = self.type_into(conn, pane, typed) {
                    self.log.log("input_dropped", &msg);
                }
            }
            if let Some(at) = at_prefix {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.give_back_keys("prefix", &got[at..]);
                    c.sync_write_interest(Polls::of(&self.poll, &self.arrivals));
                }
                return;
            }
        }
    }

    /// A client's keys were held for room in its pane's input: if the
    /// program read none of its input for `INPUT_STALL`, they go back to
    /// the client (`KEYS_OFF` `stalled`), whose socket path then applies
    /// (its prefix key works, and input the program never takes ends the
    /// attachment with `input_overflow`); if it read some, the wait goes
    /// on.
    pub(in crate::server) fn check_keys_stall(&mut self, conn: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(pane) = c.attached_pane() else {
            return;
        };
        let Some((held_at, since)) = c.direct.keys().and_then(|k| k.held) else {
            return;
        };
        if now.duration_since(since) < super::held_input::INPUT_STALL {
            return;
        }
        let written = self.panes.get(&pane).map(|p| p.written_total());
        if let Some(written) = written
            && written > held_at
        {
            if let Some(keys) = c.direct.keys_mut() {
                keys.held = Some((written, now));
            }
            self.timers.add(
                now + super::held_input::INPUT_STALL,
                TimerKind::InputStall(conn),
            );
            return;
        }
        c.give_back_keys("stalled", &[]);
        c.sync_write_interest(Polls::of(&self.poll, &self.arrivals));
    }
}
