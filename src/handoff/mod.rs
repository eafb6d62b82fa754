//! Live upgrade: handing every PTY, the listener and every client to a new
//! server binary over a private `SOCK_SEQPACKET` socketpair. This module is
//! the wire side (messages, manifest, fd batches, fault injection); the
//! server side of the sequence is `server/upgrade.rs` (old) and
//! `server/import.rs` (new). ARCHITECTURE.md has the state machine.

pub mod fault;
pub mod fdpass;
pub mod manifest;

/// Names the new server's end of the handoff socketpair (an fd number it
/// inherited). Its presence puts `ptyd server` in import mode.
pub const HANDOFF_FD_ENV: &str = "PTYD_HANDOFF_FD";
