//! Portable POSIX: what every Unix ptyd runs on provides. Where two Unixes
//! spell the same thing differently (peer credentials, `MSG_NOSIGNAL`) the
//! `cfg` stays inside the function.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::time::Duration;

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

/// Prefixes an error with what was being done, keeping its kind. Only for
/// calls whose callers do not look at the raw errno (this drops it).
pub(super) fn context(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Signal numbers ptyd sends or handles. The numbers differ between
/// Unixes (SIGCHLD is 17 on Linux, 20 on macOS), so they come from here.
pub use libc::{SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGWINCH, SIGXFSZ};

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

/// Clears FD_CLOEXEC (the only fd flag), so an `exec` of this very process
/// keeps the fd.
pub fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    syscall!(fcntl(fd, libc::F_SETFD, 0))?;
    Ok(())
}

/// A duplicate of `fd` numbered `min` or higher (close-on-exec, like
/// every fd we open), to free a low number that something else must take.
pub fn dup_at_least(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    let new = syscall!(fcntl(fd, libc::F_DUPFD_CLOEXEC, min))?;
    // SAFETY: the kernel just created this fd for us.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A close-on-exec duplicate of an open fd known only by number. Numbered
/// 3 or higher, as std's `try_clone` does: a closed standard slot must not
/// be refilled by a copy that a later write to "stderr" would reach. An fd
/// that is not open is an error (`EBADF`), never another file.
pub fn dup_raw(fd: RawFd) -> io::Result<OwnedFd> {
    dup_at_least(fd, 3)
}

/// Lets exactly `fd` survive the exec of `cmd`'s child, and in blocking
/// mode (the child reads it sequentially): both are cleared in the forked
/// child, so our own copy keeps its flags.
pub fn inherit_fd_on_exec(cmd: &mut std::process::Command, fd: RawFd) {
    // SAFETY: the closure runs in the forked child before exec and calls
    // only fcntl, which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::fcntl(fd, libc::F_SETFD, 0);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            Ok(())
        });
    }
}

/// Makes `cmd`'s program start with the soft fd and file size limits this
/// process started with, if it raised them since ([`raise_fd_limit`],
/// [`raise_fsize_limit`]): set between fork and exec, since a process
/// holding more fds than that limit could not open the pipe `spawn` needs
/// once it lowered its own. The program is expected to raise the limits
/// itself again (`ptyd server` does). For `exec` in place, the hook runs
/// in this process: raise the limits again if the exec fails.
pub fn starting_limits_on_exec(cmd: &mut std::process::Command) {
    let starting = STARTING_FD_LIMIT.load(std::sync::atomic::Ordering::Relaxed);
    let nofile = match get_nofile() {
        Ok(now) if starting != 0 => Some(libc::rlimit {
            rlim_cur: starting as libc::rlim_t,
            rlim_max: now.rlim_max,
        }),
        _ => None,
    };
    let fsize = starting_fsize();
    if nofile.is_none() && fsize.is_none() {
        return;
    }
    // SAFETY: the closure runs in the forked child before exec and calls
    // only setrlimit, which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(rl) = &nofile {
                libc::setrlimit(libc::RLIMIT_NOFILE, rl);
            }
            if let Some(rl) = &fsize {
                libc::setrlimit(libc::RLIMIT_FSIZE, rl);
            }
            Ok(())
        });
    }
}

/// Makes `cmd`'s child a session leader (`setsid()` between fork and exec),
/// detached from our controlling terminal, so closing that terminal does
/// not hang it up.
pub fn setsid_on_exec(cmd: &mut std::process::Command) {
    // SAFETY: the closure runs in the forked child before exec and calls
    // only setsid, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// What an inherited fd must be before ptyd adopts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    Pipe,
    Socket,
}

