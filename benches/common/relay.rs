//! The floor any multiplexer stands on: one process between the user's
//! terminal and the program's PTY, copying bytes both ways and doing
//! nothing else (no terminal model, no socket, no client). ptyd and tmux
//! both add at least this hop; measuring it in the same run says how much
//! of what they add is theirs and how much is the kernel's (on Linux a PTY
//! write goes through a workqueue, so each extra PTY costs a wakeup).
//!
//! The bench runs itself as the relay (`RELAY_ARG` first on its command
//! line) inside the outer PTY, so the relay is a process of its own,
//! scheduled as a server would be.

use super::Res;
use super::pty::PtyProc;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

/// The bench's first argument that makes it a relay for the program after it.
pub const RELAY_ARG: &str = "--relay-child";

/// `argv` run behind a relay in a PTY the bench holds: the relay's own
/// command line is this bench binary.
pub fn spawn_relayed(argv: &[&str], cols: u16, rows: u16) -> Res<PtyProc> {
    let me = std::env::current_exe().map_err(|e| format!("finding the bench binary: {e}"))?;
    let me = super::path_str(&me)?.to_string();
    let mut full = vec![me.as_str(), RELAY_ARG];
    full.extend_from_slice(argv);
    PtyProc::spawn(&full, &[] as &[(&str, &Path)], cols, rows)
}

/// If this process was started as a relay, runs it and exits.
pub fn run_if_relay() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some(RELAY_ARG) {
        return;
    }
    let code = match relay(&args[1..]) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("relay: {e}");
            1
        }
    };
    std::process::exit(code);
}

/// Puts our terminal (stdin) in raw mode, runs `argv` in a PTY of the same
/// size, and copies between the two until the program's side closes.
fn relay(argv: &[String]) -> Res<()> {
    if argv.is_empty() {
        return Err("no program to relay".into());
    }
    let stdin = io::stdin();
    let mut attrs =
        nix::sys::termios::tcgetattr(&stdin).map_err(|e| format!("reading the terminal: {e}"))?;
    nix::sys::termios::cfmakeraw(&mut attrs);
    nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, &attrs)
        .map_err(|e| format!("raw mode: {e}"))?;
    // SAFETY: winsize is plain integers, and TIOCGWINSZ fills it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) } < 0 {
        return Err(format!("reading the size: {}", io::Error::last_os_error()));
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut inner = PtyProc::spawn(&argv, &[], ws.ws_col, ws.ws_row)?;
    // Unbuffered, as a server writes: std's stdout would split a write at
    // its last newline.
    // SAFETY: fds 0 and 1 stay open for the life of the process, and
    // ManuallyDrop never closes them.
    let mut outer_in = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    let mut outer_out = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
    let mut buf = vec![0u8; 64 * 1024];
    let mut fds = [
        libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: inner.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: `fds` is a valid array of two pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll: {e}"));
        }
        if fds[0].revents != 0 {
            match outer_in.read(&mut buf) {
                Ok(0) | Err(_) => return Ok(()),
                Ok(n) => inner
                    .master
                    .write_all(&buf[..n])
                    .map_err(|e| format!("writing to the program: {e}"))?,
            }
        }
        if fds[1].revents != 0 {
            match inner.master.read(&mut buf) {
                // EIO: the program's side closed.
                Ok(0) | Err(_) => return Ok(()),
                Ok(n) => {
                    outer_out
                        .write_all(&buf[..n])
                        .map_err(|e| format!("writing to the terminal: {e}"))?;
                }
            }
        }
    }
}
