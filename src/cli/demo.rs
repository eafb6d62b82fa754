//! `ptyd demo`: the main job on embedded defaults. It starts a server in a
//! private temporary namespace, runs a few panes, drives them through the
//! API exactly as a script would, prints what it did and saw (each step
//! with the `ptyd` command that does the same), attaches, upgrades live,
//! restores from the snapshot, cleans up, and ends with what to try next.

use super::CliError;
use crate::client::Client;
use crate::paths::NamespacePaths;
use crate::protocol::methods::{self, NoParams, Request};
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

/// One API call, shown as the command line that does the same (`cli`,
/// after `ptyd -L NAMESPACE`) and as the request it sends.
fn call(client: &mut Client, cli: &str, request: Request) -> Result<Value, CliError> {
    let wire = serde_json::to_value(&request).unwrap_or_default();
    println!("  $ ptyd -L {} {cli}", demo_namespace());
    println!("    (API: {} {})", request.method(), wire["params"]);
    Ok(client.request(&request)?)
}

fn create(name: &str, cwd: &std::path::Path) -> methods::PaneCreate {
    methods::PaneCreate {
        name: Some(name.into()),
        cwd: Some(cwd.to_string_lossy().into_owned()),
        ..methods::PaneCreate::default()
    }
}

fn input(target: &str, data: &str, request_id: Option<&str>) -> Request {
    Request::PaneInput(methods::PaneInput {
        target: target.into(),
        data: Some(data.into()),
        keys: Vec::new(),
        paste: false,
        request_id: request_id.map(str::to_string),
    })
}

/// Waits for text in output that arrives from now on.
fn wait_text(target: &str, text: &str) -> Request {
    Request::PaneWait(methods::PaneWait {
        text: Some(text.into()),
        timeout_ms: Some(10_000),
        ..methods::PaneWait::new(target.into())
    })
}

/// Waits for text that may be on the screen already.
fn wait_screen_text(target: &str, text: &str) -> Request {
    Request::PaneWait(methods::PaneWait {
        text: Some(text.into()),
        include_screen: true,
        timeout_ms: Some(10_000),
        ..methods::PaneWait::new(target.into())
    })
}

/// Waits for text in the output that followed an input (`ack` is its
/// reply), past the echoed command line: only the command's own output can
/// match, however fast it comes.
fn wait_text_after(target: &str, text: &str, ack: &serde_json::Value) -> Request {
    Request::PaneWait(methods::PaneWait {
        text: Some(text.into()),
        after_output: ack["output_bytes"].as_u64(),
        skip_lines: Some(1),
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
        origin: None,
    })
}

fn upgrade(mode: Option<&str>) -> Request {
    Request::ServerUpgrade(methods::Upgrade {
        mode: mode.map(str::to_string),
        ..methods::Upgrade::default()
    })
}

/// The demo's private namespace.
fn demo_namespace() -> String {
    format!("demo-{}", std::process::id())
}

pub fn run() -> Result<i32, CliError> {
    let namespace = demo_namespace();
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
    let status = call(
        &mut client,
        "status --json",
        Request::ServerStatus(NoParams {}),
    )?;
    println!(
        "  server pid {} listening on {}",
        status["pid"],
        status["socket"].as_str().unwrap_or("?")
    );
    create_panes(&mut client)?;
    type_and_wait(&mut client)?;

    step("attaching read-only to the shell, as `ptyd attach` does");
    attach_and_watch(&paths, &mut client)?;
    let mut client = restore(&paths, client)?;
    live_upgrade(&mut client)?;
    kill_and_list(&mut client)?;

    step("stopping the server and removing the namespace");
    println!("  $ ptyd -L {} stop", demo_namespace());
    drop(client);
    drop(server);
    println!("  done");
    what_next();
    Ok(0)
}

/// A shell, a counter, and a command that exits with code 7.
fn create_panes(client: &mut Client) -> Result<(), CliError> {
    step("creating three panes: a shell, a counter, and a command that exits with code 7");
    let tmp = std::env::temp_dir();
    let shell = call(
        client,
        &format!(
            "new -d -n shell -c {} -e PS1='demo$ ' -- /bin/sh",
            tmp.display()
        ),
        Request::PaneCreate(methods::PaneCreate {
            argv: Some(vec!["/bin/sh".into()]),
            env: BTreeMap::from([("PS1".into(), "demo$ ".into())]),
            ..create("shell", &tmp)
        }),
    )?;
    let counter = call(
        client,
        &format!(
            "new -d -n counter -c {} --restore rerun --shell 'i=0; while true; do ...; done'",
            tmp.display()
        ),
        Request::PaneCreate(methods::PaneCreate {
            shell: Some("i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done".into()),
            restore: Some(crate::model::RestorePolicy::Rerun),
            ..create("counter", &tmp)
        }),
    )?;
    let exiter = call(
        client,
        &format!(
            "new -d -n exiter -c {} --shell 'echo about to exit; exit 7'",
            tmp.display()
        ),
        Request::PaneCreate(methods::PaneCreate {
            shell: Some("echo about to exit; exit 7".into()),
            ..create("exiter", &tmp)
        }),
    )?;
    for pane in [&shell, &counter, &exiter] {
        println!(
            "  {} {:<8} pid {}",
            pane["id"].as_str().unwrap_or("?"),
            pane["name"].as_str().unwrap_or(""),
            pane["pid"]
        );
    }

    Ok(())
}

