//! Keys read by the server: once the server writes to an
//! attached client's terminal (direct output), the client hands it its
//! keys too, and the server reads them from the terminal and writes them
//! to the pane itself. Through the real `ptyd attach` in a PTY (or in
//! tmux): every typed byte arrives once and in order across the hand-over,
//! a 100 KB paste goes through the server (the client reads none of it),
//! across a live upgrade too; the prefix key, the scroll mode, the prefix
//! sent through and detach stay the client's; a pane that reads nothing
//! holds the keys back without holding the server up; after a crash the
//! keys go to the replacement; the opt-outs and read-only clients never
//! hand them over.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use util::{Ptyd, Tmux, shell_quote};

/// The user's terminal for a real `ptyd attach`: a PTY whose master the
/// test types into. What the terminal shows is read and dropped by a
/// thread, so the server's and client's writes never block on it.
struct Terminal {
    master: File,
    client: util::KillOnDrop,
}

impl Terminal {
    fn attach(ptyd: &Ptyd, args: &[&str], env: &[(&str, &str)]) -> Terminal {
        let (master, client) = util::attach_in_pty(ptyd, args, env);
        let mut drain = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64 * 1024];
            while matches!(drain.read(&mut buf), Ok(n) if n > 0) {}
        });
        Terminal { master, client }
    }

    /// Types `bytes` on a thread of its own (a write blocks while the
    /// terminal's queue is full), counting what went in.
    fn type_async(&self, bytes: Vec<u8>) -> (std::thread::JoinHandle<()>, Arc<AtomicUsize>) {
        let mut master = self.master.try_clone().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&count);
        let thread = std::thread::spawn(move || {
            for chunk in bytes.chunks(4096) {
                master.write_all(chunk).expect("typing into the terminal");
                counted.fetch_add(chunk.len(), Ordering::Relaxed);
            }
        });
        (thread, count)
    }

    /// Bytes the client process has read so far (`/proc/PID/io`
    /// `rchar`: its terminal and its socket alike).
    fn client_read_bytes(&self) -> u64 {
        let pid = self.client.as_child().id();
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("an rchar line")
    }
}

/// A pane that writes everything typed into it, unchanged, to `file`
/// (its terminal raw, no echo), once `gate` (a FIFO, if any) is opened
/// for writing: until then it reads none of its input.
fn recorder(ptyd: &Ptyd, file: &Path, gate: Option<&Path>) -> String {
    let wait = gate.map_or(String::new(), |g| {
        format!("read _ < {}; ", shell_quote(g.to_str().unwrap()))
    });
    let script = format!(
        "stty raw -echo; echo ready; {wait}exec cat > {}",
        shell_quote(file.to_str().unwrap())
    );
    let id = ptyd.create_argv(&["/bin/sh", "-c", &script]);
    ptyd.connect().wait_text(&id, "ready");
    id
}

/// Waits until `file` holds as many bytes as `want`, then compares.
#[track_caller]
fn assert_recorded(file: &Path, want: &[u8]) {
    let got = util::eventually(format!("{} bytes recorded", want.len()), || {
        let got = std::fs::read(file).unwrap_or_default();
        if got.len() >= want.len() {
            Ok(got)
        } else {
            Err(format!("{} so far", got.len()))
        }
    });
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "typed bytes differ (lengths {} and {}) first at {at:?}: got {:?}",
            got.len(),
            want.len(),
            at.map(|i| util::abbreviate(&got[i..(i + 64).min(got.len())]))
        );
    }
}

/// The first attached client's `client.list` entry.
fn first_client(c: &mut util::Conn) -> Value {
    c.ok("client.list", json!({}))["clients"][0].clone()
}

/// Waits until the attached client's keys are (or are not) read by the
/// server; returns its entry.
#[track_caller]
fn wait_keys(c: &mut util::Conn, keys: bool) -> Value {
    util::eventually(
        format!("the server reading the client's keys: {keys}"),
        || {
            let first = first_client(c);
            (first["keys"] == keys).then_some(first)
        },
    )
}

/// Numbered lines `tag000000\n`... (no prefix key, nothing a raw
/// terminal changes).
fn lines(tag: &str, range: std::ops::Range<usize>) -> Vec<u8> {
    range
        .flat_map(|i| format!("{tag}{i:06}\n").into_bytes())
        .collect()
}

