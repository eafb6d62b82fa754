//! A program on the slave side of a PTY the bench holds the master of: the
//! bare-terminal reference, and the user's terminal that `ptyd attach` and
//! `tmux attach` run in.

use super::{Res, set_cloexec, wait_readable};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process on the slave side of a PTY we hold the master of. Killed and
/// reaped on drop.
pub struct PtyProc {
    pub master: File,
    pub child: Child,
}

impl PtyProc {
    pub fn spawn(argv: &[&str], env: &[(&str, &Path)], cols: u16, rows: u16) -> Res<PtyProc> {
        let ws = nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(&ws, None).map_err(|e| format!("openpty: {e}"))?;
        // Neither end may leak into other children: a stray slave copy would
        // keep the master from ever seeing EIO.
        set_cloexec(pty.master.as_raw_fd())?;
        set_cloexec(pty.slave.as_raw_fd())?;
        let slave = |fd: &OwnedFd| fd.try_clone().map(Stdio::from).map_err(|e| e.to_string());
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .env_remove("TMUX")
            .stdin(slave(&pty.slave)?)
            .stdout(slave(&pty.slave)?)
            .stderr(slave(&pty.slave)?);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("starting {argv:?}: {e}"))?;
        drop(cmd);
        drop(pty.slave);
        Ok(PtyProc {
            master: File::from(pty.master),
            child,
        })
    }

    /// Reads and discards output until the slave side is closed; returns the
    /// byte count. Blocking reads: nothing else in the loop to skew the bare
    /// reference.
    pub fn drain(&mut self) -> Res<u64> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            match self.master.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => return Ok(total),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading the PTY: {e}")),
            }
        }
    }

    /// Reads and discards output for `span`; returns the byte count. An
    /// end of output before then is an error: the program being measured
    /// died.
    pub fn drain_for(&mut self, span: Duration) -> Res<u64> {
        let deadline = Instant::now() + span;
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(total);
            }
            if !wait_readable(self.master.as_raw_fd(), left)? {
                continue;
            }
            match self.master.read(&mut buf) {
                Ok(0) => return Err(format!("end of output after {total} bytes")),
                Ok(n) => total += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                    return Err(format!("the terminal closed after {total} bytes"));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading the PTY: {e}")),
            }
        }
    }

    /// Reads as fast as it can until `marker` has gone by, giving up after
    /// `timeout`; returns the bytes read and when the read that completed the
    /// marker returned. A read is searched only when it holds the marker's
    /// first byte (`<[u8]>::contains` is a memchr), so with a marker that
    /// starts with a byte the stream never carries (see [`END_MARKER`]) the
    /// reader's own cost per byte is small and the same for every terminal.
    pub fn read_until(&mut self, marker: &[u8], timeout: Duration) -> Res<(u64, Instant)> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 64 * 1024];
        // The last `marker.len() - 1` bytes of the stream so far.
        let mut carry: Vec<u8> = Vec::with_capacity(marker.len() * 2);
        let mut window = Vec::new();
        let mut total = 0u64;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !wait_readable(self.master.as_raw_fd(), left)? {
                return Err(format!(
                    "no {:?} after {total} bytes within {timeout:?}",
                    String::from_utf8_lossy(marker)
                ));
            }
            let n = match self.master.read(&mut buf) {
                Ok(0) => return Err(format!("end of output after {total} bytes")),
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                    return Err(format!("the terminal closed after {total} bytes"));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading the PTY: {e}")),
            };
            let at = Instant::now();
            total += n as u64;
            let chunk = &buf[..n];
            if chunk.contains(&marker[0]) || carry.contains(&marker[0]) {
                window.clear();
                window.extend_from_slice(&carry);
                window.extend_from_slice(chunk);
                if window.windows(marker.len()).any(|w| w == marker) {
                    return Ok((total, at));
                }
            }
            let keep = marker.len() - 1;
            if n >= keep {
                carry.clear();
                carry.extend_from_slice(&chunk[n - keep..]);
            } else {
                carry.extend_from_slice(chunk);
                let excess = carry.len().saturating_sub(keep);
                carry.drain(..excess);
            }
        }
    }
}

/// What the throughput runs print last: it starts with a byte (the first
/// byte of a UTF-8 sequence) that neither the generated text nor any
/// terminal's escape sequences contain, so [`PtyProc::read_until`] searches
/// almost nothing.
pub const END_MARKER: &str = "\u{2592}ptyd-bench-end\u{2592}";

/// The end marker of a run in a split view: a view composed from cell
/// differences skips the cells the screen already shows, so every
/// character of this marker is one that the generated text never puts in
/// a cell (and no two neighbours are the same, for a renderer that
/// repeats characters), and it arrives whole.
pub const SPLIT_END_MARKER: &str =
    "\u{2592}\u{2593}\u{2591}\u{2593}\u{2592}\u{2591}\u{2592}\u{2593}";

impl Drop for PtyProc {
    fn drop(&mut self) {
        // The child leads its own session: signal the whole group.
        let pid = self.child.id() as i32;
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Waits for `child` to exit; an error unless it exited with 0.
pub fn check_exit(child: &mut Child, what: &str) -> Res<()> {
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} exited with {status}"))
    }
}
