//! The attach client and the output mirror on a Unix terminal: raw mode
//! (restored on every way out: detach, pane exit, server loss, signals,
//! panic), poll(2) over the terminal, the socket and a signal pipe, and
//! reconnecting to a server that went away.
//!
//! It uses poll(2) directly: three fds, level-triggered, and blocking
//! writes are fine on this side.

use super::{
    AttachEnd, AttachOptions, CrlfToLf, PREFIX_WAIT, PrefixAction, RECONNECT_EVERY, RECONNECT_FOR,
    end_from_exit, mirror_lost, run_ended, split_keys, start_mirror,
};
use crate::client::{
    self, BatchEnd, Client, ClientError, ErrorKind, FrameReader, scroll, send_frame, terminal_size,
};
use crate::paths::NamespacePaths;
use crate::protocol::frame;
use crate::protocol::methods::{self, Request};
use crate::sys;
use serde::Deserialize;
use serde_json::Value;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::os::unix::net::UnixStream;

/// Modes a pane's program may have switched on in the user's terminal; all
/// switched off when we leave so the shell gets a sane terminal back.
const MODES_RESET: &[u8] = b"\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1004l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[<u\x1b[>4;0m\x1b[0m\x1b[?25h\x1b[?7h\x1b[4l\x1b[?2026l";

/// Whether this attachment put the terminal on its alternate screen (so
/// leaving must switch back, which restores the screen of before).
static ALT_SCREEN: AtomicBool = AtomicBool::new(false);

/// The original terminal settings, for restoring from a panic hook too.
static SAVED_TERMIOS: Mutex<Option<sys::StdinMode>> = Mutex::new(None);

/// Raw mode for the life of the guard.
struct RawMode;

