//! PTYs and the processes that run in them.
//!
//! Contract of the per-OS backend, chosen once below:
//!
//! - `spawn(&SpawnSpec, Wake)` opens a terminal of the spec's size and
//!   starts the spec's program in it with exactly the spec's environment
//!   (scrubbed by the caller with [`inherits_env`]) and directory,
//!   returning a `PtyMaster` and a [`ChildProcess`] record; a backend whose
//!   master cannot be polled calls the [`Wake`] (from [`PaneWakes`]) when
//!   the loop has something to do;
//! - `PtyMaster::read` returns available output without blocking
//!   (`WouldBlock` when there is none, `Ok(0)` or an error once output has
//!   ended), `write` queues input without blocking (`WouldBlock` when full),
//!   `resize` changes the size the programs see, `exit_code` is the exit
//!   where the backend learns it itself (Windows; `None` on Unix, where
//!   SIGCHLD tells), `hang_up` ends the output once the process is gone;
//! - [`signal_tree`] and [`hang_up_sessions`] reach every process of a
//!   pane (a session on Unix, a Job Object on Windows).
//!
//! Backends:
//!
//! - `unix.rs`: openpty, the program a session leader with the slave as its
//!   controlling terminal; the master is a non-blocking fd the loop polls.
//!   Exits arrive by SIGCHLD, kills are signals to the session (`sys`).
//! - `windows.rs`: a pseudo console (ConPTY) whose pipes cannot be polled,
//!   so a reader and a writer thread per pane move bytes through bounded
//!   queues and tell the loop through a caller-given wake function (a
//!   `mio::Waker`); the process tree lives in a Job Object, which is how it
//!   is killed and why it dies with the pane. See its module doc.
//!
//! Everything else the OS provides (fd flags, pidfds, /proc) is in
//! `crate::sys`; the backends use `libc` and `windows-sys` directly, as the
//! other boundary.
//!
//! Ownership: a `PtyMaster` owns its fd (or pseudo console) and closing it
//! hangs up the pane, so it is closed only on purpose (pane removed, or
//! output ended). A `ChildProcess` is only a record: dropping it never
//! signals or reaps anything.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{PtyMaster, spawn};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{KILLED_EXIT_CODE, PtyMaster, command_line, spawn};

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::Arc;

/// Tells the loop a pane has something to do. Called from the pane's
/// threads, so it must be cheap and never block; a wake for a pane the
/// loop has since removed must be harmless.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// One loop, many panes: on Windows, the readiness a Unix loop gets from
/// mio for each pane's fd (Unix builds one too, which nothing wakes: its
/// masters are polled). Every pane's [`Wake`] (from [`wake_for`](Self::wake_for))
/// marks that pane ready and wakes the loop through one shared
/// `mio::Waker`; on the waker's token the loop takes the ready panes
/// ([`take_ready`](Self::take_ready)) and reads, writes or reaps only
/// those. A pane is in the set at most once however often it woke, so the
/// set is bounded by the number of panes; a pane the loop has removed
/// since is a name it no longer knows and skips.
pub struct PaneWakes {
    waker: Arc<mio::Waker>,
    ready: Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>,
}

impl PaneWakes {
    /// Wakes arrive at the loop through `waker` (mio allows one per poll,
    /// so the loop shares its own and takes the ready panes whenever it
    /// is woken).
    pub fn new(waker: Arc<mio::Waker>) -> PaneWakes {
        PaneWakes {
            waker,
            ready: Arc::default(),
        }
    }

    /// The wake to give [`spawn`] for pane `pane`.
    pub fn wake_for(&self, pane: u64) -> Wake {
        let waker = Arc::clone(&self.waker);
        let ready = Arc::clone(&self.ready);
        Arc::new(move || {
            // A poisoned lock means a panic elsewhere while holding it; the
            // set itself is still a set.
            let mut set = ready.lock().unwrap_or_else(|p| p.into_inner());
            let first = set.is_empty();
            set.insert(pane);
            drop(set);
            // One wake per batch: the loop takes the whole set.
            if first {
                let _ = waker.wake();
            }
        })
    }

    /// The panes that woke since the last call, in id order.
    pub fn take_ready(&self) -> Vec<u64> {
        let mut set = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *set).into_iter().collect()
    }
}

/// Sends `signal` to every process of a pane: on Unix each member of the
/// child's session (children that moved to a process group of their own
/// included); on Windows, which has no signals, any signal ends the whole
/// tree through the pane's Job Object (`master`; without one, the job
/// already closed and took the tree with it).
pub fn signal_tree(master: Option<&PtyMaster>, child: &ChildProcess, signal: i32) {
    #[cfg(unix)]
    {
        let _ = master;
        for pid in crate::sys::session_members(child.sid) {
            // A process that exited meanwhile (ESRCH) needs nothing more.
            let _ = crate::sys::kill(pid, signal);
        }
    }
    #[cfg(windows)]
    {
        let _ = (child, signal);
        if let Some(master) = master {
            let _ = master.kill();
        }
    }
}

/// Hangs up every pane's session at once (a stopping server): SIGHUP to
/// each member, found in one pass over the process table. On Windows the
/// panes' pseudo consoles and jobs close with their masters instead.
pub fn hang_up_sessions(sids: &[i32]) {
    #[cfg(unix)]
    for pid in crate::sys::sessions_members(sids).into_values().flatten() {
        let _ = crate::sys::kill(pid, crate::sys::SIGHUP);
    }
    #[cfg(windows)]
    let _ = sids;
}

