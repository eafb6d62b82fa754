//! The backend for a Unix other than Linux (macOS, the BSDs): portable
//! replacements for what `linux.rs` does, or the documented degrade where
//! there is none (the table in `sys/mod.rs`). Built on Linux too with
//! `--cfg ptyd_portable`, so it is compiled and can be exercised here.

use super::unix::{
    ProcessExit, Received, context, recvmsg_fds, set_cloexec, set_nonblocking_cloexec,
};
use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is not available on this OS"),
    )
}

/// No pidfds: the processes of another generation's panes cannot be
/// watched, so a live upgrade with running panes is refused before the
/// pause (the old server keeps serving them).
pub fn pidfd_open(_pid: i32) -> io::Result<OwnedFd> {
    Err(unsupported(
        "a pidfd (a handle on a process that is not our child)",
    ))
}

/// Never reached (no pidfd exists); "cannot tell", as an old Linux says.
pub fn pidfd_exit_status(_pidfd: &OwnedFd) -> io::Result<Option<ProcessExit>> {
    Ok(None)
}

/// A temp file created exclusively (0600) and unlinked at once, so it has
/// no name left, holding `bytes`. Its offset is left at the end: a reader
/// that shares the open file description rewinds first.
pub fn anonymous_file(name: &CStr, bytes: &[u8]) -> io::Result<OwnedFd> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        ".{}.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(context(format_args!("creating {}", path.display())))?;
    std::fs::remove_file(&path).map_err(context(format_args!("unlinking {}", path.display())))?;
    file.write_all(bytes)
        .map_err(context("writing the anonymous file"))?;
    Ok(OwnedFd::from(file))
}

/// No subreaper: orphans of a finished generation go to init (or launchd),
/// which reaps them.
pub fn die_with_parent(_parent: i32) -> io::Result<()> {
    Err(unsupported("PR_SET_PDEATHSIG"))
}

pub fn become_child_subreaper() -> io::Result<()> {
    Err(unsupported("PR_SET_CHILD_SUBREAPER"))
}

/// No pidfds here (see `pidfd_open`), so none names a pid.
pub fn pidfd_pid(_pidfd: &impl std::os::fd::AsRawFd) -> Option<i32> {
    None
}

/// No portable start time: processes are told apart by pid alone.
pub fn process_start_token(_pid: i32) -> Option<u64> {
    None
}

/// Without /proc a zombie cannot be told from a running process: only a
/// pid that no longer exists counts as ended.
pub fn process_ended(pid: i32) -> bool {
    !super::unix::process_exists(pid)
}

/// Without /proc the process group of the session leader (`-sid`, for
/// `kill`) is the best reach: children that moved to a process group of
/// their own are missed.
pub fn session_members(sid: i32) -> Vec<i32> {
    vec![-sid]
}

/// [`session_members`] of each session.
pub fn sessions_members(sids: &[i32]) -> HashMap<i32, Vec<i32>> {
    sids.iter().map(|s| (*s, session_members(*s))).collect()
}

/// No portable way to read another process's directory: `None`, so
/// snapshots keep the directory the pane started in.
pub fn process_cwd(_pid: i32) -> Option<PathBuf> {
    None
}

/// No portable way to see another process's open files: none found, so
/// a namespace whose runtime directory was removed is claimed afresh.
pub fn holders_of_deleted(_path: &std::path::Path) -> Vec<i32> {
    Vec::new()
}

/// No portable way to see listeners without connecting (which would start
/// a socket unit's service): "no".
pub fn unix_socket_listening(_path: &std::path::Path) -> bool {
    false
}

/// A connected pair of `AF_UNIX` `SOCK_SEQPACKET` sockets, close-on-exec
/// and, if asked, non-blocking. Not every OS has the atomic flags, so they
/// are set right after; only the loop's thread spawns processes, so no
/// child can be started in between. (An OS without `SOCK_SEQPACKET` for
/// `AF_UNIX` fails here, and the upgrade with it, before anything moved.)
pub fn seqpacket_pair(nonblocking: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::empty(),
    )
    .map_err(|e| context("socketpair(AF_UNIX, SOCK_SEQPACKET)")(e.into()))?;
    for fd in [&a, &b] {
        if nonblocking {
            set_nonblocking_cloexec(fd.as_raw_fd())?;
        } else {
            set_cloexec(fd.as_raw_fd())?;
        }
    }
    Ok((a, b))
}

/// Receives one message into `data` with room for `max_fds` fds, then
/// makes each close-on-exec (no `MSG_CMSG_CLOEXEC` everywhere; as above,
/// no process is spawned in between).
pub fn recv_with_fds(sock: &impl AsRawFd, data: &mut [u8], max_fds: usize) -> io::Result<Received> {
    let received = recvmsg_fds(sock.as_raw_fd(), data, max_fds, 0)?;
    for fd in &received.fds {
        set_cloexec(fd.as_raw_fd())?;
    }
    Ok(received)
}

/// No portable way to give back a file's middle: the bytes stay
/// allocated until the file is closed (the crash checkpoints' history log
/// grows by what scrolled through it).
pub fn punch_hole(_fd: &impl AsRawFd, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

/// No slice to request outside Linux (see linux.rs): the scheduler's
/// defaults.
pub fn request_short_slices(_slice: std::time::Duration) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// No portable way to see what a socket's peer has not read yet (macOS
/// has `SO_NWRITE`, the BSDs `FIONWRITE`): only the server's own queue
/// tells how far behind a client is.
pub fn socket_unread(_fd: &impl AsRawFd) -> Option<usize> {
    None
}

/// Without glibc's `malloc_trim`: the allocator keeps what it keeps (see
/// linux.rs).
pub fn release_free_memory() {}

/// How many fds this process has open: not known without `/proc` (the
/// caller estimates from what it holds).
pub fn open_fd_count() -> Option<usize> {
    None
}

/// No abstract socket namespace here: `Unsupported`.
pub fn send_abstract_datagram(
    _sock: &std::os::unix::net::UnixDatagram,
    _name: &[u8],
    _bytes: &[u8],
) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "abstract socket names",
    ))
}