/// Typing into the shell, waiting for what it prints, for an exit and for
/// text on a screen.
fn type_and_wait(client: &mut Client) -> Result<(), CliError> {
    step("typing into the shell and waiting for its answer on screen");
    let ack = call(
        client,
        "send shell --enter --request-id demo-1 --json 'echo hello from $PTYD_PANE_ID'",
        input("shell", "echo hello from $PTYD_PANE_ID\r", Some("demo-1")),
    )?;
    // From the ack's output count, past the echoed command line: only the
    // command's own output can match, however fast it comes.
    call(
        client,
        "wait shell --text 'hello from p1' --after-output OUTPUT_BYTES_OF_THE_ACK --timeout 10s",
        wait_text_after("shell", "hello from p1", &ack),
    )?;
    let screen = call(client, "capture shell", capture("shell", None))?;
    print_screen(&screen);
    let again = call(
        client,
        "send shell --enter --request-id demo-1 'echo hello from $PTYD_PANE_ID'",
        input("shell", "echo hello from $PTYD_PANE_ID\r", Some("demo-1")),
    )?;
    println!("  the same request_id again is acknowledged without typing twice: {again}");

    step("waiting for the exiting command");
    let exit = call(
        client,
        "wait exiter --exit --timeout 10s",
        wait_exit("exiter"),
    )?;
    println!("  exiter finished: {}", exit["exit"]);

    step("waiting until the counter reaches 5");
    call(
        client,
        "wait counter --text 'tick 5' --screen --timeout 10s",
        wait_screen_text("counter", "tick 5"),
    )?;

    Ok(())
}

/// A restore in place, as after a reboot; returns the connection to the
/// server that restored.
fn restore(paths: &NamespacePaths, mut client: Client) -> Result<Client, CliError> {
    step("restore: the server saves, restarts in place and rebuilds the session from disk");
    println!("  (what a reboot does; also the fallback where a live upgrade is impossible)");
    let before = pane_pids(&mut client)?;
    call(
        &mut client,
        "upgrade --mode restore",
        upgrade(Some("restore")),
    )?;
    drop(client);
    let mut client = reconnect(paths)?;
    call(
        &mut client,
        "wait counter --text 'tick 3' --screen --timeout 10s",
        wait_screen_text("counter", "tick 3"),
    )?;
    let after = pane_pids(&mut client)?;
    println!("  running pane pids before: {before:?}");
    println!("  running pane pids after:  {after:?}");
    println!("  the shell is a fresh shell in its directory, the counter (--restore rerun)");
    println!("  runs again, and each screen's history comes back above a marker:");
    let screen = call(
        &mut client,
        "capture shell -S -20",
        capture("shell", Some(-20)),
    )?;
    print_screen(&screen);

    Ok(client)
}

/// A live upgrade, with the counter going on across it.
fn live_upgrade(client: &mut Client) -> Result<(), CliError> {
    step("live upgrade: the server replaces its own binary while every pane runs");
    let before = pane_pids(client)?;
    let old_server =
        call(client, "status --json", Request::ServerStatus(NoParams {}))?["pid"].clone();
    let report = call(client, "upgrade", upgrade(None))?;
    // After the answer (which comes once the new server survived its
    // probation): the counter must go on from where it is now.
    let last_tick = last_tick(&call(client, "capture counter", capture("counter", None))?);
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
    let after = pane_pids(client)?;
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
        client,
        &format!("wait counter --text '{target}' --timeout 10s"),
        wait_text("counter", &target),
    )?;
    let capture = call(
        client,
        "capture counter -S -200",
        capture("counter", Some(-200)),
    )?;
    let ticks = run_ticks(&capture);
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

    Ok(())
}

