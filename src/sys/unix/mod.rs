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

mod files;
mod limits;

pub use files::{
    HAS_FIFOS, SharedMap, default_runtime_base, default_state_base, make_fifo, open_fifo_writer,
    read_at, set_file_len, sync_dir, trust,
};
pub use limits::{
    fd_limit, physical_memory, raise_fd_limit, raise_fsize_limit, starting_fd_limit,
    starting_limits_on_exec, with_pane_oom_score, with_starting_limits,
};

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
/// On the main thread only (`sys/env.rs`). Adopting the fd is sound
/// because a number our parent named for us in the environment is owned
/// by nothing in this process until it is taken here, and taking it
/// removes the variable, so it is taken once.
pub fn take_inherited_fd(var: &str, kind: FdKind) -> io::Result<Option<OwnedFd>> {
    let Some(fd) = std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<RawFd>().ok())
    else {
        return Ok(None);
    };
    super::remove_env(var);
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
    // SAFETY: fstat says the fd is open and of the expected kind; our
    // parent passed it to us alone (nothing here owns it yet), and the
    // variable is gone, so it cannot be adopted twice.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Best effort: an fd we cannot flag is still ours to use.
    let _ = set_cloexec(fd.as_raw_fd());
    Ok(Some(fd))
}

/// Which side of a [`fork_single_threaded`] this is.
pub enum Forked {
    Child,
    Parent { child: i32 },
}

/// Forks this process. Only while it has one thread (the keeper's fork at
/// start, before `Server::assemble` starts the disk writer): that is what
/// makes it sound for the child to run ordinary code after the fork
/// (allocate, take locks), as no lock can be held by a thread the child
/// does not have.
pub fn fork_single_threaded() -> io::Result<Forked> {
    // SAFETY: the contract above: this is the only thread.
    match unsafe { nix::unistd::fork() }.map_err(io::Error::from)? {
        nix::unistd::ForkResult::Child => Ok(Forked::Child),
        nix::unistd::ForkResult::Parent { child } => Ok(Forked::Parent {
            child: child.as_raw(),
        }),
    }
}

/// Closes fd numbers whoever owns them, in a process that never uses
/// them again (the keeper's side of its fork at start, which runs the
/// keeper and exits): that is what makes it sound, as no owner is used
/// or dropped afterwards to touch a number that may be reused.
pub fn close_abandoned(fds: impl IntoIterator<Item = RawFd>) {
    for fd in fds {
        // SAFETY: the contract above: these numbers are never used again.
        unsafe { libc::close(fd) };
    }
}

/// Ends the process at once, with no destructors or buffered writes that
/// could block again (`_exit`).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` has no preconditions; it only ends the process.
    unsafe { libc::_exit(code) }
}

/// Adopts an fd our parent passed to this process by number: kept open
/// across our exec, and named to us in the environment (a re-executed
/// keeper's saved state, systemd's `LISTEN_FDS` from 3 on), close-on-exec
/// from now on (best effort: an fd we cannot flag is still ours to use).
///
/// Only for such a number, read once from where the parent put it: that
/// is what makes the adoption sound, as nothing in this process owns a
/// passed fd before it is taken, and a number read once is taken once.
pub fn adopt_passed_fd(fd: RawFd) -> OwnedFd {
    let _ = set_cloexec(fd);
    // SAFETY: the contract above: the parent passed this fd to us alone
    // and nothing here has taken it yet.
    unsafe { OwnedFd::from_raw_fd(fd) }
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
pub fn fd_dev_ino(fd: impl AsRawFd) -> io::Result<(u64, u64)> {
    let st = fstat(fd.as_raw_fd())?;
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// The device and inode numbers of our stderr (what systemd's
/// `JOURNAL_STREAM` names when stderr is the journal).
pub fn stderr_dev_ino() -> Option<(u64, u64)> {
    fd_dev_ino(libc::STDERR_FILENO).ok()
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

/// This process's user as text: the uid, and the name the user database
/// gives it (empty if none).
pub fn user_id_and_name() -> (String, String) {
    let uid = nix::unistd::getuid();
    let name = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_default();
    (uid.to_string(), name)
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
