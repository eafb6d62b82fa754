//! The named-pipe transport: a listener for the server's mio loop and the
//! client's connect, both checking that the other end runs as the current
//! user. The raw calls (pipe creation with its DACL, the peer's token,
//! `WaitNamedPipeW`) are in `sys/windows.rs`; this is safe code on top.
//!
//! A named pipe has no listening socket: the server creates an instance,
//! waits for one client on it, and needs a new instance for the next
//! client. [`PipeListener`] keeps exactly one instance pending, registered
//! under the listener's token; when a client connects, [`PipeListener::accept`]
//! hands that instance out as the connection (the caller re-registers it
//! under the connection's token) and leaves a fresh one pending. Instances
//! other than the first are created without `FILE_FLAG_FIRST_PIPE_INSTANCE`:
//! they join the name we already own.

use crate::sys::{self, PipePeer};
use mio::windows::NamedPipe;
use mio::{Interest, Registry, Token};
use std::fs::File;
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::OwnedHandle;
use std::time::{Duration, Instant};

pub use crate::sys::pipe_name;

/// The pipe of the current user's server in `namespace`.
pub fn namespace_pipe(namespace: &str) -> io::Result<String> {
    Ok(pipe_name(&sys::current_user_name()?, namespace))
}

/// `SECURITY_IDENTIFICATION` for `CreateFileW`: the server may learn who
/// we are but cannot act as us (a squatter on our pipe name gets no
/// impersonation token worth having).
const SECURITY_IDENTIFICATION: u32 = 0x0001_0000;

/// A namespace held by this server: the instance lock and the listener.
/// Dropping it (or the process dying) frees both.
pub struct ServerClaim {
    pub listener: PipeListener,
    /// The named mutex: held as long as the server lives.
    pub lock: OwnedHandle,
}

/// Claims the current user's `namespace` for a server, as
/// `transport/listener.rs` does on Unix: first the lock (a named mutex, which
/// Wine enforces too), then the pipe's first instance (which Windows also
/// refuses if any process serves the name). Refused with `AddrInUse` if a
/// server of ours runs there, `PermissionDenied` if another user holds the
/// name.
pub fn claim_namespace(
    registry: &Registry,
    namespace: &str,
    token: Token,
) -> io::Result<ServerClaim> {
    let name = namespace_pipe(namespace)?;
    let lock_name = format!(r"Global\{}", name.trim_start_matches(r"\\.\pipe\"));
    let lock = sys::try_named_lock(&lock_name)
        .map_err(|e| io::Error::new(e.kind(), format!("locking namespace {namespace:?}: {e}")))?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "a ptyd server is already running in namespace {namespace:?}; use it, stop it with `ptyd stop`, or pick another namespace with -L NAME"
                ),
            )
        })?;
    let listener = PipeListener::bind(registry, &name, token)?;
    Ok(ServerClaim { listener, lock })
}

/// The server's end: one pending pipe instance at a time.
pub struct PipeListener {
    name: String,
    pending: NamedPipe,
    token: Token,
    refused: u64,
}

