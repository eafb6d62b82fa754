//! Atomic file replacement: a reader sees the old file or the new one, never
//! a mix, and a crash at any moment leaves one of the two on disk.
//!
//! The sequence: a unique temp file in the same directory (O_EXCL, so two
//! writers never share one), write, fsync, rename over the target, fsync the
//! directory (or the rename itself may not survive a power cut). A rename
//! refused with EPERM/EBUSY/EACCES (Windows refuses while a reader has the
//! file open; some network filesystems do likewise) is retried with backoff;
//! on final failure the temp file is removed and the old file is untouched.
//! See: ../shared/seeds (the atomic-write race post-mortem).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Backoff between rename attempts that failed with a sharing error.
const RENAME_BACKOFF: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(250),
];

/// Replaces `path` with `contents`. `sync` false skips both fsyncs, for data
/// that may be lost (history files) but must still never be torn.
pub fn write_atomic(path: &Path, contents: &[u8], sync: bool) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let (tmp_path, mut tmp) = create_unique_temp(dir, path)?;
    let result = (|| {
        tmp.write_all(contents)?;
        if sync {
            tmp.sync_all()?;
        }
        drop(tmp);
        rename_with_retry(&tmp_path, path)?;
        if sync {
            crate::sys::sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result.map_err(|e: io::Error| {
        io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
    })
}

fn create_unique_temp(dir: &Path, target: &Path) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let stem = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file");
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{stem}.tmp.{}.{n}", std::process::id()));
        match crate::sys::trust::private_file(OpenOptions::new().write(true).create_new(true))
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("creating temp file in {}: {e}", dir.display()),
                ));
            }
        }
    }
}

/// Removes temp files of [`write_atomic`] in `dir` left by a process that
/// no longer runs (a writer killed between create and rename), so they do
/// not pile up across crashes. Files of live processes are left alone: a
/// live writer may still rename its file.
pub fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        if pid != std::process::id() && process_ended(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The pid in a temp file name `.{stem}.tmp.{pid}.{n}`.
fn temp_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let (_, tail) = rest.rsplit_once(".tmp.")?;
    let (pid, n) = tail.split_once('.')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// A zombie counts as ended: it writes nothing more. A server killed with
/// its keeper is an orphan zombie until something reaps it, and where
/// nothing does (pid 1 of a container that does not reap) its temp file
/// would otherwise be kept for good.
fn process_ended(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return true;
    };
    crate::sys::process_ended(pid)
}

fn rename_with_retry(from: &Path, to: &Path) -> io::Result<()> {
    let mut attempt = 0;
    loop {
        match std::fs::rename(from, to) {
            Ok(()) => return Ok(()),
            Err(e) if is_sharing_error(&e) && attempt < RENAME_BACKOFF.len() => {
                std::thread::sleep(RENAME_BACKOFF[attempt]);
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// EPERM, EACCES (both `PermissionDenied`) or EBUSY (`ResourceBusy`).
fn is_sharing_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ResourceBusy
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        write_atomic(&path, b"one", true).unwrap();
        write_atomic(&path, b"two", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn stale_temps_of_dead_writers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = if cfg!(windows) {
            std::process::Command::new("cmd.exe")
                .args(["/c", "exit"])
                .spawn()
                .unwrap()
        } else {
            std::process::Command::new("true").spawn().unwrap()
        };
        let dead = child.id();
        child.wait().unwrap();
        let stale = dir.path().join(format!(".session.json.tmp.{dead}.3"));
        let live = dir
            .path()
            .join(format!(".session.json.tmp.{}.4", std::process::id()));
        let other = dir.path().join("session.json");
        for f in [&stale, &live, &other] {
            std::fs::write(f, b"x").unwrap();
        }
        remove_stale_temps(dir.path());
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
        assert_eq!(temp_owner(".p1.txt.tmp.42.0"), Some(42));
        assert_eq!(temp_owner("p1.txt"), None);
    }

    #[test]
    fn failure_keeps_old_file_and_cleans_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        write_atomic(&path, b"old", true).unwrap();
        // Renaming a file over a non-empty directory fails (EISDIR/ENOTEMPTY).
        let blocker = dir.path().join("blocked");
        std::fs::create_dir(&blocker).unwrap();
        std::fs::write(blocker.join("x"), b"x").unwrap();
        assert!(write_atomic(&blocker, b"new", true).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        let temps = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".tmp.")
            })
            .count();
        assert_eq!(temps, 0);
    }
}
