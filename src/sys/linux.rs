//! The Linux backend: the mechanisms ptyd uses that only Linux has (see the
//! contract in `sys/mod.rs` for what other systems do instead).
//!
//! Pidfds. After a live upgrade the panes' processes stay children of the
//! server generation that spawned them; the current server cannot
//! `waitpid` them. A pidfd (`pidfd_open`) refers to the process itself: it
//! polls readable when the process exits, and on Linux >= 6.15
//! `PIDFD_GET_INFO` with `PIDFD_INFO_EXIT` returns its wait status even
//! after whoever is its parent (an old generation, the user's systemd,
//! init) reaped it. So no zombie is left and no status is lost, whoever the
//! parent is.

use super::unix::{ProcessExit, Received, context, recvmsg_fds, syscall, wait_status_exit};
use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
/// `struct pidfd_info` of linux/pidfd.h (version 0 size, 64 bytes, with the
/// 6.15 `exit_code` in what was the spare field).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `_IOWR(PIDFS_IOCTL_MAGIC = 0xFF, 11, struct pidfd_info)`.
const PIDFD_GET_INFO: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PidfdInfo>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;

/// Opens a pidfd for `pid` (close-on-exec, as the kernel always makes it).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(context(format_args!("pidfd_open({pid})"))(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: the kernel just created this fd for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The pid a pidfd refers to (the `Pid:` line of its fdinfo), or `None`
/// when the process is gone (the kernel then says -1) or it is no pidfd.
pub fn pidfd_pid(pidfd: &impl AsRawFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    let pid: i32 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}

/// Set (to anything): `pidfd_exit_status` never tells, as before Linux
/// 6.15 (tests of the keeper's exit forwarding).
pub const NO_PIDFD_EXIT_ENV: &str = "PTYD_NO_PIDFD_EXIT";

/// How the process of `pidfd` ended, or `Ok(None)` while it runs or when
/// the kernel cannot tell (before 6.15).
pub fn pidfd_exit_status(pidfd: &OwnedFd) -> io::Result<Option<ProcessExit>> {
    // A test switch: behave as a kernel before 6.15, so the keeper's
    // forwarding of exits is what reports them.
    static DISABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *DISABLED.get_or_init(|| std::env::var_os(NO_PIDFD_EXIT_ENV).is_some()) {
        return Ok(None);
    }
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: `info` is a valid, writable pidfd_info of the size encoded in
    // the request number.
    let rc = unsafe { libc::ioctl(pidfd.as_raw_fd(), PIDFD_GET_INFO as _, &mut info) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        // ENOTTY/EINVAL: a kernel without PIDFD_GET_INFO.
        return if matches!(e.raw_os_error(), Some(libc::ENOTTY) | Some(libc::EINVAL)) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok((info.mask & PIDFD_INFO_EXIT != 0).then(|| wait_status_exit(info.exit_code)))
}

/// An anonymous file (`memfd_create`) holding `bytes`, to pass as one fd.
/// Its offset is left at the end: a reader that shares the open file
/// description rewinds first.
pub fn anonymous_file(name: &CStr, bytes: &[u8]) -> io::Result<OwnedFd> {
    let fd = syscall!(memfd_create(name.as_ptr(), libc::MFD_CLOEXEC))
        .map_err(context("memfd_create"))?;
    // SAFETY: the kernel just created this fd for us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes).map_err(context("writing the memfd"))?;
    Ok(OwnedFd::from(file))
}

/// Gives back the memory of bytes `offset..offset + len` of a file (a
/// memfd: they read as zeroes after), keeping its size.
pub fn punch_hole(fd: &impl AsRawFd, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    syscall!(fallocate(fd.as_raw_fd(), mode, offset, len))
        .map_err(context("fallocate(PUNCH_HOLE)"))?;
    Ok(())
}

/// Bytes written to a connected `AF_UNIX` stream socket that its peer has
/// not read yet (`SIOCOUTQ`: the send buffer's use, kernel overhead
/// included); `None` if the kernel does not say.
pub fn socket_unread(fd: &impl AsRawFd) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: `n` is a valid, writable int, what SIOCOUTQ (TIOCOUTQ's
    // number) fills in.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    (rc == 0).then(|| usize::try_from(n).unwrap_or(0))
}

/// Asks for SIGKILL when our parent dies (`PR_SET_PDEATHSIG`), and
/// checks the parent is still `parent` (it may have died before).
pub fn die_with_parent(parent: i32) -> io::Result<()> {
    let sig = libc::SIGKILL as libc::c_ulong;
    let zero: libc::c_ulong = 0;
    syscall!(prctl(libc::PR_SET_PDEATHSIG, sig, zero, zero, zero))
        .map_err(context("prctl(PR_SET_PDEATHSIG)"))?;
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // SAFETY: raise has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    Ok(())
}

/// Marks this process as the subreaper of its descendants
/// (`PR_SET_CHILD_SUBREAPER`): an orphaned descendant is re-parented to us
/// rather than to init.
pub fn become_child_subreaper() -> io::Result<()> {
    let one: libc::c_ulong = 1;
    let zero: libc::c_ulong = 0;
    syscall!(prctl(libc::PR_SET_CHILD_SUBREAPER, one, zero, zero, zero))
        .map_err(context("prctl(PR_SET_CHILD_SUBREAPER)"))?;
    Ok(())
}

/// The kernel's start time of a process (field 22 of `/proc/<pid>/stat`, in
/// clock ticks since boot). Together with the pid it names one process for
/// good: a reused pid has a different start time.
pub fn process_start_token(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)?.parse().ok()
}

