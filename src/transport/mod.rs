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
//! The Unix side predates this module and lives where it grew up
//! (`server/listener.rs`, `client/mod.rs`); the Windows side is here. The
//! server and CLI on Windows are not built yet (`lib.rs`, ARCHITECTURE.md
//! "Windows"), so only this module's tests use the Windows side today.

#[cfg(windows)]
pub mod windows;
