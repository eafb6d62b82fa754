//! The help table's entries for the commands about the server itself, its events, its API, its
//! configuration and its service units.

use super::*;

pub const SERVER: Command = Command {
    name: "server",
    aliases: &[],
    brief: "server",
    summary: "run the server in the foreground",
    usage: &["server [--no-history] [--no-restore] [--hold-reruns]"],
    about: "\
Runs the server for the namespace in the foreground, logging to stderr and
to diagnostics.jsonl in the state directory. SIGTERM or SIGINT (or
`ptyd stop`) stop it.

When none runs, every command about panes, tabs, workspaces or events (new,
ls, attach, send, capture, run, wait, kill, rm, resize, events, respawn,
focus, resume, workspace, tab, api) starts one in the background, with
--hold-reruns; status, save, stop and upgrade never do. When the
namespace's systemd units are installed (`ptyd service install`), they ask
systemd to start the socket unit instead, never a server of their own.
`autostart = false` in config.toml turns this off: those commands then say
how to start one.

At start it rebuilds the workspaces, tabs and panes of the last snapshot
(session.json in the state directory) and saves changes as they happen.
Started by systemd with a listening socket (ptyd.socket), it serves that
socket.",
    options: &[
        opt(
            None,
            "no-history",
            None,
            "do not write per-pane history files",
        ),
        opt(
            None,
            "no-restore",
            None,
            "start empty (the old snapshot is replaced at the first save)",
        ),
        opt(
            None,
            "hold-reruns",
            None,
            "hold panes whose restore policy is rerun instead of running them again (servers started by client commands do)",
        ),
    ],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const EVENTS: Command = Command {
    name: "events",
    aliases: &[],
    brief: "events [--since N]",
    summary: "stream server events as JSON lines",
    usage: &["events [--since N]"],
    about: "\
Prints server events until interrupted, one JSON object per line: each
event as the server sends it inside {\"event\": ...}, with its seq and type
(docs/protocol.md lists the types and members).",
    options: &[opt(
        None,
        "since",
        Some("N"),
        "first print the retained events after sequence number N (a `gap` event says if some were already dropped)",
    )],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const STATUS: Command = Command {
    name: "status",
    aliases: &[],
    brief: "status [--json]",
    summary: "show the server's state",
    usage: &["status [--json]"],
    about: "\
Shows the server's pid, version, namespace, socket, panes, attached clients
(not counting this command's own connection) and the last restore: when,
from which file, and which panes resumed, reran, came back as shells or are
held (with the reason).",
    options: &[JSON],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const STOP: Command = Command {
    name: "stop",
    aliases: &[],
    brief: "stop [--forget [--yes]]",
    summary: "stop the server (its panes are hung up; they come back at the next command)",
    usage: &["stop [--forget [--yes]]"],
    about: "\
Stops the server. Its panes are hung up (their programs get SIGHUP), but the
session is kept: the next command that starts a server (ls, attach, new ...)
brings every workspace, tab and pane back from the snapshot, each pane
restarted or resumed by its restore plan, with its history.

--forget ends the namespace for good: it stops the server if one runs, then
removes the snapshot (session.json and the history files), so nothing comes
back. It asks first on a terminal; without one it needs --yes.",
    options: &[
        opt(
            None,
            "forget",
            None,
            "also remove the snapshot: the panes do not come back",
        ),
        opt(
            None,
            "yes",
            None,
            "with --forget: do not ask (needed without a terminal)",
        ),
    ],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const SAVE: Command = Command {
    name: "save",
    aliases: &[],
    brief: "save",
    summary: "write the snapshot now",
    usage: &["save"],
    about: "\
Writes the snapshot (session.json and history files) now and returns once it
is on disk. The server also saves on its own shortly after every change.",
    options: &[opt(
        None,
        "json",
        None,
        "print the file and revision saved as JSON",
    )],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const UPGRADE: Command = Command {
    name: "upgrade",
    aliases: &[],
    brief: "upgrade [--binary PATH]",
    summary: "replace the server binary; every pane keeps running",
    usage: &["upgrade [--binary PATH] [--timeout DUR] [--mode live|restore] [--json]"],
    about: "\
Replaces the running server with a new binary while every pane keeps
running: same processes, no hangup, no lost or repeated output byte, the
socket never goes away and attached clients stay connected. The new binary
(default: the path this server was started from, re-read now) must speak a
handoff version this server accepts (`ptyd version`; older builds need
--mode restore). Exits 0 only once the new server survived its probation
(upgrade_probation_ms), and prints the serving process before and after
(version, binary, pid), each phase with its duration and the blackout. Anything
that fails leaves the old server serving (a failure in probation takes
everything back and closes every connection; attached clients reconnect);
the command then exits 1 with the cause. If an upgrade is already running,
it waits for that one and its probation, then runs. Under systemd,
`systemctl --user reload ptyd` runs it.",
    options: &[
        opt_of(
            None,
            "binary",
            "PATH",
            "the new ptyd binary",
            Complete::File,
        ),
        opt(
            None,
            "timeout",
            Some("DUR"),
            "deadline up to the commit point (default: upgrade_timeout_ms of config.toml, 10s; a bare number is milliseconds)",
        ),
        JSON,
        opt_of(
            None,
            "mode",
            "MODE",
            "live (default), or restore: where a live handoff is impossible, save the session, stop, and restart this process as the new binary, which restores the panes from the snapshot (restarting or resuming them; docs/snapshot.md); if the new binary exits before serving, this command restores the session with its own binary and exits 1",
            Complete::OneOf(&["live", "restore"]),
        ),
        opt(
            None,
            "fault",
            Some("S:A"),
            "testing only: make a step fail (see src/handoff/fault.rs)",
        ),
    ],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const VERSION: Command = Command {
    name: "version",
    aliases: &[],
    brief: "version [--json]",
    summary: "versions of this binary (protocol, handoff, snapshot)",
    usage: &["version [--json]"],
    about: "\
Prints the binary's version and the versions of what it speaks: the client
protocol, the live-upgrade handoff and the snapshot format.",
    options: &[JSON],
    args: Args::None,
    operands: Operands::Upto(0),
    hidden: &[],
};

pub const API: Command = Command {
    name: "api",
    aliases: &[],
    brief: "api METHOD [JSON]",
    summary: "send one raw API request, print the result",
    usage: &["api METHOD [JSON]"],
    about: "\
Sends one request with JSON params (default {}) and prints the result as
JSON. Methods are documented in docs/protocol.md.",
    options: &[],
    args: Args::None,
    operands: Operands::Any,
    hidden: &[],
};

pub const SERVICE: Command = Command {
    name: "service",
    aliases: &[],
    brief: "service install|uninstall",
    summary: "install the systemd user units for the namespace",
    usage: &[
        "service install [--enable] [--print] [--binary PATH]",
        "service uninstall",
    ],
    about: "\
Installs ptyd as a systemd user service for the namespace (-L): writes
ptyd.service and ptyd.socket (ptyd-NAME.* for namespace NAME) to
$XDG_CONFIG_HOME/systemd/user, naming the binary that runs this command,
then runs `systemctl --user daemon-reload`, printing what it did.
`uninstall` disables the units and removes their files; a running service
keeps running until stopped.

Upgrade with `systemctl --user reload ptyd`, never `restart` (stopping the
service ends every pane). `loginctl enable-linger $USER` keeps the service
running after logout and starts it at boot.",
    options: &[
        opt(
            None,
            "enable",
            None,
            "also `systemctl --user enable --now` both units (only enabled when a server already runs outside systemd)",
        ),
        opt(None, "print", None, "print the units, write nothing"),
        opt_of(
            None,
            "binary",
            "PATH",
            "name PATH in the units instead of this binary",
            Complete::File,
        ),
        opt(
            None,
            "user",
            None,
            "user units (the only kind; accepted for scripts)",
        ),
    ],
    args: Args::First(Complete::OneOf(&["install", "uninstall"])),
    operands: Operands::Upto(1),
    hidden: &[],
};

pub const CONFIG: Command = Command {
    name: "config",
    aliases: &[],
    brief: "config check [FILE] | reload",
    summary: "check a configuration file, or reload it in the server",
    usage: &["config check [FILE]", "config reload [--json]"],
    about: "\
Reads FILE (default: $XDG_CONFIG_HOME/ptyd/config.toml, else the deprecated
config.json beside it) as a server would and prints each problem with its
line and key: unknown keys, values of the wrong type or out of range, broken
resume rules, syntax errors. Exits 1 when there are any. A server ignores
only the keys in question and uses their defaults. Settings are described
in docs/config.md; a server reads the file when it starts (and at
`ptyd upgrade`).

`reload` makes the running server read the file again (it never starts
one) and prints each setting that changed and when it applies: now, for
panes created from now on, or at the next restore; then the problems, as
`check` does (exit 1 when there are any; every other setting is in force).",
    options: &[opt(
        None,
        "json",
        None,
        "reload: print the server's report as JSON",
    )],
    args: Args::First(Complete::OneOf(&["check", "reload"])),
    operands: Operands::Upto(2),
    hidden: &[],
};