impl RawMode {
    fn enter() -> Option<RawMode> {
        let original = sys::stdin_raw_mode().ok()?;
        *SAVED_TERMIOS.lock().unwrap_or_else(|e| e.into_inner()) = Some(original);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        Some(RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn restore_terminal() {
    // A copy, and the lock let go at once: the end watchdog restores the
    // mode from it if the writes below find a terminal that stopped
    // reading. Cleared once done (a second call does nothing).
    let saved = SAVED_TERMIOS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(original) = saved {
        let mut out = Vec::new();
        if ALT_SCREEN.swap(false, Ordering::Relaxed) {
            // Back to the screen of before the attach, cursor and all.
            out.extend_from_slice(MODES_RESET);
            out.extend_from_slice(b"\x1b[?6l\x1b[r\x1b[?1049l");
        } else {
            // Off a pane's alternate screen (1049 restores the cursor it
            // saved; on the main screen, the one saved just before), then
            // no origin mode and a full scroll region, both of which home
            // the cursor: it goes back after the pane's text.
            out.extend_from_slice(b"\x1b7\x1b[?1049l");
            out.extend_from_slice(MODES_RESET);
            out.extend_from_slice(b"\x1b7\x1b[?6l\x1b[r\x1b8");
        }
        write_stdout(&out);
        let _ = sys::restore_stdin_mode(&original);
        *SAVED_TERMIOS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// How long a client told to end (SIGTERM, SIGHUP, SIGINT) may take.
const END_GRACE: Duration = Duration::from_secs(2);

/// Makes sure a client told to end does end: its writes to the terminal
/// block while the terminal takes nothing (XOFF, a frozen outer terminal),
/// and a blocking write is restarted after the signal, so the loop that
/// would act on it never runs. A watchdog thread, woken by the signal,
/// gives the client [`END_GRACE`] to end on its own, then puts the
/// terminal's mode back (without waiting for its output to drain, which
/// never comes) and exits. Once per process.
fn start_end_watchdog() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let Ok((mut read, write)) = UnixStream::pair() else {
            return;
        };
        // The handler's write must never block.
        if write.set_nonblocking(true).is_err() {
            return;
        }
        for sig in [sys::SIGTERM, sys::SIGHUP, sys::SIGINT] {
            if let Ok(fd) = write.try_clone() {
                let _ =
                    signal_hook::low_level::pipe::register_raw(sig, std::os::fd::OwnedFd::from(fd));
            }
        }
        let _ = std::thread::Builder::new()
            .name("end-watchdog".into())
            .spawn(move || {
                let mut byte = [0u8; 1];
                if !matches!(read.read(&mut byte), Ok(1)) {
                    return;
                }
                std::thread::sleep(END_GRACE);
                if let Ok(saved) = SAVED_TERMIOS.try_lock()
                    && let Some(mode) = saved.as_ref()
                {
                    let _ = sys::restore_stdin_mode_now(mode);
                }
                sys::exit_now(1);
            });
    });
}

/// A self-pipe that signal handlers write to, so poll wakes on signals.
pub(crate) struct SignalPipe {
    pub(crate) read: std::fs::File,
    ids: Vec<signal_hook::SigId>,
}

impl SignalPipe {
    fn new(signals: &[i32]) -> io::Result<SignalPipe> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let mut ids = Vec::new();
        for &sig in signals {
            ids.push(signal_hook::low_level::pipe::register_raw(
                sig,
                write.try_clone()?.into(),
            )?);
        }
        let read: std::os::fd::OwnedFd = read.into();
        Ok(SignalPipe {
            read: read.into(),
            ids,
        })
    }

    /// Whether any signal arrived since the last call.
    pub(crate) fn drain(&mut self) -> bool {
        let mut buf = [0u8; 64];
        let mut any = false;
        while matches!(self.read.read(&mut buf), Ok(n) if n > 0) {
            any = true;
        }
        any
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// poll(2) over a few fds; returns which are readable (or hung up). A
/// signal ending the wait early makes none ready: the signal pipe then is.
pub(crate) fn poll_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    match sys::poll_readable(fds, timeout) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(vec![false; fds.len()]),
        other => other,
    }
}

/// Pane output bound for this process's stdout. Every frame already
/// buffered is written with one writev(2) straight from the buffer the
/// frames were received in (no copy of the payloads, no header bytes in
/// between to skip) to fd 1: `Stdout` is line-buffered, which split every
/// frame at its last newline into two writes plus a copy of the tail.
/// Written before the client waits for anything again, so a lone
/// keystroke's echo is never held back.
#[derive(Default)]
struct TerminalOutput {
    /// CR LF to LF on the way out (`ptyd run` into a pipe or file).
    line_ends: Option<CrlfToLf>,
}

impl TerminalOutput {
    /// Writes out the output frames `reader` holds, up to the first frame
    /// that is not output: how the batch ended (an EXIT frame's payload, a
    /// frame of the direct-output handshake, or `More`: all written).
    fn write_buffered(&mut self, reader: &mut FrameReader) -> Result<BatchEnd, ClientError> {
        let batch = reader.take_output();
        match &mut self.line_ends {
            Some(conv) => write_stdout(&conv.convert(&batch.payloads.concat())),
            None => write_stdout_vectored(&batch.payloads),
        }
        match batch.end {
            BatchEnd::Oversized => Err(ClientError {
                kind: ErrorKind::Protocol,
                message: "oversized frame from server".into(),
            }),
            end => Ok(end),
        }
    }

    /// Writes what the line-end conversion still holds (a final CR).
    fn finish(&mut self) {
        if let Some(conv) = &mut self.line_ends {
            write_stdout(conv.finish());
        }
    }
}

/// Writes all of `chunks` to fd 1 in order, as few writev(2) calls as the
/// terminal allows, waiting while it is full. Errors end the write
/// silently, as `write_stdout`'s do.
fn write_stdout_vectored(chunks: &[&[u8]]) {
    match chunks {
        [] => return,
        [one] => return write_stdout(one),
        _ => {}
    }
    let mut slices: Vec<io::IoSlice<'_>> = chunks.iter().map(|c| io::IoSlice::new(c)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match sys::write_stdout_vectored(rest) {
            Ok(0) => return,
            Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let _ = sys::wait_writable(1);
            }
            Err(_) => return,
        }
    }
}