/// Whether `pid` has exited: gone, or a zombie its parent has not reaped
/// yet (a client watching a server it did not start).
pub fn process_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_field(&stat, 3) == Some("Z"),
        Err(_) => !super::unix::process_exists(pid),
    }
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/<pid>/stat` line. The
/// command name (field 2) may contain spaces and parentheses, so fields after
/// it are counted from its last closing parenthesis.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(n.checked_sub(3)?)
}

/// Every live process whose session id is `sid`, found by scanning /proc.
/// Killing by session rather than process group reaches children that moved
/// to a process group of their own (job control in the pane's shell does that).
pub fn session_members(sid: i32) -> Vec<i32> {
    sessions_members(&[sid]).remove(&sid).unwrap_or_default()
}

/// [`session_members`] of several sessions in one pass over /proc: a pass
/// per session made stopping a server with hundreds of panes take tens of
/// seconds (panes times processes reads).
pub fn sessions_members(sids: &[i32]) -> HashMap<i32, Vec<i32>> {
    let mut members: HashMap<i32, Vec<i32>> = sids.iter().map(|s| (*s, Vec::new())).collect();
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

/// The current directory of a process (`/proc/<pid>/cwd`), if the kernel
/// tells us and it is an absolute path.
pub fn process_cwd(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
        .ok()
        .filter(|p| p.is_absolute())
}

/// The processes of ours (other than this one) holding an open file that
/// was at `path` and has since been unlinked (`/proc/PID/fd` links read
/// `PATH (deleted)`): the servers of a namespace whose runtime directory
/// was removed under them still hold their lock so. Only processes we may
/// read are seen, which are the ones that could serve us.
pub fn holders_of_deleted(path: &std::path::Path) -> Vec<i32> {
    let want = format!("{} (deleted)", path.display());
    let own = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut holders = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
            .filter(|pid| *pid != own)
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let held = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == want.as_str())
        });
        if held {
            holders.push(pid);
        }
    }
    holders.sort_unstable();
    holders
}

/// Whether some process listens on the Unix socket bound at `path`, from
/// `/proc/net/unix` (flag `__SO_ACCEPTCON`), without connecting to it.
pub fn unix_socket_listening(path: &std::path::Path) -> bool {
    const ACCEPTCON: u32 = 0x0001_0000;
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return false;
    };
    let want = path.as_os_str().to_string_lossy();
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // Num RefCount Protocol Flags Type St Inode Path
        fields.len() >= 8
            && fields[7..].join(" ") == want
            && u32::from_str_radix(fields[3], 16).is_ok_and(|f| f & ACCEPTCON != 0)
    })
}

/// A connected pair of `AF_UNIX` `SOCK_SEQPACKET` sockets, both
/// close-on-exec (atomically) and, if asked, non-blocking.
pub fn seqpacket_pair(nonblocking: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    let mut flags = SockFlag::SOCK_CLOEXEC;
    if nonblocking {
        flags |= SockFlag::SOCK_NONBLOCK;
    }
    socketpair(AddressFamily::Unix, SockType::SeqPacket, None, flags)
        .map_err(|e| context("socketpair(AF_UNIX, SOCK_SEQPACKET)")(e.into()))
}

/// Receives one message into `data` with room for `max_fds` fds, which
/// arrive close-on-exec atomically (`MSG_CMSG_CLOEXEC`), so a process
/// spawned meanwhile cannot inherit one.
pub fn recv_with_fds(sock: &impl AsRawFd, data: &mut [u8], max_fds: usize) -> io::Result<Received> {
    recvmsg_fds(sock.as_raw_fd(), data, max_fds, libc::MSG_CMSG_CLOEXEC)
}

/// Asks the scheduler to run the calling thread in short slices:
/// `sched_setattr` with `sched_runtime` as the slice it requests (EEVDF,
/// Linux 6.12 and later; the kernel clamps it to 0.1-100 ms). A thread that
/// asks for less than the default slice (0.7-3 ms, by core count) gets an
/// earlier deadline, so when it wakes it preempts a CPU hog at once instead
/// of waiting out the hog's slice: for a server that relays keystrokes
/// beside programs that flood, that wait is most of the echo's delay. Its
/// share of the CPU is unchanged (that is the nice value's, kept as it is);
/// it is only cut into shorter turns. `SCHED_FLAG_RESET_ON_FORK`: threads
/// and processes started from this one get the default slice (and, as that
/// flag does, a negative nice value goes back to 0 in them). On kernels
/// before 6.12 the field is ignored for this policy and nothing changes. A
/// thread under another policy than `SCHED_OTHER` (a user's `chrt`) is
/// left alone.
pub fn request_short_slices(slice: std::time::Duration) -> io::Result<()> {
    /// `struct sched_attr` as of Linux 3.14 (`SCHED_ATTR_SIZE_VER0`).
    #[repr(C)]
    #[derive(Default)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
    let mut attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..SchedAttr::default()
    };
    // SAFETY: `attr` is a writable `struct sched_attr` of the size passed;
    // the kernel fills at most that many bytes. Pid 0 is this thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if attr.policy != libc::SCHED_OTHER as u32 {
        return Ok(());
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.flags = SCHED_FLAG_RESET_ON_FORK;
    attr.runtime = slice.as_nanos().min(u64::MAX as u128) as u64;
    // SAFETY: `attr` is a valid `struct sched_attr` read back from the
    // kernel with only the slice and flags changed (policy and nice as
    // they were, so no privilege is asked for). Pid 0 is this thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Hands the allocator's free memory back to the system. glibc keeps freed
/// heap memory mapped for reuse; a server that turns into the reaper after a
/// live upgrade has just freed every pane's model (often 100 MiB and more)
/// and will allocate next to nothing again, so without this its RSS stays
/// that of the server it was. Other C libraries (musl) have no such call and
/// return large frees on their own: a no-op there.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own heap
    // structures, under their locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many fds this process has open (the entries of `/proc/self/fd`,
/// less the one reading it).
pub fn open_fd_count() -> Option<usize> {
    let n = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some(n.saturating_sub(1))
}

/// Sends one datagram from `sock` to `name` in the abstract socket
/// namespace (`$NOTIFY_SOCKET` starting with `@`).
pub fn send_abstract_datagram(
    sock: &std::os::unix::net::UnixDatagram,
    name: &[u8],
    bytes: &[u8],
) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    sock.send_to_addr(bytes, &addr).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_survives_reaping_by_the_parent() {
        let child = std::process::Command::new("/bin/sh")
            .args(["-c", "exit 42"])
            .spawn()
            .unwrap();
        let pidfd = pidfd_open(child.id() as i32).unwrap();
        let mut child = child;
        let status = child.wait().unwrap(); // reaped: the pid is gone
        assert_eq!(status.code(), Some(42));
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut parts = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        match pidfd_exit_status(&pidfd).unwrap() {
            Some(exit) => assert_eq!(exit, ProcessExit::Code(42)),
            None => assert!(
                version < (6, 15),
                "kernel {release} should report PIDFD_INFO_EXIT"
            ),
        }
    }

    #[test]
    fn finds_a_listening_socket_without_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        assert!(!unix_socket_listening(&path));
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(unix_socket_listening(&path));
        drop(listener);
        assert!(!unix_socket_listening(&path));
    }
}
