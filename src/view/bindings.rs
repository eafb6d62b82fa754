//! The keys of the tab view: what the key after the prefix does, and the
//! state the keyboard is in (typing into the focused pane, the prefix
//! pressed, a question asked, a line being typed for a prompt).
//!
//! Defaults are tmux's under its prefix; `[keys]` in config.toml binds a
//! key name to an action name, or to `"none"` to unbind it. A key bound to
//! nothing is said so on the message line and changes nothing else: it
//! never detaches, never reaches the pane.

use super::chooser::{Choice, Chooser, Target};
use super::geometry::Dir;
use super::prompt::{Edit, Line, Purpose};
use std::collections::BTreeMap;

/// How far PageUp and PageDown move in the chooser.
const CHOOSER_PAGE: usize = 10;

/// The actions without an argument (the others: a direction, a tab number).
const FIXED_ACTIONS: [Action; 16] = [
    Action::SplitRight,
    Action::SplitDown,
    Action::FocusNext,
    Action::Zoom,
    Action::Close,
    Action::NewTab,
    Action::NextTab,
    Action::PrevTab,
    Action::RenameTab,
    Action::Detach,
    Action::Scroll,
    Action::ScrollPageUp,
    Action::ListKeys,
    Action::SendPrefix,
    Action::CommandPrompt,
    Action::ChooseTree,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A new pane beside the focused one (tmux `%`).
    SplitRight,
    /// A new pane below the focused one (tmux `"`).
    SplitDown,
    Focus(Dir),
    /// The next pane in layout order (tmux `o`).
    FocusNext,
    Zoom,
    /// Close the focused pane, once confirmed.
    Close,
    NewTab,
    NextTab,
    PrevTab,
    /// The tab numbered so on the status line.
    SelectTab(usize),
    RenameTab,
    Detach,
    Scroll,
    /// Scroll mode, a page up at once (PageUp after the prefix).
    ScrollPageUp,
    /// Move the focused pane's border that way.
    Resize(Dir),
    ListKeys,
    /// The prefix key itself, to the pane.
    SendPrefix,
    /// A ptyd command line, run against the view (`:`).
    CommandPrompt,
    /// The chooser over workspaces, tabs and panes (`w`).
    ChooseTree,
}

const DIRS: [(Dir, &str); 4] = [
    (Dir::Left, "left"),
    (Dir::Right, "right"),
    (Dir::Up, "up"),
    (Dir::Down, "down"),
];

impl Action {
    /// The name `[keys]` uses.
    pub fn name(self) -> String {
        let dir = |d: Dir| DIRS.iter().find(|(x, _)| *x == d).map_or("", |(_, n)| n);
        match self {
            Action::SplitRight => "split-right".into(),
            Action::SplitDown => "split-down".into(),
            Action::Focus(d) => format!("focus-{}", dir(d)),
            Action::FocusNext => "focus-next".into(),
            Action::Zoom => "zoom".into(),
            Action::Close => "close-pane".into(),
            Action::NewTab => "new-tab".into(),
            Action::NextTab => "next-tab".into(),
            Action::PrevTab => "previous-tab".into(),
            Action::SelectTab(n) => format!("select-tab-{n}"),
            Action::RenameTab => "rename-tab".into(),
            Action::Detach => "detach".into(),
            Action::Scroll => "scroll".into(),
            Action::ScrollPageUp => "scroll-page-up".into(),
            Action::Resize(d) => format!("resize-{}", dir(d)),
            Action::ListKeys => "list-keys".into(),
            Action::SendPrefix => "send-prefix".into(),
            Action::CommandPrompt => "command-prompt".into(),
            Action::ChooseTree => "choose-tree".into(),
        }
    }

    pub fn parse(name: &str) -> Option<Action> {
        if let Some(a) = FIXED_ACTIONS.into_iter().find(|a| a.name() == name) {
            return Some(a);
        }
        if let Some(n) = name.strip_prefix("select-tab-") {
            return n.parse().ok().filter(|n| *n < 1000).map(Action::SelectTab);
        }
        DIRS.iter().find_map(|(d, n)| {
            if name == format!("focus-{n}") {
                Some(Action::Focus(*d))
            } else if name == format!("resize-{n}") {
                Some(Action::Resize(*d))
            } else {
                None
            }
        })
    }
}

/// Key names to actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bindings {
    keys: BTreeMap<String, Action>,
}

