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
//! client's is `client.rs` and `client_windows.rs`, swapped the same way
//! ([`ClientStream`], [`connect`]).

#[cfg_attr(windows, path = "client_windows.rs")]
mod client;
#[cfg_attr(windows, path = "listener_windows.rs")]
pub(crate) mod listener;
#[cfg(windows)]
pub mod windows;

pub use client::{ClientStream, address, connect, hang_up, set_read_timeout};
