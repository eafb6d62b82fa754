//! `ptyd demo`: the main job on embedded defaults. It starts a server in a
//! private temporary namespace, runs a few panes, drives them through the
//! API exactly as a script would, prints what it did and saw, and cleans up.

use super::CliError;
use crate::client::{self, Client};
use crate::paths::NamespacePaths;
use crate::protocol::methods::{self, NoParams, Request};
use crate::protocol::replies::{
    Capture, PaneInfo, PaneList, PaneStateName, Status, UpgradeReport, WaitReply,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;

/// Stops the demo's server and removes its namespace, however the demo ends.
struct DemoServer {
    paths: NamespacePaths,
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&self.paths, false) {
            let _ = c.request(&Request::ServerStop(NoParams {}));
            // The server closes the connection as its last act.
            while c.read_message().is_ok() {}
        }
        let _ = std::fs::remove_dir_all(&self.paths.runtime_dir);
        let _ = std::fs::remove_dir_all(&self.paths.state_dir);
    }
}

fn step(what: &str) {
    println!("\n== {what}");
}

/// Sends `request`, showing it as a script would write it.
fn call(client: &mut Client, request: Request) -> Result<Value, CliError> {
    let wire = serde_json::to_value(&request).unwrap_or_default();
    println!("  -> {} {}", request.method(), wire["params"]);
    Ok(client.request(&request)?)
}

/// [`call`], reading the reply into its typed form.
fn call_as<T: DeserializeOwned>(client: &mut Client, request: Request) -> Result<T, CliError> {
    let method = request.method();
    let result = call(client, request)?;
    Ok(client::parse_reply(method, result)?)
}

fn create(name: &str, cwd: &std::path::Path) -> methods::PaneCreate {
    methods::PaneCreate {
        name: Some(name.into()),
        cwd: Some(cwd.to_string_lossy().into_owned()),
        ..methods::PaneCreate::default()
    }
}

fn input(target: &str, data: &str, request_id: &str) -> Request {
    Request::PaneInput(methods::PaneInput {
        target: target.into(),
        data: data.into(),
        request_id: Some(request_id.into()),
    })
}

fn wait_text(target: &str, text: &str) -> Request {
    Request::PaneWait(methods::PaneWait {
        text: Some(text.into()),
        timeout_ms: Some(10_000),
        ..methods::PaneWait::new(target.into())
    })
}

fn wait_exit(target: &str) -> Request {
    Request::PaneWait(methods::PaneWait {
        exit: true,
        timeout_ms: Some(10_000),
        ..methods::PaneWait::new(target.into())
    })
}

fn capture(target: &str, start: Option<i64>) -> Request {
    Request::PaneCapture(methods::PaneCapture {
        target: target.into(),
        ansi: false,
        start,
        end: None,
        join: false,
    })
}

/// The `exit` of a wait for an exit, as JSON.
fn exit_json(reply: &WaitReply) -> Value {
    match reply {
        WaitReply::Exited { exit } => serde_json::to_value(exit).unwrap_or_default(),
        _ => Value::Null,
    }
}

