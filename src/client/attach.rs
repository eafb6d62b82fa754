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
//! What both OSes share is here: the options, the prefix keys, exit
//! messages and CR LF handling. The loops over the terminal are one
//! module per OS (`attach/unix.rs`, `attach/windows.rs`), swapped whole.

use super::{Client, ClientError, ErrorKind, FrameReader};
use crate::paths::NamespacePaths;
use crate::protocol::methods::{self, Request};
use crate::protocol::replies::{ExitInfo, PaneInfo};
use serde::Deserialize;
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long after the detach (prefix) key the client waits for a second
/// key (the key again: sent through; `[`: scroll mode) before detaching.
const PREFIX_WAIT: Duration = Duration::from_millis(400);

/// How long the client keeps trying to reach a server that went away or
/// restarts, and how often.
const RECONNECT_FOR: Duration = Duration::from_secs(15);
const RECONNECT_EVERY: Duration = Duration::from_millis(250);

/// The line a client shows when its server is out of reach (`why`).
fn lost_line(why: &str) -> String {
    format!(
        "\r\n[ptyd: {why} for up to {} s; press the detach key to give up]\r\n",
        RECONNECT_FOR.as_secs()
    )
}

/// The line after this client's own detach key, for the pane `target`
/// it attached to.
fn detached_line(target: &str) -> String {
    format!("[ptyd: detached from pane {target}]")
}

/// The end of a reconnection that never succeeded.
fn gave_up_line() -> String {
    format!(
        "[ptyd: could not reach the server for {} s; giving up]",
        RECONNECT_FOR.as_secs()
    )
}

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
    /// Show the target's whole tab (its panes, a status line, the keys
    /// under the prefix, all handled by the server); `false` is
    /// `--pane-only`: the pane alone, its prefix keys handled here.
    pub tab_view: bool,
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
            view: self.tab_view.then(|| methods::ViewSpec {
                prefix: Some(self.detach_key),
                ..Default::default()
            }),
            // Too big an environment only loses the refresh of
            // `update_environment`: no reason to refuse the attach.
            client_env: crate::environment::of_this_process().ok(),
        }
    }
}

/// The tab view the server last told a client (`VIEW`): handed back when
/// it reconnects, for the same tab, focus, zoom and scroll mode.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ToldView {
    pub tab: Option<crate::model::TabId>,
    pub focus: Option<crate::model::PaneId>,
    #[serde(default)]
    pub zoom: bool,
    #[serde(default)]
    pub scroll: Option<methods::ScrollSpec>,
}

impl ToldView {
    /// Puts this view into a reconnecting client's attach request: the
    /// focused pane as the target (the first one may be gone), the view.
    pub fn apply(&self, params: &mut methods::Attach) {
        if let Some(view) = &mut params.view {
            view.tab = self.tab;
            view.focus = self.focus;
            view.zoom = Some(self.zoom);
            view.scroll = self.scroll.clone();
            if let Some(focus) = self.focus {
                params.target = focus.to_string();
            }
        }
    }
}

pub use crate::keys::parse_detach_key;

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
        "detached" => {
            let from = match (payload["tab"].as_str(), payload["pane"].as_str()) {
                (Some(tab), Some(pane)) => format!(" from tab {tab} (pane {pane})"),
                (None, Some(pane)) => format!(" from pane {pane}"),
                _ => String::new(),
            };
            // Why, when another than this client's own detach key did it.
            let why = payload["message"]
                .as_str()
                .and_then(|m| m.strip_prefix("detached"))
                .unwrap_or("");
            format!("[ptyd: detached{from}{why}]")
        }
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

/// Whether an EXIT frame's `payload` says the server restarts (a
/// restore-mode upgrade): the session comes back at once, and the client
/// reconnects as after a crash of the server.
pub(crate) fn server_restarts(payload: &Value) -> bool {
    payload["reason"] == "server_restart"
}

/// "code 3", "killed by SIGTERM after ptyd kill", from an `exit` member (an EXIT
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
            kind: ErrorKind::Detached,
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
        kind: ErrorKind::Disconnected,
        message: format!(
            "lost the server connection while running pane {pane_id}; `ptyd ls` shows its state"
        ),
    }
}

// The loops over the terminal (`ptyd attach`, `ptyd run`): poll(2) over
// the terminal, the socket and a signal pipe on Unix, the console's input
// handle on Windows.
#[cfg_attr(unix, path = "attach/unix.rs")]
#[cfg_attr(windows, path = "attach/windows.rs")]
pub(in crate::client) mod tty;
pub use tty::{run_attach, run_mirror};

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