impl Default for Bindings {
    fn default() -> Bindings {
        let mut keys = BTreeMap::new();
        let mut bind = |k: &str, a| {
            keys.insert(k.to_string(), a);
        };
        bind("%", Action::SplitRight);
        bind("\"", Action::SplitDown);
        for (d, n) in [
            (Dir::Left, "Left"),
            (Dir::Right, "Right"),
            (Dir::Up, "Up"),
            (Dir::Down, "Down"),
        ] {
            bind(n, Action::Focus(d));
            bind(&format!("C-{n}"), Action::Resize(d));
        }
        bind("o", Action::FocusNext);
        bind("z", Action::Zoom);
        bind("x", Action::Close);
        bind("c", Action::NewTab);
        bind("n", Action::NextTab);
        bind("p", Action::PrevTab);
        for n in 0..10 {
            bind(&n.to_string(), Action::SelectTab(n));
        }
        bind(",", Action::RenameTab);
        bind("d", Action::Detach);
        bind("[", Action::Scroll);
        bind("PageUp", Action::ScrollPageUp);
        bind("?", Action::ListKeys);
        bind(":", Action::CommandPrompt);
        bind("w", Action::ChooseTree);
        Bindings { keys }
    }
}

impl Bindings {
    /// The defaults with `[keys]` applied (key name = action name, or
    /// `"none"`); `Err` names every entry that is not understood.
    pub fn with(overrides: &BTreeMap<String, String>) -> Result<Bindings, Vec<String>> {
        let mut b = Bindings::default();
        let mut bad = Vec::new();
        for (key, action) in overrides {
            let Some(name) = normalize_key_name(key) else {
                bad.push(format!(
                    "[keys] {key:?}: not a key name (a character, C-x, M-x, Left, C-Up, PageUp, F1...)"
                ));
                continue;
            };
            if action == "none" {
                b.keys.remove(&name);
                continue;
            }
            match Action::parse(action) {
                Some(a) => {
                    b.keys.insert(name, a);
                }
                None => bad.push(format!(
                    "[keys] {key:?} = {action:?}: no such action; the actions are {}",
                    all_action_names().join(", ")
                )),
            }
        }
        if bad.is_empty() { Ok(b) } else { Err(bad) }
    }

    pub fn lookup(&self, key: &str) -> Option<Action> {
        self.keys.get(key).copied()
    }

    /// `KEY  action` lines, for the key list.
    pub fn list(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|(k, a)| format!("{k:<8} {}", a.name()))
            .collect()
    }
}

fn all_action_names() -> Vec<String> {
    let mut names: Vec<String> = FIXED_ACTIONS.iter().map(|a| a.name()).collect();
    for (_, n) in DIRS {
        names.push(format!("focus-{n}"));
        names.push(format!("resize-{n}"));
    }
    names.push("select-tab-N".into());
    names
}

/// A key name as `[keys]` may spell it, in the form `key_at` gives.
fn normalize_key_name(key: &str) -> Option<String> {
    let named = [
        "Left", "Right", "Up", "Down", "PageUp", "PageDown", "Home", "End", "Enter", "Tab",
        "BSpace", "Escape", "Space",
    ];
    let (mods, base) = match key
        .rsplit_once('-')
        .filter(|(m, b)| !b.is_empty() && !m.is_empty())
    {
        Some((m, b)) if m.split('-').all(|x| matches!(x, "C" | "M" | "S")) => (m, b),
        _ => ("", key),
    };
    let base_ok = named.contains(&base)
        || (base.chars().count() == 1 && !base.chars().all(char::is_control))
        || (base.starts_with('F') && base[1..].parse::<u8>().is_ok_and(|n| (1..=12).contains(&n)));
    if !base_ok {
        return None;
    }
    Some(if mods.is_empty() {
        base.to_string()
    } else {
        format!("{mods}-{base}")
    })
}

