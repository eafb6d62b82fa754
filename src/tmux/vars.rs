//! The format variables of a session, window and pane, as tmux names them
//! (tmux(1) "FORMATS"). What ptyd has no notion of reads as tmux's value
//! for the plain case (`session_group` empty, `pane_in_mode` 0). A few
//! need the pane's screen or the server's status; those are fetched only
//! when the format names them.

use super::format::{self, Lookup};
use super::view::{At, View};
use super::{Ctx, Failure};
use serde_json::{Value, json};

/// Expands `format` for the pane at `at` (a session's or window's row
/// uses its active pane).
pub fn expand(ctx: &mut Ctx, at: At, format: &str) -> Result<String, Failure> {
    expand_with(ctx, at, format, &[])
}

/// As `expand`, with variables of something other than the tree (a
/// client's), looked up first.
pub fn expand_with(
    ctx: &mut Ctx,
    at: At,
    format: &str,
    extra: &[(&str, String)],
) -> Result<String, Failure> {
    let needs_screen = [
        "cursor_",
        "history_size",
        "alternate_",
        "scroll_region",
        "_flag",
        "pane_title",
    ]
    .iter()
    .any(|n| format.contains(n));
    let needs_server = format.contains("pid") || format.contains("start_time");
    let server = if needs_server {
        ctx.call("server.status", json!({}))?
    } else {
        Value::Null
    };
    let has_pane = ctx.view()?.has_pane(at);
    let screen = if needs_screen && has_pane {
        let id = ctx.view()?.pane(at).id();
        ctx.call("pane.capture", json!({"target": id, "start": 0, "end": 0}))
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let socket = ctx.socket_path();
    let titles = super::options::Store::load(&ctx.paths.runtime_dir);
    let view = ctx.view()?;
    let vars = Vars {
        view,
        at,
        has_pane,
        server: &server,
        screen: &screen,
        socket: &socket,
        titles: &titles,
        extra,
    };
    Ok(format::expand(format, &vars))
}

/// Every variable the front gives a value, by name (`display-message -a`
/// lists them all).
pub const NAMES: &[&str] = &[
    "active_window_index",
    "alternate_on",
    "alternate_saved_x",
    "alternate_saved_y",
    "bracket_paste_flag",
    "cursor_flag",
    "cursor_x",
    "cursor_y",
    "history_bytes",
    "history_limit",
    "history_size",
    "host",
    "host_short",
    "insert_flag",
    "last_window_index",
    "keypad_cursor_flag",
    "keypad_flag",
    "mouse_all_flag",
    "mouse_any_flag",
    "mouse_button_flag",
    "mouse_sgr_flag",
    "mouse_standard_flag",
    "origin_flag",
    "pane_active",
    "pane_at_bottom",
    "pane_at_left",
    "pane_at_right",
    "pane_at_top",
    "pane_bottom",
    "pane_current_command",
    "pane_current_path",
    "pane_dead",
    "pane_dead_signal",
    "pane_dead_status",
    "pane_dead_time",
    "pane_format",
    "pane_height",
    "pane_id",
    "pane_in_mode",
    "pane_index",
    "pane_input_off",
    "pane_last",
    "pane_left",
    "pane_marked",
    "pane_marked_set",
    "pane_mode",
    "pane_pid",
    "pane_pipe",
    "pane_right",
    "pane_search_string",
    "pane_start_command",
    "pane_start_path",
    "pane_synchronized",
    "pane_title",
    "pane_top",
    "pane_tty",
    "pane_unseen_changes",
    "pane_width",
    "pid",
    "scroll_region_lower",
    "scroll_region_upper",
    "session_active",
    "session_activity",
    "session_alerts",
    "session_attached",
    "session_created",
    "session_format",
    "session_group",
    "session_group_list",
    "session_group_size",
    "session_grouped",
    "session_id",
    "session_last_attached",
    "session_many_attached",
    "session_name",
    "session_path",
    "session_stack",
    "session_windows",
    "socket_path",
    "start_time",
    "version",
    "window_active",
    "window_activity_flag",
    "window_bell_flag",
    "window_end_flag",
    "window_flags",
    "window_height",
    "window_id",
    "window_index",
    "window_last_flag",
    "window_layout",
    "window_linked",
    "window_marked_flag",
    "window_name",
    "window_offset_x",
    "window_offset_y",
    "window_panes",
    "window_raw_flags",
    "window_silence_flag",
    "window_start_flag",
    "window_visible_layout",
    "window_width",
    "window_zoomed_flag",
    "wrap_flag",
];

struct Vars<'a> {
    view: &'a View,
    at: At,
    has_pane: bool,
    server: &'a Value,
    screen: &'a Value,
    socket: &'a str,
    /// The front's store: titles given with `select-pane -T` (by pane,
    /// `%N`), options, input turned off.
    titles: &'a super::options::Store,
    extra: &'a [(&'a str, String)],
}

