//! A pane's fds, each with its token and whether it is in the loop's poll.
//!
//! A pane holds up to three fds:
//!
//! - the **master** of its PTY: output and input, polled readable and
//!   writable under the pane's token (one token for the pane's whole life,
//!   every run included);
//! - the **hung-up master**: the same master after output ended (EIO) while
//!   the process still runs. Never polled; kept open only because closing
//!   the last reference hangs up the terminal, and the kernel's SIGHUP would
//!   kill a process that closed its stdio and is about to exit normally,
//!   falsifying its exit status. Closed once the process is reaped;
//! - the **pidfd** of a process inherited from an earlier server generation
//!   (not our child, so no SIGCHLD for it), polled readable under a token of
//!   its own until it reports the exit.
//!
//! Each polled fd is in one of two states, [`Registration`]:
//!
//! ```text
//!   adopt / start ──> Unregistered ──register──> Registered
//!                         ^   │                       │
//!                         │   └──── close ─┐          │
//!                         └── deregister ──┼──────────┘
//!                                          v
//!                                        closed
//! ```
//!
//! Every way of letting go of an fd (`end_output`, `close_pidfd`, `close`,
//! a new `start`) takes the registry and deregisters first: epoll tracks the
//! open file description, not the fd number, so an fd closed while another
//! reference to its file lives (a live upgrade's other side holds one) would
//! stay in the poll, reporting a token nobody owns. Dropping a `PaneFds`
//! with an fd still registered is a bug that debug builds catch (`Drop`).

use crate::pty::PtyMaster;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Whether an fd is in the poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    Unregistered,
    Registered,
}

/// An fd the loop may poll, with its token and registration.
#[derive(Debug)]
struct Polled<F> {
    fd: F,
    token: Token,
    registration: Registration,
}

/// The raw fd of what a [`Polled`] holds.
trait RawOf {
    fn raw(&self) -> RawFd;
}

impl RawOf for PtyMaster {
    fn raw(&self) -> RawFd {
        self.raw_fd()
    }
}

impl RawOf for OwnedFd {
    fn raw(&self) -> RawFd {
        self.as_raw_fd()
    }
}

impl<F: RawOf> Polled<F> {
    fn new(fd: F, token: Token) -> Polled<F> {
        Polled {
            fd,
            token,
            registration: Registration::Unregistered,
        }
    }

    fn register(&mut self, registry: &Registry, interest: Interest) -> io::Result<()> {
        if self.registration == Registration::Unregistered {
            registry.register(&mut SourceFd(&self.fd.raw()), self.token, interest)?;
            self.registration = Registration::Registered;
        }
        Ok(())
    }

    fn deregister(&mut self, registry: &Registry) {
        if self.registration == Registration::Registered {
            // Fails only if the fd is not in this poll, which is the state
            // we want anyway.
            let _ = registry.deregister(&mut SourceFd(&self.fd.raw()));
            self.registration = Registration::Unregistered;
        }
    }

    /// Out of the poll, then the fd itself (closed when dropped).
    fn release(mut self, registry: &Registry) -> F {
        self.deregister(registry);
        self.fd
    }
}

/// A pane's master, hung-up master and pidfd (see the module doc).
#[derive(Debug)]
pub struct PaneFds {
    /// The master's token: the pane's, for its whole life.
    token: Token,
    master: Option<Polled<PtyMaster>>,
    /// Never polled.
    hung_up: Option<PtyMaster>,
    pidfd: Option<Polled<OwnedFd>>,
    /// The master is registered for writable edges too. Only needed while
    /// input waits for room (`watch_writable`): the PTY raises one each
    /// time the program reads its input, so every keystroke woke the loop
    /// again for nothing, often before its echo came. Each
    /// registration starts with them (one edge comes at once and flushes
    /// whatever input a new run or an upgrade left pending).
    writable: bool,
}

const MASTER_INTEREST: Interest = Interest::READABLE.add(Interest::WRITABLE);

impl PaneFds {
    /// No fds yet; a master polled under `token` comes with `start`.
    pub fn new(token: Token) -> PaneFds {
        PaneFds {
            token,
            master: None,
            hung_up: None,
            pidfd: None,
            writable: false,
        }
    }

