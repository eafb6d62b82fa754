//! Passing file descriptors to the next server over a `SOCK_SEQPACKET`
//! socket, in batches, each fd named by the manifest entry it belongs to.
//!
//! Kernel facts this module is built on (see docs/design/upgrade.md):
//! - `SCM_RIGHTS` takes at most 253 fds per message (`EINVAL` above; musl
//!   252), so batches carry at most [`MAX_FDS_PER_BATCH`] = 252.
//! - A control buffer too small for what was sent sets `MSG_CTRUNC` and the
//!   kernel silently closes the fds that did not fit: the receiver treats
//!   `MSG_CTRUNC` (and `MSG_TRUNC`) as fatal for the whole transfer.
//! - Received fds get close-on-exec atomically with `MSG_CMSG_CLOEXEC`, so a
//!   pane spawned meanwhile cannot inherit one.
//! - `SOCK_SEQPACKET` keeps message boundaries, so the ids travelling in a
//!   batch's data always belong to the fds in that same message.
//!
//! A batch's data is JSON `{"seq": n, "ids": ["pty:p1", ...]}`: positions
//! are never trusted alone, every fd is named.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Fds per message: below the kernel's 253 and musl's 252.
pub const MAX_FDS_PER_BATCH: usize = 252;
/// Largest data part of a batch message (the ids).
pub const MAX_BATCH_DATA: usize = 64 * 1024;

/// Sends one message: a JSON header and, optionally, fds. Non-blocking
/// callers pass a non-blocking socket; a full socket is then an error (the
/// handoff sends one message at a time and waits for the answer, so it never
/// fills).
pub fn send_message<T: Serialize>(
    sock: &impl AsRawFd,
    header: &T,
    fds: &[RawFd],
) -> io::Result<()> {
    let data = serde_json::to_vec(header).map_err(io::Error::other)?;
    if data.len() > MAX_BATCH_DATA || fds.len() > MAX_FDS_PER_BATCH {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "handoff message too large",
        ));
    }
    let sent = crate::sys::send_with_fds(sock, &data, fds)?;
    if sent != data.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short send of a handoff message",
        ));
    }
    Ok(())
}

/// Receives one message: its JSON header bytes and the fds it carried,
/// owned and close-on-exec. Truncation of either part is an error (the fds
/// that did arrive are closed by being dropped).
pub fn recv_message(sock: &impl AsRawFd) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut data = vec![0u8; MAX_BATCH_DATA];
    let received = crate::sys::recv_with_fds(sock, &mut data, MAX_FDS_PER_BATCH)?;
    if received.len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the handoff socket",
        ));
    }
    if received.truncated {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a handoff message was truncated (MSG_CTRUNC/MSG_TRUNC)",
        ));
    }
    let n = received.len;
    let received = received.fds;
    data.truncate(n);
    Ok((data, received))
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct BatchHeader<N> {
    seq: u32,
    ids: Vec<N>,
}

/// Sends one batch: `items[i].1` is named `items[i].0` (the handoff names
/// them with [`super::fd_name::FdName`]).
pub fn send_batch<N: Serialize + Clone>(
    sock: &impl AsRawFd,
    seq: u32,
    items: &[(N, RawFd)],
) -> io::Result<()> {
    let header = BatchHeader {
        seq,
        ids: items.iter().map(|(id, _)| id.clone()).collect(),
    };
    let fds: Vec<RawFd> = items.iter().map(|(_, fd)| *fd).collect();
    send_message(sock, &header, &fds)
}

/// One received batch: its sequence number and the named fds, owned.
#[derive(Debug)]
pub struct Batch<N> {
    pub seq: u32,
    pub fds: Vec<(N, OwnedFd)>,
}

/// Receives one batch; a count that does not match its ids, or malformed
/// ids (for `FdName`, an unknown name), fail it.
pub fn recv_batch<N: DeserializeOwned>(sock: &impl AsRawFd) -> io::Result<Batch<N>> {
    let (data, received) = recv_message(sock)?;
    let header: BatchHeader<N> = serde_json::from_slice(&data).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("bad batch header: {e}"))
    })?;
    if header.ids.len() != received.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "batch {} names {} fds but carries {}",
                header.seq,
                header.ids.len(),
                received.len()
            ),
        ));
    }
    Ok(Batch {
        seq: header.seq,
        fds: header.ids.into_iter().zip(received).collect(),
    })
}

/// Waits until `sock` is readable (or hung up), at most `timeout`.
pub fn wait_readable(sock: &impl AsRawFd, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match crate::sys::poll_readable(&[sock.as_raw_fd()], Some(left)) {
            Ok(ready) => return ready[0],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// `recv_batch` with a deadline, for the blocking new side.
pub fn recv_batch_timeout<N: DeserializeOwned>(
    sock: &impl AsRawFd,
    timeout: std::time::Duration,
) -> io::Result<Batch<N>> {
    if !wait_readable(sock, timeout) {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no fd batch before the deadline",
        ));
    }
    recv_batch(sock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        crate::sys::seqpacket_pair(false).unwrap()
    }

    #[test]
    fn named_fds_arrive_cloexec_and_usable() {
        let (a, b) = seqpacket_pair();
        // Real fds whose identity we can check: the write ends of pipes.
        let pipes: Vec<(OwnedFd, OwnedFd)> =
            (0..300).map(|_| nix::unistd::pipe().unwrap()).collect();
        let items: Vec<(String, RawFd)> = pipes
            .iter()
            .enumerate()
            .map(|(i, (_, w))| (format!("pipe:{i}"), w.as_raw_fd()))
            .collect();
        let sender = std::thread::spawn({
            let items = items.clone();
            let a = a.as_raw_fd();
            move || {
                for (seq, chunk) in items.chunks(MAX_FDS_PER_BATCH).enumerate() {
                    send_batch(&a, seq as u32, chunk).unwrap();
                }
            }
        });
        let first = recv_batch::<String>(&b).unwrap();
        let second = recv_batch::<String>(&b).unwrap();
        sender.join().unwrap();
        assert_eq!((first.seq, first.fds.len()), (0, 252));
        assert_eq!((second.seq, second.fds.len()), (1, 48));
        for (id, fd) in first.fds.into_iter().chain(second.fds) {
            let i: usize = id.strip_prefix("pipe:").unwrap().parse().unwrap();
            let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFD).unwrap();
            let flags = nix::fcntl::FdFlag::from_bits_truncate(flags);
            assert!(
                flags.contains(nix::fcntl::FdFlag::FD_CLOEXEC),
                "{id} not close-on-exec"
            );
            // Writing through the received fd reaches the matching pipe.
            nix::unistd::write(&fd, id.as_bytes()).unwrap();
            let mut buf = [0u8; 16];
            let n = nix::unistd::read(&pipes[i].0, &mut buf).unwrap();
            assert_eq!(&buf[..n], id.as_bytes());
        }
    }

    #[test]
    fn count_mismatch_is_refused() {
        let (a, b) = seqpacket_pair();
        // Hand-craft a message naming two fds but carrying one.
        let data = serde_json::to_vec(&BatchHeader::<String> {
            seq: 0,
            ids: vec!["x".into(), "y".into()],
        })
        .unwrap();
        crate::sys::send_with_fds(&a, &data, &[a.as_raw_fd()]).unwrap();
        let err = recv_batch::<String>(&b).unwrap_err();
        assert!(
            err.to_string().contains("names 2 fds but carries 1"),
            "{err}"
        );
    }
}
