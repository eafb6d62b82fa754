//! The commands that arrange a tab's panes: `split`, `select-layout`,
//! `swap`, `resize-split` and `zoom`.

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

/// `ptyd split`: `new -d -s CURRENT`, side by side unless `-v`.
pub fn split(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    if a.flag("workspace") || a.flag("tab-name") {
        return Err(CliError::usage(
            "split opens a pane beside another, in its tab: -w and --tab-name are for \
             `ptyd new` and `ptyd tab new`",
        ));
    }
    let mut params = super::pane_spec::params(a)?;
    if a.flag("split") && a.flag("target") {
        return Err(CliError::usage("give the pane to split once: -t TARGET"));
    }
    // No pane named: the server splits the current one (the focus of the
    // caller's view), as `new -v` does.
    params.split = a.value("target")?.or(params.split).or_else(|| own_pane(g));
    params.direction = Some(if a.flag("vertical") {
        crate::model::Direction::Vertical
    } else {
        crate::model::Direction::Horizontal
    });
    let info = connect(g)?.request(&Request::PaneCreate(params))?;
    if a.flag("json") {
        print_json(&info);
    } else {
        println!("{}", info["id"].as_str().unwrap_or_default());
    }
    Ok(0)
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
    let client = a.client()?;
    // A client's zoom defaults to its own focus, not to where this runs.
    let target = match client {
        Some(_) => a.target()?,
        None => a.target()?.or_else(|| own_pane(g)),
    };
    let request = Request::PaneZoom(methods::PaneZoom {
        target,
        zoom,
        client,
    });
    call(g, a, request)
}