#[test]
fn typed_bytes_arrive_once_and_in_order_across_the_hand_over_and_a_paste() {
    let ptyd = Ptyd::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typed");
    let id = recorder(&ptyd, &file, None);
    let mut c = ptyd.connect();
    let term = Terminal::attach(&ptyd, &[&id], &[]);
    // Typed from the client's start on: through its own reading, the
    // offer, the server's taking the keys.
    let early = lines("early", 0..3000);
    let (typist, _) = term.type_async(early.clone());
    let listed = wait_keys(&mut c, true);
    assert_eq!(listed["direct"], true, "{listed}");
    typist.join().unwrap();
    assert_recorded(&file, &early);

    // A paste of 100 KB: the server reads it; the client reads none of it.
    let read_before = term.client_read_bytes();
    let paste = lines("paste", 0..10_000);
    assert!(paste.len() >= 100_000);
    let (typist, _) = term.type_async(paste.clone());
    typist.join().unwrap();
    let want = [early, paste].concat();
    assert_recorded(&file, &want);
    let client_read = term.client_read_bytes() - read_before;
    assert!(
        client_read < 10_000,
        "the client read {client_read} bytes during a 100 KB paste"
    );
    assert_eq!(first_client(&mut c)["keys"], true);
}

#[test]
fn the_prefix_key_scroll_mode_prefix_sent_through_and_detach_stay_with_the_client() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    // A single pane's attach: its client runs the prefix and its own
    // scroll mode (the tab view runs both in the server).
    tmux.type_line(&format!(
        "{} attach --pane-only {id}",
        shell_quote(util::PTYD)
    ));
    wait_keys(&mut c, true);
    tmux.type_line("echo typed-$((6*7))");
    tmux.wait_screen("the line typed through the server", |s| {
        s.contains("typed-42")
    });

    // The scroll mode: the client takes its keys back, draws, and hands
    // them over again after.
    tmux.keys(&["C-\\", "["]);
    // The keys come back first, then (the client's pause) the output.
    util::eventually("the client's keys and output back with it", || {
        let first = first_client(&mut c);
        (first["keys"] == false && first["direct"] == false).then_some(())
    });
    tmux.wait_screen("the scroll mode", |s| s.contains("typed-42"));
    tmux.keys(&["q"]);
    wait_keys(&mut c, true);
    tmux.type_line("echo after-$((6*7))");
    tmux.wait_screen("a line typed after the scroll mode", |s| {
        s.contains("after-42")
    });

    // The prefix twice sends it through, once: `cat -v` shows it (no
    // signal from it: -isig).
    // Typed only once -isig is in force (the marker is printed after it),
    // or the terminal would take the key for SIGQUIT.
    tmux.type_line("stty -isig; echo cat-$((6*7)); cat -v");
    tmux.wait_screen("signals off", |s| s.contains("cat-42"));
    tmux.keys(&["C-\\", "C-\\"]);
    tmux.type_line("x");
    tmux.wait_screen("the prefix key sent through", |s| s.contains("^\\x"));
    // And the keys went back to the server after it.
    wait_keys(&mut c, true);
    tmux.keys(&["C-d"]);
    tmux.type_line("stty sane; echo sane-$((6*7))");
    tmux.wait_screen("the shell again", |s| s.contains("sane-42"));

    // Detach: the outer shell reads its terminal again, the server not.
    tmux.keys(&["C-\\", "d"]);
    tmux.wait_screen("the outer prompt again", |s| {
        s.contains("[ptyd: detached from ")
    });
    util::eventually("the client gone", || {
        c.ok("client.list", json!({}))["clients"]
            .as_array()
            .is_some_and(|a| a.is_empty())
    });
    tmux.type_line("echo outer-$((6*7))");
    tmux.wait_screen("the outer shell reading its keys", |s| {
        s.contains("outer-42")
    });
}

#[test]
fn keys_typed_during_a_live_upgrade_arrive_once_and_in_order() {
    let ptyd = Ptyd::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typed");
    let id = recorder(&ptyd, &file, None);
    let mut c = ptyd.connect();
    let term = Terminal::attach(&ptyd, &[&id], &[]);
    wait_keys(&mut c, true);
    // Typing until told to stop, a line per write: before, during and
    // after the upgrade.
    let stop = Arc::new(AtomicBool::new(false));
    let typist = {
        let stop = Arc::clone(&stop);
        let mut master = term.master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 200_000 {
                master.write_all(&lines("u", n..n + 1)).unwrap();
                n += 1;
            }
            n
        })
    };
    let report = c.call("server.upgrade", json!({}));
    assert!(report.is_ok(), "upgrade failed: {report:?}");
    // The new server reads the keys again.
    wait_keys(&mut c, true);
    stop.store(true, Ordering::Relaxed);
    let n = typist.join().unwrap();
    assert_recorded(&file, &lines("u", 0..n));
}

