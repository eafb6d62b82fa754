//! The interactive attach client and the output mirror behind `ptyd run`.
//!
//! The attach client puts the user's terminal in raw mode (restored on every
//! way out: detach, pane exit, server loss, signals, panic), forwards typed
//! bytes and window sizes, and writes pane output. The detach key works at
//! every moment, connected or not. When the server connection drops without a
//! final EXIT frame it shows a status line and retries for a bounded time.
//!
//! It uses poll(2) directly: three fds, level-triggered, and blocking writes
//! are fine on this side.
//!
//! Windows: the options, keys, exit messages and CR LF handling are
//! shared; the loops over the console are `attach/windows_console.rs`
//! (what only the Unix loops use is allowed to be dead there).

#![cfg_attr(windows, allow(unused_imports, dead_code))]

use super::{BatchEnd, Client, ClientError, FrameReader, send_frame, terminal_size};
use crate::paths::NamespacePaths;
use crate::protocol::frame;
use crate::protocol::methods::{self, Request};
use crate::protocol::replies::{ExitInfo, PaneInfo};
use crate::sys;
use serde::Deserialize;
use serde_json::Value;
use std::io::{self, Read};
#[cfg(unix)]
use std::os::fd::{AsRawFd, RawFd};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(unix)]
/// How long the client keeps trying to reach a server that went away.
const RECONNECT_FOR: Duration = Duration::from_secs(15);
#[cfg(unix)]
const RECONNECT_EVERY: Duration = Duration::from_millis(250);

#[cfg(unix)]
/// Modes a pane's program may have switched on in the user's terminal; all
/// switched off when we leave so the shell gets a sane terminal back.
const MODES_RESET: &[u8] = b"\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1004l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[<u\x1b[>4;0m\x1b[0m\x1b[?25h\x1b[?7h\x1b[4l\x1b[?2026l";

#[cfg(unix)]
/// Whether this attachment put the terminal on its alternate screen (so
/// leaving must switch back, which restores the screen of before).
static ALT_SCREEN: AtomicBool = AtomicBool::new(false);

/// How long after the detach (prefix) key the client waits for a second
/// key (the key again: sent through; `[`: scroll mode) before detaching.
const PREFIX_WAIT: Duration = Duration::from_millis(400);

#[cfg(unix)]
/// The original terminal settings, for restoring from a panic hook too.
static SAVED_TERMIOS: Mutex<Option<sys::StdinMode>> = Mutex::new(None);

/// What ended an attachment, and the exit code the CLI should use.
pub struct AttachEnd {
    pub message: String,
    pub exit_code: i32,
    /// The terminal's screen of before the attach is back (the attachment
    /// used the alternate screen), with the cursor where it was: the
    /// message needs no fresh line of its own.
    pub screen_restored: bool,
}

pub struct AttachOptions {
    pub target: String,
    pub read_only: bool,
    /// The byte that detaches (Ctrl-\ = 0x1c by default); also the prefix
    /// of the client's other keys: pressed twice it is sent to the pane,
    /// followed by `[` (or PageUp) it opens the scroll mode.
    pub detach_key: u8,
    /// Keep the terminal on its alternate screen while attached.
    pub alt_screen: bool,
    /// History lines printed into the terminal's scrollback at the first
    /// attach (not with `alt_screen`: that screen has no scrollback).
    pub history: u32,
    /// The pane this client runs in, if it is one of this server's.
    pub from_pane: Option<String>,
    /// What the server does when this terminal falls behind the pane's
    /// output: `Redraw` (the default of `ptyd attach`: the pane goes on,
    /// and the terminal is shown its screen once it has caught up, as
    /// tmux does) or `Pause` (`--lossless`: every byte, the pane waits).
    pub when_behind: methods::WhenBehind,
    /// Unix: offer the server this terminal, for it to write the pane's
    /// output to directly (`attach/direct.rs`); `--no-direct`, config
    /// `attach_direct = false` or `PTYD_ATTACH_DIRECT=0` keep output
    /// going through the client.
    pub direct: bool,
}

impl AttachOptions {
    /// The `attach` request; `first` for the attachment that starts, not a
    /// reconnection (which prints no history again).
    pub fn params(&self, size: Option<(u16, u16)>, first: bool) -> methods::Attach {
        methods::Attach {
            target: self.target.clone(),
            read_only: self.read_only,
            cols: size.map(|s| s.0),
            rows: size.map(|s| s.1),
            history: (first && !self.alt_screen && self.history > 0).then_some(self.history),
            alt_screen: self.alt_screen,
            from_pane: self.from_pane.clone(),
            // `ptyd attach -d` sets it on the first request only.
            detach_others: false,
            when_behind: self.when_behind,
        }
    }
}

