//! Attached connections: frames both ways, detach, the EXIT frame that ends
//! every attachment, read-only clients, a client too slow to keep up (the
//! server must drop it, not stall), and the interactive `ptyd attach`
//! client driven through tmux.

mod util;

use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};
use util::{FrameReader, Ptyd, TIMEOUT, frame};

const OUTPUT: u8 = 1;
const EXIT: u8 = 2;
const INPUT: u8 = 1;
const RESIZE: u8 = 2;
const DETACH: u8 = 3;

/// An attached socket and its frame reader state.
struct Attached {
    stream: UnixStream,
    leftover: Vec<u8>,
    output: Vec<u8>,
}

impl Attached {
    fn new(ptyd: &Ptyd, params: Value) -> (Value, Attached) {
        let (result, stream, leftover) = ptyd.connect().attach(params);
        (
            result,
            Attached {
                stream,
                leftover,
                output: Vec::new(),
            },
        )
    }

    fn send(&self, kind: u8, payload: &[u8]) {
        (&self.stream)
            .write_all(&frame(kind, payload))
            .expect("sending a frame");
    }

    /// Reads frames until the output so far contains `text`. Fails on an
    /// EXIT frame or the end of the stream.
    fn read_until(&mut self, text: &str) {
        let mut frames = FrameReader::new(&self.stream, std::mem::take(&mut self.leftover));
        while !String::from_utf8_lossy(&self.output).contains(text) {
            match frames.next() {
                Some((OUTPUT, payload)) => self.output.extend_from_slice(&payload),
                Some((kind, payload)) => panic!(
                    "frame kind {kind} ({}) while waiting for {text:?}",
                    String::from_utf8_lossy(&payload)
                ),
                None => panic!(
                    "stream ended while waiting for {text:?}; output: {:?}",
                    String::from_utf8_lossy(&self.output)
                ),
            }
        }
    }

    /// Reads to the EXIT frame, then checks the stream ends. Returns its
    /// payload.
    fn read_exit(&mut self) -> Value {
        let mut frames = FrameReader::new(&self.stream, std::mem::take(&mut self.leftover));
        loop {
            match frames.next() {
                Some((OUTPUT, payload)) => self.output.extend_from_slice(&payload),
                Some((EXIT, payload)) => {
                    let v: Value = serde_json::from_slice(&payload).expect("EXIT payload is JSON");
                    assert!(frames.next().is_none(), "frames after the EXIT frame");
                    return v;
                }
                Some((kind, _)) => panic!("unknown frame kind {kind}"),
                None => panic!("stream ended without an EXIT frame"),
            }
        }
    }
}

fn cat_pane(ptyd: &Ptyd) -> String {
    let id = ptyd.create_argv(&["/bin/sh", "-c", "stty -echo; echo ready; exec cat"]);
    ptyd.connect().wait_text(&id, "ready");
    id
}

#[test]
fn frames_carry_input_output_resize_and_detach() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let (result, mut a) = Attached::new(&ptyd, json!({ "target": id, "cols": 70, "rows": 15 }));
    assert_eq!(result["pane"], id.as_str());
    assert_eq!(result["framing"], "ptyd-frames-1");
    // The redraw shows what was on screen before we attached.
    a.read_until("ready");
    // Attaching with a size resizes the pane.
    let info = c.pane_info(&id).unwrap();
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(70), Some(15))
    );
    assert_eq!(info["attached_clients"], 1);

    a.send(INPUT, b"typed-through-frames\n");
    a.read_until("typed-through-frames");
    c.wait_text(&id, "typed-through-frames");

    a.send(RESIZE, &[0, 120, 0, 40]);
    // An unknown frame kind is ignored.
    a.send(99, b"future");
    a.send(DETACH, b"");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "detached", "{exit}");
    let info = c.pane_info(&id).unwrap();
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(120), Some(40))
    );
    assert_eq!(info["state"], "running", "detaching hurt the pane");
    assert_eq!(info["attached_clients"], 0);
}

#[test]
fn every_attached_client_sees_output_and_read_only_ones_cannot_type() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let (_, mut writer) = Attached::new(&ptyd, json!({ "target": id }));
    let (_, mut watcher) = Attached::new(&ptyd, json!({ "target": id, "read_only": true }));
    writer.read_until("ready");
    watcher.read_until("ready");
    writer.send(INPUT, b"seen-by-both\n");
    writer.read_until("seen-by-both");
    watcher.read_until("seen-by-both");

    // Input from the read-only client is dropped. Detaching after it and
    // waiting for the EXIT frame proves the server handled the input frame.
    watcher.send(INPUT, b"must-not-appear\n");
    watcher.send(RESIZE, &[0, 30, 0, 5]);
    watcher.send(DETACH, b"");
    assert_eq!(watcher.read_exit()["reason"], "detached");
    c.input(&id, "after-read-only\n");
    c.wait_text(&id, "after-read-only");
    let text = c.capture(&id);
    assert!(
        !text.contains("must-not-appear"),
        "read-only input typed:\n{text}"
    );
    assert_ne!(
        c.pane_info(&id).unwrap()["cols"],
        30,
        "read-only client resized"
    );
}

