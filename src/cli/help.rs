//! Every command, its options and its help text, in one table that the
//! `--help` output, the shell completions (`completions.rs`) and the man
//! page (`manpage.rs`) all read, so none of them can drift from the others.
//!
//! A command's help is rendered from its entry: the usage lines, the prose,
//! then one line per option with its description wrapped to the terminal
//! convention of 79 columns. Callers name a help text by its [`Topic`]
//! (`help::NEW`), which prints as the rendered text.

use std::fmt;

/// One command of `ptyd`.
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// The left column of the command list in `ptyd --help`.
    pub brief: &'static str,
    /// One line: what the command does.
    pub summary: &'static str,
    /// Synopsis lines, each after `ptyd `; one starting with spaces
    /// continues the line before it.
    pub usage: &'static [&'static str],
    /// Prose, as paragraphs separated by blank lines.
    pub about: &'static str,
    pub options: &'static [Opt],
    /// What the positional arguments are, for completion.
    pub args: Args,
    /// How many positional arguments it takes, for parsing.
    pub operands: Operands,
    /// Options that are parsed but neither listed nor completed.
    pub hidden: &'static [Opt],
}

/// One option of a command.
pub struct Opt {
    pub short: Option<char>,
    pub long: &'static str,
    /// The value's placeholder (`MS`), if the option takes one.
    pub value: Option<&'static str>,
    pub help: &'static str,
    /// What the value completes to.
    pub complete: Complete,
}

/// What a word completes to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Complete {
    Nothing,
    /// A pane id or name (asked of the server with `ptyd ls --json`).
    Pane,
    File,
    Dir,
    /// A command line (program and its arguments).
    CommandLine,
    OneOf(&'static [&'static str]),
}

/// The positional arguments of a command.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Args {
    None,
    /// The first positional argument completes to this.
    First(Complete),
}

/// How a command takes its positional arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    /// At most this many; one more is an error.
    Upto(usize),
    /// Any number; the command says which make sense.
    Any,
    /// The first one starts the command line to run: it and every word
    /// after it (options too) are that command's.
    Argv,
}

const fn opt(
    short: Option<char>,
    long: &'static str,
    value: Option<&'static str>,
    help: &'static str,
) -> Opt {
    Opt {
        short,
        long,
        value,
        help,
        complete: Complete::Nothing,
    }
}

const fn opt_of(
    short: Option<char>,
    long: &'static str,
    value: &'static str,
    help: &'static str,
    complete: Complete,
) -> Opt {
    Opt {
        short,
        long,
        value: Some(value),
        help,
        complete,
    }
}

const JSON: Opt = opt(None, "json", None, "print JSON instead of text");
/// `-t TARGET`, tmux's spelling of the target, beside the positional one.
const TARGET: Opt = opt_of(
    Some('t'),
    "target",
    "TARGET",
    "the pane (same as the TARGET argument; tmux's -t)",
    Complete::Pane,
);
/// `--json` on commands that change something: the server's reply.
const JSON_REPLY: Opt = opt(None, "json", None, "print the server's reply as JSON");

/// Options that describe a pane, shared by `new` and `run`.
macro_rules! pane_spec_options {
    ($($more:expr),* $(,)?) => {
        &[
            opt(Some('n'), "name", Some("NAME"), "name the pane (usable as TARGET)"),
            opt_of(Some('c'), "cwd", "DIR", "working directory (default: the current one)", Complete::Dir),
            opt(Some('e'), "env", Some("K=V"), "add an environment variable (repeatable)"),
            opt(None, "size", Some("COLSxROWS"), "initial size (default: this terminal's, else 80x24)"),
            opt(None, "timeout", Some("DUR"), "kill the pane after DUR (5s, 10m, 1h; a bare number is milliseconds)"),
            opt(None, "idle-timeout", Some("DUR"), "kill the pane after DUR without output"),
            opt(None, "shell", Some("STR"), "run STR with SHELL -c (the config's shell, else $SHELL)"),
            opt(None, "no-shell-integration", None, "start bash, zsh or fish without ptyd's shell integration (OSC 133 prompt and command marks, OSC 7), otherwise loaded into interactive shells without touching your rc files; see `ptyd shell-init --help`"),
            opt(Some('w'), "workspace", Some("W"), "open in a new tab of workspace W (default: \"main\")"),
            opt(None, "tab-name", Some("NAME"), "name the new tab"),
            opt_of(Some('s'), "split", "TARGET", "split the pane TARGET instead of opening a tab", Complete::Pane),
            opt(Some('v'), "vertical", None, "with --split: stack instead of side by side"),
            opt(None, "ratio", Some("R"), "with --split: share kept by TARGET (default 0.5)"),
            opt_of(None, "restore", "POLICY", "after a reboot: rerun, shell or hold (default: restore of config.toml, else hold; plain shells always come back as a fresh shell)", Complete::OneOf(&["rerun", "shell", "hold"])),
            opt(None, "resume", Some("CMD"), "after a reboot run CMD (a shell command) instead"),
            $($more),*
        ]
    };
}

