//! The commands that make, change and end panes: `new`, `run`, `kill`,
//! `rm`, `resize`, `respawn`, `focus` and `resume`.

use super::args::Parsed;
use super::cmd_attach::{
    attach_to, default_attach_options, finish_attach, refuse_nested_new, when_behind,
};
use super::commands::{connect, print_json};
use super::{CliError, Global, pane_spec};
use crate::client::attach::{self, AttachOptions};
use crate::client::{self, Client};
use crate::protocol::methods::{self, NoParams, Request};
use crate::protocol::replies::{PaneInfo, PaneList, PaneStateName};
use serde_json::json;

pub fn new(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let detached = a.flag("detached");
    let name = a.value("name")?;
    if a.flag("attach-existing") && name.is_none() {
        return Err(CliError::usage(
            "-A attaches to the pane named by -n NAME if it exists: give -n NAME",
        ));
    }
    let split = a.value("split")?.filter(|_| a.spelled_short("split"));
    if !detached && !a.flag("force") {
        refuse_nested_new()?;
    }
    let mut params = pane_spec::params(a)?;
    // `-v` alone splits the pane this runs in; elsewhere the server splits
    // the current pane (the active tab's focus).
    if params.split.is_none() && params.workspace.is_none() && a.flag("vertical") {
        params.split = super::cmd_attach::own_pane(g);
    }
    let mut client = connect(g)?;
    if a.flag("attach-existing")
        && let Some(name) = &name
        && let Some(pane) = named(&mut client, name)?
    {
        if !detached {
            let opts = default_attach_options(pane.id.to_string());
            return attach_to(g, client, &opts, false);
        }
        if a.flag("json") {
            print_json(&serde_json::to_value(&pane).unwrap_or_default());
        } else {
            println!("{}", pane.id);
        }
        return Ok(0);
    }
    let explain = |e| explain_split(e, split.as_deref());
    if detached {
        let info = client
            .request(&Request::PaneCreate(params))
            .map_err(explain)?;
        if a.flag("json") {
            print_json(&info);
        } else {
            let info: PaneInfo = client::parse_reply("pane.create", info)?;
            println!("{}", info.id);
        }
        return Ok(0);
    }
    let config = crate::server::config::load().0;
    let alt_screen =
        config.attach_alt_screen && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let when_behind = when_behind(config.attach_lossless);
    let info: PaneInfo = client
        .request_as(&Request::PaneCreate(methods::PaneCreate {
            attach: true,
            alt_screen,
            when_behind,
            ..params
        }))
        .map_err(explain)?;
    let (stream, leftover) = client.into_stream();
    let reader = client::FrameReader::new(stream, leftover);
    let opts = AttachOptions {
        target: info.id.to_string(),
        read_only: false,
        detach_key: config.detach_key.1,
        alt_screen,
        history: 0,
        from_pane: None,
        when_behind,
        direct: config.attach_direct,
        // Attached by `pane.create` itself, to the one pane.
        tab_view: false,
    };
    finish_attach(attach::run_attach(&g.paths, &opts, Some(reader))?)
}

/// The pane named `name`, for `new -A`.
fn named(client: &mut Client, name: &str) -> Result<Option<PaneInfo>, CliError> {
    let panes: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
    Ok(panes
        .panes
        .into_iter()
        .find(|p| p.name.as_deref() == Some(name)))
}

/// tmux users type `new -s NAME` for a session name; here `-s` splits a
/// pane. When that pane does not exist, say what `-s` is and what to type.
fn explain_split(e: client::ClientError, split: Option<&str>) -> CliError {
    match split {
        Some(name) if e.refused("not_found") => CliError::usage(format!(
            "no pane {name:?} to split: in ptyd, -s is --split TARGET (split that pane). \
             To name the new pane use -n: `ptyd new -n {name}`; tmux's sessions are \
             workspaces here: `ptyd workspace new {name}`, then `ptyd new -w {name}`"
        )),
        _ => e.into(),
    }
}

pub fn run(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    if a.argv().is_empty() && a.value("shell")?.is_none() {
        return Err(CliError::usage(
            "nothing to run: give -- ARGV... or --shell STR",
        ));
    }
    Ok(attach::run_mirror(
        &g.paths,
        pane_spec::params(a)?,
        a.flag("rm"),
    )?)
}

/// Sends `request` and prints the reply with `--json`.
fn call(g: &Global, a: &Parsed, request: Request) -> Result<i32, CliError> {
    let r = connect(g)?.request(&request)?;
    if a.flag("json") {
        print_json(&r);
    }
    Ok(0)
}

pub fn kill(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let target = match a.target()?.or_else(|| super::cmd_attach::own_pane(g)) {
        Some(t) => t,
        None => a.need_target()?,
    };
    let request = Request::PaneKill(methods::PaneKill {
        target,
        signal: a.value("signal")?,
        grace_ms: a.millis("grace")?,
    });
    call(g, a, request)
}

