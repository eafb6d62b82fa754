//! Starting a background server on Windows, where no fd can be inherited
//! for the ready byte: the client asks the pipe itself.

use crate::client::{ClientError, server_stderr, start_failed};
use crate::paths::NamespacePaths;

/// Starts `ptyd server` for the namespace as a detached background process
/// (no console, a process group of its own, so the console closing does
/// not end it) and waits until it serves the pipe or exits. Windows has
/// no fd to inherit for the ready byte, so the wait asks the pipe itself,
/// at a short interval, for at most `BACKGROUND_START` (a server that
/// cannot start exits well before, and its stderr says why).
pub(in crate::client) fn start_background_server(
    paths: &NamespacePaths,
) -> Result<(), ClientError> {
    use std::os::windows::process::CommandExt;
    const DETACHED_PROCESS: u32 = 0x0000_0008;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    const BACKGROUND_START: std::time::Duration = std::time::Duration::from_secs(20);
    let exe = std::env::current_exe().map_err(|e| ClientError::io("finding the ptyd binary", e))?;
    let (stderr, stderr_path, stderr_start) = server_stderr(paths);
    let mut child = std::process::Command::new(&exe)
        .arg("-L")
        .arg(&paths.namespace)
        .args(["server", "--hold-reruns"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP)
        .spawn()
        .map_err(|e| ClientError::io(&format!("starting {}", exe.display()), e))?;
    let deadline = std::time::Instant::now() + BACKGROUND_START;
    loop {
        if crate::transport::connect(paths).is_ok() {
            return Ok(());
        }
        // Exited: most often another client started one at the same
        // moment and won the namespace, which is fine if it serves.
        if !matches!(child.try_wait(), Ok(None)) || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if crate::transport::connect(paths).is_ok() {
        return Ok(());
    }
    Err(start_failed(&stderr_path, stderr_start))
}
