//! `vte::ansi::Handler` for `Screen`: the one place vte's decoded callbacks
//! meet the model. Each method is a thin mapping onto `screen/` operations
//! or onto `queries.rs` for requests the server answers itself.
//!
//! Query methods call `Screen::reply`, which also marks the sequence being
//! dispatched as swallowed so `Terminal::feed` drops it from `forward`.

use vte::ansi::{
    Attr, CharsetIndex, ClearMode, Color as VColor, CursorShape, CursorStyle, Handler,
    KeyboardModes, KeyboardModesApplyBehavior, LineClearMode, Mode, ModifyOtherKeys, NamedMode,
    PrivateMode, StandardCharset, TabulationClearMode,
};

use super::TermEvent;
use super::cell::{BLINK, BOLD, Color, DIM, HIDDEN, INVERSE, ITALIC, Link, STRIKE};
use super::modes::{MouseEncoding, MouseMode};
use super::queries;
use super::screen::{Charset, MAX_TITLE, Screen};

fn convert_color(c: VColor) -> Color {
    match c {
        VColor::Named(n) => {
            let i = n as usize;
            if i < 16 {
                Color::Indexed(i as u8)
            } else {
                Color::Default
            }
        }
        VColor::Indexed(i) => Color::Indexed(i),
        VColor::Spec(rgb) => Color::Rgb(rgb.r, rgb.g, rgb.b),
    }
}

fn raw_private(mode: PrivateMode) -> u16 {
    mode.raw()
}

impl Screen {
    pub(super) fn set_private(&mut self, raw: u16, on: bool) {
        let m = &mut self.modes;
        match raw {
            1 => m.app_cursor_keys = on,
            6 => {
                m.origin = on;
                self.goto(0, 0);
            }
            7 => m.autowrap = on,
            12 => m.cursor_blink = on,
            25 => m.cursor_visible = on,
            66 => m.app_keypad = on,
            1004 => m.focus_reporting = on,
            1007 => m.alternate_scroll = on,
            2004 => m.bracketed_paste = on,
            2026 => m.synchronized_output = on,
            3 => {
                m.set_other(false, 3, on);
                self.deccolm();
            }
            45 => m.reverse_wrap = on,
            1045 => m.reverse_wrap_ext = on,
            69 => {
                m.lr_margins = on;
                if !on {
                    self.lr = None;
                }
            }
            47 | 1047 | 1049 => self.set_alt_screen(on, raw),
            1048 => {
                if on {
                    self.save_cursor()
                } else {
                    self.restore_cursor()
                }
            }
            _ if m.set_other(false, raw, on) => {}
            _ => {
                if let Some(mouse) = MouseMode::from_raw(raw) {
                    if on {
                        m.mouse = mouse;
                    } else if m.mouse == mouse {
                        m.mouse = MouseMode::Off;
                    }
                } else if let Some(enc) = MouseEncoding::from_raw(raw) {
                    if on {
                        m.mouse_encoding = enc;
                    } else if m.mouse_encoding == enc {
                        m.mouse_encoding = MouseEncoding::Default;
                    }
                }
            }
        }
    }
}

impl Handler for Screen {
    fn set_hyperlink(&mut self, link: Option<vte::ansi::Hyperlink>) {
        self.pen_extra.set_link(link.map(|l| Link {
            id: l.id,
            uri: l.uri,
        }));
    }

    fn set_title(&mut self, title: Option<String>) {
        let mut t = title.unwrap_or_default();
        if let Some((cut, _)) = t.char_indices().nth(MAX_TITLE) {
            t.truncate(cut);
        }
        if t != self.title {
            self.title = t.clone();
        }
        self.push_event(TermEvent::Title(t));
    }

    fn set_cursor_style(&mut self, style: Option<CursorStyle>) {
        self.modes.cursor_style = match style {
            None => 0,
            Some(CursorStyle { shape, blinking }) => {
                let base = match shape {
                    CursorShape::Underline => 3,
                    CursorShape::Beam => 5,
                    _ => 1,
                };
                if blinking { base } else { base + 1 }
            }
        };
    }

    #[inline]
    fn input(&mut self, c: char) {
        self.print(c);
    }

    fn goto(&mut self, line: i32, col: usize) {
        Screen::goto(self, i64::from(line), col.min(u16::MAX as usize) as i64);
    }

    fn goto_line(&mut self, line: i32) {
        self.goto_row(i64::from(line));
    }

    fn goto_col(&mut self, col: usize) {
        Screen::goto_col(self, col.min(u16::MAX as usize) as i64);
    }

    fn insert_blank(&mut self, n: usize) {
        self.insert_blanks(n);
    }

    fn move_up(&mut self, n: usize) {
        Screen::move_up(self, n);
    }

    fn move_down(&mut self, n: usize) {
        Screen::move_down(self, n);
    }

