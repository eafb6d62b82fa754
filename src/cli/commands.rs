//! One function per command: parse its arguments, talk to the server, print.

use super::{CliError, Global, help};
use crate::client::attach::{self, AttachOptions};
use crate::client::{self, Client};
use crate::model::CommandSpec;
use crate::model::{Direction, RestorePolicy};
use crate::protocol::methods::{self, NoParams, Request};
use crate::protocol::replies::{
    Capture, ClientList as ClientListReply, Detached, LayoutNode, PaneInfo, PaneList,
    PaneStateName, Saved, Status, TreeReply, WorkspaceCreated,
};
use lexopt::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub fn dispatch(g: &Global, command: &str, p: lexopt::Parser) -> Result<i32, CliError> {
    run_command(g, command, p).map_err(|mut e| {
        // A mistyped option: name the closest one the command has.
        if e.code == 2
            && let Some(hinted) = super::suggest::option_hint(command, &e.message)
        {
            e.message = hinted;
        }
        // A mistyped pane: name the closest pane there is.
        if e.kind == "not_found"
            && let Some(typed) = e
                .message
                .strip_prefix("no pane \"")
                .and_then(|rest| rest.split('"').next())
            && let Some(name) = closest_pane(g, typed)
        {
            e.message = format!("{}; did you mean {name:?}?", e.message);
        }
        e
    })
}

/// The pane name of the running server closest to `typed`, if one is
/// close enough to be a typo (never starts a server). Not ids: `p9` for a
/// removed pane is no typo of `p8`.
fn closest_pane(g: &Global, typed: &str) -> Option<String> {
    let mut client = Client::connect(&g.paths, false).ok()?;
    let panes: PaneList = client.request_as(&Request::PaneList(NoParams {})).ok()?;
    let names: Vec<String> = panes.panes.iter().filter_map(|p| p.name.clone()).collect();
    super::suggest::closest(typed, names.iter().map(String::as_str)).map(str::to_string)
}

fn run_command(g: &Global, command: &str, mut p: lexopt::Parser) -> Result<i32, CliError> {
    match command {
        "server" => server(g, &mut p),
        "new" => new(g, &mut p),
        "ls" | "list" => ls(g, &mut p),
        "attach" | "a" => attach_cmd(g, &mut p),
        "send" => super::scripting::send(g, &mut p),
        "capture" => capture(g, &mut p),
        "run" => run(g, &mut p),
        "wait" => super::scripting::wait(g, &mut p),
        "shell-init" => super::scripting::shell_init(&mut p),
        "kill" => kill(g, &mut p),
        "rm" | "remove" => rm(g, &mut p),
        "resize" => resize(g, &mut p),
        "events" => events(g, &mut p),
        "status" => status(g, &mut p),
        "stop" => stop(g, &mut p),
        "api" => api(g, &mut p),
        "version" => {
            let as_json = json_flag(&mut p, help::VERSION)?;
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
            if as_json {
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
        "upgrade" => super::upgrade::upgrade(g, &mut p),
        "save" => {
            let as_json = json_flag(&mut p, help::SAVE)?;
            let r = connect_existing(g)?.request(&Request::ServerSave(NoParams {}))?;
            if as_json {
                print_json(&r);
            } else {
                let r: Saved = client::parse_reply("server.save", r)?;
                println!("saved to {}", r.path.display());
            }
            Ok(0)
        }
        "respawn" => respawn(g, &mut p),
        "focus" => simple_target(g, &mut p, help::FOCUS, Request::PaneFocus),
        "clients" => clients(g, &mut p),
        "detach" => detach(g, &mut p),
        "help" => help_cmd(&mut p),
        "resume" => resume(g, &mut p),
        "workspace" | "ws" => tree_command(g, &mut p, "workspace"),
        "tab" => tree_command(g, &mut p, "tab"),
        "service" => super::service::service(g, &mut p),
        "completions" => super::completions::completions(g, &mut p),
        "config" => super::config::config_cmd(g, &mut p),
        "manpage" => {
            no_args(&mut p, help::MANPAGE)?;
            print!("{}", super::manpage::render());
            Ok(0)
        }
        "demo" => {
            no_args(&mut p, help::DEMO)?;
            super::demo::run()
        }
        other => Err(CliError::usage(format!(
            "unknown command {other:?}{}",
            super::suggest::command_hint(other)
        ))),
    }
}

/// `ptyd help [COMMAND]`: the overview, or a command's help.
fn help_cmd(p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut topic = None;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::HELP) {
            return Ok(0);
        }
        match arg {
            Value(v) if topic.is_none() => topic = Some(v.string()?),
            _ => return Err(arg.unexpected().into()),
        }
    }
    match topic {
        None => print!("{}", help::MAIN),
        Some(name) => match help::command(&name) {
            Some(c) => print!("{}", help::render_command(c)),
            None => {
                return Err(CliError::usage(format!(
                    "no command {name:?}{}",
                    super::suggest::command_hint(&name)
                )));
            }
        },
    }
    Ok(0)
}

