//! Passing file descriptors to the next server over a `SOCK_SEQPACKET`
//! socket, in batches, each fd named by the manifest entry it belongs to.
//!
//! Kernel facts this module is built on (see ARCHITECTURE.md):
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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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
    let iov = [io::IoSlice::new(&data)];
    let cmsg = [nix::sys::socket::ControlMessage::ScmRights(fds)];
    let cmsgs: &[nix::sys::socket::ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    let sent = nix::sys::socket::sendmsg::<()>(
        sock.as_raw_fd(),
        &iov,
        cmsgs,
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(io::Error::from)?;
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
    let mut cmsg_space = nix::cmsg_space!([RawFd; MAX_FDS_PER_BATCH]);
    let (n, flags, received) = {
        let mut iov = [io::IoSliceMut::new(&mut data)];
        let msg = nix::sys::socket::recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg_space),
            nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let mut received: Vec<OwnedFd> = Vec::new();
        for cmsg in msg.cmsgs().map_err(io::Error::from)? {
            if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = cmsg {
                // SAFETY: the kernel just installed these fds in our table
                // for us; nothing else owns them.
                received.extend(
                    fds.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        (msg.bytes, msg.flags, received)
    };
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the handoff socket",
        ));
    }
    if flags.contains(nix::sys::socket::MsgFlags::MSG_CTRUNC)
        || flags.contains(nix::sys::socket::MsgFlags::MSG_TRUNC)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a handoff message was truncated (MSG_CTRUNC/MSG_TRUNC)",
        ));
    }
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
        let mut pfd = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // SAFETY: `pfd` is one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n > 0 {
            return true;
        }
        if n == 0 || std::io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
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
        nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
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
            assert!(flags & libc::FD_CLOEXEC != 0, "{id} not close-on-exec");
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
        let fd = a.as_raw_fd();
        let fds = [fd];
        let iov = [io::IoSlice::new(&data)];
        nix::sys::socket::sendmsg::<()>(
            a.as_raw_fd(),
            &iov,
            &[nix::sys::socket::ControlMessage::ScmRights(&fds)],
            nix::sys::socket::MsgFlags::empty(),
            None,
        )
        .unwrap();
        let err = recv_batch::<String>(&b).unwrap_err();
        assert!(
            err.to_string().contains("names 2 fds but carries 1"),
            "{err}"
        );
    }
}
