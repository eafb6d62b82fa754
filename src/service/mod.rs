//! Living under a service manager: systemd's readiness protocol
//! (`sd_notify`). The unit file is in `packaging/systemd/`.
//!
//! The main PID systemd tracks is the first server generation; after an
//! upgrade it stays behind as the reaper (`reaper.rs`), so the main PID never
//! changes and no `MAINPID=` dance is needed. Later generations notify too,
//! which is why the unit says `NotifyAccess=all`.

pub mod activation;
pub mod install;
pub mod journal;
pub mod notify;
