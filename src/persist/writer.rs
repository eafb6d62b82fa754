//! The disk writer: the one thread besides the loop. It takes save jobs the
//! loop has already serialized, does the fsync-heavy work, and reports back
//! through a channel plus a mio `Waker`, so the loop never waits on a disk.
//!
//! Order within a job: history files first (optional data, not fsynced), then
//! `session.json` (fsynced), so a session file never names a history file that
//! was not written. History files no longer named are removed afterwards.

use super::atomic::write_atomic;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// One save, fully serialized by the loop.
pub struct SaveJob {
    pub revision: u64,
    pub session_path: PathBuf,
    pub session: Vec<u8>,
    pub history_dir: PathBuf,
    /// (file name, contents) of history files that changed.
    pub histories: Vec<(String, Vec<u8>)>,
    /// History file names still in use; any other file there is removed.
    pub keep_histories: Vec<String>,
}

pub struct SaveResult {
    pub revision: u64,
    pub outcome: Result<Duration, String>,
    /// History files that could not be written (optional data: the save
    /// went on without them).
    pub history_errors: Vec<String>,
}

pub struct Writer {
    jobs: Option<Sender<SaveJob>>,
    results: Receiver<SaveResult>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread. `wake` is called after each result is sent.
    pub fn spawn(wake: Arc<dyn Fn() + Send + Sync>) -> std::io::Result<Writer> {
        let (job_tx, job_rx) = mpsc::channel::<SaveJob>();
        let (res_tx, res_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ptyd-disk".into())
            .spawn(move || {
                for job in job_rx {
                    let revision = job.revision;
                    let started = Instant::now();
                    let mut history_errors = Vec::new();
                    let outcome = run_job(job, &mut history_errors).map(|()| started.elapsed());
                    let result = SaveResult {
                        revision,
                        outcome,
                        history_errors,
                    };
                    if res_tx.send(result).is_err() {
                        return;
                    }
                    wake();
                }
            })?;
        Ok(Writer {
            jobs: Some(job_tx),
            results: res_rx,
            thread: Some(thread),
        })
    }

    pub fn submit(&self, job: SaveJob) -> bool {
        self.jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }

    /// Results that arrived since the last call.
    pub fn results(&self) -> Vec<SaveResult> {
        self.results.try_iter().collect()
    }

    /// Waits for every submitted job and stops the thread: for shutdown only.
    pub fn finish(&mut self) -> Vec<SaveResult> {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.results.try_iter().collect()
    }
}

fn run_job(job: SaveJob, history_errors: &mut Vec<String>) -> Result<(), String> {
    let mut histories = &job.histories[..];
    if !job.histories.is_empty() || !job.keep_histories.is_empty() {
        if let Err(e) = real_history_dir(&job.history_dir) {
            // Optional data: the session is still saved.
            history_errors.push(e);
            histories = &[];
        }
    }
    for (name, contents) in histories {
        // History is the optional durability class: torn never, lost maybe.
        // A failure must not keep session.json from being written; the file
        // it names keeps its old contents, or is created empty.
        let path = job.history_dir.join(name);
        if let Err(e) = write_atomic(&path, contents, false) {
            history_errors.push(e.to_string());
            if !path.exists() {
                let _ = std::fs::File::create(&path);
            }
        }
    }
    write_atomic(&job.session_path, &job.session, true).map_err(|e| e.to_string())?;
    // Only ever prune a real directory of ours: through a symlink, this
    // would delete files wherever the link points.
    if super::files::check_dir(&job.history_dir).is_err() {
        return Ok(());
    }
    if let Ok(entries) = std::fs::read_dir(&job.history_dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !job.keep_histories.contains(&name) && !name.starts_with('.') {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(())
}

/// Makes `dir` a real directory: a symlink there (planted, or left by a
/// user's "move history elsewhere" trick) is removed, never followed, and
/// a directory is created in its place. Anything else refused stays an
/// error, and no history is written.
fn real_history_dir(dir: &std::path::Path) -> Result<(), String> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(dir).map_err(|e| {
            format!(
                "replacing the symlink {} with a directory: {e}",
                dir.display()
            )
        })?;
    }
    match crate::sys::trust::private_dir(&mut std::fs::DirBuilder::new()).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {e}", dir.display())),
    }
    match super::files::check_dir(dir) {
        Err(super::files::FileError::Refused(why)) => Err(why),
        _ => Ok(()),
    }
}