/// Prints help and returns `Ok(true)` for -h/--help.
pub(super) fn help_requested(arg: &lexopt::Arg, text: help::Topic) -> bool {
    if matches!(arg, Short('h') | Long("help")) {
        print!("{text}");
        return true;
    }
    false
}

fn no_args(p: &mut lexopt::Parser, text: help::Topic) -> Result<(), CliError> {
    match p.next()? {
        None => Ok(()),
        Some(arg) if help_requested(&arg, text) => std::process::exit(0),
        Some(arg) => Err(arg.unexpected().into()),
    }
}

/// Connects for a command about panes, tabs, workspaces or events: when
/// no server runs, one is started in the background, unless the config
/// says `autostart = false` (then the error says how to start one).
pub(super) fn connect(g: &Global) -> Result<Client, CliError> {
    let autostart = crate::server::config::load().0.autostart;
    Client::connect(&g.paths, autostart).map_err(|e| {
        if autostart || e.code != "no_server" {
            return e.into();
        }
        let ns = &g.paths.namespace;
        let flag = if ns == crate::paths::DEFAULT_NAMESPACE {
            String::new()
        } else {
            format!(" -L {ns}")
        };
        CliError {
            message: format!(
                "no ptyd server runs in namespace {ns:?}, and `autostart = false` in {} keeps \
                 client commands from starting one: start it with `ptyd{flag} server` (or \
                 `ptyd{flag} service install --enable` for systemd)",
                crate::server::config::path()
                    .map_or("the config file".to_string(), |p| p.display().to_string())
            ),
            code: 1,
            kind: "no_server".into(),
        }
    })
}

/// Connects without starting a server: for the commands about the server
/// itself (status, save, stop, upgrade), which have nothing to do on a
/// fresh one.
pub(super) fn connect_existing(g: &Global) -> Result<Client, CliError> {
    Ok(Client::connect(&g.paths, false)?)
}

pub(super) fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// A capture line number: 0 is the top visible row, negative is scrollback.
fn parse_line(value: std::ffi::OsString) -> Result<i64, CliError> {
    let s = value.string()?;
    s.parse().map_err(|_| {
        CliError::usage(format!(
            "line numbers are integers (negative for scrollback), got {s:?}"
        ))
    })
}

fn parse_size(s: &str) -> Result<(u32, u32), CliError> {
    let bad = || CliError::usage(format!("size {s:?} must look like COLSxROWS, e.g. 120x40"));
    let (c, r) = s.split_once('x').ok_or_else(bad)?;
    Ok((c.parse().map_err(|_| bad())?, r.parse().map_err(|_| bad())?))
}

fn parse_env(s: &str) -> Result<(String, String), CliError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(CliError::usage(format!(
            "environment entry {s:?} must look like NAME=VALUE"
        ))),
    }
}

fn server(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut history = true;
    let mut restore = true;
    let mut hold_reruns = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::SERVER) {
            return Ok(0);
        }
        match arg {
            Long("no-history") => history = false,
            Long("no-restore") => restore = false,
            Long("hold-reruns") => hold_reruns = true,
            _ => return Err(arg.unexpected().into()),
        }
    }
    crate::server::run(crate::server::ServerOptions {
        paths: g.paths.clone(),
        history,
        restore,
        hold_reruns,
    })
    .map_err(|e| CliError {
        message: e.message,
        code: if e.already_served {
            crate::server::EXIT_ALREADY_SERVED
        } else {
            1
        },
        kind: if e.already_served {
            "already_served"
        } else {
            "failed"
        }
        .into(),
    })?;
    Ok(0)
}

/// Options shared by `new` and `run` for describing the pane.
#[derive(Default)]
struct PaneSpecArgs {
    name: Option<String>,
    cwd: Option<String>,
    env: BTreeMap<String, String>,
    timeout: Option<u64>,
    idle_timeout: Option<u64>,
    size: Option<(u32, u32)>,
    shell: Option<String>,
    argv: Vec<String>,
    workspace: Option<String>,
    tab_name: Option<String>,
    split: Option<String>,
    direction: Option<Direction>,
    ratio: Option<f32>,
    restore: Option<RestorePolicy>,
    resume: Option<String>,
    /// `Some(false)` for `--no-shell-integration`.
    shell_integration: Option<bool>,
}

/// An argument detached from the parser's borrow, so an option's value can
/// be read while the argument is still being matched.
enum Key {
    Short(char),
    Long(String),
    Value(std::ffi::OsString),
}

impl Key {
    fn from(arg: lexopt::Arg) -> Key {
        match arg {
            Short(c) => Key::Short(c),
            Long(l) => Key::Long(l.to_string()),
            Value(v) => Key::Value(v),
        }
    }

    fn is(&self, short: Option<char>, long: &str) -> bool {
        match self {
            Key::Short(c) => Some(*c) == short,
            Key::Long(l) => l == long,
            Key::Value(_) => false,
        }
    }

