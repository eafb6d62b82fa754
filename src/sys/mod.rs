//! The operating-system boundary: every raw system call ptyd makes outside
//! its PTY backend (`pty/`), behind safe functions that return
//! `io::Result` (or an `Option` where "the OS cannot tell" is an answer).
//! Call sites never see `libc::`, `unsafe` or `cfg`.
//!
//! Two layers, in mio's manner:
//!
//! - `unix/`, portable POSIX, built on every Unix: fd flags, peer
//!   credentials (`SO_PEERCRED` on Linux, `getpeereid` elsewhere), `flock`,
//!   `fstat` checks on inherited fds, terminal size and raw mode, signal
//!   dispositions and `kill`, `poll`, fd passing over `SCM_RIGHTS`, the
//!   monotonic clock, wait statuses, file lengths, `pread` and shared
//!   file mappings ([`SharedMap`]: the output rings).
//! - `env.rs`, on every OS: the environment changed at start, sound
//!   because only the main thread reads or writes it (the contract is
//!   written there once).
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
//! | [`pidfd_open`], [`pidfd_exit_status`], [`pidfd_pid`]: a pollable handle on a process that is not our child, its wait status whoever reaped it, and its pid | `pidfd_open(2)`, `PIDFD_GET_INFO` (6.15), the `Pid:` of `/proc/self/fdinfo` | `Unsupported`: a live upgrade with running panes is refused before the pause (nothing is touched; `upgrade --mode restore` still works). A keeper process holding the panes' processes as its children would carry their exit codes instead. |
//! | [`anonymous_file`]: bytes in a file with no name, to pass as one fd | `memfd_create(2)` | a temp file created `O_EXCL` and unlinked at once |
//! | [`become_child_subreaper`]: orphaned descendants are re-parented to us | `prctl(PR_SET_CHILD_SUBREAPER)` | `Unsupported`: orphans of a finished generation go to init (or launchd), which reaps them; the reaper then only reaps its own children |
//! | [`process_start_token`]: what tells a process from a later one with the same pid | `/proc/<pid>/stat` field 22 | `None`: records carry no token and are matched by pid alone |
//! | [`process_ended`]: a process exited, even if no one reaped it yet (a zombie) | `/proc/<pid>/stat` state `Z` | only "no such pid": a zombie counts as running |
//! | [`session_members`], [`sessions_members`]: every process of a pane's session | a scan of `/proc` | the session leader's process group (`-sid`): children that moved to a group of their own are not reached |
//! | [`process_cwd`]: a process's current directory | `/proc/<pid>/cwd` | `None`: snapshots keep the directory the pane started in |
//! | [`holders_of_deleted`]: the processes still holding a file that was unlinked (a removed runtime directory's lock) | a scan of `/proc/*/fd` | none: a server whose runtime directory was removed is not found, and a new one claims the namespace beside it |
//! | [`unix_socket_listening`]: someone listens on a socket path (systemd's socket unit), seen without connecting | `/proc/net/unix` | "no": `ptyd server` replaces the socket file as if stale |
//! | [`seqpacket_pair`]: the handoff channel | `socketpair` with `SOCK_CLOEXEC`, `SOCK_NONBLOCK` | flags set by `fcntl` right after (only this thread forks, so no child can inherit the gap); an OS without `SOCK_SEQPACKET` for `AF_UNIX` fails the upgrade before anything is touched |
//! | [`recv_with_fds`]: received fds are close-on-exec | `MSG_CMSG_CLOEXEC` | `FD_CLOEXEC` set on each right after `recvmsg` |
//! | [`punch_hole`]: a file's middle given back (the history log's evicted lines) | `fallocate(FALLOC_FL_PUNCH_HOLE)` | nothing: the bytes stay until the file is closed |
//! | [`request_short_slices`]: the loop's thread asks for short time slices, so it preempts a CPU hog when it wakes (keystrokes beside a flood) | `sched_setattr` with `sched_runtime` (EEVDF, 6.12; ignored before) | `Unsupported`: the scheduler's default slices |
//! | [`socket_unread`]: what a Unix socket's peer has not read yet (how far behind an attached client is) | `ioctl(SIOCOUTQ)` | `None`: only the server's own queue counts |
//! | [`send_abstract_datagram`]: a datagram to a name in the abstract socket namespace (`$NOTIFY_SOCKET=@...`) | `SocketAddr::from_abstract_name` | `Unsupported`: readiness goes unreported to such a socket (systemd itself is Linux only) |
//! | [`release_free_memory`]: freed heap back to the system (the reaper, after a handoff; idle panes' scrollback JSON caches dropped; a second after a checkpoint of over 1 MiB of pane lines) | `malloc_trim(0)` with glibc | nothing: the allocator keeps what it keeps |
//!
//! Portable but not identical: on macOS and the BSDs an fd sent over
//! `SCM_RIGHTS` is duplicated only when the peer receives it, so a sender
//! must keep its copy until then. The handoff does (the old side closes
//! nothing it sent before the commit), so it holds on both.
//!
//! A new backend provides the same functions; an item it cannot provide
//! returns `Unsupported` or the documented "cannot tell" value, never a
//! compile error.
//!
//! Windows: `windows/` replaces both layers: the named-pipe transport's
//! pieces (the pipe's name, an instance admitting only the current user,
//! the peer check), console control events as the server's signals, the
//! attach client's console modes and input, and Wine detection for tests.
//! The items above that need a keeper or fd passing have no equivalent
//! there (the server does without, `server/continuity/keeperless.rs`):
//!
//! | Unix item | Windows |
//! |---|---|
//! | the keeper (`keeper/`): pane fds, pidfds and output rings held across a crash of the serving process | none: a pseudo console cannot be passed to another process, so a crash of the server loses its panes (each Job Object kills its tree); the next server restarts them from the snapshot by their restore plans |
//! | live upgrade (`SCM_RIGHTS` handoff) | none, for the same reason: `ptyd upgrade` takes the restore path and refuses `--mode live` |
//! | `SO_PEERCRED` | `GetNamedPipeClientProcessId` and that process's token user ([`pipe_peer_is_current_user`]) |
//! | [`trust`]: state files 0600/0700, opened with `O_NOFOLLOW`, trusted if ours and not group/other-writable | created with the profile's inherited ACL, opened with `FILE_FLAG_OPEN_REPARSE_POINT`, trusted if the owner SID is ours and the DACL lets no one else write (no one else in at all for a private directory; SYSTEM and Administrators excepted), a null DACL refused |
//! | [`sync_dir`]: fsync a directory after a rename | nothing: NTFS journals metadata |
//! | FIFOs ([`make_fifo`], [`open_fifo_writer`]: the tmux front's `wait-for`) | none ([`HAS_FIFOS`] is false): `wait-for` is refused |
//! | socket file mode 0600 in `$XDG_RUNTIME_DIR` | a pipe instance whose DACL admits only the current user's SID ([`create_pipe_instance`]) |
//!
//! `--cfg ptyd_portable` builds `fallback.rs` (and the fork/exec spawn in
//! `pty/unix.rs`) on Linux too, so the degraded paths are compiled and can
//! be run here: `RUSTFLAGS="--cfg ptyd_portable" cargo check --all-targets`.

