//! Reading the files ptyd trusts: `session.json`, history files and the
//! user's config. They can name commands the server will run (`resume`
//! commands, resume rules), so what is read must be ours and nobody
//! else's to change, and reading it must never hang or exhaust memory.
//!
//! Every read opens with `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC` (a symlink
//! is refused rather than followed; a FIFO or device cannot block the
//! open), then checks the open file with `fstat`: a regular file, owned by
//! us, not writable by group or others. Only then is it read, and never
//! more than a stated bound. The directories holding these files get the
//! same owner and mode checks ([`check_dir`]).

use crate::sys::trust;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Why a trusted file could not be read.
#[derive(Debug)]
pub enum FileError {
    /// No such file: usually not a problem (a first start, no config).
    Missing,
    /// The file exists but is not one we may trust or read; the message
    /// names the file, what is wrong and what to do.
    Refused(String),
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Missing => f.write_str("no such file"),
            FileError::Refused(msg) => f.write_str(msg),
        }
    }
}

/// Reads all of `path`, refusing a file over `limit` bytes.
pub fn read_trusted(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let (mut file, len) = open_trusted(path)?;
    if len > limit {
        return Err(FileError::Refused(format!(
            "{} is {} bytes, over the {} byte limit for this file; ptyd did not read it. \
             Move it away (ptyd then starts without it) or shrink it",
            path.display(),
            len,
            limit
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // `take`: the file may grow between fstat and read.
    (&mut file)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::Refused(format!("reading {}: {e}", path.display())))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::Refused(format!(
            "{} grew past the {limit} byte limit while being read; ptyd did not use it",
            path.display()
        )));
    }
    Ok(bytes)
}

/// What [`read_tail`] read.
pub struct Tail {
    pub bytes: Vec<u8>,
    /// Bytes at the start of the file that were skipped to stay in bounds.
    pub skipped: u64,
}

/// Reads the last `limit` bytes of `path` at most, starting at a line
/// boundary when anything was skipped: for files whose newest part matters
/// (history), so an oversized one costs no more than an allowed one.
pub fn read_tail(path: &Path, limit: u64) -> Result<Tail, FileError> {
    let (mut file, len) = open_trusted(path)?;
    let io_err = |e: io::Error| FileError::Refused(format!("reading {}: {e}", path.display()));
    let start = len.saturating_sub(limit);
    if start > 0 {
        file.seek(SeekFrom::Start(start)).map_err(io_err)?;
    }
    let mut bytes = Vec::with_capacity((len - start) as usize);
    (&mut file)
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    let mut skipped = start;
    if start > 0 {
        // Drop the partial first line (the whole chunk if it has no newline).
        let cut = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |nl| nl + 1);
        bytes.drain(..cut);
        skipped += cut as u64;
    }
    Ok(Tail { bytes, skipped })
}

/// Opens (creating, 0600) a log file of ours for appending, with the same
/// care as a read: never through a symlink, never blocking on a FIFO, and
/// only a regular file of ours (a log written into a planted file or a
/// device would be a write where it was not meant to go).
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = trust::untrusted_path(trust::private_file(
        OpenOptions::new().create(true).append(true),
    ))
    .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || !trust::is_ours(path, &meta) {
        return Err(io::Error::other(format!(
            "{} is not a regular file of yours; remove it",
            path.display()
        )));
    }
    Ok(file)
}

/// Opens `path` for reading without following a symlink or blocking on a
/// FIFO, and checks the open file is one we may trust. Returns its length.
fn open_trusted(path: &Path) -> Result<(File, u64), FileError> {
    let file = trust::untrusted_path(OpenOptions::new().read(true))
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => FileError::Missing,
            _ if crate::sys::is_symlink_refused(&e) => FileError::Refused(format!(
                "{} is a symbolic link; ptyd does not follow links for its state and config \
                 files. Replace it with the file itself",
                path.display()
            )),
            _ => FileError::Refused(format!("opening {}: {e}", path.display())),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| FileError::Refused(format!("checking {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(FileError::Refused(format!(
            "{} is not a regular file (a FIFO, device or directory); ptyd did not read it. \
             Remove it",
            path.display()
        )));
    }
    check_owner_and_mode(path, &meta, "file")?;
    Ok((file, meta.len()))
}

/// Refuses a directory that is a symlink, is owned by another user, or is
/// writable by group or others: whoever could write there could plant a
/// snapshot or config whose commands ptyd would run. `Ok` for a missing one.
pub fn check_dir(dir: &Path) -> Result<(), FileError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(FileError::Missing),
        Err(e) => {
            return Err(FileError::Refused(format!(
                "checking {}: {e}",
                dir.display()
            )));
        }
    };
    if meta.file_type().is_symlink() {
        return Err(FileError::Refused(format!(
            "{} is a symbolic link; ptyd does not follow links for its state and config \
             directories. Replace it with a directory",
            dir.display()
        )));
    }
    if !meta.is_dir() {
        return Err(FileError::Refused(format!(
            "{} is not a directory; remove it",
            dir.display()
        )));
    }
    check_owner_and_mode(dir, &meta, "directory")
}

fn check_owner_and_mode(
    path: &Path,
    meta: &std::fs::Metadata,
    what: &str,
) -> Result<(), FileError> {
    match trust::refusal(path, meta, what, false) {
        Some(why) => Err(FileError::Refused(why)),
        None => Ok(()),
    }
}

// Links, FIFOs and modes as Unix has them.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn refuses_links_fifos_and_open_modes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"hello").unwrap();
        assert_eq!(read_trusted(&file, 10).unwrap(), b"hello");
        assert!(
            matches!(read_trusted(&file, 4), Err(FileError::Refused(m)) if m.contains("limit"))
        );

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(
            matches!(read_trusted(&link, 10), Err(FileError::Refused(m)) if m.contains("symbolic link"))
        );

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(
            matches!(read_trusted(&fifo, 10), Err(FileError::Refused(m)) if m.contains("not a regular file"))
        );

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(
            matches!(read_trusted(&file, 10), Err(FileError::Refused(m)) if m.contains("chmod go-w"))
        );

        assert!(matches!(
            read_trusted(&dir.path().join("none"), 10),
            Err(FileError::Missing)
        ));
    }

    #[test]
    fn tail_starts_at_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h");
        std::fs::write(&file, b"first line\nsecond\nthird\n").unwrap();
        let tail = read_tail(&file, 10).unwrap();
        assert_eq!(tail.bytes, b"third\n");
        assert_eq!(tail.skipped, 18);
        let whole = read_tail(&file, 100).unwrap();
        assert_eq!((whole.bytes.len(), whole.skipped), (24, 0));
    }
}