/// `ptyd completions --panes`: what the scripts ask the server for.
const PANES: Opt = opt(None, "panes", None, "print the pane ids and names");

pub const SHELLS: &[&str] = &["bash", "zsh", "fish"];

/// What `ptyd help` completes to.
const COMMAND_NAMES: &[&str] = &[
    "server",
    "new",
    "ls",
    "attach",
    "clients",
    "detach",
    "send",
    "capture",
    "run",
    "wait",
    "kill",
    "rm",
    "resize",
    "events",
    "status",
    "stop",
    "save",
    "respawn",
    "focus",
    "resume",
    "workspace",
    "tab",
    "upgrade",
    "version",
    "api",
    "shell-init",
    "service",
    "config",
    "completions",
    "manpage",
    "help",
    "demo",
];

/// Every command, in the order `ptyd --help` lists them.
pub static COMMANDS: &[Command] = &[
    Command {
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
    },
    Command {
        name: "new",
        aliases: &[],
        brief: "new [-d] ... [-- ARGV...]",
        summary: "create a pane (attach unless -d)",
        usage: &[
            "new [-d] [-A] [-n NAME] [-c DIR] [-e K=V]... [--size COLSxROWS]",
            "    [--timeout DUR] [--idle-timeout DUR] [--no-shell-integration]",
            "    [--shell STR | -- ARGV...]",
        ],
        about: "\
Creates a pane running ARGV exactly as given, or STR through SHELL -c, or
SHELL as a login shell when neither is given; SHELL is `shell` of
config.toml, else $SHELL, else your login shell. Attaches to it unless -d,
which prints the new pane's id instead. With -A and -n NAME, a pane named
NAME that exists already is attached (or with -d printed) instead.

-s is --split here, not tmux's session name: name a pane with -n, and use
workspaces (`ptyd workspace new NAME`, `ptyd new -w NAME`) for sessions.",
        options: pane_spec_options![
            opt(
                Some('d'),
                "detached",
                None,
                "do not attach; print the pane id"
            ),
            opt(None, "json", None, "with -d: print the pane as JSON"),
            opt(
                Some('A'),
                "attach-existing",
                None,
                "with -n NAME: attach to the pane NAME if it exists instead of creating one (tmux's new -A)"
            ),
        ],
        args: Args::First(Complete::CommandLine),
        operands: Operands::Argv,
        hidden: &[],
    },
    Command {
        name: "ls",
        aliases: &["list"],
        brief: "ls [--json]",
        summary: "list workspaces, tabs and panes",
        usage: &["ls [--json]"],
        about: "\
Shows workspaces, their tabs with layouts ([a | b] side by side, [a / b]
stacked), and each tab's panes: id, name, state, pid, size, attached
clients (\"2 attached\"), cwd, command. * marks a tab's focused pane; a held
pane (no process, after a restore) has its reason on the line below.
--json prints the tree and the flat pane list.",
        options: &[JSON],
        args: Args::None,
        operands: Operands::Upto(0),
        hidden: &[],
    },
    Command {
        name: "attach",
        aliases: &["a"],
        brief: "attach [TARGET]",
        summary: "attach this terminal to a pane",
        usage: &[
            "attach [TARGET] [-d] [--read-only] [--detach-key KEY]",
            "       [--no-alt-screen | --history N] [--lossless] [--no-direct] [--force]",
        ],
        about: "\
Attaches this terminal to a pane: TARGET, else the focused pane of the
active tab (the pane attached last, since attaching focuses it), on the
terminal's alternate screen: detaching gives back the screen of before.
KEY (default C-\\, or detach_key in config.toml) detaches; it works at
every moment, even while the server is unreachable. It is also a prefix:
KEY KEY sends KEY to the pane (to a ptyd attach running in it), KEY [ or
KEY PageUp opens the scroll mode over the pane's whole history (arrows,
PageUp/PageDown, ? and / search, n N, v select, y copy by OSC 52, q
leave). From inside a pane, attaching to that pane fails; to another, it
needs --force.

Several clients may attach to one pane. Its size follows `window_size` of
config.toml: latest (the client that attached, typed or resized last),
smallest or largest; it is worked out again when a client leaves.
`ptyd clients` lists them, `ptyd detach` detaches them.

A terminal slower than the pane's output never slows the pane down: output
it cannot take is skipped, and once it has caught up it is shown the
pane's screen, as tmux does. With --lossless (or attach_lossless = true in
config.toml) it gets every byte instead, for its own scrollback, and the
pane's program waits for it.

The server writes the pane's output to this terminal and reads the keys
from it itself (the client passes it the terminal and keeps the detach
key), which saves a copy and a process wakeup per byte. --no-direct (or
attach_direct = false in config.toml, or PTYD_ATTACH_DIRECT=0) keeps
output and keys going through the client.",
        options: &[
            TARGET,
            opt(
                Some('d'),
                "detach-others",
                None,
                "detach every other client of the pane (tmux's attach -d)",
            ),
            opt(
                Some('r'),
                "read-only",
                None,
                "watch: keys are not sent to the pane",
            ),
            opt(
                None,
                "detach-key",
                Some("KEY"),
                "the key that detaches, as C-x (default C-\\)",
            ),
            opt(
                None,
                "no-alt-screen",
                None,
                "stay on the main screen; print history into its scrollback first",
            ),
            opt(
                None,
                "history",
                Some("N"),
                "lines of history to print first (main screen; 0 none; default 3000)",
            ),
            opt(
                None,
                "lossless",
                None,
                "every byte of output; the pane waits for this terminal",
            ),
            opt(
                None,
                "no-direct",
                None,
                "output and keys through this client, not the server at the terminal",
            ),
            opt(
                Some('f'),
                "force",
                None,
                "attach even from inside a pane (the clients nest)",
            ),
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "clients",
        aliases: &[],
        brief: "clients [TARGET] [--json]",
        summary: "list the attached clients",
        usage: &["clients [TARGET] [--json]"],
        about: "\
Lists the clients attached to any pane (or to TARGET): their number, pane,
terminal size, whether they are read-only, their process id (from the
socket's peer credentials) and when they attached. * marks each pane's most
recently active client, the one whose size the pane takes under
window_size = \"latest\" and the one `ptyd detach --others` keeps.",
        options: &[TARGET, JSON],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "detach",
        aliases: &[],
        brief: "detach [TARGET] [--others]",
        summary: "detach the clients of a pane, or all clients",
        usage: &[
            "detach [TARGET] [--others] [--json]",
            "detach --client N [--others] [--json]",
            "detach --all [--json]",
        ],
        about: "\
Detaches every client attached to TARGET (a pane), or with --others every
client of it but its most recently active one (tmux's detach-client -a).
Without TARGET inside a pane, the pane this runs in ($PTYD_PANE_ID).
--client N detaches one client (numbers from `ptyd clients`), or with
--others every other client of its pane; --all every client of every pane.
Detached clients see [ptyd: detached] and exit 0; the pane's size is worked
out again from the clients that remain.",
        options: &[
            opt(Some('a'), "all", None, "detach every attached client"),
            opt(
                None,
                "others",
                None,
                "keep one client: the pane's most recently active, or --client N",
            ),
            opt(
                None,
                "client",
                Some("N"),
                "the client numbered N (`ptyd clients`)",
            ),
            TARGET,
            opt(
                None,
                "json",
                None,
                "print the detached client numbers as JSON",
            ),
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "send",
        aliases: &[],
        brief: "send TARGET [--enter] TEXT",
        summary: "type text, keys (--keys C-c Up) or a paste into a pane",
        usage: &[
            "send TARGET [TEXT... | -] [--keys KEY...] [--paste] [--enter | --submit]",
            "     [--wait | --wait-for TEXT [--regex]] [--timeout DUR] [--request-id ID]",
            "     [--json]",
        ],
        about: "\
Types TEXT (arguments joined by spaces; `-` reads it from stdin, byte for
byte) into the pane and returns once the bytes are written to its terminal.

Keys after --keys use tmux's names: Enter, Escape, Tab, BTab, Space,
BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete,
F1-F12, any single character, with C- M- S- prefixes (C-c, M-x, C-S-Up).
They are encoded for the pane's current modes (application cursor keys,
kitty keyboard flags); every argument after --keys is a key, and a name
that is no key is a usage error.",
        options: &[
            opt(
                Some('k'),
                "keys",
                None,
                "the arguments that follow are key names, pressed after the text",
            ),
            opt(
                None,
                "paste",
                None,
                "send TEXT as a bracketed paste if the program enabled it (mode 2004); otherwise as typed",
            ),
            opt(
                None,
                "enter",
                None,
                "press Enter after the text; after a --paste, as a write of its own once the paste is written",
            ),
            opt(
                None,
                "submit",
                None,
                "type (or --paste) TEXT, wait until the program shows it, press Enter and confirm the program took it (it printed something after the Enter), pressing Enter again up to 3 times if not: for agent CLIs that drop an Enter arriving while they still handle the text; exits 1 if no Enter was taken",
            ),
            opt(
                None,
                "wait",
                None,
                "then wait for the shell to report the command finished (shell integration, OSC 133;D) and exit with its exit code; fails at once, typing nothing, if the pane's shell cannot report it",
            ),
            opt(
                None,
                "wait-for",
                Some("TEXT"),
                "then wait for TEXT in the output that follows the input, after the command line's echo (after the shell's command-start mark, or the lines typed)",
            ),
            opt(
                None,
                "regex",
                None,
                "with --wait-for: TEXT is a regular expression",
            ),
            opt(
                None,
                "timeout",
                Some("DUR"),
                "for --wait, --wait-for (default 30s, or wait_timeout_ms of config.toml; 0 waits forever); exit 124 when it passes",
            ),
            opt(
                None,
                "request-id",
                Some("ID"),
                "a retried request with the same ID is not typed twice",
            ),
            opt(
                None,
                "json",
                None,
                "print the input acknowledgements (commands_finished, output_bytes), the submit report and the wait's result",
            ),
            TARGET,
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Any,
        hidden: &[],
    },
    Command {
        name: "capture",
        aliases: &[],
        brief: "capture TARGET",
        summary: "print a pane's screen",
        usage: &["capture TARGET [--ansi] [-J] [-S START] [-E END] [--json]"],
        about: "\
Prints the pane's visible screen as text, or the whole capture as JSON
(lines, wrapped flags, cursor, modes, title, cwd). As in tmux, line 0 is the
top visible row and negative lines are scrollback: -S -1000 includes the
last 1000 lines of history.",
        options: &[
            opt(Some('e'), "ansi", None, "keep colours and links"),
            opt(
                Some('J'),
                "join",
                None,
                "join lines that autowrap continued, so long lines come out whole",
            ),
            opt(
                Some('S'),
                "start",
                Some("START"),
                "first line (negative: scrollback)",
            ),
            opt(Some('E'), "end", Some("END"), "last line"),
            JSON,
            TARGET,
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "run",
        aliases: &[],
        brief: "run -- ARGV...",
        summary: "run a command in a pane, mirror its output, exit with its code",
        usage: &[
            "run [--rm] [-n NAME] [-c DIR] [-e K=V]... [--timeout DUR]",
            "    [--idle-timeout DUR] -- ARGV...",
        ],
        about: "\
Runs ARGV in a new pane, mirrors its output to stdout and exits with its exit
code (128+N when killed by signal N, 124 when --timeout or --idle-timeout
ended it). Ctrl-C kills the pane. Into a pipe or a file, lines end in LF
(the terminal's CR LF is for terminals). The pane stays listed with its exit
status until removed.",
        options: pane_spec_options![opt(None, "rm", None, "remove the pane once it has exited")],
        args: Args::First(Complete::CommandLine),
        operands: Operands::Argv,
        hidden: &[],
    },
    Command {
        name: "wait",
        aliases: &[],
        brief: "wait TARGET ...",
        summary: "wait for exit, new text, idleness, a prompt or a command",
        usage: &[
            "wait TARGET (--exit | --text STR [--regex] [--screen] [--after-output N]",
            "     | --idle DUR | --prompt | --command-finished [--after N])",
            "     [--timeout DUR] [--json]",
        ],
        about: "\
Waits until the condition holds; exits 0 (or the pane's code with --exit),
124 when the timeout passes first (default 30s, or wait_timeout_ms of
config.toml; --timeout 0 waits forever). --exit on a held pane (no
process, after a restore) exits 1 at once, saying why it is held.

--text matches output that arrives after the wait starts: text already on
the screen does not count unless --screen. To wait for what a command you
type prints, use `ptyd send --wait-for TEXT` (or --after-output with the
count from `ptyd send --json`): it starts from the input and skips the
command line's echo, which a separate `wait --text` may still see if the
shell draws it late.

--prompt and --command-finished need shell integration: on by default for
bash, zsh and fish that ptyd starts, else `ptyd shell-init`. On a pane whose
shell has shown no mark and has no integration they fail at once.",
        options: &[
            opt(
                None,
                "exit",
                None,
                "until the pane's program exits; exit with its code",
            ),
            opt(
                None,
                "text",
                Some("STR"),
                "until STR appears in output that arrives from now on",
            ),
            opt(
                None,
                "regex",
                None,
                "with --text: STR is a regular expression (within a line)",
            ),
            opt(
                None,
                "screen",
                None,
                "with --text: what the screen shows already counts too",
            ),
            opt(
                None,
                "after-output",
                Some("N"),
                "with --text: count output from byte N (output_bytes of a `ptyd send --json` ack) instead of from now",
            ),
            opt(
                None,
                "idle",
                Some("DUR"),
                "until the pane has been silent for DUR (500ms, 2s; a bare number is milliseconds)",
            ),
            opt(
                None,
                "prompt",
                None,
                "until the shell shows its next prompt (OSC 133;A)",
            ),
            opt(
                None,
                "command-finished",
                None,
                "until the shell reports a command finished (OSC 133;D)",
            ),
            opt(
                None,
                "after",
                Some("N"),
                "with --prompt, --command-finished: the mark after the N-th instead of the next",
            ),
            opt(
                None,
                "timeout",
                Some("DUR"),
                "give up after DUR (default 30s, or wait_timeout_ms of config.toml; 0: never), exit 124",
            ),
            JSON,
            TARGET,
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "kill",
        aliases: &[],
        brief: "kill TARGET",
        summary: "signal a pane's whole process tree",
        usage: &["kill TARGET [--signal SIG] [--grace DUR]"],
        about: "\
Sends SIG to every process of the pane's session, then KILL to what is left
after the grace period.",
        options: &[
            opt_of(
                Some('s'),
                "signal",
                "SIG",
                "the signal (default TERM)",
                Complete::OneOf(&["TERM", "HUP", "INT", "KILL", "QUIT", "USR1", "USR2"]),
            ),
            opt(
                None,
                "grace",
                Some("DUR"),
                "time before KILL (default 3s; a bare number is milliseconds)",
            ),
            TARGET,
            JSON_REPLY,
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "rm",
        aliases: &["remove"],
        brief: "rm TARGET | --exited",
        summary: "remove an exited pane, or every exited pane",
        usage: &["rm TARGET [--force]", "rm --exited"],
        about: "Removes an exited pane, or with --exited every exited pane (their ids are printed).",
        options: &[
            opt(Some('f'), "force", None, "kill a running pane first"),
            opt(None, "exited", None, "remove every exited pane"),
            TARGET,
            opt(
                None,
                "json",
                None,
                "print the server's reply (with --exited: the removed ids) as JSON",
            ),
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "resize",
        aliases: &[],
        brief: "resize TARGET COLSxROWS",
        summary: "resize a pane",
        usage: &["resize TARGET COLSxROWS [--json]"],
        about: "\
Resizes the pane (columns 2-1000, rows 1-500). An attached client that
types or resizes afterwards sets the size again (see `ptyd attach --help`).",
        options: &[
            TARGET,
            opt(None, "json", None, "print the pane's info as JSON"),
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Any,
        hidden: &[],
    },
    Command {
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
    },
    Command {
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
    },
    Command {
        name: "stop",
        aliases: &[],
        brief: "stop",
        summary: "stop the server (its panes are hung up)",
        usage: &["stop"],
        about: "Stops the server. Its panes are hung up (their programs get SIGHUP).",
        options: &[],
        args: Args::None,
        operands: Operands::Upto(0),
        hidden: &[],
    },
    Command {
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
    },
    Command {
        name: "respawn",
        aliases: &[],
        brief: "respawn TARGET | --held",
        summary: "start a held or exited pane's command again",
        usage: &["respawn TARGET [--json]", "respawn --held [--json]"],
        about: "\
Starts the command of a held or exited pane again, on a new terminal, keeping
the pane's id, place and screen history. --held does it for every held pane
(printing their ids); exits 1 if one could not be started.",
        options: &[
            opt(None, "held", None, "respawn every held pane"),
            TARGET,
            opt(
                None,
                "json",
                None,
                "print the pane's info (the new pid) as JSON; with --held, {\"respawned\": [...], \"failed\": [...]}",
            ),
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "focus",
        aliases: &[],
        brief: "focus TARGET",
        summary: "focus a pane (and its tab and workspace)",
        usage: &["focus TARGET"],
        about: "\
Makes the pane its tab's focus, its tab the active tab and its workspace the
active workspace.",
        options: &[TARGET, JSON_REPLY],
        args: Args::First(Complete::Pane),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "resume",
        aliases: &[],
        brief: "resume TARGET CMD",
        summary: "set the command that resumes a pane after a reboot",
        usage: &["resume TARGET COMMAND", "resume TARGET --clear"],
        about: "\
Sets the shell command that resumes the pane's work after a reboot (for
example an agent's `claude --resume <id>`). Programs inside a pane can run
`ptyd resume $PTYD_PANE_ID '...'` to declare it themselves.",
        options: &[
            opt(None, "clear", None, "forget the pane's resume command"),
            TARGET,
            opt(None, "json", None, "print the pane's info as JSON"),
        ],
        args: Args::First(Complete::Pane),
        operands: Operands::Any,
        hidden: &[],
    },
    Command {
        name: "workspace",
        aliases: &["ws"],
        brief: "workspace new|rename|rm",
        summary: "manage workspaces",
        usage: &[
            "workspace new NAME",
            "workspace rename W NAME",
            "workspace rm W [--force]",
        ],
        about: "\
W is a workspace id (w2) or name. Removing a workspace removes its tabs and
panes; running panes need --force (they are killed).",
        options: &[
            opt(Some('f'), "force", None, "with rm: kill running panes"),
            opt(Some('t'), "target", Some("W"), "the workspace (same as W)"),
            JSON_REPLY,
        ],
        args: Args::First(Complete::OneOf(&["new", "rename", "rm"])),
        operands: Operands::Any,
        hidden: &[],
    },
    Command {
        name: "tab",
        aliases: &[],
        brief: "tab rename|rm",
        summary: "manage tabs",
        usage: &["tab rename T NAME", "tab rm T [--force]"],
        about: "\
T is a tab id (t3) or name. New tabs come from `ptyd new` (optionally
--workspace W). Removing a tab removes its panes; running ones need --force.",
        options: &[
            opt(Some('f'), "force", None, "with rm: kill running panes"),
            opt(Some('t'), "target", Some("T"), "the tab (same as T)"),
            JSON_REPLY,
        ],
        args: Args::First(Complete::OneOf(&["rename", "rm"])),
        operands: Operands::Any,
        hidden: &[],
    },
    Command {
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
    },
    Command {
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
    },
    Command {
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
    },
    Command {
        name: "shell-init",
        aliases: &[],
        brief: "shell-init bash|zsh|fish",
        summary: "print the shell integration for shells ptyd did not start",
        usage: &["shell-init bash|zsh|fish"],
        about: "\
Prints ptyd's shell integration for the shell: hooks that report each
prompt (OSC 133;A), the start of input (B) and of a command (C), the
command's exit status (D;STATUS) and the working directory (OSC 7). They
make `ptyd send --wait` and `ptyd wait --prompt/--command-finished` work.

Shells ptyd starts (bash, zsh, fish run as interactive shells, without a
script or -c) load them on their own, without touching your files: bash
through --rcfile (a file that runs your ~/.bashrc, or for a login shell
your profile files, first), zsh through ZDOTDIR, fish through
XDG_DATA_DIRS. Turn that off with `ptyd new --no-shell-integration` or
`shell_integration = false` in config.toml.

For other shells (ssh from a pane, a shell in a container), load them
yourself, in the rc file or at the prompt:

  bash:  eval \"$(ptyd shell-init bash)\"
  zsh:   eval \"$(ptyd shell-init zsh)\"
  fish:  ptyd shell-init fish | source",
        options: &[],
        args: Args::First(Complete::OneOf(SHELLS)),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
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
    },
    Command {
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
    },
    Command {
        name: "completions",
        aliases: &[],
        brief: "completions SHELL",
        summary: "print shell completions (bash, zsh or fish)",
        usage: &["completions bash|zsh|fish"],
        about: "\
Prints the completion script for SHELL. Pane names complete from the running
server. Install it where your shell looks:

  ptyd completions bash > ~/.local/share/bash-completion/completions/ptyd
  ptyd completions zsh > ~/.zfunc/_ptyd    # with fpath+=(~/.zfunc)
  ptyd completions fish > ~/.config/fish/completions/ptyd.fish",
        options: &[],
        args: Args::First(Complete::OneOf(SHELLS)),
        operands: Operands::Upto(1),
        hidden: &[PANES],
    },
    Command {
        name: "manpage",
        aliases: &[],
        brief: "manpage",
        summary: "print this manual as a man page (roff)",
        usage: &["manpage"],
        about: "\
Prints the ptyd(1) man page, generated from the same table as these help
texts. View it with `ptyd manpage | man -l -`.",
        options: &[],
        args: Args::None,
        operands: Operands::Upto(0),
        hidden: &[],
    },
    Command {
        name: "help",
        aliases: &[],
        brief: "help [COMMAND]",
        summary: "show help for ptyd or a command",
        usage: &["help [COMMAND]"],
        about: "\
Prints the overview of commands, or the help of COMMAND (the same as
`ptyd COMMAND --help`).",
        options: &[],
        args: Args::First(Complete::OneOf(COMMAND_NAMES)),
        operands: Operands::Upto(1),
        hidden: &[],
    },
    Command {
        name: "demo",
        aliases: &[],
        brief: "demo",
        summary: "run a self-contained demonstration",
        usage: &["demo"],
        about: "\
Starts a server in a private temporary namespace, runs a few panes and
drives them through the API, printing each step as the `ptyd` command that
does the same and what it saw: typing and waiting, a read-only attach, a
restore from the snapshot, a live upgrade. Then it cleans up and suggests
what to try next.",
        options: &[],
        args: Args::None,
        operands: Operands::Upto(0),
        hidden: &[],
    },
];

/// Options before the command.
pub static GLOBAL_OPTIONS: &[Opt] = &[
    opt(
        Some('L'),
        "namespace",
        Some("NAME"),
        "use an isolated server (default: $PTYD_NAMESPACE or \"default\")",
    ),
    opt(
        Some('h'),
        "help",
        None,
        "help; `ptyd COMMAND --help` for a command",
    ),
    opt(Some('V'), "version", None, "version"),
];

/// What ptyd is, in one line.
pub const TAGLINE: &str = "keeps terminals alive across upgrades and reboots";

/// The overview (`ptyd --help`): prints as the rendered text.
#[derive(Clone, Copy)]
pub struct Topic(Option<&'static str>);

pub const MAIN: Topic = Topic(None);

/// The exit-code scheme, for `ptyd --help` and the man page.
pub const EXIT_CODES: &str = "\
Exit codes: 0 success; 1 ptyd failed (no server, no such pane, the server
refused); 2 a usage error, whether this client or the server found it; 3
`ptyd server` found the namespace already served; 124 a wait timed out, or
`run --timeout` ended the pane; 126 the program was found but could not be
run; 127 the program was not found; otherwise the program's own code (run,
wait --exit, send --wait), 128+N when signal N ended it. With --json, a
failure is also printed on stdout as {\"error\": {\"code\", \"message\",
\"exit_code\"}}.";

/// The table entry named `name` (or one of its aliases).
pub fn command(name: &str) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.and_then(command) {
            Some(c) => f.write_str(&render_command(c)),
            None => f.write_str(&render_main()),
        }
    }
}

const WIDTH: usize = 79;

/// The left column of an option: `-d, --detached` or `    --json`.
pub fn option_label(o: &Opt) -> String {
    let mut s = match o.short {
        Some(c) => format!("-{c}, --{}", o.long),
        None => format!("    --{}", o.long),
    };
    if let Some(v) = o.value {
        s.push(' ');
        s.push_str(v);
    }
    s
}

/// Words of `text` filled into lines of at most `width` columns.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// An option list: labels in a column, descriptions wrapped beside them.
fn render_options(out: &mut String, options: &[Opt]) {
    let col = options
        .iter()
        .map(|o| option_label(o).len())
        .max()
        .unwrap_or(0)
        .clamp(12, 24)
        + 5;
    for o in options {
        let label = option_label(o);
        let lines = wrap(o.help, WIDTH - col);
        let mut first = true;
        for line in &lines {
            if first && label.len() + 2 < col {
                out.push_str(&format!("  {label:<w$}{line}\n", w = col - 2));
            } else if first {
                out.push_str(&format!("  {label}\n{:col$}{line}\n", ""));
            } else {
                out.push_str(&format!("{:col$}{line}\n", ""));
            }
            first = false;
        }
    }
}

pub fn render_command(c: &Command) -> String {
    let mut out = String::new();
    for (i, usage) in c.usage.iter().enumerate() {
        if usage.starts_with(' ') {
            // The previous synopsis continued, under its arguments.
            out.push_str(&format!("{:12}{usage}\n", ""));
        } else {
            let lead = if i == 0 { "Usage:" } else { "      " };
            out.push_str(&format!("{lead} ptyd {usage}\n"));
        }
    }
    out.push('\n');
    out.push_str(c.about);
    out.push('\n');
    if !c.options.is_empty() {
        out.push('\n');
        render_options(&mut out, c.options);
    }
    if !c.aliases.is_empty() {
        out.push_str(&format!("\nAlso: ptyd {}\n", c.aliases.join(", ptyd ")));
    }
    out
}

pub fn render_main() -> String {
    let mut out =
        format!("ptyd - {TAGLINE}\n\nUsage: ptyd [-L NAME] COMMAND [ARGS]\n\nCommands:\n");
    for c in COMMANDS {
        if c.brief.len() < 28 {
            out.push_str(&format!("  {:<28}{}\n", c.brief, c.summary));
        } else {
            // Too long for the column: the summary on a line of its own.
            out.push_str(&format!("  {}\n{:30}{}\n", c.brief, "", c.summary));
        }
    }
    out.push_str("\nOptions:\n");
    render_options(&mut out, GLOBAL_OPTIONS);
    out.push_str(
        "\nTARGET is a pane id (p3) or a pane name. DUR is a duration: 500ms, 5s,\n\
         1.5s, 2m, 1h; a bare number is milliseconds.\n\n",
    );
    out.push_str(EXIT_CODES);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_fits_and_every_command_is_unique() {
        let mut names = std::collections::HashSet::new();
        for c in COMMANDS {
            for n in std::iter::once(&c.name).chain(c.aliases) {
                assert!(names.insert(*n), "{n} named twice");
            }
            let mut longs = std::collections::HashSet::new();
            for o in c.options {
                assert!(longs.insert(o.long), "{} --{} twice", c.name, o.long);
            }
            for line in render_command(c).lines() {
                assert!(line.len() <= 90, "too long in {}: {line}", c.name);
            }
        }
    }

    #[test]
    fn help_completes_every_command() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        let mut listed = COMMAND_NAMES.to_vec();
        names.sort_unstable();
        listed.sort_unstable();
        assert_eq!(names, listed);
    }

    #[test]
    fn options_are_aligned_and_wrapped() {
        let text = render_command(command("new").unwrap());
        assert!(text.starts_with("Usage: ptyd new [-d]"), "{text}");
        assert!(text.contains("\n  -d, --detached "), "{text}");
        assert!(text.contains("\n      --restore POLICY "), "{text}");
        assert!(render_main().contains("  attach [TARGET] "));
        // A brief too long for its column never runs into its summary.
        assert!(render_main().contains("  config check [FILE] | reload\n"));
    }
}
