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

/// A capture line number: 0 is the top visible row, negative is scrollback.
fn line_number(s: &str) -> Result<i64, CliError> {
    s.parse().map_err(|_| {
        CliError::usage(format!(
            "line numbers are integers (negative for scrollback), got {s:?}"
        ))
    })
}

pub fn capture(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let result = connect(g)?.request(&Request::PaneCapture(methods::PaneCapture {
        target: a.need_target()?,
        ansi: a.flag("ansi"),
        start: a.value_as("start", line_number)?,
        end: a.value_as("end", line_number)?,
        join: a.flag("join"),
    }))?;
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
