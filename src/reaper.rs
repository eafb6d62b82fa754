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
//! (`sys::pidfd_exit_status`, `PIDFD_INFO_EXIT`), so the reaper throws them
//! away. (Where the OS has no subreaper, `sys/mod.rs` says what happens.) Later
//! generations simply exit after their handoff.
//!
//! It also keeps the service's main PID stable across upgrades (what systemd
//! tracks), and forwards SIGTERM and SIGHUP to the current server.
//!
//! The lineage pipe: the reaper holds the read end; every later generation
//! holds a write end (handed on in each upgrade) and writes its pid when it
//! becomes current. EOF means the last generation is gone: the reaper waits
//! for it and exits with its exit code.

use crate::sys::{self, ProcessExit};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Names the lineage write end a server keeps across an exec (`upgrade
/// --mode restore` restarts in place).
pub const LINEAGE_FD_ENV: &str = "PTYD_LINEAGE_FD";

/// Adopts the lineage write end named in the environment, if any (a pipe;
/// anything else is left alone).
///
/// # Safety
///
/// As [`crate::sys::take_inherited_fd`]: no other thread may be running,
/// and only our previous image (a restore-mode upgrade) names the fd.
pub unsafe fn lineage_from_env() -> Option<OwnedFd> {
    // SAFETY: the caller's guarantees are the ones this call needs.
    unsafe { crate::sys::take_inherited_fd(LINEAGE_FD_ENV, crate::sys::FdKind::Pipe) }
        .ok()
        .flatten()
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
    let _ = crate::sys::become_child_subreaper();
}

/// Writes this process's pid on a lineage write end: "I am current now".
pub fn announce(write_end: &OwnedFd) {
    let line = format!("{}\n", std::process::id());
    // One write(2); a short or failed write only leaves the reaper
    // signalling an older pid.
    let _ = nix::unistd::write(write_end, line.as_bytes());
}

/// Runs the reaper until the last generation is gone. `current` is the
/// server it handed over to. Returns the exit code for this process: the
/// last server's.
pub fn run_reaper(lineage: OwnedFd, mut current: i32) -> i32 {
    // A terminal's Ctrl-C reaches the whole process group: the server stops
    // on it; the reaper must stay to reap.
    let _ = sys::ignore_signal(sys::SIGINT);
    let Ok((wake_read, wake_write)) = std::os::unix::net::UnixStream::pair() else {
        return 1;
    };
    let _ = wake_read.set_nonblocking(true);
    let _ = wake_write.set_nonblocking(true);
    for sig in [sys::SIGCHLD, sys::SIGTERM, sys::SIGHUP] {
        if let Ok(w) = wake_write.try_clone() {
            let _ = signal_hook::low_level::pipe::register_raw(sig, OwnedFd::from(w));
        }
    }
    // The wake-up pipe says only that some signal came; the flags say which.
    let term = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    let _ = signal_hook::flag::register(sys::SIGTERM, Arc::clone(&term));
    let _ = signal_hook::flag::register(sys::SIGHUP, Arc::clone(&hup));

    let mut lineage = std::fs::File::from(lineage);
    let mut status: Option<ProcessExit> = None;
    let mut pending = String::new();
    reap(current, &mut status);
    loop {
        let Ok(ready) = sys::poll_readable(&[lineage.as_raw_fd(), wake_read.as_raw_fd()], None)
        else {
            continue;
        };
        if ready[1] {
            let mut buf = [0u8; 64];
            while matches!((&wake_read).read(&mut buf), Ok(k) if k > 0) {}
            reap(current, &mut status);
            if term.swap(false, Ordering::SeqCst) {
                let _ = sys::kill(current, sys::SIGTERM);
            }
            if hup.swap(false, Ordering::SeqCst) {
                let _ = sys::kill(current, sys::SIGHUP);
            }
        }
        if ready[0] {
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
        status = sys::wait_child(current);
    }
    reap(current, &mut status);
    match status {
        Some(ProcessExit::Code(code)) => code,
        Some(ProcessExit::Signal(sig)) => 128 + sig,
        None => 0,
    }
}

/// Reaps every exited child, keeping the status of `current`.
fn reap(current: i32, status: &mut Option<ProcessExit>) {
    while let Some((pid, exit)) = sys::reap_any_child() {
        if pid == current {
            *status = Some(exit);
        }
    }
}
