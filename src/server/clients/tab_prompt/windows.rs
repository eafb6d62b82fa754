//! Windows: no SIGCHLD, so a thread per prompt command waits for it,
//! stops it at its time limit, and wakes the loop with what it saw.

use super::{Note, RUN_LIMIT};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

/// How often a watching thread looks whether its command ended: std has
/// no wait with a timeout, and a prompt command is short-lived.
const POLL: Duration = Duration::from_millis(50);

pub struct Watcher {
    tx: Sender<Note>,
    rx: Receiver<Note>,
    waker: Arc<mio::Waker>,
}

impl Watcher {
    pub fn new(waker: Arc<mio::Waker>) -> Watcher {
        let (tx, rx) = channel();
        Watcher { tx, rx, waker }
    }

    pub fn watch(&self, mut child: Child) -> Watched {
        let (tx, waker) = (self.tx.clone(), Arc::clone(&self.waker));
        let pid = child.id();
        let deadline = Instant::now() + RUN_LIMIT;
        std::thread::spawn(move || {
            let code = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break status.code(),
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = tx.send(Note::Late(pid));
                        let _ = child.kill();
                        break child.wait().ok().and_then(|s| s.code());
                    }
                    Ok(None) => std::thread::sleep(POLL),
                    Err(_) => break None,
                }
            };
            let _ = tx.send(Note::Ended(pid, code));
            let _ = waker.wake();
        });
        Watched
    }

    /// What the watching threads saw since the last call.
    pub fn notes(&self) -> Vec<Note> {
        self.rx.try_iter().collect()
    }
}

/// The thread owns the command; the loop keeps nothing of it.
pub struct Watched;

impl Watched {
    /// None: the watching thread keeps the time limit.
    pub fn deadline(&self) -> Option<Instant> {
        None
    }

    pub fn stop(&mut self) {}
}

/// An open file's name cannot go on Windows: it is removed once the
/// command ended and its output was read.
pub fn unlink_open(path: &Path) -> Option<PathBuf> {
    Some(path.to_path_buf())
}
