//! The commands about attached terminals: `attach`, `clients` and
//! `detach`, and the attach that `new` ends in.

use super::args::Parsed;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::client::attach::{self, AttachOptions};
use crate::client::{self, Client};
use crate::protocol::methods::{self, NoParams, Request};
use crate::protocol::replies::{
    ClientList as ClientListReply, Detached, PaneList, PaneStateName, TreeReply,
};

pub fn attach(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    need_terminal()?;
    let config = crate::server::config::load().0;
    let history = a.value_as("history", |v| {
        v.parse::<u32>().map_err(|_| {
            CliError::usage(format!(
                "--history {v:?}: a number of lines is wanted (0 for none)"
            ))
        })
    })?;
    let detach_key = match a.value("detach-key")? {
        Some(key) => attach::parse_detach_key(&key).map_err(CliError::usage)?,
        None => config.detach_key.1,
    };
    // History lands in the terminal's scrollback, which only its main
    // screen has: asking for it means the main screen.
    let alt_screen = config.attach_alt_screen
        && !a.flag("no-alt-screen")
        && history.is_none_or(|n| n == 0)
        && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let from_pane = own_pane(g);
    // Fail before raw mode if the server or pane is not there.
    let mut client = connect(g)?;
    let target = match a.target()? {
        Some(t) => t,
        None => default_attach_target(&mut client)?,
    };
    if !a.flag("force") {
        refuse_nesting(&mut client, &target, from_pane.as_deref())?;
    }
    let lossless = config.attach_lossless || a.flag("lossless");
    refuse_exited(&mut client, &target)?;
    let opts = AttachOptions {
        target,
        read_only: a.flag("read-only"),
        detach_key,
        alt_screen,
        history: history.unwrap_or(config.attach_history as u32),
        from_pane,
        when_behind: when_behind(lossless),
        direct: config.attach_direct && !a.flag("no-direct"),
        // Nested inside a pane, the outer client shows the tab already;
        // every byte of output is a single pane's (a view is composed).
        tab_view: !a.flag("pane-only") && !lossless && inside_pane().is_none(),
    };
    attach_to(g, client, &opts, a.flag("detach-others"))
}

/// An attach draws a screen and reads keys: without a terminal on both
/// ends it would write escape sequences into a file or wait on keys that
/// never come (tmux refuses the same way).
fn need_terminal() -> Result<(), CliError> {
    use std::io::IsTerminal;
    let missing = match (
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    ) {
        (true, true) => return Ok(()),
        (false, true) => "standard input is",
        (true, false) => "standard output is",
        (false, false) => "standard input and output are",
    };
    Err(CliError {
        code: 1,
        kind: "not_a_terminal".into(),
        message: format!(
            "not a terminal: {missing} not a terminal, and attach needs one to draw the pane \
             and read keys; run it in a terminal, or from a script use `ptyd capture`, \
             `ptyd send` and `ptyd wait`"
        ),
    })
}

/// An exited pane has nothing to attach to: say so with its status,
/// rather than draw its last screen, resize it and return 0.
fn refuse_exited(client: &mut Client, target: &str) -> Result<(), CliError> {
    let list: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
    let Some(pane) = (list.panes.iter())
        .find(|p| p.id.to_string() == target || p.name.as_deref() == Some(target))
    else {
        // The attach itself names what is wrong with the target.
        return Ok(());
    };
    match &pane.exit {
        Some(exit) if pane.state == PaneStateName::Exited => Err(CliError {
            code: 1,
            kind: "pane_exited".into(),
            message: format!(
                "pane {id} has exited ({}); `ptyd capture {id}` shows its last screen, \
                 `ptyd respawn {id}` runs it again",
                exit.describe(),
                id = pane.id
            ),
        }),
        _ => Ok(()),
    }
}

