//! Direct output: an attached client passes its terminal to the
//! server, which writes the pane's output straight to it. Through the
//! protocol: every byte arrives once and in order across the switches to
//! and from the terminal (a pause, a live upgrade, a detach), and hostile
//! fds are refused and closed. Through the real `ptyd attach` in tmux: the
//! output reaches the screen that way, the shell's stdout is never left
//! non-blocking, and the scroll mode and detach hand the terminal back.
//! A terminal that stops reading still makes the server skip and redraw.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use serde_json::{Value, json};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use util::{Ptyd, Tmux, attach_in_pty, frame, shell_quote};

/// Frame kinds of the direct-output handshake (docs/protocol.md).
const DIRECT_ON: u8 = 3;
const DIRECT_OFF: u8 = 4;
const TTY: u8 = 5;
const DIRECT_ACK: u8 = 6;
const DIRECT_PAUSE: u8 = 7;

/// Sends one client frame with `fds` attached (`SCM_RIGHTS`).
fn send_with_fds(sock: &UnixStream, kind: u8, fds: &[RawFd]) {
    let bytes = frame(kind, &[]);
    let iov = [std::io::IoSlice::new(&bytes)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    let sent = sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None)
        .expect("sendmsg with fds");
    assert_eq!(sent, bytes.len());
}

/// A fresh PTY pair in raw mode (no CR added to LF): the master to read
/// what the server writes, the slave to offer it.
fn raw_pty() -> (File, OwnedFd) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut t = nix::sys::termios::tcgetattr(&pty.slave).expect("tcgetattr");
    nix::sys::termios::cfmakeraw(&mut t);
    nix::sys::termios::tcsetattr(&pty.slave, nix::sys::termios::SetArg::TCSANOW, &t)
        .expect("tcsetattr");
    (File::from(pty.master), pty.slave)
}

/// Whether `fd` is readable within `timeout`.
fn readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the length given.
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    n > 0
}

/// The client side of the test: the socket's frames decoded as they come,
/// and the terminal (PTY master) the server writes to while direct. Every
/// output byte, wherever it came from, lands in `stream` in the order the
/// protocol promises.
struct Client {
    sock: UnixStream,
    buf: Vec<u8>,
    /// The master of the terminal offered last, while the server may
    /// still write to it.
    master: Option<File>,
    /// Everything received after the first redraw, socket and terminal.
    stream: Vec<u8>,
    /// Frames seen, by kind, in order.
    kinds: Vec<u8>,
    exit: Option<Value>,
    direct_off: Vec<Value>,
    /// Between DIRECT_ON and DIRECT_OFF: no OUTPUT frame may come.
    direct_on: bool,
}

impl Client {
    /// Reads whatever is there within `timeout` from the socket and the
    /// terminal; handles the handshake frames. Returns after one read.
    fn pump(&mut self, timeout: Duration) {
        let mut fds = vec![libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(m) = &self.master {
            fds.push(libc::pollfd {
                fd: m.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: valid pollfds, for the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as _, timeout.as_millis() as i32) };
        if n <= 0 {
            return;
        }
        if fds.len() > 1 && fds[1].revents != 0 {
            self.read_master();
        }
        if fds[0].revents != 0 {
            let mut chunk = [0u8; 64 * 1024];
            let n = (&self.sock).read(&mut chunk).expect("reading the socket");
            assert!(n > 0 || self.exit.is_some(), "the server closed the stream");
            self.buf.extend_from_slice(&chunk[..n]);
            self.decode();
        }
    }

    /// Reads what the terminal holds (one read).
    fn read_master(&mut self) {
        let Some(m) = &mut self.master else { return };
        let mut chunk = [0u8; 64 * 1024];
        match m.read(&mut chunk) {
            Ok(n) => self.stream.extend_from_slice(&chunk[..n]),
            // EIO: the server closed the only copy of the slave.
            Err(_) => self.master = None,
        }
    }

    fn decode(&mut self) {
        while self.buf.len() >= 5 {
            let len =
                u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
            if self.buf.len() < 5 + len {
                return;
            }
            let kind = self.buf[0];
            let payload: Vec<u8> = self.buf[5..5 + len].to_vec();
            self.buf.drain(..5 + len);
            self.kinds.push(kind);
            match kind {
                util::OUTPUT => {
                    assert!(
                        !self.direct_on,
                        "an OUTPUT frame while the server may write to the terminal"
                    );
                    self.stream.extend_from_slice(&payload);
                }
                DIRECT_ON => {
                    // Every frame before it is in `stream`: the server may
                    // write from now on.
                    (&self.sock).write_all(&frame(DIRECT_ACK, &[])).unwrap();
                    self.direct_on = true;
                }
                DIRECT_OFF => {
                    self.direct_on = false;
                    // Everything the server wrote to the terminal comes
                    // before what follows on the socket: read it to its
                    // end (the server closed the slave, the only copy).
                    while self.master.is_some() {
                        self.read_master();
                    }
                    self.direct_off
                        .push(serde_json::from_slice(&payload).unwrap());
                }
                util::EXIT => {
                    self.exit = Some(serde_json::from_slice(&payload).unwrap());
                }
                other => panic!("frame kind {other} from the server"),
            }
        }
    }

    /// Offers a fresh terminal; keeps only its master (the server holds
    /// the only copy of the slave, so the master reads EIO once the server
    /// let go of it).
    fn offer(&mut self) {
        assert!(self.master.is_none());
        let (master, slave) = raw_pty();
        send_with_fds(&self.sock, TTY, &[slave.as_raw_fd()]);
        drop(slave);
        self.master = Some(master);
    }

    /// Pumps until `done` holds (bounded).
    #[track_caller]
    fn until(&mut self, what: &str, mut done: impl FnMut(&Client) -> bool) {
        let deadline = Instant::now() + util::TIMEOUT;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "waited {:?} for {what}; frames {:?}",
                util::TIMEOUT,
                self.kinds
            );
            self.pump(Duration::from_millis(100));
        }
    }

