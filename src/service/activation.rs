//! Socket activation: adopting the listening socket systemd passes
//! (`ptyd.socket`), as `sd_listen_fds(3)` describes: `LISTEN_PID` names the
//! process the sockets are for, `LISTEN_FDS` how many there are (from fd 3
//! up), `LISTEN_FDNAMES` their names.
//!
//! Nothing from the environment is trusted blindly: the pid must be ours,
//! there must be exactly one fd, and it must be a listening `AF_UNIX` stream
//! socket bound to this namespace's socket path. Anything else is refused
//! with a message naming what was found, so a socket unit pointing at the
//! wrong path fails loudly at start instead of serving a namespace nobody
//! connects to.
//!
//! The variables are removed once read, so neither a pane (the spawn code
//! drops `LISTEN_*` too) nor a binary this process later execs mistakes them
//! for its own; [`pass_on_exec`] sets them afresh for a restore-mode upgrade.
//!
//! The adopted socket belongs to systemd: ptyd never unlinks its path (the
//! socket unit's `RemoveOnStop=` does). A live upgrade hands it on like a
//! socket ptyd bound itself, since the handoff sends the listener's fd.

use crate::paths::NamespacePaths;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;

/// The first passed fd (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// Takes the listening socket systemd passed for this process, if any.
/// `Ok(None)` when nothing was passed to us (not socket-activated, or the
/// variables are for another process); `Err` when something was passed but
/// is not this namespace's listening socket.
pub fn adopt_listener(paths: &NamespacePaths) -> Result<Option<UnixListener>, String> {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    // SAFETY: called at start-up before any other thread reads the
    // environment (the disk thread starts later).
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    let (Some(pid), Some(fds)) = (pid, fds) else {
        return Ok(None);
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        // For another process (inherited through a shell, say): not ours.
        return Ok(None);
    }
    let count: i32 = fds
        .trim()
        .parse()
        .map_err(|_| format!("socket activation: LISTEN_FDS={fds:?} is not a number"))?;
    let names = names.unwrap_or_default();
    match count {
        0 => return Ok(None),
        1 => {}
        n => {
            return Err(format!(
                "socket activation: systemd passed {n} sockets (names {names:?}); \
                 ptyd serves one: give its socket unit exactly one ListenStream={}",
                paths.socket().display()
            ));
        }
    }
    let fd = LISTEN_FDS_START;
    check_listener(fd, paths).map_err(|e| {
        format!(
            "socket activation: the passed fd {fd} ({}) {e}",
            if names.is_empty() { "unnamed" } else { &names }
        )
    })?;
    // SAFETY: LISTEN_PID names us, so fd 3 was passed to this process for
    // it to own; `check_listener` confirmed it is an open listening socket,
    // and nothing else in this process has taken it (the variables are
    // read once, above, and removed).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    set_cloexec_nonblock(&owned).map_err(|e| format!("socket activation: fd {fd}: {e}"))?;
    Ok(Some(UnixListener::from(owned)))
}

/// Checks `fd` is a listening AF_UNIX stream socket bound to the
/// namespace's socket path. The error completes "the passed fd N ...".
fn check_listener(fd: RawFd, paths: &NamespacePaths) -> Result<(), String> {
    use nix::sys::socket::{SockType, SockaddrLike, SockaddrStorage, getsockname, getsockopt};
    // SAFETY: an all-zero `stat` is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer; fstat on a closed fd
    // number fails with EBADF and touches nothing.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(format!(
            "cannot be examined: {}",
            std::io::Error::last_os_error()
        ));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err("is not a socket".into());
    }
    // SAFETY: fstat just showed `fd` is open; the borrow ends with this
    // function, before anything takes ownership of it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let addr: SockaddrStorage =
        getsockname(fd).map_err(|e| format!("has no readable address: {e}"))?;
    let Some(unix) = addr.as_unix_addr() else {
        return Err(format!(
            "is not a Unix-domain socket (address family {:?}); use ListenStream=PATH",
            addr.family()
        ));
    };
    let ty = getsockopt(&borrowed, nix::sys::socket::sockopt::SockType)
        .map_err(|e| format!("has no readable type: {e}"))?;
    if ty != SockType::Stream {
        return Err(format!(
            "is a {ty:?} socket, not a stream socket; use ListenStream="
        ));
    }
    let listening = getsockopt(&borrowed, nix::sys::socket::sockopt::AcceptConn)
        .map_err(|e| format!("cannot be examined: {e}"))?;
    if !listening {
        return Err("is not listening (Accept=no is needed in the socket unit)".into());
    }
    let want = paths.socket();
    match unix.path() {
        Some(path) if path == want => Ok(()),
        Some(path) => Err(format!(
            "is bound to {}, but namespace {:?} serves {}; point the socket unit's \
             ListenStream= there (`ptyd service install` writes a matching unit)",
            path.display(),
            paths.namespace,
            want.display()
        )),
        None => Err(format!(
            "is not bound to a path (abstract or unnamed); namespace {:?} serves {}",
            paths.namespace,
            want.display()
        )),
    }
}

fn set_cloexec_nonblock(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Makes `cmd`, about to be exec'd in this very process (a restore-mode
/// upgrade keeps the pid), receive `listener` as systemd would have passed
/// it: fd 3, `LISTEN_FDS=1`, `LISTEN_PID` = our pid. Any other fd the new
/// binary must keep may not be fd 3: the caller moves it first.
pub fn pass_on_exec(cmd: &mut std::process::Command, listener: RawFd) {
    use std::os::unix::process::CommandExt;
    cmd.env("LISTEN_FDS", "1")
        .env("LISTEN_PID", std::process::id().to_string())
        .env("LISTEN_FDNAMES", "ptyd");
    // SAFETY: runs right before exec; dup2 and fcntl are
    // async-signal-safe. dup2 leaves the new fd 3 without FD_CLOEXEC; when
    // `listener` already is fd 3, its flag is cleared instead.
    unsafe {
        cmd.pre_exec(move || {
            if listener == LISTEN_FDS_START {
                libc::fcntl(listener, libc::F_SETFD, 0);
            } else if libc::dup2(listener, LISTEN_FDS_START) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Whether some process listens on the Unix socket at `path`, found in
/// `/proc/net/unix` (flag `__SO_ACCEPTCON`) without connecting: a connection
/// to a socket unit's socket would start its service. Only Linux tells;
/// elsewhere this says no.
pub fn someone_listens(path: &std::path::Path) -> bool {
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

#[cfg(test)]
mod tests {
    #[test]
    fn finds_a_listening_socket_without_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        assert!(!super::someone_listens(&path));
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        if std::path::Path::new("/proc/net/unix").exists() {
            assert!(super::someone_listens(&path));
        }
        drop(listener);
        assert!(!super::someone_listens(&path));
    }
}