    fn unexpected(self) -> CliError {
        match self {
            Key::Short(c) => CliError::usage(format!("invalid option '-{c}'")),
            Key::Long(l) => CliError::usage(format!("invalid option '--{l}'")),
            Key::Value(v) => {
                CliError::usage(format!("unexpected argument {:?}", v.to_string_lossy()))
            }
        }
    }
}

impl PaneSpecArgs {
    /// Takes `arg` if it is one of the shared options.
    fn take(&mut self, arg: &Key, p: &mut lexopt::Parser) -> Result<bool, CliError> {
        if arg.is(Some('n'), "name") {
            self.name = Some(p.value()?.string()?);
        } else if arg.is(Some('c'), "cwd") {
            self.cwd = Some(p.value()?.string()?);
        } else if arg.is(Some('e'), "env") {
            let (k, v) = parse_env(&p.value()?.string()?)?;
            self.env.insert(k, v);
        } else if arg.is(None, "timeout") {
            self.timeout = Some(super::duration::parse_ms(p.value()?, "--timeout")?);
        } else if arg.is(None, "idle-timeout") {
            self.idle_timeout = Some(super::duration::parse_ms(p.value()?, "--idle-timeout")?);
        } else if arg.is(None, "size") {
            self.size = Some(parse_size(&p.value()?.string()?)?);
        } else if arg.is(None, "shell") {
            self.shell = Some(p.value()?.string()?);
        } else if arg.is(Some('w'), "workspace") {
            self.workspace = Some(p.value()?.string()?);
        } else if arg.is(None, "tab-name") {
            self.tab_name = Some(p.value()?.string()?);
        } else if arg.is(Some('s'), "split") {
            self.split = Some(p.value()?.string()?);
        } else if arg.is(Some('v'), "vertical") {
            self.direction = Some(Direction::Vertical);
        } else if arg.is(None, "ratio") {
            let r = p.value()?.string()?;
            let r: f32 = r.parse().map_err(|_| {
                CliError::usage(format!("--ratio takes a number in (0, 1), got {r:?}"))
            })?;
            self.ratio = Some(r);
        } else if arg.is(None, "restore") {
            let r = p.value()?.string()?;
            let policy = serde_json::from_value(json!(r)).map_err(|_| {
                CliError::usage(format!("--restore takes rerun, shell or hold, got {r:?}"))
            })?;
            self.restore = Some(policy);
        } else if arg.is(None, "no-shell-integration") {
            self.shell_integration = Some(false);
        } else if arg.is(None, "resume") {
            self.resume = Some(p.value()?.string()?);
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn params(self) -> Result<methods::PaneCreate, CliError> {
        let cwd = match self.cwd {
            Some(dir) => std::path::absolute(&dir)
                .map_err(|e| CliError::usage(format!("cwd {dir:?}: {e}")))?
                .to_string_lossy()
                .into_owned(),
            None => std::env::current_dir()
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "/".to_string()),
        };
        let (cols, rows) = self
            .size
            .or_else(|| {
                client::terminal_size(&std::io::stdout()).map(|(c, r)| (c.into(), r.into()))
            })
            .unwrap_or((80, 24));
        let (shell, argv) = match (self.shell, self.argv.is_empty()) {
            (Some(_), false) => {
                return Err(CliError::usage(
                    "give either --shell STR or -- ARGV..., not both",
                ));
            }
            (Some(shell), true) => (Some(shell), None),
            (None, false) => (None, Some(self.argv)),
            (None, true) => (None, None),
        };
        // The server clamps sizes to what a terminal can be; u16 only has
        // to hold what the user typed.
        let clamp = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
        Ok(methods::PaneCreate {
            name: self.name,
            argv,
            shell,
            cwd: Some(cwd),
            env: self.env,
            cols: Some(clamp(cols)),
            rows: Some(clamp(rows)),
            timeout_ms: self.timeout,
            idle_timeout_ms: self.idle_timeout,
            attach: false,
            read_only: false,
            alt_screen: false,
            when_behind: methods::WhenBehind::Pause,
            restore: self.restore,
            resume: self.resume,
            workspace: self.workspace,
            tab_name: self.tab_name,
            split: self.split,
            direction: self.direction,
            ratio: self.ratio,
            shell_integration: self.shell_integration,
        })
    }
}

fn new(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut spec = PaneSpecArgs::default();
    let mut detached = false;
    let mut as_json = false;
    let mut attach_existing = false;
    let mut split_short = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::NEW) {
            return Ok(0);
        }
        let arg = Key::from(arg);
        split_short |= matches!(arg, Key::Short('s'));
        if spec.take(&arg, p)? {
            continue;
        }
        if arg.is(Some('d'), "detached") {
            detached = true;
        } else if arg.is(None, "json") {
            as_json = true;
        } else if arg.is(Some('A'), "attach-existing") {
            attach_existing = true;
        } else if let Key::Value(v) = arg {
            spec.argv.push(v.string()?);
            spec.argv
                .extend(p.raw_args()?.map(|a| a.to_string_lossy().into_owned()));
        } else {
            return Err(arg.unexpected());
        }
    }
    if attach_existing && spec.name.is_none() {
        return Err(CliError::usage(
            "-A attaches to the pane named by -n NAME if it exists: give -n NAME",
        ));
    }
    let split = spec.split.clone().filter(|_| split_short);
    let name = spec.name.clone();
    let params = spec.params()?;
    let mut client = connect(g)?;
    if attach_existing && let Some(name) = &name {
        let panes: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
        if let Some(pane) = panes.panes.iter().find(|p| p.name.as_ref() == Some(name)) {
            if detached {
                if as_json {
                    print_json(&serde_json::to_value(pane).unwrap_or_default());
                } else {
                    println!("{}", pane.id);
                }
                return Ok(0);
            }
            let opts = default_attach_options(pane.id.to_string());
            return attach_to(g, client, &opts, false);
        }
    }
    if detached {
        let info = client
            .request(&Request::PaneCreate(params))
            .map_err(|e| explain_split(e, split.as_deref()))?;
        if as_json {
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
        .map_err(|e| explain_split(e, split.as_deref()))?;
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
    };
    finish_attach(attach::run_attach(&g.paths, &opts, Some(reader))?)
}