/// Writes all of `bytes` to fd 1, waiting while it is full. Errors end the
/// write silently, as before: the terminal is gone and the attachment ends
/// through its other fds.
pub(crate) fn write_stdout(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match sys::write_stdout(bytes) {
            Ok(0) => return,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let _ = sys::wait_writable(1);
            }
            Err(_) => return,
        }
    }
}

/// Attaches the user's terminal to a pane until detach or the end of the
/// pane. `first` is an already-attached connection (from `ptyd new`, or
/// the attach request the CLI made to fail early), if any.
pub fn run_attach(
    paths: &NamespacePaths,
    opts: &AttachOptions,
    first: Option<FrameReader>,
) -> Result<AttachEnd, ClientError> {
    let signals = SignalPipe::new(&[sys::SIGWINCH, sys::SIGTERM, sys::SIGHUP, sys::SIGINT])
        .map_err(|e| io_error("installing signal handlers", e))?;
    let reader = match first {
        Some(r) => r,
        None => {
            let client = Client::connect(paths, false)?;
            client::attach(client, opts.params(terminal_size(&io::stdout()), true))?.1
        }
    };
    // Set by a terminating signal, as opposed to SIGWINCH.
    let end_flag = Arc::new(AtomicBool::new(false));
    for sig in [sys::SIGTERM, sys::SIGHUP, sys::SIGINT] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&end_flag));
    }
    start_end_watchdog();
    // Restores the terminal when this function returns, however it does.
    let raw = RawMode::enter();
    let screen_restored = raw.is_some() && opts.alt_screen;
    if screen_restored {
        // Saves the cursor and the screen as they are: detaching gives them
        // back (the pane's own switches never reach this client).
        ALT_SCREEN.store(true, Ordering::Relaxed);
        write_stdout(b"\x1b[?1049h\x1b[H\x1b[2J");
    }
    let mut session = Session {
        paths,
        opts,
        reader,
        signals,
        end_flag,
        screen_restored,
        size: terminal_size(&io::stdout()),
        connected: true,
        lost_at: Instant::now(),
        output: TerminalOutput::default(),
        prefix_at: None,
        direct: direct::DirectOutput::new(opts.direct, opts.read_only, opts.detach_key),
        handed_back: Vec::new(),
        told: None,
    };
    // After what this client wrote itself (the alternate screen): the
    // server holds its output until the answer to DIRECT_ON anyway.
    session.direct.offer(session.reader.stream());
    loop {
        if let Some(end) = session.turn()? {
            return Ok(end);
        }
    }
}

fn io_error(what: &str, e: io::Error) -> ClientError {
    ClientError {
        kind: ErrorKind::Io,
        message: format!("{what}: {e}"),
    }
}

/// One attachment, from one turn of its loop to the next.
struct Session<'a> {
    paths: &'a NamespacePaths,
    opts: &'a AttachOptions,
    reader: FrameReader,
    signals: SignalPipe,
    /// Set by a terminating signal, as opposed to SIGWINCH.
    end_flag: Arc<AtomicBool>,
    /// The attachment is on the terminal's alternate screen.
    screen_restored: bool,
    size: Option<(u16, u16)>,
    connected: bool,
    lost_at: Instant,
    output: TerminalOutput,
    /// When the prefix (detach) key was pressed and no second key came yet.
    prefix_at: Option<Instant>,
    direct: direct::DirectOutput,
    /// Keys the server read and handed back (`KEYS_OFF`: from the prefix
    /// key on), handled as typed before the terminal is read again.
    handed_back: Vec<u8>,
    /// The tab view the server last told (`VIEW`), for a reconnection.
    told: Option<super::ToldView>,
}

/// The terminal's input ended.
struct InputClosed;

