//! Helpers the benchmarks share: machine facts for the report header, fd
//! and process plumbing, argument parsing. Each bench uses a subset, hence
//! the allowance below.
#![allow(dead_code)]

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

type Res<T> = Result<T, String>;

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn set_cloexec(fd: RawFd) -> Res<()> {
    // SAFETY: fcntl on an fd we own.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(format!("fcntl: {}", io::Error::last_os_error()))
    }
}

/// Waits until `fd` is readable; false on timeout.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> Res<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(format!("poll: {e}"));
        }
    }
}

pub fn path_str(p: &Path) -> Res<&str> {
    p.to_str()
        .ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub fn parse_num(v: Result<std::ffi::OsString, lexopt::Error>, what: &str) -> Res<usize> {
    let v = v.map_err(|e| e.to_string())?;
    let s = v.to_string_lossy();
    s.parse()
        .map_err(|_| format!("{what} wants a whole number, got {s:?}"))
}

/// With `PTYD_BENCH_KEEP=1` the temporary directory (server logs, data) is
/// left in place and its path printed, for looking into a failure.
pub fn keep_dir(dir: tempfile::TempDir) {
    if std::env::var_os("PTYD_BENCH_KEEP").is_some() {
        eprintln!("keeping {}", dir.keep().display());
    }
}

/// The ptyd binary to measure: `PTYD_BIN`, else the one beside this bench
/// in the target directory.
pub fn find_ptyd() -> Res<PathBuf> {
    let how = "build it first with `cargo build --release` (or point PTYD_BIN at a ptyd binary)";
    if let Some(p) = std::env::var_os("PTYD_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("PTYD_BIN={} is not a file; {how}", p.display()))
        };
    }
    if let Some(p) = option_env!("CARGO_BIN_EXE_ptyd").map(PathBuf::from)
        && p.is_file()
    {
        return Ok(p);
    }
    // A bench runs as target/<profile>/deps/NAME-HASH.
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let candidate = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ptyd"))
        .ok_or("this executable has no parent directory")?;
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(format!("no ptyd binary at {}; {how}", candidate.display()))
    }
}