pub use crate::keys::parse_detach_key;

#[cfg(unix)]
/// Raw mode for the life of the guard.
struct RawMode;

#[cfg(unix)]
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

#[cfg(unix)]
impl Drop for RawMode {
    fn drop(&mut self) {
        restore_terminal();
    }
}

#[cfg(unix)]
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

#[cfg(unix)]
/// How long a client told to end (SIGTERM, SIGHUP, SIGINT) may take.
const END_GRACE: Duration = Duration::from_secs(2);

#[cfg(unix)]
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
                // SAFETY: ends the process at once, with no destructors or
                // buffered writes that could block again.
                unsafe { libc::_exit(1) };
            });
    });
}

#[cfg(unix)]
/// A self-pipe that signal handlers write to, so poll wakes on signals.
pub(super) struct SignalPipe {
    pub(super) read: std::fs::File,
    ids: Vec<signal_hook::SigId>,
}

#[cfg(unix)]
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
    pub(super) fn drain(&mut self) -> bool {
        let mut buf = [0u8; 64];
        let mut any = false;
        while matches!(self.read.read(&mut buf), Ok(n) if n > 0) {
            any = true;
        }
        any
    }
}

#[cfg(unix)]
impl Drop for SignalPipe {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[cfg(unix)]
/// poll(2) over a few fds; returns which are readable (or hung up). A
/// signal ending the wait early makes none ready: the signal pipe then is.
pub(super) fn poll_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    match sys::poll_readable(fds, timeout) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(vec![false; fds.len()]),
        other => other,
    }
}

#[cfg(unix)]
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

#[cfg(unix)]
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
                code: "protocol_error".into(),
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

#[cfg(unix)]
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