impl Session<'_> {
    fn end(&self, message: String, exit_code: i32) -> AttachEnd {
        AttachEnd {
            message,
            exit_code,
            screen_restored: self.screen_restored,
        }
    }

    /// The attachment's EXIT frame: its end, or none when the server
    /// restarts (it asks for a reconnection, as a lost connection does).
    fn exit(&mut self, payload: &Value) -> Option<AttachEnd> {
        if super::server_restarts(payload) {
            self.lost("the server restarted; reconnecting");
            return None;
        }
        let e = end_from_exit(payload);
        Some(self.end(e.message, e.exit_code))
    }

    /// Leaving: the server must be done writing to the terminal before
    /// the caller restores it (`kind`, DETACH or DIRECT_PAUSE, sent and
    /// answered).
    fn leave(&mut self, kind: u8, message: &str, exit_code: i32) -> AttachEnd {
        if self.connected {
            let _ = self.direct.settle(&mut self.reader, &mut self.output, kind);
        }
        self.end(message.into(), exit_code)
    }

    /// One turn: what the server sent, then one wait for the terminal,
    /// the socket or a signal, and what it brought.
    fn turn(&mut self) -> Result<Option<AttachEnd>, ClientError> {
        if self.connected
            && let Some(end) = self.write_buffered()?
        {
            return Ok(Some(end));
        }
        let ready = self.poll()?;
        if ready[1] && self.signals.drain() {
            if self.end_flag.load(Ordering::Relaxed) {
                let pause = frame::client::DIRECT_PAUSE;
                return Ok(Some(self.leave(pause, "[ptyd: terminal closed]", 1)));
            }
            self.size = send_size(&self.reader, self.connected, self.size);
        }
        let Ok(action) = self.keys(ready[0]) else {
            let pause = frame::client::DIRECT_PAUSE;
            return Ok(Some(self.leave(pause, "[ptyd: input closed; detached]", 0)));
        };
        match action {
            Some(PrefixAction::Detach) => {
                // Waits (bounded) for the server to stop writing to the
                // terminal: none of its writes may land after the restore.
                let detach = frame::client::DETACH;
                let line = super::detached_line(&self.opts.target);
                return Ok(Some(self.leave(detach, &line, 0)));
            }
            Some(PrefixAction::Scroll { page_up }) if self.connected => {
                let target = self.opts.target.clone();
                if let Some(end) = self.scroll(&target, page_up)? {
                    return Ok(Some(end));
                }
            }
            _ => {}
        }
        if self.connected && ready[2] {
            self.read_socket();
        }
        Ok(if self.connected {
            None
        } else {
            self.reconnect()
        })
    }

    /// Frames already buffered first: poll knows nothing of them.
    fn write_buffered(&mut self) -> Result<Option<AttachEnd>, ClientError> {
        loop {
            match self.output.write_buffered(&mut self.reader)? {
                BatchEnd::More | BatchEnd::Oversized => break,
                BatchEnd::Exit(payload) => match self.exit(&payload) {
                    Some(end) => return Ok(Some(end)),
                    None => return Ok(None),
                },
                BatchEnd::DirectOn(payload) => {
                    self.direct.on_direct_on(&payload, self.reader.stream())
                }
                BatchEnd::DirectOff(payload) => {
                    self.direct.on_direct_off(&payload, self.reader.stream())
                }
                BatchEnd::KeysOff(reason, rest) => {
                    self.direct.on_keys_off(&reason);
                    self.handed_back.extend_from_slice(&rest);
                }
                BatchEnd::View(payload) => {
                    if let Ok(view) = super::ToldView::deserialize(&payload) {
                        self.told = Some(view);
                    }
                }
                BatchEnd::Scroll(payload) => {
                    let Some(pane) = payload["pane"].as_str().map(String::from) else {
                        continue;
                    };
                    let page_up = payload["page_up"].as_bool().unwrap_or(false);
                    if let Some(end) = self.scroll(&pane, page_up)? {
                        return Ok(Some(end));
                    }
                }
            }
        }
        // Back to plain typing, every byte read sent: the keys go to
        // the server (if it writes to the terminal and reads keys).
        if self.handed_back.is_empty() && self.prefix_at.is_none() {
            self.direct.give_keys(self.reader.stream());
        }
        Ok(None)
    }

    /// Waits for the terminal, the signal pipe and the socket: which are
    /// ready, in that order.
    fn poll(&mut self) -> Result<Vec<bool>, ClientError> {
        // While the server reads the keys, the terminal is not read here
        // (poll skips a negative fd).
        let stdin_fd = if self.direct.keys_given() { -1 } else { 0 };
        let mut fds = vec![stdin_fd, self.signals.read.as_raw_fd()];
        if self.connected {
            fds.push(self.reader.stream().as_raw_fd());
        }
        let mut timeout = (!self.connected).then_some(RECONNECT_EVERY);
        if let Some(at) = self.prefix_at {
            let left = PREFIX_WAIT.saturating_sub(at.elapsed());
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        if !self.handed_back.is_empty() {
            timeout = Some(Duration::ZERO);
        }
        let mut ready = poll_readable(&fds, timeout).map_err(|e| io_error("poll", e))?;
        ready.resize(3, false);
        Ok(ready)
    }

    /// What was typed (handed back by the server first, else read now if
    /// `stdin_ready`): sent to the pane, and what the prefix key asks for.
    fn keys(&mut self, stdin_ready: bool) -> Result<Option<PrefixAction>, InputClosed> {
        let mut input = [0u8; 16 * 1024];
        let mut typed_bytes = None;
        if !self.handed_back.is_empty() {
            typed_bytes = Some(std::mem::take(&mut self.handed_back));
        } else if stdin_ready {
            match sys::read_stdin(&mut input) {
                Ok(0) => return Err(InputClosed),
                // A failed read (EINTR, EAGAIN) is tried again on the next turn.
                Err(_) => {}
                Ok(n) => typed_bytes = Some(input[..n].to_vec()),
            }
        }
        let mut action = None;
        // The tab view's keys are the server's, the prefix included; only
        // while disconnected does the prefix work here (to give up).
        if let Some(bytes) = typed_bytes.as_ref()
            && self.opts.tab_view
            && self.connected
        {
            let _ = send_frame(self.reader.stream(), frame::client::INPUT, bytes);
            self.direct.note_input_sent();
            return Ok(None);
        }
        if let Some(bytes) = typed_bytes {
            let (typed, act) = split_keys(&bytes, self.opts.detach_key, &mut self.prefix_at);
            if self.connected && !self.opts.read_only && !typed.is_empty() {
                let _ = send_frame(self.reader.stream(), frame::client::INPUT, &typed);
                self.direct.note_input_sent();
            }
            action = act;
        }
        if action.is_none() && self.prefix_at.is_some_and(|at| at.elapsed() >= PREFIX_WAIT) {
            action = Some(PrefixAction::Detach);
        }
        Ok(action)
    }

    /// The scroll mode, over the pane's history; back to the pane after.
    fn scroll(&mut self, target: &str, page_up: bool) -> Result<Option<AttachEnd>, ClientError> {
        // The scroll mode draws on the terminal: the server must have
        // stopped writing to it first.
        let pause = frame::client::DIRECT_PAUSE;
        if let direct::Settled::Exit(payload) =
            self.direct
                .settle(&mut self.reader, &mut self.output, pause)?
        {
            return Ok(self.exit(&payload));
        }
        let outcome = scroll::run(
            self.paths,
            target,
            &mut self.reader,
            &mut self.signals,
            &self.end_flag,
            page_up,
        )?;
        match outcome {
            scroll::Outcome::Done => {
                self.size = send_size(&self.reader, self.connected, self.size);
                let _ = send_frame(self.reader.stream(), frame::client::REDRAW, &[]);
                self.direct.offer(self.reader.stream());
            }
            scroll::Outcome::Exit(payload) => return Ok(self.exit(&payload)),
            scroll::Outcome::Signal => {
                return Ok(Some(self.end("[ptyd: terminal closed]".into(), 1)));
            }
            scroll::Outcome::Lost => {
                // Seen by the next read as a dropped connection.
                let _ = send_frame(self.reader.stream(), frame::client::REDRAW, &[]);
            }
        }
        Ok(None)
    }

    /// Reads what the server sent; a connection that dropped is said so.
    fn read_socket(&mut self) {
        if matches!(self.reader.fill(), Ok(true)) {
            return;
        }
        self.lost("connection to the server lost; retrying");
    }

    /// The connection is gone (`why`): says so, and reconnects from the
    /// next turn on.
    fn lost(&mut self, why: &str) {
        self.connected = false;
        // The server's copy of the terminal went with it.
        self.direct.reset();
        self.lost_at = Instant::now();
        write_stdout(super::lost_line(why).as_bytes());
    }

    /// Tries to attach again, for at most [`RECONNECT_FOR`].
    fn reconnect(&mut self) -> Option<AttachEnd> {
        if self.lost_at.elapsed() >= RECONNECT_FOR {
            return Some(self.end(super::gave_up_line(), 1));
        }
        let mut params = self.opts.params(self.size, false);
        if let Some(told) = &self.told {
            told.apply(&mut params);
        }
        if let Ok(client) = Client::connect(self.paths, false)
            && let Ok((_, r)) = client::attach(client, params)
        {
            self.reader = r;
            self.connected = true;
            self.direct.offer(self.reader.stream());
        }
        None
    }
}

