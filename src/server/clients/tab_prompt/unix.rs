//! Unix: a prompt command's exit is reaped with every other child (the
//! loop's SIGCHLD), and its time limit is a timer of the loop's.

use super::{Note, RUN_LIMIT};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Instant;

/// Nothing to keep: exits arrive through the loop's reaping.
pub struct Watcher;

impl Watcher {
    pub fn new(_waker: std::sync::Arc<mio::Waker>) -> Watcher {
        Watcher
    }

    pub fn watch(&self, child: Child) -> Watched {
        Watched {
            child,
            deadline: Instant::now() + RUN_LIMIT,
        }
    }

    /// What watching threads saw: none here.
    pub fn notes(&self) -> Vec<Note> {
        Vec::new()
    }
}

pub struct Watched {
    child: Child,
    deadline: Instant,
}

impl Watched {
    /// When the loop stops the command ([`Watched::stop`]).
    pub fn deadline(&self) -> Option<Instant> {
        Some(self.deadline)
    }

    /// Kills the command; its exit is then reaped as any other.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
    }
}

/// The output file's name goes at once; the open file stays readable.
pub fn unlink_open(path: &Path) -> Option<PathBuf> {
    let _ = std::fs::remove_file(path);
    None
}