#[cfg(unix)]
/// Writes all of `bytes` to fd 1, waiting while it is full. Errors end the
/// write silently, as before: the terminal is gone and the attachment ends
/// through its other fds.
pub(super) fn write_stdout(mut bytes: &[u8]) {
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

#[cfg(unix)]
/// Attaches the user's terminal to a pane until detach or the end of the
/// pane. `first` is an already-attached connection (from `ptyd new`, or
/// the attach request the CLI made to fail early), if any.
pub fn run_attach(
    paths: &NamespacePaths,
    opts: &AttachOptions,
    first: Option<FrameReader>,
) -> Result<AttachEnd, ClientError> {
    let mut signals = SignalPipe::new(&[sys::SIGWINCH, sys::SIGTERM, sys::SIGHUP, sys::SIGINT])
        .map_err(|e| ClientError {
            code: "io".into(),
            message: format!("installing signal handlers: {e}"),
        })?;
    let mut reader = match first {
        Some(r) => r,
        None => {
            let client = Client::connect(paths, false)?;
            super::attach(client, opts.params(terminal_size(&io::stdout()), true))?.1
        }
    };
    // Set by a terminating signal, as opposed to SIGWINCH.
    let end_flag = Arc::new(AtomicBool::new(false));
    for sig in [sys::SIGTERM, sys::SIGHUP, sys::SIGINT] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&end_flag));
    }
    start_end_watchdog();
    let raw = RawMode::enter();
    if raw.is_some() && opts.alt_screen {
        // Saves the cursor and the screen as they are: detaching gives them
        // back (the pane's own switches never reach this client).
        ALT_SCREEN.store(true, Ordering::Relaxed);
        write_stdout(b"\x1b[?1049h\x1b[H\x1b[2J");
    }
    let screen_restored = raw.is_some() && opts.alt_screen;
    let end = |message: String, exit_code: i32| AttachEnd {
        message,
        exit_code,
        screen_restored,
    };
    let mut size = terminal_size(&io::stdout());
    let mut input = [0u8; 16 * 1024];
    let mut connected = true;
    let mut lost_at = Instant::now();
    let mut output = TerminalOutput::default();
    // When the prefix (detach) key was pressed and no second key came yet.
    let mut prefix_at: Option<Instant> = None;
    let mut direct = direct::DirectOutput::new(opts.direct, opts.read_only, opts.detach_key);
    // Keys the server read and handed back (`KEYS_OFF`: from the prefix
    // key on), handled as typed before the terminal is read again.
    let mut handed_back: Vec<u8> = Vec::new();
    // After what this client wrote itself (the alternate screen): the
    // server holds its output until the answer to DIRECT_ON anyway.
    direct.offer(reader.stream());
    // Leaving: the server must be done writing to the terminal before the
    // caller restores it (DETACH, or DIRECT_PAUSE, sent and answered).
    let settle = |direct: &mut direct::DirectOutput,
                  reader: &mut FrameReader,
                  output: &mut TerminalOutput,
                  kind: u8,
                  connected: bool| {
        if connected {
            let _ = direct.settle(reader, output, kind);
        }
    };
    loop {
        // Frames already buffered first: poll knows nothing of them.
        if connected {
            loop {
                match output.write_buffered(&mut reader)? {
                    BatchEnd::More | BatchEnd::Oversized => break,
                    BatchEnd::Exit(payload) => {
                        let e = end_from_exit(&payload);
                        return Ok(end(e.message, e.exit_code));
                    }
                    BatchEnd::DirectOn(payload) => direct.on_direct_on(&payload, reader.stream()),
                    BatchEnd::DirectOff(payload) => direct.on_direct_off(&payload, reader.stream()),
                    BatchEnd::KeysOff(reason, rest) => {
                        direct.on_keys_off(&reason);
                        handed_back.extend_from_slice(&rest);
                    }
                }
            }
            // Back to plain typing, every byte read sent: the keys go to
            // the server (if it writes to the terminal and reads keys).
            if handed_back.is_empty() && prefix_at.is_none() {
                direct.give_keys(reader.stream());
            }
        }
        let sock_fd = reader.stream().as_raw_fd();
        // While the server reads the keys, the terminal is not read here
        // (poll skips a negative fd).
        let stdin_fd = if direct.keys_given() { -1 } else { 0 };
        let fds = if connected {
            vec![stdin_fd, signals.read.as_raw_fd(), sock_fd]
        } else {
            vec![stdin_fd, signals.read.as_raw_fd()]
        };
        let mut timeout = (!connected).then_some(RECONNECT_EVERY);
        if let Some(at) = prefix_at {
            let left = PREFIX_WAIT.saturating_sub(at.elapsed());
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        if !handed_back.is_empty() {
            timeout = Some(Duration::ZERO);
        }
        let ready = poll_readable(&fds, timeout).map_err(|e| ClientError {
            code: "io".into(),
            message: format!("poll: {e}"),
        })?;
        if ready[1] && signals.drain() {
            if end_flag.load(Ordering::Relaxed) {
                let pause = frame::client::DIRECT_PAUSE;
                settle(&mut direct, &mut reader, &mut output, pause, connected);
                return Ok(end("[ptyd: terminal closed]".into(), 1));
            }
            size = send_size(&reader, connected, size);
        }
        let mut action = None;
        // What was typed: handed back by the server first, else read now.
        let mut typed_bytes = None;
        if !handed_back.is_empty() {
            typed_bytes = Some(std::mem::take(&mut handed_back));
        } else if ready[0] {
            match sys::read_stdin(&mut input) {
                Ok(0) => {
                    let pause = frame::client::DIRECT_PAUSE;
                    settle(&mut direct, &mut reader, &mut output, pause, connected);
                    return Ok(end("[ptyd: input closed; detached]".into(), 0));
                }
                // A failed read (EINTR, EAGAIN) is tried again on the next turn.
                Err(_) => {}
                Ok(n) => typed_bytes = Some(input[..n].to_vec()),
            }
        }
        if let Some(bytes) = typed_bytes {
            let (typed, act) = split_keys(&bytes, opts.detach_key, &mut prefix_at);
            if connected && !opts.read_only && !typed.is_empty() {
                let _ = send_frame(reader.stream(), frame::client::INPUT, &typed);
                direct.note_input_sent();
            }
            action = act;
        }
        if action.is_none() && prefix_at.is_some_and(|at| at.elapsed() >= PREFIX_WAIT) {
            action = Some(PrefixAction::Detach);
        }
        match action {
            Some(PrefixAction::Detach) => {
                // Waits (bounded) for the server to stop writing to the
                // terminal: none of its writes may land after the restore.
                let detach = frame::client::DETACH;
                settle(&mut direct, &mut reader, &mut output, detach, connected);
                return Ok(end("[ptyd: detached]".into(), 0));
            }
            Some(PrefixAction::Scroll { page_up }) if connected => {
                // The scroll mode draws on the terminal: the server must
                // have stopped writing to it first.
                let pause = frame::client::DIRECT_PAUSE;
                if let direct::Settled::Exit(payload) =
                    direct.settle(&mut reader, &mut output, pause)?
                {
                    let e = end_from_exit(&payload);
                    return Ok(end(e.message, e.exit_code));
                }
                let outcome = super::scroll::run(
                    paths,
                    &opts.target,
                    &mut reader,
                    &mut signals,
                    &end_flag,
                    page_up,
                )?;
                match outcome {
                    super::scroll::Outcome::Done => {
                        size = send_size(&reader, connected, size);
                        let _ = send_frame(reader.stream(), frame::client::REDRAW, &[]);
                        direct.offer(reader.stream());
                    }
                    super::scroll::Outcome::Exit(payload) => {
                        let e = end_from_exit(&payload);
                        return Ok(end(e.message, e.exit_code));
                    }
                    super::scroll::Outcome::Signal => {
                        return Ok(end("[ptyd: terminal closed]".into(), 1));
                    }
                    super::scroll::Outcome::Lost => {
                        // Seen below as a dropped connection.
                        let _ = send_frame(reader.stream(), frame::client::REDRAW, &[]);
                    }
                }
            }
            _ => {}
        }
        if connected && ready[2] {
            match reader.fill() {
                Ok(true) => {}
                Ok(false) | Err(_) => {
                    connected = false;
                    // The server's copy of the terminal went with it.
                    direct.reset();
                    lost_at = Instant::now();
                    write_stdout(
                        format!("\r\n[ptyd: connection to the server lost; retrying for {} s; press the detach key to give up]\r\n", RECONNECT_FOR.as_secs())
                            .as_bytes(),
                    );
                }
            }
        }
        if !connected {
            if lost_at.elapsed() >= RECONNECT_FOR {
                return Ok(end(
                    format!(
                        "[ptyd: could not reach the server for {} s; giving up]",
                        RECONNECT_FOR.as_secs()
                    ),
                    1,
                ));
            }
            if let Ok(client) = Client::connect(paths, false)
                && let Ok((_, r)) = super::attach(client, opts.params(size, false))
            {
                reader = r;
                connected = true;
                direct.offer(reader.stream());
            }
        }
    }
}