    fn lines(&self) -> usize {
        self.stream.iter().filter(|b| **b == b'\n').count()
    }
}

/// The numbers the counter printed, checked consecutive: the stream's
/// first and last lines may be partial (the attach came mid-line).
#[track_caller]
fn assert_consecutive(stream: &[u8]) -> usize {
    let text = String::from_utf8_lossy(stream);
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert!(lines.len() > 3, "too little output: {text:?}");
    let numbers: Vec<u64> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| {
            l.parse()
                .unwrap_or_else(|_| panic!("not a counter line: {l:?}"))
        })
        .collect();
    for w in numbers.windows(2) {
        assert_eq!(w[1], w[0] + 1, "a line lost or out of order");
    }
    numbers.len()
}

#[test]
fn every_byte_in_order_through_pause_upgrade_and_detach() {
    let ptyd = Ptyd::start();
    let info = ptyd.create(json!({
        "argv": ["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i; done"],
        "cols": 80, "rows": 24,
    }));
    let id = info["id"].as_str().unwrap().to_string();
    let mut c = ptyd.connect();
    c.wait_text(&id, "100");
    let conn = ptyd.connect();
    let (_, attached) = conn.attach(json!({
        "target": id, "cols": 80, "rows": 24, "when_behind": "pause",
    }));
    let sock = attached.stream().try_clone().unwrap();
    drop(attached);
    let mut client = Client {
        sock,
        buf: Vec::new(),
        master: None,
        stream: Vec::new(),
        kinds: Vec::new(),
        exit: None,
        direct_off: Vec::new(),
        direct_on: false,
    };
    // The first frame is the redraw (not counter lines): left out.
    client.until("the redraw", |c| !c.stream.is_empty());
    client.stream.clear();
    client.until("socket output", |c| c.lines() > 500);

    // Direct, then paused by the client.
    client.offer();
    client.until("direct output", |c| c.direct_on && c.lines() > 3000);
    let listed = c.ok("client.list", json!({}));
    assert_eq!(listed["clients"][0]["direct"], true, "{listed}");
    (&client.sock).write_all(&frame(DIRECT_PAUSE, &[])).unwrap();
    client.until("DIRECT_OFF after the pause", |c| c.direct_off.len() == 1);
    assert_eq!(client.direct_off[0]["reason"], "paused");
    let listed = c.ok("client.list", json!({}));
    assert_eq!(listed["clients"][0]["direct"], false, "{listed}");
    let at = client.lines();
    client.until("socket output again", |c| c.lines() > at + 2000);

    // Direct again, across a live upgrade: the old server lets go before
    // it hands the connection over, and the new one takes a new offer.
    client.offer();
    let at = client.lines();
    client.until("direct output again", |c| {
        c.direct_on && c.lines() > at + 2000
    });
    let upgrade = {
        let mut u = ptyd.connect();
        std::thread::spawn(move || u.call("server.upgrade", json!({})))
    };
    client.until("DIRECT_OFF for the upgrade", |c| c.direct_off.len() == 2);
    assert_eq!(client.direct_off[1]["reason"], "upgrade");
    let report = upgrade.join().unwrap();
    assert!(report.is_ok(), "upgrade failed: {report:?}");
    client.offer();
    let at = client.lines();
    client.until("direct output from the new server", |c| {
        c.lines() > at + 2000 && c.direct_on
    });

    // Detach while direct: DIRECT_OFF, then the rest, then EXIT.
    (&client.sock).write_all(&frame(util::DETACH, &[])).unwrap();
    client.until("the EXIT frame", |c| c.exit.is_some());
    assert_eq!(client.direct_off[2]["reason"], "ending");
    let exit = client.exit.clone().unwrap();
    assert_eq!(exit["reason"], "detached", "{exit}");
    assert!(
        client.master.is_none(),
        "the terminal still held after EXIT"
    );
    let n = assert_consecutive(&client.stream);
    assert!(n > 9000, "{n} lines");
}

