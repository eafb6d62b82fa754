//! The title OSCs and the title stack (XTWINOPS 22/23).

use crate::term::screen::Screen;

/// window title goes through `Handler::set_title` (its event, its limit);
/// forwarded as they are.
pub(super) fn osc_titles(s: &mut Screen, seq: &[u8]) -> bool {
    use vte::ansi::Handler;
    let Some(body) = seq.strip_prefix(b"\x1b]") else {
        return false;
    };
    let body = body
        .strip_suffix(b"\x1b\\")
        .or_else(|| body.strip_suffix(b"\x07"))
        .unwrap_or(body);
    let (which, text) = match body {
        [w @ (b'0' | b'1' | b'2'), b';', text @ ..] => (*w, text),
        _ => return false,
    };
    // As vte reads a title: C0 controls dropped, invalid UTF-8 replaced,
    // surrounding blanks trimmed.
    let text: Vec<u8> = text.iter().copied().filter(|&b| b >= 0x20).collect();
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    match which {
        b'0' => {
            s.icon = None;
            s.set_title(Some(text));
        }
        b'1' => s.icon = Some(truncate_title(text)),
        _ => s.set_window_title(text),
    }
    true
}

fn truncate_title(mut t: String) -> String {
    if let Some((cut, _)) = t.char_indices().nth(crate::term::screen::MAX_TITLE) {
        t.truncate(cut);
    }
    t
}

impl Screen {
    /// Sets the window title only: an icon title that followed it keeps
    /// the old one.
    fn set_window_title(&mut self, text: String) {
        use vte::ansi::Handler;
        if self.icon.is_none() {
            self.icon = Some(self.title.clone());
        }
        self.set_title(Some(text));
        if self.icon.as_deref() == Some(self.title.as_str()) {
            self.icon = None;
        }
    }

    /// XTWINOPS 22: pushes the icon and window titles, as one entry of
    /// the two stacks (xterm saves both whatever part the parameter
    /// names); the oldest entry goes past `MAX_TITLE_STACK`.
    pub(super) fn push_titles(&mut self, which: u16) {
        if which > 2 {
            return;
        }
        if self.title_stack.len() >= crate::term::screen::MAX_TITLE_STACK {
            self.title_stack.remove(0);
            self.icon_stack.remove(0);
        }
        let icon = self.icon.clone().unwrap_or_else(|| self.title.clone());
        self.icon_stack.push(icon);
        self.title_stack.push(self.title.clone());
    }

    /// XTWINOPS 23: pops the newest entry, restoring its icon title
    /// (`which` 1), window title (2) or both (0).
    pub(super) fn pop_titles(&mut self, which: u16) {
        if which > 2 {
            return;
        }
        let (Some(window), Some(icon)) = (self.title_stack.pop(), self.icon_stack.pop()) else {
            return;
        };
        if which != 1 {
            self.set_window_title(window);
        }
        if which != 2 {
            self.icon = (icon != self.title).then_some(icon);
        }
    }
}
