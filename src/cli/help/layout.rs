//! The help table's entries for arranging a tab's panes: preset layouts,
//! swaps, split resizes and zoom.

use super::*;

/// The layout names `select-layout` takes, for completion.
const LAYOUTS: &[&str] = &[
    "even-horizontal",
    "even-vertical",
    "main-horizontal",
    "main-vertical",
    "tiled",
    "next",
    "previous",
];

/// `-t TARGET` of the commands that default to the current pane.
const CURRENT: Opt = opt_of(
    Some('t'),
    "target",
    "TARGET",
    "the pane (default: the pane this runs in, else the focused pane of the attached client used last, else the focus of the active tab)",
    Complete::Pane,
);

pub const SPLIT: Command = Command {
    name: "split",
    aliases: &["split-window"],
    brief: "split [-v] [-t T] [-- ARGV...]",
    summary: "open a pane beside the current one",
    usage: &[
        "split [-v] [-t TARGET] [--ratio R] [-n NAME] [-c DIR] [-e K=V]...",
        "      [--shell STR | -- ARGV...]",
    ],
    about: "\
Splits TARGET, side by side or with -v stacked (tmux's split-window -h and
-v), and prints the new pane's id; the new pane is focused. TARGET defaults
to the current pane: the pane this runs in, else the focused pane of the
attached client that typed or resized last, else the focus of the active
tab. The same as `ptyd new -d -s TARGET`; the new pane runs ARGV, STR, or
a shell as `ptyd new` says.",
    options: pane_spec_options![CURRENT, JSON],
    args: Args::First(Complete::CommandLine),
    operands: Operands::Argv,
    hidden: &[],
};

pub const SELECT_LAYOUT: Command = Command {
    name: "select-layout",
    aliases: &["layout"],
    brief: "select-layout [-t T] NAME",
    summary: "arrange a tab's panes in one of tmux's layouts",
    usage: &["select-layout [-t TARGET] NAME"],
    about: "\
Rebuilds the tab's layout from its panes in their order: even-horizontal
(side by side, equal widths), even-vertical (stacked, equal heights),
main-horizontal (the first pane across the top half, the others side by
side below), main-vertical (the first pane down the left half, the others
stacked beside it) or tiled (rows of equal panes); next and previous go
through them in that order, as tmux's next-layout. TARGET is a tab (t2, or
its name) or a pane of it; default: the tab of the pane this runs in, else
the active tab. Focus stays; a zoom ends.",
    options: &[
        opt_of(
            Some('t'),
            "target",
            "TARGET",
            "the tab, or a pane of it",
            Complete::Pane,
        ),
        JSON_REPLY,
    ],
    args: Args::First(Complete::OneOf(LAYOUTS)),
    operands: Operands::Upto(1),
    hidden: &[],
};

pub const SWAP: Command = Command {
    name: "swap",
    aliases: &[],
    brief: "swap A B",
    summary: "exchange two panes' places (in a tab or across tabs)",
    usage: &["swap A B"],
    about: "\
Panes A and B exchange places, in one tab or across two. Within a tab the
focus stays on the pane it was on; a tab whose focused pane left focuses the
one that came in its place.",
    options: &[JSON_REPLY],
    args: Args::First(Complete::Pane),
    operands: Operands::Upto(2),
    hidden: &[],
};

pub const RESIZE_SPLIT: Command = Command {
    name: "resize-split",
    aliases: &[],
    brief: "resize-split [-t T] DIR [N]",
    summary: "move the border beside a pane",
    usage: &["resize-split [-t TARGET] left|right|up|down [N]"],
    about: "\
Moves the border of the split nearest above the pane that lies across the
direction (left, right: a side-by-side split; up, down: a stacked one) by N
cells (default 1) that way. It stops where a pane would get less than 2
columns or 1 row. A zoomed tab is unzoomed first.",
    options: &[CURRENT, JSON_REPLY],
    args: Args::First(Complete::OneOf(&["left", "right", "up", "down"])),
    operands: Operands::Upto(2),
    hidden: &[],
};

pub const ZOOM: Command = Command {
    name: "zoom",
    aliases: &[],
    brief: "zoom [TARGET]",
    summary: "let a pane fill its tab, or end the zoom",
    usage: &[
        "zoom [TARGET] [--on | --off]",
        "zoom [TARGET] --client N [--on | --off]",
    ],
    about: "\
Zooms the pane (it fills its tab and is focused), or unzooms its tab if it
is zoomed, for every attached client showing the tab. TARGET defaults to
the pane this runs in, else the focus of the active tab. A tab of one pane
has nothing to zoom. With --client, only that client's view zooms (or
unzooms), showing the pane's tab focused on it; TARGET defaults to that
client's focus, and the other clients and the tab's own zoom stay.",
    options: &[
        opt(None, "on", None, "zoom, whether or not the tab is zoomed"),
        opt(
            None,
            "off",
            None,
            "unzoom, whether or not the tab is zoomed",
        ),
        opt(
            None,
            "client",
            Some("N"),
            "zoom only the view of the client numbered N (`ptyd clients`)",
        ),
        CURRENT,
        JSON_REPLY,
    ],
    args: Args::First(Complete::Pane),
    operands: Operands::Upto(1),
    hidden: &[],
};
