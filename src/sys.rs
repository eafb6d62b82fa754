//! Thin wrappers over the few raw system calls ptyd needs that neither std nor
//! nix exposes in the shape we want. Everything platform-specific that is not
//! about PTYs lives here, so call sites elsewhere never see `cfg`.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Turns a libc return value of -1 into the current `errno` as an `io::Error`
/// (mio's `syscall!` idiom).
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        // SAFETY: the caller passes arguments valid for this libc call; the
        // macro only inspects the return value.
        #[allow(unused_unsafe)]
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 { Err(std::io::Error::last_os_error()) } else { Ok(res) }
    }};
}
pub(crate) use syscall;

/// Sets O_NONBLOCK and FD_CLOEXEC. `openpty` returns fds with neither, and a
/// master leaking into a child would keep the PTY alive after we close it.
pub fn set_nonblocking_cloexec(fd: RawFd) -> io::Result<()> {
    let flags = syscall!(fcntl(fd, libc::F_GETFL))?;
    syscall!(fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK))?;
    set_cloexec(fd)
}

/// Sets FD_CLOEXEC, so the fd does not leak into spawned programs.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    let fdflags = syscall!(fcntl(fd, libc::F_GETFD))?;
    syscall!(fcntl(fd, libc::F_SETFD, fdflags | libc::FD_CLOEXEC))?;
    Ok(())
}

/// Hands the allocator's free memory back to the system. glibc keeps freed
/// heap memory mapped for reuse; a server that turns into the reaper after a
/// live upgrade has just freed every pane's model (often 100 MiB and more)
/// and will allocate next to nothing again, so without this its RSS stays
/// that of the server it was. Other allocators return memory on their own
/// or have no such call: a no-op there.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own heap
    // structures, under their locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Credentials of the process at the other end of a Unix socket, as of connect.
#[derive(Debug, Clone, Copy)]
pub struct PeerCred {
    pub uid: u32,
    /// Only Linux reports the peer pid; other systems leave it unknown.
    pub pid: Option<i32>,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn peer_cred(sock: &impl AsRawFd) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    syscall!(getsockopt(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_PEERCRED,
        (&mut cred as *mut libc::ucred).cast(),
        &mut len,
    ))?;
    Ok(PeerCred {
        uid: cred.uid,
        pid: Some(cred.pid),
    })
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn peer_cred(sock: &impl AsRawFd) -> io::Result<PeerCred> {
    let mut uid: libc::uid_t = 0;
    let mut gid: libc::gid_t = 0;
    syscall!(getpeereid(sock.as_raw_fd(), &mut uid, &mut gid))?;
    Ok(PeerCred { uid, pid: None })
}

pub fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Takes an exclusive, non-blocking `flock` on `fd`. Returns `Ok(false)` when
/// another process holds it. The lock lives as long as the open file
/// description, which is what lets a live upgrade pass it on with the fd.
pub fn try_lock_exclusive(fd: RawFd) -> io::Result<bool> {
    match syscall!(flock(fd, libc::LOCK_EX | libc::LOCK_NB)) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The kernel's start time of a process (field 22 of `/proc/<pid>/stat`, in
/// clock ticks since boot). Together with the pid it names one process for
/// good: a reused pid has a different start time.
#[cfg(target_os = "linux")]
pub fn process_start_token(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)?.parse().ok()
}

#[cfg(not(target_os = "linux"))]
pub fn process_start_token(_pid: i32) -> Option<u64> {
    None
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/<pid>/stat` line. The
/// command name (field 2) may contain spaces and parentheses, so fields after
/// it are counted from its last closing parenthesis.
#[cfg(target_os = "linux")]
pub fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(n.checked_sub(3)?)
}

/// A monotonic clock reading in microseconds. Both sides of an upgrade
/// read the same clock, so the blackout is measured across processes.
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// Every live process whose session id is `sid`, found by scanning /proc.
/// Killing by session rather than process group reaches children that moved
/// to a process group of their own (job control in the pane's shell does that).
#[cfg(target_os = "linux")]
pub fn session_members(sid: i32) -> Vec<i32> {
    sessions_members(&[sid]).remove(&sid).unwrap_or_default()
}

/// [`session_members`] of several sessions in one pass over /proc: a pass
/// per session made stopping a server with hundreds of panes take tens of
/// seconds (panes times processes reads).
#[cfg(target_os = "linux")]
pub fn sessions_members(sids: &[i32]) -> std::collections::HashMap<i32, Vec<i32>> {
    let mut members: std::collections::HashMap<i32, Vec<i32>> =
        sids.iter().map(|s| (*s, Vec::new())).collect();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return members;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(pids) = stat_field(&stat, 6)
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(|sid| members.get_mut(&sid))
        {
            pids.push(pid);
        }
    }
    members
}

#[cfg(not(target_os = "linux"))]
pub fn session_members(sid: i32) -> Vec<i32> {
    // Without /proc the process group of the session leader is the best reach.
    vec![-sid]
}

#[cfg(not(target_os = "linux"))]
pub fn sessions_members(sids: &[i32]) -> std::collections::HashMap<i32, Vec<i32>> {
    sids.iter().map(|s| (*s, session_members(*s))).collect()
}
