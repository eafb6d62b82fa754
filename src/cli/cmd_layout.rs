//! The commands that arrange a tab's panes: `select-layout`, `swap`,
//! `resize-split` and `zoom`.

use super::args::Parsed;
use super::cmd_attach::own_pane;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::protocol::methods::{self, Request};

/// Sends `request` and prints the reply with `--json`.
fn call(g: &Global, a: &Parsed, request: Request) -> Result<i32, CliError> {
    let r = connect(g)?.request(&request)?;
    if a.flag("json") {
        print_json(&r);
    }
    Ok(0)
}

/// The pane (or tab) a command acts on: `-t TARGET`, else the pane this
/// runs in, else none (the server takes the active tab's focus).
fn current(g: &Global, a: &Parsed) -> Result<Option<String>, CliError> {
    Ok(a.value("target")?.or_else(|| own_pane(g)))
}

pub fn select_layout(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let [layout] = a.operands()?.try_into().map_err(|_| {
        CliError::usage(format!(
            "usage: ptyd select-layout [-t TARGET] NAME, NAME one of {}, next, previous",
            crate::workspace::layout::Preset::NAMES.join(", ")
        ))
    })?;
    let target = current(g, a)?;
    call(
        g,
        a,
        Request::TabSelectLayout(methods::SelectLayout { target, layout }),
    )
}

pub fn swap(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let [target, other] = a
        .operands()?
        .try_into()
        .map_err(|_| CliError::usage("usage: ptyd swap A B (two panes: ids like p1, or names)"))?;
    call(g, a, Request::PaneSwap(methods::PaneSwap { target, other }))
}

pub fn resize_split(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let usage = || CliError::usage("usage: ptyd resize-split [-t TARGET] left|right|up|down [N]");
    let args = a.operands()?;
    let (direction, cells) = match args.as_slice() {
        [d] => (d.clone(), None),
        [d, n] => {
            let n = n.parse::<u16>().ok().filter(|n| *n > 0).ok_or_else(|| {
                CliError::usage(format!("N is a number of cells (1 or more), got {n:?}"))
            })?;
            (d.clone(), Some(n))
        }
        _ => return Err(usage()),
    };
    // Checked here too, so a typo is a usage error before any connection.
    crate::workspace::layout::Side::from_name(&direction).map_err(CliError::usage)?;
    let target = current(g, a)?;
    let as_json = a.flag("json");
    let reply = connect(g)?.request(&Request::PaneResizeSplit(methods::ResizeSplit {
        target,
        direction,
        cells,
        cols: None,
        rows: None,
    }))?;
    if as_json {
        print_json(&reply);
    } else if reply["moved"] == 0 {
        eprintln!("ptyd: the border did not move: the panes beside it are at their smallest (2x1)");
    }
    Ok(0)
}

pub fn zoom(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let zoom = match (a.flag("on"), a.flag("off")) {
        (true, true) => return Err(CliError::usage("give --on or --off, not both")),
        (true, false) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    };
    let target = a.target()?.or_else(|| own_pane(g));
    call(g, a, Request::PaneZoom(methods::PaneZoom { target, zoom }))
}