/// Adopts the fd whose number a parent put in the environment variable
/// `var`, and removes the variable, so that no child of ours inherits a
/// number that means nothing to it. `Ok(None)` when the variable is absent
/// or not a number (then it is left as it is). An error when it names
/// something that is not an open fd of `kind` (a stale variable pointing at
/// an unrelated fd number): that fd is left alone.
///
/// # Safety
///
/// No other thread may read or write the environment meanwhile (see
/// `std::env::remove_var`): call it before starting threads. Nothing in
/// this process may already own the fd the variable names, which holds for
/// an fd inherited at exec and not touched since.
pub unsafe fn take_inherited_fd(var: &str, kind: FdKind) -> io::Result<Option<OwnedFd>> {
    let Some(fd) = std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<RawFd>().ok())
    else {
        return Ok(None);
    };
    // SAFETY: the caller guarantees no other thread touches the environment.
    unsafe { std::env::remove_var(var) };
    // Not open at all reads the same as open but of another kind.
    if !fd_is(fd, kind).unwrap_or(false) {
        let name = match kind {
            FdKind::Pipe => "pipe",
            FdKind::Socket => "socket",
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{var}={fd} is not a {name}"),
        ));
    }
    // SAFETY: fstat says the fd is open and of the expected kind; the caller
    // guarantees nothing else in this process owns it, and the variable is
    // gone, so it cannot be adopted twice.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Best effort: an fd we cannot flag is still ours to use.
    let _ = set_cloexec(fd.as_raw_fd());
    Ok(Some(fd))
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // fstat on a number that is not an open fd fails with EBADF and touches
    // nothing, so any number is safe to ask about.
    syscall!(fstat(fd, &mut st))?;
    Ok(st)
}

/// Whether the open fd numbered `fd` is of `kind`; an error when `fd` is not
/// an open fd. For checking an fd handed to us before trusting it.
pub fn fd_is(fd: RawFd, kind: FdKind) -> io::Result<bool> {
    let want = match kind {
        FdKind::Pipe => libc::S_IFIFO,
        FdKind::Socket => libc::S_IFSOCK,
    };
    Ok(fstat(fd)?.st_mode & libc::S_IFMT == want)
}

/// The device and inode numbers of what `fd` refers to.
pub fn fd_dev_ino(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = fstat(fd.as_raw_fd())?;
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// Makes `cmd`'s child find `fd` at number `target` after the exec, without
/// close-on-exec (`dup2` in the forked child; or, when `fd` already is
/// `target`, its close-on-exec flag cleared). Our own fds are untouched.
pub fn dup2_on_exec(cmd: &mut std::process::Command, fd: RawFd, target: RawFd) {
    // SAFETY: the closure runs in the forked child before exec and calls
    // only dup2 and fcntl, which are async-signal-safe; it allocates
    // nothing (the error is built from errno).
    unsafe {
        cmd.pre_exec(move || {
            if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0);
            } else if libc::dup2(fd, target) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
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

/// Open flags for a path someone else may have prepared: a symlink is
/// refused rather than followed (see [`is_symlink_refused`]), a FIFO or
/// device cannot block the open, and the fd is close-on-exec.
pub const OPEN_UNTRUSTED_PATH: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// Whether an open with [`OPEN_UNTRUSTED_PATH`] failed because the path is a
/// symbolic link.
pub fn is_symlink_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Whether a write failed because its reader went away (EPIPE); `print!`
/// panics with this error's text, "(os error N)".
pub fn broken_pipe_errno() -> i32 {
    libc::EPIPE
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

/// Sends `sig` to `pid` (a negative pid: to that process group).
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    syscall!(kill(pid, sig))?;
    Ok(())
}

/// The signals the server acts on (SIGCHLD, SIGTERM, SIGINT, SIGHUP),
/// delivered to its mio loop under one token.
pub struct Signals(signal_hook_mio::v1_0::Signals);

impl Signals {
    /// `_waker` is the loop's, for OSes whose events come through it.
    pub fn new(
        registry: &mio::Registry,
        token: mio::Token,
        _waker: &std::sync::Arc<mio::Waker>,
    ) -> io::Result<Signals> {
        let mut signals = signal_hook_mio::v1_0::Signals::new([SIGCHLD, SIGTERM, SIGINT, SIGHUP])?;
        registry.register(&mut signals, token, mio::Interest::READABLE)?;
        Ok(Signals(signals))
    }

    /// The signals that arrived since the last call.
    pub fn pending(&mut self) -> Vec<i32> {
        self.0.pending().collect()
    }

    /// Signals that come through the loop's waker: none here (they come
    /// under their own token, and taking them at another event would
    /// reorder a child's exit before what it wrote to us).
    pub fn pending_on_wake(&mut self) -> Vec<i32> {
        Vec::new()
    }
}

/// Whether a file's mode lets someone execute it.
pub fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// `SIGTERM` for 15; `SIG<n>` for a number without a name.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("SIG{sig}"), |s| s.as_str().to_string())
}

/// The number of a signal name in capitals (`SIGTERM`).
pub fn signal_by_name(name: &str) -> Option<i32> {
    name.parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|s| s as i32)
}

/// Whether `sig` is a signal number of this OS.
pub fn signal_exists(sig: i32) -> bool {
    nix::sys::signal::Signal::try_from(sig).is_ok()
}

/// The user's login shell: `$SHELL` if absolute, else the passwd entry's,
/// else `/bin/sh`.
pub fn user_shell() -> std::ffi::OsString {
    std::env::var_os("SHELL")
        .filter(|s| std::path::Path::new(s).is_absolute())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.shell.into_os_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into())
}

