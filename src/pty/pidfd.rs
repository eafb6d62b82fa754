//! TRANSITIONAL shim until server/ is converted to `crate::sys`.

use std::io;
use std::os::fd::OwnedFd;

pub fn open(pid: i32) -> io::Result<OwnedFd> {
    crate::sys::pidfd_open(pid)
}

pub fn exit_status(pidfd: &OwnedFd) -> io::Result<Option<i32>> {
    Ok(crate::sys::pidfd_exit_status(pidfd)?.map(|e| match e {
        crate::sys::ProcessExit::Code(c) => c << 8,
        crate::sys::ProcessExit::Signal(s) => s,
    }))
}
