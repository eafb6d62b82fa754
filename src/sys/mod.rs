//! The operating-system boundary: every raw system call ptyd makes outside
//! its PTY backend (`pty/`), behind safe functions that return
//! `io::Result` (or an `Option` where "the OS cannot tell" is an answer).
//! Call sites never see `libc::`, `unsafe` or `cfg`.
//!
//! Two layers, in mio's manner:
//!
//! - `unix.rs`, portable POSIX, built on every Unix: fd flags, peer
//!   credentials (`SO_PEERCRED` on Linux, `getpeereid` elsewhere), `flock`,
//!   `fstat` checks on inherited fds, terminal size and raw mode, signal
//!   dispositions and `kill`, `poll`, fd passing over `SCM_RIGHTS`, the
//!   monotonic clock, wait statuses.
//! - the OS backend, chosen once below: `linux.rs`, or `fallback.rs` for
//!   any other Unix. It provides the mechanisms only some kernels have.
//!
//! # Contract of an OS backend
//!
//! Each item, what Linux uses, and how ptyd degrades where an OS lacks it
//! (what `fallback.rs` does):
//!
//! | item | Linux | without it |
//! |---|---|---|
//! | [`pidfd_open`], [`pidfd_exit_status`]: a pollable handle on a process that is not our child, and its wait status whoever reaped it | `pidfd_open(2)`, `PIDFD_GET_INFO` (6.15) | `Unsupported`: a live upgrade with running panes is refused before the pause (nothing is touched; `upgrade --mode restore` still works). A keeper process holding the panes' processes as its children would carry their exit codes instead. |
//! | [`anonymous_file`]: bytes in a file with no name, to pass as one fd | `memfd_create(2)` | a temp file created `O_EXCL` and unlinked at once |
//! | [`become_child_subreaper`]: orphaned descendants are re-parented to us | `prctl(PR_SET_CHILD_SUBREAPER)` | `Unsupported`: orphans of a finished generation go to init (or launchd), which reaps them; the reaper then only reaps its own children |
//! | [`process_start_token`]: what tells a process from a later one with the same pid | `/proc/<pid>/stat` field 22 | `None`: records carry no token and are matched by pid alone |
//! | [`session_members`], [`sessions_members`]: every process of a pane's session | a scan of `/proc` | the session leader's process group (`-sid`): children that moved to a group of their own are not reached |
//! | [`process_cwd`]: a process's current directory | `/proc/<pid>/cwd` | `None`: snapshots keep the directory the pane started in |
//! | [`seqpacket_pair`]: the handoff channel | `socketpair` with `SOCK_CLOEXEC`, `SOCK_NONBLOCK` | flags set by `fcntl` right after (only this thread forks, so no child can inherit the gap); an OS without `SOCK_SEQPACKET` for `AF_UNIX` fails the upgrade before anything is touched |
//! | [`recv_with_fds`]: received fds are close-on-exec | `MSG_CMSG_CLOEXEC` | `FD_CLOEXEC` set on each right after `recvmsg` |
//!
//! Portable but not identical: on macOS and the BSDs an fd sent over
//! `SCM_RIGHTS` is duplicated only when the peer receives it, so a sender
//! must keep its copy until then. The handoff does (the old side closes
//! nothing it sent before the commit), so it holds on both.
//!
//! A new backend (a `windows.rs` beside `pty/windows.rs`, say) provides the
//! same functions; an item it cannot provide returns `Unsupported` or the
//! documented "cannot tell" value, never a compile error.
//!
//! `--cfg ptyd_portable` builds `fallback.rs` (and the fork/exec spawn in
//! `pty/unix.rs`) on Linux too, so the degraded paths are compiled and can
//! be run here: `RUSTFLAGS="--cfg ptyd_portable" cargo check --all-targets`.

mod unix;

#[cfg_attr(all(target_os = "linux", not(ptyd_portable)), path = "linux.rs")]
#[cfg_attr(any(not(target_os = "linux"), ptyd_portable), path = "fallback.rs")]
mod os;

pub(crate) use unix::syscall;
pub use unix::{
    FdKind, PeerCred, ProcessExit, Received, SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGWINCH,
    SIGXFSZ, StdinMode, clear_cloexec, current_uid, ignore_signal, inherit_fd_on_exec,
    is_too_many_refs, kill, monotonic_usec, peer_cred, poll_readable, process_exists, read_stdin,
    reap_any_child, restore_stdin_mode, send_with_fds, set_cloexec, set_nonblocking_cloexec,
    setsid_on_exec, stdin_raw_mode, take_inherited_fd, terminal_size, try_lock_exclusive,
    wait_child,
};

pub use os::{
    anonymous_file, become_child_subreaper, pidfd_exit_status, pidfd_open, process_cwd,
    process_start_token, recv_with_fds, seqpacket_pair, session_members, sessions_members,
};