#[test]
fn after_a_crash_the_keys_go_to_the_replacement_server() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    tmux.type_line(&format!("{} attach {id}", shell_quote(util::PTYD)));
    wait_keys(&mut c, true);
    let mut c = ptyd.crash_serving();
    wait_keys(&mut c, true);
    tmux.type_line("echo back-$((6*7))");
    tmux.wait_screen("a line typed to the new server", |s| s.contains("back-42"));
}

#[test]
fn a_pane_that_reads_nothing_holds_the_keys_back_not_the_server() {
    let ptyd = Ptyd::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typed");
    let gate = dir.path().join("gate");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let id = recorder(&ptyd, &file, Some(&gate));
    let mut c = ptyd.connect();
    let term = Terminal::attach(&ptyd, &[&id], &[]);
    wait_keys(&mut c, true);
    // Twice what the pane's pending input holds (1 MiB).
    let paste = lines("full", 0..180_000);
    let (typist, typed) = term.type_async(paste.clone());
    // Past what the pane's input holds: the server holds nearly a
    // megabyte for the pane (the terminals' queues take a few dozen KiB).
    util::eventually("the pane's input to fill up", || {
        let n = typed.load(Ordering::Relaxed);
        if n > 1 << 20 {
            Ok(())
        } else {
            Err(format!("{n} typed; {}", first_client(&mut c)))
        }
    });
    // The server answers meanwhile, and still has the keys (held in the
    // terminal, not handed to the client).
    let listed = first_client(&mut c);
    assert_eq!(listed["keys"], true, "{listed}");
    let status = c.ok("server.status", json!({}));
    assert!(status["pid"].as_i64().is_some(), "{status}");
    // The program reads: everything arrives, in order.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&gate)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    typist.join().unwrap();
    assert_recorded(&file, &paste);
    wait_keys(&mut c, true);
}

#[test]
fn opted_out_and_read_only_clients_keep_their_keys() {
    let ptyd = Ptyd::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typed");
    let id = recorder(&ptyd, &file, None);
    let mut c = ptyd.connect();
    let mut want = Vec::new();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Case; 2] = [
        (&["--no-direct"], &[]),
        (&[], &[("PTYD_ATTACH_DIRECT", "0")]),
    ];
    for (i, (args, env)) in cases.into_iter().enumerate() {
        let mut all = vec![id.as_str()];
        all.extend_from_slice(args);
        let term = Terminal::attach(&ptyd, &all, env);
        util::eventually("the client attached", || {
            first_client(&mut c).is_object().then_some(())
        });
        // Its typing goes through the client, as before.
        let line = lines(&format!("out{i}-"), 0..100);
        let read_before = term.client_read_bytes();
        let (typist, _) = term.type_async(line.clone());
        typist.join().unwrap();
        want.extend_from_slice(&line);
        assert_recorded(&file, &want);
        assert!(term.client_read_bytes() - read_before >= line.len() as u64);
        let listed = first_client(&mut c);
        assert_eq!(
            (&listed["direct"], &listed["keys"]),
            (&json!(false), &json!(false))
        );
        drop(term);
        util::eventually("the client gone", || {
            c.ok("client.list", json!({}))["clients"]
                .as_array()
                .is_some_and(|a| a.is_empty())
        });
    }
    // A read-only client: its terminal may be written to, its keys are
    // never read (nor sent).
    let term = Terminal::attach(&ptyd, &[&id, "--read-only"], &[]);
    let listed = util::eventually("the read-only client's terminal taken", || {
        let first = first_client(&mut c);
        (first["direct"] == true).then_some(first)
    });
    assert_eq!(listed["keys"], false, "{listed}");
    let (typist, _) = term.type_async(b"ignored\n".to_vec());
    typist.join().unwrap();
    // Whatever it typed went nowhere: a line typed after it by a protocol
    // client arrives right behind what came before.
    c.input(&id, "last\n");
    want.extend_from_slice(b"last\n");
    assert_recorded(&file, &want);
    assert_eq!(first_client(&mut c)["keys"], false);
}

/// Frame kinds of direct output and keys (docs/protocol.md).
const DIRECT_ON: u8 = 3;
const DIRECT_OFF: u8 = 4;
const KEYS_OFF: u8 = 5;
const TTY: u8 = 5;
const DIRECT_ACK: u8 = 6;
const DIRECT_PAUSE: u8 = 7;
const KEYS_ON: u8 = 8;

