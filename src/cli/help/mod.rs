//! Every command, its options and its help text, in one table that the
//! parser (`args.rs`), the `--help` output, the shell completions
//! (`completions.rs`) and the man page (`manpage.rs`) all read, so an
//! option exists once and none of them can drift from the others. The
//! entries are in `panes.rs`, `server.rs` and `other.rs` by command group;
//! [`COMMANDS`] lists them in the order of `ptyd --help`.
//!
//! A command's help is rendered from its entry: the usage lines, the prose,
//! then one line per option with its description wrapped to the terminal
//! convention of 79 columns. The overview prints as [`MAIN`].

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
            opt(Some('v'), "vertical", None, "with --split: stack instead of side by side; without: split the current pane (the one this runs in, else the focused pane of the attached client used last, else the active tab's focus) stacked"),
            opt(None, "ratio", Some("R"), "with --split: share kept by TARGET (default 0.5)"),
            opt_of(None, "restore", "POLICY", "after a reboot: rerun, shell or hold (default: restore of config.toml, else hold; plain shells always come back as a fresh shell)", Complete::OneOf(&["rerun", "shell", "hold"])),
            opt(None, "resume", Some("CMD"), "after a reboot run CMD (a shell command) instead"),
            $($more),*
        ]
    };
}

/// `ptyd completions --panes`: what the scripts ask the server for.
const PANES: Opt = opt(None, "panes", None, "print the pane ids and names");

mod layout;
mod other;
mod panes;
mod server;

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
    "rename",
    "workspace",
    "tab",
    "split",
    "select-layout",
    "swap",
    "resize-split",
    "zoom",
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
    server::SERVER,
    panes::NEW,
    panes::LS,
    panes::ATTACH,
    panes::CLIENTS,
    panes::DETACH,
    panes::SEND,
    panes::CAPTURE,
    panes::RUN,
    panes::WAIT,
    panes::KILL,
    panes::RM,
    panes::RESIZE,
    server::EVENTS,
    server::STATUS,
    server::STOP,
    server::SAVE,
    panes::RESPAWN,
    panes::FOCUS,
    panes::RESUME,
    panes::RENAME,
    other::WORKSPACE,
    other::TAB,
    layout::SPLIT,
    layout::SELECT_LAYOUT,
    layout::SWAP,
    layout::RESIZE_SPLIT,
    layout::ZOOM,
    server::UPGRADE,
    server::VERSION,
    server::API,
    other::SHELL_INIT,
    server::SERVICE,
    server::CONFIG,
    other::COMPLETIONS,
    other::MANPAGE,
    other::HELP,
    other::DEMO,
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
