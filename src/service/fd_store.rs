//! systemd's file descriptor store, for when the keeper itself is killed.
//!
//! Why: the keeper (`crate::keeper`) holds every pane's master, so a dead
//! serving process loses nothing; but if the keeper dies, the last copies
//! close and every pane hangs up. Under systemd, a service may hand fds to
//! the service manager (`sd_pid_notify_with_fds(3)`: `FDSTORE=1` and a
//! name, with the fds attached) and gets them back at its next start in
//! `LISTEN_FDS`/`LISTEN_FDNAMES`, after the socket unit's. So the keeper
//! pushes what it holds (each pane's master, pidfd and output ring, the
//! listener and lock, the checkpoint and a small memfd describing it) and
//! removes (`FDSTOREREMOVE=1`) what it lets go of, so a removed pane still
//! hangs up when removed; a keeper started with such fds takes the panes
//! over as it would after a server crash.
//!
//! Only when the unit allows it. systemd 254 and later say so: `$FDSTORE`
//! is the unit's `FileDescriptorStoreMax=`. Older managers (252 is
//! Debian 12's) keep fds just the same but do not say, so with
//! `$NOTIFY_SOCKET` set and no `$FDSTORE` the keeper asks by trying
//! ([`probe`]): a refused fd is closed by the manager, which a pipe shows.
//! The pane processes must also survive the keeper's death
//! (`KillMode=process`): see docs/design/systemd.md and the unit's
//! comments.
//!
//! Names: `ptyd-keeper-` then what it is (`master-7`, `pidfd-7`, `ring-7`,
//! `listener`, `lock`, `precopy`, `manifest`, `checkpoint`, `probe`): printable,
//! no colon (the separator of `LISTEN_FDNAMES`).

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;

/// The prefix of every name the keeper stores under.
pub const PREFIX: &str = "ptyd-keeper-";
/// The first passed fd (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// A connection to the service manager's fd store, if the unit has one.
pub struct FdStore {
    sock: UnixDatagram,
    /// What is stored, by name: the file (device, inode) each refers to,
    /// so an unchanged fd is not pushed again.
    stored: HashMap<String, (u64, u64)>,
    max: usize,
}