/// Sends the terminal's size if it changed; returns the size now.
fn send_size(
    reader: &FrameReader,
    connected: bool,
    size: Option<(u16, u16)>,
) -> Option<(u16, u16)> {
    let new_size = terminal_size(&io::stdout());
    if new_size != size
        && connected
        && let Some((cols, rows)) = new_size
    {
        let _ = send_frame(
            reader.stream(),
            frame::client::RESIZE,
            &frame::resize_payload(cols, rows),
        );
    }
    new_size
}

/// `ptyd run`: creates a pane attached read-only on this connection, mirrors
/// its output to stdout and returns its shell-style exit code, or 124 if the
/// pane's `--timeout`/`--idle-timeout` ended it. SIGINT or SIGTERM kill the
/// pane (the exit status then says so). When stdout is not a terminal the
/// PTY's CR LF line ends are written as LF. With `remove`, the pane is
/// removed once it has exited.
pub fn run_mirror(
    paths: &NamespacePaths,
    create: methods::PaneCreate,
    remove: bool,
) -> Result<i32, ClientError> {
    let mut signals =
        SignalPipe::new(&[sys::SIGINT, sys::SIGTERM, sys::SIGHUP]).map_err(|e| ClientError {
            kind: ErrorKind::Io,
            message: format!("installing signal handlers: {e}"),
        })?;
    let (pane_id, mut reader) = start_mirror(paths, create)?;
    let mut output = TerminalOutput::default();
    if !std::io::IsTerminal::is_terminal(&io::stdout()) {
        output.line_ends = Some(CrlfToLf::default());
    }
    let mut kill_sent = false;
    loop {
        // A mirror never offers its terminal: no direct-output frames come.
        if let BatchEnd::Exit(payload) = output.write_buffered(&mut reader)? {
            output.finish();
            return run_ended(&payload, &pane_id, remove, paths);
        }
        let ready = poll_readable(
            &[reader.stream().as_raw_fd(), signals.read.as_raw_fd()],
            None,
        )
        .map_err(|e| ClientError {
            kind: ErrorKind::Io,
            message: format!("poll: {e}"),
        })?;
        if ready[1] && signals.drain() && !kill_sent {
            kill_sent = true;
            let mut killer = Client::connect(paths, false)?;
            // A command `ptyd run` waits for is interrupted as a
            // foreground job would be, not hung up as a closing terminal.
            killer.request(&Request::PaneKill(methods::PaneKill {
                target: pane_id.clone(),
                signal: Some("TERM".into()),
                grace_ms: None,
            }))?;
        }
        if ready[0] && !matches!(reader.fill(), Ok(true)) {
            return Err(mirror_lost(&pane_id));
        }
    }
}

// Direct output: the server writes to this terminal itself.
mod direct;
