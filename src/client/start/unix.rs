//! Starting a background server on Unix: it tells us it serves by a byte
//! on a pipe it inherits (`protocol::READY_FD_ENV`).

use crate::client::{ClientError, server_stderr, start_failed};
use crate::paths::NamespacePaths;
use std::io::Read;
use std::os::fd::AsRawFd;

/// Starts `ptyd server` for the namespace as a detached background process
/// and waits until it accepts connections (it writes a byte on a pipe we
/// give it; see `protocol::READY_FD_ENV`).
pub(in crate::client) fn start_background_server(
    paths: &NamespacePaths,
) -> Result<(), ClientError> {
    let exe = std::env::current_exe().map_err(|e| ClientError::io("finding the ptyd binary", e))?;
    let (read_end, write_end) =
        nix::unistd::pipe().map_err(|e| ClientError::io("creating pipe", e.into()))?;
    let (stderr, stderr_path, stderr_start) = server_stderr(paths);
    let mut cmd = std::process::Command::new(&exe);
    // --hold-reruns: a listing must not re-run commands as a side effect.
    cmd.arg("-L")
        .arg(&paths.namespace)
        .args(["server", "--hold-reruns"])
        .env(
            crate::protocol::READY_FD_ENV,
            write_end.as_raw_fd().to_string(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr);
    // Detached from our terminal, so closing the terminal does not hang
    // the server up.
    crate::sys::setsid_on_exec(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| ClientError::io(&format!("starting {}", exe.display()), e))?;
    drop(write_end);
    let mut pipe = std::fs::File::from(read_end);
    let mut byte = [0u8; 1];
    // EOF without the byte means the server exited: most often another
    // client started one at the same moment and won the lock, which is fine.
    let started = matches!(pipe.read(&mut byte), Ok(1));
    if !started {
        // The server may drop the ready fd before it prints why it stops:
        // its exit, which comes right after, is when its stderr is whole.
        let _ = child.wait();
    }
    drop(child);
    if !started && crate::transport::connect(paths).is_err() {
        return Err(start_failed(&stderr_path, stderr_start));
    }
    Ok(())
}
