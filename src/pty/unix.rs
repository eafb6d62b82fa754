//! The Unix PTY backend: openpty, start a program as a session leader on the
//! slave (posix_spawn on Linux, fork/exec elsewhere, and on Linux with
//! `--cfg ptyd_portable`), winsize.

use super::{ChildProcess, SpawnSpec, Wake};
use crate::sys::syscall;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

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
    /// The size the kernel holds for this terminal (what its programs
    /// see), if it can tell.
    pub fn size(&self) -> Option<(u16, u16)> {
        crate::sys::terminal_size(&self.fd)
    }

    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let ws = winsize(cols, rows);
        syscall!(ioctl(self.raw_fd(), libc::TIOCSWINSZ, &ws))?;
        Ok(())
    }

    /// Exits arrive by SIGCHLD on Unix (`sys::reap_any_child`), never
    /// through the master: always `None`.
    pub fn exit_code(&self) -> Option<u32> {
        None
    }

    /// The hang-up is the slave side closing; nothing to do here.
    pub fn hang_up(&self) {}
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
/// slave as controlling terminal. The parent keeps only the master: the
/// slave copies used for the start are closed before this returns, so the
/// pane hangs up exactly when its processes close their side. `_wake` is
/// for backends whose masters cannot be polled; this one's is.
pub fn spawn(spec: &SpawnSpec, _wake: Wake) -> io::Result<(PtyMaster, ChildProcess)> {
    let ws = winsize(spec.cols, spec.rows);
    let pty = nix::pty::openpty(Some(&ws), None)
        .map_err(|e| io::Error::other(format!("openpty: {e}")))?;
    crate::sys::set_nonblocking_cloexec(pty.master.as_raw_fd())?;
    // The slave must not leak into later children either.
    crate::sys::set_cloexec(pty.slave.as_raw_fd())?;
    // The program gets the fd and file size limits the server started
    // with, not the ones the server raised for itself
    // (`sys::raise_fd_limit`, `sys::raise_fsize_limit`), and is a likelier
    // victim of the OOM killer than the server.
    let pid =
        crate::sys::with_pane_oom_score(|| crate::sys::with_starting_limits(|| start(spec, &pty)))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("starting {:?} in {}: {e}", spec.program, spec.cwd.display()),
                )
            })?;
    drop(pty.slave);
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

/// Linux: posix_spawn, which glibc implements with vfork semantics (the
/// child shares the parent's memory until exec), so starting a pane costs the
/// same in a server holding a thousand panes' screens as in an empty one; a
/// fork copies the page tables of all that memory first (measured: 27 ms per
/// pane at 300 busy panes, against 8 ms at 10). The child becomes a session
/// leader (POSIX_SPAWN_SETSID) before its file actions run, so opening the
/// slave by name as fd 0 makes it the controlling terminal.
#[cfg(all(target_os = "linux", not(ptyd_portable)))]
fn start(spec: &SpawnSpec, pty: &nix::pty::OpenptyResult) -> io::Result<i32> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let cstr = |s: &[u8]| {
        CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
    };
    let program = resolve_program(spec)?;
    let program = cstr(program.as_os_str().as_bytes())?;
    let mut argv = vec![cstr(spec.program.as_bytes())?];
    for a in &spec.args {
        argv.push(cstr(a.as_bytes())?);
    }
    let mut envp = Vec::with_capacity(spec.env.len());
    for (k, v) in &spec.env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        envp.push(cstr(&kv)?);
    }
    let argv_ptrs: Vec<*mut libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();
    let envp_ptrs: Vec<*mut libc::c_char> = envp
        .iter()
        .map(|a| a.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();
    let slave_path = cstr(slave_name(pty)?.as_bytes())?;
    let cwd = cstr(spec.cwd.as_os_str().as_bytes())?;

    let attr = SpawnAttr::new()?;
    let actions = FileActions::new()?;
    // SAFETY: `attr` and `actions` are initialized and live until the end of
    // this function; every pointer passed points into a CString or vector
    // that outlives the posix_spawn call; the sigsets are initialized by
    // sigemptyset/sigfillset before use.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        // The daemon's handlers and ignored signals (Rust ignores SIGPIPE)
        // and its signal mask must not leak into the pane's programs.
        check(libc::posix_spawnattr_setsigdefault(attr.as_ptr(), &all))?;
        check(libc::posix_spawnattr_setsigmask(attr.as_ptr(), &none))?;
        // The constants' integer types differ between them in libc.
        let flags = libc::POSIX_SPAWN_SETSID as libc::c_int
            | libc::POSIX_SPAWN_SETSIGDEF as libc::c_int
            | libc::POSIX_SPAWN_SETSIGMASK as libc::c_int;
        check(libc::posix_spawnattr_setflags(attr.as_ptr(), flags as _))?;
        check(libc::posix_spawn_file_actions_addopen(
            actions.as_ptr(),
            0,
            slave_path.as_ptr(),
            libc::O_RDWR,
            0,
        ))?;
        check(libc::posix_spawn_file_actions_adddup2(
            actions.as_ptr(),
            0,
            1,
        ))?;
        check(libc::posix_spawn_file_actions_adddup2(
            actions.as_ptr(),
            0,
            2,
        ))?;
        // Whatever the server inherited without close-on-exec (a pipe from
        // the shell that started it, say) must not reach the panes: a
        // `$(ptyd new -d ...)` would otherwise wait for that pipe forever.
        check(libc::posix_spawn_file_actions_addclosefrom_np(
            actions.as_ptr(),
            3,
        ))?;
        check(libc::posix_spawn_file_actions_addchdir_np(
            actions.as_ptr(),
            cwd.as_ptr(),
        ))?;
        let mut pid: libc::pid_t = 0;
        check(libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            actions.as_ptr(),
            attr.as_ptr(),
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
        ))?;
        Ok(pid)
    }
}