/// The pane this runs in, if it is one of this server's.
pub(super) fn own_pane(g: &Global) -> Option<String> {
    let same_server = std::env::var_os("PTYD_SOCKET")
        .is_some_and(|s| std::path::Path::new(&s) == g.paths.socket());
    inside_pane().filter(|_| same_server)
}

/// `$PTYD_PANE_ID`: the pane (of any server) this terminal is inside.
fn inside_pane() -> Option<String> {
    std::env::var("PTYD_PANE_ID").ok().filter(|s| !s.is_empty())
}

/// Inside a pane: never the pane itself (its output would feed back into
/// it), another only when asked to (`--force`), since the clients nest.
fn refuse_nesting(
    client: &mut Client,
    target: &str,
    from_pane: Option<&str>,
) -> Result<(), CliError> {
    let Some(pane) = inside_pane() else {
        return Ok(());
    };
    if let Some(own) = from_pane {
        let list: PaneList = client.request_as(&Request::PaneList(NoParams {}))?;
        let mine = list
            .panes
            .iter()
            .find(|p| p.id.to_string() == own)
            .is_some_and(|p| p.id.to_string() == target || p.name.as_deref() == Some(target));
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
    Err(nested(&pane))
}

/// `ptyd new` (not `-d`) inside a pane: refused without `--force` as an
/// attach is, before the pane is created.
pub(super) fn refuse_nested_new() -> Result<(), CliError> {
    match inside_pane() {
        Some(pane) => Err(nested(&pane)),
        None => Ok(()),
    }
}

fn nested(pane: &str) -> CliError {
    CliError::usage(format!(
        "this terminal is inside ptyd pane {pane}: attaching here nests a client in a \
         client, whose detach key reaches the outer one first (press it twice to send it \
         to the inner one). Add --force to attach anyway, or detach first"
    ))
}

/// Attaches this terminal through `client` (connected, still in JSON mode).
pub(super) fn attach_to(
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

pub(super) fn finish_attach(end: attach::AttachEnd) -> Result<i32, CliError> {
    if end.screen_restored {
        eprintln!("{}", end.message);
    } else {
        eprintln!("\n{}", end.message);
    }
    Ok(end.exit_code)
}

/// The attach options of `ptyd new -A` for an existing pane: the config's.
pub(super) fn default_attach_options(target: String) -> AttachOptions {
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
        tab_view: false,
    }
}

/// What an interactive attach asks for when its terminal falls behind:
/// a redraw once it has caught up, unless every byte is wanted.
pub(super) fn when_behind(lossless: bool) -> methods::WhenBehind {
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

/// `ptyd clients [TARGET] [--json]`.
pub fn clients(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let target = a.target()?;
    let as_json = a.flag("json");
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
        " {:<7} {:<6} {:>9}  {:<10} {:>8}  {:>8}  VIEW",
        "CLIENT", "PANE", "SIZE", "MODE", "PID", "ATTACHED"
    );
    for c in &list.clients {
        println!(
            "{}{:<7} {:<6} {:>9}  {:<10} {:>8}  {:>8}  {}",
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
            match &c.view {
                Some(v) if v.zoom => format!("{} zoomed", v.tab),
                Some(v) => v.tab.to_string(),
                None => "pane only".into(),
            },
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
pub fn detach(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let mut req = methods::ClientDetach {
        all: a.flag("all"),
        others: a.flag("others"),
        client: a.client()?,
        ..methods::ClientDetach::default()
    };
    let target = a.target()?;
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
            .then(inside_pane)
            .flatten()
    });
    if !req.all && req.client.is_none() && req.target.is_none() {
        return Err(CliError::usage(
            "detach what? give TARGET (a pane), --client N (from `ptyd clients`) or --all",
        ));
    }
    let r = connect(g)?.request(&Request::ClientDetach(req))?;
    if a.flag("json") {
        print_json(&r);
    } else {
        let d: Detached = client::parse_reply("client.detach", r)?;
        let n = d.detached.len();
        println!("detached {n} client{}", if n == 1 { "" } else { "s" });
    }
    Ok(0)
}