    fn identify_terminal(&mut self, intermediate: Option<char>) {
        match intermediate {
            None => {
                let r = queries::da1(self.conformance());
                self.reply(&r);
            }
            Some('>') => {
                let r = queries::da2(self.conformance());
                self.reply(&r);
            }
            _ => {}
        }
    }

    fn device_status(&mut self, arg: usize) {
        match arg {
            5 => self.reply(b"\x1b[0n"),
            6 => {
                let r = queries::cursor_position_report(self);
                self.reply(&r);
            }
            _ => {}
        }
    }

    fn move_forward(&mut self, n: usize) {
        Screen::move_forward(self, n);
    }

    fn move_backward(&mut self, n: usize) {
        Screen::move_backward(self, n);
    }

    fn move_down_and_cr(&mut self, n: usize) {
        Screen::move_down(self, n);
        self.carriage_return();
    }

    fn move_up_and_cr(&mut self, n: usize) {
        Screen::move_up(self, n);
        self.carriage_return();
    }

    fn put_tab(&mut self, count: u16) {
        self.tab_forward(usize::from(count));
    }

    fn backspace(&mut self) {
        Screen::backspace(self);
    }

    fn carriage_return(&mut self) {
        Screen::carriage_return(self);
    }

    fn linefeed(&mut self) {
        Screen::linefeed(self);
    }

    fn bell(&mut self) {
        self.push_event(TermEvent::Bell);
    }

    fn set_horizontal_tabstop(&mut self) {
        let col = self.cursor.col;
        if let Some(t) = self.tabs.get_mut(col) {
            *t = true;
        }
    }

    fn scroll_up(&mut self, n: usize) {
        Screen::scroll_up(self, n);
    }

    fn scroll_down(&mut self, n: usize) {
        Screen::scroll_down(self, n);
    }

    fn insert_blank_lines(&mut self, n: usize) {
        self.insert_lines(n);
    }

    fn delete_lines(&mut self, n: usize) {
        Screen::delete_lines(self, n);
    }

    fn erase_chars(&mut self, n: usize) {
        if self.protect_iso {
            self.selective_erase_chars(n);
        } else {
            Screen::erase_chars(self, n);
        }
    }

    fn delete_chars(&mut self, n: usize) {
        Screen::delete_chars(self, n);
    }

    fn move_backward_tabs(&mut self, count: u16) {
        self.tab_backward(usize::from(count));
    }

    fn move_forward_tabs(&mut self, count: u16) {
        self.tab_forward(usize::from(count));
    }

    fn save_cursor_position(&mut self) {
        self.save_cursor();
    }

    fn restore_cursor_position(&mut self) {
        self.restore_cursor();
    }

    fn clear_line(&mut self, mode: LineClearMode) {
        let mode = match mode {
            LineClearMode::Right => 0,
            LineClearMode::Left => 1,
            LineClearMode::All => 2,
        };
        self.erase_line_mode(mode);
    }

    fn clear_screen(&mut self, mode: ClearMode) {
        let (row, col) = (self.cursor.row, self.cursor.col);
        if self.protect_iso {
            // Guarded areas (SPA ... EPA) survive ED, as in xterm.
            match mode {
                ClearMode::Below => return self.selective_erase_display(0),
                ClearMode::Above => return self.selective_erase_display(1),
                ClearMode::All => return self.selective_erase_display(2),
                ClearMode::Saved => {}
            }
        }
        match mode {
            ClearMode::Below => {
                self.erase_in_line(col, usize::MAX);
                self.erase_rows(row + 1, usize::MAX);
            }
            ClearMode::Above => {
                self.erase_rows(0, row);
                self.erase_in_line(0, col + 1);
            }
            ClearMode::All => self.erase_rows(0, usize::MAX),
            ClearMode::Saved => {
                if !self.modes.alt_screen {
                    self.scrollback.clear();
                }
            }
        }
    }

    fn clear_tabs(&mut self, mode: TabulationClearMode) {
        match mode {
            TabulationClearMode::Current => {
                let col = self.cursor.col;
                if let Some(t) = self.tabs.get_mut(col) {
                    *t = false;
                }
            }
            TabulationClearMode::All => self.tabs.fill(false),
        }
    }

    fn set_tabs(&mut self, interval: u16) {
        let interval = usize::from(interval.max(1));
        for (i, t) in self.tabs.iter_mut().enumerate() {
            *t = i != 0 && i % interval == 0;
        }
    }

    fn reset_state(&mut self) {
        self.reset();
    }

    fn reverse_index(&mut self) {
        Screen::reverse_index(self);
    }