fn kill_and_list(client: &mut Client) -> Result<(), CliError> {
    step("killing the counter's whole process tree");
    call(
        client,
        "kill counter",
        Request::PaneKill(methods::PaneKill {
            target: "counter".into(),
            signal: None,
            grace_ms: None,
        }),
    )?;
    let killed = call(
        client,
        "wait counter --exit --timeout 10s",
        wait_exit("counter"),
    )?;
    println!("  counter ended: {}", killed["exit"]);

    step("listing panes");
    let list = call(client, "ls --json", Request::PaneList(NoParams {}))?;
    for pane in list["panes"].as_array().into_iter().flatten() {
        // A held pane has no exit status: it never ran in this server.
        let exit = match &pane["exit"] {
            Value::Null => String::new(),
            status => format!("exit={status}"),
        };
        println!(
            "  {} {:<8} {:<8} {exit}",
            pane["id"].as_str().unwrap_or("?"),
            pane["name"].as_str().unwrap_or(""),
            pane["state"].as_str().unwrap_or("?"),
        );
    }

    Ok(())
}

fn what_next() {
    println!(
        "\n== what to try next
  ptyd new                          a shell in a pane, attached (Ctrl-\\ detaches)
  ptyd ls                           your workspaces, tabs and panes
  ptyd attach NAME                  back into a pane, from any terminal
  ptyd run -- make test             a command in a pane, its output and exit code here
  ptyd upgrade                      after installing a new build: every pane keeps running
  ptyd service install --enable     run it as a systemd user service (man ptyd, SYSTEMD)
  ptyd completions bash             shell completions (also zsh, fish)
  ptyd --help                       every command; docs/protocol.md for the API"
    );
}

/// Attaches a second connection read-only to the shell: it gets the
/// redraw of the current screen first, then live output as the shell
/// prints, until it detaches by closing.
fn attach_and_watch(paths: &NamespacePaths, client: &mut Client) -> Result<(), CliError> {
    println!("  $ ptyd -L {} attach shell --read-only", demo_namespace());
    let watcher = Client::connect(paths, false)?;
    let (_, mut frames) = crate::client::attach(
        watcher,
        methods::Attach {
            target: "shell".into(),
            read_only: true,
            cols: Some(80),
            rows: Some(24),
            history: None,
            alt_screen: false,
            from_pane: None,
            detach_others: false,
            when_behind: methods::WhenBehind::Pause,
            view: None,
            client_env: None,
        },
    )?;
    let _ = crate::transport::set_read_timeout(
        frames.stream(),
        Some(std::time::Duration::from_secs(10)),
    );
    let mut seen = Vec::new();
    match frames.next_blocking()? {
        Some(crate::client::ServerFrame::Output(redraw)) => {
            println!(
                "  first frame: the redraw of the current screen ({} bytes)",
                redraw.len()
            );
        }
        _ => println!("  the attachment ended at once"),
    }
    call(
        client,
        "send shell --enter 'echo seen live by the attached client'",
        input("shell", "echo seen live by the attached client\r", None),
    )?;
    // The echo of the typed line comes first; wait for the printed one.
    let want = b"\r\nseen live by the attached client";
    while !seen.windows(want.len()).any(|w| w == want) {
        match frames.next_blocking()? {
            Some(crate::client::ServerFrame::Output(bytes)) => seen.extend_from_slice(&bytes),
            _ => break,
        }
    }
    println!(
        "  then live output, {} bytes, with the shell's answer; closing the connection detaches",
        seen.len()
    );
    Ok(())
}

/// Connects again once the server restarted in place (it rebinds the
/// socket after restoring), within 10 s.
fn reconnect(paths: &NamespacePaths) -> Result<Client, CliError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match Client::connect(paths, false) {
            Ok(c) => return Ok(c),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e.into()),
            // Polled: the restarting server has no way to tell us.
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Pane id -> pid, for comparing before and after the upgrade.
fn pane_pids(client: &mut Client) -> Result<Vec<(String, i64)>, CliError> {
    let list = client.request(&Request::PaneList(NoParams {}))?;
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
    run_ticks(capture).into_iter().max().unwrap_or(0)
}

/// The counter's `tick N` lines of its current run: those below the marker
/// a restore put under the previous run's history.
fn run_ticks(capture: &Value) -> Vec<u64> {
    let lines = crate::client::capture_lines(capture);
    let run_start = lines
        .iter()
        .rposition(|l| l.contains("--- ptyd: restored"))
        .map_or(0, |i| i + 1);
    lines[run_start..]
        .iter()
        .filter_map(|l| l.strip_prefix("tick ").and_then(|n| n.trim().parse().ok()))
        .collect()
}

fn print_screen(capture: &Value) {
    println!("  screen of {}:", capture["pane"].as_str().unwrap_or("?"));
    for line in crate::client::capture_lines(capture) {
        println!("  | {line}");
    }
}
