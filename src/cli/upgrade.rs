//! `ptyd upgrade`: the live upgrade (or `--mode restore`) as a command
//! whose exit status tells the truth. Success means the new server serves
//! and survived its probation (the server answers only then); a take-back
//! or a rollback is a failure with the server's reason. An upgrade that
//! finds another one running (or in its probation) waits for it and then
//! runs, so `ptyd upgrade; ptyd upgrade` and two `systemctl --user reload`
//! in a row both work.

use super::args::Parsed;
use super::commands::connect_existing;
use super::{CliError, Global};
use crate::client::{self, Client, ClientError};
use crate::protocol::methods::{self, NoParams, Request};
use crate::protocol::replies::{Endpoint, RestartReport, Status, UpgradeReport};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// How long an upgrade waits for one already running: the longest a
/// running one can take (`upgrade_timeout_ms` at most 600 s, then at most
/// 60 s of probation), with room to spare.
const WAIT_FOR_RUNNING: Duration = Duration::from_secs(15 * 60);
/// Between two tries while another upgrade runs.
const RETRY_EVERY: Duration = Duration::from_millis(100);
/// How long a server restarting in place (`--mode restore`) may take to
/// serve again, if its process lives on.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn upgrade(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    // Tests only: release builds have no fault points (handoff::fault).
    if a.flag("fault") && !cfg!(any(debug_assertions, feature = "fault-injection")) {
        return Err(CliError::usage("invalid option '--fault'"));
    }
    let params = methods::Upgrade {
        // Relative to where the command runs, not the server's cwd.
        binary: a
            .value("binary")?
            .map(|b| std::path::absolute(&b).map_or(b, |p| p.display().to_string())),
        timeout_ms: a.millis("timeout")?,
        mode: a.value("mode")?,
        fault: a.value("fault")?,
    };
    let as_json = a.flag("json");
    let restore = params.mode.as_deref() == Some("restore");
    let mut client = connect_existing(g)?;
    // What served before, to tell afterwards what became of it if the
    // answer never comes.
    let before = client.request(&Request::ServerStatus(NoParams {}))?;
    let asked_ms = crate::clock::unix_ms();
    let report = match request_after_running_one(&mut client, &params) {
        Err(e) if matches!(e.kind.as_str(), "disconnected" | "io") && !restore => {
            return after_lost_answer(g, &before, asked_ms, e, as_json);
        }
        other => other?,
    };
    // Windows has only the restore path, whatever was asked for.
    if restore || report["mode"] == "restore" {
        return restarted(g, report, as_json);
    }
    if as_json {
        println!("{report}");
        return Ok(0);
    }
    let report: UpgradeReport = client::parse_reply("server.upgrade", report)?;
    let to = report.to.clone().unwrap_or(Endpoint {
        pid: report.new_pid,
        version: report.server_version.clone(),
        binary: None,
    });
    match &report.from {
        Some(from) => println!(
            "upgraded {} -> {} (generation {})",
            from.describe(),
            to.describe(),
            report.generation
        ),
        None => println!(
            "upgraded to {} (generation {})",
            to.describe(),
            report.generation
        ),
    }
    if let Some(ms) = report.probation_ms {
        let how = report.probation.as_deref().unwrap_or("survived");
        println!("  probation  {how} ({ms} ms)");
    }
    for phase in &report.phases {
        println!("  {:<10} {:>9.3} ms", phase.name, phase.ms);
    }
    println!("  blackout   {:>9.3} ms", report.blackout_ms);
    println!(
        "  moved {} panes, {} clients, {} fds in {} batches",
        report.panes, report.clients, report.fds, report.fd_batches
    );
    Ok(0)
}