/// Offers a fresh raw terminal on `a` (opened for reading too if
/// `readable`); returns its master and the slave fd offered.
fn offer(a: &util::Attached, readable: bool) -> (File, File) {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut t = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
    nix::sys::termios::cfmakeraw(&mut t);
    nix::sys::termios::tcsetattr(&pty.slave, nix::sys::termios::SetArg::TCSANOW, &t).unwrap();
    let path = format!("/proc/self/fd/{}", pty.slave.as_raw_fd());
    let slave = std::fs::OpenOptions::new()
        .read(readable)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .unwrap();
    let bytes = util::frame(TTY, &[]);
    let iov = [std::io::IoSlice::new(&bytes)];
    let fds = [slave.as_raw_fd()];
    sendmsg::<()>(
        a.stream().as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .unwrap();
    (File::from(pty.master), slave)
}

/// The next frame that is not OUTPUT.
#[track_caller]
fn next_control(a: &mut util::Attached) -> (u8, Vec<u8>) {
    loop {
        match a.next_frame() {
            Some((util::OUTPUT, _)) => {}
            Some(other) => return other,
            None => panic!("the attached stream ended"),
        }
    }
}

/// A KEYS_OFF frame's reason and bytes.
#[track_caller]
fn keys_off(frame: (u8, Vec<u8>)) -> (String, Vec<u8>) {
    assert_eq!(frame.0, KEYS_OFF, "{:?}", util::abbreviate(&frame.1));
    let len = usize::from(frame.1[0]);
    (
        String::from_utf8(frame.1[1..1 + len].to_vec()).unwrap(),
        frame.1[1 + len..].to_vec(),
    )
}

#[test]
fn the_protocol_hands_keys_over_and_back_at_the_prefix_key() {
    let ptyd = Ptyd::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typed");
    let id = recorder(&ptyd, &file, None);
    let (_, mut a) = ptyd.connect().attach(json!({ "target": id }));
    // No terminal taken: refused.
    a.send(KEYS_ON, &[0x1c]);
    assert_eq!(keys_off(next_control(&mut a)).0, "refused");

    // A terminal opened for writing only: output, no keys.
    let (_m, _s) = offer(&a, false);
    assert_eq!(next_control(&mut a), (DIRECT_ON, Vec::new()));
    a.send(DIRECT_ACK, &[]);
    a.send(KEYS_ON, &[0x1c]);
    assert_eq!(keys_off(next_control(&mut a)).0, "refused");
    a.send(DIRECT_PAUSE, &[]);
    assert_eq!(next_control(&mut a).0, DIRECT_OFF);

    // Opened for reading too: keys.
    let (mut master, mut slave) = offer(&a, true);
    let (kind, on) = next_control(&mut a);
    assert_eq!(kind, DIRECT_ON);
    assert_eq!(serde_json::from_slice::<Value>(&on).unwrap()["keys"], true);
    a.send(DIRECT_ACK, &[]);
    // Not one byte (the prefix key) as payload: refused.
    a.send(KEYS_ON, &[]);
    assert_eq!(keys_off(next_control(&mut a)).0, "refused");
    a.send(KEYS_ON, &[0x1c]);
    master.write_all(b"abc\x1cxyz").unwrap();
    // Up to the prefix key into the pane; from it on back to the client,
    // in what KEYS_OFF carries and what is still in the terminal.
    let (reason, mut rest) = keys_off(next_control(&mut a));
    assert_eq!(reason, "prefix");
    util::eventually("the rest of the keys", || {
        let mut buf = [0u8; 64];
        if let Ok(n) = slave.read(&mut buf) {
            rest.extend_from_slice(&buf[..n]);
        }
        (rest.len() >= 4).then_some(())
    });
    assert_eq!(rest, b"\x1cxyz");
    assert_recorded(&file, b"abc");

    // Again, then a pause: KEYS_OFF before DIRECT_OFF.
    a.send(KEYS_ON, &[0x1c]);
    master.write_all(b"def").unwrap();
    assert_recorded(&file, b"abcdef");
    a.send(DIRECT_PAUSE, &[]);
    assert_eq!(
        keys_off(next_control(&mut a)),
        ("paused".into(), Vec::new())
    );
    assert_eq!(next_control(&mut a).0, DIRECT_OFF);
}

/// KEYS_OFF answers are queued past the output bound, so a client asking
/// for keys again and again without reading its socket must still be
/// bounded: it is dropped as too slow, and the server serves on.
#[test]
fn a_client_that_asks_for_keys_without_reading_is_dropped_not_grown() {
    let ptyd = Ptyd::start();
    let id = ptyd.create_argv(&["/bin/sh"]);
    let mut c = ptyd.connect();
    let (_, a) = ptyd.connect().attach(json!({ "target": id }));
    let sock = a.stream().try_clone().unwrap();
    // Each refused KEYS_ON is answered by 13 bytes: 400,000 of them are
    // past the 4 MiB bound.
    let writer = std::thread::spawn(move || {
        let asks = util::frame(KEYS_ON, &[0x1c]).repeat(1000);
        let mut sock = sock;
        for _ in 0..400 {
            if sock.write_all(&asks).is_err() {
                return;
            }
        }
    });
    util::eventually("the client that never reads to be dropped", || {
        let n = c.ok("client.list", json!({}))["clients"]
            .as_array()
            .map_or(0, Vec::len);
        (n == 0).then_some(())
    });
    drop(a);
    writer.join().unwrap();
    let (_, mut b) = ptyd.connect().attach(json!({ "target": id }));
    b.send(util::INPUT, b"echo alive-$((40+2))\n");
    b.read_until("alive-42");
}

/// Whatever ends the attachment gives the terminal back whole: the pane
/// exiting (typed `exit`, read by the server) and a detach by someone
/// else; the outer shell then reads its keys again, the server not.
#[test]
fn the_keys_go_back_when_the_pane_exits_or_another_detaches_the_client() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    let first = ptyd.create_argv(&["/bin/sh"]);
    tmux.type_line(&format!(
        "{} attach --pane-only {first}",
        shell_quote(util::PTYD)
    ));
    wait_keys(&mut c, true);
    tmux.type_line("exit");
    tmux.wait_screen("the pane's exit", |s| s.contains("exited"));
    tmux.type_line("echo outer-$((6*7))");
    tmux.wait_screen("the outer shell reading its keys", |s| {
        s.contains("outer-42")
    });

    let second = ptyd.create_argv(&["/bin/sh"]);
    tmux.type_line(&format!(
        "{} attach --pane-only {second}",
        shell_quote(util::PTYD)
    ));
    wait_keys(&mut c, true);
    c.ok("client.detach", json!({ "all": true }));
    tmux.wait_screen("the detach", |s| s.contains("detached"));
    tmux.type_line("echo again-$((6*7))");
    tmux.wait_screen("the outer shell reading its keys", |s| {
        s.contains("again-42")
    });
}

