//! The client's end on Windows: the namespace's named pipe, refused if
//! another user's process serves it. Swapped whole with `client.rs`.

use super::windows;
use crate::paths::NamespacePaths;
use std::io;
use std::time::Duration;

/// The client's end of a connection: a blocking byte stream (`Read` and
/// `Write`, also through `&`, and `try_clone`).
pub type ClientStream = std::fs::File;

/// How long a client waits for a free pipe instance while every one is
/// busy (the server makes the next as it accepts).
const PIPE_BUSY_WAIT: Duration = Duration::from_secs(5);

/// Connects to the namespace's server. `NotFound` or `ConnectionRefused`
/// when none serves.
pub fn connect(paths: &NamespacePaths) -> io::Result<ClientStream> {
    windows::connect(&windows::namespace_pipe(&paths.namespace)?, PIPE_BUSY_WAIT)
}

/// Where [`connect`] connects: the pipe's name.
pub fn address(paths: &NamespacePaths) -> std::path::PathBuf {
    windows::namespace_pipe(&paths.namespace)
        .unwrap_or_else(|e| e.to_string())
        .into()
}

/// A pipe handle cannot be shut down from another thread: nothing is
/// done, and the reader ends with its peer.
pub fn hang_up(_stream: &ClientStream) {}

/// A pipe opened for blocking I/O has no read timeout: `Unsupported`.
pub fn set_read_timeout(_stream: &ClientStream, _timeout: Option<Duration>) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "read timeouts on a pipe",
    ))
}