mod env;
#[cfg(unix)]
mod unix;

#[cfg_attr(all(target_os = "linux", not(ptyd_portable)), path = "linux.rs")]
#[cfg_attr(
    all(unix, any(not(target_os = "linux"), ptyd_portable)),
    path = "fallback.rs"
)]
#[cfg_attr(windows, path = "windows/mod.rs")]
mod os;

#[cfg(unix)]
pub(crate) use unix::syscall;
#[cfg(unix)]
pub use unix::{
    FdKind, Forked, OPEN_UNTRUSTED_PATH, PeerCred, ProcessExit, SIGCHLD, SIGHUP, SIGINT, SIGKILL,
    SIGTERM, SIGWINCH, SIGXFSZ, SharedMap, Signals, StdinMode, adopt_passed_fd, broken_pipe_errno,
    clear_cloexec, close_abandoned, current_uid, dup_at_least, dup_raw, dup2_on_exec, exit_now,
    fd_dev_ino, fd_is, fd_limit, fork_single_threaded, has_children, ignore_signal,
    inherit_fd_on_exec, is_executable, is_symlink_refused, is_too_many_refs, kill, monotonic_usec,
    peer_cred, peer_hung_up, physical_memory, poll_readable, poll_writable, raise_fd_limit,
    raise_fsize_limit, read_at, read_stdin, reap_any_child, restore_stdin_mode,
    restore_stdin_mode_now, send_with_fds, set_cloexec, set_file_len, set_nonblocking_cloexec,
    setsid_on_exec, signal_by_name, signal_exists, signal_name, starting_fd_limit,
    starting_limits_on_exec, stderr_dev_ino, stdin_raw_mode, take_inherited_fd, terminal_size,
    try_lock_exclusive, user_id_and_name, user_shell, wait_child, wait_writable,
    with_pane_oom_score, with_starting_limits, write_stdout, write_stdout_vectored,
};

#[cfg(windows)]
pub use os::{
    AttachedConsole, HAS_FIFOS, ProcessExit, SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGTERM, Signals,
    broken_pipe_errno, default_runtime_base, default_state_base, fd_limit, is_executable,
    is_symlink_refused, make_fifo, open_fd_count, open_fifo_writer, physical_memory,
    pipe_bytes_available, process_cwd, process_ended, raise_fd_limit, reap_any_child,
    signal_by_name, signal_exists, signal_name, stderr_dev_ino, sync_dir, terminal_size, trust,
    user_id_and_name, user_shell, wait_for_exit,
};
#[cfg(unix)]
pub use unix::{
    HAS_FIFOS, default_runtime_base, default_state_base, make_fifo, open_fifo_writer, sync_dir,
    trust,
};