/// tmux users type `new -s NAME` for a session name; here `-s` splits a
/// pane. When that pane does not exist, say what `-s` is and what to type.
fn explain_split(e: client::ClientError, split: Option<&str>) -> CliError {
    match split {
        Some(name) if e.code == "not_found" => CliError {
            message: format!(
                "no pane {name:?} to split: in ptyd, -s is --split TARGET (split that pane). \
                 To name the new pane use -n: `ptyd new -n {name}`; tmux's sessions are \
                 workspaces here: `ptyd workspace new {name}`, then `ptyd new -w {name}`"
            ),
            code: 2,
            kind: "usage".into(),
        },
        _ => e.into(),
    }
}

fn finish_attach(end: attach::AttachEnd) -> Result<i32, CliError> {
    if end.screen_restored {
        eprintln!("{}", end.message);
    } else {
        eprintln!("\n{}", end.message);
    }
    Ok(end.exit_code)
}

fn ls(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let as_json = json_flag(p, help::LS)?;
    let mut client = connect(g)?;
    let mut tree = client.request(&Request::Tree(NoParams {}))?;
    let panes = client.request(&Request::PaneList(NoParams {}))?;
    if as_json {
        tree["panes"] = panes["panes"].clone();
        print_json(&tree);
        return Ok(0);
    }
    let tree: TreeReply = client::parse_reply("tree", tree)?;
    let panes: PaneList = client::parse_reply("pane.list", panes)?;
    if panes.panes.is_empty() {
        for ws in &tree.workspaces {
            println!("{} {} (empty)", ws.id, ws.name);
        }
        println!("no panes");
        return Ok(0);
    }
    let active = |a: bool| if a { " (active)" } else { "" };
    for ws in &tree.workspaces {
        println!("{} {}{}", ws.id, ws.name, active(ws.active));
        for tab in &ws.tabs {
            println!(
                "  {} {}{}  {}",
                tab.id,
                tab.name,
                active(tab.active),
                layout_summary(&tab.layout)
            );
            for pane in tab.panes.iter().flatten() {
                println!("    {}", pane_line(pane, tab.focus == pane.id));
                if let Some(why) = &pane.held_reason {
                    println!("          held: {why}");
                }
            }
        }
    }
    Ok(0)
}

/// `[p1 | [p2 / p3]]`: `|` side by side, `/` stacked.
fn layout_summary(layout: &LayoutNode) -> String {
    match layout {
        LayoutNode::Pane(p) => p.to_string(),
        LayoutNode::Split {
            direction,
            first,
            second,
            ..
        } => {
            let sep = match direction {
                Direction::Vertical => "/",
                Direction::Horizontal => "|",
            };
            format!(
                "[{} {sep} {}]",
                layout_summary(first),
                layout_summary(second)
            )
        }
    }
}

fn pane_line(pane: &PaneInfo, focused: bool) -> String {
    let state = match (pane.state, &pane.exit) {
        (PaneStateName::Exited, Some(exit)) => format!("exited ({})", exit.describe()),
        (PaneStateName::Exited, None) => "exited (unknown status)".into(),
        (PaneStateName::Running, _) => "running".into(),
        (PaneStateName::Held, _) => "held".into(),
    };
    let command = match &pane.command {
        CommandSpec::Argv(argv) => argv.join(" "),
        CommandSpec::Shell(shell) => format!("sh -c {shell}"),
        CommandSpec::LoginShell => "(login shell)".into(),
    };
    let clients = match pane.attached_clients {
        0 => String::new(),
        n => format!("{n} attached"),
    };
    format!(
        "{}{:<5} {:<14} {:<24} {:>7} {:>8} {:<11} {}  {}",
        if focused { "*" } else { " " },
        pane.id.to_string(),
        pane.name.as_deref().unwrap_or("-"),
        state,
        pane.pid.map_or("-".to_string(), |p| p.to_string()),
        format!("{}x{}", pane.cols, pane.rows),
        clients,
        pane.cwd.display(),
        command
    )
}

