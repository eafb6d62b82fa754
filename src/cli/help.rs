//! Help texts, one per command, kept together so they read as a manual.

pub const MAIN: &str = "\
ptyd - keeps terminals alive across upgrades and reboots

Usage: ptyd [-L NAME] COMMAND [ARGS]

Commands:
  server                      run the server in the foreground
  new [-d] ... [-- ARGV...]   create a pane (attach unless -d)
  ls [--json]                 list panes
  attach TARGET               attach this terminal to a pane
  send TARGET [--enter] TEXT  type text, keys (--keys C-c Up) or a paste into a pane
  capture TARGET              print a pane's screen
  run -- ARGV...              run a command in a pane, mirror its output, exit with its code
  wait TARGET ...             wait for exit, new text, idleness, a prompt or a command
  kill TARGET                 signal a pane's whole process tree
  rm TARGET | --exited        remove an exited pane, or every exited pane
  resize TARGET COLSxROWS     resize a pane
  events [--since N]          stream server events as JSON lines
  status [--json]             show the server's state
  stop                        stop the server (its panes are hung up)
  save                        write the snapshot now
  respawn TARGET              start a held or exited pane's command again
  focus TARGET                focus a pane (and its tab and workspace)
  resume TARGET CMD           set the command that resumes a pane after a reboot
  workspace new|rename|rm     manage workspaces
  tab rename|rm               manage tabs
  upgrade [--binary PATH]     replace the server binary; every pane keeps running
  version [--json]            versions of this binary (protocol, handoff, snapshot)
  api METHOD [JSON]           send one raw API request, print the result
  shell-init bash|zsh|fish    print the shell-integration hooks (for shells ptyd did not start)
  demo                        run a self-contained demonstration