/// The name of the key at the start of `bytes` and how many bytes it
/// takes; `None` for an empty slice. Unknown escape sequences are named
/// by their bytes, never bound.
pub fn key_at(bytes: &[u8]) -> Option<(String, usize)> {
    let &b = bytes.first()?;
    if b == 0x1b {
        return Some(escape_key(bytes));
    }
    let name = match b {
        0x00 => "C-Space".to_string(),
        0x09 => "Tab".to_string(),
        0x0d => "Enter".to_string(),
        0x7f => "BSpace".to_string(),
        0x01..=0x1a => format!("C-{}", (b + 0x60) as char),
        0x1c => "C-\\".to_string(),
        0x1d => "C-]".to_string(),
        0x1e => "C-^".to_string(),
        0x1f => "C-_".to_string(),
        b' ' => "Space".to_string(),
        _ => {
            let len = utf8_len(b).min(bytes.len());
            let ch = std::str::from_utf8(&bytes[..len])
                .ok()
                .and_then(|s| s.chars().next());
            return Some((
                ch.map_or_else(|| format!("\\x{b:02x}"), String::from),
                len.max(1),
            ));
        }
    };
    Some((name, 1))
}

fn utf8_len(b: u8) -> usize {
    match b {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

fn escape_key(bytes: &[u8]) -> (String, usize) {
    let Some(&second) = bytes.get(1) else {
        return ("Escape".into(), 1);
    };
    if second != b'[' && second != b'O' {
        // Alt and a key.
        if let Some((inner, used)) = key_at(&bytes[1..])
            && second != 0x1b
        {
            return (format!("M-{inner}"), used + 1);
        }
        return ("Escape".into(), 1);
    }
    // CSI or SS3: parameters, then a final byte in 0x40..=0x7e.
    let Some(end) = bytes[2..].iter().position(|b| (0x40..=0x7e).contains(b)) else {
        return ("Escape".into(), 1);
    };
    let used = end + 3;
    let params = std::str::from_utf8(&bytes[2..2 + end]).unwrap_or("");
    let fin = bytes[2 + end];
    let mut parts = params.split(';');
    let first = parts.next().unwrap_or("");
    let modifier: u8 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(1);
    let base = match (fin, first) {
        (b'A', _) => "Up",
        (b'B', _) => "Down",
        (b'C', _) => "Right",
        (b'D', _) => "Left",
        (b'H', _) => "Home",
        (b'F', _) => "End",
        (b'~', "5") => "PageUp",
        (b'~', "6") => "PageDown",
        (b'~', "1" | "7") => "Home",
        (b'~', "4" | "8") => "End",
        _ => {
            let raw: String = bytes[1..used]
                .iter()
                .map(|b| (*b as char).escape_default().to_string())
                .collect();
            return (format!("Escape {raw}"), used);
        }
    };
    let bits = modifier.saturating_sub(1);
    let mut name = String::new();
    if bits & 4 != 0 {
        name.push_str("C-");
    }
    if bits & 2 != 0 {
        name.push_str("M-");
    }
    if bits & 1 != 0 {
        name.push_str("S-");
    }
    name.push_str(base);
    (name, used)
}

/// What the keyboard is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Mode {
    /// Keys go to the focused pane.
    #[default]
    Typing,
    /// The prefix came: the next key is a binding's.
    Prefix,
    /// A yes/no question for `action` (`y` confirms).
    Confirm(Action),
    /// A line being typed (a tab's new name, a command).
    Prompt { purpose: Purpose, line: Line },
    /// The chooser is shown and takes the keys.
    Choose(Box<Chooser>),
}

/// What a run of typed bytes asks for, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Bytes for the focused pane.
    Typed(Vec<u8>),
    Run(Action),
    /// A key after the prefix that is bound to nothing: its name.
    Unbound(String),
    /// The question was answered yes.
    Confirmed(Action),
    /// The question or prompt was dismissed.
    Cancelled,
    /// The prompt's text changed, or the chooser moved (to draw it).
    Edited,
    /// The prompt's line was entered.
    PromptDone(Purpose, String),
    /// A line of the chooser was picked.
    Chosen(Target),
    /// A mouse report (SGR encoding) from the client's terminal.
    Mouse(MouseEvent),
}

/// One SGR mouse report: `CSI < button ; x ; y M` (press, motion) or `m`
/// (release); `x` and `y` zero-based here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MouseEvent {
    pub button: u16,
    pub x: u16,
    pub y: u16,
    pub release: bool,
}

impl MouseEvent {
    /// A press of the left button (not motion, not the wheel).
    pub fn is_left_press(&self) -> bool {
        !self.release && self.button & !(4 | 8 | 16) == 0
    }