fn json_flag(p: &mut lexopt::Parser, text: help::Topic) -> Result<bool, CliError> {
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, text) {
            std::process::exit(0);
        }
        match arg {
            Long("json") => as_json = true,
            _ => return Err(arg.unexpected().into()),
        }
    }
    Ok(as_json)
}

pub(super) fn target_arg(
    p: &mut lexopt::Parser,
    target: &mut Option<String>,
    v: std::ffi::OsString,
) -> Result<(), CliError> {
    let _ = p;
    if target.is_some() {
        return Err(CliError::usage(format!(
            "unexpected argument {:?}",
            v.to_string_lossy()
        )));
    }
    *target = Some(v.string()?);
    Ok(())
}

/// `-t TARGET` / `--target TARGET`, as tmux spells it: the same as the
/// positional TARGET.
pub(super) fn target_option(
    p: &mut lexopt::Parser,
    target: &mut Option<String>,
) -> Result<(), CliError> {
    let v = p.value()?;
    target_arg(p, target, v)
}

pub(super) fn need_target(target: Option<String>) -> Result<String, CliError> {
    target.ok_or_else(|| CliError::usage("missing TARGET (a pane id like p1, or a pane name)"))
}

fn attach_cmd(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let config = crate::server::config::load().0;
    let mut target = None;
    let mut read_only = false;
    let mut detach_others = false;
    let mut force = false;
    let mut detach_key = config.detach_key.1;
    let mut alt_screen = config.attach_alt_screen;
    let mut lossless = config.attach_lossless;
    let mut direct = config.attach_direct;
    let mut history = None;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::ATTACH) {
            return Ok(0);
        }
        match arg {
            Short('r') | Long("read-only") => read_only = true,
            Short('d') | Long("detach-others") => detach_others = true,
            Short('f') | Long("force") => force = true,
            Long("no-alt-screen") => alt_screen = false,
            Long("lossless") => lossless = true,
            Long("no-direct") => direct = false,
            Long("history") => {
                let v = p.value()?.string()?;
                let n: u32 = v.parse().map_err(|_| {
                    CliError::usage(format!(
                        "--history {v:?}: a number of lines is wanted (0 for none)"
                    ))
                })?;
                history = Some(n);
            }
            Long("detach-key") => {
                detach_key =
                    attach::parse_detach_key(&p.value()?.string()?).map_err(CliError::usage)?
            }
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    // History lands in the terminal's scrollback, which only its main
    // screen has: asking for it means the main screen.
    if history.is_some_and(|n| n > 0) {
        alt_screen = false;
    }
    let is_tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Inside a pane: never the pane itself (its output would feed back
    // into it), another only when asked to, since the clients nest.
    let inside = std::env::var("PTYD_PANE_ID").ok().filter(|s| !s.is_empty());
    let same_server = std::env::var_os("PTYD_SOCKET")
        .is_some_and(|s| std::path::Path::new(&s) == g.paths.socket());
    let from_pane = inside.clone().filter(|_| same_server);
    // Fail before raw mode if the server or pane is not there.
    let mut client = connect(g)?;
    let target = match target {
        Some(t) => t,
        None => default_attach_target(&mut client)?,
    };
    if let Some(pane) = &inside
        && !force
    {
        if let Some(own) = &from_pane {
            let list: crate::protocol::replies::PaneList =
                client.request_as(&Request::PaneList(NoParams {}))?;
            let mine = list
                .panes
                .iter()
                .find(|p| p.id.to_string() == *own)
                .is_some_and(|p| p.id.to_string() == target || p.name.as_deref() == Some(&target));
            if mine {
                return Err(CliError {
                    code: 1,
                    kind: "self_attach".into(),
                    message: format!(
                        "{target} is the pane this shell runs in ({own}): attaching to it would \
                         feed its output back into itself; attach from another terminal"
                    ),
                });
            }
        }
        return Err(CliError::usage(format!(
            "this terminal is inside ptyd pane {pane}: attaching here nests a client in a \
             client, whose detach key reaches the outer one first (press it twice to send it \
             to the inner one). Add --force to attach anyway, or detach first"
        )));
    }
    let opts = AttachOptions {
        target,
        read_only,
        detach_key,
        alt_screen: alt_screen && is_tty,
        history: history.unwrap_or(config.attach_history as u32),
        from_pane,
        when_behind: when_behind(lossless),
        direct,
    };
    attach_to(g, client, &opts, detach_others)
}

/// Attaches this terminal through `client` (connected, still in JSON mode).
fn attach_to(
    g: &Global,
    client: Client,
    opts: &AttachOptions,
    detach_others: bool,
) -> Result<i32, CliError> {
    let mut params = opts.params(client::terminal_size(&std::io::stdout()), true);
    params.detach_others = detach_others;
    let (_, reader) = client::attach(client, params)?;
    finish_attach(attach::run_attach(&g.paths, opts, Some(reader))?)
}

/// The attach options of `ptyd new -A` for an existing pane: the config's.
fn default_attach_options(target: String) -> AttachOptions {
    let config = crate::server::config::load().0;
    AttachOptions {
        target,
        read_only: false,
        detach_key: config.detach_key.1,
        alt_screen: config.attach_alt_screen
            && std::io::IsTerminal::is_terminal(&std::io::stdout()),
        history: config.attach_history as u32,
        from_pane: None,
        when_behind: when_behind(config.attach_lossless),
        direct: config.attach_direct,
    }
}

/// What an interactive attach asks for when its terminal falls behind:
/// a redraw once it has caught up, unless every byte is wanted.
fn when_behind(lossless: bool) -> methods::WhenBehind {
    if lossless {
        methods::WhenBehind::Pause
    } else {
        methods::WhenBehind::Redraw
    }
}

/// What a bare `ptyd attach` attaches: the focused pane of the active tab
/// of the active workspace (an attach focuses its pane, so this is also
/// the pane attached last), else the newest pane.
fn default_attach_target(client: &mut Client) -> Result<String, CliError> {
    let tree: TreeReply = client.request_as(&Request::Tree(NoParams {}))?;
    let focused = tree
        .workspaces
        .iter()
        .filter(|w| w.active)
        .flat_map(|w| w.tabs.iter().filter(|t| t.active))
        .map(|t| t.focus.to_string())
        .next();
    if let Some(id) = focused {
        return Ok(id);
    }
    let panes: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
    match panes.panes.last() {
        Some(p) => Ok(p.id.to_string()),
        None => Err(CliError {
            message: "no pane to attach to; `ptyd new` creates one".into(),
            code: 1,
            kind: "not_found".into(),
        }),
    }
}

/// `ptyd respawn TARGET` or `ptyd respawn --held` (every held pane).
fn respawn(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut target = None;
    let mut held = false;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::RESPAWN) {
            return Ok(0);
        }
        match arg {
            Long("held") => held = true,
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let mut client = connect(g)?;
    if !held {
        let info = client.request(&Request::PaneRespawn(methods::Target {
            target: need_target(target)?,
        }))?;
        if as_json {
            print_json(&info);
        }
        return Ok(0);
    }
    if target.is_some() {
        return Err(CliError::usage(
            "--held takes no TARGET: it respawns every held pane",
        ));
    }
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
            Err(e) if e.code == "pane_running" || e.code == "not_found" => {}
            Err(e) => {
                eprintln!("ptyd: {id}: {}", e.message);
                failed
                    .push(json!({ "pane": id, "error": { "code": e.code, "message": e.message } }));
            }
        }
    }
    if as_json {
        print_json(&json!({ "respawned": respawned, "failed": failed }));
    }
    Ok(if failed.is_empty() { 0 } else { 1 })
}

