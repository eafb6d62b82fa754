//! Windows' `listener.rs`: connections arrive on instances of the
//! namespace's named pipe (`transport::windows`), one pending at a time.
//! The namespace's claim is a named mutex, taken with the first instance
//! in `start_windows.rs`; there is no socket file to bind, adopt or
//! unlink, and no service manager passes one.

use crate::transport::windows::PipeListener;
use std::io;
use std::os::windows::io::OwnedHandle;
use std::path::Path;

/// What the server accepts connections on: the pipe's pending instance.
pub type Listener = PipeListener;
/// One accepted connection: a connected pipe instance.
pub type Stream = mio::windows::NamedPipe;

/// The exclusive claim on a namespace: the named mutex
/// `Global\ptyd-<user>-<namespace>`, held for the server's lifetime (the
/// kernel lets go of it when the process ends, so nothing goes stale).
pub struct InstanceLock {
    _mutex: OwnedHandle,
}

impl InstanceLock {
    pub fn new(mutex: OwnedHandle) -> InstanceLock {
        InstanceLock { _mutex: mutex }
    }
}

/// The next connected client of ours (`WouldBlock`: none). A client of
/// another user, or one that left before it was served, is dropped by
/// the listener and counted (`PipeListener::refused`).
pub fn accept(listener: &mut Listener, registry: &mio::Registry) -> io::Result<Stream> {
    match listener.accept(registry)? {
        Some(pipe) => Ok(pipe),
        None => Err(io::ErrorKind::WouldBlock.into()),
    }
}

/// Whether a connection is registered for writable edges only while its
/// output waits for room. Not for named pipes: mio completes their writes
/// through a buffer of its own, and a pipe keeps both interests as it did.
pub const WRITE_INTEREST_FOLLOWS_OUTPUT: bool = false;

/// Moves an accepted instance from the listener's token to its own.
pub fn register_conn(
    registry: &mio::Registry,
    stream: &mut Stream,
    token: mio::Token,
) -> io::Result<()> {
    registry.reregister(
        stream,
        token,
        mio::Interest::READABLE | mio::Interest::WRITABLE,
    )
}

/// Who is at the other end (the listener admitted only our user's
/// processes already).
pub fn peer_of(stream: &Stream) -> Result<crate::sys::PeerCred, String> {
    crate::sys::pipe_client(stream).map_err(|e| format!("cannot ask who the client is: {e}"))
}

/// No socket file to remove on Windows.
pub fn unlink_if_ours(_path: &Path, _dev: u64, _ino: u64) {}
