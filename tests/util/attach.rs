//! Attached clients: the frame codec, and [`Attached`], a connection that
//! speaks frames, read in the test's thread or on a thread of its own.

use super::client::Conn;
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

/// Server to client: pane output.
pub const OUTPUT: u8 = 1;
/// Server to client: the attachment ended (JSON payload with the reason).
pub const EXIT: u8 = 2;
/// Client to server: input for the pane.
pub const INPUT: u8 = 1;
/// Client to server: the client's size.
pub const RESIZE: u8 = 2;
/// Client to server: detach.
pub const DETACH: u8 = 3;

/// Encodes a client frame.
pub fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Decodes server frames from a stream: `(kind, payload)`, `None` at its
/// end. Keeps what it read past the last whole frame for the next call.
pub struct FrameReader {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl FrameReader {
    /// `leftover`: bytes already read from `stream` (past the last line).
    pub fn new(stream: UnixStream, leftover: Vec<u8>) -> FrameReader {
        FrameReader {
            stream,
            buf: leftover,
        }
    }

    pub fn next(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]])
                    as usize;
                assert!(
                    len <= 1 << 20,
                    "frame length {len} over the limit: the frame stream is corrupt (kind byte {})",
                    self.buf[0]
                );
                if self.buf.len() >= 5 + len {
                    let kind = self.buf[0];
                    let payload = self.buf[5..5 + len].to_vec();
                    self.buf.drain(..5 + len);
                    return Some((kind, payload));
                }
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    assert!(
                        self.buf.is_empty(),
                        "stream ended inside a frame ({} bytes left)",
                        self.buf.len()
                    );
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("reading frames: {e}"),
            }
        }
    }
}

/// An attached connection: sends frames, collects the pane's output.
pub struct Attached {
    stream: UnixStream,
    frames: FrameReader,
    /// Every output byte read so far.
    pub output: Vec<u8>,
}

impl Conn {
    /// Attaches this connection (`attach` with `params`): returns the
    /// result and the connection, now carrying frames.
    #[track_caller]
    pub fn attach(mut self, params: Value) -> (Value, Attached) {
        let result = self.ok("attach", params);
        (result, self.into_attached())
    }

    /// This connection as an attached one, for a connection the server
    /// already attached (`pane.create` with `attach`).
    pub fn into_attached(self) -> Attached {
        let leftover = self.reader.buffer().to_vec();
        let read_side = self.stream.try_clone().expect("cloning the socket");
        Attached {
            stream: self.stream,
            frames: FrameReader::new(read_side, leftover),
            output: Vec::new(),
        }
    }
}

impl Attached {
    /// The socket, to write raw bytes (a malformed frame) or shut it down.
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    pub fn send(&self, kind: u8, payload: &[u8]) {
        (&self.stream)
            .write_all(&frame(kind, payload))
            .expect("sending a frame");
    }

    /// The next frame, `None` at the end of the stream.
    pub fn next_frame(&mut self) -> Option<(u8, Vec<u8>)> {
        self.frames.next()
    }

    /// Reads frames until the output so far contains `text`. Fails on an
    /// EXIT frame or the end of the stream.
    #[track_caller]
    pub fn read_until(&mut self, text: &str) {
        while !String::from_utf8_lossy(&self.output).contains(text) {
            match self.frames.next() {
                Some((OUTPUT, payload)) => self.output.extend_from_slice(&payload),
                Some((kind, payload)) => panic!(
                    "frame kind {kind} ({}) while waiting for {text:?}",
                    String::from_utf8_lossy(&payload)
                ),
                None => panic!(
                    "the attached stream ended while waiting for {text:?}; output: {:?}",
                    String::from_utf8_lossy(&self.output)
                ),
            }
        }
    }

    /// The screen a `rows` x `cols` terminal shows after all output read
    /// so far (a real terminal model, vt100, not ours).
    pub fn screen(&self, rows: u16, cols: u16) -> String {
        let size = |n| std::num::NonZero::new(n).expect("a size");
        let mut term = vt100::Parser::new(size(rows), size(cols), 0);
        term.process(&self.output);
        term.screen().contents()
    }

    /// Reads to the EXIT frame, then checks the stream ends. Returns its
    /// payload.
    #[track_caller]
    pub fn read_exit(&mut self) -> Value {
        loop {
            match self.frames.next() {
                Some((OUTPUT, payload)) => self.output.extend_from_slice(&payload),
                Some((EXIT, payload)) => {
                    let v: Value = serde_json::from_slice(&payload).expect("EXIT payload is JSON");
                    assert!(self.frames.next().is_none(), "frames after the EXIT frame");
                    return v;
                }
                Some((kind, _)) => panic!("unknown frame kind {kind}"),
                None => panic!("stream ended without an EXIT frame"),
            }
        }
    }

    /// Reads on a thread from now on, for a pane whose output must be
    /// drained while the test does other things.
    pub fn read_in_background(self) -> Background {
        let lines = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&lines);
        let Attached {
            stream,
            mut frames,
            mut output,
        } = self;
        let reader = std::thread::spawn(move || {
            loop {
                match frames.next() {
                    Some((OUTPUT, payload)) => {
                        let n = payload.iter().filter(|b| **b == b'\n').count();
                        output.extend_from_slice(&payload);
                        counter.fetch_add(n as u64, Ordering::SeqCst);
                    }
                    Some((EXIT, payload)) => {
                        return (output, serde_json::from_slice(&payload).ok());
                    }
                    Some((kind, _)) => panic!("unknown frame kind {kind}"),
                    None => return (output, None),
                }
            }
        });
        Background {
            _stream: stream,
            lines,
            reader,
        }
    }
}

/// An attached connection read on a thread: output bytes are collected
/// until the EXIT frame (or the end of the stream).
pub struct Background {
    /// Kept open: the reader thread reads a clone.
    _stream: UnixStream,
    /// Newline count seen so far, for progress checks.
    lines: Arc<AtomicU64>,
    reader: JoinHandle<(Vec<u8>, Option<Value>)>,
}

impl Background {
    /// Newlines read so far.
    pub fn lines(&self) -> u64 {
        self.lines.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until more than `n` lines arrived; returns how many.
    #[track_caller]
    pub fn wait_lines_beyond(&self, n: u64, what: &str) -> u64 {
        super::eventually(what, || {
            let now = self.lines();
            (now > n).then_some(now)
        })
    }

    /// Waits for the EXIT frame (or the end of the stream): the output and
    /// the EXIT payload, if there was one.
    pub fn finish(self) -> (Vec<u8>, Option<Value>) {
        self.reader.join().expect("the frame reader panicked")
    }
}

/// A real `ptyd attach ARGS` (with `env` added) whose terminal is a fresh
/// 80x24 PTY: its master for the test to read, type into or leave unread,
/// and the client process, killed on drop.
pub fn attach_in_pty(
    ptyd: &super::Ptyd,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::fs::File, super::KillOnDrop) {
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let slave = |fd: &std::os::fd::OwnedFd| std::process::Stdio::from(fd.try_clone().unwrap());
    let mut all = vec!["attach"];
    all.extend_from_slice(args);
    let mut cmd = ptyd.cli(&all);
    cmd.stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let client = super::KillOnDrop::child(cmd.spawn().expect("starting ptyd attach"));
    (std::fs::File::from(pty.master), client)
}
