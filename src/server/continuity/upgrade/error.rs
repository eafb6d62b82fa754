//! Why a step of the live upgrade failed, on either side.
//!
//! The kind is what the sequence decides on: the new side tells the old
//! one why it gives up unless the handoff channel itself failed (then
//! nobody hears it); the message is what the rollback reports and the
//! caller sees, with the context of each boundary it crossed.

use std::fmt;

#[derive(Debug)]
pub struct UpgradeError {
    pub kind: UpgradeErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeErrorKind {
    /// Sending or receiving on the handoff socket failed, or the peer
    /// said nothing in time: it may be gone, so it is told nothing.
    Channel,
    /// What the peer sent cannot be used: an unexpected message, a
    /// handoff version or namespace that is not ours, fds that disagree
    /// with the manifest.
    Refused,
    /// A system call on this side failed (a pipe, a memfd, a pidfd,
    /// starting the new server, registering a source).
    Io,
    /// This side's state could not be encoded for the handoff.
    Encode,
    /// The state that came could not be rebuilt into a server here.
    Rebuild,
    /// The step ran where the sequence does not have it (no upgrade in
    /// progress, fd batches outside the transfer).
    Sequence,
}

impl UpgradeError {
    pub fn new(kind: UpgradeErrorKind, message: impl Into<String>) -> UpgradeError {
        UpgradeError {
            kind,
            message: message.into(),
        }
    }

    /// A failed system call: `what` is the context, `e` the cause.
    pub fn io(what: &str, e: impl fmt::Display) -> UpgradeError {
        UpgradeError::new(UpgradeErrorKind::Io, format!("{what}: {e}"))
    }

    /// A send or receive on the handoff socket that failed.
    pub fn channel(what: &str, e: impl fmt::Display) -> UpgradeError {
        UpgradeError::new(UpgradeErrorKind::Channel, format!("{what}: {e}"))
    }

    pub fn encode(what: &str, e: impl fmt::Display) -> UpgradeError {
        UpgradeError::new(UpgradeErrorKind::Encode, format!("{what}: {e}"))
    }

    pub fn refused(message: impl Into<String>) -> UpgradeError {
        UpgradeError::new(UpgradeErrorKind::Refused, message)
    }

    /// The import's rebuild (pre-copy, delta, manifest) failed with this.
    pub fn rebuild(message: impl Into<String>) -> UpgradeError {
        UpgradeError::new(UpgradeErrorKind::Rebuild, message)
    }

    pub fn not_in_progress() -> UpgradeError {
        UpgradeError::new(UpgradeErrorKind::Sequence, "no upgrade in progress")
    }
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UpgradeError {}

/// For the callers that report failures as text (the import's pre-copy
/// and rebuild, the server's start): the message users see.
impl From<UpgradeError> for String {
    fn from(e: UpgradeError) -> String {
        e.message
    }
}