pub fn focus(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let request = Request::PaneFocus(methods::PaneFocus {
        target: a.need_target()?,
        client: a.client()?,
    });
    call(g, a, request)
}

pub fn rm(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let force = a.flag("force");
    if !a.flag("exited") {
        let target = a.need_target()?;
        return call(
            g,
            a,
            Request::PaneRemove(methods::PaneRemove { target, force }),
        );
    }
    if a.target()?.is_some() || force {
        return Err(CliError::usage("--exited takes no TARGET and no --force"));
    }
    let as_json = a.flag("json");
    let mut client = connect(g)?;
    let panes = client.call("pane.list", json!({}))?;
    let mut removed = Vec::new();
    for pane in panes["panes"].as_array().into_iter().flatten() {
        if pane["state"] != "exited" {
            continue;
        }
        let id = pane["id"].as_str().unwrap_or_default();
        match client.call("pane.remove", json!({ "target": id })) {
            Ok(_) if as_json => removed.push(id.to_string()),
            Ok(_) => println!("{id}"),
            // Removed or respawned meanwhile: not ours to prune.
            Err(e) if e.refused("not_found") || e.refused("pane_running") => {}
            Err(e) => return Err(e.into()),
        }
    }
    if as_json {
        print_json(&json!({ "removed": removed }));
    }
    Ok(0)
}

/// The operands with `-t TARGET` first: `resize -t p1 80x24`.
fn target_first(a: &Parsed) -> Result<Vec<String>, CliError> {
    let mut args = a.operands()?;
    if let Some(t) = a.value("target")? {
        args.insert(0, t);
    }
    Ok(args)
}

/// [`target_first`] for `resize` and `rename`, which take one operand
/// after TARGET: given alone inside a pane, it is that pane's.
fn own_pane_first(g: &Global, a: &Parsed) -> Result<Vec<String>, CliError> {
    let mut args = target_first(a)?;
    if args.len() == 1
        && let Some(own) = super::cmd_attach::own_pane(g)
    {
        args.insert(0, own);
    }
    Ok(args)
}

pub fn resize(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let [target, size] = own_pane_first(g, a)?
        .try_into()
        .map_err(|_| CliError::usage("usage: ptyd resize TARGET COLSxROWS"))?;
    let (cols, rows) = pane_spec::parse_size(&size)?;
    call(
        g,
        a,
        Request::PaneResize(methods::PaneResize { target, cols, rows }),
    )
}

pub fn resume(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let (target, resume) = match (target_first(a)?.as_slice(), a.flag("clear")) {
        ([t], true) => (t.clone(), None),
        ([t, c], false) => (t.clone(), Some(c.clone())),
        _ => {
            return Err(CliError::usage(
                "usage: ptyd resume TARGET COMMAND, or ptyd resume TARGET --clear",
            ));
        }
    };
    call(
        g,
        a,
        Request::PaneSetResume(methods::PaneSetResume { target, resume }),
    )
}

pub fn rename(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let [target, name] = own_pane_first(g, a)?
        .try_into()
        .map_err(|_| CliError::usage("usage: ptyd rename TARGET NAME"))?;
    call(g, a, Request::PaneRename(methods::Rename { target, name }))
}

/// `ptyd respawn TARGET` or `ptyd respawn --held` (every held pane).
pub fn respawn(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    if !a.flag("held") {
        let target = a.need_target()?;
        return call(g, a, Request::PaneRespawn(methods::Target { target }));
    }
    let mut client = connect(g)?;
    if a.target()?.is_some() {
        return Err(CliError::usage(
            "--held takes no TARGET: it respawns every held pane",
        ));
    }
    let as_json = a.flag("json");
    let panes: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
    let (mut respawned, mut failed) = (Vec::new(), Vec::new());
    for pane in panes
        .panes
        .iter()
        .filter(|p| p.state == PaneStateName::Held)
    {
        let id = pane.id.to_string();
        match client.request(&Request::PaneRespawn(methods::Target {
            target: id.clone(),
        })) {
            Ok(info) => {
                if !as_json {
                    println!("{id}");
                }
                respawned.push(info);
            }
            // Respawned or removed meanwhile: nothing of ours to do.
            Err(e) if e.refused("pane_running") || e.refused("not_found") => {}
            Err(e) => {
                eprintln!("ptyd: {id}: {}", e.message);
                failed.push(
                    json!({ "pane": id, "error": { "code": e.code(), "message": e.message } }),
                );
            }
        }
    }
    if as_json {
        print_json(&json!({ "respawned": respawned, "failed": failed }));
    }
    Ok(if failed.is_empty() { 0 } else { 1 })
}