#[test]
fn pane_exit_and_removal_end_attachments() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = cat_pane(&ptyd);
    let (_, mut a) = Attached::new(&ptyd, json!({ "target": id }));
    a.read_until("ready");
    // EOF (Ctrl-D) makes cat exit with code 0.
    a.send(INPUT, b"\x04");
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert_eq!(exit["pane"], id.as_str());
    assert_eq!(exit["exit"]["code"], 0, "{exit}");

    // Attaching to an exited pane: the last screen, then EXIT at once.
    let (_, mut late) = Attached::new(&ptyd, json!({ "target": id }));
    let exit = late.read_exit();
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert!(String::from_utf8_lossy(&late.output).contains("ready"));

    let other = cat_pane(&ptyd);
    let (_, mut b) = Attached::new(&ptyd, json!({ "target": other, "read_only": true }));
    b.read_until("ready");
    c.ok("pane.remove", json!({ "target": other, "force": true }));
    let exit = b.read_exit();
    assert!(
        exit["reason"] == "pane_removed" || exit["reason"] == "pane_exited",
        "{exit}"
    );
}

#[test]
fn an_oversized_frame_ends_the_attachment_not_the_server() {
    let ptyd = Ptyd::start();
    let id = cat_pane(&ptyd);
    let (_, mut a) = Attached::new(&ptyd, json!({ "target": id }));
    a.read_until("ready");
    (&a.stream)
        .write_all(&[INPUT, 0xff, 0xff, 0xff, 0xff])
        .unwrap();
    let exit = a.read_exit();
    assert_eq!(exit["reason"], "protocol_error", "{exit}");
    let mut c = ptyd.connect();
    assert_eq!(c.pane_info(&id).unwrap()["state"], "running");
    // A second attach on an attached connection is not possible either: the
    // connection speaks frames, so such a line is just bytes for the pane.
    c.input(&id, "server-fine\n");
    c.wait_text(&id, "server-fine");
}

#[test]
fn create_with_attach_streams_from_the_first_byte() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    // The response, then frames on the same socket: nothing the pane prints
    // right at start is missed.
    let info = c.ok(
        "pane.create",
        json!({ "argv": ["sh", "-c", "echo first-words; exit 9"], "attach": true, "read_only": true }),
    );
    assert_eq!(info["id"], "p1");
    let (stream, leftover) = c.into_stream();
    let mut a = Attached {
        stream,
        leftover,
        output: Vec::new(),
    };
    let exit = a.read_exit();
    assert!(
        String::from_utf8_lossy(&a.output).contains("first-words"),
        "{:?}",
        String::from_utf8_lossy(&a.output)
    );
    assert_eq!(exit["reason"], "pane_exited", "{exit}");
    assert_eq!(exit["exit"]["code"], 9, "{exit}");
}

/// A client attached to a flooding pane that never reads is disconnected
/// with `too_slow`; meanwhile other clients get prompt answers. Then the slow
/// client's stream must still be well-formed frames ending in that EXIT.
#[test]
fn a_client_that_never_reads_is_dropped_and_the_server_keeps_answering() {
    let ptyd = Ptyd::start();
    let mut monitor = ptyd.connect();
    monitor.ok("events.subscribe", json!({}));
    let line = "flood-".repeat(20);
    let id = ptyd.create_argv(&["yes", &line]);
    let (_, slow) = Attached::new(&ptyd, json!({ "target": id, "read_only": true }));

    // Watch for the disconnect on a thread while this one keeps asking.
    let pane = id.clone();
    let watcher = std::thread::spawn(move || {
        loop {
            let e = monitor.next_event();
            if e["type"] == "client.detached" && e["pane"] == pane.as_str() {
                return e;
            }
        }
    });
    let mut c = ptyd.connect();
    let deadline = Instant::now() + TIMEOUT;
    let mut requests = 0;
    while !watcher.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the slow client was not disconnected within {TIMEOUT:?}"
        );
        let t = Instant::now();
        let info = c.pane_info(&id).expect("pane listed");
        assert_eq!(info["state"], "running");
        c.capture(&id);
        requests += 1;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the server took {:?} to answer while a client was stuck",
            t.elapsed()
        );
    }
    let event = watcher.join().expect("event watcher");
    assert_eq!(event["reason"], "too_slow", "{event}");
    assert!(requests > 0);

    // The stuck client now reads: whole frames, then EXIT too_slow, then EOF.
    let mut slow = slow;
    let exit = slow.read_exit();
    assert_eq!(exit["reason"], "too_slow", "{exit}");
    assert!(!slow.output.is_empty());
    c.ok("pane.kill", json!({ "target": id, "signal": "KILL" }));
    c.wait_exit(&id);
}