    fn terminal_attribute(&mut self, attr: Attr) {
        let p = &mut self.pen;
        match attr {
            Attr::Reset => {
                *p = Default::default();
                self.pen_extra.ul = 0;
            }
            Attr::Bold => p.fg |= BOLD,
            Attr::Dim => p.fg |= DIM,
            Attr::Italic => p.fg |= ITALIC,
            Attr::Underline => p.set_underline(1),
            Attr::DoubleUnderline => p.set_underline(2),
            Attr::Undercurl => p.set_underline(3),
            Attr::DottedUnderline => p.set_underline(4),
            Attr::DashedUnderline => p.set_underline(5),
            Attr::BlinkSlow | Attr::BlinkFast => p.fg |= BLINK,
            Attr::Reverse => p.fg |= INVERSE,
            Attr::Hidden => p.fg |= HIDDEN,
            Attr::Strike => p.bg |= STRIKE,
            Attr::CancelBold => p.fg &= !BOLD,
            Attr::CancelBoldDim => p.fg &= !(BOLD | DIM),
            Attr::CancelItalic => p.fg &= !ITALIC,
            Attr::CancelUnderline => p.set_underline(0),
            Attr::CancelBlink => p.fg &= !BLINK,
            Attr::CancelReverse => p.fg &= !INVERSE,
            Attr::CancelHidden => p.fg &= !HIDDEN,
            Attr::CancelStrike => p.bg &= !STRIKE,
            Attr::Foreground(c) => p.set_fg(convert_color(c)),
            Attr::Background(c) => p.set_bg(convert_color(c)),
            Attr::UnderlineColor(c) => self.pen_extra.set_underline_color(c.map(convert_color)),
        }
    }

    fn set_mode(&mut self, mode: Mode) {
        match mode {
            Mode::Named(NamedMode::Insert) => self.modes.insert = true,
            Mode::Named(NamedMode::LineFeedNewLine) => self.modes.newline = true,
            Mode::Unknown(raw) => {
                self.modes.set_other(true, raw, true);
            }
        }
    }

    fn unset_mode(&mut self, mode: Mode) {
        match mode {
            Mode::Named(NamedMode::Insert) => self.modes.insert = false,
            Mode::Named(NamedMode::LineFeedNewLine) => self.modes.newline = false,
            Mode::Unknown(raw) => {
                self.modes.set_other(true, raw, false);
            }
        }
    }

    fn report_mode(&mut self, mode: Mode) {
        let raw = mode.raw();
        let r = queries::decrpm(false, raw, self.modes.ansi_state(raw));
        self.reply(&r);
    }

    fn set_private_mode(&mut self, mode: PrivateMode) {
        self.set_private(raw_private(mode), true);
    }

    fn unset_private_mode(&mut self, mode: PrivateMode) {
        self.set_private(raw_private(mode), false);
    }

    fn report_private_mode(&mut self, mode: PrivateMode) {
        let raw = raw_private(mode);
        let r = queries::decrpm(true, raw, self.modes.private_state(raw));
        self.reply(&r);
    }

    fn set_scrolling_region(&mut self, top: usize, bottom: Option<usize>) {
        self.set_scroll_region(top, bottom);
    }

    fn set_keypad_application_mode(&mut self) {
        self.modes.app_keypad = true;
    }

    fn unset_keypad_application_mode(&mut self) {
        self.modes.app_keypad = false;
    }

    fn set_active_charset(&mut self, index: CharsetIndex) {
        self.active_charset = index as usize;
    }

    fn configure_charset(&mut self, index: CharsetIndex, charset: StandardCharset) {
        self.charsets[index as usize] = match charset {
            StandardCharset::Ascii => Charset::Ascii,
            StandardCharset::SpecialCharacterAndLineDrawing => Charset::DecSpecial,
        };
    }

    fn decaln(&mut self) {
        Screen::decaln(self);
    }

    fn text_area_size_chars(&mut self) {
        let r = queries::text_area_chars(self.rows, self.cols);
        self.reply(&r);
    }

    fn report_keyboard_mode(&mut self) {
        let r = queries::kitty_flags(self.modes.kitty_flags());
        self.reply(&r);
    }

    fn push_keyboard_mode(&mut self, mode: KeyboardModes) {
        self.modes.kitty_push(mode.bits());
    }

    fn pop_keyboard_modes(&mut self, to_pop: u16) {
        self.modes.kitty_pop(usize::from(to_pop));
    }

    fn set_keyboard_mode(&mut self, mode: KeyboardModes, behavior: KeyboardModesApplyBehavior) {
        let how = match behavior {
            KeyboardModesApplyBehavior::Replace => 1,
            KeyboardModesApplyBehavior::Union => 2,
            KeyboardModesApplyBehavior::Difference => 3,
        };
        self.modes.kitty_set(mode.bits(), how);
    }

    fn set_modify_other_keys(&mut self, mode: ModifyOtherKeys) {
        self.modes.modify_other_keys = match mode {
            ModifyOtherKeys::Reset => 0,
            ModifyOtherKeys::EnableExceptWellDefined => 1,
            ModifyOtherKeys::EnableAll => 2,
        };
    }

    fn report_modify_other_keys(&mut self) {
        let r = queries::modify_other_keys(self.modes.modify_other_keys);
        self.reply(&r);
    }
}
