//! The reaper: what the first server generation becomes after it hands
//! over to a new binary.
//!
//! Why: after a live upgrade the panes' processes are still children of the
//! generation that spawned them. When a generation exits, the kernel
//! re-parents its children to the nearest *ancestor* that is a child
//! subreaper, else to init — and init is not always a good reaper (in many
//! containers zombies pile up). A new server is a child of the old one, not an
//! ancestor of the panes, so it cannot reap them. So the first generation
//! marks itself `PR_SET_CHILD_SUBREAPER` at start-up and, after its first
//! handoff, stays behind as this tiny loop holding nothing but its children:
//! every later generation is its descendant, so every orphan lands here and
//! is reaped. Exit statuses reach the current server through pidfds
//! (`pty::pidfd`, `PIDFD_INFO_EXIT`), so the reaper throws them away. Later
//! generations simply exit after their handoff.
//!
//! It also keeps the service's main PID stable across upgrades (what systemd
//! tracks), and forwards SIGTERM and SIGHUP to the current server.
//!
//! The lineage pipe: the reaper holds the read end; every later generation
//! holds a write end (handed on in each upgrade) and writes its pid when it
//! becomes current. EOF means the last generation is gone: the reaper waits
//! for it and exits with its exit code.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Names the lineage write end a server keeps across an exec (`upgrade
/// --mode restore` restarts in place).
pub const LINEAGE_FD_ENV: &str = "PTYD_LINEAGE_FD";

/// Adopts the lineage write end named in the environment, if any.
pub fn lineage_from_env() -> Option<OwnedFd> {
    let fd: std::os::fd::RawFd = std::env::var(LINEAGE_FD_ENV).ok()?.parse().ok()?;
    // SAFETY: removing our own variable while single-threaded at start-up.
    unsafe { std::env::remove_var(LINEAGE_FD_ENV) };
    // SAFETY: fstat on a number we were handed; adopted only if a pipe.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_mode & libc::S_IFMT) != libc::S_IFIFO {
        return None;
    }
    // SAFETY: our previous image handed this fd to us alone.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let _ = crate::sys::set_cloexec(fd.as_raw_fd());
    Some(fd)
}

/// Creates the lineage pipe: (read end for the reaper, write end for the
/// next generation). Both close-on-exec, so no pane inherits them.
pub fn lineage_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read_end, write_end) = nix::unistd::pipe().map_err(io::Error::from)?;
    for fd in [&read_end, &write_end] {
        crate::sys::set_cloexec(fd.as_raw_fd())?;
    }
    Ok((read_end, write_end))
}

/// Marks this process as the subreaper of its descendants. Every server calls
/// it at start-up; only a first generation ever turns into the reaper.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Writes this process's pid on a lineage write end: "I am current now".
pub fn announce(write_end: &OwnedFd) {
    let line = format!("{}\n", std::process::id());
    // SAFETY: writing a valid buffer to an fd we own; a short or failed write
    // only leaves the reaper signalling an older pid.
    unsafe { libc::write(write_end.as_raw_fd(), line.as_ptr().cast(), line.len()) };
}

/// Runs the reaper until the last generation is gone. `current` is the
/// server it handed over to. Returns the exit code for this process: the
/// last server's.
pub fn run_reaper(lineage: OwnedFd, mut current: i32) -> i32 {
    // A terminal's Ctrl-C reaches the whole process group: the server stops
    // on it; the reaper must stay to reap.
    // SAFETY: setting a disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let Ok((wake_read, wake_write)) = std::os::unix::net::UnixStream::pair() else {
        return 1;
    };
    let _ = wake_read.set_nonblocking(true);
    let _ = wake_write.set_nonblocking(true);
    for sig in [libc::SIGCHLD, libc::SIGTERM, libc::SIGHUP] {
        if let Ok(w) = wake_write.try_clone() {
            let _ = signal_hook::low_level::pipe::register_raw(sig, OwnedFd::from(w));
        }
    }
    // The wake-up pipe says only that some signal came; the flags say which.
    let term = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    let _ = signal_hook::flag::register(libc::SIGTERM, Arc::clone(&term));
    let _ = signal_hook::flag::register(libc::SIGHUP, Arc::clone(&hup));

    let mut lineage = std::fs::File::from(lineage);
    let mut status: Option<i32> = None;
    let mut pending = String::new();
    reap(current, &mut status);
    loop {
        let mut fds = [
            libc::pollfd {
                fd: lineage.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake_read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            continue;
        }
        if fds[1].revents != 0 {
            let mut buf = [0u8; 64];
            while matches!((&wake_read).read(&mut buf), Ok(k) if k > 0) {}
            reap(current, &mut status);
            if term.swap(false, Ordering::SeqCst) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(current, libc::SIGTERM) };
            }
            if hup.swap(false, Ordering::SeqCst) {
                // SAFETY: as above.
                unsafe { libc::kill(current, libc::SIGHUP) };
            }
        }
        if fds[0].revents != 0 {
            let mut buf = [0u8; 256];
            match lineage.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    pending.push_str(&String::from_utf8_lossy(&buf[..k]));
                    while let Some(nl) = pending.find('\n') {
                        if let Ok(pid) = pending[..nl].trim().parse::<i32>() {
                            current = pid;
                            status = None;
                        }
                        pending.drain(..=nl);
                    }
                }
            }
        }
    }
    // Every generation has let go of the pipe: the last one is exiting.
    if status.is_none() {
        let mut raw = 0;
        // SAFETY: `raw` is a valid out-pointer.
        if unsafe { libc::waitpid(current, &mut raw, 0) } == current {
            status = Some(raw);
        }
    }
    reap(current, &mut status);
    match status {
        Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
        Some(s) if libc::WIFSIGNALED(s) => 128 + libc::WTERMSIG(s),
        _ => 0,
    }
}

/// Reaps every exited child, keeping the status of `current`.
fn reap(current: i32, status: &mut Option<i32>) {
    loop {
        let mut raw = 0;
        // SAFETY: `raw` is a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if pid == current {
            *status = Some(raw);
        }
    }
}
