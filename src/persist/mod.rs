//! Persistence: the snapshot format (`snapshot`), its conversion to and
//! from the workspace tree (`tree`), atomic file replacement
//! (`atomic`), the disk-writer thread (`writer`), and reading a snapshot at
//! start-up without ever destroying one we could not understand.
//!
//! Two durability classes live in the namespace's state dir:
//! `session.json` (small, critical, fsynced) and `history/<pane>.txt` (large,
//! optional, bounded in bytes; losing them harms no restore).

pub mod atomic;
pub mod files;
pub mod snapshot;
pub mod tree;
pub mod writer;

use std::path::{Path, PathBuf};

/// Largest `session.json` read: far above any real session (a pane's
/// record is well under a kilobyte), so only a damaged or planted file hits it.
pub const MAX_SESSION_BYTES: u64 = 64 << 20;

pub fn session_path(state_dir: &Path) -> PathBuf {
    state_dir.join("session.json")
}

pub fn history_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("history")
}

pub fn backups_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("backups")
}

/// What start-up found on disk.
pub enum Loaded {
    /// No snapshot: a first start.
    Nothing,
    Snapshot(snapshot::Snapshot),
    /// A file we cannot use was moved to `backup`; the server starts empty.
    SetAside {
        reason: String,
        backup: PathBuf,
    },
    /// A file we cannot use could not even be moved: the server must not
    /// save over it, so it runs without saving.
    Unusable {
        reason: String,
    },
}

/// Reads `session.json`. A corrupt or newer file is never overwritten: it is
/// moved into `backups/` first, with the reason in its name.
pub fn load(state_dir: &Path) -> Loaded {
    let path = session_path(state_dir);
    // A file we may not trust or read is left as it is: not parsed, not
    // moved, not overwritten (the server then runs without saving).
    let bytes = match files::read_trusted(&path, MAX_SESSION_BYTES) {
        Ok(b) => b,
        Err(files::FileError::Missing) => return Loaded::Nothing,
        Err(files::FileError::Refused(reason)) => return Loaded::Unusable { reason },
    };
    let err = match snapshot::parse(&bytes) {
        Ok(s) => return Loaded::Snapshot(s),
        Err(e) => e,
    };
    let tag = match err {
        snapshot::LoadError::Corrupt(_) => "corrupt",
        snapshot::LoadError::Newer { .. } => "newer",
    };
    let backups = backups_dir(state_dir);
    let ms = crate::clock::unix_ms();
    let backup = backups.join(format!("session.json.{ms}.{tag}"));
    let moved = std::fs::create_dir_all(&backups).and_then(|()| std::fs::rename(&path, &backup));
    match moved {
        Ok(()) => Loaded::SetAside {
            reason: err.to_string(),
            backup,
        },
        Err(e) => Loaded::Unusable {
            reason: format!("{err}; and moving it aside failed: {e}"),
        },
    }
}
