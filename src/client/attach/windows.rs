//! The attach client and the output mirror on a Windows console.
//!
//! The console goes into raw VT mode for the attachment
//! (`sys::AttachedConsole`: keys as VT sequences, size changes reported,
//! VT output), typed bytes go to the pane as on Unix, with the same detach
//! key (pressed twice it is sent through). What differs:
//!
//! - No poll(2) over stdin and the socket. The client's pipe is opened for
//!   synchronous I/O, on which a read in progress holds back every write,
//!   so one thread does both: it waits on the console input handle (which
//!   is signalled while input is pending) for at most [`TICK`], then takes
//!   whatever output the pipe holds (`sys::pipe_bytes_available`, so the
//!   read never blocks). Output is thus at most [`TICK`] late.
//! - Resizes arrive as `WINDOW_BUFFER_SIZE_EVENT` records among the keys,
//!   not as SIGWINCH.
//! - The scroll mode (prefix, `[`) is not available yet: the prefix then
//!   does nothing.

use super::{
    AttachEnd, AttachOptions, CrlfToLf, PREFIX_WAIT, PrefixAction, RECONNECT_EVERY, RECONNECT_FOR,
    end_from_exit, mirror_lost, run_ended, server_restarts, split_keys, start_mirror,
};
use crate::client::{
    Client, ClientError, ErrorKind, FrameReader, ServerFrame, send_frame, terminal_size,
};
use crate::paths::NamespacePaths;
use crate::protocol::frame;
use crate::protocol::methods;
use crate::sys;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// The longest output waits for the client to look (see the module doc).
const TICK: Duration = Duration::from_millis(10);

fn io_error(what: &str, e: io::Error) -> ClientError {
    ClientError {
        kind: ErrorKind::Io,
        message: format!("{what}: {e}"),
    }
}

/// Writes what the server sent that is buffered already; the EXIT
/// frame's payload once it comes.
fn write_buffered(
    reader: &mut FrameReader,
    out: &mut impl Write,
    line_ends: Option<&mut CrlfToLf>,
) -> Result<Option<serde_json::Value>, ClientError> {
    let mut line_ends = line_ends;
    while let Some(frame) = reader.next_buffered()? {
        match frame {
            ServerFrame::Output(bytes) => {
                let bytes = match line_ends.as_deref_mut() {
                    Some(convert) => convert.convert(&bytes),
                    None => bytes,
                };
                // A console that is gone ends the attachment through the
                // pipe or the input; nothing to do about it here.
                let _ = out.write_all(&bytes);
            }
            ServerFrame::Exit(payload) => {
                let _ = out.flush();
                return Ok(Some(payload));
            }
        }
    }
    let _ = out.flush();
    Ok(None)
}

/// Reads what the pipe holds, without blocking; `false` once the server
/// is gone.
fn take_pipe_output(reader: &mut FrameReader) -> bool {
    match sys::pipe_bytes_available(reader.stream()) {
        Ok(0) => true,
        Ok(_) => matches!(reader.fill(), Ok(true)),
        Err(_) => false,
    }
}