impl FdStore {
    /// The store, when `$NOTIFY_SOCKET` is set and the unit keeps fds:
    /// `$FDSTORE` (`FileDescriptorStoreMax=`) above 0 or, where the
    /// manager does not set it, a [`probe`] it accepted.
    pub fn from_env() -> Option<FdStore> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let declared: Option<usize> = match std::env::var("FDSTORE") {
            Ok(v) => Some(v.trim().parse().ok()?),
            Err(_) => None,
        };
        if declared == Some(0) {
            return None;
        }
        let sock = UnixDatagram::unbound().ok()?;
        let bytes = path.as_encoded_bytes();
        let connected = if let Some(name) = bytes.strip_prefix(b"@") {
            connect_abstract(&sock, name)
        } else {
            sock.connect(std::path::Path::new(&path))
        };
        connected.ok()?;
        // The limit is then unknown: fds beyond it are refused by the
        // manager, which says so in its log (the unit's comments ask for
        // a generous FileDescriptorStoreMax=).
        let max = match declared {
            Some(max) => max,
            None => match probe(&sock) {
                Ok(true) => usize::MAX,
                Ok(false) => return None,
                Err(e) => {
                    eprintln!("ptyd keeper: systemd's fd store: {e}; not using it");
                    return None;
                }
            },
        };
        Some(FdStore {
            sock,
            stored: HashMap::new(),
            max,
        })
    }

    /// Makes the store hold exactly `wanted` (name → fd): pushes what is
    /// new or changed, removes what is no longer wanted. Failures are
    /// logged once per call and otherwise ignored (the store is a second
    /// line of defence; the keeper works without it).
    pub fn sync(&mut self, wanted: &[(String, RawFd)]) {
        let mut problem = None;
        let names: std::collections::HashSet<&str> =
            wanted.iter().map(|(n, _)| n.as_str()).collect();
        let gone: Vec<String> = self
            .stored
            .keys()
            .filter(|n| !names.contains(n.as_str()))
            .cloned()
            .collect();
        for name in gone {
            if let Err(e) = self.send(&format!("FDSTOREREMOVE=1\nFDNAME={name}"), &[]) {
                problem.get_or_insert(format!("removing {name}: {e}"));
            }
            self.stored.remove(&name);
        }
        for (name, fd) in wanted {
            let Ok(id) = crate::sys::fd_dev_ino(*fd) else {
                continue;
            };
            if self.stored.get(name) == Some(&id) {
                continue;
            }
            if self.stored.contains_key(name) {
                let _ = self.send(&format!("FDSTOREREMOVE=1\nFDNAME={name}"), &[]);
            } else if self.stored.len() >= self.max {
                problem.get_or_insert(format!(
                    "the unit's FileDescriptorStoreMax={} is reached; {name} is not stored",
                    self.max
                ));
                continue;
            }
            match self.send(&format!("FDSTORE=1\nFDNAME={name}"), &[*fd]) {
                Ok(()) => {
                    self.stored.insert(name.clone(), id);
                }
                Err(e) => {
                    self.stored.remove(name);
                    problem.get_or_insert(format!("storing {name}: {e}"));
                }
            }
        }
        if let Some(p) = problem {
            crate::service::journal::write_line(&format!("ptyd keeper: systemd's fd store: {p}"));
        }
    }

    /// Fds passed to us at start count as stored already.
    pub fn adopted(&mut self, fds: &HashMap<String, OwnedFd>) {
        for (name, fd) in fds {
            if let Ok(id) = crate::sys::fd_dev_ino(fd.as_fd()) {
                self.stored.insert(name.clone(), id);
            }
        }
    }

    /// Empties the store of every name of ours (fds passed back that
    /// cannot be taken over: the lock among them would keep the namespace
    /// from a fresh server).
    pub fn forget_all(&mut self) {
        let _ = self.send(&format!("FDSTOREREMOVE=1\nFDNAME={}", name("lock")), &[]);
        // systemd removes by exact name only: every name passed to us.
        let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
        for n in names.split(':').filter(|n| is_keepers(n)) {
            let _ = self.send(&format!("FDSTOREREMOVE=1\nFDNAME={n}"), &[]);
        }
        self.stored.clear();
    }

    fn send(&self, state: &str, fds: &[RawFd]) -> std::io::Result<()> {
        crate::sys::send_with_fds(&self.sock, state.as_bytes(), fds).map(|_| ())
    }
}

