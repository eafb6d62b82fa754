//! The commands about the tree above the panes: `workspace` and `tab`.

use super::args::Parsed;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::client;
use crate::protocol::methods::{self, Request};
use crate::protocol::replies::WorkspaceCreated;

pub fn workspace(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    tree_command(g, a, "workspace")
}

pub fn tab(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    tree_command(g, a, "tab")
}

/// `ptyd workspace new NAME | rename W NAME | rm W [--force]` and
/// `ptyd tab rename T NAME | rm T [--force]`.
fn tree_command(g: &Global, a: &Parsed, kind: &str) -> Result<i32, CliError> {
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
