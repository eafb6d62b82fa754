//! Files: the trust rules for ptyd's state, the default directories,
//! positional reads, and `SharedMap` (the output rings' mapping).

use super::*;

/// Files and directories holding ptyd's state: created private (0600 and
/// 0700), opened without following a symlink or blocking on a FIFO, and
/// trusted only if ours and not writable by others. The messages say what
/// to run to fix a refused one.
pub mod trust {
    use std::fs::{DirBuilder, Metadata, OpenOptions};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    use std::path::Path;

    /// A file created through `options` is readable and writable by its
    /// owner only.
    pub fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
        options.mode(0o600)
    }

    /// A directory created through `builder` is the owner's only.
    pub fn private_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
        builder.mode(0o700)
    }

    /// A directory created through [`private_dir`] is private already
    /// (its mode was set at creation): nothing to do.
    pub fn make_private(_dir: &Path) -> std::io::Result<()> {
        Ok(())
    }

    /// Opening through `options` never follows a symlink (the open fails,
    /// see [`super::is_symlink_refused`]) and never blocks on a FIFO.
    pub fn untrusted_path(options: &mut OpenOptions) -> &mut OpenOptions {
        options.custom_flags(super::OPEN_UNTRUSTED_PATH)
    }

    /// Whether the file or directory `meta` describes belongs to us.
    pub fn is_ours(_path: &Path, meta: &Metadata) -> bool {
        meta.uid() == super::current_uid()
    }

    /// Why `path` (described by `meta`) is not ours to trust, or `None`:
    /// owned by another user, or writable by group or others (`private`:
    /// open to them at all).
    pub fn refusal(path: &Path, meta: &Metadata, what: &str, private: bool) -> Option<String> {
        let uid = super::current_uid();
        if meta.uid() != uid {
            return Some(format!(
                "{} is owned by uid {}, not by you (uid {uid}); ptyd does not trust a {what} \
                 another user controls. Run: chown {uid} {} (or remove it)",
                path.display(),
                meta.uid(),
                path.display()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if private && mode & 0o077 != 0 {
            return Some(format!(
                "{} has mode {:o}, open to group or others; refusing to use it. Run: chmod 700 {}",
                path.display(),
                mode & 0o777,
                path.display()
            ));
        }
        if mode & 0o022 != 0 {
            return Some(format!(
                "{} has mode {mode:o}, writable by group or others; ptyd does not trust a {what} \
                 others can change. Run: chmod go-w {}",
                path.display(),
                path.display()
            ));
        }
        None
    }
}

/// Where a namespace's runtime directories go without `$XDG_RUNTIME_DIR`.
pub fn default_runtime_base() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/ptyd-{}", current_uid()))
}

/// Where a namespace's state directories go without `$XDG_STATE_HOME`, if
/// the user has a home.
pub fn default_state_base() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".local/state/ptyd"))
}

/// Makes a rename in `dir` durable: fsync of the directory.
pub fn sync_dir(dir: &std::path::Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Sets a file's length (`ftruncate`): a fresh memfd's size before it is
/// mapped.
pub fn set_file_len(fd: &impl AsRawFd, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file length out of range"))?;
    syscall!(ftruncate(fd.as_raw_fd(), len))?;
    Ok(())
}

/// Reads at `offset` without moving the file position (`pread`); a hole
/// reads as zeroes and stays unallocated, which a mapping's read would not.
pub fn read_at(fd: &impl AsRawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
    let n = syscall!(pread(
        fd.as_raw_fd(),
        buf.as_mut_ptr().cast(),
        buf.len(),
        offset
    ))?;
    Ok(n as usize)
}

/// A shared, writable mapping of a whole file (`mmap` with `MAP_SHARED`),
/// seen as a header of `WORDS` 64-bit atomic words followed by a byte area.
///
/// Other processes may map the same file. Its contract with them is the
/// caller's: the output ring has one writer at a time and readers that run
/// only after that writer died (or in its own process), publishing with
/// the header's atomics. The two views never overlap, so handing out the
/// header by `&self` and the bytes by `&mut self` is sound within this
/// process.
pub struct SharedMap<const WORDS: usize> {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone and unmapped on drop;
// its pointer is never handed out beyond borrows of `self`.
unsafe impl<const WORDS: usize> Send for SharedMap<WORDS> {}

impl<const WORDS: usize> SharedMap<WORDS> {
    const HEADER_BYTES: usize = WORDS * 8;

    /// Maps `fd`'s first `WORDS * 8 + data_len` bytes. The file must be at
    /// least that long (a shorter one faults on access).
    pub fn new(fd: &impl AsRawFd, data_len: usize) -> io::Result<SharedMap<WORDS>> {
        let len = Self::HEADER_BYTES
            .checked_add(data_len)
            .filter(|&l| l > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad mapping size"))?;
        // SAFETY: a fresh shared mapping of a file the caller holds; no
        // existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The header's words.
    pub fn header(&self) -> &[std::sync::atomic::AtomicU64; WORDS] {
        // SAFETY: the mapping is page-aligned and at least `WORDS * 8`
        // bytes long; AtomicU64 has the size and alignment of u64 and may
        // be shared between threads and processes.
        unsafe { &*(self.ptr as *const [std::sync::atomic::AtomicU64; WORDS]) }
    }

    /// The byte area after the header.
    pub fn data(&self) -> &[u8] {
        // SAFETY: [header, len) lies inside our mapping and never overlaps
        // the header's words.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr.add(Self::HEADER_BYTES),
                self.len - Self::HEADER_BYTES,
            )
        }
    }

    /// The byte area after the header, to write.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `data`; `&mut self` makes this the only borrow of it
        // in this process.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.add(Self::HEADER_BYTES),
                self.len - Self::HEADER_BYTES,
            )
        }
    }
}

impl<const WORDS: usize> Drop for SharedMap<WORDS> {
    fn drop(&mut self) {
        // SAFETY: the mapping we made, of this length, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// FIFOs exist: a process can block on a named file until another writes
/// to it (the tmux front's `wait-for` channels).
pub const HAS_FIFOS: bool = true;

/// Creates a FIFO at `path`, readable and writable by the user only.
pub fn make_fifo(path: &std::path::Path) -> io::Result<()> {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(io::Error::from)
}

/// Opens a FIFO for writing without waiting for a reader: one with no
/// reader fails (`ENXIO`) instead of blocking.
pub fn open_fifo_writer(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}
