//! Claiming a namespace: the instance lock, the public socket, and the care
//! needed to never delete a socket another server owns.
//!
//! Order matters. The `flock` on `ptyd.lock` decides who owns the namespace;
//! only its holder may touch `ptyd.sock`. A socket file left by a server that
//! died is recognised by the lock being free, and replaced. At exit we unlink
//! the path only if it is still the inode we bound (dev/ino recorded at bind).

use crate::paths::NamespacePaths;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What the server accepts connections on: the public socket.
pub type Listener = mio::net::UnixListener;
/// One accepted connection.
pub type Stream = mio::net::UnixStream;

/// The next pending connection (`WouldBlock`: none).
pub fn accept(listener: &mut Listener, _registry: &mio::Registry) -> io::Result<Stream> {
    listener.accept().map(|(stream, _)| stream)
}

/// Puts an accepted connection in the poll under its own token, for
/// readable edges only: writable ones are asked for while its output waits
/// for room (`Connection::sync_write_interest`), since every read its
/// client makes raises one.
pub fn register_conn(
    registry: &mio::Registry,
    stream: &mut Stream,
    token: mio::Token,
) -> io::Result<()> {
    registry.register(stream, token, mio::Interest::READABLE)
}

/// Whether a connection is registered for writable edges only while its
/// output waits for room (see `register_conn`).
pub const WRITE_INTEREST_FOLLOWS_OUTPUT: bool = true;

/// Who is at the other end, if it is our uid; else why it is refused.
pub fn peer_of(stream: &Stream) -> Result<crate::sys::PeerCred, String> {
    let peer =
        crate::sys::peer_cred(stream).map_err(|e| format!("cannot read peer credentials: {e}"))?;
    let uid = crate::sys::current_uid();
    if peer.uid != uid {
        return Err(format!(
            "refused connection from uid {} (pid {}); this server serves uid {uid} only",
            peer.uid,
            peer.pid.map_or("unknown".to_string(), |p| p.to_string())
        ));
    }
    Ok(peer)
}

/// The exclusive claim on a namespace, held for the server's lifetime. The
/// lock lives with the open file description, so it can later travel with
/// the fd to a new server binary.
pub struct InstanceLock {
    file: File,
}

impl InstanceLock {
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }

    /// Adopts a lock fd handed over by the previous server (the flock
    /// travels with the open file description).
    pub fn from_fd(fd: std::os::fd::OwnedFd) -> InstanceLock {
        InstanceLock {
            file: File::from(fd),
        }
    }
}

/// A bound public socket and the identity of the inode we created.
pub struct BoundSocket {
    pub listener: std::os::unix::net::UnixListener,
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// Takes the namespace lock, or explains who holds it.
pub fn lock_namespace(paths: &NamespacePaths) -> io::Result<InstanceLock> {
    let path = paths.lock();
    let mut file = open_lock_file(&path)?;
    if !crate::sys::try_lock_exclusive(file.as_raw_fd())? {
        // The lock file names the first generation, which after a live
        // upgrade is gone (or the keeper, without one's fork): ask the
        // server itself who serves.
        let mut holder = String::new();
        let _ = (&mut file).take(64).read_to_string(&mut holder);
        let pid = serving_pid(paths)
            .or_else(|| holder.split_whitespace().next()?.parse::<u64>().ok())
            .map_or("unknown".to_string(), |p| p.to_string());
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "a ptyd server is already running in namespace {:?} (pid {pid}); use it, stop it with `ptyd{} stop`, or pick another namespace with -L NAME",
                paths.namespace,
                namespace_flag(paths)
            ),
        ));
    }
    // The lock file may stand for one that was removed with the runtime
    // directory while its server still holds it: that server makes its
    // socket and lock again (`server/rebind.rs`), and a second server
    // beside it would split the namespace. Asked even of a file that was
    // there: a server refused so leaves the one it made behind.
    let holders = crate::sys::holders_of_deleted(&path);
    if !holders.is_empty() {
        let pids: Vec<String> = holders.iter().map(|p| p.to_string()).collect();
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "a ptyd server of namespace {:?} is still running (pids {}), but its runtime directory {} was removed under it (by a tmp cleaner, a logout or by hand); it makes its socket again within {} s (or at once on `kill -HUP {}`): retry then, or end it with `kill {}`",
                paths.namespace,
                pids.join(", "),
                paths.runtime_dir.display(),
                REBIND_CHECK_EVERY.as_secs(),
                pids[0],
                pids[0],
            ),
        ));
    }
    write_pid_line(&file)?;
    Ok(InstanceLock { file })
}