#[cfg(unix)]
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

/// What the key after the prefix asked for.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum PrefixAction {
    Detach,
    Scroll { page_up: bool },
}

/// Splits typed bytes into what goes to the pane and what the prefix
/// (detach) key does with the key after it: the prefix again sends it
/// through (tmux's prefix-prefix: the way to reach an attach client
/// running inside the pane), `[` or PageUp opens the scroll mode, anything
/// else detaches, as does no key within `PREFIX_WAIT` (the caller's
/// timer). Bytes after an action are dropped.
pub fn split_keys(
    bytes: &[u8],
    prefix: u8,
    prefix_at: &mut Option<Instant>,
) -> (Vec<u8>, Option<PrefixAction>) {
    let mut typed = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if prefix_at.take().is_some() {
            if b == prefix {
                typed.push(prefix);
                i += 1;
                continue;
            }
            let action = if b == b'[' {
                PrefixAction::Scroll { page_up: false }
            } else if bytes[i..].starts_with(b"\x1b[5~") {
                PrefixAction::Scroll { page_up: true }
            } else {
                PrefixAction::Detach
            };
            return (typed, Some(action));
        }
        if b == prefix {
            *prefix_at = Some(Instant::now());
        } else {
            typed.push(b);
        }
        i += 1;
    }
    (typed, None)
}

pub(crate) fn end_from_exit(payload: &Value) -> AttachEnd {
    let reason = payload["reason"].as_str().unwrap_or("unknown");
    let message = match reason {
        "pane_exited" => format!(
            "[ptyd: pane {} exited: {}]",
            payload["pane"].as_str().unwrap_or("?"),
            describe_exit(&payload["exit"])
        ),
        "detached" => "[ptyd: detached]".to_string(),
        _ => format!("[ptyd: {}]", payload["message"].as_str().unwrap_or(reason)),
    };
    let exit_code = match reason {
        "pane_exited" | "detached" => 0,
        _ => 1,
    };
    AttachEnd {
        message,
        exit_code,
        screen_restored: false,
    }
}

/// "code 3", "signal SIGKILL (killed)", from an `exit` member (an EXIT
/// frame's, a pane's).
pub fn describe_exit(exit: &Value) -> String {
    ExitInfo::deserialize(exit).map_or_else(|_| "unknown status".to_string(), |e| e.describe())
}

/// Line ends for a stdout that is not a terminal: a PTY's CR LF becomes LF
/// (a CR on its own is kept), across chunk boundaries.
#[derive(Default)]
pub struct CrlfToLf {
    pending_cr: bool,
}

