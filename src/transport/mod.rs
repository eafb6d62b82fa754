//! The API transport: how a client reaches the server of its user and
//! namespace, and how the server takes connections in its mio loop.
//!
//! The protocol on top (JSON lines, then attach frames) is a byte stream
//! either way, so only this layer differs per OS:
//!
//! | | Unix | Windows |
//! |---|---|---|
//! | address | `$XDG_RUNTIME_DIR/ptyd/<namespace>/ptyd.sock` (`paths.rs`) | `\\.\pipe\ptyd-<user>-<namespace>` ([`windows::pipe_name`]) |
//! | who may connect | the socket's 0700 directory, then `SO_PEERCRED` | the pipe's DACL (the current user's SID only), then the client process's token user |
//! | a name someone else holds | `flock` on `ptyd.lock`, then the socket replaced | `FILE_FLAG_FIRST_PIPE_INSTANCE`: creating the name fails |
//! | the client checks the server | the socket's directory is ours | the server process's token user is ours |
//! | accepting in mio | `UnixListener`, one fd | one pending pipe instance; each connection consumes it and a new one is made ([`windows::PipeListener`]) |
//!
//! The server's side is `listener.rs` (Unix) and `listener_windows.rs`
//! on top of [`windows::PipeListener`], swapped whole with the same
//! names (`Listener`, `Stream`, `InstanceLock`, `peer_of`, ...); the
//! client's is here: [`ClientStream`] and [`connect`].

#[cfg_attr(windows, path = "listener_windows.rs")]
pub(crate) mod listener;
#[cfg(windows)]
pub mod windows;

use crate::paths::NamespacePaths;
use std::io;
use std::time::Duration;

/// The client's end of a connection: a blocking byte stream (`Read` and
/// `Write`, also through `&`, and `try_clone`).
#[cfg(unix)]
pub type ClientStream = std::os::unix::net::UnixStream;
#[cfg(windows)]
pub type ClientStream = std::fs::File;

/// How long a client waits for a free pipe instance while every one is
/// busy (the server makes the next as it accepts).
#[cfg(windows)]
const PIPE_BUSY_WAIT: Duration = Duration::from_secs(5);

/// Connects to the namespace's server: its socket, or its pipe (refused
/// if another user's process serves it). `NotFound` or
/// `ConnectionRefused` when none serves.
pub fn connect(paths: &NamespacePaths) -> io::Result<ClientStream> {
    #[cfg(unix)]
    return std::os::unix::net::UnixStream::connect(paths.socket());
    #[cfg(windows)]
    return windows::connect(&windows::namespace_pipe(&paths.namespace)?, PIPE_BUSY_WAIT);
}

/// Where [`connect`] connects: the socket's path, or the pipe's name.
pub fn address(paths: &NamespacePaths) -> std::path::PathBuf {
    #[cfg(unix)]
    return paths.socket();
    #[cfg(windows)]
    return windows::namespace_pipe(&paths.namespace)
        .unwrap_or_else(|e| e.to_string())
        .into();
}

/// Bounds the reads of a client stream. A pipe opened for blocking I/O
/// has no read timeout on Windows: `Unsupported` there.
pub fn set_read_timeout(stream: &ClientStream, timeout: Option<Duration>) -> io::Result<()> {
    #[cfg(unix)]
    return stream.set_read_timeout(timeout);
    #[cfg(windows)]
    {
        let _ = (stream, timeout);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "read timeouts on a pipe",
        ))
    }
}