    /// The report at `(x, y)` in the encoding a program asked for (`sgr`,
    /// else the X10 one, which reaches column 223 at most).
    pub fn encode(&self, x: u16, y: u16, sgr: bool) -> Vec<u8> {
        if sgr {
            let end = if self.release { 'm' } else { 'M' };
            return format!("\x1b[<{};{};{}{end}", self.button, x + 1, y + 1).into_bytes();
        }
        let button = if self.release { 3 } else { self.button };
        let byte = |v: u16| (v.min(222) + 33) as u8;
        vec![
            0x1b,
            b'[',
            b'M',
            (button.min(222) + 32) as u8,
            byte(x),
            byte(y),
        ]
    }
}

/// An SGR mouse report at the start of `bytes`, and its length.
pub fn mouse_at(bytes: &[u8]) -> Option<(MouseEvent, usize)> {
    let rest = bytes.strip_prefix(b"\x1b[<")?;
    let end = rest.iter().position(|b| *b == b'M' || *b == b'm')?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    let mut nums = text.split(';').map(|n| n.parse::<u16>().ok());
    let (button, x, y) = (nums.next()??, nums.next()??, nums.next()??);
    if nums.next().is_some() || x == 0 || y == 0 {
        return None;
    }
    let event = MouseEvent {
        button,
        x: x - 1,
        y: y - 1,
        release: rest[end] == b'm',
    };
    Some((event, 3 + end + 1))
}

/// Runs `bytes` through the keyboard state `mode`, with `prefix` as the
/// prefix key.
pub fn feed(mode: &mut Mode, bytes: &[u8], prefix: u8, bindings: &Bindings) -> Vec<Out> {
    let mut out = Vec::new();
    let mut typed = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match mode {
            Mode::Typing => {
                let b = bytes[i];
                if let Some((event, used)) = mouse_at(&bytes[i..]) {
                    if !typed.is_empty() {
                        out.push(Out::Typed(std::mem::take(&mut typed)));
                    }
                    out.push(Out::Mouse(event));
                    i += used;
                    continue;
                }
                if b == prefix {
                    *mode = Mode::Prefix;
                } else {
                    typed.push(b);
                }
                i += 1;
                continue;
            }
            _ if !typed.is_empty() => out.push(Out::Typed(std::mem::take(&mut typed))),
            _ => {}
        }
        let Some((key, used)) = key_at(&bytes[i..]) else {
            break;
        };
        i += used;
        match mode {
            Mode::Typing => {}
            Mode::Prefix => {
                *mode = Mode::Typing;
                if bytes[i - used] == prefix && used == 1 {
                    out.push(Out::Run(Action::SendPrefix));
                    continue;
                }
                match bindings.lookup(&key) {
                    Some(a) => out.push(Out::Run(a)),
                    None => out.push(Out::Unbound(key)),
                }
            }
            Mode::Confirm(a) => {
                let a = *a;
                *mode = Mode::Typing;
                out.push(if key == "y" || key == "Y" {
                    Out::Confirmed(a)
                } else {
                    Out::Cancelled
                });
            }
            Mode::Prompt { purpose, line } => match line.key(&key) {
                Edit::Done(text) => {
                    out.push(Out::PromptDone(*purpose, text));
                    *mode = Mode::Typing;
                }
                Edit::Cancelled => {
                    *mode = Mode::Typing;
                    out.push(Out::Cancelled);
                }
                Edit::Changed => out.push(Out::Edited),
                Edit::Ignored => {}
            },
            Mode::Choose(chooser) => match chooser.key(&key, CHOOSER_PAGE) {
                Choice::Chosen(target) => {
                    *mode = Mode::Typing;
                    out.push(Out::Chosen(target));
                }
                Choice::Left => {
                    *mode = Mode::Typing;
                    out.push(Out::Cancelled);
                }
                Choice::Moved => out.push(Out::Edited),
                Choice::Ignored => {}
            },
        }
    }
    if !typed.is_empty() {
        out.push(Out::Typed(typed));
    }
    out
}