/// `ptyd clients [TARGET] [--json]`.
fn clients(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut target = None;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::CLIENTS) {
            return Ok(0);
        }
        match arg {
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let r = connect(g)?.request(&Request::ClientList(methods::ClientList { target }))?;
    if as_json {
        print_json(&r);
        return Ok(0);
    }
    let list: ClientListReply = client::parse_reply("client.list", r)?;
    if list.clients.is_empty() {
        println!("no clients attached");
        return Ok(0);
    }
    let now = crate::clock::unix_ms();
    println!(
        " {:<7} {:<6} {:>9}  {:<10} {:>8}  {:>8}",
        "CLIENT", "PANE", "SIZE", "MODE", "PID", "ATTACHED"
    );
    for c in &list.clients {
        println!(
            "{}{:<7} {:<6} {:>9}  {:<10} {:>8}  {:>8}",
            if c.latest { "*" } else { " " },
            c.client,
            c.pane.to_string(),
            format!("{}x{}", c.cols, c.rows),
            if c.read_only {
                "read-only"
            } else {
                "read-write"
            },
            c.pid.map_or("-".to_string(), |p| p.to_string()),
            ago(now.saturating_sub(c.since_unix_ms)),
        );
    }
    println!("* the pane's most recently active client (kept by `detach --others`)");
    Ok(0)
}

/// "5s ago", "3m ago", "2h ago", "4d ago".
fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// `ptyd detach [TARGET] [--all | --others] [--client N]`.
fn detach(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut req = methods::ClientDetach::default();
    let mut target = None;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::DETACH) {
            return Ok(0);
        }
        match arg {
            Short('a') | Long("all") => req.all = true,
            Long("others") => req.others = true,
            Long("client") => {
                let v = p.value()?.string()?;
                req.client = Some(v.parse().map_err(|_| {
                    CliError::usage(format!(
                        "--client takes a client number from `ptyd clients`, got {v:?}"
                    ))
                })?);
            }
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    if req.all && (target.is_some() || req.others || req.client.is_some()) {
        return Err(CliError::usage(
            "--all detaches every client: give it no TARGET, --others or --client",
        ));
    }
    if target.is_some() && req.client.is_some() {
        return Err(CliError::usage("give TARGET or --client N, not both"));
    }
    // Inside a pane, a bare `ptyd detach` is about that pane.
    req.target = target.or_else(|| {
        (!req.all && req.client.is_none())
            .then(|| std::env::var("PTYD_PANE_ID").ok())
            .flatten()
            .filter(|id| !id.is_empty())
    });
    if !req.all && req.client.is_none() && req.target.is_none() {
        return Err(CliError::usage(
            "detach what? give TARGET (a pane), --client N (from `ptyd clients`) or --all",
        ));
    }
    let r = connect(g)?.request(&Request::ClientDetach(req))?;
    if as_json {
        print_json(&r);
    } else {
        let d: Detached = client::parse_reply("client.detach", r)?;
        let n = d.detached.len();
        println!("detached {n} client{}", if n == 1 { "" } else { "s" });
    }
    Ok(0)
}