/// How often a server checks that its socket and lock are still where
/// clients look for them (`server/rebind.rs`).
pub const REBIND_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// ` -L NAME` for a namespace other than the default, as a command shows it.
fn namespace_flag(paths: &NamespacePaths) -> String {
    if paths.namespace == crate::paths::DEFAULT_NAMESPACE {
        String::new()
    } else {
        format!(" -L {}", paths.namespace)
    }
}

/// Opens (creating 0600) the lock file at `path`, refusing anything but a
/// regular file of ours.
fn open_lock_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // Never through a symlink, never blocking on a FIFO: whatever is
        // found there must not be the file we write our pid into. (std
        // opens every file close-on-exec already.)
        .custom_flags(crate::sys::OPEN_UNTRUSTED_PATH)
        .open(path)
        .map_err(|e| {
            let why = if crate::sys::is_symlink_refused(&e) {
                "it is a symbolic link; remove it".to_string()
            } else {
                e.to_string()
            };
            io::Error::new(e.kind(), format!("opening lock {}: {why}", path.display()))
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.uid() != crate::sys::current_uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "lock {} is not a regular file of yours; remove it",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Overwritten in place, never truncated: a fixed width covers any
/// earlier pid, and a file that is somehow not ours loses nothing.
fn write_pid_line(file: &File) -> io::Result<()> {
    let line = format!("{:<20}\n", std::process::id());
    std::os::unix::fs::FileExt::write_all_at(file, line.as_bytes(), 0)
}

/// Whether the file at the namespace's lock path is the one `lock` holds
/// (a tmp cleaner or `rm -rf` of the runtime directory unlinks it, and
/// our `flock` then keeps no one else out).
pub fn lock_is_current(paths: &NamespacePaths, lock: &InstanceLock) -> bool {
    let (Ok(at_path), Ok(held)) = (
        std::fs::symlink_metadata(paths.lock()),
        lock.file.metadata(),
    ) else {
        return false;
    };
    at_path.dev() == held.dev() && at_path.ino() == held.ino()
}

/// Takes the lock at the namespace's lock path again, for a server whose
/// lock file was removed: `Err` says who holds it now (a server started
/// meanwhile). The old lock is the caller's to let go.
pub fn relock_namespace(paths: &NamespacePaths) -> io::Result<InstanceLock> {
    let path = paths.lock();
    let mut file = open_lock_file(&path)?;
    if !crate::sys::try_lock_exclusive(file.as_raw_fd())? {
        let mut holder = String::new();
        let _ = (&mut file).take(64).read_to_string(&mut holder);
        let pid = holder.split_whitespace().next().unwrap_or("unknown");
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "another ptyd server (pid {pid}) took namespace {:?} while this one's runtime directory was gone; this server (pid {}) keeps its panes but cannot be reached: stop the other with `ptyd{} stop`, and this one takes the namespace back within {} s",
                paths.namespace,
                std::process::id(),
                namespace_flag(paths),
                REBIND_CHECK_EVERY.as_secs(),
            ),
        ));
    }
    write_pid_line(&file)?;
    Ok(InstanceLock { file })
}

/// Whether the socket file at `path` is the inode we bound, or, for a
/// socket systemd bound ([`NOT_OURS`]), whether a file is still there.
pub fn socket_is_current(path: &Path, (dev, ino): (u64, u64)) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(_) if (dev, ino) == NOT_OURS => true,
        Ok(meta) => meta.dev() == dev && meta.ino() == ino,
        Err(_) => false,
    }
}