/// The server went away before answering the upgrade (killed in its
/// middle, or in the probation): asks whoever serves now what happened,
/// which is what the user needs, not that a connection closed. A
/// recovery by the keeper since the request means nothing was upgraded;
/// a later generation without one means the upgrade went through.
fn after_lost_answer(
    g: &Global,
    before: &Value,
    asked_ms: u64,
    lost: CliError,
    as_json: bool,
) -> Result<i32, CliError> {
    let old_pid = before["pid"].as_u64().unwrap_or(0);
    let deadline = Instant::now() + RESTART_TIMEOUT;
    let status = loop {
        if let Ok(mut c) = Client::connect(&g.paths, false)
            && let Ok(status) = c.request(&Request::ServerStatus(NoParams {}))
            && status["pid"].as_u64() != Some(old_pid)
        {
            break status;
        }
        if Instant::now() > deadline {
            return Err(CliError::failure(format!(
                "the server (pid {old_pid}) went away during the upgrade ({}), and no other server has answered since (waited {} s); `ptyd status` starts one from the saved session if none is running",
                lost.message,
                RESTART_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (pid, version) = (
        &status["pid"],
        status["server_version"].as_str().unwrap_or("?"),
    );
    let recovery = &status["keeper"]["last_recovery"];
    let recovered = recovery["at_unix_ms"]
        .as_u64()
        .is_some_and(|at| at >= asked_ms)
        || (recovery["from"] == "snapshot" && status["started_unix_ms"].as_u64() >= Some(asked_ms));
    if recovered {
        let from = if recovery["from"] == "snapshot" {
            "from the snapshot on disk"
        } else {
            "from its checkpoint, every pane kept"
        };
        return Err(CliError::failure(format!(
            "the server (pid {old_pid}) died in the middle of the upgrade ({}); the keeper recovered the session into a new server of the old binary (pid {pid}, ptyd {version}) {from}, so nothing was upgraded: run `ptyd upgrade` again",
            recovery["reason"].as_str().unwrap_or("killed"),
        )));
    }
    let generation = status["generation"].as_u64().unwrap_or(0);
    if generation > before["generation"].as_u64().unwrap_or(0) {
        if as_json {
            println!("{}", json!({ "answer_lost": true, "status": status }));
        } else {
            println!(
                "upgraded to ptyd {version} (pid {pid}, generation {generation}); the old server (pid {old_pid}) died before it could report the upgrade"
            );
        }
        return Ok(0);
    }
    Err(CliError::failure(format!(
        "the server (pid {old_pid}) went away during the upgrade ({}); ptyd {version} serves now (pid {pid}, generation {generation}): `ptyd status` says more",
        lost.message
    )))
}

/// Sends the upgrade; while the server answers `busy` (an upgrade runs or
/// is in its probation), says so once and tries again until it is over.
/// Polling is enough here: the server's own deadlines bound the wait.
fn request_after_running_one(
    client: &mut Client,
    params: &methods::Upgrade,
) -> Result<Value, CliError> {
    let deadline = Instant::now() + WAIT_FOR_RUNNING;
    let mut told = false;
    loop {
        match client.request(&Request::ServerUpgrade(params.clone())) {
            Err(e) if e.refused("busy") && Instant::now() < deadline => {
                if !told {
                    eprintln!("ptyd: {}; waiting for it", busy_reason(&e));
                    told = true;
                }
                std::thread::sleep(RETRY_EVERY);
            }
            other => return Ok(other?),
        }
    }
}

/// The server's `busy` message without its advice to retry (we do).
fn busy_reason(e: &ClientError) -> &str {
    e.message
        .split_once(';')
        .map_or(e.message.as_str(), |(what, _)| what)
}

/// `--mode restore`: the server answered, saved and is exec'ing the new
/// binary in the same process. Waits for it to serve again; if that
/// process ends first (a binary that passed the version probe but cannot
/// serve), the session is brought back by this ptyd instead, from the
/// snapshot just saved, and the command fails saying so.
fn restarted(g: &Global, report: Value, as_json: bool) -> Result<i32, CliError> {
    let before: RestartReport = client::parse_reply("server.upgrade", report.clone())?;
    let status = match wait_for_restart(g, before.pid) {
        Ok(status) => status,
        Err(Restart::Ended) => return Err(bring_back(g, &before)),
        Err(Restart::TimedOut) => {
            return Err(CliError::failure(format!(
                "the server (pid {}) restarted as {} but did not serve within {} s; see its log \
                 (the journal, or server.stderr in {}); the session is saved there",
                before.pid,
                before.binary,
                RESTART_TIMEOUT.as_secs(),
                g.paths.state_dir.display()
            )));
        }
    };
    if as_json {
        println!(
            "{}",
            json!({ "mode": "restore", "before": report, "status": status })
        );
        return Ok(0);
    }
    let status: Status = client::parse_reply("server.status", status)?;
    let from = before
        .from
        .as_ref()
        .map_or_else(|| format!("pid {}", before.pid), Endpoint::describe);
    println!(
        "restarted {from} as ptyd {} ({}, pid {}); restored {} panes ({} running)",
        status.server_version, before.binary, status.pid, status.panes, status.running_panes
    );
    Ok(0)
}

enum Restart {
    /// The process that was to restart as the new binary is gone.
    Ended,
    TimedOut,
}

/// Waits until the restarted server answers, or its process ends.
fn wait_for_restart(g: &Global, pid: u32) -> Result<Value, Restart> {
    let deadline = Instant::now() + RESTART_TIMEOUT;
    loop {
        if let Ok(mut c) = Client::connect(&g.paths, false)
            && let Ok(status) = c.request(&Request::ServerStatus(NoParams {}))
        {
            return Ok(status);
        }
        if crate::sys::process_ended(pid as i32) {
            return Err(Restart::Ended);
        }
        if Instant::now() > deadline {
            return Err(Restart::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The new binary ended before serving: start a server with this binary
/// (as any client command would), which restores the saved session.
fn bring_back(g: &Global, before: &RestartReport) -> CliError {
    let failed = format!(
        "the server (pid {}) restarted as {} and exited before serving: that binary cannot serve \
         here (see the journal, or server.stderr in {})",
        before.pid,
        before.binary,
        g.paths.state_dir.display()
    );
    let me = std::env::current_exe().map_or_else(|_| "ptyd".into(), |p| p.display().to_string());
    let status = Client::connect(&g.paths, true)
        .and_then(|mut c| c.request_as::<Status>(&Request::ServerStatus(NoParams {})));
    CliError::failure(match status {
        Ok(s) => format!(
            "{failed}; the saved session was restored by this ptyd instead ({me}, ptyd {}, pid {}, \
             {} panes); upgrade again with a working binary",
            s.server_version, s.pid, s.panes
        ),
        Err(e) => format!(
            "{failed}; starting this ptyd ({me}) to restore the session failed too: {}; the \
             session is saved in {}, and `ptyd server` restores it",
            e.message,
            g.paths.state_dir.display()
        ),
    })
}
