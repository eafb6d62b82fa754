//! The Unix PTY backend: openpty, fork/exec as a session leader, winsize.

use super::{ChildProcess, SpawnSpec};
use crate::sys::syscall;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The master side of a pane's PTY.
#[derive(Debug)]
pub struct PtyMaster {
    fd: OwnedFd,
}

impl PtyMaster {
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Adopts a master handed over by the previous server generation.
    pub fn from_fd(fd: OwnedFd) -> PtyMaster {
        PtyMaster { fd }
    }

    /// Reads available output. `Ok(0)` or `EIO` both mean the slave side is
    /// gone: Linux reports EIO, not end-of-file, once every slave fd is closed.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let n = syscall!(read(self.raw_fd(), buf.as_mut_ptr().cast(), buf.len()))?;
        Ok(n as usize)
    }

    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let n = syscall!(write(self.raw_fd(), buf.as_ptr().cast(), buf.len()))?;
        Ok(n as usize)
    }

    /// Sets the window size. The kernel sends SIGWINCH to the foreground
    /// process group when the size actually changes.
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let ws = winsize(cols, rows);
        syscall!(ioctl(self.raw_fd(), libc::TIOCSWINSZ, &ws))?;
        Ok(())
    }
}

fn winsize(cols: u16, rows: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a PTY and starts `spec` on its slave as a session leader with the
/// slave as controlling terminal. The parent keeps only the master: the slave
/// copies held by `Command` are closed before this returns, so the pane hangs
/// up exactly when its processes close their side.
pub fn spawn(spec: &SpawnSpec) -> io::Result<(PtyMaster, ChildProcess)> {
    let ws = winsize(spec.cols, spec.rows);
    let pty = nix::pty::openpty(Some(&ws), None)
        .map_err(|e| io::Error::other(format!("openpty: {e}")))?;
    crate::sys::set_nonblocking_cloexec(pty.master.as_raw_fd())?;
    // The slave must not leak into later children either.
    crate::sys::set_cloexec(pty.slave.as_raw_fd())?;

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(pty.slave.try_clone()?))
        .stdout(Stdio::from(pty.slave.try_clone()?))
        .stderr(Stdio::from(pty.slave.try_clone()?));
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setsid, ioctl, signal, sigprocmask).
    unsafe {
        cmd.pre_exec(|| {
            syscall!(setsid())?;
            // stdin is already the slave here: std dups stdio before pre_exec.
            syscall!(ioctl(0, libc::TIOCSCTTY as _, 0))?;
            // The daemon's handlers and ignored signals (Rust ignores SIGPIPE)
            // must not leak into the pane's programs.
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("starting {:?} in {}: {e}", spec.program, spec.cwd.display()),
        )
    })?;
    let pid = child.id() as i32;
    // Dropping Command closes its slave copies; dropping `pty.slave` closes
    // ours. std::process::Child does not wait or kill on drop.
    drop(cmd);
    drop(child);
    let master = PtyMaster { fd: pty.master };
    Ok((
        master,
        ChildProcess {
            pid,
            sid: pid,
            start_token: crate::sys::process_start_token(pid),
        },
    ))
}
