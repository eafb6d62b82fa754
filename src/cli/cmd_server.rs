//! The commands about the server itself: `server` (run it), `status`,
//! `save`, `stop` and `version`. Only `server` starts one.

use super::args::Parsed;
use super::commands::{connect_existing, print_json};
use super::{CliError, Global};
use crate::client;
use crate::protocol::methods::{NoParams, Request};
use crate::protocol::replies::{Saved, Status};
use serde_json::{Value, json};

pub fn server(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    crate::server::run(crate::server::ServerOptions {
        paths: g.paths.clone(),
        history: !a.flag("no-history"),
        restore: !a.flag("no-restore"),
        hold_reruns: a.flag("hold-reruns"),
    })
    .map_err(|e| {
        let (code, kind) = if e.already_served {
            (crate::server::EXIT_ALREADY_SERVED, "already_served")
        } else {
            (1, "failed")
        };
        CliError {
            message: e.message,
            code,
            kind: kind.into(),
        }
    })?;
    Ok(0)
}

pub fn version(_: &Global, a: &Parsed) -> Result<i32, CliError> {
    let v = json!({
        "server_version": crate::protocol::SERVER_VERSION,
        "protocol": crate::protocol::PROTOCOL_VERSION,
        "handoff_version": crate::handoff::manifest::HANDOFF_VERSION,
        "handoff_accepts": [
            crate::handoff::manifest::HANDOFF_ACCEPTS_FROM,
            crate::handoff::manifest::HANDOFF_VERSION
        ],
        "snapshot_version": crate::persist::snapshot::SNAPSHOT_VERSION,
    });
    if a.flag("json") {
        println!("{v}");
    } else {
        println!(
            "ptyd {} (protocol {}, handoff {}, snapshot {})",
            v["server_version"].as_str().unwrap_or("?"),
            v["protocol"],
            v["handoff_version"],
            v["snapshot_version"]
        );
    }
    Ok(0)
}

pub fn save(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let r = connect_existing(g)?.request(&Request::ServerSave(NoParams {}))?;
    if a.flag("json") {
        print_json(&r);
    } else {
        let r: Saved = client::parse_reply("server.save", r)?;
        println!("saved to {}", r.path.display());
    }
    Ok(0)
}

pub fn stop(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let forget = a.flag("forget");
    if a.flag("yes") && !forget {
        return Err(CliError::usage(
            "--yes confirms --forget, which was not given: `ptyd stop --forget --yes`",
        ));
    }
    if forget && !a.flag("yes") {
        confirm_forget(g)?;
    }
    match client::Client::connect(&g.paths, false) {
        Ok(mut client) => {
            client.request(&Request::ServerStop(NoParams {}))?;
            // The server closes our connection as its last act (after its
            // final save): wait for that, so a `ptyd stop && ptyd server`
            // never races the old server's lock, and --forget removes what
            // it saved.
            client.wait_closed()?;
        }
        // Nothing to stop; the snapshot may still be there to forget.
        Err(e) if forget && matches!(e.kind, client::ErrorKind::NoServer) => {}
        Err(e) if matches!(e.kind, client::ErrorKind::NoServer) => {
            return Err(CliError {
                message: format!(
                    "no ptyd server runs in namespace {:?}: nothing to stop",
                    g.paths.namespace
                ),
                code: 1,
                kind: e.code().to_string(),
            });
        }
        Err(e) => return Err(e.into()),
    }
    if forget {
        forget_snapshot(g)?;
    }
    Ok(0)
}

/// Asks on the terminal whether to end the namespace for good; refuses
/// without a terminal to ask on.
fn confirm_forget(g: &Global) -> Result<(), CliError> {
    use std::io::{BufRead, IsTerminal, Write};
    let ns = &g.paths.namespace;
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(format!(
            "stop --forget removes namespace {ns:?}'s snapshot for good, and asks first, but \
             stdin is not a terminal: confirm with `ptyd stop --forget --yes`"
        )));
    }
    eprint!(
        "End namespace {ns:?} for good? Its server stops and its snapshot is removed: no pane \
         comes back. [y/N] "
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::failure(format!("reading the answer: {e}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        return Ok(());
    }
    Err(CliError {
        message: "not confirmed; nothing was changed".into(),
        code: 1,
        kind: "not_confirmed".into(),
    })
}

/// Removes the namespace's snapshot: the session file and the history
/// files. Diagnostics and snapshots set aside in backups/ stay.
fn forget_snapshot(g: &Global) -> Result<(), CliError> {
    let state = &g.paths.state_dir;
    let session = crate::persist::session_path(state);
    let history = crate::persist::history_dir(state);
    let gone = |r: std::io::Result<()>, path: &std::path::Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CliError::failure(format!(
            "removing {}: {e}; remove it by hand, or the panes come back at the next start",
            path.display()
        ))),
        _ => Ok(()),
    };
    gone(std::fs::remove_file(&session), &session)?;
    gone(std::fs::remove_dir_all(&history), &history)?;
    println!(
        "namespace {:?} ended: its snapshot ({}) is removed",
        g.paths.namespace,
        session.display()
    );
    Ok(())
}