fn capture(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut target = None;
    let (mut ansi, mut join, mut start, mut end) = (false, false, None, None);
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::CAPTURE) {
            return Ok(0);
        }
        match arg {
            Long("ansi") | Short('e') => ansi = true,
            Long("join") | Short('J') => join = true,
            Short('S') | Long("start") => start = Some(parse_line(p.value()?)?),
            Short('E') | Long("end") => end = Some(parse_line(p.value()?)?),
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let result = connect(g)?.request(&Request::PaneCapture(methods::PaneCapture {
        target: need_target(target)?,
        ansi,
        start,
        end,
        join,
    }))?;
    if as_json {
        print_json(&result);
    } else {
        let capture: Capture = client::parse_reply("pane.capture", result)?;
        for line in capture.trimmed_lines() {
            println!("{line}");
        }
    }
    Ok(0)
}

fn run(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut spec = PaneSpecArgs::default();
    let mut remove = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::RUN) {
            return Ok(0);
        }
        let arg = Key::from(arg);
        if spec.take(&arg, p)? {
            continue;
        }
        if arg.is(None, "rm") {
            remove = true;
        } else if let Key::Value(v) = arg {
            spec.argv.push(v.string()?);
            spec.argv
                .extend(p.raw_args()?.map(|a| a.to_string_lossy().into_owned()));
        } else {
            return Err(arg.unexpected());
        }
    }
    if spec.argv.is_empty() && spec.shell.is_none() {
        return Err(CliError::usage(
            "nothing to run: give -- ARGV... or --shell STR",
        ));
    }
    Ok(attach::run_mirror(&g.paths, spec.params()?, remove)?)
}

fn kill(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut target = None;
    let (mut signal, mut grace_ms) = (None, None);
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::KILL) {
            return Ok(0);
        }
        match arg {
            Short('s') | Long("signal") => signal = Some(p.value()?.string()?),
            Long("grace") => grace_ms = Some(super::duration::parse_ms(p.value()?, "--grace")?),
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let r = connect(g)?.request(&Request::PaneKill(methods::PaneKill {
        target: need_target(target)?,
        signal,
        grace_ms,
    }))?;
    if as_json {
        print_json(&r);
    }
    Ok(0)
}

fn rm(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut target = None;
    let mut force = false;
    let mut exited = false;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::RM) {
            return Ok(0);
        }
        match arg {
            Short('f') | Long("force") => force = true,
            Long("exited") => exited = true,
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    if exited {
        if target.is_some() || force {
            return Err(CliError::usage("--exited takes no TARGET and no --force"));
        }
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
                Err(e) if e.code == "not_found" || e.code == "pane_running" => {}
                Err(e) => return Err(e.into()),
            }
        }
        if as_json {
            print_json(&json!({ "removed": removed }));
        }
        return Ok(0);
    }
    let r = connect(g)?.request(&Request::PaneRemove(methods::PaneRemove {
        target: need_target(target)?,
        force,
    }))?;
    if as_json {
        print_json(&r);
    }
    Ok(0)
}

fn resize(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut args = Vec::new();
    let mut target = None;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::RESIZE) {
            return Ok(0);
        }
        match arg {
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => args.push(v.string()?),
            _ => return Err(arg.unexpected().into()),
        }
    }
    if let Some(t) = target {
        args.insert(0, t);
    }
    let [target, size] = args.as_slice() else {
        return Err(CliError::usage("usage: ptyd resize TARGET COLSxROWS"));
    };
    let (cols, rows) = parse_size(size)?;
    let info = connect(g)?.request(&Request::PaneResize(methods::PaneResize {
        target: target.clone(),
        cols,
        rows,
    }))?;
    if as_json {
        print_json(&info);
    }
    Ok(0)
}