pub fn run() -> Result<i32, CliError> {
    let namespace = format!("demo-{}", std::process::id());
    let paths = NamespacePaths::resolve(&namespace).map_err(CliError::usage)?;
    paths.prepare_runtime_dir().map_err(|e| CliError {
        message: e.to_string(),
        code: 1,
    })?;

    step(&format!(
        "starting a server in the private namespace {namespace:?}"
    ));
    let server = DemoServer {
        paths: paths.clone(),
    };
    let mut client = Client::connect(&server.paths, true)?;
    let status: Status = call_as(&mut client, Request::ServerStatus(NoParams {}))?;
    println!(
        "  server pid {} listening on {}",
        status.pid,
        status.socket.display()
    );

    step("creating three panes: a shell, a counter, and a command that exits with code 7");
    let tmp = std::env::temp_dir();
    let shell: PaneInfo = call_as(
        &mut client,
        Request::PaneCreate(methods::PaneCreate {
            argv: Some(vec!["/bin/sh".into()]),
            env: BTreeMap::from([("PS1".into(), "demo$ ".into())]),
            ..create("shell", &tmp)
        }),
    )?;
    let counter: PaneInfo = call_as(
        &mut client,
        Request::PaneCreate(methods::PaneCreate {
            shell: Some("i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done".into()),
            ..create("counter", &tmp)
        }),
    )?;
    let exiter: PaneInfo = call_as(
        &mut client,
        Request::PaneCreate(methods::PaneCreate {
            shell: Some("echo about to exit; exit 7".into()),
            ..create("exiter", &tmp)
        }),
    )?;
    for pane in [&shell, &counter, &exiter] {
        println!(
            "  {} {:<8} pid {}",
            pane.id,
            pane.name.as_deref().unwrap_or(""),
            pane.pid.map_or("-".into(), |p| p.to_string())
        );
    }

    step("typing into the shell and waiting for its answer on screen");
    let hello = "echo hello from $PTYD_PANE_ID\r";
    call(&mut client, input("shell", hello, "demo-1"))?;
    call(&mut client, wait_text("shell", "hello from p1"))?;
    let screen: Capture = call_as(&mut client, capture("shell", None))?;
    print_screen(&screen);
    let again = call(&mut client, input("shell", hello, "demo-1"))?;
    println!("  the same request_id again is acknowledged without typing twice: {again}");

    step("waiting for the exiting command");
    let exit: WaitReply = call_as(&mut client, wait_exit("exiter"))?;
    println!("  exiter finished: {}", exit_json(&exit));

    step("waiting until the counter reaches 5");
    call(&mut client, wait_text("counter", "tick 5"))?;

    step("live upgrade: the server replaces its own binary while every pane runs");
    let before = pane_pids(&mut client)?;
    let old_server = call_as::<Status>(&mut client, Request::ServerStatus(NoParams {}))?.pid;
    let last_tick = last_tick(&call_as(&mut client, capture("counter", None))?);
    let report: UpgradeReport = call_as(
        &mut client,
        Request::ServerUpgrade(methods::Upgrade::default()),
    )?;
    for phase in &report.phases {
        println!("  {:<10} {:>8.3} ms", phase.name, phase.ms);
    }
    println!(
        "  server pid {old_server} -> {}, generation {}, blackout {:.3} ms, {} fds moved",
        report.new_pid, report.generation, report.blackout_ms, report.fds
    );
    let after = pane_pids(&mut client)?;
    println!("  pane pids before: {before:?}");
    println!(
        "  pane pids after:  {after:?}  {}",
        if before == after {
            "(same processes)"
        } else {
            "(CHANGED!)"
        }
    );
    let target = format!("tick {}", last_tick + 10);
    call(&mut client, wait_text("counter", &target))?;
    let capture: Capture = call_as(&mut client, capture("counter", Some(-200)))?;
    let ticks: Vec<u64> = capture
        .trimmed_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("tick ").and_then(|n| n.trim().parse().ok()))
        .collect();
    let continuous = ticks.windows(2).all(|w| w[1] == w[0] + 1);
    println!(
        "  counter went on from {last_tick} to {}: {} ticks in scrollback, {}",
        ticks.last().copied().unwrap_or(0),
        ticks.len(),
        if continuous {
            "no gap, no repeat"
        } else {
            "NOT CONTINUOUS"
        }
    );

    step("killing the counter's whole process tree");
    call(
        &mut client,
        Request::PaneKill(methods::PaneKill {
            target: "counter".into(),
            signal: None,
            grace_ms: None,
        }),
    )?;
    let killed: WaitReply = call_as(&mut client, wait_exit("counter"))?;
    println!("  counter ended: {}", exit_json(&killed));

    step("listing panes");
    let list: PaneList = call_as(&mut client, Request::PaneList(NoParams {}))?;
    for pane in &list.panes {
        println!(
            "  {} {:<8} {:<8} exit={}",
            pane.id,
            pane.name.as_deref().unwrap_or(""),
            state_name(pane.state),
            serde_json::to_value(&pane.exit).unwrap_or_default()
        );
    }

    step("stopping the server and removing the namespace");
    drop(client);
    drop(server);
    println!("  done");
    Ok(0)
}

fn state_name(state: PaneStateName) -> &'static str {
    match state {
        PaneStateName::Running => "running",
        PaneStateName::Exited => "exited",
        PaneStateName::Held => "held",
    }
}

/// Pane id -> pid, for comparing before and after the upgrade.
fn pane_pids(client: &mut Client) -> Result<Vec<(String, i64)>, CliError> {
    let list: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
    Ok(list
        .panes
        .iter()
        .filter(|p| p.state == PaneStateName::Running)
        .map(|p| (p.id.to_string(), p.pid.map_or(0, i64::from)))
        .collect())
}

/// The highest `tick N` on the counter's screen.
fn last_tick(capture: &Capture) -> u64 {
    capture
        .trimmed_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("tick ").and_then(|n| n.trim().parse().ok()))
        .max()
        .unwrap_or(0)
}

fn print_screen(capture: &Capture) {
    println!("  screen of {}:", capture.pane);
    for line in capture.trimmed_lines() {
        println!("  | {line}");
    }
}
