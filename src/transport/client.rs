//! The client's end on Unix: the namespace's socket. Swapped whole with
//! `client_windows.rs` (the same names).

use crate::paths::NamespacePaths;
use std::io;
use std::time::Duration;

/// The client's end of a connection: a blocking byte stream (`Read` and
/// `Write`, also through `&`, and `try_clone`).
pub type ClientStream = std::os::unix::net::UnixStream;

/// Connects to the namespace's server. `NotFound` or `ConnectionRefused`
/// when none serves.
pub fn connect(paths: &NamespacePaths) -> io::Result<ClientStream> {
    std::os::unix::net::UnixStream::connect(paths.socket())
}

/// Where [`connect`] connects: the socket's path.
pub fn address(paths: &NamespacePaths) -> std::path::PathBuf {
    paths.socket()
}

/// Ends a connection from another thread than the one reading it: its
/// reads see the end at once.
pub fn hang_up(stream: &ClientStream) {
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Bounds the reads of a client stream.
pub fn set_read_timeout(stream: &ClientStream, timeout: Option<Duration>) -> io::Result<()> {
    stream.set_read_timeout(timeout)
}
