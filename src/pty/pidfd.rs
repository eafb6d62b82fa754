//! Exit statuses of processes that are not our children.
//!
//! After a live upgrade the panes' processes stay children of the server
//! generation that spawned them; the current server cannot `waitpid` them.
//! A pidfd (`pidfd_open`) refers to the process itself: it polls readable
//! when the process exits, and on Linux >= 6.15 `PIDFD_GET_INFO` with
//! `PIDFD_INFO_EXIT` returns its wait status even after whoever is its
//! parent (an old generation, the user's systemd, init) reaped it. So no
//! zombie is left and no status is lost, whoever the parent is.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
pub fn open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this fd for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The wait status (as `waitpid` reports it) of an exited process, or
/// `Ok(None)` while it runs or when the kernel cannot tell (before 6.15).
pub fn exit_status(pidfd: &OwnedFd) -> io::Result<Option<i32>> {
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
    Ok((info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code))
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
        let pidfd = open(child.id() as i32).unwrap();
        let mut child = child;
        let status = child.wait().unwrap(); // reaped: the pid is gone
        assert_eq!(status.code(), Some(42));
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut parts = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        match exit_status(&pidfd).unwrap() {
            Some(raw) => assert_eq!(libc::WEXITSTATUS(raw), 42),
            None => assert!(
                version < (6, 15),
                "kernel {release} should report PIDFD_INFO_EXIT"
            ),
        }
    }
}