impl CrlfToLf {
    pub fn convert(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + 1);
        for &b in bytes {
            if self.pending_cr {
                self.pending_cr = false;
                if b != b'\n' {
                    out.push(b'\r');
                }
            }
            if b == b'\r' {
                self.pending_cr = true;
            } else {
                out.push(b);
            }
        }
        out
    }

    /// A CR held back at the end of the output.
    pub fn finish(&mut self) -> &'static [u8] {
        if std::mem::take(&mut self.pending_cr) {
            b"\r"
        } else {
            b""
        }
    }
}

/// How `ptyd run` ends once its pane's EXIT frame (`payload`) came: the
/// pane's shell-style exit code, or 124 if its `--timeout`/`--idle-timeout`
/// ended it, after removing it with `remove`; an error if the attachment
/// ended for another reason than the pane exiting.
fn run_ended(
    payload: &Value,
    pane_id: &str,
    remove: bool,
    paths: &NamespacePaths,
) -> Result<i32, ClientError> {
    let timed_out = matches!(
        payload["exit"]["reason"].as_str(),
        Some("timeout" | "idle_timeout")
    );
    let code = if timed_out {
        crate::cli::TIMEOUT_EXIT
    } else {
        payload["exit"]["shell_code"].as_i64().unwrap_or(1) as i32
    };
    if payload["reason"] != "pane_exited" {
        return Err(ClientError {
            code: "detached".into(),
            message: format!(
                "pane {pane_id}: {}",
                payload["message"].as_str().unwrap_or("attachment ended")
            ),
        });
    }
    if remove {
        Client::connect(paths, false)?.request(&Request::PaneRemove(methods::PaneRemove {
            target: pane_id.to_string(),
            force: false,
        }))?;
    }
    Ok(code)
}

/// `ptyd run`'s start: the pane `create` describes, created attached
/// read-only on a connection of its own; its id and the stream its output
/// comes on.
fn start_mirror(
    paths: &NamespacePaths,
    create: methods::PaneCreate,
) -> Result<(String, FrameReader), ClientError> {
    let mut client = Client::connect(paths, true)?;
    let info: PaneInfo = client.request_as(&Request::PaneCreate(methods::PaneCreate {
        attach: true,
        read_only: true,
        ..create
    }))?;
    let (stream, leftover) = client.into_stream();
    Ok((info.id.to_string(), FrameReader::new(stream, leftover)))
}

/// The connection `ptyd run` mirrors pane `pane_id` on is gone without
/// the pane's EXIT frame.
fn mirror_lost(pane_id: &str) -> ClientError {
    ClientError {
        code: "disconnected".into(),
        message: format!(
            "lost the server connection while running pane {pane_id}; `ptyd ls` shows its state"
        ),
    }
}

#[cfg(unix)]
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
            code: "io".into(),
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
            code: "io".into(),
            message: format!("poll: {e}"),
        })?;
        if ready[1] && signals.drain() && !kill_sent {
            kill_sent = true;
            let mut killer = Client::connect(paths, false)?;
            killer.request(&Request::PaneKill(methods::PaneKill {
                target: pane_id.clone(),
                signal: None,
                grace_ms: None,
            }))?;
        }
        if ready[0] && !matches!(reader.fill(), Ok(true)) {
            return Err(mirror_lost(&pane_id));
        }
    }
}

// Direct output: the server writes to this terminal itself.
#[cfg(unix)]
mod direct;

// The Windows console's loops (`ptyd attach`, `ptyd run`).
#[cfg(windows)]
mod windows_console;
#[cfg(windows)]
pub use windows_console::{run_attach, run_mirror};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_key_detaches_sends_itself_or_opens_the_scroll_mode() {
        let mut at = None;
        // Typed bytes pass; the prefix alone waits for the next key.
        assert_eq!(split_keys(b"ls\x1c", 0x1c, &mut at), (b"ls".to_vec(), None));
        assert!(at.is_some());
        // The prefix twice: sent through once, nothing else happens.
        assert_eq!(
            split_keys(b"\x1cx", 0x1c, &mut at),
            (b"\x1cx".to_vec(), None)
        );
        assert!(at.is_none());
        let scroll = Some(PrefixAction::Scroll { page_up: false });
        assert_eq!(
            split_keys(b"a\x1c[rest", 0x1c, &mut at),
            (b"a".to_vec(), scroll)
        );
        let page = Some(PrefixAction::Scroll { page_up: true });
        assert_eq!(
            split_keys(b"\x1c\x1b[5~", 0x1c, &mut at),
            (Vec::new(), page)
        );
        let detach = Some(PrefixAction::Detach);
        assert_eq!(split_keys(b"\x1cd", 0x1c, &mut at), (Vec::new(), detach));
    }
}