impl PipeListener {
    /// Creates the first instance of `name` (refused if any process
    /// already serves that name) and starts waiting for a client on it.
    /// Readiness arrives under `token`; call [`accept`](Self::accept) then.
    pub fn bind(registry: &Registry, name: &str, token: Token) -> io::Result<PipeListener> {
        let pending = pending_instance(registry, name, token, true)?;
        Ok(PipeListener {
            name: name.to_string(),
            pending,
            token,
            refused: 0,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connections refused because their process ran as another user.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// A connected client of the current user, if one is waiting. Call
    /// after an event for the listener's token, in a loop until `None`.
    /// The returned pipe is still registered under the listener's token:
    /// `registry.reregister` it under its own. Errors are the server's
    /// (no new instance could be made); a client that failed or was
    /// refused is dropped and `None` returned.
    pub fn accept(&mut self, registry: &Registry) -> io::Result<Option<NamedPipe>> {
        // A connect that completed with an error: this instance is spent.
        if self.pending.take_error()?.is_some() {
            self.renew(registry)?;
            return Ok(None);
        }
        match self.pending.connect() {
            Ok(()) => {}
            // Still waiting for a client (or the wait was just started).
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(_) => {
                self.renew(registry)?;
                return Ok(None);
            }
        }
        let connected = self.renew(registry)?;
        match sys::pipe_peer_is_current_user(&connected, PipePeer::Client) {
            Ok(true) => Ok(Some(connected)),
            // Another user's process got past the DACL, or left before we
            // could ask who it was: either way it is not served.
            Ok(false) | Err(_) => {
                self.refused += 1;
                let mut connected = connected;
                let _ = registry.deregister(&mut connected);
                Ok(None)
            }
        }
    }

    /// Puts a fresh instance in place of the pending one and returns the
    /// old one.
    fn renew(&mut self, registry: &Registry) -> io::Result<NamedPipe> {
        let next = pending_instance(registry, &self.name, self.token, false)?;
        Ok(std::mem::replace(&mut self.pending, next))
    }
}

/// A new instance of `name`, registered under `token`, waiting for a client.
fn pending_instance(
    registry: &Registry,
    name: &str,
    token: Token,
    first: bool,
) -> io::Result<NamedPipe> {
    let mut pipe = sys::create_pipe_instance(name, first)?;
    registry.register(&mut pipe, token, Interest::READABLE | Interest::WRITABLE)?;
    match pipe.connect() {
        // A client was already there: the next `accept` finds it.
        Ok(()) => Ok(pipe),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(pipe),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("waiting for clients on {name}: {e}"),
        )),
    }
}

/// Connects to the server serving `name`, waiting up to `wait` while every
/// instance is busy. The pipe is a blocking `File`, as the CLI uses a Unix
/// socket. Refused (`PermissionDenied`) if the server process runs as
/// another user: a name squatted on by someone else is not ours to talk to.
pub fn connect(name: &str, wait: Duration) -> io::Result<File> {
    let deadline = Instant::now() + wait;
    let pipe = loop {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .security_qos_flags(SECURITY_IDENTIFICATION)
            .open(name)
        {
            Ok(pipe) => break pipe,
            Err(e) if sys::is_pipe_busy(&e) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("every instance of {name} stayed busy for {wait:?}"),
                    ));
                }
                // Another client took the free instance first: wait for
                // the server to make the next.
                let _ = sys::wait_for_pipe_instance(name, left);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("no ptyd server serves {name} (start one with `ptyd server`)"),
                ));
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("opening {name}: {e}"))),
        }
    };
    if !sys::pipe_peer_is_current_user(&pipe, PipePeer::Server)
        .map_err(|e| io::Error::new(e.kind(), format!("asking who serves {name}: {e}")))?
    {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{name} is served by a process of another user; refusing to talk to it"),
        ));
    }
    Ok(pipe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};

    fn unique_name(what: &str) -> String {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        namespace_pipe(&format!("transport-{what}-{}-{n}", std::process::id())).unwrap()
    }

    /// A client thread: connects, sends one line, returns the reply line.
    fn client(name: &str, line: String) -> std::thread::JoinHandle<String> {
        let name = name.to_string();
        std::thread::spawn(move || {
            let mut pipe = connect(&name, Duration::from_secs(20)).unwrap();
            pipe.write_all(line.as_bytes()).unwrap();
            let mut reply = String::new();
            BufReader::new(pipe).read_line(&mut reply).unwrap();
            reply
        })
    }

    /// An echo server in a mio loop, as the real loop will use the
    /// listener: accept on the listener's token, each connection under its
    /// own, a reply per line. Returns the connections once `clients` lines
    /// were answered.
    fn serve(poll: &mut Poll, listener: &mut PipeListener, clients: usize) -> Vec<NamedPipe> {
        const LISTENER: Token = Token(0);
        let mut conns: HashMap<Token, (NamedPipe, Vec<u8>)> = HashMap::new();
        let mut next = 1;
        let mut answered = 0;
        let mut events = Events::with_capacity(64);
        let deadline = Instant::now() + Duration::from_secs(30);
        while answered < clients {
            assert!(
                Instant::now() < deadline,
                "answered {answered} of {clients}"
            );
            poll.poll(&mut events, Some(Duration::from_secs(5)))
                .unwrap();
            for event in events.iter() {
                if event.token() == LISTENER {
                    while let Some(mut pipe) = listener.accept(poll.registry()).unwrap() {
                        let token = Token(next);
                        next += 1;
                        poll.registry()
                            .reregister(&mut pipe, token, Interest::READABLE | Interest::WRITABLE)
                            .unwrap();
                        conns.insert(token, (pipe, Vec::new()));
                    }
                }
            }
            // Every connection is tried: a read that would block is cheap,
            // and data that came before the reregistration is not missed.
            for (pipe, got) in conns.values_mut() {
                let mut buf = [0u8; 256];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        // A client that left.
                        Err(_) => break,
                    }
                }
                if got.ends_with(b"\n") {
                    let reply = format!("echo {}", String::from_utf8_lossy(got));
                    got.clear();
                    // Small: mio queues it whole.
                    pipe.write_all(reply.as_bytes()).unwrap();
                    answered += 1;
                }
            }
        }
        // Dropping a pipe cancels its write in flight: the caller keeps
        // them until the clients have their replies.
        conns.into_values().map(|(pipe, _)| pipe).collect()
    }

    #[test]
    fn a_listener_serves_several_clients_of_ours_at_once() {
        let name = unique_name("many");
        let mut poll = Poll::new().unwrap();
        let mut listener = PipeListener::bind(poll.registry(), &name, Token(0)).unwrap();
        assert_eq!(listener.name(), name);
        // A client that connects and leaves at once must not stop the
        // listener from serving the next ones.
        drop(connect(&name, Duration::from_secs(20)).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|i| (i, client(&name, format!("hello {i}\n"))))
            .collect();
        let server = std::thread::spawn(move || {
            let conns = serve(&mut poll, &mut listener, 4);
            (poll, listener, conns)
        });
        for (i, t) in threads {
            assert_eq!(t.join().unwrap(), format!("echo hello {i}\n"));
        }
        let (_poll, listener, conns) = server.join().unwrap();
        assert_eq!(listener.refused(), 0);
        // The one that left at once may or may not have been accepted
        // before it went; the four that spoke were.
        assert!(conns.len() >= 4, "{} connections", conns.len());
    }

    #[test]
    fn connecting_to_a_name_nobody_serves_says_so() {
        let name = unique_name("nobody");
        let e = connect(&name, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains(&name), "{e}");
        assert!(e.to_string().contains("ptyd server"), "{e}");
    }

    #[test]
    fn a_namespace_is_claimed_once_until_its_server_lets_go() {
        let namespace = format!("transport-claim-{}", std::process::id());
        let poll = Poll::new().unwrap();
        let first = claim_namespace(poll.registry(), &namespace, Token(0)).unwrap();
        assert_eq!(first.listener.name(), namespace_pipe(&namespace).unwrap());
        let e = claim_namespace(poll.registry(), &namespace, Token(1))
            .err()
            .expect("a second claim succeeded");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains(&namespace), "{e}");
        // A client reaches the first server meanwhile.
        drop(connect(first.listener.name(), Duration::from_secs(20)).unwrap());
        drop(first);
        claim_namespace(poll.registry(), &namespace, Token(2)).unwrap();
    }

    #[test]
    fn a_second_server_on_the_same_name_is_refused() {
        let name = unique_name("twice");
        let poll = Poll::new().unwrap();
        let _first = PipeListener::bind(poll.registry(), &name, Token(0)).unwrap();
        match PipeListener::bind(poll.registry(), &name, Token(1)) {
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
            // Wine 8 ignores FILE_FLAG_FIRST_PIPE_INSTANCE (sys/windows.rs).
            Ok(_) => assert!(sys::running_under_wine(), "a second server bound the name"),
        }
    }
}
