//! The help table's entries for workspaces and tabs, and the commands about ptyd itself: shell
//! integration, completions, the manual, help and the demo.

use super::*;

pub const WORKSPACE: Command = Command {
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
};

pub const TAB: Command = Command {
    name: "tab",
    aliases: &[],
    brief: "tab new|select|rename|rm",
    summary: "open, select and manage tabs",
    usage: &[
        "tab new [-n NAME] [-w W] [-- ARGV...]",
        "tab select T|next|prev|N [-w W]",
        "tab rename [T] NAME",
        "tab rm T [--force]",
    ],
    about: "\
T is a tab id (t3), a tab name, or a pane (its tab); N is a tab's number in
its workspace, from 0. `tab new` opens a tab running ARGV (default: a
shell) in workspace W (default: \"main\") and selects it; it prints the tab
id. `tab select` makes a tab its workspace's active tab and that workspace
the active one; next and prev (and N) count in the active workspace, or in
W. `tab rename` without T renames the tab of the pane this runs in, else
the active tab. Removing a tab removes its panes; running ones need
--force.",
    options: &[
        opt(Some('n'), "name", Some("NAME"), "with new: name the tab"),
        opt(
            Some('w'),
            "workspace",
            Some("W"),
            "with new: open it in workspace W; with select: count N, next, prev in W",
        ),
        opt(Some('f'), "force", None, "with rm: kill running panes"),
        opt(Some('t'), "target", Some("T"), "the tab (same as T)"),
        JSON_REPLY,
    ],
    args: Args::First(Complete::OneOf(&["new", "select", "rename", "rm"])),
    operands: Operands::Any,
    hidden: &[],
};

pub const SHELL_INIT: Command = Command {
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
};

pub const COMPLETIONS: Command = Command {
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
};

pub const MANPAGE: Command = Command {
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
};

pub const HELP: Command = Command {
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
};

pub const DEMO: Command = Command {
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
};
