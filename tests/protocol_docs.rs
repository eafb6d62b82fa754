//! docs/protocol.md against the real server: every JSON example in it
//! parses; every documented request is accepted by the method it is
//! documented under; every documented reply, event, exit status and mode
//! set has the shape of what a real server sends (each member shown exists
//! in the real one with the same JSON type); and `ptyd events` prints the
//! event objects as the subscription carries them.

// Drives the real server, which runs on Unix only (src/lib.rs).
#![cfg(unix)]

mod util;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use util::Dirs;

/// One JSON example of the document.
struct Example {
    /// The `###` heading it is under (its method names, for method sections).
    heading: String,
    line: usize,
    /// Before a `→` (a request's params) or after it (a reply).
    kind: Kind,
    value: Value,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Params,
    Reply,
    /// A fenced block with no `→` before it: an exit status, an event line,
    /// the modes, a request/response exchange, `pane.create`'s params.
    Block,
}

/// Every example: inline code spans on lines with `→` (and the bullet
/// lines of `pane.wait`), and fenced ```json blocks (a stream of values).
fn examples() -> Vec<Example> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md"))
        .expect("reading docs/protocol.md");
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut lines = text.lines().enumerate().peekable();
    let mut arrow_pending = false;
    while let Some((i, line)) = lines.next() {
        if line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_string();
            arrow_pending = false;
            continue;
        }
        if line.starts_with("```json") {
            let mut block = String::new();
            for (_, l) in lines.by_ref() {
                if l.starts_with("```") {
                    break;
                }
                block.push_str(l);
                block.push('\n');
            }
            let kind = if arrow_pending {
                Kind::Reply
            } else {
                Kind::Block
            };
            for value in serde_json::Deserializer::from_str(&block).into_iter::<Value>() {
                let value = value.unwrap_or_else(|e| {
                    panic!(
                        "docs/protocol.md:{}: a JSON block does not parse: {e}",
                        i + 1
                    )
                });
                out.push(Example {
                    heading: heading.clone(),
                    line: i + 1,
                    kind,
                    value,
                });
            }
            arrow_pending = false;
            continue;
        }
        let is_example_line = line.contains('→') || line.trim_start().starts_with("- `{");
        if !is_example_line {
            // A paragraph with a `→` announces the reply block after it.
            if line.trim().is_empty() {
                arrow_pending = false;
            }
            continue;
        }
        let arrow_at = line.find('→').unwrap_or(usize::MAX);
        let mut rest = line;
        let mut offset = 0;
        while let Some(start) = rest.find("`{") {
            let Some(len) = rest[start + 1..].find("}`") else {
                break;
            };
            let span = &rest[start + 1..start + 1 + len + 1];
            let at = offset + start;
            let value: Value = serde_json::from_str(span).unwrap_or_else(|e| {
                panic!("docs/protocol.md:{}: `{span}` does not parse: {e}", i + 1)
            });
            out.push(Example {
                heading: heading.clone(),
                line: i + 1,
                kind: if at < arrow_at {
                    Kind::Params
                } else {
                    Kind::Reply
                },
                value,
            });
            offset += start + len + 3;
            rest = &rest[start + len + 3..];
        }
        arrow_pending = true;
    }
    out
}