/// Which of `targets` (`/proc/PID/fd` link texts: a path, `pipe:[inode]`)
/// process `pid` holds an fd to.
fn held_of(pid: i32, targets: &[String]) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|link| link.to_string_lossy().into_owned())
        .filter(|link| targets.contains(link))
        .collect()
}

/// What `/proc/PID/fd` shows for an fd of ours.
fn fd_target(fd: RawFd) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn hostile_fds_are_refused_and_closed() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let serving = ptyd.serving_pid();
    let mut c = ptyd.connect();
    let (_, mut a) = ptyd.connect().attach(json!({ "target": id }));
    let file = File::open("/etc/hostname")
        .or_else(|_| File::open("/proc/self/status"))
        .unwrap();
    let (pipe_r, pipe_w) = nix::unistd::pipe().unwrap();
    // What the server would hold if it kept one of them: the file's path
    // and the pipe's inode, as its /proc fd links would name them.
    let sent = vec![fd_target(file.as_raw_fd()), fd_target(pipe_r.as_raw_fd())];
    assert_eq!(held_of(serving, &sent), Vec::<String>::new());
    // The match is live: this process holds the file and both pipe ends.
    assert_eq!(held_of(std::process::id() as i32, &sent).len(), 3);
    let sock = a.stream().try_clone().unwrap();
    // A regular file, a pipe: not terminals.
    send_with_fds(&sock, TTY, &[file.as_raw_fd()]);
    send_with_fds(&sock, TTY, &[pipe_w.as_raw_fd()]);
    // More fds than a read has room for: the kernel cuts them off.
    let many: Vec<RawFd> = (0..12).map(|_| pipe_r.as_raw_fd()).collect();
    send_with_fds(&sock, TTY, &many);
    // A few in one message: one kept for the frame, the rest closed.
    send_with_fds(
        &sock,
        TTY,
        &[pipe_r.as_raw_fd(), file.as_raw_fd(), pipe_w.as_raw_fd()],
    );
    // An offer without an fd; an fd with no offer (on INPUT), claimed by
    // the next offer.
    send_with_fds(&sock, TTY, &[]);
    let input = frame(util::INPUT, b"");
    let iov = [std::io::IoSlice::new(&input)];
    let fds = [file.as_raw_fd()];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .unwrap();
    send_with_fds(&sock, TTY, &[]);
    // Every offer refused, each with DIRECT_OFF; the client still served.
    a.send(util::INPUT, b"echo still-$((40+2))\n");
    let mut refused = 0;
    while !String::from_utf8_lossy(&a.output).contains("still-42") {
        match a.next_frame() {
            Some((util::OUTPUT, p)) => a.output.extend_from_slice(&p),
            Some((DIRECT_OFF, p)) => {
                let v: Value = serde_json::from_slice(&p).unwrap();
                assert_eq!(v["reason"], "refused");
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(refused, 6);
    // Every fd sent was closed: none of the file or the pipe is left.
    util::eventually("the server to hold none of the fds sent", || {
        held_of(serving, &sent).is_empty()
    });
    let listed = c.ok("client.list", json!({}));
    assert_eq!(listed["clients"][0]["direct"], false, "{listed}");
}

/// The handshake's answers are queued past the output bound (they must
/// not be refused), so a client that offers again and again without ever
/// reading its socket must still be bounded: it is dropped as too slow
/// once its queue passes the bound, and the server serves on.
#[test]
fn a_client_that_offers_without_reading_is_dropped_not_grown() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let (_, a) = ptyd.connect().attach(json!({ "target": id }));
    let sock = a.stream().try_clone().unwrap();
    // Each offer without an fd is answered by a DIRECT_OFF of about 25
    // bytes: 400,000 of them are more than twice the 4 MiB bound. Written
    // from a thread: the server stops reading this socket once it drops
    // the client, and the writes then fail.
    let writer = std::thread::spawn(move || {
        let offers = frame(TTY, b"").repeat(1000);
        let mut sock = sock;
        for _ in 0..400 {
            if sock.write_all(&offers).is_err() {
                return;
            }
        }
    });
    util::eventually("the client that never reads to be dropped", || {
        let listed = c.ok("client.list", json!({}));
        let n = listed["clients"].as_array().map_or(0, Vec::len);
        if n == 0 {
            Ok(())
        } else {
            Err(listed.to_string())
        }
    });
    drop(a);
    writer.join().unwrap();
    // Served on: a new attachment runs a command.
    let (_, mut b) = ptyd.connect().attach(json!({ "target": id }));
    b.send(util::INPUT, b"echo alive-$((40+2))\n");
    b.read_until("alive-42");
}

/// The `F_GETFL` flags of a process's fd, from `/proc`.
fn fd_flags(pid: i64, fd: i32) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .expect("a flags line");
    u32::from_str_radix(flags.trim(), 8).unwrap()
}