pub fn status(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let s = connect_existing(g)?.request(&Request::ServerStatus(NoParams {}))?;
    if a.flag("json") {
        print_json(&s);
        return Ok(0);
    }
    let s: Status = client::parse_reply("server.status", s)?;
    println!(
        "ptyd {} (protocol {}), pid {}",
        s.server_version, s.protocol, s.pid
    );
    println!("namespace:  {}", s.namespace);
    println!("socket:     {}", s.socket.display());
    println!("uptime:     {} s", s.uptime_ms / 1000);
    println!("panes:      {} ({} running)", s.panes, s.running_panes);
    println!(
        "clients:    {} attached ({} other connections)",
        s.clients, s.connections
    );
    println!("generation: {}", s.generation);
    if let (Some(stored), Some(raw), Some(limit)) = (
        s.history["stored_bytes"].as_u64(),
        s.history["raw_bytes"].as_u64(),
        s.history["total_bytes_limit"].as_u64(),
    ) {
        let mib = |n: u64| n as f64 / f64::from(1 << 20);
        println!(
            "history:    {:.1} MiB held for {:.1} MiB of lines (scrollback_total_bytes {:.1} MiB)",
            mib(stored),
            mib(raw),
            mib(limit)
        );
    }
    print_restore(&s.persistence["restore"]);
    print_recovery(&s.keeper["last_recovery"]);
    let problems = s.config["problems"].as_array().cloned().unwrap_or_default();
    if !problems.is_empty() {
        println!(
            "config:     {} problem(s), each key falls back to its default:",
            problems.len()
        );
        for p in problems {
            println!("  {}", p.as_str().unwrap_or_default());
        }
    }
    Ok(0)
}

/// The last restore, for `ptyd status`: when, from which file, and per
/// outcome how many panes and which (held ones with their reason).
/// The last crash recovery, which `restore:` (the snapshot at start-up)
/// does not cover: the serving process died and another took over.
fn print_recovery(r: &Value) {
    let Some(why) = r["reason"].as_str() else {
        return;
    };
    if r["from"] == "snapshot" {
        println!("recovery:   {why}; restarted from the snapshot on disk");
        return;
    }
    let when = r["at_unix_ms"]
        .as_u64()
        .map_or("at an unknown time".to_string(), crate::clock::utc);
    if r["from"] == "adopted" {
        let count = |k: &str| r[k].as_array().map_or(0, Vec::len);
        println!(
            "recovery:   {when}: {why}; a crash loop: started without the checkpoint from the snapshot on disk, adopted {} running pane(s) (their screens lost), restored {} by policy, let go of {}",
            count("adopted"),
            r["restored"].as_u64().unwrap_or(0),
            count("let_go"),
        );
        return;
    }
    let inexact = r["inexact_panes"].as_array().map_or(0, Vec::len);
    println!(
        "recovery:   {when}: {why}; every pane kept, {} bytes of output replayed{}",
        r["replayed_bytes"].as_u64().unwrap_or(0),
        if inexact > 0 {
            format!(", {inexact} pane(s) lost output where the ring went round")
        } else {
            String::new()
        }
    );
}

fn print_restore(r: &Value) {
    if r["found"] != true {
        println!("restore:    none (no snapshot when this server started)");
        return;
    }
    if let Some(why) = r["unusable"].as_str().or(r["reason"].as_str()) {
        println!("restore:    not done: {why}");
        return;
    }
    let when = r["unix_ms"]
        .as_u64()
        .map_or("at start-up".to_string(), crate::clock::utc);
    println!(
        "restore:    {when} from {}: {} panes in {} ms",
        r["file"].as_str().unwrap_or("session.json"),
        r["panes"],
        r["took_ms"]
    );
    let outcomes = r["outcomes"].as_array().cloned().unwrap_or_default();
    for (outcome, heading) in [
        ("resumed", "resumed (resume command)"),
        ("rerun", "rerun"),
        ("shell", "back as a shell"),
        ("held", "held"),
        ("exited", "exited, kept exited"),
    ] {
        let panes: Vec<&Value> = outcomes
            .iter()
            .filter(|o| o["outcome"] == outcome)
            .collect();
        // The report lists the first panes only; the counts cover all.
        let count = r["outcome_counts"][outcome]
            .as_u64()
            .map_or(panes.len(), |n| n as usize);
        if count == 0 {
            continue;
        }
        let more = match count.saturating_sub(panes.len()) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let describe = |o: &Value| match o["name"].as_str() {
            Some(name) => format!("{} ({name})", o["pane"].as_str().unwrap_or("?")),
            None => o["pane"].as_str().unwrap_or("?").to_string(),
        };
        if outcome == "held" {
            println!("  {heading}: {count}");
            for o in panes {
                println!(
                    "    {}: {}",
                    describe(o),
                    o["held_reason"].as_str().unwrap_or("")
                );
            }
            if !more.is_empty() {
                println!("    ...{more}");
            }
        } else {
            let list: Vec<String> = panes.iter().map(|o| describe(o)).collect();
            println!("  {heading}: {count}: {}{more}", list.join(", "));
        }
    }
    let repairs = r["repairs"].as_array().map_or(0, Vec::len);
    if repairs > 0 {
        println!("  repairs: {repairs} (`ptyd status --json` lists them)");
    }
}
