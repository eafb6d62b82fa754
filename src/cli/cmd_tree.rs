//! The commands about the tree above the panes: `workspace` and `tab`.

use super::args::Parsed;
use super::cmd_attach::own_pane;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::client;
use crate::protocol::methods::{self, Request};
use crate::protocol::replies::{PaneInfo, TreeReply, WorkspaceCreated};

/// A new tab's size when this is no terminal (as `ptyd new`).
const DEFAULT_COLS: u16 = 80;
const DEFAULT_ROWS: u16 = 24;

pub fn workspace(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    tree_command(g, a, "workspace")
}

pub fn tab(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let args = a.operands()?;
    match args.first().map(String::as_str) {
        Some("new") => tab_new(g, a, &args[1..]),
        Some("select") => tab_select(g, a, &args[1..]),
        Some("rename") if args.len() == 2 && a.value("target")?.is_none() => {
            // No T: the caller's tab.
            a.only(&["json"])?;
            let target = match own_pane(g) {
                Some(pane) => pane,
                None => active_tab(g)?,
            };
            let request = Request::TabRename(methods::Rename {
                target,
                name: args[1].clone(),
            });
            let result = connect(g)?.request(&request)?;
            if a.flag("json") {
                print_json(&result);
            }
            Ok(0)
        }
        _ => tree_command(g, a, "tab"),
    }
}

/// `ptyd tab new [-n NAME] [-w W] [-- ARGV...]`: a pane in a new tab,
/// which is then selected; prints the tab id.
fn tab_new(g: &Global, a: &Parsed, argv: &[String]) -> Result<i32, CliError> {
    a.only(&["name", "workspace", "json"])?;
    let (cols, rows) =
        client::terminal_size(&std::io::stdout()).unwrap_or((DEFAULT_COLS, DEFAULT_ROWS));
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".to_string());
    let mut client = connect(g)?;
    let created: PaneInfo = client.request_as(&Request::PaneCreate(methods::PaneCreate {
        argv: (!argv.is_empty()).then(|| argv.to_vec()),
        cwd: Some(cwd),
        cols: Some(cols),
        rows: Some(rows),
        workspace: a.value("workspace")?,
        tab_name: a.value("name")?,
        ..methods::PaneCreate::default()
    }))?;
    let tab = client.request(&Request::TabSelect(methods::TabSelect {
        target: Some(created.id.to_string()),
        ..methods::TabSelect::default()
    }))?;
    if a.flag("json") {
        print_json(&tab);
    } else {
        println!("{}", tab["id"].as_str().unwrap_or_default());
    }
    Ok(0)
}

/// `ptyd tab select T|next|prev|N [-w W]`.
fn tab_select(g: &Global, a: &Parsed, args: &[String]) -> Result<i32, CliError> {
    a.only(&["workspace", "target", "json"])?;
    let which = match (args, a.value("target")?) {
        ([which], None) => which.clone(),
        ([], Some(t)) => t,
        _ => {
            return Err(CliError::usage(
                "usage: ptyd tab select T|next|prev|N [-w W] (T a tab id, name or pane; N its number from 0)",
            ));
        }
    };
    let workspace = a.value("workspace")?;
    let mut request = methods::TabSelect::default();
    match which.as_str() {
        "next" => request.step = Some(1),
        "prev" | "previous" => request.step = Some(-1),
        n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            request.index = Some(
                n.parse()
                    .map_err(|_| CliError::usage(format!("tab number {n} is too large")))?,
            );
        }
        _ if workspace.is_some() => {
            return Err(CliError::usage(
                "-w W goes with N, next or prev; a tab id or name needs no workspace",
            ));
        }
        _ => request.target = Some(which.clone()),
    }
    request.workspace = workspace;
    let result = connect(g)?.request(&Request::TabSelect(request))?;
    if a.flag("json") {
        print_json(&result);
    }
    Ok(0)
}

/// The active workspace's active tab, for `tab rename NAME`.
fn active_tab(g: &Global) -> Result<String, CliError> {
    let tree: TreeReply = connect(g)?.request_as(&Request::Tree(methods::NoParams {}))?;
    tree.workspaces
        .iter()
        .filter(|w| w.active)
        .flat_map(|w| &w.tabs)
        .find(|t| t.active)
        .map(|t| t.id.to_string())
        .ok_or_else(|| {
            CliError::failure("there is no active tab to rename; name one: ptyd tab rename T NAME")
        })
}

/// `ptyd workspace new NAME | rename W NAME | rm W [--force]` and
/// `ptyd tab rename T NAME | rm T [--force]`.
fn tree_command(g: &Global, a: &Parsed, kind: &str) -> Result<i32, CliError> {
    if kind == "tab" {
        a.only(&["force", "target", "json"])?;
    }
    let mut args = a.operands()?;
    let force = a.flag("force");
    let as_json = a.flag("json");
    let target = a.value("target")?;
    // `rename -t W NAME`, `rm -t W`: the target goes after the verb.
    if let Some(t) = target {
        args.insert(args.len().min(1), t);
    }
    let tab = kind == "tab";
    let request = match args.as_slice() {
        [verb, name] if verb == "new" && !tab => {
            Request::WorkspaceCreate(methods::WorkspaceCreate { name: name.clone() })
        }
        [verb, target, name] if verb == "rename" => {
            let rename = methods::Rename {
                target: target.clone(),
                name: name.clone(),
            };
            if tab {
                Request::TabRename(rename)
            } else {
                Request::WorkspaceRename(rename)
            }
        }
        [verb, target] if verb == "rm" => {
            let remove = methods::RemoveTree {
                target: target.clone(),
                force,
            };
            if tab {
                Request::TabRemove(remove)
            } else {
                Request::WorkspaceRemove(remove)
            }
        }
        _ => return Err(CliError::usage(format!("see `ptyd {kind} --help`"))),
    };
    let result = connect(g)?.request(&request)?;
    if as_json {
        print_json(&result);
    } else if let Request::WorkspaceCreate(_) = request {
        let created: WorkspaceCreated = client::parse_reply("workspace.create", result)?;
        println!("{}", created.id);
    }
    Ok(0)
}