Options:
  -L, --namespace NAME   use an isolated server (default: $PTYD_NAMESPACE or \"default\")
  -h, --help             help; `ptyd COMMAND --help` for a command
  -V, --version          version

TARGET is a pane id (p3) or a pane name. DURATION is a number with a unit:
500ms, 5s, 1.5s, 2m, 1h; a bare number is milliseconds.

Exit codes:
  0      success
  1      ptyd failed (no server, no such pane, the server refused)
  2      usage error, whether this client or the server found it
  124    a wait timed out, or `run --timeout` ended the pane
  126    the program was found but could not be run
  127    the program was not found
  N      the program's own code (run, wait --exit, send --wait); 128+N when
         signal N ended it
With --json, a failure is also printed on stdout as
{\"error\": {\"code\": ..., \"message\": ..., \"exit_code\": N}}.
";

pub const SERVER: &str = "\
Usage: ptyd server [--no-history] [--no-restore]

Runs the server for the namespace in the foreground, logging to stderr and
to diagnostics.jsonl in the state directory. Client commands start one in the
background when none runs. SIGTERM or SIGINT (or `ptyd stop`) stop it.

At start it rebuilds the workspaces, tabs and panes of the last snapshot
(session.json in the state directory) and saves changes as they happen.

  --no-history   do not write per-pane history files
  --no-restore   start empty (the old snapshot is replaced at the first save)
";

pub const NEW: &str = "\
Usage: ptyd new [-d] [-n NAME] [-c DIR] [-e K=V]... [--size COLSxROWS]
                [--timeout DURATION] [--idle-timeout DURATION]
                [--no-shell-integration] [--shell STR | -- ARGV...]

Creates a pane running ARGV exactly as given, or STR through $SHELL -c, or
your login shell when neither is given. Attaches to it unless -d, which
prints the new pane's id instead.

  -d, --detached         do not attach; print the pane id
  -n, --name NAME        name the pane (usable as TARGET)
  -c, --cwd DIR          working directory (default: the current one)
  -e, --env K=V          add an environment variable (repeatable)
      --size COLSxROWS   initial size (default: this terminal's, else 80x24)
      --timeout DUR      kill the pane after DUR (5s, 10m, 1h; bare number: ms)
      --idle-timeout DUR kill the pane after DUR without output
      --shell STR        run STR with $SHELL -c
      --no-shell-integration
                         start bash, zsh or fish without ptyd's shell
                         integration (OSC 133 prompt and command marks, OSC 7
                         cwd), which is otherwise loaded into interactive
                         shells without touching your rc files; see
                         `ptyd shell-init --help`
  -w, --workspace W      open in a new tab of workspace W (default: \"main\")
      --tab-name NAME    name the new tab
  -s, --split TARGET     split the pane TARGET instead of opening a tab
  -v, --vertical         with --split: stack instead of side by side
      --ratio R          with --split: share kept by TARGET (default 0.5)
      --restore POLICY   after a reboot: rerun, shell or hold (default hold;
                         plain shells always come back as a fresh shell)
      --resume CMD       after a reboot run CMD (a shell command) instead
      --json             with -d: print the pane as JSON
";

pub const LS: &str = "\
Usage: ptyd ls [--json]

Shows workspaces, their tabs with layouts ([a | b] side by side, [a / b]
stacked), and each tab's panes: id, name, state, pid, size, cwd, command.
* marks a tab's focused pane. --json prints the tree and the flat pane list.
";

pub const SAVE: &str = "\
Usage: ptyd save

Writes the snapshot (session.json and history files) now and returns once it
is on disk. The server also saves on its own shortly after every change.
";

pub const RESPAWN: &str = "\
Usage: ptyd respawn TARGET

Starts the command of a held or exited pane again, on a new terminal, keeping
the pane's id, place and screen history.
";

pub const FOCUS: &str = "\
Usage: ptyd focus TARGET

Makes the pane its tab's focus, its tab the active tab and its workspace the
active workspace.
";

pub const RESUME: &str = "\
Usage: ptyd resume TARGET COMMAND
       ptyd resume TARGET --clear

Sets the shell command that resumes the pane's work after a reboot (for
example an agent's `claude --resume <id>`). Programs inside a pane can run
`ptyd resume $PTYD_PANE_ID '...'` to declare it themselves.
";

pub const WORKSPACE: &str = "\
Usage: ptyd workspace new NAME
       ptyd workspace rename W NAME
       ptyd workspace rm W [--force]

W is a workspace id (w2) or name. Removing a workspace removes its tabs and
panes; running panes need --force (they are killed).
";

pub const TAB: &str = "\
Usage: ptyd tab rename T NAME
       ptyd tab rm T [--force]

T is a tab id (t3) or name. New tabs come from `ptyd new` (optionally
--workspace W). Removing a tab removes its panes; running ones need --force.
";

pub const ATTACH: &str = "\
Usage: ptyd attach TARGET [--read-only] [--detach-key KEY]

Attaches this terminal to a pane. KEY (default C-\\) detaches; it works at
every moment, even while the server is unreachable.
";

pub const SEND: &str = "\
Usage: ptyd send TARGET [TEXT... | -] [--keys KEY...] [--paste] [--enter | --submit]
                 [--wait | --wait-for TEXT [--regex]] [--timeout DURATION]
                 [--request-id ID] [--json]

Types TEXT (arguments joined by spaces; `-` reads it from stdin, byte for
byte) into the pane and returns once the bytes are written to its terminal.

  --keys KEY...    after the text, press keys, tmux's names: Enter, Escape,
                   Tab, BTab, Space, BSpace, Up, Down, Left, Right, Home,
                   End, PageUp, PageDown, Insert, Delete, F1-F12, any single
                   character, with C- M- S- prefixes (C-c, M-x, C-S-Up).
                   Encoded for the pane's current modes (application cursor
                   keys, kitty keyboard flags). Every argument after --keys
                   is a key; an unknown name is an error.
  --paste          send TEXT as a bracketed paste if the program enabled it
                   (mode 2004); otherwise as typed
  --enter          press Enter after the text; after a --paste, as a write
                   of its own once the paste is written
  --submit         type (or --paste) TEXT, wait until the program shows it,
                   press Enter and confirm the program took it (it printed
                   something after the Enter), pressing Enter again up to 3
                   times if not: for agent CLIs that drop an Enter arriving
                   while they still handle the text. Exits 1 if no Enter
                   was taken; --json reports echo_seen and enter_attempts
  --wait           then wait for the shell to report the command finished
                   (shell integration, OSC 133;D) and exit with its exit
                   code. Fails at once, typing nothing, if the pane's shell
                   cannot report it (see `ptyd shell-init --help`).
  --wait-for TEXT  then wait for TEXT in output that follows the input,
                   after the lines the input typed (their echo never
                   matches); --regex makes TEXT a regular expression
  --timeout DUR    for --wait/--wait-for (default 30s; 0 waits forever);
                   exit code 124 when it passes
  --request-id ID  a retried send with the same ID is not typed twice
  --json           print the input acknowledgements (counters
                   commands_finished, output_bytes) and the wait's result
";

pub const CAPTURE: &str = "\
Usage: ptyd capture TARGET [--ansi] [-J] [-S START] [-E END] [--json]

Prints the pane's visible screen as text (--ansi keeps colours and links), or
the whole capture as JSON (lines, wrapped flags, cursor, modes, title, cwd).
As in tmux, line 0 is the top visible row and negative lines are scrollback:
-S -1000 includes the last 1000 lines of history. -J (--join) joins lines
that autowrap continued, so long lines come out whole.
";

pub const RUN: &str = "\
Usage: ptyd run [--rm] [-n NAME] [-c DIR] [-e K=V]... [--timeout DURATION]
                [--idle-timeout DURATION] -- ARGV...

Runs ARGV in a new pane, mirrors its output to stdout and exits with its exit
code (128+N when killed by signal N, 124 when --timeout or --idle-timeout
ended it). Ctrl-C kills the pane. Into a pipe or file, lines end in LF (the
terminal's CR LF is for terminals). The pane stays listed with its exit
status until removed, unless --rm: then it is removed once it exits.
";

pub const WAIT: &str = "\
Usage: ptyd wait TARGET CONDITION [--timeout DURATION] [--json]

Waits until CONDITION holds; exits 0 (or the pane's code with --exit), 124
when the timeout passes first (default 30s; --timeout 0 waits forever).

Conditions (exactly one):
  --exit                 the pane's process exits; exits with its code
  --text STR             STR appears in output that arrives after the wait
                         starts (text already printed does not count)
      --screen           ... or is on the screen already
      --regex            STR is a regular expression (matched within a line)
      --after-output N   count output from byte N (output_bytes of a
                         `ptyd send --json` ack) instead of from now
  --idle DUR             no output for DUR (500ms, 2s; bare number: ms)
  --prompt               the shell shows its next prompt (OSC 133;A)
  --command-finished     the shell reports the next command finished
                         (OSC 133;D)
      --after N          the mark after the N-th instead of the next one

To wait for what a command you type prints, use `ptyd send --wait-for TEXT`
(or --after-output with the count from `ptyd send --json`): it starts from
the input and skips the command line's echo, which a separate `wait --text`
may still see if the shell draws it late.

--prompt and --command-finished need shell integration: on by default for
bash, zsh and fish that ptyd starts, else `ptyd shell-init`. On a pane
whose shell has shown no mark and has no integration they fail at once.
";

pub const KILL: &str = "\
Usage: ptyd kill TARGET [--signal SIG] [--grace DURATION]

Sends SIG (default TERM) to every process of the pane's session, then KILL
to what is left after DURATION (default 3s; a bare number is milliseconds).
";

pub const RM: &str = "\
Usage: ptyd rm TARGET [--force]
       ptyd rm --exited

Removes an exited pane. --force kills a running one first. --exited removes
every exited pane and prints their ids.
";

pub const RESIZE: &str = "\
Usage: ptyd resize TARGET COLSxROWS

Resizes the pane (columns 2-1000, rows 1-500).
";

pub const EVENTS: &str = "\
Usage: ptyd events [--since N]

Prints server events as JSON lines until interrupted. With --since N, first
prints the retained events after sequence number N (a `gap` event says if
some were already dropped).
";

pub const STATUS: &str = "\
Usage: ptyd status [--json]

Shows the server's pid, version, namespace, socket, panes and clients.
";

pub const STOP: &str = "\
Usage: ptyd stop

Stops the server. Its panes are hung up (their programs get SIGHUP).
";

pub const API: &str = "\
Usage: ptyd api METHOD [JSON]

Sends one request with JSON params (default {}) and prints the result as
JSON. Methods are documented in docs/protocol.md.
";

pub const DEMO: &str = "\
Usage: ptyd demo

Starts a server in a private temporary namespace, runs a few panes, drives
them through the API, prints what it did and saw, and cleans up.
";

pub const UPGRADE: &str = "\
Usage: ptyd upgrade [--binary PATH] [--timeout DURATION] [--mode live|restore] [--json]

Replaces the running server with a new binary while every pane keeps
running: same processes, no hangup, no lost or repeated output byte, the
socket never goes away and attached clients stay connected. The new binary
(default: the path this server was started from, re-read now) must speak the
same handoff version (`ptyd version`). Anything that fails before the commit
point leaves the old server serving exactly as before; the command then
exits 1 with the cause. Prints each phase with its duration and the blackout
(first pane paused to new server reading).

  --binary PATH   the new ptyd binary
  --timeout DUR   deadline up to the commit point (default 10s; bare: ms)
  --json          print the report as one JSON object
  --mode MODE     live (default), or restore: where a live handoff is
                  impossible, save the session, stop, and restart this
                  process as the new binary, which restores the panes from
                  the snapshot (restarting or resuming them; docs/snapshot.md)
  --fault S:A     testing only: make a step fail (see src/handoff/fault.rs)
";

pub const VERSION: &str = "\
Usage: ptyd version [--json]

Prints the binary's version and the versions of what it speaks: the client
protocol, the live-upgrade handoff and the snapshot format.
";

pub const SHELL_INIT: &str = "\
Usage: ptyd shell-init bash|zsh|fish

Prints ptyd's shell integration for the shell: hooks that report each
prompt (OSC 133;A), the start of input (B) and of a command (C), the
command's exit status (D;STATUS) and the working directory (OSC 7). They
make `ptyd send --wait` and `ptyd wait --prompt/--command-finished` work.

Shells ptyd starts (bash, zsh, fish run as interactive shells, without a
script or -c) load them on their own, without touching your files: bash
through --rcfile (a file that runs your ~/.bashrc, or for a login shell
your profile files, first), zsh through ZDOTDIR, fish through
XDG_DATA_DIRS. Turn that off with `ptyd new --no-shell-integration` or
\"shell_integration\": false in the config file.

For other shells (ssh from a pane, a shell inside a container), load them
yourself, in the rc file or at the prompt:
  bash:  eval \"$(ptyd shell-init bash)\"
  zsh:   eval \"$(ptyd shell-init zsh)\"
  fish:  ptyd shell-init fish | source
";