/// The attached client's entry in `client.list` once its direct output
/// says `direct`.
#[track_caller]
fn wait_direct(c: &mut util::Conn, direct: bool) -> Value {
    util::eventually(format!("the client's direct output to be {direct}"), || {
        let listed = c.ok("client.list", json!({}));
        let first = listed["clients"][0].clone();
        (first["direct"] == direct).then_some(first)
    })
}

#[test]
fn ptyd_attach_hands_its_terminal_to_the_server_and_back() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    let outer_pid: i64 = tmux
        .run(&["display-message", "-p", "-t", "main", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    // A single pane's attach: its client runs its own scroll mode (the tab
    // view draws scroll mode in the server).
    tmux.type_line(&format!(
        "{} attach --pane-only {id}",
        shell_quote(util::PTYD)
    ));
    let client = wait_direct(&mut c, true);
    let client_pid = client["pid"].as_i64().unwrap();
    c.type_line(&id, "echo direct-$((6*7))");
    tmux.wait_screen("the pane's output, written by the server", |s| {
        s.contains("direct-42")
    });
    // The client's stdout and the outer shell's are the terminal's own open
    // file: the server's non-blocking mode is on a copy of its own.
    assert_eq!(fd_flags(client_pid, 1) & libc::O_NONBLOCK as u32, 0);
    assert_eq!(fd_flags(outer_pid, 1) & libc::O_NONBLOCK as u32, 0);

    // The scroll mode: the server lets go before the client draws, and
    // takes the terminal again after.
    tmux.keys(&["C-\\", "["]);
    wait_direct(&mut c, false);
    tmux.wait_screen("the scroll mode", |s| s.contains("direct-42"));
    tmux.keys(&["q"]);
    wait_direct(&mut c, true);
    c.type_line(&id, "echo after-$((6*7))");
    tmux.wait_screen("output after the scroll mode", |s| s.contains("after-42"));

    // A live upgrade: the old server lets go of the terminal, the client
    // offers it to the new one.
    let report = c.call("server.upgrade", json!({}));
    assert!(report.is_ok(), "upgrade failed: {report:?}");
    wait_direct(&mut c, true);
    c.type_line(&id, "echo upgraded-$((6*7))");
    tmux.wait_screen("output after the upgrade", |s| s.contains("upgraded-42"));

    // Detach: the outer screen comes back, nothing of the pane's after it.
    tmux.keys(&["C-\\", "d"]);
    tmux.wait_screen("the outer prompt again", |s| {
        s.contains("[ptyd: detached from ")
    });
    util::eventually("the client gone", || {
        c.ok("client.list", json!({}))["clients"]
            .as_array()
            .is_some_and(|a| a.is_empty())
    });
    c.type_line(&id, "echo late-$((6*7))");
    c.wait_text(&id, "late-42");
    tmux.type_line("echo outer-$((6*7))");
    let screen = tmux.wait_screen("the outer shell", |s| s.contains("outer-42"));
    assert!(
        !screen.contains("late-42"),
        "pane output after detach:\n{screen}"
    );
    assert_eq!(fd_flags(outer_pid, 1) & libc::O_NONBLOCK as u32, 0);
    assert_eq!(fd_flags(outer_pid, 0) & libc::O_NONBLOCK as u32, 0);
}

#[test]
fn a_terminal_that_stops_reading_is_skipped_and_redrawn() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    // The user's terminal: a PTY whose master this test does not read.
    let (mut master, _client) = attach_in_pty(&ptyd, &[&id], &[]);
    wait_direct(&mut c, true);
    // Far more than the terminal holds: the pane is not held up by it.
    c.type_line(&id, "seq 1 200000; echo seq-$((6*7))");
    c.wait_text(&id, "seq-42");
    // Read now: the terminal catches up and is shown the screen, the
    // last line included.
    let mut seen = Vec::new();
    let deadline = Instant::now() + util::TIMEOUT;
    let mut term = vt100::Parser::new(
        std::num::NonZero::new(24).unwrap(),
        std::num::NonZero::new(80).unwrap(),
        0,
    );
    while !term.screen().contents().contains("seq-42\n") {
        assert!(Instant::now() < deadline, "no redraw with seq-42");
        if readable(master.as_raw_fd(), Duration::from_millis(100)) {
            let mut chunk = [0u8; 64 * 1024];
            let n = master.read(&mut chunk).unwrap();
            seen.extend_from_slice(&chunk[..n]);
            term.process(&chunk[..n]);
        }
    }
    // Skipped, not all 200,000 lines (some 1.3 MB) copied to it.
    assert!(
        seen.len() < 1_000_000,
        "{} bytes reached the terminal",
        seen.len()
    );
    wait_direct(&mut c, true);
}