/// A server started in the background of the very terminal a client
/// attaches from has it as its controlling terminal: reading it from
/// outside the terminal's foreground process group would stop the server
/// (SIGTTIN). It takes the output, never the keys.
#[test]
fn a_server_never_reads_the_keys_of_its_own_controlling_terminal() {
    let ptyd = Ptyd::start();
    let tmux = Tmux::outer_session(&ptyd, 100, 30);
    let bg = format!("{}-bg", ptyd.namespace);
    let ptyd_bin = shell_quote(util::PTYD);
    // The outer shell's job control puts it in a background process group.
    tmux.type_line(&format!(
        "PTYD_NAMESPACE={bg} {ptyd_bin} server 2>/dev/null &"
    ));
    let socket = ptyd.dirs.socket(&bg);
    // Stopped however the test ends (its keeper would replace a killed one).
    struct StopOnDrop(std::path::PathBuf);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            if let Some(mut c) = util::Conn::try_connect(&self.0) {
                let _ = c.try_call("server.stop", json!({}));
            }
        }
    }
    let _stop = StopOnDrop(socket.clone());
    util::eventually("the background server to answer", || {
        util::serves(&socket).then_some(())
    });
    let mut c = util::Conn::connect(&socket);
    let id = c.create(json!({ "argv": ["/bin/sh"] }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    tmux.type_line(&format!("PTYD_NAMESPACE={bg} {ptyd_bin} attach {id}"));
    let listed = util::eventually("the client's terminal taken", || {
        let first = first_client(&mut c);
        (first["direct"] == true).then_some(first)
    });
    assert_eq!(listed["keys"], false, "{listed}");
    tmux.type_line("echo own-$((6*7))");
    tmux.wait_screen("the line typed through the client", |s| {
        s.contains("own-42")
    });
    // Not stopped: it answers, and the keys are still the client's.
    assert_eq!(first_client(&mut c)["keys"], false);
    tmux.keys(&["C-\\", "d"]);
    tmux.wait_screen("the detach", |s| s.contains("[ptyd: detached from "));
}
