//! Terminal modes a program sets and an attaching client must get back:
//! input modes (cursor keys, keypad, paste, mouse, focus, keyboard
//! protocols) and screen modes (insert, origin, autowrap, cursor).
//!
//! Kept as plain fields and two small enums rather than a bitset so the JSON
//! capture is readable and `redraw` can walk them one by one. The kitty
//! keyboard stack is capped (`KITTY_STACK_MAX`): kitty itself caps it, and a
//! program pushing in a loop must not grow the daemon.

use serde::{Deserialize, Serialize};

/// Deepest kitty keyboard stack kept; pushing beyond drops the oldest entry.
pub const KITTY_STACK_MAX: usize = 16;

/// Serialized snake_case, as the rest of the API (`"off"`, `"x10"`, ...);
/// the variant names older builds wrote (`"Off"`) still read, in snapshots
/// and from an older server's handoff.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseMode {
    #[default]
    #[serde(alias = "Off")]
    Off,
    /// 9: press only.
    #[serde(alias = "X10")]
    X10,
    /// 1000: press and release.
    #[serde(alias = "Normal")]
    Normal,
    /// 1002: plus motion while a button is held.
    #[serde(alias = "Button")]
    Button,
    /// 1003: all motion.
    #[serde(alias = "Any")]
    Any,
}

impl MouseMode {
    pub fn from_raw(mode: u16) -> Option<MouseMode> {
        Some(match mode {
            9 => MouseMode::X10,
            1000 => MouseMode::Normal,
            1002 => MouseMode::Button,
            1003 => MouseMode::Any,
            _ => return None,
        })
    }
    pub fn raw(self) -> Option<u16> {
        match self {
            MouseMode::Off => None,
            MouseMode::X10 => Some(9),
            MouseMode::Normal => Some(1000),
            MouseMode::Button => Some(1002),
            MouseMode::Any => Some(1003),
        }
    }
}

/// Serialized snake_case (`"default"`, `"utf8"`, `"sgr"`, `"urxvt"`);
/// older builds' `"Default"` ... still read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseEncoding {
    #[default]
    #[serde(alias = "Default")]
    Default,
    /// 1005
    #[serde(alias = "Utf8")]
    Utf8,
    /// 1006
    #[serde(alias = "Sgr")]
    Sgr,
    /// 1015
    #[serde(alias = "Urxvt")]
    Urxvt,
}

impl MouseEncoding {
    pub fn from_raw(mode: u16) -> Option<MouseEncoding> {
        Some(match mode {
            1005 => MouseEncoding::Utf8,
            1006 => MouseEncoding::Sgr,
            1015 => MouseEncoding::Urxvt,
            _ => return None,
        })
    }
    pub fn raw(self) -> Option<u16> {
        match self {
            MouseEncoding::Default => None,
            MouseEncoding::Utf8 => Some(1005),
            MouseEncoding::Sgr => Some(1006),
            MouseEncoding::Urxvt => Some(1015),
        }
    }
}

/// All modes. Public fields: this is also the JSON shape of `ModeSummary`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modes {
    pub app_cursor_keys: bool,
    pub app_keypad: bool,
    pub bracketed_paste: bool,
    pub focus_reporting: bool,
    pub synchronized_output: bool,
    pub mouse: MouseMode,
    pub mouse_encoding: MouseEncoding,
    /// 1007: wheel sends arrow keys on the alternate screen.
    pub alternate_scroll: bool,
    pub insert: bool,
    /// LNM (20): LF also returns the carriage.
    pub newline: bool,
    pub origin: bool,
    pub autowrap: bool,
    pub cursor_visible: bool,
    pub cursor_blink: bool,
    /// DECSCUSR parameter: 0 default, 1/2 block, 3/4 underline, 5/6 bar.
    pub cursor_style: u8,
    pub alt_screen: bool,
    /// Kitty keyboard flags when the stack is empty.
    pub kitty_base: u8,
    /// Kitty keyboard stack, newest last; the top is the active flags.
    pub kitty_stack: Vec<u8>,
    /// modifyOtherKeys level (0, 1, 2).
    pub modify_other_keys: u8,
}

impl Default for Modes {
    fn default() -> Modes {
        Modes {
            app_cursor_keys: false,
            app_keypad: false,
            bracketed_paste: false,
            focus_reporting: false,
            synchronized_output: false,
            mouse: MouseMode::Off,
            mouse_encoding: MouseEncoding::Default,
            alternate_scroll: false,
            insert: false,
            newline: false,
            origin: false,
            autowrap: true,
            cursor_visible: true,
            cursor_blink: false,
            cursor_style: 0,
            alt_screen: false,
            kitty_base: 0,
            kitty_stack: Vec::new(),
            modify_other_keys: 0,
        }
    }
}

impl Modes {
    pub fn kitty_flags(&self) -> u8 {
        self.kitty_stack.last().copied().unwrap_or(self.kitty_base)
    }

    pub fn kitty_push(&mut self, flags: u8) {
        if self.kitty_stack.len() >= KITTY_STACK_MAX {
            self.kitty_stack.remove(0);
        }
        self.kitty_stack.push(flags);
    }

    pub fn kitty_pop(&mut self, n: usize) {
        let keep = self.kitty_stack.len().saturating_sub(n);
        self.kitty_stack.truncate(keep);
    }

    /// `mode`: 1 replace, 2 set bits, 3 clear bits.
    pub fn kitty_set(&mut self, flags: u8, mode: u8) {
        let top = match self.kitty_stack.last_mut() {
            Some(top) => top,
            None => &mut self.kitty_base,
        };
        *top = match mode {
            2 => *top | flags,
            3 => *top & !flags,
            _ => flags,
        };
    }

    /// State of a private mode for DECRQM: `Some(true)` set, `Some(false)`
    /// reset, `None` not recognised.
    pub fn private_mode(&self, mode: u16) -> Option<bool> {
        Some(match mode {
            1 => self.app_cursor_keys,
            6 => self.origin,
            7 => self.autowrap,
            12 => self.cursor_blink,
            25 => self.cursor_visible,
            9 | 1000 | 1002 | 1003 => self.mouse.raw() == Some(mode),
            1004 => self.focus_reporting,
            1005 | 1006 | 1015 => self.mouse_encoding.raw() == Some(mode),
            1007 => self.alternate_scroll,
            47 | 1047 | 1049 => self.alt_screen,
            2004 => self.bracketed_paste,
            2026 => self.synchronized_output,
            66 => self.app_keypad,
            _ => return None,
        })
    }

    /// State of an ANSI mode for DECRQM.
    pub fn ansi_mode(&self, mode: u16) -> Option<bool> {
        match mode {
            4 => Some(self.insert),
            20 => Some(self.newline),
            _ => None,
        }
    }
}
