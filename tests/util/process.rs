//! Processes a test starts or watches: the kill-on-drop guard every test
//! uses for them, and what `/proc` tells about a pid.

use super::wait::poll_until;
use std::fs;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// How long a guarded child gets to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(10);

/// Ends a process when dropped, so a test that fails half-way leaves
/// nothing running. [`KillOnDrop::disarm`] once the test saw it go.
pub struct KillOnDrop(Target);

enum Target {
    /// Any process: SIGKILL, if it is still the one that started at
    /// `start` (a pid may be reused once it is gone).
    Pid {
        pid: i32,
        start: Option<String>,
    },
    /// Our own child: SIGTERM, then SIGKILL after [`TERM_GRACE`]; reaped.
    Child(Child),
    /// A process we do not know the pid of yet, stopped by a command
    /// (`ptyd stop` for a server the CLI started in the background).
    Command(Command),
    Disarmed,
}

impl KillOnDrop {
    pub fn pid(pid: i32) -> KillOnDrop {
        KillOnDrop(Target::Pid {
            pid,
            start: start_time(pid),
        })
    }

    pub fn child(child: Child) -> KillOnDrop {
        KillOnDrop(Target::Child(child))
    }

    pub fn command(cmd: Command) -> KillOnDrop {
        KillOnDrop(Target::Command(cmd))
    }

    /// The guarded child. Panics for a guard made from a pid or a command.
    pub fn as_child(&self) -> &Child {
        match &self.0 {
            Target::Child(child) => child,
            _ => panic!("this guard holds no child"),
        }
    }

    pub fn as_child_mut(&mut self) -> &mut Child {
        match &mut self.0 {
            Target::Child(child) => child,
            _ => panic!("this guard holds no child"),
        }
    }

    /// Takes the child back, unguarded (to wait for it or kill it here).
    pub fn into_child(mut self) -> Child {
        match std::mem::replace(&mut self.0, Target::Disarmed) {
            Target::Child(child) => child,
            _ => panic!("this guard holds no child"),
        }
    }

    /// Whether the guarded process is gone (for a pid: exited, a zombie,
    /// or the pid now someone else's). Only for guards made from a pid.
    pub fn gone(&self) -> bool {
        match &self.0 {
            Target::Pid { pid, start } => {
                start.is_none() || start_time(*pid) != *start || process_gone(*pid)
            }
            _ => panic!("only a pid guard knows whether its process is gone"),
        }
    }

    /// The pid this guard ends, if it guards a process it knows.
    pub fn guarded_pid(&self) -> Option<i32> {
        match &self.0 {
            Target::Pid { pid, .. } => Some(*pid),
            Target::Child(child) => Some(child.id() as i32),
            Target::Command(_) | Target::Disarmed => None,
        }
    }

    /// The process is gone or no longer ours to end.
    pub fn disarm(mut self) {
        self.0 = Target::Disarmed;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        match &mut self.0 {
            Target::Pid { pid, start } => {
                if start.is_some() && start_time(*pid) == *start && !process_gone(*pid) {
                    // SAFETY: kill has no memory-safety preconditions; the
                    // start time check keeps a reused pid from being hit.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
            }
            Target::Child(child) => {
                // SIGTERM first: a server hangs up its panes (SIGHUP to each
                // session) on its way out.
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                if wait_child(child, TERM_GRACE).is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            Target::Command(cmd) => {
                let _ = cmd
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            Target::Disarmed => {}
        }
    }
}

/// Waits for a child to exit, up to `timeout`.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    poll_until(timeout, || child.try_wait().ok().flatten())
}

/// Whether a process is gone: no `/proc` entry, or a zombie nobody reaped
/// yet (a container's init may never reap orphans).
pub fn process_gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().next() == Some("Z")
        }
    }
}

/// Field `n` (1-based, proc(5) numbering) of `/proc/<pid>/stat`.
pub fn proc_stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the command start at field 3.
    rest.split_whitespace().nth(n - 3).map(str::to_string)
}

/// The parent of `pid`, from `/proc/<pid>/stat`.
pub fn ppid(pid: i32) -> Option<i32> {
    proc_stat_field(pid, 4)?.parse().ok()
}

/// Every pid in `/proc`.
pub fn all_pids() -> Vec<i32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Zombie children of `pid`: exited and not yet reaped.
pub fn zombie_children(pid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|p| ppid(*p) == Some(pid) && proc_stat_field(*p, 3).as_deref() == Some("Z"))
        .collect()
}

/// `/proc/<pid>/stat` field 22, the start time: tells a process from a later
/// one reusing its pid.
pub fn start_time(pid: i32) -> Option<String> {
    proc_stat_field(pid, 22)
}

/// The contents of `/proc/<pid>/cmdline`, split.
pub fn cmdline(pid: i64) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}
