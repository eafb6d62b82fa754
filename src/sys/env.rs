//! The environment at start, and what a parent passed through it.
//!
//! # Why changing the environment is sound here
//!
//! `std::env::remove_var` is `unsafe` because a C library's `getenv` in
//! another thread may read the environment while it changes. ptyd keeps
//! the environment on one thread: it is read and changed only by the main
//! thread (start-up, then the server's loop, which runs on it). The
//! threads ptyd starts never read it: the disk writer (`persist/writer.rs`)
//! only writes files it was handed, a replacement server's waiter
//! (`keeper/replacement.rs`) only waits on a child, and a Windows prompt
//! command's watcher (`tab_prompt/windows.rs`) only waits and wakes the
//! loop. Whoever adds a thread that reads the environment (spawns a
//! process, resolves a name, asks for the local time zone) must move the
//! changes below before it starts.

/// Removes `name` from this process's environment, so no child of ours
/// inherits it. On the main thread only (see the module doc).
pub fn remove_env(name: &str) {
    // SAFETY: only the main thread reads or writes the environment, and
    // this is it (the module doc's contract).
    unsafe { std::env::remove_var(name) };
}
