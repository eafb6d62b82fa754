//! Resource limits: the fd and file-size limits raised for the server and
//! put back for the programs it starts, and the panes' OOM score.

use super::*;

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

/// The machine's memory in bytes, where the system tells
/// (`_SC_PHYS_PAGES`, which macOS and the BSDs have too).
pub fn physical_memory() -> Option<usize> {
    // SAFETY: sysconf reads a system value and has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let (pages, size) = (usize::try_from(pages).ok()?, usize::try_from(size).ok()?);
    pages.checked_mul(size).filter(|&n| n > 0)
}
