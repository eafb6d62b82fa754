//! PTYs and the processes that run in them.
//!
//! Contract of the per-OS backend, chosen once below:
//!
//! - `spawn(&SpawnSpec, ..)` opens a terminal of the spec's size and starts
//!   the spec's program in it with exactly the spec's environment (scrubbed
//!   by the caller with [`inherits_env`]) and directory, returning a
//!   `PtyMaster` and a [`ChildProcess`] record;
//! - `PtyMaster::read` returns available output without blocking
//!   (`WouldBlock` when there is none, `Ok(0)` or an error once output has
//!   ended), `write` queues input without blocking (`WouldBlock` when full),
//!   `resize` changes the size the programs see.
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
pub use windows::{KILLED_EXIT_CODE, PaneWakes, PtyMaster, Wake, command_line, spawn};

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

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
const STRIPPED_ENV_PREFIXES: &[&str] =
    &["NOTIFY_SOCKET", "LISTEN_", "WATCHDOG_", "FDSTORE", "PTYD_"];

/// Whether a variable of the server's environment passes on to a pane's
/// process (see `STRIPPED_ENV_PREFIXES`). Windows' names are
/// case-insensitive, so `ptyd_x` is `PTYD_X` there.
pub fn inherits_env(key: &OsStr) -> bool {
    let key = key.to_string_lossy();
    let key = if cfg!(windows) {
        key.to_ascii_uppercase()
    } else {
        key.into_owned()
    };
    !STRIPPED_ENV_PREFIXES.iter().any(|p| key.starts_with(p))
}

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

/// Clamps a requested size to what a pane accepts: 2..=1000 columns and
/// 1..=500 rows (a zero-column PTY breaks many programs, a huge one is a
/// memory attack on the screen model).
pub fn clamp_size(cols: u32, rows: u32) -> (u16, u16) {
    (cols.clamp(2, 1000) as u16, rows.clamp(1, 500) as u16)
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
        ] {
            assert!(!inherits_env(OsStr::new(key)), "{key}");
        }
        for key in ["PATH", "HOME", "LISTEN", "PTY"] {
            assert!(inherits_env(OsStr::new(key)), "{key}");
        }
        // Windows' names are case-insensitive; Unix's are not.
        assert_eq!(inherits_env(OsStr::new("ptyd_socket")), !cfg!(windows));
    }
}