/// How long the manager may take to answer [`probe`]'s barrier. It
/// answers at once when it runs; this bounds a keeper start under a
/// manager that is stuck.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether the manager keeps fds for this unit, found by storing one: the
/// write end of a pipe, followed by `BARRIER=1` with the write end of a
/// second pipe (`sd_notify_barrier(3)`, systemd 246 and later: the manager
/// closes that fd once it has handled every earlier message; older ones
/// close every fd they do not store). Once the second pipe reads end of
/// file, the first does too exactly when the manager refused to keep it
/// (`FileDescriptorStoreMax=0`, the default, which it logs as a warning).
/// A kept probe is removed again.
fn probe(sock: &UnixDatagram) -> Result<bool, String> {
    use std::io::Read;
    let probe_name = name("probe");
    let pipe = || -> Result<(OwnedFd, OwnedFd), String> {
        let (r, w) = nix::unistd::pipe().map_err(|e| format!("a probe pipe: {e}"))?;
        for fd in [&r, &w] {
            crate::sys::set_cloexec(std::os::fd::AsRawFd::as_raw_fd(fd))
                .map_err(|e| format!("a probe pipe: {e}"))?;
        }
        Ok((r, w))
    };
    let (kept, kept_w) = pipe()?;
    let (barrier, barrier_w) = pipe()?;
    let send = |state: &str, fd: RawFd| {
        crate::sys::send_with_fds(sock, state.as_bytes(), &[fd])
            .map_err(|e| format!("sending {state:?}: {e}"))
    };
    send(
        &format!("FDSTORE=1\nFDNAME={probe_name}"),
        std::os::fd::AsRawFd::as_raw_fd(&kept_w),
    )?;
    drop(kept_w);
    send("BARRIER=1", std::os::fd::AsRawFd::as_raw_fd(&barrier_w))?;
    drop(barrier_w);
    let barrier_fd = std::os::fd::AsRawFd::as_raw_fd(&barrier);
    // The keeper's SIGCHLD interrupts the wait now and then.
    let deadline = std::time::Instant::now() + PROBE_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match crate::sys::poll_readable(&[barrier_fd], Some(left)) {
            Ok(ready) if ready.first().copied().unwrap_or(false) => break,
            Ok(_) => {
                return Err(format!(
                    "the service manager did not answer within {PROBE_TIMEOUT:?}"
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted && !left.is_zero() => {}
            Err(e) => return Err(format!("waiting for the manager: {e}")),
        }
    }
    let kept_fd = std::os::fd::AsRawFd::as_raw_fd(&kept);
    crate::sys::set_nonblocking_cloexec(kept_fd).map_err(|e| format!("the probe pipe: {e}"))?;
    let refused = matches!(std::fs::File::from(kept).read(&mut [0u8; 1]), Ok(0));
    if !refused {
        let _ = crate::sys::send_with_fds(
            sock,
            format!("FDSTOREREMOVE=1\nFDNAME={probe_name}").as_bytes(),
            &[],
        );
    }
    Ok(!refused)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn connect_abstract(sock: &UnixDatagram, name: &[u8]) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    sock.connect_addr(&addr)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn connect_abstract(_: &UnixDatagram, _: &[u8]) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// The keeper's fds systemd passed back at start (`LISTEN_FDNAMES` entries
/// starting with [`PREFIX`]), by name. The others (the socket unit's
/// listener) stay for `activation::adopt_listener`, which reads and
/// removes the variables; ours are closed-on-exec and owned from here.
/// On the main thread, before anything else takes the passed fds
/// (`sys::adopt_passed_fd`).
pub fn take_passed() -> HashMap<String, OwnedFd> {
    let mut out = HashMap::new();
    let ours = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        == Some(std::process::id());
    let Some(count) = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<i32>().ok())
        .filter(|_| ours)
    else {
        return out;
    };
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    let names: Vec<&str> = names.split(':').collect();
    for i in 0..count.max(0) {
        let Some(name) = names.get(i as usize).filter(|n| n.starts_with(PREFIX)) else {
            continue;
        };
        let fd = LISTEN_FDS_START + i;
        if crate::sys::set_cloexec(fd).is_err() {
            continue;
        }
        // LISTEN_PID names us, so the fds from 3 were passed to this
        // process to own; set_cloexec just showed this one is open, and
        // only this function takes the ones with our names.
        out.insert(name.to_string(), crate::sys::adopt_passed_fd(fd));
    }
    out
}

/// After [`take_passed`], for a process that becomes the keeper: the
/// variables go (no child of ours may read them as its own), and the
/// socket unit's fds are closed on exec (the keeper's copy of the
/// listener, stored too, is what it hands on).
/// On the main thread (`sys/env.rs`).
pub fn forget_passed() {
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<i32>().ok())
        .unwrap_or(0);
    for fd in LISTEN_FDS_START..LISTEN_FDS_START + count.max(0) {
        let _ = crate::sys::set_cloexec(fd);
    }
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        crate::sys::remove_env(name);
    }
}

/// Whether a passed fd name is one of the keeper's (so socket activation
/// leaves it alone).
pub fn is_keepers(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// The name of a stored fd.
pub fn name(what: &str) -> String {
    format!("{PREFIX}{what}")
}
