//! The commands that show what there is: `ls` (the tree of workspaces,
//! tabs and panes) and `capture` (a pane's screen).

use super::args::Parsed;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::client;
use crate::model::{CommandSpec, Direction};
use crate::protocol::methods::{self, NoParams, Request};
use crate::protocol::replies::{Capture, LayoutNode, PaneInfo, PaneList, PaneStateName, TreeReply};

pub fn ls(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let as_json = a.flag("json");
    let mut client = connect(g)?;
    let mut tree = client.request(&Request::Tree(NoParams {}))?;
    let panes = client.request(&Request::PaneList(NoParams {}))?;
    if as_json {
        tree["panes"] = panes["panes"].clone();
        print_json(&tree);
        return Ok(0);
    }
    let tree: TreeReply = client::parse_reply("tree", tree)?;
    let panes: PaneList = client::parse_reply("pane.list", panes)?;
    if panes.panes.is_empty() {
        for ws in &tree.workspaces {
            println!("{} {} (empty)", ws.id, ws.name);
        }
        println!("no panes");
        return Ok(0);
    }
    let active = |a: bool| if a { " (active)" } else { "" };
    // Pane lines are indented under their tab; the header over their
    // columns (`*` marks a tab's focused pane).
    println!(
        "    {}",
        pane_row(
            " ", "ID", "NAME", "STATE", "PID", "SIZE", "CLIENTS", "CWD", "COMMAND"
        )
    );
    for ws in &tree.workspaces {
        println!("{} {}{}", ws.id, ws.name, active(ws.active));
        for tab in &ws.tabs {
            let zoom = tab
                .zoom
                .map(|z| format!(" (zoomed {z})"))
                .unwrap_or_default();
            println!(
                "  {} {}{}  {}{zoom}",
                tab.id,
                tab.name,
                active(tab.active),
                layout_summary(&tab.layout)
            );
            for pane in tab.panes.iter().flatten() {
                println!("    {}", pane_line(pane, tab.focus == pane.id));
                if let Some(why) = &pane.held_reason {
                    println!("          held: {why}");
                }
            }
        }
    }
    Ok(0)
}

/// `[p1 | [p2 / p3]]`: `|` side by side, `/` stacked.
fn layout_summary(layout: &LayoutNode) -> String {
    match layout {
        LayoutNode::Pane(p) => p.to_string(),
        LayoutNode::Split {
            direction,
            first,
            second,
            ..
        } => {
            let sep = match direction {
                Direction::Vertical => "/",
                Direction::Horizontal => "|",
            };
            format!(
                "[{} {sep} {}]",
                layout_summary(first),
                layout_summary(second)
            )
        }
    }
}

fn pane_line(pane: &PaneInfo, focused: bool) -> String {
    let state = match (pane.state, &pane.exit) {
        (PaneStateName::Exited, Some(exit)) => format!("exited ({})", exit.describe()),
        (PaneStateName::Exited, None) => "exited (unknown status)".into(),
        (PaneStateName::Running, _) => "running".into(),
        (PaneStateName::Held, _) => "held".into(),
    };
    let command = match &pane.command {
        CommandSpec::Argv(argv) => argv.join(" "),
        CommandSpec::Shell(shell) => format!("sh -c {shell}"),
        CommandSpec::LoginShell => "(login shell)".into(),
    };
    let clients = match pane.attached_clients {
        0 => String::new(),
        n => format!("{n} attached"),
    };
    pane_row(
        if focused { "*" } else { " " },
        &pane.id.to_string(),
        pane.name.as_deref().unwrap_or("-"),
        &state,
        &pane.pid.map_or("-".to_string(), |p| p.to_string()),
        &format!("{}x{}", pane.cols, pane.rows),
        &clients,
        &pane.cwd.display().to_string(),
        &command,
    )
}

/// One line of `ls`'s pane columns (a pane's, or the header's).
#[allow(clippy::too_many_arguments)]
fn pane_row(
    mark: &str,
    id: &str,
    name: &str,
    state: &str,
    pid: &str,
    size: &str,
    clients: &str,
    cwd: &str,
    command: &str,
) -> String {
    format!(
        "{mark}{id:<5} {name:<14} {state:<24} {pid:>7} {size:>8} {clients:<11} {cwd}  {command}"
    )
}

/// A capture too long for one reply (a history of a million lines), asked
/// for and printed in parts, every part numbered from the screen's top row
/// as it was at the first, so output arriving meanwhile neither repeats nor
/// skips a line; the blank rows at the bottom are left out as a whole
/// capture leaves them.
fn capture_in_parts(
    conn: &mut client::Client,
    mut req: methods::PaneCapture,
) -> Result<i32, CliError> {
    use std::io::Write;
    let probe = conn.request(&Request::PaneCapture(methods::PaneCapture {
        start: Some(0),
        end: Some(0),
        join: false,
        ansi: false,
        ..req.clone()
    }))?;
    let number = |key: &str| {
        probe[key].as_i64().ok_or_else(|| {
            CliError::failure(format!(
                "the server's pane.capture reply has no {key}: {probe}"
            ))
        })
    };
    let (origin, history, rows) = (
        number("screen_start")?,
        number("scrollback_lines")?,
        number("rows")?,
    );
    let end = req.end.unwrap_or(rows - 1).min(rows - 1);
    let mut at = req.start.unwrap_or(0).max(-history);
    req.origin = Some(origin as u64);
    let mut part: i64 = 1000;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut blanks = 0usize;
    let written = |e: std::io::Error| CliError::failure(format!("writing the capture: {e}"));
    while at <= end {
        req.start = Some(at);
        req.end = Some(at.saturating_add(part - 1).min(end));
        let reply = match conn.request(&Request::PaneCapture(req.clone())) {
            Err(e) if part > 1 && e.kind == client::ErrorKind::Server("too_large".into()) => {
                part /= 2;
                continue;
            }
            r => r?,
        };
        let last = reply["last_line"].as_i64().unwrap_or(end);
        let capture: Capture = client::parse_reply("pane.capture", reply)?;
        for line in &capture.lines {
            if line.is_empty() {
                blanks += 1;
                continue;
            }
            for _ in 0..std::mem::take(&mut blanks) {
                writeln!(out).map_err(written)?;
            }
            writeln!(out, "{line}").map_err(written)?;
        }
        // Past the end of the screen, or nothing left to read.
        if last < at {
            break;
        }
        at = last + 1;
    }
    out.flush().map_err(written)?;
    Ok(0)
}

/// A capture line number: 0 is the top visible row, negative is scrollback.
fn line_number(s: &str) -> Result<i64, CliError> {
    s.parse().map_err(|_| {
        CliError::usage(format!(
            "line numbers are integers (negative for scrollback), got {s:?}"
        ))
    })
}

pub fn capture(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let req = methods::PaneCapture {
        target: a.need_target()?,
        ansi: a.flag("ansi"),
        start: a.value_as("start", line_number)?,
        end: a.value_as("end", line_number)?,
        join: a.flag("join"),
        origin: None,
    };
    let mut conn = connect(g)?;
    let result = match conn.request(&Request::PaneCapture(req.clone())) {
        // Text has no reply to keep whole: it is asked for in parts.
        Err(e) if !a.flag("json") && e.kind == client::ErrorKind::Server("too_large".into()) => {
            return capture_in_parts(&mut conn, req);
        }
        r => r?,
    };
    if a.flag("json") {
        print_json(&result);
    } else {
        let capture: Capture = client::parse_reply("pane.capture", result)?;
        for line in capture.trimmed_lines() {
            println!("{line}");
        }
    }
    Ok(0)
}