/// How a prefix byte is named on the message line (`C-\`).
pub fn prefix_name(prefix: u8) -> String {
    key_at(&[prefix]).map_or_else(|| format!("\\x{prefix:02x}"), |(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_as_tmux_names_them() {
        assert_eq!(key_at(b"%x"), Some(("%".into(), 1)));
        assert_eq!(key_at(b"\x1b[D"), Some(("Left".into(), 3)));
        assert_eq!(key_at(b"\x1bOA"), Some(("Up".into(), 3)));
        assert_eq!(key_at(b"\x1b[1;5C"), Some(("C-Right".into(), 6)));
        assert_eq!(key_at(b"\x1b[5~"), Some(("PageUp".into(), 4)));
        assert_eq!(key_at(b"\x1b"), Some(("Escape".into(), 1)));
        assert_eq!(key_at(b"\x1bx"), Some(("M-x".into(), 2)));
        assert_eq!(key_at(b"\x1c"), Some(("C-\\".into(), 1)));
        assert_eq!(key_at("é".as_bytes()), Some(("é".into(), 2)));
        assert_eq!(key_at(b"\xff"), Some(("\\xff".into(), 1)));
    }

    #[test]
    fn the_prefix_runs_bindings_and_unbound_keys_only_say_so() {
        let b = Bindings::default();
        let mut m = Mode::Typing;
        let out = feed(&mut m, b"ls\x1c%echo", 0x1c, &b);
        assert_eq!(
            out,
            vec![
                Out::Typed(b"ls".to_vec()),
                Out::Run(Action::SplitRight),
                Out::Typed(b"echo".to_vec())
            ]
        );
        // The prefix alone waits for the next read.
        assert_eq!(feed(&mut m, b"\x1c", 0x1c, &b), vec![]);
        assert_eq!(m, Mode::Prefix);
        assert_eq!(feed(&mut m, b"q", 0x1c, &b), vec![Out::Unbound("q".into())]);
        assert_eq!(m, Mode::Typing);
        assert_eq!(
            feed(&mut m, b"\x1c\x1c\x1c\x1b[1;5A", 0x1c, &b),
            vec![
                Out::Run(Action::SendPrefix),
                Out::Run(Action::Resize(Dir::Up))
            ]
        );
        m = Mode::Confirm(Action::Close);
        assert_eq!(
            feed(&mut m, b"y", 0x1c, &b),
            vec![Out::Confirmed(Action::Close)]
        );
        m = Mode::Prompt {
            purpose: Purpose::Command,
            line: Line::default(),
        };
        let out = feed(&mut m, b"ab\x7fc\x1b[Dx\r", 0x1c, &b);
        assert_eq!(
            out.last(),
            Some(&Out::PromptDone(Purpose::Command, "axc".into()))
        );
        assert_eq!(m, Mode::Typing);
    }

    #[test]
    fn mouse_reports_are_taken_out_of_what_is_typed() {
        let b = Bindings::default();
        let mut m = Mode::Typing;
        let out = feed(&mut m, b"a\x1b[<0;70;5Mb\x1b[<0;70;5m", 0x1c, &b);
        let press = MouseEvent {
            button: 0,
            x: 69,
            y: 4,
            release: false,
        };
        assert_eq!(
            out,
            vec![
                Out::Typed(b"a".to_vec()),
                Out::Mouse(press),
                Out::Typed(b"b".to_vec()),
                Out::Mouse(MouseEvent {
                    release: true,
                    ..press
                }),
            ]
        );
        assert!(press.is_left_press());
        assert_eq!(press.encode(9, 4, true), b"\x1b[<0;10;5M");
        assert_eq!(press.encode(9, 4, false), b"\x1b[M *%");
        // Not a whole report: typed as it is.
        assert_eq!(
            feed(&mut m, b"\x1b[<0;7", 0x1c, &b),
            vec![Out::Typed(b"\x1b[<0;7".to_vec())]
        );
    }

    #[test]
    fn config_rebinds_unbinds_and_names_what_it_does_not_understand() {
        let mut o = BTreeMap::new();
        o.insert("|".to_string(), "split-right".to_string());
        o.insert("x".to_string(), "none".to_string());
        o.insert("C-h".to_string(), "focus-left".to_string());
        let b = Bindings::with(&o).unwrap();
        assert_eq!(b.lookup("|"), Some(Action::SplitRight));
        assert_eq!(b.lookup("x"), None);
        assert_eq!(b.lookup("C-h"), Some(Action::Focus(Dir::Left)));
        o.insert("q".to_string(), "explode".to_string());
        o.insert("NoSuchKey".to_string(), "zoom".to_string());
        let err = Bindings::with(&o).unwrap_err();
        assert_eq!(err.len(), 2, "{err:?}");
        assert!(
            err.iter()
                .any(|e| e.contains("explode") && e.contains("split-right"))
        );
    }
}
