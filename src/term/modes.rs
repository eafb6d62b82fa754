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
    /// DECLRMM (69): DECSLRM sets left and right margins.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lr_margins: bool,
    /// 45: backspace at the left margin goes up to the end of a row that
    /// wrapped onto this one.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reverse_wrap: bool,
    /// 1045: as 45, from any row, and from the top margin to the bottom.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reverse_wrap_ext: bool,
    /// Private modes a program may set and read back (DECRQM) that change
    /// nothing the model draws: how the client's terminal shows or sends
    /// things (reverse video, smooth scroll, keypad, backarrow, ...).
    /// Sorted, only the set ones, only those in `REMEMBERED`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other: Vec<u16>,
    /// The same for ANSI modes (KAM 2, SRM 12).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_ansi: Vec<u16>,
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// Private modes kept in `Modes::other`: those xterm lets a program set
/// and read back that change nothing the model draws, only how the
/// client's terminal shows or reads things: DECCOLM 3 (it clears the
/// screen but the pane keeps its width), DECSCLM 4, DECSCNM 5, DECPFF 18,
/// DECPEX 19, DECHEBM 35, 40 (allow 80/132), 41 (more fix), DECNRCM 42,
/// 44 (margin bell), DECBKM 67, 1010/1011 (scroll on output/key) and
/// 1034..1043 (meta and keyboard details).
pub const REMEMBERED: &[u16] = &[
    3, 4, 5, 18, 19, 35, 40, 41, 42, 44, 67, 1010, 1011, 1034, 1035, 1036, 1037, 1039, 1040, 1041,
    1042, 1043,
];
/// ANSI modes kept in `Modes::other_ansi`: KAM, SRM.
pub const REMEMBERED_ANSI: &[u16] = &[2, 12];
/// ANSI modes DECRQM reports as permanently reset (4): GATM, SRTM, VEM,
/// HEM, PUM, FEAM, FETM, MATM, TTM, SATM, TSM, EBM.
const PERMANENTLY_RESET_ANSI: &[u16] = &[1, 5, 7, 10, 11, 13, 14, 15, 16, 17, 18, 19];

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
            lr_margins: false,
            reverse_wrap: false,
            reverse_wrap_ext: false,
            other: Vec::new(),
            other_ansi: Vec::new(),
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

    /// Sets or resets a mode of `REMEMBERED` (`ansi`: of
    /// `REMEMBERED_ANSI`); false, doing nothing, for any other.
    pub fn set_other(&mut self, ansi: bool, mode: u16, on: bool) -> bool {
        let (known, list) = if ansi {
            (REMEMBERED_ANSI, &mut self.other_ansi)
        } else {
            (REMEMBERED, &mut self.other)
        };
        if !known.contains(&mode) {
            return false;
        }
        match (list.binary_search(&mode), on) {
            (Err(at), true) => list.insert(at, mode),
            (Ok(at), false) => {
                list.remove(at);
            }
            _ => {}
        }
        true
    }

    /// DECRPM's state for a private mode: 1 set, 2 reset, 0 not recognised.
    pub fn private_state(&self, mode: u16) -> u8 {
        match self.private_mode(mode) {
            Some(true) => 1,
            Some(false) => 2,
            // DECHCCM: the cursor is never coupled to a page.
            None if mode == 60 => 4,
            None if REMEMBERED.contains(&mode) => {
                if self.other.binary_search(&mode).is_ok() {
                    1
                } else {
                    2
                }
            }
            None => 0,
        }
    }

    /// DECRPM's state for an ANSI mode: 1 set, 2 reset, 4 permanently
    /// reset, 0 not recognised.
    pub fn ansi_state(&self, mode: u16) -> u8 {
        match self.ansi_mode(mode) {
            Some(true) => 1,
            Some(false) => 2,
            None if REMEMBERED_ANSI.contains(&mode) => {
                if self.other_ansi.binary_search(&mode).is_ok() {
                    1
                } else {
                    2
                }
            }
            None if PERMANENTLY_RESET_ANSI.contains(&mode) => 4,
            None => 0,
        }
    }

    /// State of a private mode for DECRQM: `Some(true)` set, `Some(false)`
    /// reset, `None` not recognised.
    pub fn private_mode(&self, mode: u16) -> Option<bool> {
        Some(match mode {
            45 => self.reverse_wrap,
            69 => self.lr_margins,
            1045 => self.reverse_wrap_ext,
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