#[test]
fn a_lossless_client_whose_terminal_stops_reading_holds_its_pane_then_is_dropped() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let mut ev = ptyd.connect();
    ev.ok("events.subscribe", json!({}));
    let (_master, client) = attach_in_pty(&ptyd, &[&id, "--lossless"], &[]);
    let listed = wait_direct(&mut c, true);
    assert_eq!(listed["when_behind"], "pause", "{listed}");
    // More than the terminal and the server's queue hold: the pane is
    // paused on this client, which then takes nothing for the stall limit.
    c.type_line(&id, "while :; do seq 1 100000; done");
    // Within the test's timeout: the stall limit is 10 s.
    let detached = ev.wait_event("client.detached", &id);
    assert_eq!(detached["reason"], "too_slow", "{detached}");
    // The client's restoring write finds a terminal nobody reads: told to
    // end, it gives that write up (bounded) and ends; it used to wait in
    // it for ever, SIGTERM or not.
    let pid = client.as_child().id() as i32;
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_gone(pid, "the client told to end");
}

/// Waits (bounded) until process `pid` has ended; what it waits in
/// otherwise (its syscall and kernel stack) goes into the failure.
fn wait_gone(pid: i32, what: &str) {
    util::eventually(what, || {
        if util::process_gone(pid) {
            Ok(())
        } else {
            let proc = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}"));
            Err(format!(
                "in syscall {:?}, {:?}",
                proc("syscall"),
                proc("stack")
            ))
        }
    });
}

/// The same through the socket path: the client itself blocked writing
/// pane output to a terminal nobody reads still ends on SIGTERM.
#[test]
fn a_client_blocked_on_its_terminal_ends_when_told_to() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let (master, client) = attach_in_pty(&ptyd, &[&id, "--no-direct", "--lossless"], &[]);
    c.type_line(&id, "while :; do seq 1 100000; done");
    let canonical = |master: &File| {
        let t = nix::sys::termios::tcgetattr(master).expect("tcgetattr");
        t.local_flags
            .contains(nix::sys::termios::LocalFlags::ICANON)
    };
    // The terminal's buffer full: the client waits in a write (in raw
    // mode, as attached).
    util::eventually("the terminal to fill up", || {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer given.
        unsafe { libc::ioctl(master.as_raw_fd(), libc::FIONREAD, &mut n) };
        (n > 1024).then_some(())
    });
    let canonical_before = canonical(&master);
    let pid = client.as_child().id() as i32;
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_gone(pid, "the blocked client told to end");
    assert!(
        !canonical_before,
        "the attached client's terminal was not raw"
    );
    assert!(
        canonical(&master),
        "the client ended without giving the terminal its mode back"
    );
}

#[test]
fn after_a_server_crash_the_client_offers_its_terminal_again() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    tmux.type_line(&format!("{} attach {id}", shell_quote(util::PTYD)));
    wait_direct(&mut c, true);
    // The keeper's replacement serves the pane; the client reconnects and
    // hands it its terminal (the old server's copy died with it).
    let mut c = ptyd.crash_serving();
    wait_direct(&mut c, true);
    c.type_line(&id, "echo back-$((6*7))");
    tmux.wait_screen("output from the new server", |s| s.contains("back-42"));
}
