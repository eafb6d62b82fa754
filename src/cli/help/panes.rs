//! The help table's entries for the commands about panes: making, showing, attaching, typing,
//! waiting and ending them.

use super::*;

pub const NEW: Command = Command {
    name: "new",
    aliases: &[],
    brief: "new [-d] ... [-- ARGV...]",
    summary: "create a pane (attach unless -d)",
    usage: &[
        "new [-d] [-A] [-f] [-n NAME] [-c DIR] [-e K=V]... [--size COLSxROWS]",
        "    [--timeout DUR] [--idle-timeout DUR] [--no-shell-integration]",
        "    [--shell STR | -- ARGV...]",
    ],
    about: "\
Creates a pane running ARGV exactly as given, or STR through SHELL -c, or
SHELL as a login shell when neither is given; SHELL is `shell` of
config.toml, else $SHELL, else your login shell. Attaches to it unless -d,
which prints the new pane's id instead. With -A and -n NAME, a pane named
NAME that exists already is attached (or with -d printed) instead. From
inside a pane, attaching needs --force, as for `ptyd attach` (the clients
would nest); -d never does.

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
        opt(
            Some('f'),
            "force",
            None,
            "attach even from inside a pane (the clients nest)"
        ),
    ],
    args: Args::First(Complete::CommandLine),
    operands: Operands::Argv,
    hidden: &[],
};

pub const LS: Command = Command {
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
};

pub const ATTACH: Command = Command {
    name: "attach",
    aliases: &["a"],
    brief: "attach [TARGET]",
    summary: "attach this terminal to a tab, or to one pane",
    usage: &[
        "attach [TARGET] [--pane-only] [-d] [--read-only] [--detach-key KEY]",
        "       [--no-alt-screen | --history N] [--lossless] [--no-direct] [--force]",
    ],
    about: "\
Shows TARGET's tab (else the active tab): its panes side by side, each in
its own rectangle and sized to it, the focused one's border marked, and a
status line (status in config.toml: bottom, top or off). The keys after
the prefix KEY (default C-\\, prefix in config.toml) are tmux's: % split
side by side, \" stacked, arrows and o move the focus, C-arrows move a
border, z zoom, x close the pane (asks), c new tab, n p 0-9 select a tab,
, rename it, [ scroll mode, ? list the keys, d detach, : a ptyd command
run against the view (`:split -v`, `:kill`; no TARGET means the focused
pane), w a chooser over workspaces, tabs and panes; [keys] in config.toml
changes them. A key bound to nothing says so on the status
line. Every client has its own tab; the layout follows the Tree, so
`ptyd focus` and a split from the CLI show at once.

--pane-only attaches to the one pane (the default from inside a pane,
where the outer terminal already shows the tabs), on the terminal's
alternate screen: detaching gives back the screen of before.
KEY detaches; it works at
every moment, even while the server is unreachable. It is also a prefix:
KEY KEY sends KEY to the pane (to a ptyd attach running in it), KEY [ or
KEY PageUp opens the scroll mode over the pane's whole history (arrows,
PageUp/PageDown, ? and / search, n N, v select, y copy by OSC 52, q
leave). From inside a pane, attaching to that pane fails; to another, it
needs --force. Attach needs a terminal (refused with `not a terminal`
otherwise); an exited pane is refused with its status (`ptyd capture`
shows its last screen, `ptyd respawn` runs it again).

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
            None,
            "pane-only",
            None,
            "the pane alone, not its tab (the default inside a pane)",
        ),
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
            "every byte of output; the pane waits for this terminal (one pane)",
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
};

pub const CLIENTS: Command = Command {
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
};

pub const DETACH: Command = Command {
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
};

pub const SEND: Command = Command {
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
};

pub const CAPTURE: Command = Command {
    name: "capture",
    aliases: &[],
    brief: "capture TARGET",
    summary: "print a pane's screen",
    usage: &["capture TARGET [--ansi] [-J] [-S START] [-E END] [--json]"],
    about: "\
Prints the pane's visible screen as text, or the whole capture as JSON
(lines, wrapped flags, cursor, modes, title, cwd). As in tmux, line 0 is the
top visible row and negative lines are scrollback: -S -1000 includes the
last 1000 lines of history. Text of any length is printed (a long capture
is read in parts, output arriving meanwhile neither repeated nor skipped);
--json is one reply, at most 4 MiB.",
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
};

pub const RUN: Command = Command {
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
};

pub const WAIT: Command = Command {
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
};

pub const KILL: Command = Command {
    name: "kill",
    aliases: &[],
    brief: "kill [TARGET]",
    summary: "signal a pane's whole process tree",
    usage: &["kill [TARGET] [--signal SIG] [--grace DUR]"],
    about: "\
Without --signal: HUP to every process of the pane's session (what a
closing terminal sends: a shell saves its history and ends, as in tmux),
then TERM halfway through the grace period to what ignored it, then KILL to
what is left at its end. With --signal SIG: SIG, then KILL after the grace
period. Without TARGET inside a pane, the pane this runs in.",
    options: &[
        opt_of(
            Some('s'),
            "signal",
            "SIG",
            "send SIG instead of the HUP, TERM ladder",
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
};

pub const RM: Command = Command {
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
};

pub const RESIZE: Command = Command {
    name: "resize",
    aliases: &[],
    brief: "resize [TARGET] COLSxROWS",
    summary: "resize a pane",
    usage: &["resize [TARGET] COLSxROWS [--json]"],
    about: "\
Resizes the pane (columns 2-1000, rows 1-500). An attached client that
types or resizes afterwards sets the size again (see `ptyd attach --help`).
Without TARGET inside a pane, the pane this runs in.",
    options: &[
        TARGET,
        opt(None, "json", None, "print the pane's info as JSON"),
    ],
    args: Args::First(Complete::Pane),
    operands: Operands::Any,
    hidden: &[],
};

pub const RESPAWN: Command = Command {
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
};

pub const FOCUS: Command = Command {
    name: "focus",
    aliases: &[],
    brief: "focus TARGET",
    summary: "focus a pane (and its tab and workspace)",
    usage: &["focus TARGET", "focus TARGET --client N"],
    about: "\
Makes the pane its tab's focus, its tab the active tab and its workspace the
active workspace, and moves every attached client showing that workspace to
it. With --client, only that client's view moves (to the pane's tab): the
other clients and the tab's own focus stay.",
    options: &[
        opt(
            None,
            "client",
            Some("N"),
            "move only the view of the client numbered N (`ptyd clients`)",
        ),
        TARGET,
        JSON_REPLY,
    ],
    args: Args::First(Complete::Pane),
    operands: Operands::Upto(1),
    hidden: &[],
};

pub const RESUME: Command = Command {
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
};

pub const RENAME: Command = Command {
    name: "rename",
    aliases: &[],
    brief: "rename [TARGET] NAME",
    summary: "give a pane a new name",
    usage: &["rename [TARGET] NAME"],
    about: "\
Names the pane NAME (usable as TARGET from then on; kept across upgrades
and restores). Names are unique and may not look like an id (p7, 7). Tabs
keep their names: `ptyd tab rename` renames a tab. Without TARGET inside a
pane, the pane this runs in.",
    options: &[
        TARGET,
        opt(None, "json", None, "print the pane's info as JSON"),
    ],
    args: Args::First(Complete::Pane),
    operands: Operands::Upto(2),
    hidden: &[],
};
