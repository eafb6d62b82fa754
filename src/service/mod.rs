//! Living under a service manager: systemd's readiness protocol
//! (`sd_notify`). The unit file is in `packaging/systemd/`.
//!
//! The main PID systemd tracks is the keeper (`keeper/`), the process
//! `ptyd server` starts as; it forks the serving process and stays for the
//! service's life (re-executing itself after upgrades), so the main PID
//! never changes and no `MAINPID=` dance is needed. Every serving
//! generation is its descendant and notifies, which is why the unit says
//! `NotifyAccess=all`.

//!
//! On Windows there is no systemd: the readiness calls do nothing and
//! stderr is never the journal; socket activation and the fd store (fds
//! passed by the service manager) are Unix only, and the units that
//! `install` writes are systemd's (`ptyd service` says so there).

#[cfg(unix)]
pub mod activation;
#[cfg(unix)]
pub mod fd_store;
pub mod install;
pub mod journal;
#[cfg_attr(windows, path = "notify_windows.rs")]
pub mod notify;