/// The method names a heading like "`workspace.rename`, `tab.rename`" names.
fn methods_of(heading: &str) -> Vec<String> {
    heading
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Whether `real` has every member `doc` shows, with the same JSON type,
/// recursively. `"<...>"` in the doc stands for an object documented
/// elsewhere; a documented `null` may be anything, and a real `null` where
/// the doc shows a value is an optional member left unset.
fn shape(doc: &Value, real: &Value, path: &str) -> Result<(), String> {
    match (doc, real) {
        (Value::String(s), _) if s.starts_with('<') && s.ends_with('>') => Ok(()),
        (Value::Null, _) | (_, Value::Null) => Ok(()),
        (Value::Object(d), Value::Object(r)) => {
            for (key, dv) in d {
                let rv = r
                    .get(key)
                    .ok_or_else(|| format!("{path}.{key} is documented but not sent ({real})"))?;
                shape(dv, rv, &format!("{path}.{key}"))?;
            }
            Ok(())
        }
        (Value::Array(d), Value::Array(r)) => {
            for (i, dv) in d.iter().enumerate() {
                if r.is_empty() {
                    return Err(format!(
                        "{path}[{i}] is documented, the real array is empty"
                    ));
                }
                let fits: Vec<String> = r
                    .iter()
                    .filter_map(|rv| shape(dv, rv, &format!("{path}[{i}]")).err())
                    .collect();
                if fits.len() == r.len() {
                    return Err(fits.join("; "));
                }
            }
            Ok(())
        }
        (Value::Bool(_), Value::Bool(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_)) => Ok(()),
        _ => Err(format!("{path}: documented {doc}, sent {real}")),
    }
}

/// The key a real reply is filed under: the method, plus the `reason` of
/// `pane.wait` replies.
fn reply_key(method: &str, value: &Value) -> String {
    match value["reason"].as_str() {
        Some(reason) if method == "pane.wait" => format!("pane.wait:{reason}"),
        _ => method.to_string(),
    }
}

/// Makes a request that must succeed and files its reply.
#[track_caller]
fn call(
    real: &mut HashMap<String, Value>,
    c: &mut util::Conn,
    method: &str,
    params: Value,
) -> Value {
    let reply = c.ok(method, params);
    real.insert(reply_key(method, &reply), reply.clone());
    reply
}

#[test]
fn documented_examples_match_what_the_server_sends() {
    let examples = examples();
    assert!(
        examples.len() > 40,
        "found only {} examples",
        examples.len()
    );

    // A restored server, so the restore report has every outcome.
    let dirs = Dirs::new();
    let ns = util::unique_name("docs");
    let first = dirs.start(&ns);
    let mut c = first.connect();
    c.create(json!({ "name": "agent", "argv": ["sleep", "1000"], "resume": "sleep 1000" }));
    c.create(json!({ "argv": ["sh"] }));
    c.create(json!({ "name": "build", "argv": ["sleep", "1000"], "restore": "hold" }));
    c.save();
    first.stop();
    let ptyd = dirs.start(&ns);

    let mut real: HashMap<String, Value> = HashMap::new();
    let mut sub = ptyd.connect();
    real.insert(
        "events.subscribe".into(),
        sub.ok("events.subscribe", json!({ "since": 0 })),
    );
    let mut c = ptyd.connect();
    call(
        &mut real,
        &mut c,
        "hello",
        json!({ "protocol": 1, "client": "docs-test" }),
    );
    let created = call(
        &mut real,
        &mut c,
        "pane.create",
        json!({ "name": "sh1", "argv": ["sh", "-c", "printf 'ready\\n'; exec cat"],
                "env": { "FOO": "1" }, "split": "p1" }),
    );
    let p = created["id"].as_str().unwrap().to_string();
    c.wait_text(&p, "ready");
    call(&mut real, &mut c, "pane.list", json!({}));
    call(&mut real, &mut c, "tree", json!({}));
    call(
        &mut real,
        &mut c,
        "pane.input",
        json!({ "target": p, "data": "PASS\r" }),
    );
    call(
        &mut real,
        &mut c,
        "pane.wait",
        json!({ "target": p, "text": "PASS", "include_screen": true, "timeout_ms": 10_000 }),
    );
    call(
        &mut real,
        &mut c,
        "pane.wait",
        json!({ "target": p, "idle_ms": 10, "timeout_ms": 10_000 }),
    );
    call(
        &mut real,
        &mut c,
        "pane.resize",
        json!({ "target": p, "cols": 100, "rows": 30 }),
    );
    call(
        &mut real,
        &mut c,
        "pane.capture",
        json!({ "target": p, "start": -10 }),
    );
    call(
        &mut real,
        &mut c,
        "pane.history",
        json!({ "target": p, "start": 0, "count": 10 }),
    );
    call(&mut real, &mut c, "pane.focus", json!({ "target": p }));
    call(&mut real, &mut c, "tab.select", json!({ "target": p }));
    call(
        &mut real,
        &mut c,
        "pane.swap",
        json!({ "target": p, "other": "agent" }),
    );
    call(
        &mut real,
        &mut c,
        "pane.resize_split",
        json!({ "target": p, "direction": "left", "cells": 5 }),
    );
    call(
        &mut real,
        &mut c,
        "pane.set_resume",
        json!({ "target": p, "resume": "cat" }),
    );
    call(
        &mut real,
        &mut c,
        "workspace.create",
        json!({ "name": "work" }),
    );
    call(
        &mut real,
        &mut c,
        "workspace.rename",
        json!({ "target": "work", "name": "work2" }),
    );
    call(
        &mut real,
        &mut c,
        "workspace.remove",
        json!({ "target": "work2" }),
    );
    call(&mut real, &mut c, "server.save", json!({}));
    // A config with a problem, so the reload reports one.
    let config_dir = dirs.state.join("config/ptyd");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(config_dir.join("config.toml"), "bogus = 1\n").unwrap();
    call(&mut real, &mut c, "server.config.reload", json!({}));
    // Shell integration: a prompt and a finished command.
    let bash = c.create(json!({ "argv": ["bash"] }));
    let bash = bash["id"].as_str().unwrap().to_string();
    call(
        &mut real,
        &mut c,
        "pane.wait",
        json!({ "target": bash, "prompt": true, "after": 0, "timeout_ms": 10_000 }),
    );
    let ack = c.input(&bash, "true\r");
    call(
        &mut real,
        &mut c,
        "pane.wait",
        json!({ "target": bash, "command_finished": true,
                "after": ack["commands_finished"], "timeout_ms": 10_000 }),
    );
    // Clients.
    let (attached, mut watcher) = ptyd
        .connect()
        .attach(json!({ "target": p, "cols": 120, "rows": 40 }));
    real.insert("attach".into(), attached);
    call(&mut real, &mut c, "client.list", json!({}));
    call(&mut real, &mut c, "server.status", json!({}));
    call(&mut real, &mut c, "client.detach", json!({ "target": p }));
    assert_eq!(watcher.read_exit()["reason"], "detached");
    // Exits, by status and by signal.
    let done = c.create(json!({ "argv": ["sh", "-c", "exit 0"] }));
    let done = done["id"].as_str().unwrap().to_string();
    call(
        &mut real,
        &mut c,
        "pane.wait",
        json!({ "target": done, "exit": true, "timeout_ms": 10_000 }),
    );
    call(
        &mut real,
        &mut c,
        "pane.kill",
        json!({ "target": p, "signal": "TERM" }),
    );
    let killed = c.wait_exit(&p);
    let mut exits: HashMap<String, Value> = HashMap::new();
    exits.insert("killed".into(), killed);
    exits.insert("exited".into(), real["pane.wait:exited"]["exit"].clone());
    call(&mut real, &mut c, "pane.remove", json!({ "target": p }));
    // The held pane of the restore.
    call(
        &mut real,
        &mut c,
        "pane.wait",
        json!({ "target": "build", "exit": true, "timeout_ms": 10_000 }),
    );

    // Events as the subscription carries them, and as `ptyd events` prints.
    let mut events: Vec<Value> = Vec::new();
    while !events
        .iter()
        .any(|e| e["type"] == "pane.removed" && e["pane"] == p.as_str())
    {
        events.push(sub.next_event());
    }
    let mut cli = ptyd.cli(&["events", "--since", "0"]);
    let mut child = util::KillOnDrop::child(
        cli.stdout(Stdio::piped())
            .spawn()
            .expect("starting ptyd events"),
    );
    let stdout = child.as_child_mut().stdout.take().unwrap();
    let mut printed = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("reading ptyd events");
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("ptyd events printed a line that is not JSON ({e}): {line}")
        });
        let last = event["type"] == "pane.removed" && event["pane"] == p.as_str();
        printed.push(event);
        if last {
            break;
        }
    }
    drop(child);
    assert_eq!(
        printed, events,
        "`ptyd events` must print the event objects the subscription carries"
    );

    // Not run here: an upgrade leaves a new server process this harness
    // does not track (tests/upgrade.rs checks its report member by member),
    // and `server.stop`'s `{}` ends the server the checks need.
    let unchecked = ["server.upgrade", "server.stop"];
    let mut checked = 0;
    for ex in &examples {
        let at = format!("docs/protocol.md:{} ({})", ex.line, ex.heading);
        let methods = methods_of(&ex.heading);
        // Event lines are not replies, whatever precedes them.
        let kind = if ex.value.get("event").is_some() {
            Kind::Block
        } else {
            ex.kind
        };
        match kind {
            Kind::Params if !methods.is_empty() => {
                for m in &methods {
                    ptyd::protocol::methods::Request::parse(m, ex.value.clone())
                        .unwrap_or_else(|e| panic!("{at}: {m} refuses {}: {e}", ex.value));
                }
                checked += 1;
            }
            Kind::Reply if !methods.is_empty() => {
                let m = &methods[0];
                if unchecked.contains(&m.as_str()) {
                    continue;
                }
                let key = reply_key(m, &ex.value);
                let sent = real
                    .get(&key)
                    .unwrap_or_else(|| panic!("{at}: no real {key} reply was collected"));
                shape(&ex.value, sent, &key).unwrap_or_else(|e| panic!("{at}: {e}"));
                checked += 1;
            }
            Kind::Block => {
                let v = &ex.value;
                if let Some(method) = v["method"].as_str() {
                    ptyd::protocol::methods::Request::parse(method, v["params"].clone())
                        .unwrap_or_else(|e| panic!("{at}: {method} refuses {v}: {e}"));
                } else if v.get("result").is_some() || v.get("error").is_some() {
                    assert!(v.get("id").is_some(), "{at}: a response without id");
                    if let Some(err) = v.get("error") {
                        shape(err, &json!({ "code": "x", "message": "y" }), "error")
                            .unwrap_or_else(|e| panic!("{at}: {e}"));
                    }
                } else if let Some(event) = v.get("event") {
                    let sent = events
                        .iter()
                        .find(|e| e["type"] == event["type"])
                        .unwrap_or_else(|| panic!("{at}: no real {} event", event["type"]));
                    shape(event, sent, "event").unwrap_or_else(|e| panic!("{at}: {e}"));
                } else if v.get("type").is_some() && v.get("seq").is_some() {
                    let sent = printed
                        .iter()
                        .find(|e| e["type"] == v["type"])
                        .unwrap_or_else(|| panic!("{at}: `ptyd events` printed no {}", v["type"]));
                    shape(v, sent, "ptyd events").unwrap_or_else(|e| panic!("{at}: {e}"));
                } else if v.get("app_cursor_keys").is_some() {
                    // The modes: documented in full, no more and no less.
                    let sent = &real["pane.capture"]["modes"];
                    let keys = |o: &Value| {
                        let mut k: Vec<String> = o.as_object().unwrap().keys().cloned().collect();
                        k.sort();
                        k
                    };
                    assert_eq!(keys(v), keys(sent), "{at}: documented modes differ");
                    shape(v, sent, "modes").unwrap_or_else(|e| panic!("{at}: {e}"));
                } else if let Some(reason) = v.get("reason").and_then(Value::as_str) {
                    let sent = exits
                        .get(reason)
                        .unwrap_or_else(|| panic!("{at}: no real exit with reason {reason}"));
                    shape(v, sent, "exit").unwrap_or_else(|e| panic!("{at}: {e}"));
                } else if methods.first().is_some_and(|m| m == "pane.create") {
                    ptyd::protocol::methods::Request::parse("pane.create", v.clone())
                        .unwrap_or_else(|e| panic!("{at}: pane.create refuses {v}: {e}"));
                } else {
                    panic!("{at}: a JSON block this test does not know how to check: {v}");
                }
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked > 40, "checked only {checked} examples");
}