fn events(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut since = None;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::EVENTS) {
            return Ok(0);
        }
        match arg {
            Long("since") => {
                since = Some(
                    p.value()?
                        .string()?
                        .parse::<u64>()
                        .map_err(|_| CliError::usage("--since takes a sequence number"))?,
                )
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    let mut client = connect(g)?;
    client.request(&Request::EventsSubscribe(methods::Subscribe { since }))?;
    // Each event object as the server sends it inside `{"event": ...}`,
    // one per line (docs/protocol.md, "ptyd events").
    loop {
        let msg = client.read_message()?;
        if let Some(event) = msg.get("event") {
            println!("{event}");
        }
    }
}

fn status(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let as_json = json_flag(p, help::STATUS)?;
    let s = connect_existing(g)?.request(&Request::ServerStatus(NoParams {}))?;
    if as_json {
        print_json(&s);
    } else {
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
        print_restore(&s.persistence["restore"]);
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
    }
    Ok(0)
}

/// The last restore, for `ptyd status`: when, from which file, and per
/// outcome how many panes and which (held ones with their reason).
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
    ] {
        let panes: Vec<&Value> = outcomes
            .iter()
            .filter(|o| o["outcome"] == outcome)
            .collect();
        if panes.is_empty() {
            continue;
        }
        let describe = |o: &Value| match o["name"].as_str() {
            Some(name) => format!("{} ({name})", o["pane"].as_str().unwrap_or("?")),
            None => o["pane"].as_str().unwrap_or("?").to_string(),
        };
        if outcome == "held" {
            println!("  {heading}: {}", panes.len());
            for o in panes {
                println!(
                    "    {}: {}",
                    describe(o),
                    o["held_reason"].as_str().unwrap_or("")
                );
            }
        } else {
            let list: Vec<String> = panes.iter().map(|o| describe(o)).collect();
            println!("  {heading}: {}: {}", panes.len(), list.join(", "));
        }
    }
    let repairs = r["repairs"].as_array().map_or(0, Vec::len);
    if repairs > 0 {
        println!("  repairs: {repairs} (`ptyd status --json` lists them)");
    }
}

fn stop(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    no_args(p, help::STOP)?;
    let mut client = connect_existing(g)?;
    client.request(&Request::ServerStop(NoParams {}))?;
    // The server closes our connection as its last act: wait for that, so
    // a `ptyd stop && ptyd server` never races the old server's lock.
    client.wait_closed()?;
    Ok(0)
}

fn api(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut args = Vec::new();
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::API) {
            return Ok(0);
        }
        match arg {
            Value(v) => args.push(v.string()?),
            _ => return Err(arg.unexpected().into()),
        }
    }
    let (method, params) = match args.as_slice() {
        [m] => (m.clone(), json!({})),
        [m, raw] => (
            m.clone(),
            serde_json::from_str(raw)
                .map_err(|e| CliError::usage(format!("params are not valid JSON: {e}")))?,
        ),
        _ => return Err(CliError::usage("usage: ptyd api METHOD [JSON]")),
    };
    let result = connect(g)?.call(&method, params)?;
    print_json(&result);
    Ok(0)
}

/// Commands that take one TARGET and call one method.
fn simple_target(
    g: &Global,
    p: &mut lexopt::Parser,
    text: help::Topic,
    request: fn(methods::Target) -> Request,
) -> Result<i32, CliError> {
    let mut target = None;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, text) {
            return Ok(0);
        }
        match arg {
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => target_arg(p, &mut target, v)?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let target = need_target(target)?;
    let r = connect(g)?.request(&request(methods::Target { target }))?;
    if as_json {
        print_json(&r);
    }
    Ok(0)
}

fn resume(g: &Global, p: &mut lexopt::Parser) -> Result<i32, CliError> {
    let mut args = Vec::new();
    let mut clear = false;
    let mut target = None;
    let mut as_json = false;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, help::RESUME) {
            return Ok(0);
        }
        match arg {
            Long("clear") => clear = true,
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => args.push(v.string()?),
            _ => return Err(arg.unexpected().into()),
        }
    }
    if let Some(t) = target {
        args.insert(0, t);
    }
    let (target, resume) = match (args.as_slice(), clear) {
        ([t], true) => (t.clone(), None),
        ([t, c], false) => (t.clone(), Some(c.clone())),
        _ => {
            return Err(CliError::usage(
                "usage: ptyd resume TARGET COMMAND, or ptyd resume TARGET --clear",
            ));
        }
    };
    let info = connect(g)?.request(&Request::PaneSetResume(methods::PaneSetResume {
        target,
        resume,
    }))?;
    if as_json {
        print_json(&info);
    }
    Ok(0)
}

/// `ptyd workspace new NAME | rename W NAME | rm W [--force]` and
/// `ptyd tab rename T NAME | rm T [--force]`.
fn tree_command(g: &Global, p: &mut lexopt::Parser, kind: &str) -> Result<i32, CliError> {
    let text = if kind == "tab" {
        help::TAB
    } else {
        help::WORKSPACE
    };
    let mut args = Vec::new();
    let mut force = false;
    let mut as_json = false;
    let mut target = None;
    while let Some(arg) = p.next()? {
        if help_requested(&arg, text) {
            return Ok(0);
        }
        match arg {
            Short('f') | Long("force") => force = true,
            Long("json") => as_json = true,
            Short('t') | Long("target") => target_option(p, &mut target)?,
            Value(v) => args.push(v.string()?),
            _ => return Err(arg.unexpected().into()),
        }
    }
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