/// Whether a process with this pid exists (signal 0 checks without
/// sending). A process of another user counts: EPERM still means it exists.
pub fn process_exists(pid: i32) -> bool {
    match kill(pid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() != Some(libc::ESRCH),
    }
}

/// Sets `sig`'s disposition to "ignore".
pub fn ignore_signal(sig: i32) -> io::Result<()> {
    // SAFETY: setting a disposition to SIG_IGN installs no handler, so it
    // has no memory-safety preconditions.
    if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    Code(i32),
    Signal(i32),
}

/// Decodes a wait status (as `waitpid` reports it) of a process that ended.
pub(super) fn wait_status_exit(raw: i32) -> ProcessExit {
    if libc::WIFSIGNALED(raw) {
        ProcessExit::Signal(libc::WTERMSIG(raw))
    } else {
        ProcessExit::Code(libc::WEXITSTATUS(raw))
    }
}

/// Reaps one child that has exited, without blocking: its pid and how it
/// ended, or `None` when no child is left to reap now (or none exists).
/// SIGCHLD coalesces, so callers loop until `None`.
pub fn reap_any_child() -> Option<(i32, ProcessExit)> {
    let mut raw = 0;
    // Without WUNTRACED/WCONTINUED only exits are reported.
    match syscall!(waitpid(-1, &mut raw, libc::WNOHANG)) {
        Ok(pid) if pid > 0 => Some((pid, wait_status_exit(raw))),
        _ => None,
    }
}

/// Whether this process has any child left (running or not yet reaped).
pub fn has_children() -> bool {
    let mut info: libc::siginfo_t = unsafe_zeroed_siginfo();
    // WNOWAIT: only looks; the caller reaps with `reap_any_child`.
    match syscall!(waitid(
        libc::P_ALL,
        0,
        &mut info,
        libc::WEXITED | libc::WNOHANG | libc::WNOWAIT
    )) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() != Some(libc::ECHILD),
    }
}

fn unsafe_zeroed_siginfo() -> libc::siginfo_t {
    // SAFETY: siginfo_t is plain data for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

/// Waits for our child `pid` to exit and reaps it; `None` if it is not our
/// child (already reaped) or the wait was interrupted.
pub fn wait_child(pid: i32) -> Option<ProcessExit> {
    let mut raw = 0;
    match syscall!(waitpid(pid, &mut raw, 0)) {
        Ok(p) if p == pid => Some(wait_status_exit(raw)),
        _ => None,
    }
}

/// The kernel's limit on fds in flight over Unix sockets (per user) was
/// hit: a send that fails with it can be retried once the peer has
/// received some.
pub fn is_too_many_refs(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ETOOMANYREFS)
}

