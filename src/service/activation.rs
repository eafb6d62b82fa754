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
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
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
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        crate::sys::remove_env(name);
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
    // Fds the keeper stored in systemd's fd store come back too, named as
    // its own (`fd_store::take_passed` took them): the socket unit's are
    // the rest.
    let all: Vec<&str> = names.split(':').collect();
    let sockets: Vec<i32> = (0..count.max(0))
        .filter(|i| {
            !all.get(*i as usize)
                .is_some_and(|n| super::fd_store::is_keepers(n))
        })
        .collect();
    let names = sockets
        .iter()
        .filter_map(|i| all.get(*i as usize).copied())
        .collect::<Vec<_>>()
        .join(":");
    let index = match sockets[..] {
        [] => return Ok(None),
        [i] => i,
        _ => {
            return Err(format!(
                "socket activation: systemd passed {} sockets (names {names:?}); \
                 ptyd serves one: give its socket unit exactly one ListenStream={}",
                sockets.len(),
                paths.socket().display()
            ));
        }
    };
    let fd = LISTEN_FDS_START + index;
    check_listener(fd, paths).map_err(|e| {
        format!(
            "socket activation: the passed fd {fd} ({}) {e}",
            if names.is_empty() { "unnamed" } else { &names }
        )
    })?;
    // LISTEN_PID names us, so this fd was passed to this process for it
    // to own; `check_listener` confirmed it is an open listening socket,
    // and nothing else in this process has taken it (the variables are
    // read once, above, and removed).
    let owned = crate::sys::adopt_passed_fd(fd);
    set_cloexec_nonblock(&owned).map_err(|e| format!("socket activation: fd {fd}: {e}"))?;
    Ok(Some(UnixListener::from(owned)))
}

/// Checks `fd` is a listening AF_UNIX stream socket bound to the
/// namespace's socket path. The error completes "the passed fd N ...".
fn check_listener(fd: RawFd, paths: &NamespacePaths) -> Result<(), String> {
    use nix::sys::socket::{SockType, SockaddrLike, SockaddrStorage, getsockname, getsockopt};
    match crate::sys::fd_is(fd, crate::sys::FdKind::Socket) {
        Ok(true) => {}
        Ok(false) => return Err("is not a socket".into()),
        Err(e) => return Err(format!("cannot be examined: {e}")),
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
    cmd.env("LISTEN_FDS", "1")
        .env("LISTEN_PID", std::process::id().to_string())
        .env("LISTEN_FDNAMES", "ptyd");
    crate::sys::dup2_on_exec(cmd, listener, LISTEN_FDS_START);
}

/// Whether some process listens on the Unix socket at `path`, found
/// without connecting: a connection to a socket unit's socket would start
/// its service. Only Linux tells (`sys::unix_socket_listening`); elsewhere
/// this says no.
pub fn someone_listens(path: &std::path::Path) -> bool {
    crate::sys::unix_socket_listening(path)
}