fn flag(b: bool) -> String {
    if b { "1" } else { "0" }.to_string()
}

impl Lookup for Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        if let Some((_, v)) = self.extra.iter().find(|(n, _)| *n == name) {
            return Some(v.clone());
        }
        if let Some(v) = self.server_var(name) {
            return Some(v);
        }
        if let Some(v) = self.session_var(name) {
            return Some(v);
        }
        if let Some(v) = self.window_var(name) {
            return Some(v);
        }
        if self.has_pane {
            return self.pane_var(name);
        }
        None
    }
}

impl Vars<'_> {
    fn mode(&self, name: &str) -> bool {
        self.screen["modes"][name].as_bool().unwrap_or(false)
    }

    fn mouse(&self) -> &str {
        self.screen["modes"]["mouse"].as_str().unwrap_or("off")
    }

    fn server_var(&self, name: &str) -> Option<String> {
        Some(match name {
            "pid" => self.server["pid"].as_u64()?.to_string(),
            "version" => super::TMUX_VERSION.to_string(),
            "socket_path" => self.socket.to_string(),
            "host" | "host_short" => {
                let host = hostname().unwrap_or_default();
                if name == "host_short" {
                    host.split('.').next().unwrap_or("").to_string()
                } else {
                    host
                }
            }
            "start_time" => {
                (self.server["started_unix_ms"].as_u64().unwrap_or(0) / 1000).to_string()
            }
            _ => return None,
        })
    }

    fn session_var(&self, name: &str) -> Option<String> {
        let s = self.view.sessions.get(self.at.session)?;
        let attached = s
            .windows
            .iter()
            .flat_map(|w| &w.panes)
            .map(|p| p.info["attached_clients"].as_u64().unwrap_or(0))
            .max()
            .unwrap_or(0);
        Some(match name {
            "session_name" => s.name.clone(),
            "session_id" => format!("${}", s.num),
            "session_windows" => s.windows.len().to_string(),
            "session_attached" => attached.to_string(),
            "session_many_attached" => flag(attached > 1),
            "session_created" | "session_activity" | "session_last_attached" => {
                s.created().to_string()
            }
            "session_path" => s
                .windows
                .first()
                .and_then(|w| w.panes.first())
                .and_then(|p| p.info["cwd"].as_str())
                .unwrap_or("")
                .to_string(),
            "session_group" | "session_group_list" | "session_alerts" | "session_stack" => {
                String::new()
            }
            "session_grouped" | "session_group_size" | "session_format" => "0".into(),
            "session_active" => flag(s.active),
            "active_window_index" => s
                .windows
                .iter()
                .find(|w| w.active)
                .map(|w| w.index.to_string())
                .unwrap_or_default(),
            // tmux's "last" window here is the highest-numbered one.
            "last_window_index" => s.windows.last().map(|w| w.index).unwrap_or(0).to_string(),
            _ => return None,
        })
    }

    fn window_var(&self, name: &str) -> Option<String> {
        let w = self
            .view
            .sessions
            .get(self.at.session)?
            .windows
            .get(self.at.window)?;
        let width = w.panes.iter().map(|p| p.cols()).max().unwrap_or(80);
        let height = w.panes.iter().map(|p| p.rows()).max().unwrap_or(24);
        Some(match name {
            "window_index" => w.index.to_string(),
            "window_id" => format!("@{}", w.num),
            "window_name" => w.name.clone(),
            "window_active" => flag(w.active),
            "window_panes" => w.panes.len().to_string(),
            "window_width" => width.to_string(),
            "window_height" => height.to_string(),
            "window_zoomed_flag" => flag(w.zoomed),
            "window_flags" | "window_raw_flags" => {
                let mut f = String::new();
                if w.active {
                    f.push('*');
                }
                if w.zoomed {
                    f.push('Z');
                }
                f
            }
            "window_activity_flag"
            | "window_bell_flag"
            | "window_silence_flag"
            | "window_last_flag"
            | "window_linked"
            | "window_marked_flag" => "0".into(),
            "window_start_flag" => flag(self.at.window == 0),
            "window_end_flag" => {
                let count = self.view.sessions[self.at.session].windows.len();
                flag(self.at.window + 1 == count)
            }
            "window_layout" | "window_visible_layout" => w.layout.clone(),
            "window_offset_x" | "window_offset_y" => String::new(),
            _ => return None,
        })
    }

    fn pane_var(&self, name: &str) -> Option<String> {
        let p = self.view.pane(self.at);
        let info = &p.info;
        let exit = &info["exit"];
        let dead = !p.running();
        Some(match name {
            "pane_id" => format!("%{}", p.num),
            "pane_index" => p.index.to_string(),
            "pane_active" => flag(p.active),
            "pane_pid" => p.pid().map(|v| v.to_string()).unwrap_or_default(),
            "pane_width" => p.cols().to_string(),
            "pane_height" => p.rows().to_string(),
            "pane_left" | "pane_top" => "0".into(),
            "pane_right" => p.cols().saturating_sub(1).to_string(),
            "pane_bottom" => p.rows().saturating_sub(1).to_string(),
            "pane_at_left" | "pane_at_top" | "pane_at_right" | "pane_at_bottom" => "1".into(),
            "pane_title" => {
                let set = self.titles.get("titles", &format!("%{}", p.num));
                let title = set.unwrap_or_else(|| info["title"].as_str().unwrap_or(""));
                if title.is_empty() {
                    hostname().unwrap_or_default()
                } else {
                    title.to_string()
                }
            }
            "pane_dead" => flag(dead),
            "pane_dead_status" => exit["code"]
                .as_i64()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            "pane_dead_signal" => exit["signal"]
                .as_i64()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            "pane_dead_time" => String::new(),
            "pane_current_command" => foreground(p.pid())
                .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok())
                .map(|c| c.trim_end().to_string())
                .unwrap_or_else(|| start_command(info)),
            "pane_current_path" => foreground(p.pid())
                .and_then(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).ok())
                .map(|d| d.display().to_string())
                .or_else(|| info["cwd"].as_str().map(str::to_string))
                .unwrap_or_default(),
            "pane_start_command" => start_command(info),
            "pane_start_path" => info["cwd"].as_str().unwrap_or("").to_string(),
            "pane_tty" => p
                .pid()
                .and_then(|pid| std::fs::read_link(format!("/proc/{pid}/fd/0")).ok())
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            "pane_synchronized" => flag(super::options::synchronized(
                self.titles,
                self.view.window(self.at).num,
                p.num,
            )),
            "pane_input_off" => flag(super::options::input_off(self.titles, p.num)),
            "pane_in_mode"
            | "pane_marked"
            | "pane_marked_set"
            | "pane_pipe"
            | "pane_unseen_changes"
            | "pane_last" => "0".into(),
            "pane_mode" | "pane_format" | "pane_search_string" => String::new(),
            "history_limit" => "2000".into(),
            "history_size" => self.screen["scrollback_lines"]
                .as_u64()
                .unwrap_or(0)
                .to_string(),
            "history_bytes" => "0".into(),
            "cursor_x" => self.screen["cursor"]["col"].as_u64()?.to_string(),
            "cursor_y" => self.screen["cursor"]["row"].as_u64()?.to_string(),
            "cursor_flag" => flag(self.screen["cursor"]["visible"].as_bool().unwrap_or(true)),
            "alternate_on" => flag(self.mode("alt_screen")),
            "alternate_saved_x" | "alternate_saved_y" => "0".into(),
            "insert_flag" => flag(self.mode("insert")),
            "keypad_cursor_flag" => flag(self.mode("app_cursor_keys")),
            "keypad_flag" => flag(self.mode("app_keypad")),
            "wrap_flag" => flag(self.mode("autowrap")),
            "origin_flag" => flag(self.mode("origin")),
            "bracket_paste_flag" => flag(self.mode("bracketed_paste")),
            "mouse_any_flag" => flag(self.mouse() != "off"),
            "mouse_standard_flag" => flag(self.mouse() == "normal"),
            "mouse_button_flag" => flag(self.mouse() == "button"),
            "mouse_all_flag" => flag(self.mouse() == "any"),
            "mouse_sgr_flag" => flag(self.screen["modes"]["mouse_encoding"] == "sgr"),
            "mouse_utf8_flag" => flag(self.screen["modes"]["mouse_encoding"] == "utf8"),
            "scroll_region_upper" => "0".into(),
            "scroll_region_lower" => p.rows().saturating_sub(1).to_string(),
            _ => return None,
        })
    }
}

/// The pane's command as tmux shows `pane_start_command`.
fn start_command(info: &Value) -> String {
    let command = &info["command"];
    if let Some(argv) = command["argv"].as_array() {
        argv.iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    } else if let Some(shell) = command["shell"].as_str() {
        shell.to_string()
    } else {
        String::new()
    }
}

/// The foreground process of the pane's terminal (`/proc/PID/stat`'s
/// tpgid), else its own process.
fn foreground(pid: Option<u64>) -> Option<u64> {
    let pid = pid?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is parenthesised and may hold spaces: count fields
    // after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let tpgid: i64 = fields.get(5)?.parse().ok()?;
    Some(if tpgid > 0 { tpgid as u64 } else { pid })
}

/// The machine's name (`host`, and a pane's title until it sets one).
fn hostname() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|f| std::fs::read_to_string(f).ok())
        .map(|h| h.trim().to_string())
}