/// The size of the terminal on `fd` as (columns, rows), if it is one.
pub fn terminal_size(fd: &impl AsRawFd) -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: `ws` is a valid, writable winsize.
    let ok = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

/// Standard input's terminal mode, as saved before switching to raw mode.
#[derive(Clone)]
pub struct StdinMode(nix::sys::termios::Termios);

fn stdin_fd() -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: fd 0 is never closed by ptyd, so it stays open for the life
    // of the process.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(0) }
}

/// Puts the terminal on standard input in raw mode (`cfmakeraw`, applied
/// after pending output drains) and returns the mode it had.
pub fn stdin_raw_mode() -> io::Result<StdinMode> {
    use nix::sys::termios::{self, SetArg};
    let original = termios::tcgetattr(stdin_fd()).map_err(|e| context("tcgetattr")(e.into()))?;
    let mut raw = original.clone();
    termios::cfmakeraw(&mut raw);
    termios::tcsetattr(stdin_fd(), SetArg::TCSADRAIN, &raw)
        .map_err(|e| context("tcsetattr")(e.into()))?;
    Ok(StdinMode(original))
}

/// Puts back a mode saved by [`stdin_raw_mode`].
pub fn restore_stdin_mode(mode: &StdinMode) -> io::Result<()> {
    use nix::sys::termios::{self, SetArg};
    termios::tcsetattr(stdin_fd(), SetArg::TCSADRAIN, &mode.0)?;
    Ok(())
}

/// [`restore_stdin_mode`] without waiting for the output to drain, which a
/// terminal that stopped reading never does.
pub fn restore_stdin_mode_now(mode: &StdinMode) -> io::Result<()> {
    use nix::sys::termios::{self, SetArg};
    termios::tcsetattr(stdin_fd(), SetArg::TCSANOW, &mode.0)?;
    Ok(())
}

/// One `read(2)` from standard input, unbuffered (std's `Stdin` buffers,
/// and bytes held in its buffer would be invisible to `poll`).
pub fn read_stdin(buf: &mut [u8]) -> io::Result<usize> {
    let n = syscall!(read(0, buf.as_mut_ptr().cast(), buf.len()))?;
    Ok(n as usize)
}

/// One `write(2)` to standard output, unbuffered (std's `Stdout` buffers
/// lines, and a non-blocking terminal needs each short write seen).
pub fn write_stdout(buf: &[u8]) -> io::Result<usize> {
    let n = syscall!(write(1, buf.as_ptr().cast(), buf.len()))?;
    Ok(n as usize)
}

/// One `writev(2)` to standard output: pane output written straight from
/// the buffer it was received in, several frames' payloads at once. At
/// most `IOV_MAX` (1024) slices are taken; the count written says how far
/// it got.
pub fn write_stdout_vectored(bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // `IoSlice` is ABI-compatible with `struct iovec` (std guarantees it
    // on Unix), so the slice can be passed as the iovec array.
    let count = bufs.len().min(1024) as libc::c_int;
    let n = syscall!(writev(1, bufs.as_ptr().cast::<libc::iovec>(), count))?;
    Ok(n as usize)
}

/// Waits, without a time limit, until `fd` can be written to (or is hung
/// up or in error, which the next write reports).
pub fn wait_writable(fd: RawFd) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    syscall!(poll(&mut pfd, 1, -1))?;
    Ok(())
}

/// Waits at most `timeout` until `fd` can be written to (or is hung up or
/// in error, which the next write reports); false if the time ran out.
pub fn poll_writable(fd: &impl AsRawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    let n = syscall!(poll(&mut pfd, 1, ms))?;
    Ok(n > 0)
}