/// What to start in a new PTY.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment of the child (not added to ours).
    pub env: Vec<(OsString, OsString)>,
    pub cols: u16,
    pub rows: u16,
}

/// Identity of a started process. `start_token` (the kernel's start time)
/// distinguishes it from a later process that reuses the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildProcess {
    pub pid: i32,
    /// The child called setsid(), so its session id is its pid. Kept apart
    /// because signalling "the pane" means signalling this session. On
    /// Windows, which has no sessions, the pid again: the pane's Job
    /// Object stands for the session there.
    pub sid: i32,
    pub start_token: Option<u64>,
}

/// Environment variables a pane never inherits from the server: they describe
/// the server's own service manager or ptyd internals, and a shell holding
/// `NOTIFY_SOCKET` could speak to systemd in the server's name.
/// `TERM_PROGRAM*` describes the outer terminal a client runs in, not the
/// terminal ptyd gives the pane.
const STRIPPED_ENV_PREFIXES: &[&str] = &[
    "NOTIFY_SOCKET",
    "LISTEN_",
    "WATCHDOG_",
    "FDSTORE",
    "PTYD_",
    "TERM_PROGRAM",
];

/// Whether a variable of the server's or the creating client's environment
/// passes on to a pane's process (see `STRIPPED_ENV_PREFIXES`). Windows' names are
/// case-insensitive, so `ptyd_x` is `PTYD_X` there.
pub fn inherits_env(key: &OsStr) -> bool {
    let key = key.to_string_lossy();
    let key = if cfg!(windows) {
        key.to_ascii_uppercase()
    } else {
        key.into_owned()
    };
    !STRIPPED_ENV_PREFIXES.iter().any(|p| key.starts_with(p))
        && !STRIPPED_ENV.contains(&key.as_str())
}

/// Variables a pane never inherits by exact name: a server or client
/// started from inside tmux would otherwise tell the pane it runs in that
/// tmux, and a tmux started in the pane would think itself nested. `TERM`
/// is ptyd's own; `COLORTERM` speaks for the outer terminal, and
/// `COLUMNS`/`LINES` for its size, not the pane's.
const STRIPPED_ENV: &[&str] = &["TMUX", "TMUX_PANE", "TERM", "COLORTERM", "COLUMNS", "LINES"];

/// The program and arguments that run `script` in `shell`: `shell -c
/// script` on Unix; on Windows `shell /d /s /c "script"`, cmd.exe's form
/// (no AutoRun commands; the outer quotes stripped and the rest run as
/// typed, which `command_line` passes verbatim after `/c`).
pub fn shell_command(shell: &OsStr, script: &str) -> (OsString, Vec<OsString>) {
    if cfg!(windows) {
        let args = ["/d", "/s", "/c"].map(OsString::from);
        let mut args = args.to_vec();
        args.push(format!("\"{script}\"").into());
        (shell.to_os_string(), args)
    } else {
        (shell.to_os_string(), vec!["-c".into(), script.into()])
    }
}

/// The program and arguments of an interactive login shell: `shell -l`
/// on Unix; on Windows the shell alone (cmd.exe and PowerShell have no
/// login mode; a pane's cmd.exe is interactive by itself).
pub fn login_shell(shell: &OsStr) -> (OsString, Vec<OsString>) {
    if cfg!(windows) {
        (shell.to_os_string(), Vec::new())
    } else {
        (shell.to_os_string(), vec!["-l".into()])
    }
}

/// The smallest pane `pane.resize` accepts: a zero-column PTY breaks many
/// programs, and a single column leaves no room for a wide character.
pub const MIN_COLS: u32 = 2;
pub const MIN_ROWS: u32 = 1;

/// The size `pane.resize` gives a pane asking for `cols` x `rows`: refused
/// below the minimum (a script asking for 0x0 has a bug that a pane quietly
/// made 2x1 would hide), clamped above the maximum.
pub fn resize_size(cols: u32, rows: u32) -> Result<(u16, u16), String> {
    if cols < MIN_COLS || rows < MIN_ROWS {
        return Err(format!(
            "size {cols}x{rows} is too small: a pane has at least {MIN_COLS} columns and {MIN_ROWS} row"
        ));
    }
    Ok(clamp_size(cols, rows))
}

/// Clamps a requested size to what a pane accepts: 2..=1000 columns and
/// 1..=500 rows (a huge one is a memory attack on the screen model).
pub fn clamp_size(cols: u32, rows: u32) -> (u16, u16) {
    (
        cols.clamp(MIN_COLS, 1000) as u16,
        rows.clamp(MIN_ROWS, 500) as u16,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_variables_stay_with_the_server() {
        for key in [
            "NOTIFY_SOCKET",
            "LISTEN_FDS",
            "WATCHDOG_USEC",
            "FDSTORE",
            "PTYD_SOCKET",
            "TMUX",
            "TMUX_PANE",
            "TERM",
            "TERM_PROGRAM",
            "TERM_PROGRAM_VERSION",
            "COLORTERM",
        ] {
            assert!(!inherits_env(OsStr::new(key)), "{key}");
        }
        for key in [
            "PATH",
            "HOME",
            "LISTEN",
            "PTY",
            "TMUXX",
            "TERMINFO",
            "SSH_AUTH_SOCK",
        ] {
            assert!(inherits_env(OsStr::new(key)), "{key}");
        }
        // Windows' names are case-insensitive; Unix's are not.
        assert_eq!(inherits_env(OsStr::new("ptyd_socket")), !cfg!(windows));
    }
}