    /// Registered for writable edges exactly while `want` (input waits
    /// for room in the PTY). Registering for them reports the master at
    /// once if it has room, so no edge is missed. A failed
    /// re-registration leaves the interest as it was.
    pub fn watch_writable(&mut self, registry: &Registry, want: bool) {
        let Some(master) = &self.master else {
            return;
        };
        if want == self.writable || master.registration != Registration::Registered {
            return;
        }
        let interest = if want {
            MASTER_INTEREST
        } else {
            Interest::READABLE
        };
        if registry
            .reregister(&mut SourceFd(&master.fd.raw()), master.token, interest)
            .is_ok()
        {
            self.writable = want;
        }
    }

    /// The pane's token (its master's).
    pub fn token(&self) -> Token {
        self.token
    }

    /// The master, until output ends.
    /// The kernel holds this size for the pane's terminal: its master's
    /// window size is `size`.
    pub fn kernel_size_is(&self, size: (u16, u16)) -> bool {
        self.master().and_then(|m| m.size()) == Some(size)
    }

    pub fn master(&self) -> Option<&PtyMaster> {
        self.master.as_ref().map(|m| &m.fd)
    }

    pub fn hung_up_master(&self) -> Option<&PtyMaster> {
        self.hung_up.as_ref()
    }

    pub fn pidfd(&self) -> Option<&OwnedFd> {
        self.pidfd.as_ref().map(|p| &p.fd)
    }

    /// The master's and the pidfd's registrations (`None`: no such fd).
    pub fn registrations(&self) -> (Option<Registration>, Option<Registration>) {
        (
            self.master.as_ref().map(|m| m.registration),
            self.pidfd.as_ref().map(|p| p.registration),
        )
    }

    /// How many fds are polled or pollable (master and pidfd).
    pub fn pollable(&self) -> usize {
        self.master.is_some() as usize + self.pidfd.is_some() as usize
    }

    /// A new run's master: whatever is left of the last run is released
    /// (out of the poll first), then the new master is registered. If that
    /// fails the new master is closed and the pane has none.
    pub fn start(&mut self, registry: &Registry, master: PtyMaster) -> io::Result<()> {
        if let Some(old) = self.master.take() {
            drop(old.release(registry));
        }
        self.hung_up = None;
        let mut master = Polled::new(master, self.token);
        master.register(registry, MASTER_INTEREST)?;
        self.writable = true;
        self.master = Some(master);
        Ok(())
    }

    /// Output ended (EIO: every slave fd is closed): the master leaves the
    /// poll. While the process runs it stays open as the hung-up master
    /// (see the module doc); otherwise it is closed.
    pub fn end_output(&mut self, registry: &Registry, process_running: bool) {
        if let Some(master) = self.master.take() {
            let master = master.release(registry);
            if process_running {
                self.hung_up = Some(master);
            }
        }
    }

    /// The process was reaped: the hung-up master (never polled) may close.
    pub fn process_ended(&mut self) {
        self.hung_up = None;
    }

    /// Takes the fds an earlier server generation handed over, none of them
    /// registered yet (`register` does). Replaces nothing: a pane adopts
    /// once, right after it is built.
    pub fn adopt(
        &mut self,
        master: Option<PtyMaster>,
        hung_up: Option<PtyMaster>,
        pidfd: Option<(OwnedFd, Token)>,
    ) {
        debug_assert!(self.master.is_none() && self.hung_up.is_none() && self.pidfd.is_none());
        self.master = master.map(|m| Polled::new(m, self.token));
        self.hung_up = hung_up;
        self.pidfd = pidfd.map(|(fd, token)| Polled::new(fd, token));
    }

    /// Puts the master and the pidfd in the poll: both or, on an error,
    /// neither.
    pub fn register(&mut self, registry: &Registry) -> io::Result<()> {
        if let Some(master) = &mut self.master {
            master.register(registry, MASTER_INTEREST)?;
            self.writable = true;
        }
        if let Some(pidfd) = &mut self.pidfd
            && let Err(e) = pidfd.register(registry, Interest::READABLE)
        {
            self.deregister(registry);
            return Err(e);
        }
        Ok(())
    }