/// poll(2) for input over a few fds, at most `timeout` (`None`: no limit).
/// Returns, per fd, whether it is readable, hung up, in error, or not an
/// open fd (each of which a read then reports). A signal interrupting the
/// wait is an `Interrupted` error, for the caller to retry or act on.
pub fn poll_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    syscall!(poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms))?;
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}

/// Whether the peer of a connected socket is gone (`POLLHUP`), without
/// waiting.
pub fn peer_hung_up(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    matches!(syscall!(poll(&mut pfd, 1, 0)), Ok(1)) && pfd.revents & libc::POLLHUP != 0
}

/// Sends one message with `fds` attached (`SCM_RIGHTS`); returns the bytes
/// of `data` sent. A peer that has gone is an `EPIPE` error, never a
/// SIGPIPE (`MSG_NOSIGNAL` where the OS has it; Rust ignores SIGPIPE
/// anyway).
pub fn send_with_fds(sock: &impl AsRawFd, data: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let iov = [io::IoSlice::new(data)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let flags = MsgFlags::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let flags = MsgFlags::empty();
    Ok(sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, flags, None)?)
}

/// One message received by [`recv_with_fds`](super::recv_with_fds).
#[derive(Debug)]
pub struct Received {
    /// Bytes of data received; 0 means the peer closed the socket.
    pub len: usize,
    /// The fds it carried, owned and close-on-exec.
    pub fds: Vec<OwnedFd>,
    /// The data or the control part did not fit (`MSG_TRUNC`,
    /// `MSG_CTRUNC`): the kernel closed the fds that did not fit.
    pub truncated: bool,
}

/// `recvmsg` with room for `max_fds` fds; `flags` are the backend's
/// (`MSG_CMSG_CLOEXEC` where it exists). Parsed here rather than through
/// nix, whose control-message iterator refuses a truncated buffer: the fds
/// that did fit would then be installed in our table and never closed.
pub(super) fn recvmsg_fds(
    sock: RawFd,
    data: &mut [u8],
    max_fds: usize,
    flags: libc::c_int,
) -> io::Result<Received> {
    let fd_bytes = (max_fds * std::mem::size_of::<RawFd>()) as libc::c_uint;
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    // u64 elements: cmsghdr needs the alignment of its size_t field.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr (null pointers, zero lengths) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = syscall!(recvmsg(sock, &mut msg, flags))?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: `msg` describes `control`, which the kernel filled up to the
    // `msg_controllen` it wrote back; CMSG_FIRSTHDR and CMSG_NXTHDR return
    // headers inside that length or null. An SCM_RIGHTS header's `cmsg_len`
    // counts only the fds the kernel installed (it shrinks on truncation),
    // and those are new in our table, owned by nothing else.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let first = libc::CMSG_DATA(cmsg);
                let header = first as usize - cmsg as usize;
                let count = ((*cmsg).cmsg_len as usize).saturating_sub(header)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let fd = std::ptr::read_unaligned(first.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(Received {
        len: n as usize,
        fds,
        truncated: msg.msg_flags & (libc::MSG_CTRUNC | libc::MSG_TRUNC) != 0,
    })
}

/// The soft `RLIMIT_NOFILE` this process started with, before
/// [`raise_fd_limit`] (0: not raised). Programs we start get it back.
static STARTING_FD_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn get_nofile() -> io::Result<libc::rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    syscall!(getrlimit(libc::RLIMIT_NOFILE, &mut rl))?;
    Ok(rl)
}

fn set_nofile_soft(soft: libc::rlim_t, hard: libc::rlim_t) -> io::Result<()> {
    let rl = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    syscall!(setrlimit(libc::RLIMIT_NOFILE, &rl)).map(drop)
}