/// The pid of the server answering on the namespace's socket, asked with
/// `server.status` (bounded by a short timeout: this runs while starting).
/// Not asked when systemd passed us the socket: its pending connections
/// would be waiting for us.
fn serving_pid(paths: &NamespacePaths) -> Option<u64> {
    if std::env::var("LISTEN_PID").ok() == Some(std::process::id().to_string()) {
        return None;
    }
    let mut stream = std::os::unix::net::UnixStream::connect(paths.socket()).ok()?;
    let timeout = Some(std::time::Duration::from_secs(2));
    stream.set_read_timeout(timeout).ok()?;
    stream.set_write_timeout(timeout).ok()?;
    let hello = serde_json::json!({ "id": 1, "method": "hello",
        "params": { "protocol": crate::protocol::PROTOCOL_VERSION, "client": "ptyd-server" } });
    let status = serde_json::json!({ "id": 2, "method": "server.status", "params": {} });
    stream
        .write_all(format!("{hello}\n{status}\n").as_bytes())
        .ok()?;
    let reader = io::BufReader::new(stream);
    for line in io::BufRead::lines(reader).take(16) {
        let msg: serde_json::Value = serde_json::from_str(&line.ok()?).ok()?;
        if msg["id"] == 2 {
            return msg["result"]["pid"].as_u64();
        }
    }
    None
}

/// Binds the public socket. Call only while holding the namespace lock: any
/// file at the path is then a leftover of a dead server and is replaced.
pub fn bind_socket(paths: &NamespacePaths) -> io::Result<BoundSocket> {
    let path = paths.socket();
    // We hold the lock, so no ptyd server listens there; a listener there
    // is systemd's socket unit, whose service we would be competing with
    // (and whose socket we would orphan by replacing the file).
    // Only a file at the path can be listened on through it: a socket
    // bound there and unlinked since (a server whose runtime directory
    // was removed, this one among them) keeps its path in the kernel's
    // table, and is no one's to compete with.
    if std::fs::symlink_metadata(&path).is_ok()
        && crate::service::activation::someone_listens(&path)
    {
        let unit = crate::service::install::unit_stem(&paths.namespace);
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "{} is a socket something listens on: a ptyd server whose lock file was \
                 removed (then `ptyd{} status` answers; it takes its lock again within {} s), \
                 or systemd's {unit}.socket: the server belongs to the service, so start it with \
                 `systemctl --user start {unit}.service` (a client command does too), \
                 or `systemctl --user stop {unit}.socket` first to run `ptyd server` yourself",
                path.display(),
                namespace_flag(paths),
                REBIND_CHECK_EVERY.as_secs(),
            ),
        ));
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("removing stale socket {}: {e}", path.display()),
            ));
        }
    }
    let listener = std::os::unix::net::UnixListener::bind(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", path.display())))?;
    // The directory is already 0700; the mode is a second fence.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let meta = std::fs::metadata(&path)?;
    Ok(BoundSocket {
        listener,
        path,
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

/// The dev/ino recorded for a socket systemd bound and passed to us
/// (`service::activation`): it matches no file, so the path is never
/// unlinked by us, and the record travels through live upgrades as is.
pub const NOT_OURS: (u64, u64) = (0, 0);

/// Adopts the listening socket systemd passed (`ptyd.socket`), if any.
pub fn adopt_socket(paths: &NamespacePaths) -> io::Result<Option<BoundSocket>> {
    let Some(listener) =
        crate::service::activation::adopt_listener(paths).map_err(io::Error::other)?
    else {
        return Ok(None);
    };
    listener.set_nonblocking(true)?;
    Ok(Some(BoundSocket {
        listener,
        path: paths.socket(),
        dev: NOT_OURS.0,
        ino: NOT_OURS.1,
    }))
}

/// Unlinks `path` only if it is still the socket inode we bound.
pub fn unlink_if_ours(path: &Path, dev: u64, ino: u64) {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.dev() == dev
        && meta.ino() == ino
    {
        let _ = std::fs::remove_file(path);
    }
}