/// Attaches the console to a pane until detach or the end of the pane.
/// A server that restarts (a restore-mode upgrade, the only upgrade here)
/// or goes away is reached again for [`RECONNECT_FOR`], as on Unix.
pub fn run_attach(
    paths: &NamespacePaths,
    opts: &AttachOptions,
    first: Option<FrameReader>,
) -> Result<AttachEnd, ClientError> {
    let console = sys::AttachedConsole::enter().map_err(|e| ClientError {
        kind: ErrorKind::NotATerminal,
        message: format!("attaching needs a console: {e}"),
    })?;
    let mut reader = match first {
        Some(r) => r,
        None => {
            let client = Client::connect(paths, false)?;
            super::super::attach(client, opts.params(terminal_size(&io::stdout()), true))?.1
        }
    };
    let mut out = io::stdout().lock();
    if opts.alt_screen {
        let _ = out.write_all(b"\x1b[?1049h\x1b[H\x1b[2J");
    }
    let end = |message: String, exit_code: i32| {
        let mut out = io::stdout().lock();
        if opts.alt_screen {
            let _ = out.write_all(b"\x1b[?1049l");
        }
        let _ = out.flush();
        AttachEnd {
            message,
            exit_code,
            screen_restored: opts.alt_screen,
        }
    };
    let mut size = terminal_size(&io::stdout());
    let mut prefix_at: Option<Instant> = None;
    // Since when the server is out of reach, and when it was last tried.
    let mut lost: Option<(Instant, Instant)> = None;
    loop {
        if lost.is_none()
            && let Some(payload) = write_buffered(&mut reader, &mut out, None)?
        {
            if server_restarts(&payload) {
                lost = Some(lost_now(&mut out, "the server restarted; reconnecting"));
            } else {
                drop(out);
                drop(console);
                let e = end_from_exit(&payload);
                return Ok(end(e.message, e.exit_code));
            }
        }
        let wait = prefix_at.map_or(TICK, |at| {
            PREFIX_WAIT.saturating_sub(at.elapsed()).min(TICK)
        });
        let (typed, resized) = console
            .read(wait)
            .map_err(|e| io_error("reading the console", e))?;
        let connected = lost.is_none();
        let mut action = None;
        // The tab view's keys, its prefix included, are the server's; only
        // while it is out of reach does the prefix work here (to give up).
        if !typed.is_empty() && opts.tab_view && connected {
            let _ = send_frame(reader.stream(), frame::client::INPUT, &typed);
        } else if !typed.is_empty() {
            let (keys, act) = split_keys(&typed, opts.detach_key, &mut prefix_at);
            if connected && !opts.read_only && !keys.is_empty() {
                let _ = send_frame(reader.stream(), frame::client::INPUT, &keys);
            }
            action = act;
        }
        if action.is_none() && prefix_at.is_some_and(|at| at.elapsed() >= PREFIX_WAIT) {
            action = Some(PrefixAction::Detach);
        }
        if let Some(PrefixAction::Detach) = action {
            if connected {
                let _ = send_frame(reader.stream(), frame::client::DETACH, &[]);
            }
            drop(out);
            drop(console);
            return Ok(end(super::detached_line(&opts.target), 0));
        }
        if resized {
            let now = terminal_size(&io::stdout());
            if now != size
                && connected
                && let Some((cols, rows)) = now
            {
                let _ = send_frame(
                    reader.stream(),
                    frame::client::RESIZE,
                    &frame::resize_payload(cols, rows),
                );
            }
            size = now;
        }
        match &mut lost {
            None => {
                if !take_pipe_output(&mut reader) {
                    lost = Some(lost_now(
                        &mut out,
                        "connection to the server lost; retrying",
                    ));
                }
            }
            Some((since, _)) if since.elapsed() >= RECONNECT_FOR => {
                drop(out);
                drop(console);
                return Ok(end(super::gave_up_line(), 1));
            }
            Some((_, tried)) if tried.elapsed() >= RECONNECT_EVERY => {
                *tried = Instant::now();
                if let Ok(client) = Client::connect(paths, false)
                    && let Ok((_, r)) = super::super::attach(client, opts.params(size, false))
                {
                    reader = r;
                    lost = None;
                }
            }
            Some(_) => {}
        }
    }
}

/// Says the server is out of reach (`why`); the times for [`run_attach`]'s
/// reconnection, starting now.
fn lost_now(out: &mut impl Write, why: &str) -> (Instant, Instant) {
    let _ = out.write_all(super::lost_line(why).as_bytes());
    let _ = out.flush();
    let now = Instant::now();
    (now, now - RECONNECT_EVERY)
}

/// `ptyd run`: creates a pane attached read-only on this connection,
/// mirrors its output to stdout and returns its shell-style exit code, or
/// 124 if the pane's `--timeout`/`--idle-timeout` ended it. Output to
/// anything but a console has its CR LF line ends written as LF. With
/// `remove`, the pane is removed once it has exited. (Ctrl+C ends this
/// client, not the pane, on Windows yet.)
pub fn run_mirror(
    paths: &NamespacePaths,
    create: methods::PaneCreate,
    remove: bool,
) -> Result<i32, ClientError> {
    let (pane_id, mut reader) = start_mirror(paths, create)?;
    let mut line_ends = (!std::io::IsTerminal::is_terminal(&io::stdout())).then(CrlfToLf::default);
    let mut out = io::stdout().lock();
    loop {
        if let Some(payload) = write_buffered(&mut reader, &mut out, line_ends.as_mut())? {
            // A CR held back in case an LF followed.
            if let Some(convert) = line_ends.as_mut() {
                let _ = out.write_all(convert.finish());
                let _ = out.flush();
            }
            return run_ended(&payload, &pane_id, remove, paths);
        }
        // Only reading here: a blocking read holds back no write.
        if !matches!(reader.fill(), Ok(true)) {
            return Err(mirror_lost(&pane_id));
        }
    }
}