/// A private tmux server, killed on drop.
struct Tmux {
    socket_name: String,
    tmpdir: tempfile::TempDir,
}

impl Tmux {
    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env("TMUX_TMPDIR", self.tmpdir.path())
            .env_remove("TMUX")
            .args(["-L", &self.socket_name, "-f", "/dev/null"]);
        cmd
    }

    fn run(&self, args: &[&str]) -> String {
        let mut cmd = self.command();
        cmd.args(args);
        let out = util::run_bounded(cmd, &format!("tmux {args:?}"));
        assert!(
            out.status.success(),
            "tmux {args:?}: {:?} {}",
            out.status,
            util::stderr(&out)
        );
        util::stdout(&out)
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "main"])
    }

    /// Polls the tmux screen (tmux has no event to wait on) until `check`.
    fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "tmux screen never showed {what}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        self.run(&args);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let mut cmd = self.command();
        cmd.arg("kill-server");
        let _ = cmd.output();
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn attach_client_inside_tmux_types_shows_and_detaches() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let id = ptyd.create_argv(&["/bin/sh"]);
    assert_eq!(id, "p1");

    let tmux = Tmux {
        socket_name: util::unique_name("ptyd-test"),
        tmpdir: tempfile::tempdir().unwrap(),
    };
    // An outer shell inside tmux runs `ptyd attach`, so that after it ends
    // its message and exit code stay visible.
    let env = format!(
        "env XDG_RUNTIME_DIR={} XDG_STATE_HOME={} PTYD_NAMESPACE={} PS1='outer$ ' /bin/sh",
        shell_quote(ptyd.dirs.runtime.path().to_str().unwrap()),
        shell_quote(ptyd.dirs.state.path().to_str().unwrap()),
        shell_quote(&ptyd.namespace),
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "main",
        "-x",
        "100",
        "-y",
        "30",
        &env,
    ]);
    tmux.wait_screen("the outer prompt", |s| s.contains("outer$"));
    let attach = format!("{} attach p1; echo attach-rc=$?", shell_quote(util::PTYD));
    tmux.keys(&["-l", &attach]);
    tmux.keys(&["Enter"]);
    util::eventually("the attach client to connect", || {
        (c.pane_info("p1").unwrap()["attached_clients"] == 1).then_some(())
    });
    // The client sends its terminal size: tmux's pane is 100 columns.
    assert_eq!(c.pane_info("p1").unwrap()["cols"], 100);

    tmux.keys(&["-l", "echo hi-$((40+2))-there"]);
    tmux.keys(&["Enter"]);
    c.wait_text("p1", "hi-42-there");
    tmux.wait_screen("the pane's output", |s| s.contains("hi-42-there"));

    // Ctrl-\ detaches.
    tmux.keys(&["C-\\"]);
    let screen = tmux.wait_screen("the attach client exiting", |s| s.contains("attach-rc="));
    assert!(screen.contains("attach-rc=0"), "{screen}");
    assert!(screen.contains("[ptyd: detached]"), "{screen}");
    let info = c.pane_info("p1").unwrap();
    assert_eq!(info["state"], "running", "detach hurt the pane");
    assert_eq!(info["attached_clients"], 0);

    // Attach again and end the pane from inside: the client reports it.
    let attach = attach.replace("attach-rc=", "again-rc=");
    tmux.keys(&["-l", &attach]);
    tmux.keys(&["Enter"]);
    util::eventually("the attach client to connect again", || {
        (c.pane_info("p1").unwrap()["attached_clients"] == 1).then_some(())
    });
    tmux.keys(&["-l", "exit 4"]);
    tmux.keys(&["Enter"]);
    let exit = c.wait_exit("p1");
    assert_eq!(exit["code"], 4, "{exit}");
    let screen = tmux.wait_screen("the attach client exiting", |s| s.contains("again-rc="));
    assert!(
        screen.contains("[ptyd: pane p1 exited: code 4]"),
        "{screen}"
    );
    assert!(screen.contains("again-rc=0"), "{screen}");
}
