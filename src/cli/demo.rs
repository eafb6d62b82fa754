//! `ptyd demo`: the main job on embedded defaults. It starts a server in a
//! private temporary namespace, runs a few panes, drives them through the
//! API exactly as a script would, prints what it did and saw, and cleans up.

use super::CliError;
use crate::client::Client;
use crate::paths::NamespacePaths;
use serde_json::{Value, json};

/// Stops the demo's server and removes its namespace, however the demo ends.
struct DemoServer {
    paths: NamespacePaths,
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&self.paths, false) {
            let _ = c.call("server.stop", json!({}));
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

fn call(client: &mut Client, method: &str, params: Value) -> Result<Value, CliError> {
    println!("  -> {method} {params}");
    let result = client.call(method, params)?;
    Ok(result)
}

pub fn run() -> Result<i32, CliError> {
    let namespace = format!("demo-{}", std::process::id());
    let paths = NamespacePaths::resolve(&namespace).map_err(CliError::usage)?;
    paths
        .prepare_runtime_dir()
        .map_err(|e| CliError::failure(e.to_string()))?;

    step(&format!(
        "starting a server in the private namespace {namespace:?}"
    ));
    let server = DemoServer {
        paths: paths.clone(),
    };
    let mut client = Client::connect(&server.paths, true)?;
    let status = call(&mut client, "server.status", json!({}))?;
    println!(
        "  server pid {} listening on {}",
        status["pid"],
        status["socket"].as_str().unwrap_or("?")
    );

    step("creating three panes: a shell, a counter, and a command that exits with code 7");
    let tmp = std::env::temp_dir();
    let shell = call(
        &mut client,
        "pane.create",
        json!({ "name": "shell", "argv": ["/bin/sh"], "cwd": tmp, "env": { "PS1": "demo$ " } }),
    )?;
    let counter = call(
        &mut client,
        "pane.create",
        json!({ "name": "counter", "shell": "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done", "cwd": tmp }),
    )?;
    let exiter = call(
        &mut client,
        "pane.create",
        json!({ "name": "exiter", "shell": "echo about to exit; exit 7", "cwd": tmp }),
    )?;
    for pane in [&shell, &counter, &exiter] {
        println!(
            "  {} {:<8} pid {}",
            pane["id"].as_str().unwrap_or("?"),
            pane["name"].as_str().unwrap_or(""),
            pane["pid"]
        );
    }

    step("typing into the shell and waiting for its answer on screen");
    let ack = call(
        &mut client,
        "pane.input",
        json!({ "target": "shell", "data": "echo hello from $PTYD_PANE_ID\r", "request_id": "demo-1" }),
    )?;
    // From the ack's output count, past the echoed command line: only the
    // command's own output can match, however fast it comes.
    call(
        &mut client,
        "pane.wait",
        json!({ "target": "shell", "text": "hello from p1", "after_output": ack["output_bytes"],
                "skip_lines": 1, "timeout_ms": 10000 }),
    )?;
    let screen = call(&mut client, "pane.capture", json!({ "target": "shell" }))?;
    print_screen(&screen);
    let again = call(
        &mut client,
        "pane.input",
        json!({ "target": "shell", "data": "echo hello from $PTYD_PANE_ID\r", "request_id": "demo-1" }),
    )?;
    println!("  the same request_id again is acknowledged without typing twice: {again}");

    step("waiting for the exiting command");
    let exit = call(
        &mut client,
        "pane.wait",
        json!({ "target": "exiter", "exit": true, "timeout_ms": 10000 }),
    )?;
    println!("  exiter finished: {}", exit["exit"]);

    step("waiting until the counter reaches 5");
    call(
        &mut client,
        "pane.wait",
        json!({ "target": "counter", "text": "tick 5", "include_screen": true, "timeout_ms": 10000 }),
    )?;

    step("live upgrade: the server replaces its own binary while every pane runs");
    let before = pane_pids(&mut client)?;
    let old_server = call(&mut client, "server.status", json!({}))?["pid"].clone();
    let last_tick = last_tick(&call(
        &mut client,
        "pane.capture",
        json!({ "target": "counter" }),
    )?);
    let report = call(&mut client, "server.upgrade", json!({}))?;
    for phase in report["phases"].as_array().into_iter().flatten() {
        println!(
            "  {:<10} {:>8.3} ms",
            phase["name"].as_str().unwrap_or("?"),
            phase["ms"].as_f64().unwrap_or(0.0)
        );
    }
    println!(
        "  server pid {old_server} -> {}, generation {}, blackout {:.3} ms, {} fds moved",
        report["new_pid"],
        report["generation"],
        report["blackout_ms"].as_f64().unwrap_or(0.0),
        report["fds"]
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
    call(
        &mut client,
        "pane.wait",
        json!({ "target": "counter", "text": target, "timeout_ms": 10000 }),
    )?;
    let capture = call(
        &mut client,
        "pane.capture",
        json!({ "target": "counter", "start": -200 }),
    )?;
    let ticks: Vec<u64> = crate::client::capture_lines(&capture)
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
    call(&mut client, "pane.kill", json!({ "target": "counter" }))?;
    let killed = call(
        &mut client,
        "pane.wait",
        json!({ "target": "counter", "exit": true, "timeout_ms": 10000 }),
    )?;
    println!("  counter ended: {}", killed["exit"]);

    step("listing panes");
    let list = call(&mut client, "pane.list", json!({}))?;
    for pane in list["panes"].as_array().into_iter().flatten() {
        println!(
            "  {} {:<8} {:<8} exit={}",
            pane["id"].as_str().unwrap_or("?"),
            pane["name"].as_str().unwrap_or(""),
            pane["state"].as_str().unwrap_or("?"),
            pane["exit"]
        );
    }

    step("stopping the server and removing the namespace");
    drop(client);
    drop(server);
    println!("  done");
    Ok(0)
}

/// Pane id -> pid, for comparing before and after the upgrade.
fn pane_pids(client: &mut Client) -> Result<Vec<(String, i64)>, CliError> {
    let list = client.call("pane.list", json!({}))?;
    Ok(list["panes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["state"] == "running")
        .map(|p| {
            (
                p["id"].as_str().unwrap_or("?").to_string(),
                p["pid"].as_i64().unwrap_or(0),
            )
        })
        .collect())
}

/// The highest `tick N` on the counter's screen.
fn last_tick(capture: &Value) -> u64 {
    crate::client::capture_lines(capture)
        .iter()
        .filter_map(|l| l.strip_prefix("tick ").and_then(|n| n.trim().parse().ok()))
        .max()
        .unwrap_or(0)
}

fn print_screen(capture: &Value) {
    println!("  screen of {}:", capture["pane"].as_str().unwrap_or("?"));
    for line in crate::client::capture_lines(capture) {
        println!("  | {line}");
    }
}