/// posix_spawn's functions return an errno value instead of setting errno.
#[cfg(all(target_os = "linux", not(ptyd_portable)))]
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(all(target_os = "linux", not(ptyd_portable)))]
struct SpawnAttr(Box<std::mem::MaybeUninit<libc::posix_spawnattr_t>>);

#[cfg(all(target_os = "linux", not(ptyd_portable)))]
impl SpawnAttr {
    fn new() -> io::Result<SpawnAttr> {
        let mut attr = Box::new(std::mem::MaybeUninit::uninit());
        // SAFETY: init writes the whole attribute object.
        check(unsafe { libc::posix_spawnattr_init(attr.as_mut_ptr()) })?;
        Ok(SpawnAttr(attr))
    }
    fn as_ptr(&self) -> *mut libc::posix_spawnattr_t {
        self.0.as_ptr().cast_mut()
    }
}

#[cfg(all(target_os = "linux", not(ptyd_portable)))]
impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialized in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(self.as_ptr()) };
    }
}

#[cfg(all(target_os = "linux", not(ptyd_portable)))]
struct FileActions(Box<std::mem::MaybeUninit<libc::posix_spawn_file_actions_t>>);

#[cfg(all(target_os = "linux", not(ptyd_portable)))]
impl FileActions {
    fn new() -> io::Result<FileActions> {
        let mut actions = Box::new(std::mem::MaybeUninit::uninit());
        // SAFETY: init writes the whole object.
        check(unsafe { libc::posix_spawn_file_actions_init(actions.as_mut_ptr()) })?;
        Ok(FileActions(actions))
    }
    fn as_ptr(&self) -> *mut libc::posix_spawn_file_actions_t {
        self.0.as_ptr().cast_mut()
    }
}

#[cfg(all(target_os = "linux", not(ptyd_portable)))]
impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialized in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(self.as_ptr()) };
    }
}

/// `/dev/pts/N` of the pair's slave.
#[cfg(all(target_os = "linux", not(ptyd_portable)))]
fn slave_name(pty: &nix::pty::OpenptyResult) -> io::Result<std::ffi::OsString> {
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is writable for its length; ptsname_r NUL-terminates.
    let rc = unsafe { libc::ptsname_r(pty.master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    check(rc)?;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&buf[..len]).to_os_string())
}

/// The file to execute: `program` itself if it names a path, else the first
/// executable match in the *child's* `PATH` (as `execvp` in the child
/// would search; posix_spawnp would search the server's). ENOENT if none.
#[cfg(all(target_os = "linux", not(ptyd_portable)))]
fn resolve_program(spec: &SpawnSpec) -> io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let program = std::path::Path::new(&spec.program);
    if spec.program.as_bytes().contains(&b'/') {
        return Ok(program.to_path_buf());
    }
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied = false;
    for dir in std::env::split_paths(&path) {
        // An empty entry means the current directory, the child's.
        let dir = if dir.as_os_str().is_empty() {
            spec.cwd.clone()
        } else if dir.is_relative() {
            spec.cwd.join(dir)
        } else {
            dir
        };
        let candidate = dir.join(program);
        match std::fs::metadata(&candidate) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => return Ok(candidate),
            Ok(m) if m.is_file() => denied = true,
            _ => {}
        }
    }
    Err(io::Error::from_raw_os_error(if denied {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}

/// Elsewhere: fork and exec through std, with the session and controlling
/// terminal set up between them.
#[cfg(any(not(target_os = "linux"), ptyd_portable))]
fn start(spec: &SpawnSpec, pty: &nix::pty::OpenptyResult) -> io::Result<i32> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(pty.slave.try_clone()?))
        .stdout(Stdio::from(pty.slave.try_clone()?))
        .stderr(Stdio::from(pty.slave.try_clone()?));
    let fd_limit = inherited_fd_limit();
    // SAFETY: the closure runs in the forked child before exec, allocates
    // nothing and calls only async-signal-safe functions (setsid, ioctl,
    // fcntl, signal, sigprocmask).
    unsafe {
        cmd.pre_exec(move || {
            // Whatever the server inherited without close-on-exec (a pipe
            // from the shell that started it, say) must not reach the panes,
            // as `closefrom(3)` ensures on Linux. Marked close-on-exec rather
            // than closed: std's own pipe for reporting an exec failure must
            // stay open until the exec.
            for fd in 3..fd_limit {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
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
    // Dropping Command closes its slave copies; std's Child does not wait
    // or kill on drop.
    let child = cmd.spawn()?;
    Ok(child.id() as i32)
}

/// One past the highest fd number a pane could inherit: the soft
/// `RLIMIT_NOFILE`, read before the fork (getrlimit is not on POSIX's list
/// of async-signal-safe functions), capped so that an unlimited or huge
/// limit cannot make every spawn walk millions of numbers.
#[cfg(any(not(target_os = "linux"), ptyd_portable))]
fn inherited_fd_limit() -> libc::c_int {
    const CAP: libc::rlim_t = 1 << 16;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    let cur = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(CAP)
    } else {
        CAP
    };
    cur as libc::c_int
}
