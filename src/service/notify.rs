//! `sd_notify`: one datagram of `KEY=VALUE` lines to `$NOTIFY_SOCKET`, a path
//! or, with a leading `@`, a name in the abstract namespace. Without the
//! variable (not under systemd) every call does nothing. Unix only:
//! `notify_windows.rs` has the same calls, doing nothing.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (e.g. `"READY=1\nSTATUS=serving"`). Failures are ignored:
/// readiness reporting must never take the server down.
pub fn notify(state: &str) {
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET") {
        send_to(&path, state);
    }
}

/// Sends `state` to the socket `path` names (see the module doc).
fn send_to(path: &std::ffi::OsStr, state: &str) {
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let _ = if let Some(name) = bytes.strip_prefix(b"@") {
        crate::sys::send_abstract_datagram(&sock, name, state.as_bytes())
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(path))
            .map(|_| ())
    };
}

/// The server accepts connections.
pub fn ready(status: &str) {
    notify(&format!("READY=1\nSTATUS={status}"));
}

/// A reload (live upgrade) began; systemd wants the monotonic time with it.
pub fn reloading() {
    notify(&format!(
        "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=upgrading",
        crate::sys::monotonic_usec()
    ));
}

pub fn stopping() {
    notify("STOPPING=1\nSTATUS=stopping");
}

#[cfg(test)]
mod tests {
    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // Not through $NOTIFY_SOCKET: setting a variable while other tests'
        // threads may read the environment is unsound. tests/service.rs
        // covers the variable, through the real binary.
        super::send_to(path.as_os_str(), "READY=1\nSTATUS=serving 0 panes");
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving 0 panes");
    }
}