    /// Takes the master and the pidfd out of the poll, keeping them open.
    pub fn deregister(&mut self, registry: &Registry) {
        if let Some(master) = &mut self.master {
            master.deregister(registry);
        }
        if let Some(pidfd) = &mut self.pidfd {
            pidfd.deregister(registry);
        }
    }

    /// The pidfd reported its exit: out of the poll and closed. Returns its
    /// token, which then belongs to no one.
    pub fn close_pidfd(&mut self, registry: &Registry) -> Option<Token> {
        let pidfd = self.pidfd.take()?;
        let token = pidfd.token;
        drop(pidfd.release(registry));
        Some(token)
    }

    /// Releases every fd (out of the poll first). Returns the pidfd's
    /// token if there was one; the pane's own token stays the pane's.
    pub fn close(&mut self, registry: &Registry) -> Option<Token> {
        if let Some(master) = self.master.take() {
            drop(master.release(registry));
        }
        self.hung_up = None;
        self.close_pidfd(registry)
    }
}

impl Drop for PaneFds {
    fn drop(&mut self) {
        // Not while unwinding: a second panic would abort the process
        // before the loop's panic handler saves and tells the clients.
        debug_assert!(
            std::thread::panicking()
                || !matches!(
                    self.registrations(),
                    (Some(Registration::Registered), _) | (_, Some(Registration::Registered))
                ),
            "a pane's fds were dropped while still in the poll; release them with PaneFds::close"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pidfd_of_self() -> OwnedFd {
        crate::sys::pidfd_open(std::process::id() as i32).expect("pidfd_open")
    }

    #[test]
    fn register_deregister_close_track_the_state() {
        let poll = mio::Poll::new().unwrap();
        let registry = poll.registry();
        let mut fds = PaneFds::new(Token(7));
        fds.adopt(None, None, Some((pidfd_of_self(), Token(8))));
        assert_eq!(
            fds.registrations(),
            (None, Some(Registration::Unregistered))
        );
        fds.register(registry).unwrap();
        assert_eq!(fds.registrations(), (None, Some(Registration::Registered)));
        // Registering twice is a no-op, not EEXIST.
        fds.register(registry).unwrap();
        fds.deregister(registry);
        assert_eq!(
            fds.registrations(),
            (None, Some(Registration::Unregistered))
        );
        fds.register(registry).unwrap();
        assert_eq!(fds.close(registry), Some(Token(8)));
        assert_eq!(fds.registrations(), (None, None));
        assert_eq!(fds.close(registry), None);
    }

    /// The fds this poll's epoll instance watches, from its fdinfo.
    fn polled_fds(poll: &mio::Poll) -> Vec<RawFd> {
        let info =
            std::fs::read_to_string(format!("/proc/self/fdinfo/{}", poll.as_raw_fd())).unwrap();
        info.lines()
            .filter_map(|l| l.strip_prefix("tfd:"))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }

    #[test]
    fn closing_takes_the_fd_out_of_the_poll_even_if_its_file_lives_on() {
        let poll = mio::Poll::new().unwrap();
        let registry = poll.registry();
        let pidfd = pidfd_of_self();
        let raw = pidfd.as_raw_fd();
        // Another reference to the same open file, as a live upgrade's
        // other side holds: closing our fd alone would leave the file in
        // the poll.
        let other = pidfd.try_clone().unwrap();
        let mut fds = PaneFds::new(Token(7));
        fds.adopt(None, None, Some((pidfd, Token(8))));
        fds.register(registry).unwrap();
        assert_eq!(polled_fds(&poll), vec![raw]);
        fds.close(registry);
        assert_eq!(polled_fds(&poll), Vec::<RawFd>::new());
        drop(other);
    }

    #[test]
    #[should_panic(expected = "still in the poll")]
    #[cfg(debug_assertions)]
    fn dropping_registered_fds_is_caught() {
        let poll = mio::Poll::new().unwrap();
        let mut fds = PaneFds::new(Token(7));
        fds.adopt(None, None, Some((pidfd_of_self(), Token(8))));
        fds.register(poll.registry()).unwrap();
        drop(fds);
    }
}