/// Raises the soft fd limit to the hard one (the systemd default soft
/// limit, 1024, is a `select()` compatibility value, not a budget: a server
/// holding a PTY per pane reaches it near a thousand panes). Returns the
/// limit now in force. An infinite hard limit is not a valid soft one for
/// fds, so the raise then stops at 2^20 (Linux's default `nr_open`).
pub fn raise_fd_limit() -> io::Result<u64> {
    let rl = get_nofile()?;
    let target = if rl.rlim_max == libc::RLIM_INFINITY {
        1 << 20
    } else {
        rl.rlim_max
    };
    if rl.rlim_cur != libc::RLIM_INFINITY && rl.rlim_cur < target {
        set_nofile_soft(target, rl.rlim_max)?;
        let _ = STARTING_FD_LIMIT.compare_exchange(
            0,
            rl.rlim_cur as u64,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    fd_limit()
}

/// The soft fd limit this process started with, if it raised it since.
pub fn starting_fd_limit() -> Option<u64> {
    match STARTING_FD_LIMIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// The soft fd limit in force.
pub fn fd_limit() -> io::Result<u64> {
    Ok(get_nofile()?.rlim_cur as u64)
}

/// Runs `spawn` with the soft fd and file size limits back at what this
/// process started with, so the program it starts inherits the user's
/// limits rather than ours (programs that `select()` or close every fd up
/// to the limit misbehave with a huge one; a `ulimit -f` is the user's
/// choice for their programs). The limits are process-wide: for the
/// microseconds this lasts, another thread opening an fd numbered above
/// the starting limit fails with EMFILE, or writing past the starting
/// file size with EFBIG (the disk writer then retries its save).
pub fn with_starting_limits<T>(spawn: impl FnOnce() -> T) -> T {
    let fsize = starting_fsize();
    let fsize_now = fsize.and_then(|rl| {
        let now = get_fsize().ok()?;
        set_fsize(&rl).ok()?;
        Some(now)
    });
    let out = with_starting_fd_limit(spawn);
    if let Some(now) = fsize_now {
        let _ = set_fsize(&now);
    }
    out
}

fn with_starting_fd_limit<T>(spawn: impl FnOnce() -> T) -> T {
    let starting = STARTING_FD_LIMIT.load(std::sync::atomic::Ordering::Relaxed);
    let Ok(now) = get_nofile() else {
        return spawn();
    };
    if starting == 0 || set_nofile_soft(starting as libc::rlim_t, now.rlim_max).is_err() {
        return spawn();
    }
    let out = spawn();
    let _ = set_nofile_soft(now.rlim_cur, now.rlim_max);
    out
}

/// The soft `RLIMIT_FSIZE` this process started with, before
/// [`raise_fsize_limit`] (`u64::MAX`: not raised; a raised limit was below
/// the hard one, so it was never infinite).
static STARTING_FSIZE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

fn get_fsize() -> io::Result<libc::rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    syscall!(getrlimit(libc::RLIMIT_FSIZE, &mut rl))?;
    Ok(rl)
}

fn set_fsize(rl: &libc::rlimit) -> io::Result<()> {
    syscall!(setrlimit(libc::RLIMIT_FSIZE, rl)).map(drop)
}

/// The starting file size limit to give a program back, if it was raised.
fn starting_fsize() -> Option<libc::rlimit> {
    let starting = STARTING_FSIZE.load(std::sync::atomic::Ordering::Relaxed);
    if starting == u64::MAX {
        return None;
    }
    let now = get_fsize().ok()?;
    Some(libc::rlimit {
        rlim_cur: starting as libc::rlim_t,
        rlim_max: now.rlim_max,
    })
}

/// Raises the soft file size limit to the hard one: under a low `ulimit
/// -f` the snapshot, the history files, the output rings and the
/// checkpoints (memfds count too) fail with EFBIG, and a crash loses what
/// they should have kept. The programs the server starts get the starting
/// limit back ([`with_starting_limits`], [`starting_limits_on_exec`]).
/// Returns the limit now in force (`None`: unlimited).
pub fn raise_fsize_limit() -> io::Result<Option<u64>> {
    let rl = get_fsize()?;
    if rl.rlim_cur != libc::RLIM_INFINITY && rl.rlim_cur < rl.rlim_max {
        set_fsize(&libc::rlimit {
            rlim_cur: rl.rlim_max,
            rlim_max: rl.rlim_max,
        })?;
        let _ = STARTING_FSIZE.compare_exchange(
            u64::MAX,
            rl.rlim_cur as u64,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    let now = get_fsize()?.rlim_cur;
    Ok((now != libc::RLIM_INFINITY).then_some(now as u64))
}

/// How much likelier than ptyd itself a pane's programs are to be picked
/// by the kernel's OOM killer, in `oom_score_adj` units (thousandths of
/// the machine's memory, added to a process's usage when it picks): one
/// pane's program is a better victim than the keeper or the serving
/// process, whose death takes every pane (or, for the serving process,
/// stalls them all through a recovery). 500 keeps a pane the first pick
/// unless ptyd holds half the memory more than it does.
const PANE_OOM_SCORE_RAISE: i32 = 500;

/// Runs `spawn` with this process's `oom_score_adj` raised by
/// [`PANE_OOM_SCORE_RAISE`] (to at most 1000), so that the program it
/// starts is born with it, then puts ours back: a process may always lower
/// its value back to where it was (the kernel refuses only going below the
/// lowest one a privileged process set for it). Process-wide: for the
/// microseconds this lasts, this process is a likelier victim too.
pub fn with_pane_oom_score<T>(spawn: impl FnOnce() -> T) -> T {
    const PATH: &str = "/proc/self/oom_score_adj";
    let Some(ours) = std::fs::read_to_string(PATH)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
    else {
        return spawn();
    };
    let raised = (ours + PANE_OOM_SCORE_RAISE).min(1000);
    if raised == ours || std::fs::write(PATH, raised.to_string()).is_err() {
        return spawn();
    }
    let out = spawn();
    if let Err(e) = std::fs::write(PATH, ours.to_string()) {
        eprintln!("ptyd: cannot put oom_score_adj back to {ours} after starting a pane: {e}");
    }
    out
}

/// Files and directories holding ptyd's state: created private (0600 and
/// 0700), opened without following a symlink or blocking on a FIFO, and
/// trusted only if ours and not writable by others. The messages say what
/// to run to fix a refused one.
pub mod trust {
    use std::fs::{DirBuilder, Metadata, OpenOptions};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    use std::path::Path;

    /// A file created through `options` is readable and writable by its
    /// owner only.
    pub fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
        options.mode(0o600)
    }

    /// A directory created through `builder` is the owner's only.
    pub fn private_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
        builder.mode(0o700)
    }

    /// A directory created through [`private_dir`] is private already
    /// (its mode was set at creation): nothing to do.
    pub fn make_private(_dir: &Path) -> std::io::Result<()> {
        Ok(())
    }

    /// Opening through `options` never follows a symlink (the open fails,
    /// see [`super::is_symlink_refused`]) and never blocks on a FIFO.
    pub fn untrusted_path(options: &mut OpenOptions) -> &mut OpenOptions {
        options.custom_flags(super::OPEN_UNTRUSTED_PATH)
    }

    /// Whether the file or directory `meta` describes belongs to us.
    pub fn is_ours(_path: &Path, meta: &Metadata) -> bool {
        meta.uid() == super::current_uid()
    }

    /// Why `path` (described by `meta`) is not ours to trust, or `None`:
    /// owned by another user, or writable by group or others (`private`:
    /// open to them at all).
    pub fn refusal(path: &Path, meta: &Metadata, what: &str, private: bool) -> Option<String> {
        let uid = super::current_uid();
        if meta.uid() != uid {
            return Some(format!(
                "{} is owned by uid {}, not by you (uid {uid}); ptyd does not trust a {what} \
                 another user controls. Run: chown {uid} {} (or remove it)",
                path.display(),
                meta.uid(),
                path.display()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if private && mode & 0o077 != 0 {
            return Some(format!(
                "{} has mode {:o}, open to group or others; refusing to use it. Run: chmod 700 {}",
                path.display(),
                mode & 0o777,
                path.display()
            ));
        }
        if mode & 0o022 != 0 {
            return Some(format!(
                "{} has mode {mode:o}, writable by group or others; ptyd does not trust a {what} \
                 others can change. Run: chmod go-w {}",
                path.display(),
                path.display()
            ));
        }
        None
    }
}

/// Where a namespace's runtime directories go without `$XDG_RUNTIME_DIR`.
pub fn default_runtime_base() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/ptyd-{}", current_uid()))
}

/// Where a namespace's state directories go without `$XDG_STATE_HOME`, if
/// the user has a home.
pub fn default_state_base() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".local/state/ptyd"))
}

/// Makes a rename in `dir` durable: fsync of the directory.
pub fn sync_dir(dir: &std::path::Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Sets a file's length (`ftruncate`): a fresh memfd's size before it is
/// mapped.
pub fn set_file_len(fd: &impl AsRawFd, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file length out of range"))?;
    syscall!(ftruncate(fd.as_raw_fd(), len))?;
    Ok(())
}

/// Reads at `offset` without moving the file position (`pread`); a hole
/// reads as zeroes and stays unallocated, which a mapping's read would not.
pub fn read_at(fd: &impl AsRawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
    let n = syscall!(pread(
        fd.as_raw_fd(),
        buf.as_mut_ptr().cast(),
        buf.len(),
        offset
    ))?;
    Ok(n as usize)
}

/// A shared, writable mapping of a whole file (`mmap` with `MAP_SHARED`),
/// seen as a header of `WORDS` 64-bit atomic words followed by a byte area.
///
/// Other processes may map the same file. Its contract with them is the
/// caller's: the output ring has one writer at a time and readers that run
/// only after that writer died (or in its own process), publishing with
/// the header's atomics. The two views never overlap, so handing out the
/// header by `&self` and the bytes by `&mut self` is sound within this
/// process.
pub struct SharedMap<const WORDS: usize> {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone and unmapped on drop;
// its pointer is never handed out beyond borrows of `self`.
unsafe impl<const WORDS: usize> Send for SharedMap<WORDS> {}

impl<const WORDS: usize> SharedMap<WORDS> {
    const HEADER_BYTES: usize = WORDS * 8;

    /// Maps `fd`'s first `WORDS * 8 + data_len` bytes. The file must be at
    /// least that long (a shorter one faults on access).
    pub fn new(fd: &impl AsRawFd, data_len: usize) -> io::Result<SharedMap<WORDS>> {
        let len = Self::HEADER_BYTES
            .checked_add(data_len)
            .filter(|&l| l > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad mapping size"))?;
        // SAFETY: a fresh shared mapping of a file the caller holds; no
        // existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The header's words.
    pub fn header(&self) -> &[std::sync::atomic::AtomicU64; WORDS] {
        // SAFETY: the mapping is page-aligned and at least `WORDS * 8`
        // bytes long; AtomicU64 has the size and alignment of u64 and may
        // be shared between threads and processes.
        unsafe { &*(self.ptr as *const [std::sync::atomic::AtomicU64; WORDS]) }
    }

    /// The byte area after the header.
    pub fn data(&self) -> &[u8] {
        // SAFETY: [header, len) lies inside our mapping and never overlaps
        // the header's words.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr.add(Self::HEADER_BYTES),
                self.len - Self::HEADER_BYTES,
            )
        }
    }

    /// The byte area after the header, to write.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `data`; `&mut self` makes this the only borrow of it
        // in this process.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.add(Self::HEADER_BYTES),
                self.len - Self::HEADER_BYTES,
            )
        }
    }
}

impl<const WORDS: usize> Drop for SharedMap<WORDS> {
    fn drop(&mut self) {
        // SAFETY: the mapping we made, of this length, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