pub use env::remove_env;
pub use os::request_short_slices;
#[cfg(unix)]
pub use os::{
    anonymous_file, become_child_subreaper, die_with_parent, holders_of_deleted, open_fd_count,
    pidfd_exit_status, pidfd_open, pidfd_pid, process_cwd, process_ended, process_start_token,
    punch_hole, recv_with_fds, release_free_memory, send_abstract_datagram, seqpacket_pair,
    session_members, sessions_members, socket_unread, unix_socket_listening,
};

#[cfg(all(windows, test))]
pub use os::running_under_wine;
#[cfg(windows)]
pub use os::{
    PeerCred, PipePeer, create_pipe_instance, current_user_name, is_pipe_busy, pipe_client,
    pipe_name, pipe_peer_is_current_user, socket_unread, try_named_lock, wait_for_pipe_instance,
};

#[cfg(all(test, unix))]
mod tests {
    use super::unix::process_exists;
    use super::*;
    use std::io::{Read, Seek};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    fn cloexec(fd: &impl std::os::fd::AsFd) -> bool {
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).unwrap();
        nix::fcntl::FdFlag::from_bits_truncate(flags).contains(nix::fcntl::FdFlag::FD_CLOEXEC)
    }

    fn nonblocking(fd: &impl std::os::fd::AsFd) -> bool {
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        nix::fcntl::OFlag::from_bits_truncate(flags).contains(nix::fcntl::OFlag::O_NONBLOCK)
    }

    #[test]
    fn anonymous_file_holds_the_bytes_for_a_reader_that_rewinds() {
        let fd = anonymous_file(c"ptyd-test", b"manifest bytes").unwrap();
        assert!(cloexec(&fd));
        let mut file = std::fs::File::from(fd);
        file.rewind().unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "manifest bytes");
    }

    #[test]
    fn seqpacket_pair_keeps_boundaries_and_flags() {
        let (a, b) = seqpacket_pair(true).unwrap();
        assert!(cloexec(&a) && cloexec(&b) && nonblocking(&a) && nonblocking(&b));
        send_with_fds(&a, b"one", &[]).unwrap();
        send_with_fds(&a, b"two", &[]).unwrap();
        let mut buf = [0u8; 16];
        let first = recv_with_fds(&b, &mut buf, 4).unwrap();
        assert_eq!(&buf[..first.len], b"one");
        let (c, _d) = seqpacket_pair(false).unwrap();
        assert!(cloexec(&c) && !nonblocking(&c));
    }

    #[test]
    fn fds_arrive_close_on_exec_and_overflow_is_reported() {
        let (a, b) = seqpacket_pair(false).unwrap();
        let (r, w) = nix::unistd::pipe().unwrap();
        send_with_fds(&a, b"x", &[r.as_raw_fd(), w.as_raw_fd()]).unwrap();
        let mut buf = [0u8; 8];
        let got = recv_with_fds(&b, &mut buf, 2).unwrap();
        assert_eq!((got.len, got.fds.len(), got.truncated), (1, 2, false));
        assert!(got.fds.iter().all(cloexec));
        // More fds than the receiver made room for: the kernel drops the
        // rest and says so.
        send_with_fds(&a, b"y", &[r.as_raw_fd(), w.as_raw_fd(), r.as_raw_fd()]).unwrap();
        let got = recv_with_fds(&b, &mut buf, 1).unwrap();
        assert!(got.truncated, "{got:?}");
        // Those that fit (room is rounded up to the header's alignment)
        // are ours, open, and closed with `got`, not leaked.
        assert!((1..3).contains(&got.fds.len()), "{got:?}");
        assert!(got.fds.iter().all(cloexec));
    }

    #[test]
    fn peer_credentials_of_our_own_socketpair_are_ours() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let cred = peer_cred(&a).unwrap();
        assert_eq!(cred.uid, current_uid());
        if cfg!(any(target_os = "linux", target_os = "android")) {
            assert_eq!(cred.pid, Some(std::process::id() as i32));
        }
    }

    #[test]
    fn poll_readable_sees_input_and_times_out_without() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let ready = poll_readable(&[r.as_raw_fd()], Some(Duration::ZERO)).unwrap();
        assert_eq!(ready, [false]);
        nix::unistd::write(&w, b"!").unwrap();
        let ready = poll_readable(&[r.as_raw_fd()], Some(Duration::from_secs(5))).unwrap();
        assert_eq!(ready, [true]);
    }

    #[test]
    fn wait_child_decodes_exit_codes_and_signals() {
        let sh = |script: &str| {
            std::process::Command::new("/bin/sh")
                .args(["-c", script])
                .spawn()
                .unwrap()
                .id() as i32
        };
        let exited = sh("exit 7");
        assert_eq!(wait_child(exited), Some(ProcessExit::Code(7)));
        assert!(!process_exists(exited) || wait_child(exited).is_none());
        let killed = sh("kill -TERM $$");
        assert_eq!(wait_child(killed), Some(ProcessExit::Signal(SIGTERM)));
        assert!(process_exists(std::process::id() as i32));
    }
}
